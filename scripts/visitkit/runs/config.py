"""A run's configuration, checked once where it is built: the iteration and its settings (`RunConfig`),
the Locust side of the load (`LoadPlan`), the warm-up of a local run (`WarmUp`), and the failed run
--resume continues (`resumable`)."""
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Self

from visitkit import suite
from visitkit.catalogue import QUEUE_TIMEOUT_S
from visitkit.errors import RunError
from visitkit.model.capacity import PAGE_REFRESH_SECONDS, Prediction, figure_to_measure, predict
from visitkit.net import free_port
from visitkit.paths import LOCUST_DIR
from visitkit.results import audit
from visitkit.results import folder as results
from visitkit.results.summary import headline_names
from visitkit.results.thresholds import (
    LIVE_COUNTS,
    LIVE_LEVELS,
    Threshold,
    expected_outcome,
    parse_thresholds,
)
from visitkit.settings import Settings, check_invokers, load_settings
from visitkit.twin.chaos import ChaosPlan
from visitkit.twin.profile import Profile, load_profile

TESTS = ("breakpoint", "endurance", "load", "spike")
NODE = LOCUST_DIR / "node.py"
MAX_LOCAL_WORKERS = 64
MAX_FLEET_WORKERS = 100  # worker VMs (infra/loadgen checks the same bound)
LOCAL_WAIT_WORKERS_S = 60  # for the local workers to connect to their master
STAGES = {"local": LOCUST_DIR / "stages" / "endurance-local.csv",
          "remote": LOCUST_DIR / "stages" / "endurance-study.csv"}
DEFAULT_BREAKPOINT_SECONDS = 300  # the study's shortest breakpoint run (5 min)
STOP_TIMEOUT_S = 30  # users finish their current page (3 requests) when the load ends
MAX_RETRY_VISITS = 5  # --retry-visits: the visitor waits 1, 2, 4 ... s (with jitter), or what Retry-After asks
ARRIVALS = suite.locust_module("arrivals")  # the open model's defaults and the stages' unit
# The shape settings that count users: an open-model shape sizes its users itself (arrival_users_max caps them).
USER_SETTINGS = ("max_users", "spawn_rate", "users_scale", "warmup_users", "plateau_users", "base_users",
                 "spike_users", "spike_rate")
# Google's Firestore and Pub/Sub are always warm; the emulators are JVMs that start cold and spend
# several times more CPU per request until they have compiled their hot paths (docs/local-twin.md),
# so a local test starts after a warm-up of real visits: WARM_UP_SHARE of the knee predicted on this
# machine (busy, without a queue), reached at WARM_UP_SPAWN_RATE and held for WARM_UP_S.
WARM_UP_S = 45.0
WARM_UP_SHARE = 0.6
WARM_UP_SPAWN_RATE = 20.0
WARM_UP_DIR = "warm-up"


def parse_duration(text: str | float | None) -> float | None:
    """'90', '90s', '5m', '1h30m' -> seconds."""
    if text is None:
        return None
    total, digits = 0.0, ""
    for char in str(text).strip():
        if char.isdigit() or char == ".":
            digits += char
        elif char in "hms" and digits:
            total += float(digits) * {"h": 3600, "m": 60, "s": 1}[char]
            digits = ""
        else:
            raise RunError(f"cannot read duration {text!r} (e.g. 90s, 5m, 1h30m)")
    return total + (float(digits) if digits else 0.0)


def shape_settings(shape_set: str) -> dict[str, str]:
    """--shape-set's settings by key, the last of each (a later key wins in locust/shapes.py)."""
    return {key.strip(): value.strip() for key, _, value in (kv.partition("=") for kv in shape_set.split(",")
                                                              if kv.strip())}


@dataclass(frozen=True)
class Arrivals:
    """An open-model load (locust/arrivals.py): visits arrive at a rate in visits/s whatever the latency,
    paced, with users added as needed up to users_max; an arrival no user was free for is not started."""
    rate: float | None = None  # load: visits/s held
    ramp_per_s: float | None = None  # breakpoint: + visits/s each second; endurance: the change between stages
    start: float | None = None  # breakpoint: the ramp's first rate, visits/s
    stages: bool = False  # endurance: its stages are in visits/s
    users_max: int = ARRIVALS.USERS_MAX
    gaps: str = ARRIVALS.EVEN  # evenly spaced, or "random" (Poisson): --shape-set arrival_gaps

    @classmethod
    def build(cls, test: str, shape_set: str, stages: str | None, rate: float | None = None,
              ramp: float | None = None, start: float | None = None) -> tuple[str, Self | None]:
        """(the shape settings with the arrival options in them, the open model or None: users). The options
        and their --shape-set keys (arrival_rate, arrival_ramp, arrival_start) are one setting each."""
        given = shape_settings(shape_set)
        values = {"arrival_rate": rate, "arrival_ramp": ramp, "arrival_start": start}
        for key, value in values.items():
            option = "--" + key.replace("_", "-")
            try:
                in_set = float(given[key]) if key in given else None
            except ValueError:
                raise RunError(f"--shape-set {key}={given[key]}: a number of visits/s") from None
            if value is not None and in_set is not None and in_set != value:
                raise RunError(f"{option} {value:g} and --shape-set {key}={given[key]} disagree: give it once")
            if value is not None and in_set is None:
                shape_set = ",".join(filter(None, [shape_set, f"{key}={value:g}"]))
            values[key] = value if value is not None else in_set
        rate, ramp, start = values.values()
        try:
            in_visits = test == "endurance" and bool(stages) and ARRIVALS.parse_stages(stages)[0]
        except ValueError as error:
            raise RunError(f"--stages: {error}") from None
        if rate is None and ramp is None and not in_visits:
            if start is not None:
                raise RunError("--arrival-start is where an --arrival-ramp starts: give both (--test breakpoint)")
            return shape_set, None
        if test == "spike" or (rate is not None and test != "load"):
            raise RunError("arrivals at a rate: --arrival-rate R holds R visits/s with --test load, --arrival-ramp R "
                           "raises it with --test breakpoint, an endurance test gives its stages in visits/s "
                           "(locust/README.md); the spike test is in users only")
        if ramp is not None and not (test == "breakpoint" or in_visits):
            raise RunError("--arrival-ramp raises the rate with --test breakpoint (or between endurance stages in "
                           "visits/s); --test load holds one (--arrival-rate)")
        if start is not None and test != "breakpoint":
            raise RunError("--arrival-start is where a breakpoint's --arrival-ramp starts")
        if (rate is not None and rate <= 0) or (ramp is not None and ramp <= 0) or (start is not None and start < 0):
            raise RunError("--arrival-rate and --arrival-ramp must be above 0 visits/s, --arrival-start 0 or more")
        users = [key for key in USER_SETTINGS if key in given]
        if users:
            raise RunError(f"an open-model load sizes its users to the rate: leave out --shape-set {', '.join(users)} "
                           "(arrival_users_max caps them)")
        try:
            users_max = int(given.get("arrival_users_max", ARRIVALS.USERS_MAX))
        except ValueError:
            users_max = 0
        if users_max < 1:
            raise RunError("--shape-set arrival_users_max: a number of users, 1 or more")
        gaps = given.get("arrival_gaps", ARRIVALS.EVEN)
        if gaps not in ARRIVALS.GAPS:
            raise RunError(f"--shape-set arrival_gaps={gaps}: {' or '.join(ARRIVALS.GAPS)} (evenly spaced, or a "
                           "Poisson process)")
        if test == "breakpoint" and start is None:
            start = ARRIVALS.RAMP_START
        return shape_set, cls(rate, ramp, start, in_visits, users_max, gaps)

    def describe(self) -> str:
        if self.rate is not None:
            asked = f"{self.rate:g} visits/s held"
        elif self.start is not None:
            asked = f"from {self.start:g} visits/s, +{self.ramp_per_s:g} visits/s each second"
        else:
            asked = "the stages in visits/s" + (f", changing by {self.ramp_per_s:g} visits/s each second between "
                                                "them" if self.ramp_per_s else ", each reached at once")
        spacing = "paced (evenly spaced)" if self.gaps == ARRIVALS.EVEN else "at random (a Poisson process)"
        return (f"open model: {asked}, {spacing}; users added as the rate and the visits' duration "
                f"ask, at most {self.users_max:,}; an arrival with no user free in time is not started (counted)")

    def record(self) -> dict[str, Any]:
        """run.json's `arrivals`: the plan, as results/arrivals.py reads it."""
        return {"rate": self.rate, "ramp_per_s": self.ramp_per_s, "start": self.start, "stages": self.stages,
                "users_max": self.users_max, "gaps": self.gaps}


@dataclass(frozen=True)
class LoadPlan:
    """The Locust side of a run: the test's shape and its settings, and the Locust processes."""
    test: str
    seconds: float | None = None  # a cap on the load; None: the shape's own length
    shape_set: str = ""  # "k=v,k=v" as locust/shapes.py reads it
    stages: str | None = None  # endurance stages: a CSV file or "users:hold_s,..."
    processes: int | None = None  # Locust's own --processes (one command, forked workers)
    retry_visits: int = 0  # how often a visit with a 429, a 5xx or no answer is posted again (same visit id)
    workers: int | None = None  # distributed mode: a master and this many workers, each started by locust/node.py
    dwell: float = 0.0  # > 0: readers who keep each page open this many seconds (locust/locustfile.py's Reader)
    counter_ttl: float = 0.0  # with a dwell: get-counter's cache TTL, which the page's re-reads wait at least
    arrivals: Arrivals | None = None  # the open model: a rate in visits/s (None: users, the closed model)
    ledger_ids: int | None = None  # Locust's --ledger-ids: the most visit ids kept (None: its default, 2,000,000)

    @property
    def load_model(self) -> str:
        """run.json's `load_model`: "open" (arrivals at a rate) or "closed" (users who wait for each answer)."""
        return "open" if self.arrivals else "closed"

    @classmethod
    def build(cls, test: str, duration: str | float | None = None, shape_set: str = "", stages: str | None = None,
              processes: int | None = None, local: bool = True, retry_visits: int | None = 0,
              workers: int | None = None, dwell: float | None = 0.0, counter_ttl: float | None = 0.0,
              arrival_rate: float | None = None, arrival_ramp: float | None = None,
              arrival_start: float | None = None, ledger_ids: int | None = None) -> Self:
        if test not in TESTS:
            raise RunError(f"--test must be one of {', '.join(TESTS)}, not {test!r}")
        seconds = parse_duration(duration)
        # a duration_s in --shape-set is the run's length too (it feeds the timeout and progress)
        given = [kv.split("=", 1)[1] for kv in shape_set.split(",") if kv.strip().startswith("duration_s=")]
        if seconds is None and given:
            seconds = parse_duration(given[-1])
        elif seconds is None and test == "breakpoint":
            seconds = DEFAULT_BREAKPOINT_SECONDS
        if seconds is not None and not (given and seconds == parse_duration(given[-1])):
            # a later key wins in locust/shapes.py, so --duration beats a duration_s in --shape-set
            shape_set = ",".join(filter(None, [shape_set, f"duration_s={seconds:g}"]))
        if test == "endurance" and not stages:
            stages = str(STAGES["local" if local else "remote"])
        elif stages and Path(stages).is_file():
            stages = str(Path(stages).resolve())  # Locust and the shape may start elsewhere
        if processes is not None and processes < 1:
            raise RunError("--processes must be 1 or more")
        if workers is not None and processes is not None:
            raise RunError("--workers and --processes are two ways to spread Locust: choose one")
        if workers is not None and not 1 <= workers <= (MAX_LOCAL_WORKERS if local else MAX_FLEET_WORKERS):
            raise RunError(f"--workers must be 1 to {MAX_LOCAL_WORKERS if local else MAX_FLEET_WORKERS}"
                           + ("" if local else " (worker VMs)"))
        if not 0 <= (retry_visits or 0) <= MAX_RETRY_VISITS:
            raise RunError(f"--retry-visits must be 0 to {MAX_RETRY_VISITS}")
        if (dwell or 0) < 0:
            raise RunError("--dwell must be 0 seconds (the study's visitor) or more")
        if ledger_ids is not None and ledger_ids < 1:
            raise RunError("--ledger-ids must be 1 or more")
        dwell = float(dwell or 0)
        shape_set, arrivals = Arrivals.build(test, shape_set, stages, arrival_rate, arrival_ramp, arrival_start)
        if arrivals and dwell:
            raise RunError("--dwell runs readers, users who stay; arrivals at a rate make the study's visit: "
                           "choose one")
        return cls(test, seconds, shape_set, stages, processes, retry_visits or 0, workers, dwell,
                   float(counter_ttl or 0) if dwell else 0.0, arrivals, ledger_ids)

    def describe(self) -> str:
        stages = ""
        if self.stages:
            stages = f", stages from {Path(self.stages).name if Path(self.stages).exists() else self.stages}"
        return (f"{self.test} {self.shape_set}{stages}"
                + (f", {self.processes} Locust processes" if self.processes else "")
                + (f", Locust distributed: a master and {self.workers} workers" if self.workers else "")
                + (f", visits retried up to {self.retry_visits} times" if self.retry_visits else "")
                + (f", readers keep each page open {self.dwell:g} s, re-reading its count every "
                   f"{max(PAGE_REFRESH_SECONDS, self.counter_ttl):g} s (the longer of the page's "
                   f"{PAGE_REFRESH_SECONDS:g} s refresh and the {self.counter_ttl:g} s cache TTL) plus jitter"
                   if self.dwell else "")
                + (f", {self.arrivals.describe()}" if self.arrivals else "")
                + (f", at most {self.ledger_ids:,} visit ids kept (a uniform sample of a larger plan)"
                   if self.ledger_ids else "")
                + (", the rate split evenly among the Locust worker processes"
                   if self.arrivals and (self.workers or self.processes) else ""))

    def options(self, base_url: str, target_args: Iterable[str] = (),
                stages: str | None = None) -> list[tuple[str, str | int | None]]:
        """The test's Locust options as [(option, value; None for a flag)], the same for one process
        and for a distributed run's run.conf; `stages`: where the stages file is for this run."""
        options: list[tuple[str, str | int | None]] = [
            ("--headless", None), ("--host", base_url), ("--shape", self.test), ("--stop-timeout", STOP_TIMEOUT_S),
            ("--only-summary", None), ("--exit-code-on-error", 0)]
        if self.shape_set:
            options.append(("--shape-set", self.shape_set))
        if self.stages:
            options.append(("--stages", stages or self.stages))
        if self.retry_visits:
            options.append(("--retry-visits", self.retry_visits))
        if self.dwell:
            options += [("--dwell", f"{self.dwell:g}"), ("--counter-ttl", f"{self.counter_ttl:g}")]
        if self.ledger_ids is not None:
            options.append(("--ledger-ids", self.ledger_ids))
        target_args = list(target_args)
        for i, arg in enumerate(target_args):
            if arg.startswith("--"):
                value = (target_args[i + 1] if i + 1 < len(target_args) and not target_args[i + 1].startswith("--")
                         else None)
                options.append((arg, value))
        return options

    def locust_command(self, base_url: str, folder: Path, target_args: Iterable[str] = ()) -> list[str]:
        """One Locust command (with --processes, one that forks its workers); target_args: what the
        target needs Locust to send (ID tokens on an authenticated deployment)."""
        command = [sys.executable, "-m", "locust", "-f", str(suite.LOCUSTFILE)]
        for option, value in self.options(base_url, target_args):
            command += [option] if value is None else [option, str(value)]
        command += [part for option, name in suite.OUTPUTS.items() for part in (option, str(folder / name))]
        command += suite.OUTPUT_FLAGS
        if self.processes:
            port = str(free_port())  # never Locust's default 5557: others may run Locust too
            command += ["--processes", str(self.processes), "--master-port", port, "--master-bind-port", port]
        return command

    def planned_seconds(self) -> float | None:
        """How long the load lasts: --duration, or the shape's own length, asked of locust/shapes.py in
        a process of its own (importing Locust here would patch this process's threads with gevent)."""
        if self.seconds is not None:
            return self.seconds
        code = ("import sys, shapes; shape = shapes.make_shape(sys.argv[1], shapes.parse_assignments(sys.argv[2]), "
                "sys.argv[3] or None); print(shape.planned_seconds())")
        found = subprocess.run([sys.executable, "-c", code, self.test, self.shape_set, self.stages or ""],
                               cwd=LOCUST_DIR, capture_output=True, text=True, timeout=60)
        if found.returncode != 0:
            raise RunError(f"the shape's settings are not valid: {found.stderr.strip().splitlines()[-1]}")
        return None if found.stdout.strip() == "None" else float(found.stdout)

    def run_conf(self, base_url: str, target_args: Iterable[str] = (), stages: str | None = None) -> str:
        """The options as a Locust configuration file, which a distributed run's master and workers
        all read (locust/node.py)."""
        lines = ["# The run's Locust options (scripts/run-iteration wrote them; locust/node.py reads them)."]
        for option, value in self.options(base_url, target_args, stages):
            lines.append(f"{option[2:]} = {'true' if value is None else value}")
        return "\n".join(lines) + "\n"

    def node_commands(self, conf: str | Path, out: str | Path, port: int | str, master_host: str = "127.0.0.1",
                      processes: int | None = None, expect_workers: int | None = None,
                      wait_s: float | None = LOCAL_WAIT_WORKERS_S) -> tuple[list[str], list[str]]:
        """(master, worker) command lines of locust/node.py: the master, and one machine's workers."""
        processes = processes or self.workers
        master = [sys.executable, str(NODE), "master", "--config", str(conf), "--out", str(out),
                  "--bind-port", str(port), "--expect-workers", str(expect_workers or processes)]
        if wait_s is not None:  # None: node.py's own default (a fleet's VMs take minutes to start)
            master += ["--wait-workers", str(wait_s)]
        worker = [sys.executable, str(NODE), "worker", "--config", str(conf), "--master-host", master_host,
                  "--master-port", str(port), "--processes", str(processes)]
        return master, worker


@dataclass(frozen=True)
class WarmUp:
    """Real visits before the test (local stack only), with Locust's endurance shape: one stage of
    `users` held `seconds`; its files go to the results folder's warm-up/."""
    users: int
    seconds: float

    def __post_init__(self) -> None:
        if self.users < 1 or self.seconds <= 0:
            raise RunError("a warm-up needs 1 user or more and a duration above 0 (--warm-up 0 skips it)")

    @classmethod
    def build(cls, duration: str | float | None, users: int | None, prediction: Prediction) -> Self | None:
        """From --warm-up and --warm-up-users (None: the defaults); None when the duration is 0."""
        seconds = WARM_UP_S if duration is None else parse_duration(duration)
        if not seconds:
            return None
        if users is None:
            users = max(1, round(WARM_UP_SHARE * figure_to_measure(prediction.as_dict(), "local", "knee_users")))
        return cls(users, seconds)

    def load(self) -> LoadPlan:
        return LoadPlan("endurance", None, f"spawn_rate={WARM_UP_SPAWN_RATE:g}", f"{self.users}:{self.seconds:g}")

    def describe(self) -> str:
        return f"{self.users} users (reached at +{WARM_UP_SPAWN_RATE:g}/s) for {self.seconds:g} s"

    def timeout(self) -> float:
        return self.users / WARM_UP_SPAWN_RATE + self.seconds + STOP_TIMEOUT_S + 120


@dataclass(frozen=True)
class RunConfig:
    """What to run, checked once: the iteration and its settings, the load, the target."""
    iteration_dir: Path
    settings: Settings
    load: LoadPlan
    target: str = "local"  # local, gcp, or a base URL
    convergence_timeout: float | None = None
    queue_timeout: float = QUEUE_TIMEOUT_S
    keep_up: bool = False
    project: str | None = None
    region: str | None = None
    destroy: bool = False
    access: str | None = None  # gcp: "auto", "public" or "authenticated", over the settings file's
    invokers: tuple[str, ...] = ()  # gcp, authenticated: who gets run.invoker (default: the credentials' account)
    impersonate: str | None = None  # gcp, authenticated: mint ID tokens as this service account
    profile: Profile | None = None  # the local twin's latencies, and the capacity model's service times
    chaos: ChaosPlan | None = None  # faults during the load (local only)
    warm_up: WarmUp | None = None  # visits before the test (local only)
    audit: str = "auto"  # how every visit is audited after convergence: visitkit.results.audit.METHODS
    worker_type: str | None = None  # a fleet's worker VMs' machine type (--workers with gcp or a URL)
    keep_fleet: bool = False  # leave the fleet up after the run, to look inside its VMs
    update_readme: bool = False  # point the iteration README's latest-run block at this run (a doc cites it)
    resume: Path | None = None  # gcp: a failed run's results folder, continued after its last finished step
    prediction: Prediction | None = None  # from the settings and the profile, made once here (build)
    thresholds: tuple[Threshold, ...] = ()  # --threshold: on the headline's figures, each checked here (build)
    expect: str | None = None  # --expect: the verdict's outcome the run must reach ("not supported", ...)
    abort_on_fail: bool = False  # stop the load when a threshold judged during it fails (Threshold.live)
    rehearse: str | None = None  # gcp: rehearse the run on this machine, Google stood in for (a scenario's name)

    @classmethod
    def build(cls, iteration_dir: str | Path, test: str, *, target: str = "local", duration: str | float | None = None,
              shape_set: str = "", stages: str | None = None, processes: int | None = None,
              workers: int | None = None, worker_type: str | None = None, profile: str | None = None,
              chaos: str | None = None, warm_up: str | float | None = None, warm_up_users: int | None = None,
              retry_visits: int | None = 0, dwell: float | None = 0.0, arrival_rate: float | None = None,
              arrival_ramp: float | None = None, arrival_start: float | None = None, ledger_ids: int | None = None,
              scaling: str | None = None, **options: Any) -> Self:
        """`profile`: a latency profile's name or file (local only); `chaos`: a chaos plan's text; `arrival_*`: the
        open model (Arrivals); `scaling`: how the twin runs the instances, over the settings file's (local only);
        `options`: the other fields by name (convergence_timeout, project, access, ...)."""
        if target not in ("local", "gcp") and not target.startswith(("http://", "https://")):
            raise RunError(f"--target must be local, gcp or a base URL, not {target!r}")
        if scaling is not None and target != "local":
            raise RunError("--scaling sets how the local twin runs each function's instances: Cloud Run always "
                           "autoscales them between min_instances and max_instances; leave it out with --target gcp "
                           "or a URL")
        if profile not in (None, "none") and target != "local":
            raise RunError("--profile shapes the local twin only: leave it out with --target gcp or a URL")
        if chaos is not None and target != "local":
            raise RunError("--chaos acts on the local stack's processes: use it with --target local")
        if any(options.get(key) for key in ("access", "invokers", "impersonate")) and target != "gcp":
            raise RunError("--access, --invoker and --impersonate shape a Google Cloud deployment: use them with "
                           "--target gcp")
        if options.get("rehearse") is not None:
            if target != "gcp":
                raise RunError("--rehearse rehearses a Google Cloud run: use it with --target gcp")
            if options.get("resume") is not None:
                raise RunError("--rehearse starts over each time: leave --resume out")
        if options.get("resume") is not None:
            if target != "gcp":
                raise RunError("--resume continues a failed Google Cloud run: use it with --target gcp")
            options["resume"] = resumable(options["resume"], Path(iteration_dir).resolve(), test)
        if (warm_up is not None or warm_up_users is not None) and target != "local":
            raise RunError("--warm-up warms the local stack's emulators: Google Cloud runs warm up by themselves")
        iteration_dir = Path(iteration_dir).resolve()
        options["invokers"] = check_invokers(options.get("invokers") or ())
        options["chaos"] = ChaosPlan.parse(chaos) if chaos is not None else None
        if options.get("audit", "auto") not in audit.METHODS:
            raise RunError(f"--audit must be one of {', '.join(audit.METHODS)}")
        options["thresholds"] = parse_thresholds(options.get("thresholds") or (), headline_names())
        options["expect"] = expected_outcome(options.get("expect"))
        if options.get("abort_on_fail"):
            check_abort_on_fail(options["thresholds"], target, workers)
        load = LoadPlan.build(test, duration, shape_set, stages, processes, local=(target == "local"),
                              retry_visits=retry_visits, workers=workers, dwell=dwell, arrival_rate=arrival_rate,
                              arrival_ramp=arrival_ramp, arrival_start=arrival_start, ledger_ids=ledger_ids)
        if worker_type is not None and (workers is None or target == "local"):
            raise RunError("--worker-type is the machine type of a fleet's worker VMs: use it with --workers and "
                           "--target gcp or a URL")
        if workers is not None and target != "local" and not options.get("project"):
            raise RunError("--workers with --target gcp or a URL runs a fleet of VMs: it needs --project")
        options["worker_type"] = worker_type
        if options.get("keep_fleet") and not (workers is not None and target != "local"):
            raise RunError("--keep-fleet keeps a fleet's VMs: use it with --workers and --target gcp or a URL")
        settings, latencies = load_settings(iteration_dir), load_profile(profile if target == "local" else "study")
        if scaling is not None:  # in the settings run.json records: a run says which scaling it used
            settings = settings.with_scaling(scaling)
        if options["chaos"] is not None:  # a pull store has no push delivery to kill (ChaosPlan.for_settings)
            options["chaos"] = options["chaos"].for_settings(settings)
        if load.dwell:  # the readers' re-reads wait at least get-counter's cache TTL, as the page's do
            load = replace(load, counter_ttl=float(settings.cache_ttl_seconds))
        queue_timeout = options.get("queue_timeout", cls.queue_timeout)
        # The run's readers (the study's visitor, or readers who stay `dwell` s); the warm-up's are visitors.
        options["prediction"] = predict(settings, latencies, queue_timeout, dwell_s=load.dwell)
        if target == "local":
            options["warm_up"] = WarmUp.build(warm_up, warm_up_users, predict(settings, latencies, queue_timeout)
                                              if load.dwell else options["prediction"])
        return cls(iteration_dir, settings, load, target, profile=latencies, **options)

    @property
    def target_kind(self) -> str:
        return self.target if self.target in ("local", "gcp") else "url"

    @property
    def on_fleet(self) -> bool:
        """Locust runs on a fleet of VMs in Google Cloud (infra/loadgen)."""
        return bool(self.load.workers) and self.target != "local"


def check_abort_on_fail(thresholds: Iterable[Threshold], target: str, workers: int | None) -> None:
    """--abort-on-fail needs a threshold the load's own figures judge, and Locust's files on this machine."""
    if not any(threshold.live for threshold in thresholds):
        live = ", ".join(name + "*" * name.endswith(".") for name in (*LIVE_COUNTS, *LIVE_LEVELS))
        raise RunError("--abort-on-fail stops the load when a threshold judged during it fails: give one with <, <= "
                       f"or == on {live} (the others are judged at the end)")
    if workers is not None and target != "local":
        raise RunError("--abort-on-fail reads Locust's figures on this machine: a fleet's are on its VMs")


def resumable(results_dir: str | Path, iteration_dir: Path, test: str) -> Path:
    """A results folder --resume can continue: a run of the same iteration and test."""
    folder = results.ResultsFolder(Path(results_dir).resolve())
    record = folder.run()  # RunError where it is not a results folder
    if record.get("iteration") != iteration_dir.name or record.get("test") != test:
        raise RunError(f"{folder.path} holds a {record.get('test')} run of {record.get('iteration')}: resume it with "
                       "that iteration and --test")
    if record.get("target") != "gcp":
        raise RunError(f"{folder.path} is not a Google Cloud run: only those can be resumed")
    return folder.path

"""One iteration's experiment loop, as named steps: start the target -> totals before -> Locust
headless (the platform sampled every second) -> poll stored totals until they reach before +
acknowledged -> (the platform's own metrics) -> stop the target -> report.

`RunConfig` holds everything a run needs, checked once where it is built; `plan(config)` gives
the steps, which `run(config)` runs and `--dry-run` prints.
"""
import csv
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from visitkit.results import analysis, audit, folder as results
from visitkit import settle, suite
from visitkit.twin.chaos import Chaos, ChaosPlan
from visitkit.errors import RunError
from visitkit.formatting import percent
from visitkit.catalogue import QUEUE_TIMEOUT_S
from visitkit.net import free_port
from visitkit.paths import INFRA_DIR, LOCUST_DIR, ROOT
from visitkit.runs.progress import Progress
from visitkit.model.capacity import PAGE_REFRESH_SECONDS, figure_to_measure, predict
from visitkit.twin.profile import load_profile
from visitkit.settings import DEPLOYED_ACCESS_MODES, check_invokers, load_settings
from visitkit.results.summary import headline_table, model_for_load
from visitkit.steps import Step, plan_lines, run_steps

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
SETTLE_POLLS = 5  # after converging, keep polling this many seconds to see duplicates arrive
MIN_CONVERGENCE_WAIT_S = 120
# Google's Firestore and Pub/Sub are always warm; the emulators are JVMs that start cold and spend
# several times more CPU per request until they have compiled their hot paths (docs/local-twin.md),
# so a local test starts after a warm-up of real visits: WARM_UP_SHARE of the knee predicted on this
# machine (busy, without a queue), reached at WARM_UP_SPAWN_RATE and held for WARM_UP_S.
WARM_UP_S = 45.0
WARM_UP_SHARE = 0.6
WARM_UP_SPAWN_RATE = 20.0
WARM_UP_DIR = "warm-up"


def parse_duration(text):
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


@dataclass(frozen=True)
class LoadPlan:
    """The Locust side of a run: the test's shape and its settings, and the Locust processes."""
    test: str
    seconds: float = None  # a cap on the load; None: the shape's own length
    shape_set: str = ""  # "k=v,k=v" as locust/shapes.py reads it
    stages: str = None  # endurance stages: a CSV file or "users:hold_s,..."
    processes: int = None  # Locust's own --processes (one command, forked workers)
    retry_visits: int = 0  # how often a visit with a 429, a 5xx or no answer is posted again (same visit id)
    workers: int = None  # distributed mode: a master and this many workers, each started by locust/node.py
    dwell: float = 0.0  # > 0: readers who keep each page open this many seconds (locust/locustfile.py's Reader)
    counter_ttl: float = 0.0  # with a dwell: get-counter's cache TTL, which the page's re-reads wait at least

    @classmethod
    def build(cls, test, duration=None, shape_set="", stages=None, processes=None, local=True, retry_visits=0,
              workers=None, dwell=0.0, counter_ttl=0.0):
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
        dwell = float(dwell or 0)
        return cls(test, seconds, shape_set, stages, processes, retry_visits or 0, workers, dwell,
                   float(counter_ttl or 0) if dwell else 0.0)

    def describe(self):
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
                   if self.dwell else ""))

    def options(self, base_url, target_args=(), stages=None):
        """The test's Locust options as [(option, value; None for a flag)], the same for one process
        and for a distributed run's run.conf; `stages`: where the stages file is for this run."""
        options = [("--headless", None), ("--host", base_url), ("--shape", self.test), ("--stop-timeout", STOP_TIMEOUT_S), ("--only-summary", None), ("--exit-code-on-error", 0)]
        if self.shape_set:
            options.append(("--shape-set", self.shape_set))
        if self.stages:
            options.append(("--stages", stages or self.stages))
        if self.retry_visits:
            options.append(("--retry-visits", self.retry_visits))
        if self.dwell:
            options += [("--dwell", f"{self.dwell:g}"), ("--counter-ttl", f"{self.counter_ttl:g}")]
        target_args = list(target_args)
        for i, arg in enumerate(target_args):
            if arg.startswith("--"):
                value = target_args[i + 1] if i + 1 < len(target_args) and not target_args[i + 1].startswith("--") else None
                options.append((arg, value))
        return options

    def locust_command(self, base_url, folder, target_args=()):
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

    def planned_seconds(self):
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

    def run_conf(self, base_url, target_args=(), stages=None):
        """The options as a Locust configuration file, which a distributed run's master and workers
        all read (locust/node.py)."""
        lines = ["# The run's Locust options (scripts/run-iteration wrote them; locust/node.py reads them)."]
        for option, value in self.options(base_url, target_args, stages):
            lines.append(f"{option[2:]} = {'true' if value is None else value}")
        return "\n".join(lines) + "\n"

    def node_commands(self, conf, out, port, master_host="127.0.0.1", processes=None, expect_workers=None,
                      wait_s=LOCAL_WAIT_WORKERS_S):
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

    def __post_init__(self):
        if self.users < 1 or self.seconds <= 0:
            raise RunError("a warm-up needs 1 user or more and a duration above 0 (--warm-up 0 skips it)")

    @classmethod
    def build(cls, duration, users, prediction):
        """From --warm-up and --warm-up-users (None: the defaults); None when the duration is 0."""
        seconds = WARM_UP_S if duration is None else parse_duration(duration)
        if not seconds:
            return None
        if users is None:
            users = max(1, round(WARM_UP_SHARE * figure_to_measure(prediction.as_dict(), "local", "knee_users")))
        return cls(users, seconds)

    def load(self):
        return LoadPlan("endurance", None, f"spawn_rate={WARM_UP_SPAWN_RATE:g}", f"{self.users}:{self.seconds:g}")

    def describe(self):
        return f"{self.users} users (reached at +{WARM_UP_SPAWN_RATE:g}/s) for {self.seconds:g} s"

    def timeout(self):
        return self.users / WARM_UP_SPAWN_RATE + self.seconds + STOP_TIMEOUT_S + 120


@dataclass(frozen=True)
class RunConfig:
    """What to run, checked once: the iteration and its settings, the load, the target."""
    iteration_dir: Path
    settings: object  # settings.Settings
    load: LoadPlan
    target: str = "local"  # local, gcp, or a base URL
    convergence_timeout: float = None
    queue_timeout: float = QUEUE_TIMEOUT_S
    keep_up: bool = False
    project: str = None
    region: str = None
    destroy: bool = False
    access: str = None  # gcp: "auto", "public" or "authenticated", over the settings file's
    invokers: tuple = ()  # gcp, authenticated: who gets run.invoker (default: the credentials' account)
    impersonate: str = None  # gcp, authenticated: mint ID tokens as this service account
    profile: object = None  # profile.Profile: the local twin's latencies, and the capacity model's service times
    chaos: object = None  # chaos.ChaosPlan: faults during the load (local only)
    warm_up: WarmUp = None  # visits before the test (local only)
    audit: str = "auto"  # how every visit is audited after convergence: visitkit.results.audit.METHODS
    worker_type: str = None  # a fleet's worker VMs' machine type (--workers with gcp or a URL)
    keep_fleet: bool = False  # leave the fleet up after the run, to look inside its VMs
    update_readme: bool = False  # point the iteration README's latest-run block at this run (a doc cites it)
    resume: Path = None  # gcp: a failed run's results folder, continued after its last finished step
    prediction: object = None  # predict.Prediction from the settings and the profile, made once here

    @classmethod
    def build(cls, iteration_dir, test, *, target="local", duration=None, shape_set="", stages=None,
              processes=None, workers=None, worker_type=None, profile=None, chaos=None, warm_up=None,
              warm_up_users=None, retry_visits=0, dwell=0.0, **options):
        if target not in ("local", "gcp") and not target.startswith(("http://", "https://")):
            raise RunError(f"--target must be local, gcp or a base URL, not {target!r}")
        if profile not in (None, "none") and target != "local":
            raise RunError("--profile shapes the local twin only: leave it out with --target gcp or a URL")
        if chaos is not None and target != "local":
            raise RunError("--chaos acts on the local stack's processes: use it with --target local")
        if any(options.get(key) for key in ("access", "invokers", "impersonate")) and target != "gcp":
            raise RunError("--access, --invoker and --impersonate shape a Google Cloud deployment: use them with "
                           "--target gcp")
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
        load = LoadPlan.build(test, duration, shape_set, stages, processes, local=(target == "local"),
                              retry_visits=retry_visits, workers=workers, dwell=dwell)
        if worker_type is not None and (workers is None or target == "local"):
            raise RunError("--worker-type is the machine type of a fleet's worker VMs: use it with --workers and "
                           "--target gcp or a URL")
        if workers is not None and target != "local" and not options.get("project"):
            raise RunError("--workers with --target gcp or a URL runs a fleet of VMs: it needs --project")
        options["worker_type"] = worker_type
        if options.get("keep_fleet") and not (workers is not None and target != "local"):
            raise RunError("--keep-fleet keeps a fleet's VMs: use it with --workers and --target gcp or a URL")
        settings, profile = load_settings(iteration_dir), load_profile(profile if target == "local" else "study")
        if load.dwell:  # the readers' re-reads wait at least get-counter's cache TTL, as the page's do
            load = replace(load, counter_ttl=float(settings.cache_ttl_seconds))
        queue_timeout = options.get("queue_timeout", cls.queue_timeout)
        # The run's readers (the study's visitor, or readers who stay `dwell` s); the warm-up's are visitors.
        options["prediction"] = predict(settings, profile, queue_timeout, dwell_s=load.dwell)
        if target == "local":
            options["warm_up"] = WarmUp.build(warm_up, warm_up_users, predict(settings, profile, queue_timeout)
                                              if load.dwell else options["prediction"])
        return cls(iteration_dir, settings, load, target, profile=profile, **options)

    @property
    def target_kind(self):
        return self.target if self.target in ("local", "gcp") else "url"

    @property
    def on_fleet(self):
        """Locust runs on a fleet of VMs in Google Cloud (infra/loadgen)."""
        return bool(self.load.workers) and self.target != "local"


def resumable(results_dir, iteration_dir, test):
    """A results folder --resume can continue: a run of the same iteration and test."""
    folder = results.ResultsFolder(Path(results_dir).resolve())
    record = folder.run()  # RunError where it is not a results folder
    if record.get("iteration") != iteration_dir.name or record.get("test") != test:
        raise RunError(f"{folder.path} holds a {record.get('test')} run of {record.get('iteration')}: resume it with "
                       "that iteration and --test")
    if record.get("target") != "gcp":
        raise RunError(f"{folder.path} is not a Google Cloud run: only those can be resumed")
    return folder.path


def make_fleet(config, folder):
    """The run's Locust fleet on Google Cloud, or None; builds it without contacting anything."""
    if not config.on_fleet:
        return None
    from visitkit.benchmarks import loadgen
    from visitkit.cloud.fleet import Fleet

    access = config.access or config.settings.access if config.target == "gcp" else "public"
    return Fleet(config.project, config.region, config.load.workers, config.worker_type, access, folder.name,
                 loadgen_record=loadgen.latest()[1])


def make_target(config, folder):
    """The target object for a config; builds it without starting or contacting anything."""
    if config.target == "local":
        from visitkit.runs.targets import LocalTarget

        return LocalTarget(config.settings, folder / results.STACK, config.queue_timeout, config.keep_up,
                           config.profile)
    if config.target == "gcp":
        from visitkit.cloud.gcp import GcpTarget

        return GcpTarget(config.settings, config.iteration_dir, config.project, config.region, config.destroy,
                         config.access, config.invokers, config.impersonate)
    from visitkit.runs.targets import UrlTarget

    return UrlTarget(config.target, config.settings)


class Sampler(threading.Thread):
    """Appends target.sample() to a JSONL file once per second until stopped; keeps the first and the
    latest."""

    def __init__(self, target, path, interval=1.0):
        super().__init__(daemon=True)
        self.target, self.path, self.interval = target, path, interval
        self.stopping = threading.Event()
        self.errors = 0
        self.first, self.latest = {}, {}

    def run(self):
        with open(self.path, "a") as out:
            while not self.stopping.is_set():
                started = time.monotonic()
                try:
                    self.latest = self.target.sample()
                    self.first = self.first or self.latest
                    out.write(json.dumps(self.latest) + "\n")
                    out.flush()
                except Exception as error:  # a missed sample must not end the run
                    self.errors += 1
                    if self.errors <= 3:
                        print(f"server sample failed: {error!r}", file=sys.stderr)
                self.stopping.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def stop(self):
        self.stopping.set()
        self.join(timeout=30)

    def figure(self, section, key, since_first=False):
        """The latest sample's figure, summed over functions for a per-function key; with since_first,
        a counter's growth since the first sample (the stack may have counted before the test, e.g.
        during a warm-up)."""
        latest = self._read(self.latest, section, key)
        if not since_first or latest is None:
            return latest
        return latest - (self._read(self.first, section, key) or 0)

    @staticmethod
    def _read(sample, section, key):
        if section == "store":
            return (sample.get("store") or {}).get(key)
        values = [f.get(key) for f in (sample.get("functions") or {}).values() if f.get(key) is not None]
        return sum(values) if values else None


@dataclass
class RunState:
    """What the steps share while a run goes on; `record` becomes run.json."""
    config: RunConfig
    folder: results.ResultsFolder
    target: object
    log: object = print
    record: dict = field(default_factory=dict)
    sampler: Sampler = None
    load_started: float = None
    load_ended: float = None
    converged: bool = False
    summary: dict = None
    fleet: object = None  # fleet.Fleet when Locust runs on VMs in Google Cloud
    publish: object = None  # publish(folder, update_readme=...) -> summary, for the report step (cli hands it in)


def last_aggregated(history_path):
    """Locust's latest per-second Aggregated row (users, RPS, failures), read from the end of its
    history CSV, or None before there is one."""
    try:
        with open(history_path, newline="") as f:
            header = next(csv.reader([f.readline()]), None)
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 16384))
            tail = f.read().splitlines()
    except OSError:
        return None
    rows = [row for row in csv.reader(tail[1:]) if header and len(row) == len(header)]
    aggregated = [dict(zip(header, row)) for row in rows if "Aggregated" in row]
    return aggregated[-1] if aggregated else None


def planned_seconds(config, log_path):
    """The shape's planned length: --duration, or what the Locust file logged at start."""
    if config.load.seconds is not None:
        return config.load.seconds
    try:
        found = re.search(r"planned (\d+(?:\.\d+)?) s", Path(log_path).read_text())
    except OSError:
        return None
    return float(found[1]) if found else None


# ---- the steps' actions --------------------------------------------------------------------------
def warm_up_stack(state):
    """Runs the warm-up's Locust to its end, then waits until the store holds every visit it had
    acknowledged, so they count in the totals read before the test, not in the test."""
    warm, target = state.config.warm_up, state.target
    folder = state.folder.path / WARM_UP_DIR
    folder.mkdir(exist_ok=True)
    baseline = target.totals()
    command = warm.load().locust_command(target.base_url, folder)
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=ROOT,
                          start_new_session=True) as locust:
        try:
            locust.wait(warm.timeout())
        except subprocess.TimeoutExpired:
            stop_locust(locust)
            raise RunError(f"the warm-up's Locust did not end within {warm.timeout():.0f} s")
        except BaseException:
            stop_locust(locust)
            raise
    ledger = json.loads((folder / results.LEDGER).read_text()) if (folder / results.LEDGER).exists() else {}
    acknowledged = sum(ledger.get("acknowledged", {}).values())
    settle.wait_until_stored(target.totals, baseline, acknowledged, interval=1, error=RunError)
    (folder / results.LOCUST_HTML).unlink(missing_ok=True)  # the test's own locust.html is the one to read
    target.mark_start()
    state.record["warm_up"] = {"users": warm.users, "seconds": warm.seconds, "acknowledged": acknowledged}
    state.folder.save_run(state.record)


def read_totals_before(state):
    state.record["base_url"] = state.target.base_url
    if getattr(state.target, "access", None):
        state.record["access"] = state.target.access  # as deployed ("auto" decided by the preflight)
    if getattr(state.target, "dead_letter", None) is False:  # the organization refused the dead-letter grants
        state.record["settings"] = {**state.record["settings"], "dead_letter": False}
    if getattr(state.target, "deployed_region", None):
        state.record["region"] = state.target.deployed_region
    state.record["before"] = state.target.totals()
    state.folder.save_run(state.record)


def run_load(state):
    config, folder = state.config, state.folder
    state.sampler = Sampler(state.target, folder / results.SAMPLES)
    state.sampler.start()
    timeout = config.load.seconds + STOP_TIMEOUT_S + 120 if config.load.seconds is not None else None
    state.load_started = time.time()
    progress, faults = Progress("load"), None
    try:
        with LocustProcesses(locust_commands(state)) as locust:
            try:
                if hasattr(state.target, "watch"):
                    state.target.watch("locust", locust.pid)
                faults = Chaos(config.chaos, state.target.stack, config.settings) if config.chaos else None
                if faults:
                    faults.start()
                while locust.poll() is None:
                    elapsed = time.time() - state.load_started
                    if timeout is not None and elapsed > timeout + locust.wait_workers_s:
                        raise RunError(f"Locust did not end within {timeout:.0f} s; see {folder / results.LOCUST_LOG}")
                    row = last_aggregated(folder / results.HISTORY) or {}
                    progress.update(elapsed, planned_seconds(config, folder / results.LOCUST_LOG),
                                    users=row.get("User Count"), RPS=_float(row.get("Requests/s")),
                                    failures=row.get("Total Failure Count"),
                                    responses_429=state.sampler.figure("functions", "responses_429", since_first=True),
                                    backlog=state.sampler.figure("store", "backlog"))
                    time.sleep(1)
            except BaseException:  # Ctrl-C or kill: leaving `with` would wait for Locust, so stop it first
                locust.stop()
                raise
    finally:
        progress.close()
        if faults:
            faults.stop()  # before the convergence wait: nothing stays frozen
            state.record["chaos"] = {"plan": config.chaos.describe(), "events": faults.events}
    state.load_ended = time.time()
    state.record["load_window"] = [state.load_started, state.load_ended]
    state.record["locust_exit_code"] = locust.returncode
    if locust.returncode != 0:
        state.record["notes"].append(f"Locust exited with code {locust.returncode}: see {results.LOCUST_LOG}")


def provision_fleet(state):
    fleet, target = state.fleet, state.target
    fleet.region = getattr(target, "deployed_region", None) or fleet.region  # beside the functions
    if getattr(target, "access", None) in DEPLOYED_ACCESS_MODES:  # "auto" is decided by now
        fleet.access = target.access
    fleet.stage(state.config.load, target.base_url)
    state.record["fleet"] = {"workers": fleet.workers, "worker_type": fleet.worker_type,
                             "processes": fleet.expect_workers, "region": fleet.region}
    state.folder.save_run(state.record)
    fleet.provision()


def run_on_fleet(state):
    """The fleet's master has started once its workers connected: wait for its results, copy them."""
    config, folder, fleet = state.config, state.folder, state.fleet
    state.sampler = Sampler(state.target, folder / results.SAMPLES)
    state.sampler.start()
    (folder / results.RUN_CONF).write_text((fleet.stage_dir / results.RUN_CONF).read_text())
    waited_from = time.time()
    try:
        code = fleet.wait_for_results(fleet_timeout(config.load))
        copied = fleet.collect(folder.path)
    finally:
        # the VMs go next: their logs are all there will be to read of them
        state.record["fleet"]["logs"] = fleet.collect_logs(folder.path)
        state.folder.save_run(state.record)
    state.record["locust_exit_code"] = code
    state.record["fleet"]["files"] = sorted(copied)
    if code != 0:
        state.record["notes"].append(f"Locust on the fleet exited with code {code}: see {results.LOCUST_LOG}")
    if results.LEDGER not in copied:
        raise RunError(f"the fleet's master uploaded no {results.LEDGER} (it uploaded: {', '.join(copied) or 'nothing'})")
    seconds = sorted(int(row["time"]) for row in results.read_csv(folder / results.PER_SECOND))
    # the load's own window, from the master's clock, rather than the wait's (VMs booting first)
    state.load_started = float(seconds[0]) if seconds else waited_from
    state.load_ended = float(seconds[-1] + 1) if seconds else time.time()
    state.record["load_window"] = [state.load_started, state.load_ended]
    state.folder.save_run(state.record)


def destroy_fleet(state):
    fleet = state.fleet
    if fleet is None or not fleet.provisioning:  # nothing was created
        if fleet is not None and fleet.stage_dir.parent.exists():
            shutil.rmtree(fleet.stage_dir.parent)
        return
    fleet.destroy()
    shutil.rmtree(fleet.stage_dir.parent)


def fleet_timeout(load):
    """How long the kit waits for a fleet's results: its VMs' start, the load, its end."""
    from visitkit.cloud.fleet import BOOT_ALLOWANCE_S

    return BOOT_ALLOWANCE_S + (load.planned_seconds() or 24 * 3600) + STOP_TIMEOUT_S + 120


def locust_commands(state):
    """The run's Locust command lines: one command; or, with --workers, a master and its workers
    (locust/node.py), whose options go into the results folder's run.conf."""
    config, folder, target = state.config, state.folder, state.target
    target_args = getattr(target, "locust_args", ())
    if not config.load.workers:
        command = config.load.locust_command(target.base_url, folder.path, target_args)
        state.record["locust_command"] = command
        return [command]
    (folder / results.RUN_CONF).write_text(config.load.run_conf(target.base_url, target_args))
    commands = config.load.node_commands(folder / results.RUN_CONF, folder.path, free_port())
    state.record["locust_command"], state.record["locust_workers_command"] = commands
    return list(commands)


class LocustProcesses:
    """Locust's processes for one test, each in a process group of its own (so that stopping one
    reaches the workers it forked); the first is the one whose end ends the test."""

    def __init__(self, commands, stop_grace_s=10):
        self.commands, self.stop_grace_s = commands, stop_grace_s
        self.wait_workers_s = LOCAL_WAIT_WORKERS_S if len(commands) > 1 else 0
        self.processes = []

    def __enter__(self):
        for command in self.commands:
            self.processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                   cwd=ROOT, start_new_session=True))
        return self

    @property
    def pid(self):
        return self.processes[0].pid

    @property
    def returncode(self):
        return self.processes[0].returncode

    def poll(self):
        return self.processes[0].poll()

    def stop(self):
        for process in self.processes:
            stop_locust(process, self.stop_grace_s)

    def __exit__(self, *_exc):
        # the workers quit when their master does; give them the time to, then stop whatever is left
        for process in self.processes[1:]:
            try:
                process.wait(self.stop_grace_s)
            except subprocess.TimeoutExpired:
                pass
        self.stop()
        for process in self.processes:
            process.wait()
        return False


def stop_locust(locust, grace_s=10):
    """SIGTERM to Locust's process group (the master and its --processes workers), then SIGKILL to
    whatever is left of the group once the master has ended or grace_s has passed."""
    try:
        os.killpg(locust.pid, signal.SIGTERM)
        locust.wait(grace_s)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    try:
        os.killpg(locust.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _float(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def convergence_wait(config, target, load_seconds, model_seconds=0):
    """--convergence-timeout, else the longest of a floor, 3 x the load, twice what the model says the
    store needs after this load (a run the model describes never times out; one it does not still ends)
    and the target's own minimum."""
    if config.convergence_timeout is not None:
        return config.convergence_timeout
    return max(MIN_CONVERGENCE_WAIT_S, 3 * load_seconds, 2 * model_seconds, target.min_convergence_wait)


def state_convergence_wait(state):
    """convergence_wait for a run whose load has ended, the model applied to the users Locust recorded."""
    history = analysis.aggregated_history(results.read_csv(state.folder / results.HISTORY))
    model = model_for_load(state.record, history, *analysis.load_window(history)) or {}
    return convergence_wait(state.config, state.target, state.load_ended - state.load_started,
                            model.get("seconds_after_load") or 0)


def wait_for_convergence(target, before, acknowledged, path, timeout, interval=1.0, progress=None,
                         backlog=lambda: None):
    """Polls stored totals into a JSONL file until every page holds before + acknowledged (then a few
    more polls, so late duplicates show) or the timeout passes. True when it converged."""
    expected = {page: before.get(page, 0) + count for page, count in acknowledged.items()}
    started = time.monotonic()
    deadline, settle = started + timeout, None
    with open(path, "a") as out:
        while True:
            totals = target.totals()
            out.write(json.dumps({"time": time.time(), "totals": totals}) + "\n")
            out.flush()
            if progress is not None:
                progress.update(time.monotonic() - started, timeout, stored=sum(totals.values()) - sum(before.values()),
                                of=sum(acknowledged.values()), backlog=backlog())
            if settle is None and all(totals.get(p, 0) >= n for p, n in expected.items()):
                settle = SETTLE_POLLS
            if settle is not None:
                settle -= 1
                if settle <= 0:
                    return True
            if time.monotonic() > deadline:
                return settle is not None
            time.sleep(interval)


def converge(state):
    ledger = json.loads((state.folder / results.LEDGER).read_text())
    wait = state_convergence_wait(state)
    if state.sampler is None:  # a resumed run whose load had finished
        state.sampler = Sampler(state.target, state.folder / results.SAMPLES)
        state.sampler.start()
    progress = Progress("convergence")
    try:
        converged = wait_for_convergence(state.target, state.record["before"], ledger.get("acknowledged", {}),
                                         state.folder / results.POLLS, wait, progress=progress,
                                         backlog=lambda: state.sampler.figure("store", "backlog"))
    finally:
        progress.close()
        state.sampler.stop()
    if hasattr(state.target, "twin_figures"):
        state.record["twin"] = state.target.twin_figures()
    state.converged = state.record["converged"] = converged
    if not converged:
        state.record["notes"].append(f"Counters had not converged {wait:.0f} s after the load (--convergence-timeout).")
    if state.sampler.errors:
        state.record["notes"].append(f"{state.sampler.errors} server samples failed (gaps in {results.SAMPLES}).")
    state.folder.save_run(state.record)


def audit_visits(state):
    """Reads the store's marker of every visit id in the ledger (or, per visitkit.results.audit, falls back
    to the totals), into audit.json."""
    ledger = json.loads((state.folder / results.LEDGER).read_text())
    # After a convergence, acknowledged visits the totals did not wait for may still be in a retry
    # backoff: the audit waits for them as long again. After none, it takes the store as it is.
    wait = state_convergence_wait(state) if state.converged else 0
    record = audit.run(ledger, state.config.audit, getattr(state.target, "stored_visits", None),
                       getattr(state.target, "billed_region", None), totals=state.target.totals, wait_s=wait)
    state.folder.save_audit(record)
    if record["method"] == "exact":
        paid = f", about {record['read_cost_usd']:.4f} USD" if record["read_cost_usd"] is not None else ""
        state.log(f"audit: {record['reads']:,} visit markers read{paid}; {len(record['not_stored']):,} not stored")
    else:
        state.log(f"audit: by the totals ({record['why']})")


def read_window(state):
    """The platform's figures for the load and the convergence wait (so the backlog's drain is in
    them) replace the live samples."""
    try:
        samples = state.target.window_samples(state.load_started, time.time(), state.folder.path)
    except Exception as error:  # e.g. no monitoring.viewer role: keep the client-side report
        samples = []
        state.record["notes"].append(f"The platform's metrics could not be read: {error!r}")
    with open(state.folder / results.SAMPLES, "w") as out:
        out.writelines(json.dumps(s) + "\n" for s in samples)
    state.folder.save_run(state.record)


def write_report(state):
    if not state.config.keep_up:  # the stack is down: its files may lose this machine's paths
        results.without_machine_paths(state.folder.path)
    # A run with injected faults is cited on its own, never as the iteration's latest run.
    state.summary = state.publish(state.folder, update_readme=readme_updated(state.config, state.target))


# ---- the plan ------------------------------------------------------------------------------------
def plan(config, folder, target, fleet=None):
    """The run's steps, in order; the same list is run or printed."""
    load, shown_url = config.load, target.base_url
    convergence = (f"up to {config.convergence_timeout:g} s" if config.convergence_timeout is not None else
                   f"up to the longest of {MIN_CONVERGENCE_WAIT_S} s, 3 x the load, twice the model's time to store "
                   "this load's backlog"
                   + (f" and the subscription's maximum backoff plus its ack deadline ({target.min_convergence_wait} s)"
                      if target.min_convergence_wait else ""))
    steps = [*target.start_steps()]
    if config.warm_up:
        warm = config.warm_up
        steps.append(Step("warm up the stack", [
            f"{warm.describe()}, the study's visitor (Locust's endurance shape), files in {WARM_UP_DIR}/: the "
            "emulators' JVMs start cold, Google's Firestore and Pub/Sub are warm",
            f"$ {shlex.join(warm.load().locust_command(shown_url, folder.path / WARM_UP_DIR))}",
            f"then wait until every visit it acknowledged is stored (up to {settle.STORED_TIMEOUT_SECONDS} s)"],
            warm_up_stack))
    steps += [
        Step("read the totals before the load", [f"from {target.totals_source}"], read_totals_before),
        *(fleet_steps(config, folder, target, fleet) if fleet else [
            Step(f"run the Locust test '{load.test}'", [f"{load.describe()}, against {shown_url}",
                                                        *locust_lines(config, folder, target),
                                                        *([f"chaos during the load: {config.chaos.describe()}"]
                                                          if config.chaos else [])], run_load)]),
        Step("wait for the counters to converge", [
            f"read totals from {target.totals_source} until they match the visits Locust saw acknowledged "
            f"({convergence})"], converge),
        Step("audit every visit", [audit_words(config.audit, target)], audit_visits),
    ]
    if hasattr(target, "window_step"):
        window = target.window_step()
        steps.append(Step(window.name, window.details, read_window))
    stop = target.stop_step()
    if stop is not None:
        steps.append(stop)
    steps.append(Step("write the report", [
        f"{folder.path / results.REPORT}: summary.json, the plots, then report.md"
        + (" and the iteration README's latest-run block" if readme_updated(config, target) else "")], write_report))
    return steps


def readme_updated(config, target):
    """Only when asked: a run that rewrote a tracked doc would leave every clone's tree changed."""
    return config.update_readme and target.updates_readme and not config.chaos


def fleet_steps(config, folder, target, fleet):
    load = config.load
    commands = fleet.commands()
    master, worker = fleet.node_lines(load)
    conf = load.run_conf(target.base_url, fleet.locust_args,
                         "stages.csv" if load.stages and Path(load.stages).is_file() else None)
    return [
        Step("provision the Locust fleet", [
            fleet.describe(),
            f"stage {fleet.stage_dir}: locust/, the visitkit modules it imports, requirements.txt (the kit's "
            "Locust and google-auth pins) and run.conf:",
            *(f"    {line}" for line in conf.splitlines()[1:]),
            f"$ {shlex.join(commands['init'])}", f"$ {shlex.join(commands['apply'])}",
            f"apply retry policy: {_retry_policy()}",
            "a bucket for the files, its own network (workers reach the master's port on the internal network only; "
            "SSH only through IAP), Cloud NAT for the VMs' connections (no external address), a service account"
            + {"authenticated": " with run.invoker on the three HTTP functions (the VMs mint their own ID tokens)",
               "auto": " (with run.invoker on the three HTTP functions, the VMs minting their own ID tokens, if the "
                       "preflight decides access authenticated)"}.get(fleet.access, ""),
            "each VM installs the pinned Locust and starts its node (infra/loadgen/startup.sh.tftpl); the master:",
            f"$ {shlex.join(master)}", f"each of the {fleet.workers} worker VMs:", f"$ {shlex.join(worker)}"],
             provision_fleet),
        Step(f"run the Locust test '{load.test}' on the fleet", [
            f"{load.describe()}, against {target.base_url}",
            f"the master waits for {fleet.expect_workers} worker processes, runs the test, asks each worker for its "
            "whole visit ledger, and uploads its files to gs://<bucket>/results/ and then results/exit-code",
            f"wait for results/exit-code (up to {fleet_timeout(load):.0f} s), then copy results/ into {folder.path}: "
            "the Locust CSVs and HTML, ledger.json, per_second.csv, health.csv (each worker's CPU and event-loop lag "
            "every second: the report flags a saturated worker and when)"], run_on_fleet),
        Step("leave the Locust fleet running (--keep-fleet)", [
            f"look inside: infra/loadgen/README.md; clean up later: $ {shlex.join(commands['destroy'])}"], None)
        if config.keep_fleet else
        Step("destroy the Locust fleet", [f"$ {shlex.join(commands['destroy'])}",
                                          f"then remove the staged files in {fleet.stage_dir.parent}"],
             destroy_fleet, always=True),  # as soon as its files are in: VMs bill by the second
    ]


def _retry_policy():
    from visitkit.cloud.firstrun import retry_policy_text

    return retry_policy_text()


def locust_lines(config, folder, target):
    """The Locust step's command lines, as a dry run shows them."""
    target_args = getattr(target, "locust_args", ())
    if not config.load.workers:
        return [f"$ {shlex.join(config.load.locust_command(target.base_url, folder.path, target_args))}"]
    conf = folder.path / results.RUN_CONF
    master, worker = config.load.node_commands(conf, folder.path, "<free port>")
    return [f"{conf}, the options master and workers read:",
            *(f"    {line}" for line in config.load.run_conf(target.base_url, target_args).splitlines()[1:]),
            "the master (it waits for every worker, runs the shape, and asks each worker for its whole visit "
            "ledger before it quits):", f"$ {shlex.join(master)}",
            f"the {config.load.workers} workers, over loopback:", f"$ {shlex.join(worker)}"]


def audit_words(requested, target):
    if requested == "totals" or not hasattr(target, "stored_visits"):
        return "compare each page's stored total with the visits' outcomes (5xx and unanswered stay ambiguous)"
    words = "read the store's marker of every visit id in the ledger, in batches: each visit's fate is known"
    if getattr(target, "billed_region", None) and requested == "auto":
        words += (f" (one billed read per visit; above {audit.EXACT_MAX_READS:,} visits by the totals instead, "
                  "unless --audit exact)")
    return words


def dry_run(config):
    """The plan as lines to print; starts, writes and contacts nothing."""
    if config.resume:
        folder = results.ResultsFolder(config.resume)
        done = folder.run().get("steps_done") or []
        head = [f"results: {folder.path} (resumed: {', '.join(done) or 'no step had finished'}; a finished step is "
                "skipped, except the checks, which run again, and the deploy, which reads the apply's outputs)"]
    else:
        folder = results.ResultsFolder(config.iteration_dir / "results" / f"{config.load.test}-<timestamp>")
        head = [f"results: {folder.path}"]
    target = make_target(config, folder)
    return [*head, *plan_lines(plan(config, folder, target, make_fleet(config, folder)))]


def run(config, log=print, *, publish):
    """Runs the plan (or, with config.resume, what a failed run left); returns (ResultsFolder, summary).
    `publish(folder, update_readme=...)` writes the report and returns the summary (the command line hands
    in visitkit.reports.publish.publish: the reports sit above the runs)."""
    if config.resume:
        folder = results.ResultsFolder(config.resume)
        record = folder.run()
        record.pop("format_version", None)
        log(f"results: {folder.path} (resumed after: {', '.join(record.get('steps_done') or ['nothing'])})")
    else:
        folder = results.ResultsFolder.new(config.iteration_dir, config.load.test)
        folder.create()
        record = None
    target = make_target(config, folder)
    if record and hasattr(target, "resume"):
        target.resume(record.get("decisions") or {})
    record = record or {
        "iteration": config.iteration_dir.name, "test": config.load.test, "target": config.target_kind,
        "started": datetime.datetime.now().isoformat(timespec="seconds"), "settings": config.settings.raw,
        "shape": config.load.describe(), "notes": list(target.notes),
        "workers": config.load.workers or config.load.processes or 0,
        "profile": config.profile.record() if config.target == "local" else None,
        "machine": {"cores": os.cpu_count()} if config.target == "local" else None,
        "prediction": config.prediction.as_dict()}
    state = RunState(config, folder, target, log, record, fleet=make_fleet(config, folder), publish=publish)
    state.load_started, state.load_ended = record.get("load_window") or (None, None)
    state.converged = record.get("converged", False)
    folder.save_run(record)
    if not config.resume:
        log(f"results: {folder.path}")
    steps = plan(config, folder, target, state.fleet)
    run_steps(steps, state, log, done=set(record.get("steps_done") or ()), on_done=lambda step: finished(state, step),
              on_failure=lambda step, error: failed(state, step, error))
    return folder, state.summary


def finished(state, step):
    """Records a finished step in run.json, for --resume; a tear-down forgets the deployment's."""
    if hasattr(state.target, "decisions"):
        state.record["decisions"] = state.target.decisions
    done = state.record.setdefault("steps_done", [])
    if getattr(state.target, "destroy", False) and step.name == state.target.stop_step().name:
        done.clear()  # the deployment is gone: a resumed run deploys again
    elif step.name not in done:
        done.append(step.name)
    state.folder.save_run(state.record)


def failed(state, step, error):
    """A failed Google Cloud step leaves failure.json (ids replaced by placeholders) and says how to
    send it home, where the catalogue of first-run errors learns from it."""
    state.record["failed_step"] = step.name
    state.folder.save_run(state.record)
    if state.config.target != "gcp":
        return
    from visitkit.cloud import failures

    try:
        path = failures.write_failure(state.folder.path, step.name, error, failures.versions(INFRA_DIR),
                                      project=state.config.project)
    except Exception as unwritten:  # noqa: BLE001 - the step's own error is what the user must see
        state.log(f"  (failure.json could not be written: {unwritten!r})")
        return
    state.log(failures.send_home(path))
    state.log(f"to continue after the last finished step: the same command with --resume {state.folder.path}")


def headline_lines(folder, summary):
    h, verdict = summary["headline"], summary.get("verdict", {})
    return [
        f"report: {folder / results.REPORT}",
        f"  verdict: {verdict.get('outcome', 'n/a')}",
        f"  users max {h['users_max']}, requests {h['requests']}, failure ratio {percent(h['failure_ratio'] or 0)}",
        *(f"  {line}" for line in headline_table(h)),
    ]

"""A whole study's plan, before anything starts: for each iteration its test and how long it loads, what the
capacity model expects of it (knee, first 429, the store's backlog and how long it takes to drain, the visits),
how many minutes each of its steps takes and what it would cost on Google Cloud; then the whole study's minutes
and US dollars, against issue #37's targets and the --budget.

Two protocols:
- fast: each iteration's README command (its "Run it" breakpoint) gives the ramp (users added per second); the
  plan chooses how far the ramp goes, from the model: past the point where each figure the iteration is judged by
  can be read (FAST_RULE), and no further, since every visit past the knee is backlog the store drains after;
- study: the study's own ramps, +1 user/s for the minutes its study.json gives (5 to 15).

What this machine has not measured (deploying, applying in place, building, Monitoring's delay, destroying) is
assumed, each figure once in ASSUMED with where it comes from. Pure but for two reads: the iterations' files by
`load_iteration`, and the endurance's stages file; the prices and the profile are handed in.
"""
import math
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from visitkit.catalogue import PAGES, QUEUE_TIMEOUT_S
from visitkit.cloud.monitoring import DEFAULT_INGESTION_DELAY_SECONDS
from visitkit.errors import VisitkitError
from visitkit.model import capacity, cost, fleet
from visitkit.model.capacity import LatencyProfile, LoadConvergence, Prediction, figure_to_measure
from visitkit.reports import study, verdict
from visitkit.runs.config import STAGES, WARM_UP_SPAWN_RATE, WarmUp
from visitkit.runs.convergence import SETTLE_POLLS
from visitkit.settings import Settings, load_settings

TARGETS = ("local", "gcp")
PROTOCOLS = ("fast", "study")
DEFAULT_ITERATIONS = ("0", "1", "2", "3")
# Issue #37's targets for iterations 0-3 with the default protocol: minutes on each target, US dollars on Google Cloud.
TARGET_MINUTES = {"gcp": 90.0, "local": 75.0}
TARGET_USD = 2.0
STUDY_RAMP = 1.0  # users/s: the study's breakpoints (+1 user/s), also locust/shapes.py's BreakpointShape default
ENDURANCE_ITERATION = "iteration-3"  # the study ran its endurance test on iteration 3
ENDURANCE_STAGES = STAGES["remote"]  # locust/stages/endurance-study.csv: the study's stages
ENDURANCE_RAMP = 2.0  # users/s between the stages: the study's +/-2 users/s, locust/shapes.py's EnduranceShape


@dataclass(frozen=True)
class FastRule:
    """How far a fast breakpoint goes past the knee, in the model's figures. The knee is read once RPS has fallen
    `knee_shortfall` below the users' healthy rate and stayed there `knee_hold_s` seconds, on RPS smoothed over
    `knee_smooth_s` (results/analysis.find_breakpoint's defaults; tests/unit/test_study_plan.py holds them equal),
    so the ramp must reach knee / (1 - shortfall) plus what it adds meanwhile; the first failures, where the study
    measured them, come at the model's first 429; a store figure (the study's drain, or a check on store.*) needs
    a backlog the store drains for `min_drain_s`, three of Cloud Monitoring's per-minute points at least. Each
    reach is taken `margin` further: the twin's runs of iterations 0-3 measured their knee and first failures
    within 5 % of the model's."""
    knee_shortfall: float = 0.25
    knee_hold_s: float = 10.0
    knee_smooth_s: float = 5.0
    margin: float = 0.1
    min_drain_s: float = 180.0
    round_s: float = 10.0  # the load's length is a whole number of these


FAST_RULE = FastRule()


@dataclass(frozen=True)
class Assumption:
    value: float
    unit: str  # "s", "build-minutes", "USD per build-minute"
    source: str


# What the plan assumes and has not measured here, with where each figure comes from: the one place they live.
ASSUMED: dict[str, Assumption] = {
    "deploy": Assumption(600, "s", (
        "not measured here, and Google publishes no deploy time: the first `terraform apply` enables the APIs, "
        "creates Firestore, waits build_grants_wait_seconds (60 s, infra/variables.tf), builds the four functions "
        "on Cloud Build (in parallel) and grants their invokers, which IAM propagates in typically 2 minutes, "
        "potentially 7 or longer (https://cloud.google.com/iam/docs/access-change-propagation)")),
    "apply in place": Assumption(240, "s", (
        "not measured here: `terraform apply` of the next iteration's settings file refreshes the deployment and "
        "updates the functions whose settings changed, each assumed rebuilt by Cloud Build and rolled out as a "
        "new revision")),
    "checks": Assumption(90, "s", (
        "not measured here: each Google Cloud run's preflight, its wait until every function answers, its first "
        "visit stored (Firestore read every 15 s), its warm-up (every 10 s) and its audit (cloud/gcp.py, "
        "runs/convergence.py); each has a timeout of minutes, and is assumed to pass at once on a deployment that "
        "answered before")),
    "Monitoring": Assumption(DEFAULT_INGESTION_DELAY_SECONDS, "s", (
        "the runner's own wait before it reads a run's window (cloud/monitoring.py, DEFAULT_INGESTION_DELAY_SECONDS): "
        "Google's metrics list says of many metrics \"Sampled every 60 seconds. After sampling, data is not visible "
        "for up to 240 seconds\", the figures varying by metric "
        "(https://cloud.google.com/monitoring/api/v3/latency-n-retention)")),
    "destroy": Assumption(300, "s", (
        "not measured here, and Google publishes no figure: `terraform destroy` deletes the functions, the "
        "subscription and topics, the Firestore database and the grants")),
    "fleet": Assumption(300, "s", (
        "with --workers: not measured here; each run creates its Locust VMs (infra/loadgen), waits for their "
        "workers and destroys them after its load (runs/fleetrun.py)")),
    "stack start": Assumption(15, "s", (
        "the local stack's start before the warm-up: 5 to 8 s in the committed runs of iterations 0-3 (run.json's "
        "start against warm-up/locust_stats_history.csv's first second), taken as 15")),
    "report": Assumption(30, "s", (
        "not timed by the runner: a run's summary, plots and report.md, and the local stack's stop")),
    "build minutes": Assumption(2, "build-minutes", (
        "per function built: \"four builds of a minute or two per deployment\" (scripts/visitkit/model/prices.json, "
        "left_out)")),
    "build price": Assumption(0.006, "USD per build-minute", (
        "Cloud Build's e2-standard-2 (scripts/visitkit/model/prices.json, left_out, from "
        "https://cloud.google.com/build/pricing), counted without its 2,500 free minutes a month")),
}


def assumed(name: str) -> float:
    return ASSUMED[name].value


@dataclass(frozen=True)
class Iteration:
    """What the plan reads of an iteration folder."""
    name: str
    path: Path
    settings: Settings
    study: dict[str, Any]  # study.json: the reference study's figures ({}: an iteration it did not run)
    checks: list[str]  # the README's **Check:** lines
    readme_shape: dict[str, str] | None  # its README's breakpoint command's shape settings; None: it has none

    @property
    def readme_ramp(self) -> float | None:
        """Users/s of its README's breakpoint (a command without spawn_rate ramps at the study's +1/s)."""
        return None if self.readme_shape is None else float(self.readme_shape.get("spawn_rate", STUDY_RAMP))

    @property
    def max_users(self) -> float:
        """Where its README's breakpoint stops adding users (BreakpointShape's max_users: "infinite" by default)."""
        return float((self.readme_shape or {}).get("max_users", math.inf))


def readme_shape(readme_text: str) -> dict[str, str] | None:
    """The shape settings (--shape-set, but its duration_s) of the first breakpoint command without --chaos under the
    README's '## Run it': the fast protocol's ramp; None when there is none."""
    _, found, rest = readme_text.partition("\n## Run it")
    for line in rest.split("\n## ", 1)[0].splitlines() if found else []:
        words = shlex.split(line.strip()) if line.strip().startswith("scripts/run-iteration") else []
        if not words or "--chaos" in words or "--test" not in words or words[words.index("--test") + 1] != "breakpoint":
            continue
        shape = words[words.index("--shape-set") + 1] if "--shape-set" in words else ""
        given = dict(item.split("=", 1) for item in shape.split(",") if "=" in item)
        return {key: value for key, value in given.items() if key != "duration_s"}
    return None


def load_iteration(path: Path) -> Iteration:
    readme = path / "README.md"
    text = readme.read_text() if readme.exists() else ""
    return Iteration(path.name, path, load_settings(path), study.load(path) or {}, verdict.hypothesis_checks(text),
                     readme_shape(text))


@dataclass(frozen=True)
class RunPlan:
    """One run of the study: its test and load, what the model expects of it, its steps' seconds, its cost."""
    iteration: Iteration
    test: str  # breakpoint or endurance
    ramp: float | None  # users/s of a breakpoint
    max_users: float  # where a breakpoint stops adding users
    seconds: float  # of load
    stages: str | None  # an endurance's stages file
    why: str  # how far the load goes, and why
    prediction: Prediction
    target: str
    convergence: LoadConvergence  # after this load, by the model
    visits: float
    steps: dict[str, float]  # step -> seconds, in order
    cost: dict[str, Any]  # cost.estimate, at the region's list prices

    @property
    def total_s(self) -> float:
        return sum(self.steps.values())

    @property
    def reach_users(self) -> float:
        return min(self.max_users, self.ramp * self.seconds) if self.ramp else self.max_users

    def figure(self, name: str) -> Any:
        """The model's figure `name` this run is measured against (on the twin: this machine's, where lower)."""
        return figure_to_measure(self.prediction.as_dict(), self.target, name)

    def run_options(self) -> dict[str, Any]:
        """What RunConfig.build takes for this run (its duration, shape settings or stages)."""
        if self.test == "endurance":
            return {"test": self.test, "duration": None, "shape_set": "", "stages": self.stages}
        shape = f"spawn_rate={self.ramp:g}" + (f",max_users={self.max_users:g}" if self.max_users < math.inf else "")
        return {"test": self.test, "duration": f"{self.seconds:g}s", "shape_set": shape, "stages": None}


@dataclass(frozen=True)
class StudyPlan:
    target: str
    protocol: str
    region: str
    runs: list[RunPlan]
    destroy_s: float  # 0: not destroyed (local, or --keep)
    builds: int  # functions built on Cloud Build (the deploy and each apply in place)
    fleet_usd: float
    endurance: bool = False
    workers: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def minutes(self) -> float:
        return (sum(run.total_s for run in self.runs) + self.destroy_s) / 60

    @property
    def build_usd(self) -> float:
        return self.builds * assumed("build minutes") * assumed("build price")

    @property
    def usd(self) -> float:
        return sum(run.cost["total"] for run in self.runs) + self.build_usd + self.fleet_usd

    def by_service(self) -> dict[str, float]:
        split: dict[str, float] = {}
        for run in self.runs:
            for service, usd in cost.by_service(run.cost).items():
                split[service] = split.get(service, 0.0) + usd
        split["Cloud Build"] = self.build_usd
        if self.fleet_usd:
            split["Locust fleet"] = self.fleet_usd
        return split


# ---- the loads -----------------------------------------------------------------------------------
def ramp_series(users_per_s: float, seconds: float, max_users: float = math.inf) -> list[tuple[float, float]]:
    """A breakpoint's users, second by second (locust/shapes.py's BreakpointShape: at least 1, at most max_users)."""
    return [(t, max(1.0, min(max_users, users_per_s * t))) for t in range(round(seconds) + 1)]


def stage_list(stages: str | Path | None) -> list[tuple[int, float]]:
    """An endurance's stages file (users,hold_s) as [(users, hold seconds)]."""
    rows = [line.split(",") for line in Path(stages or ENDURANCE_STAGES).read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    return [(int(users), float(hold)) for users, hold in rows[1:]]


def stage_series(stages: Sequence[tuple[int, float]], users_per_s: float = ENDURANCE_RAMP) -> list[tuple[float, float]]:
    """An endurance's users second by second: to each stage's users at users_per_s, then held (EnduranceShape)."""
    series, now, users = [(0.0, 0.0)], 0.0, 0.0
    for target, hold in stages:
        while users != target:
            users = min(target, users + users_per_s) if target > users else max(target, users - users_per_s)
            now += 1
            series.append((now, users))
        for _ in range(round(hold)):
            now += 1
            series.append((now, users))
    return series


def published_visits(prediction: Prediction, series: Sequence[tuple[float, float]], target: str) -> float:
    """The visits a load sends: each second min(users / cycle, the knee's pages/s), as capacity.convergence_for_load
    counts what reaches the topic."""
    pages = figure_to_measure(prediction.as_dict(), target, "knee_rps") / len(capacity.PUBLIC)
    return sum(min(users / prediction.cycle_s, pages) * (t_next - t)
               for (t, users), (t_next, _) in zip(series, series[1:]))


def fast_breakpoint(it: Iteration, prediction: Prediction, target: str,
                    rule: FastRule = FAST_RULE) -> tuple[float, str]:
    """(seconds of load, why) of the fast protocol's breakpoint: the README's ramp, as far as FAST_RULE needs for
    the figures this iteration is judged by."""
    if it.readme_ramp is None:
        raise VisitkitError(f"{it.name}'s README has no breakpoint command under 'Run it' to take the fast "
                            "protocol's ramp from: use --protocol study")
    rate, p = it.readme_ramp, prediction.as_dict()
    knee = figure_to_measure(p, target, "knee_users")
    read = knee / (1 - rule.knee_shortfall) + rate * (rule.knee_hold_s + rule.knee_smooth_s)
    reaches = [(read * (1 + rule.margin), f"{rule.margin:.0%} past {read:,.0f} users, where the knee ({knee:,.0f}) "
                                          "can be read")]
    if "first_failure_users" in it.study:
        first = figure_to_measure(p, target, "first_429_users")
        reaches.append((first * (1 + rule.margin), f"{rule.margin:.0%} past the first 429 ({first:,.0f} users)"))
    users, why = max(reaches)
    seconds = rule.round_s * math.ceil(users / rate / rule.round_s)
    if "drain_per_s" in it.study or any(check.startswith("store.") for check in it.checks):
        wanted, reached = prediction.drain_per_s * rule.min_drain_s, seconds
        while capacity.convergence_for_load(p, ramp_series(rate, seconds, it.max_users), target)[
                "backlog_at_end"] < wanted:
            seconds += rule.round_s
        if seconds > reached:
            why = f"until the store has {rule.min_drain_s / 60:g} minutes of backlog to drain"
    users_per_s = f"+{rate:g} {'user' if rate == 1 else 'users'}/s"
    if users > it.max_users:
        why += f", beyond its README's max_users ({it.max_users:,.0f}): the ramp stops there"
    return seconds, f"{users_per_s} for {seconds:g} s, to {min(rate * seconds, it.max_users):,.0f} users: {why}"


def study_breakpoint(it: Iteration) -> tuple[float, str]:
    minutes = it.study.get("breakpoint_minutes")
    if minutes is None:
        raise VisitkitError(f"the study ran no breakpoint on {it.name} (its study.json gives no breakpoint_minutes): "
                            "use --protocol fast")
    return minutes * 60, f"+{STUDY_RAMP:g} user/s for {minutes} min, the study's own breakpoint"


# ---- time and cost -------------------------------------------------------------------------------
def warm_up_seconds(prediction: Prediction, target: str) -> float:
    """A local run's warm-up (runs/config.py's WarmUp: its users reached, held, stopped) and the time the store
    then takes to store its visits before the test starts (the model)."""
    warm = WarmUp.build(None, None, prediction)
    if warm is None:
        return 0.0
    series = stage_series([(warm.users, warm.seconds)], users_per_s=WARM_UP_SPAWN_RATE)
    return series[-1][0] + capacity.convergence_for_load(prediction.as_dict(), series, target)["seconds_after_load"]


def run_cost(settings: Settings, visits: float, load_s: float, after_s: float, prices: Mapping[str, Any],
             region: str) -> dict[str, Any]:
    """What one run would cost on Google Cloud at list prices (cost.estimate), erring high: each public function's
    instances all billed during the load, store-inc-counter's during the load and the drain; per visit one request
    to each public function and one push delivery, two writes, a TTL delete and the marker's storage, two Pub/Sub
    messages and their log entries; get-counter's Firestore reads, the convergence wait's (every page each second)
    and the audit's (one per visit)."""
    slots = {name: spec.max_instances * (load_s + (after_s if name == capacity.PUSH_FUNCTION else 0))
             for name, spec in settings.functions.items()}
    functions = {name: {"billable_instance_s": seconds, "requests": round(visits)} for name, seconds in slots.items()}
    per_query = cost.billed_reads_per_query(settings)
    pages_per_s = visits / load_s if load_s else 0.0
    reads = (capacity.counter_reads_per_s(settings, pages_per_s) * load_s + len(PAGES) * after_s) * per_query + visits
    usage = {"functions": functions, "firestore_writes": round(2 * visits), "firestore_deletes": round(visits),
             "firestore_reads": round(reads), "pubsub_messages": round(2 * visits),
             "marker_gib_months": cost.marker_gib_months(settings, visits),
             "log_entries": cost.log_entries(len(functions) * visits, visits)}
    return cost.estimate(usage, settings, prices, region)


def plan_run(it: Iteration, test: str, protocol: str, target: str, profile: LatencyProfile, prices: Mapping[str, Any],
             region: str, first: bool, workers: int | None = None) -> RunPlan:
    prediction = capacity.predict(it.settings, profile, QUEUE_TIMEOUT_S)
    if test == "endurance":
        stages: str | None = str(ENDURANCE_STAGES)
        series = stage_series(stage_list(stages))
        ramp, seconds, max_users = None, series[-1][0], max(users for _, users in series)
        why = f"the study's endurance stages ({ENDURANCE_STAGES.name}, +/-{ENDURANCE_RAMP:g} users/s)"
    else:
        stages = None
        seconds, why = fast_breakpoint(it, prediction, target) if protocol == "fast" else study_breakpoint(it)
        ramp, max_users = (it.readme_ramp, it.max_users) if protocol == "fast" else (STUDY_RAMP, math.inf)
        assert ramp is not None  # fast_breakpoint refused an iteration without one
        series = ramp_series(ramp, seconds, max_users)
    after = capacity.convergence_for_load(prediction.as_dict(), series, target)
    visits = published_visits(prediction, series, target)
    drain_s = after["seconds_after_load"] + SETTLE_POLLS
    steps: dict[str, float] = {}
    if target == "gcp":
        steps["deploy" if first else "apply in place"] = assumed("deploy" if first else "apply in place")
        steps["checks"] = assumed("checks")
    else:
        steps["stack start"] = assumed("stack start")
        steps["warm-up"] = warm_up_seconds(prediction, target)
    if workers:
        steps["fleet"] = assumed("fleet")
    steps["load"] = seconds
    steps["drain"] = drain_s
    if target == "gcp":
        steps["Monitoring"] = assumed("Monitoring")
    steps["report"] = assumed("report")
    return RunPlan(it, test, ramp, max_users, seconds, stages, why, prediction, target, after, visits, steps,
                   run_cost(it.settings, visits, seconds, drain_s, prices, region))


def plan_study(iterations: Sequence[Iteration], target: str, protocol: str, profile: LatencyProfile,
               prices: Mapping[str, Any], region: str | None = None, *, endurance: bool = False, keep: bool = False,
               workers: int | None = None, worker_type: str = fleet.DEFAULT_WORKER_TYPE) -> StudyPlan:
    """The study's runs in order, each iteration's breakpoint (and with `endurance` iteration 3's endurance after
    its breakpoint), with their minutes and their cost in `region` (default: the infra's, the study's)."""
    if target not in TARGETS:
        raise VisitkitError(f"--target must be one of {', '.join(TARGETS)}, not {target!r}")
    if protocol not in PROTOCOLS:
        raise VisitkitError(f"--protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    if endurance and ENDURANCE_ITERATION not in [it.name for it in iterations]:
        raise VisitkitError(f"--endurance is {ENDURANCE_ITERATION}'s endurance test: include it in --iterations")
    region = region or cost.DEFAULT_REGION
    runs: list[RunPlan] = []
    for it in iterations:
        tests = ["breakpoint"] + (["endurance"] if endurance and it.name == ENDURANCE_ITERATION else [])
        for test in tests:
            runs.append(plan_run(it, test, protocol, target, profile, prices, region, first=not runs, workers=workers))
    applies = sum(1 for before, it in zip(iterations, iterations[1:]) if it.settings.raw != before.settings.raw)
    functions = len(iterations[0].settings.functions) if iterations else 0
    fleet_usd = (sum(run.steps["load"] + run.steps["fleet"] for run in runs) / 3600
                 * fleet.hourly_cost(workers, worker_type, region, prices) if workers else 0.0)
    return StudyPlan(target, protocol, region, runs,
                     destroy_s=assumed("destroy") if target == "gcp" and not keep else 0.0,
                     builds=functions * (1 + applies), fleet_usd=fleet_usd, endurance=endurance, workers=workers)


# ---- the budget ----------------------------------------------------------------------------------
Replan = Callable[..., StudyPlan]  # plan_study with the same arguments but those given


def over_budget(plan: StudyPlan, budget: float, replan: Replan) -> str | None:
    """None when the plan's cost is within `budget`; else why it will not start, and the changes that would
    bring it under, each with its cost."""
    if plan.usd <= budget:
        return None
    names = [run.iteration.name for run in plan.runs if run.test == "breakpoint"]
    tried: list[tuple[str, dict[str, Any]]] = []
    if plan.endurance:
        tried.append(("without --endurance", {"endurance": False}))
    if plan.protocol != "fast":
        tried.append(("--protocol fast", {"protocol": "fast"}))
    if plan.workers:
        tried.append(("without --workers (Locust on this machine)", {"workers": None}))
    cheaper = [where for where in cost.PER_MILLION_REGIONS if where != plan.region]
    tried += [(f"--region {where}", {"region": where}) for where in cheaper]
    for keep in range(len(names) - 1, 0, -1):
        kept = [name.removeprefix("iteration-") for name in names[:keep]]
        tried.append((f"--iterations {','.join(kept)}", {"iterations": names[:keep]}))
    def cost_with(change: dict[str, Any]) -> float | None:
        try:
            return replan(**change).usd
        except VisitkitError:
            return None  # e.g. iterations without iteration 3 and --endurance

    options = [f"{words} (US${usd:.2f})" for words, change in tried
               if (usd := cost_with(change)) is not None and usd <= budget]
    together: dict[str, Any] = {}
    for count, (_, change) in enumerate(tried, 1):  # no single change does: the changes in turn, together
        if options:
            break
        together.update(change)
        if (usd := cost_with(together)) is not None and usd <= budget:
            options.append(f"{' and '.join(words for words, _ in tried[:count])} together (US${usd:.2f})")
    under = "; ".join(options) or "nothing the plan can change: raise --budget, or run it on the twin (--target local)"
    return (f"the study is predicted to cost US${plan.usd:.2f} on Google Cloud, above --budget US${budget:.2f}: "
            f"not started. What would bring it under: {under}")


# ---- what it prints --------------------------------------------------------------------------------
def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def run_lines(run: RunPlan) -> list[str]:
    p, after = run.prediction, run.convergence
    first_429 = (f", first 429 {run.figure('first_429_users'):,.0f} users" if run.test == "breakpoint" else "")
    steps = ", ".join(f"{name} {minutes(seconds)}" for name, seconds in run.steps.items())
    return [f"{run.iteration.name} {run.test}: {run.why}",
            f"  the model ({p.profile}): knee {run.figure('knee_users'):,.0f} users, {run.figure('knee_rps'):,.0f} RPS"
            f"{first_429}; the store drains {p.drain_per_s:.1f} of {p.publish_per_s:.1f} visits/s; {run.visits:,.0f} "
            f"visits, {after['backlog_at_end']:,.0f} left at the end of the load, stored "
            f"{after['seconds_after_load']:,.0f} s after it",
            f"  minutes: {steps} = {minutes(run.total_s)}; on Google Cloud US${run.cost['total']:.2f}"]


def summary_lines(plan: StudyPlan, budget: float | None = None) -> list[str]:
    target = TARGET_MINUTES[plan.target]
    split = ", ".join(f"{service} {usd:.2f}" for service, usd in plan.by_service().items())
    lines = [f"the whole study on {plan.target}, protocol {plan.protocol}: {plan.minutes:.0f} minutes predicted "
             f"(target: under {target:g}); on Google Cloud in {plan.region} US${plan.usd:.2f} ({split})"
             + (f", --budget US${budget:.2f}" if budget is not None else f", target under US${TARGET_USD:g}")]
    if plan.destroy_s:
        lines.append(f"  of which the destroy at the end: {minutes(plan.destroy_s)} minutes")
    return lines


def assumption_lines(plan: StudyPlan) -> list[str]:
    used = {name for run in plan.runs for name in run.steps} | ({"destroy"} if plan.destroy_s else set())
    used |= {"build minutes", "build price"}  # the cost on Google Cloud, whatever the target
    lines = ["figures assumed, not measured here (scripts/visitkit/studies/plan.py, ASSUMED):"]
    for name, figure in ASSUMED.items():
        if name in used:
            shown = (f"{figure.value / 60:g} min" if figure.unit == "s" and figure.value >= 60 else
                     f"{figure.value:g} {figure.unit}")
            lines.append(f"  - {name}: {shown}: {figure.source}")
    return lines

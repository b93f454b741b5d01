"""A run's summary (summary.json) as a record: `Summary`, one field per top-level key, and a TypedDict per
section, so that every reader names a figure mypy knows and a misspelt key is a type error.

summary.json's format is the results folder's (FORMAT_VERSION, written into it as `format_version`).
`Summary.from_json` reads every summary.json of that format: the keys added after the first runs of it were
recorded (settings_line, audit, ledger, load_generator, model_load, missing_metrics, no_dead_letter_topic) may be
absent (so may gates, which only a run given thresholds or --expect has), and `to_json` leaves out again what
was absent, so a summary read and written back is the same JSON.
A key it does not know, or a missing one it needs, is refused (SummaryError), never dropped or guessed; so is a
summary of another format (format 1, before `format_version`: `visitkit report DIR` rebuilds it from the
folder's own files, which results.folder upgrades).

Sections read as plain JSON objects: a TypedDict only says what the kit writes and reads, it checks nothing
at run time. The per-function, per-page and per-component maps are dicts of them. The headline is a flat dict
of figures by name (`visits.lost`, `p95_ms.get-counter`): the names are data there (READMEs' checks and the
comparison's rows name them), so it stays a dict.
"""
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

from visitkit.errors import VisitkitError
from visitkit.model.capacity import LoadConvergence
from visitkit.samples import PushFigures

FORMAT_VERSION = 2  # of a results folder: written into run.json and summary.json


class SummaryError(VisitkitError):
    """A summary.json the record cannot read: of another format, or with keys missing or unknown."""


# ---- what the run recorded before the load (run.json) --------------------------------------------
class Profile(TypedDict):
    """The latency profile a local run added to each backend's round trip (twin/profile.py, Profile.record)."""
    name: str
    source: str  # where its figures come from (a file, or the command line)
    latency_ms: dict[str, float]  # ms per round trip, by backend (firestore, pubsub, frontend, push)


class PredictionFigures(TypedDict):
    """The capacity model's figures before the run (model/capacity.py, Prediction.as_dict); the keys added
    since the first runs were recorded are NotRequired."""
    profile: str
    capacity_rps: dict[str, float]  # by function: requests/s it serves at most
    response_ms: dict[str, float]  # by public function: mean response time without queueing
    cycle_s: float
    rps_per_user: float
    knee_users: float
    knee_rps: float
    limited_by: str
    first_429_users: float
    publish_per_s: float
    drain_per_s: float
    backlog_per_min: float
    extra_min_per_min: float
    load_minutes: float
    convergence_min: float
    machine_pages_per_s: NotRequired[float | None]
    machine_knee_users: NotRequired[float | None]
    machine_knee_rps: NotRequired[float | None]
    machine_limited_by: NotRequired[str | None]
    machine_first_429_users: NotRequired[float | None]
    machine_knee_visits_per_s: NotRequired[float | None]
    knee_visits_per_s: NotRequired[float | None]
    dwell_s: NotRequired[float]
    reads_per_visit: NotRequired[int]


class Twin(TypedDict):
    """The local twin's own figures at the end of the load (runs/targets.py, twin_figures)."""
    restarts: dict[str, int]  # by function: its instances' restarts
    push: PushFigures | None  # the push relay's, counted from the test's start; None when it did not answer


class WarmUp(TypedDict):
    users: int
    seconds: float
    acknowledged: int  # visits acknowledged during the warm-up (all stored before the test began)


# ---- the load, client side ----------------------------------------------------------------------
class ArrivalRate(TypedDict):
    """An open-model run's arrivals (results/arrivals.py, figures; the steady window is defined there)."""
    target: float | None  # visits/s: the rate held (endurance: its highest stage); a ramp's: the peak it reached
    ramp_per_s: float | None  # a ramp's rise, visits/s each second (breakpoint); None: a held rate
    achieved: float | None  # visits started per second over the steady window (None: no full second)
    window_target: float | None  # visits/s the target asked over the same window (a held rate's: the target)
    window: list[int] | None  # the steady window's first and last unix second
    seconds: int  # the steady window's seconds (an endurance test's held rate may come back: not always all between)
    started: int  # visits started, the whole load
    not_started: int  # arrivals the generator could not start (no user free in time), the whole load
    users_max: int | None  # the ceiling on users it could add
    gaps: NotRequired[str]  # "random": Poisson arrivals (absent: evenly spaced)


class Load(TypedDict):
    start: float | None  # unix seconds: the first second with users (None: Locust's history has none)
    end: float | None  # the last one
    seconds: float | None
    max_users: int
    requests: int
    failures: int
    failure_ratio: float | None  # None without requests
    workers: NotRequired[int]  # Locust workers (0: one process); absent in summaries before the fleet
    arrival_rate: NotRequired[ArrivalRate]  # an open-model run's only (run.json's load_model "open")


class Point(TypedDict):
    """A moment of the load: its time (unix seconds), users and requests per second."""
    time: float
    users: int
    rps: float


class P95Ceiling(Point):
    p95_ms: float  # the run's highest p95


class RatePoint(TypedDict):
    """A second of an open-model load (results/analysis.py, rate_series), its rates centred on it."""
    time: float
    offered: float  # visits/s started: the rate the system was offered (the knee's: where the two lines cross)
    target: float  # visits/s the target asked in that second
    served: float  # visits/s answered: the requests answered without failure over the requests of a visit
    users: int
    p95_ms: float | None


class RateBreakpoint(TypedDict):
    """An open-model run's breakpoint in visits/s (results/analysis.py, find_rate_breakpoint); None: not reached."""
    knee: RatePoint | None  # where the served rate stopped following the offered one
    first_failure: RatePoint | None
    peak_served: RatePoint | None


class Breakpoint(TypedDict):
    """Where the system stopped keeping up (results/analysis.py, find_breakpoint); None: not reached. An
    open-model run's knee is its `arrivals` knee's moment (with_rate_breakpoint), without a users' ratio."""
    knee: Point | None
    first_failure: Point | None
    peak_rps: Point | None
    p95_ceiling: P95Ceiling | None
    healthy_rps_per_user: float | None
    arrivals: NotRequired[RateBreakpoint]  # an open-model run's only (run.json's load_model "open")


Percentile = Literal["50%", "60%", "70%", "80%", "90%", "95%"]  # the study's columns (analysis.STUDY_PERCENTILES)
# One row of Locust's table per endpoint and page, Aggregated last (analysis.percentile_table).
PercentileRow = TypedDict("PercentileRow", {
    "method": str, "name": str, "requests": int, "failures": int, "mean_ms": float | None,
    "50%": float | None, "60%": float | None, "70%": float | None, "80%": float | None, "90%": float | None,
    "95%": float | None})


class ClientFigures(TypedDict):
    """One function as Locust saw it: requests, failures, request-weighted mean, worst page's p50 and p95."""
    requests: int
    failures: int
    mean_ms: float
    p50_ms: float | None
    p95_ms: float | None


# ---- the platform, server side --------------------------------------------------------------------
class ServerFigures(TypedDict):
    """One function during the load, from the platform's samples (analysis.server_by_function)."""
    service_ms: float | None
    service_ms_p95: float | None
    queue_ms: float | None
    max_queued: int | None
    responses_429: int | None


class Store(TypedDict, total=False):
    """The store path during the load (analysis.store_figures); empty ({}) for a run without server samples."""
    accepted_per_s: float | None
    delivered_per_s: float | None
    writes_per_s: float | None
    throughput_per_s: float | None  # `throughput_of` per second while there was a backlog
    throughput_of: str  # "stored" or "delivered": the counter throughput_per_s follows
    backlog_peak: int | None
    backlog_peak_time: float | None
    drain_per_s: float | None


class Convergence(TypedDict):
    """When the stored totals caught up with the acknowledged visits (analysis.convergence)."""
    converged: bool
    converged_at: float | None
    seconds_after_load: float | None
    load_seconds: float | None
    extra_minutes_per_minute: float | None
    waited_seconds: float | None


class VisitRow(TypedDict):
    """One page's visits (or the total's): what the client was told against what was stored. An exact audit
    (audit.exact_accounting) adds the fate read from each visit's marker; the totals (analysis.visit_accounting)
    do not. Where the exact audit read a store that had not settled, lost and duplicated are None (not known)
    and not_stored_yet and stored_while_moving say what it saw instead."""
    sent: int
    acknowledged: int
    refused: int
    failed: int
    unanswered: int
    rejected: int
    stored: int
    lost: int | None
    stored_unacknowledged: int
    duplicated: int | None  # None: not known, the store had not settled (an id counted twice is known: a number)
    not_stored_yet: NotRequired[int]  # a store not settled: acknowledged, no marker (still queued, or lost)
    stored_while_moving: NotRequired[int]  # a store not settled: the shards' growth beyond the markers
    gave_up: NotRequired[int]  # absent in summaries before the ledger's format 4
    retried: NotRequired[int]  # exact only
    acknowledged_stored: NotRequired[int]  # exact only
    refused_stored: NotRequired[int]  # exact only
    neither: NotRequired[int]  # exact only
    dead_lettered: NotRequired[int | None]  # the total's only; None: not measured


class SamplePart(TypedDict):
    """The sampled visits posted in one part of the load (audit.sample_figures), seconds into it."""
    start_s: float
    end_s: float
    visits_per_s: float  # all the part's visits, estimated: its sampled ones over the fraction
    sampled: int
    acknowledged: int
    lost: int  # acknowledged, not stored
    stored_unacknowledged: int


class SampledAudit(TypedDict):
    """The audit of a ledger's uniform sample of visit ids (audit.sample_figures)."""
    fraction: float  # of the visits kept by id
    planned_visits: int | None  # the plan the fraction was set from
    sampled: int
    acknowledged: int
    lost: int
    stored_unacknowledged: int
    loss_rate_bound: float | None  # the loss rate the sample rules out at `confidence`; None when some were lost
    confidence: float
    parts: list[SamplePart]


class Audit(TypedDict):
    """How the visits were audited (summary.audit_figures)."""
    method: str  # "exact", "sample" or "totals"
    why: str
    reads: int
    read_cost_usd: float | None
    lost_ids: list[str]  # the first acknowledged visits not stored
    sample: NotRequired[SampledAudit]  # the method "sample" only (ledgers of format 5)


class LedgerFigures(TypedDict):
    complete: bool
    workers: int
    missing_workers: list[str]  # workers whose final ledger did not arrive
    untracked: int  # visits counted beyond Locust's --ledger-ids without their ids (of the sample, if one)


class MissingMetric(TypedDict):
    """A Cloud Monitoring query a run could not read (cloud/monitoring.py, missing_entry)."""
    metric: str
    metric_type: str
    error: str
    code: int | None
    reason: str


class NoDeadLetterTopic(TypedDict):
    message_retention_seconds: int | None  # None when the settings did not parse


class PlatformFunction(TypedDict):
    requests: int | None
    responses_429: int | None
    responses_429_logged: int | None
    responses_5xx: int | None
    p50_ms_max: float | None
    p95_ms_max: float | None
    instances_max: int | None


class Platform(TypedDict):
    """Cloud Monitoring's figures over the whole window of a Google Cloud run (summary.platform_figures)."""
    functions: dict[str, PlatformFunction]
    undelivered_peak: int | None
    oldest_unacked_peak_s: float | None
    firestore_writes: int | None
    firestore_writes_peak_per_min: float | None
    deliveries: dict[str, int | None]  # by outcome (monitoring.DELIVERY_OUTCOMES)
    dead_lettered: int | None


class ResourceUse(TypedDict):
    """What one component consumed (twin/resources.py, summarize and platform_summary)."""
    cpu_seconds: float | None
    cpu_percent_mean: float | None
    cpu_percent_peak: float | None
    memory_peak_mb: float | None


class Cost(TypedDict):
    """The estimated cost of a Google Cloud run (model/cost.py, estimate)."""
    lines: list[Any]  # [(item, usage, amount)]: tuples as estimated, lists once read back from summary.json
    total: float
    as_of: str
    currency: str
    region: str | None
    tier: int | None
    left_out: list[str]


class MachineLoad(TypedDict):
    """The local machine's CPU at a moment (twin/resources.py, machine_at)."""
    cpu_percent: float
    cores: int | None
    busy: bool | None  # None: cores unknown


class Machine(TypedDict):
    knee: MachineLoad | None
    peak: MachineLoad | None


class ChaosEvent(TypedDict):
    """A fault injected during the load (twin/chaos.py), with what followed it."""
    time: float
    action: str
    target: NotRequired[str]
    error: NotRequired[str]
    seconds: NotRequired[float | None]
    server_errors: dict[str, int]  # 5xx by function, from the event to 10 s after it ended
    recovery_s: float | None


class ChaosVisits(TypedDict):
    acknowledged: int | None
    stored: int | None
    lost: int | None
    duplicated: int | None
    dead_lettered: int | None


class Chaos(TypedDict):
    plan: str | None
    events: list[ChaosEvent]
    visits: ChaosVisits
    redeliveries: int | None
    deliveries_already_counted: int | None


class Overload(TypedDict):
    """A spike test's overload and recovery (results/overload.py, figures)."""
    spike_users: int
    spike_s: float
    baseline_p95_ms: float | None
    spike_p95_ms: float | None
    recovery_s: float | None  # None: latency had not come back by the end of the load
    refused_429: int
    other_errors: int


class ColdStarts(TypedDict):
    """An autoscaled function's cold starts on the twin (twin/autoscaler.py, cold_start_figures)."""
    during_load: int
    under_load_count: int
    under_load_ms_median: float | None
    under_load_ms_max: float | None
    quiet_count: int | None  # None: a function not autoscaled (min_instances = max_instances), its starts unrecorded
    quiet_ms_median: float | None
    quiet_ms_max: float | None


class ScaleOutFunction(TypedDict):
    """One function's scale-out at a spike on the twin (results/scaleout.py, figures)."""
    lag_s: float | None  # after the step, until its queue is empty with the instances it needs up; None: not by its end
    instances_at_start: int | None
    instances_end: int | None  # at the spike's last second
    instances_max: int | None
    p95_first_ms: float | None  # its worst page's p95 in the spike's first EARLY_S s, the highest (None: no client)
    p95_steady_ms: float | None  # ... over the spike's last STEADY_SHARE, the median
    rps_before: float | None  # requests/s over the minute before the step
    rps_spike: float | None  # requests/s over the step
    service_ms: float | None  # HAProxy's mean service time over the steady part, the median
    # the run's own starts at the step: the median start of those launched in it, the service time (by Little's
    # law) while they started; None when none was
    start_step_ms: NotRequired[float | None]
    service_starting_ms: NotRequired[float | None]
    model_lag_s: NotRequired[float | None]  # the model's lag given the run's own figures above (results/scaleout.py)


class ScaleOut(TypedDict):
    """A spike test's scale-out on the twin with scaling "auto" (results/scaleout.py, figures)."""
    start: float  # unix s: the load's first step up (the spike's rise)
    end: float  # unix s: the spike's last second
    functions: dict[str, ScaleOutFunction]


class ProcessHealth(TypedDict):
    cpu_max: float
    lag_max_ms: float
    saturated_at: float | None


class Saturation(TypedDict):
    process: str
    time: float
    users: int
    why: str
    before_knee: bool


class Heartbeats(TypedDict):
    """The master's view of its workers (health.csv's worker columns; results/generator.py, heartbeats)."""
    expected: int
    missing_max: int
    missing_at: float | None
    heartbeat_late_max_s: float
    rebalances: int


class GeneratorWatch(TypedDict):
    """A watched run's warnings (results/generator.py, Watch): at `cpu_percent`, from `source`, shown `live`
    in the terminal (a local run) or once the files came (a fleet's)."""
    cpu_percent: float
    source: str | None
    live: bool
    warnings: list[Saturation]


class LoadGenerator(TypedDict):
    """Locust's own health (results/generator.py, figures)."""
    workers: int
    processes: int
    per_process: dict[str, ProcessHealth]
    saturated: list[Saturation]
    heartbeats: NotRequired[Heartbeats]  # absent: one process, or a health.csv from before them (unknown)
    watch: NotRequired[GeneratorWatch]  # runs watched while they ran


class Check(TypedDict):
    check: str
    holds: bool | None  # None: undetermined
    detail: str


class Verdict(TypedDict):
    """The verdict on the iteration's hypothesis (reports/verdict.py, judge)."""
    outcome: str
    hypothesis: str | None
    checks: list[Check]


class ThresholdOutcome(TypedDict):
    """A --threshold judged on the run's headline (results/thresholds.py, judge_gates)."""
    threshold: str  # as given, e.g. "visits.lost == 0"
    value: Any  # the headline's figure; None: not measured (then the threshold fails)
    holds: bool
    detail: str


class Expectation(TypedDict):
    """--expect: the verdict the run had to reach."""
    expected: str  # supported, not supported or undetermined
    outcome: str | None  # the verdict's (None: no verdict)
    holds: bool


class StoppedEarly(TypedDict):
    """--abort-on-fail stopped the load when a threshold judged during it failed (runs/load.py)."""
    at_s: float  # seconds after Locust was started
    time: float  # unix seconds
    threshold: str
    detail: str  # the live figure that failed it


class Gates(TypedDict):
    """What a run is judged by for CI (--threshold, --expect, --abort-on-fail): each outcome, and whether all
    held; absent from the summaries of runs given none."""
    passed: bool
    thresholds: list[ThresholdOutcome]
    expectation: Expectation | None
    abort_on_fail: bool
    stopped_early: StoppedEarly | None


ModelLoad = LoadConvergence  # the prediction applied to the users the run actually ran (capacity.convergence_for_load)
# The flat figures by name (results/summary.py, headline): `knee_users`, `visits.lost`, `p95_ms.get-counter`.
Headline = dict[str, Any]
Failure = tuple[str, str, int]  # (endpoint, error, occurrences)


@dataclass(kw_only=True)
class Summary:
    """summary.json: the fields in the order the file has its keys. `absent`: the keys the summary read did
    not have (written back only once given a value)."""
    iteration: str
    test: str
    target: str
    started: str | None
    results_dir: str
    settings: dict[str, Any] | None  # run.json's settings, as the settings file has them (visitkit.settings)
    settings_line: str | None = None
    shape: str | None
    profile: Profile | None
    prediction: PredictionFigures | None
    twin: Twin | None
    warm_up: WarmUp | None
    load: Load
    breakpoint: Breakpoint
    percentiles: list[PercentileRow]
    client: dict[str, ClientFigures]  # by public function
    server: dict[str, ServerFigures]  # by function; empty without server samples
    store: Store
    convergence: Convergence
    visits: dict[str, VisitRow]  # by page, and "total"
    audit: Audit | None = None
    ledger: LedgerFigures | None = None
    failures: list[Failure]  # the ten most frequent
    notes: list[str]
    server_source: str | None  # the samples' source (samples.Source)
    metrics_files: list[str]
    missing_metrics: list[MissingMetric] = field(default_factory=list)
    no_dead_letter_topic: NoDeadLetterTopic | None = None
    platform: Platform | None
    resources: dict[str, ResourceUse]  # by component
    cpu_ms_per_request: dict[str, float]  # by function
    cost: Cost | None
    machine: Machine | None
    chaos: Chaos | None
    overload: Overload | None
    # by autoscaled function, on a twin run with scaling "auto" (None: every instance ran all the time)
    cold_starts: dict[str, ColdStarts] | None = None
    # a spike test's on the twin with scaling "auto" (None or absent: another test, or fixed instances)
    scale_out: ScaleOut | None = None
    load_generator: LoadGenerator | None = None
    model_load: ModelLoad | None = None
    headline: Headline
    verdict: Verdict | None = None  # publish's, after the summary is made
    gates: Gates | None = None  # publish's, after the verdict: only for a run given thresholds or --expect
    format_version: int = FORMAT_VERSION
    absent: frozenset[str] = field(default=frozenset(), repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Summary":
        """The record of a summary.json's data (SummaryError: another format, a key missing or unknown)."""
        version = data.get("format_version", 1)
        if version != FORMAT_VERSION:
            rebuild = " (rebuild it from its folder: visitkit report DIR)" if version < FORMAT_VERSION else ""
            raise SummaryError(f"a summary of format {version}; this kit reads format {FORMAT_VERSION}{rebuild}")
        names = [f.name for f in dataclasses.fields(cls) if f.name != "absent"]
        optional = {f.name for f in dataclasses.fields(cls)
                    if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}
        missing = [name for name in names if name not in data and name not in optional]
        unknown = [key for key in data if key not in names]
        problems = ([f"without {', '.join(missing)}"] if missing else []) + (
            [f"with keys this kit does not know: {', '.join(unknown)}"] if unknown else [])
        if problems:
            raise SummaryError(f"a summary {' and '.join(problems)}")
        values = {name: data[name] for name in names if name in data}
        values["failures"] = [tuple(failure) for failure in data["failures"]]
        return cls(**values, absent=frozenset(name for name in names if name not in data))

    def to_json(self) -> dict[str, Any]:
        """The summary.json's data: what from_json read gives the same dict back. The sections are the
        record's own (not copies)."""
        data: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "absent" or (f.name in self.absent and value == _default(f)):
                continue
            data[f.name] = value
        data["failures"] = [list(failure) for failure in self.failures]
        return data


def _default(f: "dataclasses.Field[Any]") -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default

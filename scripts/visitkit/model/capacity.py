"""The capacity model: from an iteration's settings and a profile's service times, where the system's
knee, first 429 and backlog should be, before any load is run.

Each function serves at most instances x concurrency requests at once, so at most
  capacity = instances x concurrency / service time   requests per second,
and no instance serves more than its vCPUs allow: vCPU / CPU time per request (the profile's
cpu_ms, measured by scripts/benchmark-hot-path), which binds once concurrency is high.
The visitor (locust/locustfile.py) is a closed loop: per page one request to each public function,
then a wait of 3 to 5 s, so one user asks each public function for 1 / cycle requests per second,
  cycle = mean wait + the three response times.
RPS grows with users until the public function with the least capacity is full (the knee):
  knee users = its capacity x cycle,  knee RPS = 3 x its capacity.
Past the knee its queue grows until a user's cycle holds the extra wait (Little's law,
users = capacity x (cycle + wait)); a request that waits longer than the queue timeout gets a 429:
  users at the first 429 = capacity x (cycle + queue timeout).
Visits reach the topic at most as fast as the system serves pages (the bottleneck's capacity) and
store-inc-counter drains them at its own capacity, each push delivery holding a slot for its service
time plus the profile's push overhead (the delivery's round trip and acknowledgement); the difference
piles up as backlog, and the counters converge (backlog / drain) after the load.

A pull store (store_mode "pull", iteration 7) is no push target: its one instance (the lease holder) pulls
visits and commits them in batches, so it drains
  batch_size / (the profile's pull_batch_ms: per_batch + batch_size x per_message) x 1000   visits per second,
a full batch each commit once the backlog holds one, and it takes no request per visit. When the page embeds
its count (page_embeds_count) a visit skips get-counter's first read: at dwell 0 a page makes 2 requests, not 3.

get-counter with a cache (TTL > 0) reads Firestore at most once per page and TTL per instance, in
the background, and answers every request from memory in the profile's cache_hit_ms.

A reader's dwell (`dwell_s`, 0 by default: the study's visitor, who reads the count once per page): the page
re-reads get-counter every max(its refresh, the cache TTL) seconds (functions/serve_page.py), plus some jitter,
while its tab is visible and its reader active (functions/templates/page.html; it stops once its reader is idle),
so a visit that stays open S seconds makes at most 1 + floor(S / that interval) get-counter requests
(reads_per_visit: the jitter only spaces them out, so the figure errs high) and one to each other public function.
The knee is then where the public function with the least capacity per request it gets per visit is full:
  knee visits/s = min over public functions of capacity / requests per visit,
  knee RPS = knee visits/s x requests per visit (all public functions),
and a person stays on a page for the dwell instead of the visitor's 3-5 s wait. At dwell 0 every figure is the
study visitor's above.

On the local twin every part (functions, emulators, HAProxy, Toxiproxy, push relay, Locust) shares
one machine; a profile's `host` gives its cores and the CPU all of them spend per page, so the
machine serves at most cores x 1000 / CPU per page pages/s. A page costs cpu_ms_per_page when
get-counter answers from its cache, plus cpu_ms_per_counter_read each time it reads Firestore (its
call and the emulator's query). Where that is less than the bottleneck's capacity, the knee on this
machine comes there instead (`machine_*` figures).

An open-model run (locust/arrivals.py) offers visits at a rate whatever the latency, so its knee is a rate:
the served visits/s stop following the offered ones at knee visits/s (the bottleneck's capacity per visit),
where the closed loop's users do not matter. Past it the bottleneck's queue grows by the offered rate minus
its capacity: on a ramp of R visits/s each second from the knee, by R t^2 / 2 requests after t s, which the
capacity C serves in R t^2 / (2 C) s, so the first request refused for waiting the queue timeout T arrives
t = sqrt(2 C T / R) after the knee and is answered T later (first_429_visits_per_s):
  visits/s offered at the first 429 = C + R (T + sqrt(2 C T / R));
a rate held above the knee meets its first 429 at that rate, one held at or below it none. A visit is
published by its second request (the page, inc-counter, then get-counter: locust/locustfile.py, visit), and
new visits arrive whether the earlier ones have finished or not, so the visits reach the topic at the offered
rate up to what serve-page and inc-counter serve (and this machine, on the twin), whatever get-counter does
after them (convergence_for_load's open model), where the closed loop's users wait on the slowest of the three.
"""
import math
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, asdict, dataclass, field, replace
from typing import Any, Protocol, TypedDict

from visitkit.catalogue import (
    CATALOGUE,
    PAGE_FUNCTION,
    PAGES,
    PUBLISHER_FUNCTION,
    PUSH_FUNCTION,
    QUEUE_TIMEOUT_S,
    READER_FUNCTION,
)
from visitkit.errors import VisitkitError
from visitkit.settings import FunctionSettings, Settings

WAIT_SECONDS = (3.0, 5.0)  # the visitor's wait between pages (locust/locustfile.py)
PUBLIC = tuple(name for name, f in CATALOGUE.items() if f.public)  # one request each per page
BEFORE_PUBLISH = (PAGE_FUNCTION, PUBLISHER_FUNCTION)  # a visit's requests up to its publish (locustfile's visit)
DEFAULT_LOAD_MINUTES = 15.0  # the study's longest breakpoint run
MACHINE = "this machine's CPU"
# How often the page re-reads its count while open: functions/serve_page.py's COUNTER_REFRESH_SECONDS
# default, or the cache TTL when longer (a read sooner would be answered from the same cache).
PAGE_REFRESH_SECONDS = 5.0


class LatencyProfile(Protocol):
    """What the model reads of a latency profile: twin/profile.py's Profile, handed in (the model's room is
    below the twin's, so it names only what it reads)."""

    @property
    def name(self) -> str: ...
    @property
    def service_ms(self) -> Mapping[str, float]: ...  # function -> service time, ms
    @property
    def cache_hit_ms(self) -> float: ...
    @property
    def push_overhead_ms(self) -> float: ...
    @property
    def cpu_ms(self) -> Mapping[str, float] | None: ...  # function -> CPU ms per request (None: no CPU bound)
    @property
    def host(self) -> Mapping[str, float] | None: ...  # cores, cpu_ms_per_page[, cpu_ms_per_counter_read]
    # A pull store's batch commit, {"per_batch": ms, "per_message": ms}, is read with pull_batch_ms(profile): the
    # profile files give it (twin/profiles/*.json) and a Profile may not carry it yet.


def pull_batch_ms(profile: LatencyProfile) -> Mapping[str, float]:
    """{"per_batch", "per_message"} ms: what one batch commit of a pull store holds its one writer."""
    found = getattr(profile, "pull_batch_ms", None)
    if not found:
        raise VisitkitError(f"profile {profile.name} gives no pull_batch_ms (what a pull store's batch commit takes): "
                            "a pull store cannot be predicted on it")
    return found


def pull_commit_ms(settings: Settings, profile: LatencyProfile) -> float:
    """One full batch's commit, ms: the profile's per-batch time and per-message time for batch_size messages."""
    batch = pull_batch_ms(profile)
    return batch["per_batch"] + settings.pull.batch_size * batch["per_message"]


def pull_drain_per_s(settings: Settings, profile: LatencyProfile) -> float:
    """Visits a second a pull store commits at most: one instance (the lease holder), full batches back to back."""
    return settings.pull.batch_size / pull_commit_ms(settings, profile) * 1000


class LoadConvergence(TypedDict):
    """convergence_for_load's figures."""
    backlog_at_end: float  # visits not yet stored when the load ends
    seconds_after_load: float  # until they are
    extra_min_per_min: float | None  # None: a series of one moment, no load time


class HoldPlan(TypedDict):
    """hold_plan's answer."""
    settings: Settings
    prediction: "Prediction"
    raised: dict[str, tuple[int, int]]  # function -> (max_instances now, needed)


def instance_rate(concurrency: int, service_ms: float, ttl_s: float = 0, hit_ms: float | None = None) -> float:
    """Requests per second one instance serves at most: each request holds a slot service_ms; with a
    cache, hit_ms, since an expired total is answered at once while one read refreshes it outside
    the request (functions/get_counter.py): a read holds no request's slot. (Only a page's first
    read, or one of a page nobody asked for since TTL + a read's deadline, is waited for: none under
    load.)"""
    slot_ms = hit_ms if ttl_s > 0 else service_ms
    if slot_ms is None:
        raise ValueError("instance_rate: a function with a cache (ttl_s > 0) needs hit_ms")
    return concurrency / (slot_ms / 1000)


def counter_reads_per_s(settings: Settings, pages_per_s: float) -> float:
    """get-counter's Firestore reads per second when the visitors view `pages_per_s` pages a second
    (one get-counter request each): one per request without a cache; with one, at most one per page
    and TTL per instance, the requests spread over all its instances."""
    ttl = settings.cache_ttl_seconds
    if ttl <= 0:
        return pages_per_s
    return min(pages_per_s, settings.functions[READER_FUNCTION].max_instances * len(PAGES) / ttl)


def embedded_reads_per_s(settings: Settings, pages_per_s: float) -> float:
    """serve-page's Firestore reads per second when it embeds the count (page_embeds_count; else none): its own
    cache of the totals, by get-counter's rules (functions/totals.py), so at most one per page and TTL per
    instance."""
    if not settings.page_embeds_count:
        return 0.0
    ttl = settings.cache_ttl_seconds
    page_instances = settings.functions[PAGE_FUNCTION].max_instances
    return pages_per_s if ttl <= 0 else min(pages_per_s, page_instances * len(PAGES) / ttl)


def count_reads_per_s(settings: Settings, visits_per_s: float, reads_per_visit: int) -> float:
    """The aggregation reads of the counts per second: get-counter's for its reads_per_visit requests a visit and
    serve-page's when it embeds the count."""
    return (counter_reads_per_s(settings, visits_per_s * reads_per_visit)
            + embedded_reads_per_s(settings, visits_per_s))


def reread_interval(settings: Settings) -> float:
    """Seconds between the page's reads of its count while it stays open."""
    return max(PAGE_REFRESH_SECONDS, settings.cache_ttl_seconds)


def reads_per_visit(settings: Settings, dwell_s: float = 0) -> int:
    """get-counter requests one visit makes: the page's first read (none when the page embeds its count), then
    one each reread_interval while its reader stays dwell_s seconds."""
    if dwell_s < 0:
        raise VisitkitError(f"a dwell is 0 seconds or more, not {dwell_s:g}")
    first = 0 if settings.page_embeds_count else 1
    return first + math.floor(dwell_s / reread_interval(settings))


def requests_per_visit(settings: Settings, dwell_s: float = 0) -> dict[str, int]:
    """{public function: its requests per visit}: one each, get-counter reads_per_visit (0 possible: a page that
    embeds its count, read once)."""
    return {name: reads_per_visit(settings, dwell_s) if name == READER_FUNCTION else 1 for name in PUBLIC}


def instances_to_hold(settings: Settings, profile: LatencyProfile, visits_per_s: float,
                      dwell_s: float = 0) -> dict[str, int]:
    """{function: the max_instances it needs to serve visits_per_s visits a second whose reader stays dwell_s
    seconds, at its own concurrency, CPU and (get-counter) cache; never fewer than the settings give}: each
    public function gets its requests_per_visit, store-inc-counter one push delivery a visit (a pull store none:
    it stays one instance). An instance's rate does not depend on how many there are, so the instances needed
    are the requests over it, rounded up."""
    capacity = predict(settings, profile, dwell_s=dwell_s).capacity_rps
    per_visit = {**requests_per_visit(settings, dwell_s), PUSH_FUNCTION: 0 if settings.pulls else 1}
    needed: dict[str, int] = {}
    for name, spec in settings.functions.items():
        per_instance = capacity[name] / spec.max_instances
        needed[name] = max(spec.max_instances, math.ceil(visits_per_s * per_visit[name] / per_instance - 1e-9))
    return needed


def settings_to_hold(settings: Settings, profile: LatencyProfile, visits_per_s: float,
                     dwell_s: float = 0) -> Settings:
    """The settings with each function's max_instances raised to instances_to_hold (all else as set)."""
    needed = instances_to_hold(settings, profile, visits_per_s, dwell_s)
    return replace(settings, functions={name: replace(spec, max_instances=needed[name])
                                        for name, spec in settings.functions.items()})


def hold_plan(settings: Settings, profile: LatencyProfile, visits_per_s: float, dwell_s: float = 0) -> HoldPlan:
    """What holding visits_per_s takes: {"settings": settings_to_hold, "prediction": its Prediction, "raised":
    {function: (max_instances now, needed)} for those that must grow}."""
    held = settings_to_hold(settings, profile, visits_per_s, dwell_s)
    raised = {name: (spec.max_instances, held.functions[name].max_instances)
              for name, spec in settings.functions.items() if held.functions[name].max_instances > spec.max_instances}
    return {"settings": held, "prediction": predict(held, profile, dwell_s=dwell_s), "raised": raised}


def cpu_rate(spec: FunctionSettings, cpu_ms: float | None) -> float:
    """Requests per second an instance's vCPUs allow (infinite when the CPU cost is not known)."""
    return float(spec.effective_cpu) * 1000 / cpu_ms if cpu_ms else float("inf")


@dataclass(frozen=True)
class Prediction:
    profile: str
    capacity_rps: dict[str, float]  # function -> requests/s it serves at most
    response_ms: dict[str, float]  # public function -> mean response time without queueing
    cycle_s: float  # one page: wait plus the three response times
    rps_per_user: float
    knee_users: float
    knee_rps: float
    limited_by: str
    first_429_users: float
    publish_per_s: float  # visits accepted per second from the knee on
    drain_per_s: float  # store-inc-counter's capacity
    backlog_per_min: float  # backlog growth per minute of load past the knee
    extra_min_per_min: float  # convergence time per minute of load past the knee
    load_minutes: float
    convergence_min: float  # after load_minutes past the knee
    machine_pages_per_s: float | None = None  # pages/s the twin's machine serves at most (None: no host given)
    machine_knee_users: float | None = None  # the knee on that machine: the platform's or its CPU's, the lower
    machine_knee_rps: float | None = None
    machine_limited_by: str | None = None
    machine_first_429_users: float | None = None
    machine_knee_visits_per_s: float | None = None  # an open-model run's knee on that machine
    _: KW_ONLY  # the fields below are given by name; predict always gives knee_visits_per_s: no default
    knee_visits_per_s: float  # visits a second at the knee (knee_rps / requests per visit)
    dwell_s: float = 0.0  # a reader's dwell on each page (0: the study's visitor)
    reads_per_visit: int = 1  # get-counter requests per visit
    pull_batch_size: int | None = None  # a pull store's batch (None: Pub/Sub pushes each visit)
    page_embeds_count: bool = False  # the page skips get-counter's first read
    # function -> ms a request holds an instance (what Cloud Run bills): a public function's response, a push
    # delivery's slot (its service time and the round trip the profile adds, which holds the slot too)
    busy_ms: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def predict(settings: Settings, profile: LatencyProfile, queue_timeout: float = QUEUE_TIMEOUT_S,
            load_minutes: float = DEFAULT_LOAD_MINUTES, dwell_s: float = 0) -> Prediction:
    """The Prediction for Settings and a Profile (service times in ms), for visits whose reader stays dwell_s
    seconds on the page (0: the study's visitor)."""
    service, hit = profile.service_ms, profile.cache_hit_ms
    ttl = {name: settings.cache_ttl_seconds if name == READER_FUNCTION else 0 for name in settings.functions}
    slot_ms = {**service, PUSH_FUNCTION: service[PUSH_FUNCTION] + profile.push_overhead_ms}
    capacity = {name: spec.max_instances * min(instance_rate(spec.concurrency, slot_ms[name], ttl[name], hit),
                                               cpu_rate(spec, (profile.cpu_ms or {}).get(name)))
                for name, spec in settings.functions.items()}
    if settings.pulls:
        capacity[PUSH_FUNCTION] = pull_drain_per_s(settings, profile)
    per_visit = requests_per_visit(settings, dwell_s)
    asked = [name for name in PUBLIC if per_visit[name]]  # get-counter is not, at dwell 0 with the count embedded
    limited_by = min(asked, key=lambda name: capacity[name] / per_visit[name])
    visits = capacity[limited_by] / per_visit[limited_by]  # visits/s at the knee
    # get-counter gets reads_per_visit requests a visit and reads Firestore on a share of them
    counter_rps = visits * per_visit[READER_FUNCTION]
    reads_per_page = counter_reads_per_s(settings, counter_rps) / counter_rps if counter_rps else 0.0
    response = {name: service[name] for name in PUBLIC}
    if ttl[READER_FUNCTION]:
        response[READER_FUNCTION] = hit  # its reads are off the requests' path
    on_page = dwell_s or sum(WAIT_SECONDS) / 2  # the re-reads run during the dwell, not after it
    cycle = on_page + sum(response[name] for name in asked) / 1000
    publish, drain = visits, capacity[PUSH_FUNCTION]
    surplus = max(0.0, publish - drain)
    extra = surplus / drain
    requests = sum(per_visit.values())
    machine: dict[str, Any] = {}
    if profile.host and not dwell_s:  # the twin's visitor reads once per page
        cpu_per_page = (profile.host["cpu_ms_per_page"]
                        + reads_per_page * profile.host.get("cpu_ms_per_counter_read", 0))
        pages = profile.host["cores"] * 1000 / cpu_per_page
        held = min(visits, pages)
        machine = {"machine_pages_per_s": pages, "machine_knee_users": held * cycle,
                   "machine_knee_rps": requests * held,
                   "machine_limited_by": limited_by if visits <= pages else MACHINE,
                   "machine_first_429_users": held * (cycle + queue_timeout), "machine_knee_visits_per_s": held}
    return Prediction(
        **machine,
        profile=profile.name, capacity_rps=capacity, response_ms=response,
        cycle_s=cycle, rps_per_user=requests / cycle, knee_users=visits * cycle,
        knee_rps=requests * visits, limited_by=limited_by,
        first_429_users=visits * (cycle + queue_timeout), publish_per_s=publish, drain_per_s=drain,
        backlog_per_min=surplus * 60, extra_min_per_min=extra, load_minutes=load_minutes,
        convergence_min=extra * load_minutes, knee_visits_per_s=visits, dwell_s=dwell_s,
        reads_per_visit=per_visit[READER_FUNCTION], page_embeds_count=settings.page_embeds_count,
        pull_batch_size=settings.pull.batch_size if settings.pulls else None,
        busy_ms={**response, PUSH_FUNCTION: slot_ms[PUSH_FUNCTION]})


def figure_to_measure(prediction: Mapping[str, Any], target: str | None, name: str) -> Any:
    """A recorded prediction's figure `name` (e.g. knee_users) that a run on `target` is measured
    against: a local run meets this machine's CPU too, so its machine_ figure when there is one."""
    if target == "local" and prediction.get(f"machine_{name}") is not None:
        return prediction[f"machine_{name}"]
    return prediction.get(name)


def convergence_for_load(prediction: Mapping[str, Any], series: Sequence[tuple[float, float]],
                         target: str | None = "local", open_model: bool = False) -> LoadConvergence:
    """The model applied to the load a run actually applied: `series` is [(time, users running)], or for an
    open-model run [(time, visits/s started)]. Each second visits reach the topic at min(users / cycle, the
    knee's pages/s), or an open-model run's at min(the visits started, what the functions before the publish
    serve: the module's docstring), and the store drains drain_per_s of them; what is left when the load ends
    drains after it. The steady figure extra_min_per_min assumes the whole load past the knee; a ramp or stages
    spend part of it below."""
    # a page of the closed loop asks each public function once, but get-counter when the page embeds its count
    requests_per_page = len(PUBLIC) - (1 if prediction.get("page_embeds_count") else 0)
    pages_per_s = figure_to_measure(prediction, target, "knee_rps") / requests_per_page
    if open_model:
        machine = prediction.get("machine_pages_per_s") if target == "local" else None
        pages_per_s = min(*(prediction["capacity_rps"][name] for name in BEFORE_PUBLISH),
                          *([machine] if machine is not None else []))
    drain, backlog = prediction["drain_per_s"], 0.0
    for (t, level), (t_next, _) in zip(series, series[1:]):
        published = min(level if open_model else level / prediction["cycle_s"], pages_per_s)
        backlog = max(0.0, backlog + (published - drain) * (t_next - t))
    load_s = series[-1][0] - series[0][0] if len(series) > 1 else 0
    after_s = backlog / drain
    return {"backlog_at_end": backlog, "seconds_after_load": after_s,
            "extra_min_per_min": after_s / load_s if load_s else None}


def first_429_visits_per_s(knee_visits_per_s: float, ramp_per_s: float | None = None,
                           held_per_s: float | None = None, queue_timeout: float = QUEUE_TIMEOUT_S) -> float | None:
    """The visits/s offered when an open-model run meets its first 429 (the module's docstring), from the knee
    it is measured against: on a ramp of ramp_per_s visits/s each second, or at a rate held_per_s (None: at or
    below the knee, no 429)."""
    if ramp_per_s:
        return knee_visits_per_s + ramp_per_s * (queue_timeout + math.sqrt(2 * knee_visits_per_s * queue_timeout
                                                                            / ramp_per_s))
    return held_per_s if held_per_s is not None and held_per_s > knee_visits_per_s else None


def breakpoint_convergence(prediction: Mapping[str, Any], users_per_s: float, minutes: float,
                           target: str | None = "gcp") -> LoadConvergence:
    """convergence_for_load for a breakpoint ramp: users_per_s more users each second for `minutes`."""
    return convergence_for_load(prediction, [(t, users_per_s * t) for t in range(round(minutes * 60) + 1)], target)


def report_lines(p: Prediction, settings: Settings) -> list[str]:
    """What `visitkit predict` prints."""
    lines = [f"capacity model, profile {p.profile}:"]
    for name, spec in settings.functions.items():
        if name == PUSH_FUNCTION and p.pull_batch_size:
            lines.append(f"  {name:18} pull store: one instance, batches of {p.pull_batch_size}: {p.pull_batch_size} / "
                         f"{1000 * p.pull_batch_size / p.capacity_rps[name]:.0f} ms a commit = "
                         f"{p.capacity_rps[name]:.1f} visits/s")
            continue
        lines.append(f"  {name:18} {spec.max_instances} x {spec.concurrency} / "
                     f"{1000 * spec.concurrency / (p.capacity_rps[name] / spec.max_instances):.0f} ms "
                     f"= {p.capacity_rps[name]:.1f} requests/s")
    responses_ms = 1000 * (p.cycle_s - (p.dwell_s or sum(WAIT_SECONDS) / 2))
    requests = sum(requests_per_visit(settings, p.dwell_s).values())
    first = "none first: the page embeds its count" if p.page_embeds_count else "the first"
    if p.dwell_s:
        lines += [
            f"reads per visit: {p.reads_per_visit} get-counter requests at most ({first}, then one every "
            f"{reread_interval(settings):g} s while the page stays open {p.dwell_s:g} s: the longer of the page's "
            f"{PAGE_REFRESH_SECONDS:g} s refresh and the {settings.cache_ttl_seconds:g} s cache TTL, which the page's "
            f"jitter only lengthens), one to each other public function: {requests} requests per visit",
            f"demand per reader: {requests} requests per page every {p.cycle_s:.2f} s ({p.dwell_s:g} s dwell + "
            f"{responses_ms:.0f} ms of responses) = {p.rps_per_user:.3f} RPS per reader",
            f"knee: {p.knee_visits_per_s:.0f} visits/s, {p.knee_rps:.0f} RPS, {p.knee_users:.0f} readers on a page, "
            f"limited by {p.limited_by}",
        ]
    else:
        lines += [
            f"demand per user: {requests} requests per page every {p.cycle_s:.2f} s "
            f"({sum(WAIT_SECONDS) / 2:g} s wait + {responses_ms:.0f} ms of responses) "
            f"= {p.rps_per_user:.3f} RPS per user"
            + (" (the page embeds its count: no get-counter read)" if p.page_embeds_count else ""),
            f"knee: {p.knee_users:.0f} users, {p.knee_rps:.0f} RPS, limited by {p.limited_by}",
        ]
    lines += [
        *([f"knee on this machine: {p.machine_knee_users:.0f} users, {p.machine_knee_rps:.0f} RPS, limited by "
           f"{p.machine_limited_by} (it serves at most {p.machine_pages_per_s:.0f} pages/s)"]
          if p.machine_limited_by == MACHINE else []),
        f"first 429: {p.first_429_users:.0f} {'readers' if p.dwell_s else 'users'} (queue beyond the queue timeout)",
        f"store: visits published {p.publish_per_s:.1f}/s past the knee, drained {p.drain_per_s:.1f}/s"
        + (f" (pull store: one instance, batches of {p.pull_batch_size})" if p.pull_batch_size else ""),
        f"backlog: grows {p.backlog_per_min:.0f} visits per minute of load past the knee",
        f"convergence: {p.extra_min_per_min:.2f} extra minutes per minute of load; "
        f"{p.convergence_min:.1f} min after {p.load_minutes:g} min past the knee",
    ]
    return lines

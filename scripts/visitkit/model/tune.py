"""`visitkit tune`: from a target rate and goals to the cheapest, the fastest and a balanced set of settings the
model says hold them, each written as an iteration to test.

What it searches (the knobs the model judges):
- each function's concurrency and vCPUs, within Cloud Run's tiers as settings.py checks them (concurrency above 1
  needs 1 vCPU at least; above 1, whole vCPUs; 4 vCPUs need 2 GiB: CPU_MEMORY), and its max_instances: the fewest
  that give the rate x headroom (the capacity model) and the p95 goal (latency.py), and the fewest that leave no
  queue at the p95 at all;
- the cache TTL; the store mode, and a pull store's batch size (its one instance drains at most
  capacity.pull_drain_per_s: about 1,700 visits/s with batches of 1,000 on the study profile); whether the page
  embeds its count;
- shards: not searched but set, enough that no shard takes more than about one sustained write a second
  (Firestore's guidance, iterations/iteration-6/README.md) at the rate x headroom: they change only the reads
  billed per aggregation (cost.billed_reads_per_query).
What it does not judge, left at safe values: memory beyond its cost (the defaults the study ran, 1 GiB for a pull
store as iteration 7 measured its peak), min_instances 0 (cold starts are not in the model), timeouts, the
subscription's retries.

How: the bill of a month (cost.monthly_at) is a sum in which each function's choice changes only its own lines
(its Cloud Run line, and the aggregation reads its cache makes), so for each global choice (TTL, store, embedding)
each function's options are priced beside a fixed reference and only each function's options not beaten on both
cost and p95 are combined; a combination's bill is the reference's plus each choice's difference (exact at list
prices; with the free tiers, whose credits are shared, the kept candidates are ranked by it and the picks priced
exactly). Every combination is then judged on the whole: its knee (capacity.predict), the quota, the freshness.
"""
import itertools
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from visitkit.catalogue import FUNCTIONS, PAGE_FUNCTION, PAGES, PUBLISHER_FUNCTION, PUSH_FUNCTION, READER_FUNCTION
from visitkit.model import capacity, cost, latency, response_bytes
from visitkit.settings import FunctionSettings, Settings, parse_settings

# Cloud Run's CPU tiers as a function of the concurrency (settings.py's rules) and the memory a vCPU count needs at
# least (https://cloud.google.com/run/docs/configuring/services/cpu, read 2026-11-28: 4 vCPUs need 2 GiB, 6 and 8
# need 4 GiB); below it the default the study ran.
CPU_MEMORY = {"0.167": "256M", "1": "256M", "2": "256M", "4": "2Gi"}
SINGLE_CPUS = ("0.167", "1")  # concurrency 1: 1/6 vCPU (the default) or a whole one
SHARED_CPUS = ("1", "2", "4")  # concurrency above 1 needs 1 vCPU at least
CONCURRENCIES = (1, 8, 20, 40, 80, 160, 250, 500, 1000)
CACHE_TTLS = (0, 1, 5, 10, 30)
BATCH_SIZES = (100, 250, 500, 1000)
MAX_INSTANCES = 1000  # settings.py's and variables.tf's ceiling
PULL_STORE = FunctionSettings(max_instances=1, min_instances=1, concurrency=1, cpu="1", memory="1Gi")
IDLE_READER = FunctionSettings(max_instances=1, concurrency=80)  # get-counter that no visit asks (page embeds)
WRITES_PER_SHARD_S = 1.0  # Firestore's guidance: about one sustained write a second per document
# ASSUMED default regional quotas: the values Cloud Run's own refusal quoted in googlecodelabs/feedback#1856
# (scripts/visitkit/rehearsal/recorded/README.md): 20 vCPUs and 40 GiB. A project's own may differ: --project reads
# them (cloud/preflight.py, tune_quota), --quota-vcpu / --quota-memory-gib give them.
DEFAULT_QUOTA_VCPU, DEFAULT_QUOTA_MEMORY_GIB = 20.0, 40.0
ASSUMED, GIVEN = "ASSUMED", "given"  # where a quota's figure came from, beside "read from project P" (read_from)
STORE_CHOICES = ("any", "push", "pull")
NEW_DESIGN_RATIO = 1.5  # a pick further than this above the physical floor: a new design is needed there
UNREACHABLE = 3  # the exit status when no settings hold the goals (as a failed gate)
REASONS = ("too slow", "backlog", "stale", "quota", "instances")


@dataclass(frozen=True)
class Goals:
    visits_per_s: float
    p95_ms: float = 300.0  # each request's p95
    freshness_s: float = 30.0  # a stored visit shows within this long (cache TTL + store lag)
    headroom: float = 1.5  # the knee and the store's drain at least this many times the rate
    dwell_s: float = 0.0


def read_from(project: str) -> str:
    return f"read from project {project}"


@dataclass(frozen=True)
class Quota:
    """The region's Cloud Run allocation the search stays within (math.inf: unlimited), each figure with where it
    came from: ASSUMED (the default above), GIVEN (--quota-vcpu, --quota-memory-gib) or read_from(project)."""
    vcpu: float = DEFAULT_QUOTA_VCPU
    memory_gib: float = DEFAULT_QUOTA_MEMORY_GIB
    vcpu_from: str = ASSUMED
    memory_from: str = ASSUMED

    @property
    def assumed(self) -> bool:
        return ASSUMED in (self.vcpu_from, self.memory_from)

    def shown(self) -> str:
        """"20 vCPUs and 40 GiB (ASSUMED)", or each figure with its own source where they differ."""
        def amount(value: float, unit: str) -> str:
            return f"unlimited {unit}" if math.isinf(value) else f"{value:,.4g} {unit}"

        vcpu, memory = amount(self.vcpu, "vCPUs"), amount(self.memory_gib, "GiB")
        if self.vcpu_from == self.memory_from:
            return f"{vcpu} and {memory} ({self.vcpu_from})"
        return f"{vcpu} ({self.vcpu_from}) and {memory} ({self.memory_from})"

    def record(self) -> dict[str, Any]:
        """For tune.json: None where unlimited (JSON has no infinity)."""
        return {"vcpu": None if math.isinf(self.vcpu) else self.vcpu, "vcpu_from": self.vcpu_from,
                "memory_gib": None if math.isinf(self.memory_gib) else self.memory_gib,
                "memory_from": self.memory_from}


def quota_for(options: Any, read: Quota | None = None) -> Quota:
    """The quota searched within: each figure given (--quota-vcpu, --quota-memory-gib) over the one read from the
    project (`read`, tune_quota's) over the ASSUMED default."""
    known = read or Quota()
    vcpu = (options.quota_vcpu, GIVEN) if options.quota_vcpu is not None else (known.vcpu, known.vcpu_from)
    memory = ((options.quota_memory_gib, GIVEN) if options.quota_memory_gib is not None
              else (known.memory_gib, known.memory_from))
    return Quota(vcpu[0], memory[0], vcpu[1], memory[1])


@dataclass(frozen=True)
class Space:
    """What is searched; tests give a smaller one."""
    concurrencies: tuple[int, ...] = CONCURRENCIES
    cache_ttls: tuple[int, ...] = CACHE_TTLS
    batch_sizes: tuple[int, ...] = BATCH_SIZES
    stores: str = "any"  # any, push or pull
    embeds: tuple[bool, ...] = (False, True)
    single_cpus: tuple[str, ...] = SINGLE_CPUS
    shared_cpus: tuple[str, ...] = SHARED_CPUS


@dataclass(frozen=True)
class Option:
    """One function's choice: its settings and what they give at the rate."""
    spec: FunctionSettings
    p95_ms: float
    surge_p95_ms: float  # at the rate x headroom
    monthly_usd: float  # the reference's bill with this choice
    vcpu: float
    memory_gib: float


@dataclass(frozen=True)
class Candidate:
    settings: Settings
    prediction: capacity.Prediction
    monthly_usd: float
    p95_ms: float  # the slowest request's
    slowest: str
    visit_p95_ms: float  # the visit's requests' p95s added: what "fastest" orders by
    surge_p95_ms: float  # the same at the rate x headroom (a surge the headroom is for): its tie-break
    freshness_s: float
    headroom: float  # knee / rate
    binds: str  # the limit that binds first
    vcpu: float
    memory_gib: float


@dataclass
class Search:
    candidates: list[Candidate] = field(default_factory=list)
    considered: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    stops: dict[str, str] = field(default_factory=dict)  # reason -> what stops it and what would lift it


def memory_gib(memory: str) -> float:
    return cost.memory_gib(memory)


def global_choices(space: Space) -> Iterable[tuple[int, str, int, bool]]:
    """(cache TTL, store mode, batch size or 0, page embeds count) for every global choice."""
    stores = [("push", 0)] if space.stores in ("any", "push") else []
    stores += [("pull", b) for b in space.batch_sizes] if space.stores in ("any", "pull") else []
    for ttl, (mode, batch), embeds in itertools.product(space.cache_ttls, stores, space.embeds):
        yield ttl, mode, batch, embeds


def shards_for(goals: Goals, mode: str, batch: int, flush_ms: int) -> int:
    """Shards per page so that none takes more than WRITES_PER_SHARD_S at the rate x headroom: push, a write per
    visit on its page's random shard; pull, a write per page per batch commit (at most a full batch's, or one
    each flush)."""
    rate = goals.visits_per_s * goals.headroom
    writes_per_page = rate / len(PAGES) if mode == "push" else rate / batch + 1000 / flush_ms
    return max(1, math.ceil(writes_per_page / WRITES_PER_SHARD_S))


def base_raw(goals: Goals, ttl: int, mode: str, batch: int, embeds: bool) -> dict[str, Any]:
    """A settings file's content for the global choice, every function at a placeholder."""
    flush_ms = 500
    raw: dict[str, Any] = {"shards_per_page": shards_for(goals, mode, batch, flush_ms), "cache_ttl_seconds": ttl,
                           "functions": {name: {"max_instances": 1, "concurrency": 80} for name in FUNCTIONS}}
    if mode == "pull":
        raw["store_mode"] = "pull"
        raw["pull"] = {"batch_size": batch, "flush_ms": flush_ms, "dedup_window_minutes": 15}
        raw["functions"][PUSH_FUNCTION] = spec_raw(PULL_STORE)
    if embeds:
        raw["page_embeds_count"] = True
    return raw


def spec_raw(spec: FunctionSettings) -> dict[str, Any]:
    """A function's settings as a settings file writes them (defaults left out)."""
    raw: dict[str, Any] = {"max_instances": spec.max_instances, "concurrency": spec.concurrency}
    if spec.min_instances:
        raw["min_instances"] = spec.min_instances
    if spec.cpu is not None:
        raw["cpu"] = spec.cpu
    if spec.memory != FunctionSettings.memory:
        raw["memory"] = spec.memory
    return raw


def with_function(settings: Settings, name: str, spec: FunctionSettings) -> Settings:
    return replace(settings, functions={**settings.functions, name: spec})


def shapes(space: Space) -> list[FunctionSettings]:
    """Each (concurrency, vCPUs, memory) a function may take, at one instance."""
    found = []
    for concurrency in space.concurrencies:
        for cpu in space.single_cpus if concurrency == 1 else space.shared_cpus:
            found.append(FunctionSettings(max_instances=1, concurrency=concurrency, cpu=cpu, memory=CPU_MEMORY[cpu]))
    return found


def function_p95(settings: Settings, profile: capacity.LatencyProfile, name: str, demand: float,
                 goals: Goals) -> float:
    """`name`'s p95 fed `demand` requests/s."""
    return latency.one_function(settings, profile, name, demand, goals.dwell_s).p95_ms


def instance_counts(settings: Settings, profile: capacity.LatencyProfile, name: str, shape: FunctionSettings,
                    demand: float, goals: Goals) -> tuple[list[int], str | None]:
    """([the fewest instances of `shape` that hold the headroom and the p95 goal, the fewest with no queue at the
    p95]; None, or the reason none do). The p95 goal is a visitor's request's: a push delivery's time counts in
    the freshness instead."""
    goal_ms = goals.p95_ms if name in capacity.PUBLIC else math.inf
    one = capacity.predict(with_function(settings, name, shape), profile, dwell_s=goals.dwell_s)
    per_instance = one.capacity_rps[name]
    fewest = max(1, math.ceil(goals.headroom * demand / per_instance - 1e-9))
    if fewest > MAX_INSTANCES:
        return [], "instances"

    def p95(count: int) -> float:
        return function_p95(with_function(settings, name, replace(shape, max_instances=count)), profile, name,
                            demand, goals)

    def first(ok: Any) -> int | None:  # the fewest instances from `fewest` on for which ok(p95) holds
        if ok(p95(fewest)):
            return fewest
        high = fewest
        while not ok(p95(high)):
            if high == MAX_INSTANCES:
                return None
            high = min(MAX_INSTANCES, high * 2)
        low = high // 2 if high > fewest else fewest
        while low + 1 < high:
            middle = (low + high) // 2
            low, high = (low, middle) if ok(p95(middle)) else (middle, high)
        return high

    floor_ms = p95(MAX_INSTANCES)  # no queue left: the service time
    if floor_ms > goal_ms:
        return [], "too slow"
    counts = [first(lambda ms: ms <= goal_ms), first(lambda ms: ms <= floor_ms * (1 + 1e-9))]
    return sorted({count for count in counts if count is not None}), None


def pareto(options: Sequence[Option]) -> list[Option]:
    """The options no other beats on cost, p95 and p95 at the headroom's rate together."""
    def key(o: Option) -> tuple[float, float, float]:
        return o.monthly_usd, o.p95_ms, o.surge_p95_ms

    def beaten(o: Option) -> bool:
        return any(all(x <= y for x, y in zip(key(other), key(o))) and key(other) != key(o) for other in options)
    kept: dict[tuple[float, float, float], Option] = {}
    for option in options:
        if not beaten(option):
            kept.setdefault(key(option), option)
    return sorted(kept.values(), key=key)


def binding_limit(settings: Settings, prediction: capacity.Prediction, profile: capacity.LatencyProfile,
                  goals: Goals) -> str:
    """The limit the rate meets first as it grows: the part with the least capacity over its demand, and why."""
    per_visit = {**capacity.requests_per_visit(settings, goals.dwell_s), PUSH_FUNCTION: 1}
    ratios = {name: prediction.capacity_rps[name] / count for name, count in per_visit.items() if count}
    name = min(ratios, key=lambda n: ratios[n])
    if name == PUSH_FUNCTION and settings.pulls:
        return f"the pull store's one instance ({ratios[name]:,.0f} visits/s, batches of {settings.pull.batch_size})"
    spec = settings.functions[name]
    cpu_bound = capacity.cpu_rate(spec, (profile.cpu_ms or {}).get(name)) * spec.max_instances
    why = "its vCPUs" if math.isclose(cpu_bound, prediction.capacity_rps[name]) else "its instances x concurrency"
    return f"{name}: {why} ({ratios[name]:,.0f} visits/s)"


def search(goals: Goals, profile: capacity.LatencyProfile, prices: Mapping[str, Any], region: str,
           quota: Quota = Quota(), space: Space = Space(), free_tier: bool = False) -> Search:
    """Every combination kept (module docstring), with the count considered and each rejection's reason."""
    found = Search()
    rate = goals.visits_per_s
    for ttl, mode, batch, embeds in global_choices(space):
        reference = parse_settings(base_raw(goals, ttl, mode, batch, embeds), "tune")
        found.considered += 1
        if mode == "pull":
            drain = capacity.pull_drain_per_s(reference, profile)
            if drain < goals.headroom * rate:
                found.rejected["backlog"] += 1
                best = found.stops.get("_best_drain")
                if best is not None and float(best) >= drain:
                    continue
                found.stops["_best_drain"] = f"{drain:.6g}"
                found.stops["backlog"] = (
                    f"the pull store's one instance drains at most {drain:,.0f} visits/s with batches of {batch} "
                    f"(profile {profile.name}), below {goals.headroom:g} x {rate:,.0f}: "
                    + ("allow the push store (--store any), or a lower rate" if space.stores == "pull"
                       else "a lower rate, or the push store (see its reasons)"))
                continue
        per_visit = {**capacity.requests_per_visit(reference, goals.dwell_s), PUSH_FUNCTION: 0 if mode == "pull" else 1}
        searched = [name for name in FUNCTIONS if per_visit[name]]
        if READER_FUNCTION not in searched:
            reference = with_function(reference, READER_FUNCTION, IDLE_READER)
        options: dict[str, list[Option]] = {}
        for name in searched:  # the reference: each function's first shape, enough instances for the headroom
            shape = shapes(space)[0]
            per_instance = capacity.predict(with_function(reference, name, shape), profile).capacity_rps[name]
            count = min(MAX_INSTANCES, max(1, math.ceil(goals.headroom * rate * per_visit[name] / per_instance)))
            reference = with_function(reference, name, replace(shape, max_instances=count))
        base = cost.monthly_at(reference, capacity.predict(reference, profile, dwell_s=goals.dwell_s), rate, prices,
                               region, free_tier)["total"]
        for name in searched:
            priced = []
            for shape in shapes(space):
                found.considered += 1
                counts, why = instance_counts(reference, profile, name, shape, rate * per_visit[name], goals)
                if why:
                    found.rejected[why] += 1
                    if why == "too slow":
                        service = function_p95(with_function(reference, name, replace(shape, max_instances=1000)),
                                               profile, name, rate * per_visit[name], goals)
                        found.stops.setdefault("too slow", (
                            f"{name} answers in {service:,.0f} ms at best as {shape.concurrency} at once on "
                            f"{shape.cpu} vCPU (its service time, profile {profile.name}), above the "
                            f"{goals.p95_ms:g} ms goal: a slower p95 goal, or a faster function"))
                    continue
                for count in counts:
                    spec = replace(shape, max_instances=count)
                    settings = with_function(reference, name, spec)
                    bill = cost.monthly_at(settings, capacity.predict(settings, profile, dwell_s=goals.dwell_s),
                                           rate, prices, region, free_tier)["total"]
                    demand = rate * per_visit[name]
                    priced.append(Option(spec, function_p95(settings, profile, name, demand, goals),
                                         function_p95(settings, profile, name, demand * goals.headroom, goals), bill,
                                         count * float(spec.effective_cpu), count * memory_gib(spec.memory)))
            if not priced:
                options = {}
                break
            options[name] = pareto(priced)
        if not options:
            continue
        fixed = [name for name in FUNCTIONS if name not in options]
        fixed_vcpu = sum(reference.functions[n].max_instances * float(reference.functions[n].effective_cpu)
                         for n in fixed)
        fixed_memory = sum(reference.functions[n].max_instances * memory_gib(reference.functions[n].memory)
                           for n in fixed)
        names = list(options)
        for chosen in itertools.product(*(options[n] for n in names)):
            found.considered += 1
            vcpu = fixed_vcpu + sum(o.vcpu for o in chosen)
            memory = fixed_memory + sum(o.memory_gib for o in chosen)
            if vcpu > quota.vcpu + 1e-9 or memory > quota.memory_gib + 1e-9:
                found.rejected["quota"] += 1
                least = found.stops.get("_least_vcpu")
                if least is None or vcpu < float(least):
                    found.stops["_least_vcpu"] = f"{vcpu:.6g}"
                    found.stops["_least_memory"] = f"{memory:.6g}"
                continue
            settings = reference
            for name, option in zip(names, chosen):
                settings = with_function(settings, name, option.spec)
            prediction = capacity.predict(settings, profile, dwell_s=goals.dwell_s)
            latencies = latency.predict_latency(settings, profile, rate, goals.dwell_s)
            fresh = latency.freshness_s(settings, profile, rate, latencies)
            if fresh > goals.freshness_s:
                found.rejected["stale"] += 1
                found.stops.setdefault("stale", (
                    f"a stored visit shows {fresh:,.1f} s after it at best (cache TTL {settings.cache_ttl_seconds} s "
                    f"+ the store's lag) against the {goals.freshness_s:g} s goal"))
                continue
            asked = [name for name in capacity.PUBLIC if name in latencies]
            slowest, worst = latency.worst_p95_ms(latencies, tuple(asked))
            monthly = base + sum(o.monthly_usd - base for o in chosen)
            found.candidates.append(Candidate(
                settings=settings, prediction=prediction, monthly_usd=monthly, p95_ms=worst, slowest=slowest,
                visit_p95_ms=sum(latencies[name].p95_ms for name in asked),
                surge_p95_ms=sum(latency.predict_latency(settings, profile, rate * goals.headroom, goals.dwell_s)
                                 [name].p95_ms for name in asked), freshness_s=fresh,
                headroom=min(prediction.knee_visits_per_s, prediction.drain_per_s) / rate,
                binds=binding_limit(settings, prediction, profile, goals), vcpu=vcpu, memory_gib=memory))
    found.stops.pop("_best_drain", None)
    if "_least_vcpu" in found.stops:
        least_vcpu, least_memory = float(found.stops.pop("_least_vcpu")), float(found.stops.pop("_least_memory"))
        found.stops["quota"] = (
            f"the leanest settings need {least_vcpu:,.1f} vCPUs and {least_memory:,.1f} GiB of Cloud Run in the "
            f"region, beyond its quota of {quota.shown()}: ask for more ("
            + "; ".join(f"gcloud quotas preferences create --service=run.googleapis.com --quota-id={quota_id} "
                        f"--preferred-value={value} --dimensions=region={region}"
                        for quota_id, value in quota_asks(least_vcpu, least_memory, quota)) + ")"
            + (", or read the project's own with --project P (or give them with --quota-vcpu / --quota-memory-gib)"
               if quota.assumed else ""))
    return found


def quota_asks(vcpu: float, memory_gib: float, quota: Quota) -> list[tuple[str, int]]:
    """(Cloud Quotas' id, the value to ask for in the quota's own unit) of each Cloud Run quota `vcpu` and
    `memory_gib` go beyond: CPU allocation in milli-vCPUs, memory allocation in bytes (cloud/quotas.py reads them)."""
    asks = []
    if vcpu > quota.vcpu + 1e-9:
        asks.append(("CpuAllocPerProjectRegion", math.ceil(vcpu) * 1000))
    if memory_gib > quota.memory_gib + 1e-9:
        asks.append(("MemAllocPerProjectRegion", math.ceil(memory_gib) * 2 ** 30))
    return asks


@dataclass(frozen=True)
class Picks:
    cheapest: Candidate
    fastest: Candidate
    balanced: Candidate


def picks(candidates: Sequence[Candidate]) -> Picks:
    """The cheapest (then the fastest of those); the fastest: the least of its visit's p95s added at the rate, then
    at the rate x headroom (how it takes a surge), then the cheapest; and the balanced one: the least sum of its
    cost over the cheapest's and its surge p95 over the fastest's."""
    cheapest = min(candidates, key=lambda c: (round(c.monthly_usd, 6), c.visit_p95_ms, c.surge_p95_ms))
    fastest = min(candidates, key=lambda c: (round(c.visit_p95_ms, 6), round(c.surge_p95_ms, 6), c.monthly_usd))
    balanced = min(candidates, key=lambda c: (c.monthly_usd / cheapest.monthly_usd
                                              + c.surge_p95_ms / fastest.surge_p95_ms, c.monthly_usd))
    return Picks(cheapest, fastest, balanced)


def floor_monthly(visits_per_s: float, prices: Mapping[str, Any], region: str) -> float:
    """The physical floor of a month's bill at the rate: per visit two Cloud Run request fees (the page, the
    visit's publish) and the egress of those two answers (response_bytes.py), nothing else."""
    run, _, _ = cost.regional(prices, region)
    request_fees = 2 * run["per_million_requests"] / 1e6
    egress = (response_bytes.answer_bytes(PAGE_FUNCTION) + response_bytes.answer_bytes(PUBLISHER_FUNCTION)) \
        / cost.GIB * cost.egress_price(prices, region)
    return visits_per_s * cost.MONTH_S * (request_fees + egress)


def to_raw(settings: Settings) -> dict[str, Any]:
    """The settings file's content for a candidate (parse_settings reads it back to the same settings)."""
    raw: dict[str, Any] = {"shards_per_page": settings.shards_per_page,
                           "cache_ttl_seconds": settings.cache_ttl_seconds}
    if settings.pulls:
        raw["store_mode"] = "pull"
        raw["pull"] = {"batch_size": settings.pull.batch_size, "flush_ms": settings.pull.flush_ms,
                       "dedup_window_minutes": settings.pull.dedup_window_minutes}
    if settings.page_embeds_count:
        raw["page_embeds_count"] = True
    raw["functions"] = {name: spec_raw(spec) for name, spec in settings.functions.items()}
    return raw


def settings_text(settings: Settings) -> str:
    """The settings file as the iterations write theirs: one line per function."""
    raw = to_raw(settings)
    functions = raw.pop("functions")
    lines = [f'  "{key}": {json.dumps(value)},' for key, value in raw.items()]
    width = max(len(name) for name in functions) + 3
    rows = [f'    {json.dumps(name) + ":":{width}} {json.dumps(spec).replace("{", "{ ").replace("}", " }")}'
            for name, spec in functions.items()]
    return "{\n" + "\n".join(lines) + '\n  "functions": {\n' + ",\n".join(rows) + "\n  }\n}\n"


def describe(candidate: Candidate) -> str:
    """The settings in one line."""
    s = candidate.settings
    parts = []
    for name, spec in s.functions.items():
        if name == PUSH_FUNCTION and s.pulls:
            parts.append(f"{name} pull, batches of {s.pull.batch_size}")
        elif name == READER_FUNCTION and s.page_embeds_count and not candidate.prediction.reads_per_visit:
            parts.append(f"{name} idle ({spec.max_instances}x{spec.concurrency})")
        else:
            parts.append(f"{name} {spec.max_instances}x{spec.concurrency} on {spec.effective_cpu} vCPU")
    embeds = ", the page embeds its count" if s.page_embeds_count else ""
    return f"{'; '.join(parts)}; cache {s.cache_ttl_seconds} s, {s.shards_per_page} shards{embeds}"


PICKS = ("cheapest", "fastest", "balanced")


def add_arguments(parser: Any) -> None:
    """The tune command's options (an argparse parser)."""
    parser.add_argument("--visits-per-s", type=float, required=True, metavar="R", help="the target rate")
    parser.add_argument("--p95-ms", type=float, default=300.0,
                        help="each request's p95 at the rate, at most (default: %(default)g)")
    parser.add_argument("--freshness-s", type=float, default=30.0,
                        help="a stored visit shows within this long: cache TTL + the store's lag "
                             "(default: %(default)g)")
    parser.add_argument("--headroom", type=float, default=1.5,
                        help="the knee and the store's drain at least this many times the rate "
                             "(default: %(default)g)")
    parser.add_argument("--region", default=cost.DEFAULT_REGION, help="whose prices (default: %(default)s)")
    parser.add_argument("--free-tier", action="store_true", help="take Google's free tiers off the bills")
    parser.add_argument("--profile", default="study", help="service times: study (default) or a profile file")
    parser.add_argument("--dwell", type=float, default=0.0, metavar="SECONDS",
                        help="how long a reader stays on a page, re-reading the count (default 0)")
    parser.add_argument("--store", choices=STORE_CHOICES, default="any",
                        help="the store modes searched (default: any)")
    parser.add_argument("--project", metavar="P",
                        help="read the region's Cloud Run CPU and memory quotas from project P, as the preflight "
                             "reads them (Cloud Quotas; application-default credentials and cloudquotas.quotas.get); "
                             "one that cannot be read is a note, and its ASSUMED default stays")
    parser.add_argument("--quota-vcpu", type=float,
                        help=f"the region's Cloud Run vCPU quota, over the project's (default: --project's, else "
                             f"{DEFAULT_QUOTA_VCPU:g}, ASSUMED)")
    parser.add_argument("--quota-memory-gib", type=float,
                        help=f"the region's Cloud Run memory quota, GiB, over the project's (default: --project's, "
                             f"else {DEFAULT_QUOTA_MEMORY_GIB:g}, ASSUMED)")
    parser.add_argument("--write", choices=PICKS, default="cheapest", help="the pick written as an iteration")
    parser.add_argument("--out", type=Path,
                        help="the iteration folder to write (default: iterations/tuned-<R>-per-s-p95-<P>ms)")
    parser.add_argument("--explain", action="store_true",
                        help="also say how many candidates were considered and why the others were rejected")


def shown_usd(usd: float) -> str:
    return f"{usd:,.2f} USD"


def pick_lines(name: str, c: Candidate, floor: float, goals: Goals) -> list[str]:
    return [f"{name}: {shown_usd(c.monthly_usd)} a month, {c.monthly_usd / floor:.1f} x the floor",
            f"  {describe(c)}",
            f"  knee {c.prediction.knee_visits_per_s:,.0f} visits/s ({c.headroom:.2f} x the rate); "
            f"p95 {c.p95_ms:,.0f} ms "
            f"({c.slowest}; the visit's requests {c.visit_p95_ms:,.0f} ms added, {c.surge_p95_ms:,.0f} ms at "
            f"{goals.headroom:g} x the rate); freshness {c.freshness_s:,.1f} s",
            f"  binds first: {c.binds}; {c.vcpu:g} vCPUs, {c.memory_gib:,.2f} GiB at most"]


def default_folder(goals: Goals) -> Path:
    from visitkit.paths import ITERATIONS_DIR

    return ITERATIONS_DIR / f"tuned-{goals.visits_per_s:g}-per-s-p95-{goals.p95_ms:g}ms"


def checks(c: Candidate, goals: Goals) -> list[str]:
    """The README's checks: what an endurance run at the rate must show for the prediction to hold."""
    asked = [name for name in capacity.PUBLIC if capacity.requests_per_visit(c.settings, goals.dwell_s)[name]]
    return ([f"p95_ms.{name} <= {goals.p95_ms:g}" for name in asked]
            + ["failure_ratio == 0", "visits.lost == 0", "visits.duplicated == 0",
               f"convergence_s <= {goals.freshness_s:g}"])


def readme(c: Candidate, goals: Goals, region: str, floor: float, pick: str, command_line: str,
           folder: Path, quota: Quota) -> str:
    """The iteration's README: the hypothesis and checks come from the prediction."""
    from visitkit.paths import ROOT

    rate = goals.visits_per_s
    where = folder.resolve().relative_to(ROOT) if folder.resolve().is_relative_to(ROOT) else Path("ITERATION")
    lines = [f"# Tuned: {rate:g} visits/s with each request's p95 under {goals.p95_ms:g} ms", "",
             f"Written by `{command_line}` (the {pick} pick of `visitkit tune`, profile {c.prediction.profile}): "
             f"[settings](settings.tfvars.json). {describe(c)}.", "",
             "## Hypothesis", "",
             f"At {rate:g} visits/s these settings answer each request within {goals.p95_ms:g} ms at the p95 (the "
             f"model: {c.p95_ms:,.0f} ms, {c.slowest}), lose and double-count no visit, and the store keeps up: no "
             f"backlog grows (knee {c.prediction.knee_visits_per_s:,.0f} visits/s, {c.headroom:.2f} x the rate; the "
             f"first limit met is {c.binds}), a stored visit shows within {goals.freshness_s:g} s (the model: "
             f"{c.freshness_s:,.1f} s), for {shown_usd(c.monthly_usd)} a month in {region} "
             f"({c.monthly_usd / floor:.1f} x the floor of two request fees and the page's egress, "
             f"{shown_usd(floor)}).", "",
             f"At its maximum instances it takes {c.vcpu:g} vCPUs and {c.memory_gib:,.2f} GiB of Cloud Run's "
             f"allocation in {region}, within the quota searched: {quota.shown()}.", "",
             *[f"**Check:** `{check}`" for check in checks(c, goals)], "",
             "## How to test it", "",
             f"    scripts/run-iteration {where} --test endurance --stages {rate:g}/s:300",
             f"    scripts/run-iteration {where} --test endurance --stages "
             f"{rate:g}/s:300 --target gcp --project P --region {region}", "",
             "On the local twin the machine's CPU may be the limit before these settings are (`scripts/predict` "
             "names it); on Google Cloud the checks test the model.", "",
             "## What the model does not judge", "",
             "Memory beyond its cost (the defaults the study ran; a pull store 1 GiB), min_instances (0: cold starts "
             "are not in the model), timeouts and the subscription's retries are left at safe values. The latencies "
             "are a queueing model's (scripts/visitkit/model/latency.py), not measurements.", ""]
    return "\n".join(lines)


def plot(found: Search, chosen: Picks, path: Path, goals: Goals) -> None:
    """Cost a month against headroom (knee / rate) of the candidates kept, the three picks marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    axes.scatter([c.headroom for c in found.candidates], [c.monthly_usd for c in found.candidates], s=10,
                 color="tab:gray", alpha=0.5, label=f"{len(found.candidates):,} candidates kept")
    marks = zip(((n, getattr(chosen, n)) for n in PICKS), ("o", "s", "^"), ("tab:green", "tab:blue", "tab:orange"),
                (90, 150, 220))
    for (name, c), marker, color, size in marks:  # growing marks: picks that coincide stay visible
        axes.scatter([c.headroom], [c.monthly_usd], s=size, marker=marker, facecolors="none", edgecolors=color,
                     linewidths=1.8, label=f"{name}: {shown_usd(c.monthly_usd)}")
    axes.set_yscale("log")
    axes.set_xlabel("headroom: the knee / the rate")
    axes.set_ylabel("USD a month at the rate")
    axes.set_title(f"tune: {goals.visits_per_s:g} visits/s, p95 <= {goals.p95_ms:g} ms (a model)")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def record(found: Search, chosen: Picks, goals: Goals, region: str, floor: float, quota: Quota) -> dict[str, Any]:
    """tune.json: what was asked and found, for the docs to cite."""
    def of(c: Candidate) -> dict[str, Any]:
        return {"settings": to_raw(c.settings), "monthly_usd": c.monthly_usd, "p95_ms": c.p95_ms,
                "slowest": c.slowest, "visit_p95_ms": c.visit_p95_ms, "surge_p95_ms": c.surge_p95_ms,
                "freshness_s": c.freshness_s, "knee_visits_per_s": c.prediction.knee_visits_per_s,
                "headroom": c.headroom, "binds": c.binds, "floor_ratio": c.monthly_usd / floor}
    return {"goals": goals.__dict__, "region": region, "profile": chosen.cheapest.prediction.profile,
            "quota": quota.record(), "floor_monthly_usd": floor, "considered": found.considered,
            "rejected": dict(found.rejected), "kept": len(found.candidates),
            "picks": {name: of(getattr(chosen, name)) for name in PICKS}}


def run(options: Any, profile: capacity.LatencyProfile, command_line: str, read: Quota | None = None,
        notes: Sequence[str] = (), space: Space | None = None) -> tuple[int, list[str]]:
    """(exit status, lines printed): the picks and the folder written, or why no settings hold the goals. `read`:
    the quota read from --project (the command line reads it: cloud/preflight.py's tune_quota), `notes` what could
    not be read of it; `space`: what is searched (default: all of it, the stores --store allows)."""
    from visitkit.errors import VisitkitError

    if options.visits_per_s <= 0 or options.p95_ms <= 0 or options.headroom < 1 or options.freshness_s <= 0:
        raise VisitkitError("tune needs --visits-per-s > 0, --p95-ms > 0, --freshness-s > 0 and --headroom >= 1")
    if any(given is not None and given <= 0 for given in (options.quota_vcpu, options.quota_memory_gib)):
        raise VisitkitError("tune needs --quota-vcpu and --quota-memory-gib > 0 where given")
    goals = Goals(options.visits_per_s, options.p95_ms, options.freshness_s, options.headroom, options.dwell)
    quota = quota_for(options, read)
    prices = cost.load_prices()
    space = Space(stores=options.store) if space is None else space
    found = search(goals, profile, prices, options.region, quota, space, options.free_tier)
    floor = floor_monthly(goals.visits_per_s, prices, options.region)
    lines = [f"tune: {goals.visits_per_s:g} visits/s, each request's p95 <= {goals.p95_ms:g} ms, freshness <= "
             f"{goals.freshness_s:g} s, headroom {goals.headroom:g} x, in {options.region} (profile {profile.name}; "
             f"quota {quota.shown()}; a model)"]
    lines += [f"note: {note}" for note in notes]
    if options.explain or not found.candidates:
        lines.append(f"considered {found.considered:,} candidates (global choices, function shapes, combinations); "
                     f"kept {len(found.candidates):,}; rejected: "
                     + (", ".join(f"{found.rejected[r]:,} {r}" for r in REASONS if found.rejected[r]) or "none"))
    if not found.candidates:
        lines.append("no settings the model judges hold these goals. What stops them, and what would lift it:")
        lines += [f"  {reason}: {found.stops[reason]}" for reason in REASONS if reason in found.stops]
        return UNREACHABLE, lines
    chosen = picks(found.candidates)
    for name in PICKS:
        lines += pick_lines(name, getattr(chosen, name), floor, goals)
    if len({id(getattr(chosen, n)) for n in PICKS}) == 1:
        lines.append("  (the three coincide: nothing the model judges is faster than the cheapest at this rate)")
    lines.append(f"the physical floor at {goals.visits_per_s:g} visits/s: {shown_usd(floor)} a month (two request fees "
                 "and the page's and inc-counter's answers' egress a visit, list prices)")
    best = min(getattr(chosen, n).monthly_usd for n in PICKS) / floor
    if best > NEW_DESIGN_RATIO:
        split = cost.by_service(cost.monthly_at(chosen.cheapest.settings, chosen.cheapest.prediction,
                                                goals.visits_per_s, prices, options.region, options.free_tier))
        largest = ", ".join(f"{s} {shown_usd(u)}" for s, u in sorted(split.items(), key=lambda p: -p[1])[:3])
        lines.append(f"no design this project has comes within {NEW_DESIGN_RATIO:g} x the floor here (the cheapest is "
                     f"{best:.1f} x; its largest lines: {largest}): a new design is needed to get closer")
    folder = options.out or default_folder(goals)
    folder.mkdir(parents=True, exist_ok=True)
    written = getattr(chosen, options.write)
    parse_settings(to_raw(written.settings), folder)  # what settings.py and variables.tf accept, or it raises
    (folder / "settings.tfvars.json").write_text(settings_text(written.settings))
    (folder / "README.md").write_text(readme(written, goals, options.region, floor, options.write, command_line,
                                             folder, quota))
    (folder / "tune.json").write_text(json.dumps(record(found, chosen, goals, options.region, floor, quota),
                                                 indent=2) + "\n")
    plot(found, chosen, folder / "tune.png", goals)
    lines.append(f"wrote the {options.write} pick to {folder}: settings.tfvars.json, README.md (hypothesis and "
                 "checks), tune.json, tune.png (cost against headroom)")
    return 0, lines

"""Latency below the knee, as a model: each function's p50 and p95 at a rate, from the profile's service times.

A MODEL, not a measurement. Each function is one M/M/k queue (Erlang C):
- servers k = its max_instances x the requests an instance serves at once: its concurrency, or fewer when its vCPUs
  serve fewer (the same rule as occupancy.py: per-instance rate x busy time, rounded down, at least one), so the
  queue's capacity is the capacity model's (capacity.predict's capacity_rps). Cloud Run's front end holds a
  request that finds every instance full in one queue per service, as the twin's HAProxy does (its backend queue);
  the servers are the instances Cloud Run may start, the model assumes them started (no cold start).
- service time s = what a request holds its slot (capacity.predict's busy_ms: the profile's service time, a cache
  hit for get-counter with a cache). The profile's times were measured at the deployed CPU, so a share of a vCPU
  is in them already; the CPU enters as the capacity model's does, as a cap on an instance's rate (cpu_rate). Where
  that cap binds before the concurrency does, the requests in flight share the vCPUs: an instance serves
  ceil(rate x busy) at once, each held at_once / rate, at least its service time. Either way servers / service
  time is the capacity model's capacity_rps, so the knee is where the queue saturates.
- a request waits only when all k servers are busy, with Erlang C's probability C; its wait is then exponential
  with rate k/s - lambda, so P(wait > t) = C exp(-(k/s - lambda) t) and the wait's q-quantile is
  max(0, ln(C / (1 - q)) / (k/s - lambda)). A response is the service time plus the wait: the service is taken at
  its mean (the twin adds a fixed latency; Google Cloud's own spread is not in the profile), so the percentiles
  here are the queue's, which is what the settings change.
At and past the knee (lambda >= k / s) the queue grows without bound: the percentiles are infinite.
The store's lag (freshness): a push delivery's own queue the same way; a pull store's batch waits until it is full
or flush_ms has passed, then one commit (capacity.pull_commit_ms).
"""
import math
from dataclasses import dataclass

from visitkit.catalogue import PUSH_FUNCTION
from visitkit.model import capacity
from visitkit.model.occupancy import empty_probability
from visitkit.settings import Settings

QUANTILES = (0.5, 0.95)


def erlang_c(servers: int, offered: float) -> float:
    """The probability that an arrival waits in an M/M/k queue with `servers` servers and `offered` Erlangs
    (rate x service time): 1 at or past saturation. From occupancy.empty_probability's P0:
    C = P0 a^k / (k! (1 - a/k)), in logs."""
    if offered <= 0:
        return 0.0
    if offered >= servers:
        return 1.0
    if servers > offered + 12 * math.sqrt(offered) + 40:
        # far more servers than the offered load: the sum below the k-th term is e^a to within far less than a
        # float's precision, so C = a^k / (k! (1 - a/k)) e^-a without summing k terms (k reaches a million)
        return math.exp(servers * math.log(offered) - math.lgamma(servers + 1) - math.log(1 - offered / servers)
                        - offered)
    p0 = empty_probability(servers, offered)
    if p0 == 0.0:  # e^-a underflows past ~745 Erlangs: Erlang B's recursion, which stays within [0, 1]
        blocked = 1.0
        for j in range(1, servers + 1):
            blocked = offered * blocked / (j + offered * blocked)
        return servers * blocked / (servers - offered * (1 - blocked))
    return math.exp(math.log(p0) + servers * math.log(offered) - math.lgamma(servers + 1)
                    - math.log(1 - offered / servers))


def wait_quantile_s(servers: int, service_s: float, rate: float, q: float) -> float:
    """The q-quantile of an M/M/k queue's wait, seconds (infinite at or past saturation)."""
    drain = servers / service_s - rate
    if drain <= 0:
        return math.inf
    waits = erlang_c(servers, rate * service_s)
    return max(0.0, math.log(waits / (1 - q)) / drain) if waits > 1 - q else 0.0


@dataclass(frozen=True)
class FunctionLatency:
    """One function at one request rate, as the queue model sees it."""
    rate: float  # requests/s it gets
    servers: int  # instances x requests at once each
    service_ms: float  # what a request holds a server
    utilisation: float  # rate x service / servers
    wait_probability: float  # Erlang C
    p50_ms: float
    p95_ms: float


def queue_of(settings: Settings, prediction: capacity.Prediction, function: str) -> tuple[int, float]:
    """(servers, service seconds) of `function`'s queue: its instances' request slots, and the time each request
    holds one, such that servers / service time is the capacity model's capacity (module docstring)."""
    spec = settings.functions[function]
    per_instance = prediction.capacity_rps[function] / spec.max_instances
    busy_s = prediction.busy_ms[function] / 1000
    at_once = max(1, min(spec.concurrency, math.ceil(per_instance * busy_s - 1e-9)))
    return spec.max_instances * at_once, max(busy_s, at_once / per_instance)


def function_latency(servers: int, service_s: float, rate: float) -> FunctionLatency:
    """A queue of `servers` servers of `service_s` each, fed `rate` requests/s."""
    p50, p95 = (1000 * (service_s + wait_quantile_s(servers, service_s, rate, q)) for q in QUANTILES)
    return FunctionLatency(rate=rate, servers=servers, service_ms=1000 * service_s,
                           utilisation=rate * service_s / servers, wait_probability=erlang_c(servers, rate * service_s),
                           p50_ms=p50, p95_ms=p95)


def one_function(settings: Settings, profile: capacity.LatencyProfile, function: str, rate: float,
                 dwell_s: float = 0) -> FunctionLatency:
    """`function`'s FunctionLatency fed `rate` requests/s."""
    prediction = capacity.predict(settings, profile, dwell_s=dwell_s)
    servers, service_s = queue_of(settings, prediction, function)
    return function_latency(servers, service_s, rate)


def predict_latency(settings: Settings, profile: capacity.LatencyProfile, visits_per_s: float,
                    dwell_s: float = 0) -> dict[str, FunctionLatency]:
    """{function: its FunctionLatency at visits_per_s}: each public function a visit asks (capacity's
    requests_per_visit; get-counter not at all when the page embeds its count at dwell 0), and a push store's
    store-inc-counter (one delivery a visit; a pull store is no queue of requests: see store_lag_s)."""
    prediction = capacity.predict(settings, profile, dwell_s=dwell_s)
    per_visit = {**capacity.requests_per_visit(settings, dwell_s), PUSH_FUNCTION: 0 if settings.pulls else 1}
    found = {}
    for name, count in per_visit.items():
        if count:
            servers, service_s = queue_of(settings, prediction, name)
            found[name] = function_latency(servers, service_s, visits_per_s * count)
    return found


def store_lag_s(settings: Settings, profile: capacity.LatencyProfile, visits_per_s: float,
                latencies: dict[str, FunctionLatency] | None = None) -> float:
    """Seconds from a visit's publish until the store has counted it, at the median of the store's queue: a push
    delivery's p50 response (its slot, the push round trip included); a pull store's wait for its batch (the
    batch_size-th visit's arrival or flush_ms, the sooner, halved: a visit arrives on average halfway) and the
    commit. Infinite where the store does not keep up (a backlog grows)."""
    if not settings.pulls:
        found = (latencies or predict_latency(settings, profile, visits_per_s))[PUSH_FUNCTION]
        return found.p50_ms / 1000
    if visits_per_s >= capacity.pull_drain_per_s(settings, profile):
        return math.inf
    fill_s = settings.pull.batch_size / visits_per_s if visits_per_s > 0 else math.inf
    return min(fill_s, settings.pull.flush_ms / 1000) / 2 + capacity.pull_commit_ms(settings, profile) / 1000


def freshness_s(settings: Settings, profile: capacity.LatencyProfile, visits_per_s: float,
                latencies: dict[str, FunctionLatency] | None = None) -> float:
    """How long a stored visit takes to show, at most about: the store's lag, then up to the cache TTL before a
    cached total is read again (0 without a cache)."""
    return store_lag_s(settings, profile, visits_per_s, latencies) + settings.cache_ttl_seconds


def worst_p95_ms(latencies: dict[str, FunctionLatency], names: tuple[str, ...]) -> tuple[str, float]:
    """(the function, its p95) of the slowest of `names` that the visit asks."""
    asked = [name for name in names if name in latencies]
    name = max(asked, key=lambda n: latencies[n].p95_ms)
    return name, latencies[name].p95_ms

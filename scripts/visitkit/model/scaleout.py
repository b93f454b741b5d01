"""Cloud Run's instance autoscaling rules, as the twin's autoscaler applies them (twin/autoscaler.py), and the
scale-out a spike gets from them: how many instances run each moment after the traffic jumps, and the lag until
no request waits for one.

The rules, from https://cloud.google.com/run/docs/about-instance-autoscaling (read 2026-11-28):
- each function runs between its min_instances and max_instances;
- on demand: when requests wait, instances are started for them;
- on metrics: enough instances to keep the average request concurrency at 60 % of the maximum concurrency and
  the average CPU at 60 % of the instances' vCPUs, averaged over a one-minute window; the larger of the two
  (occupancy.py's TARGET_UTILIZATION is that 60 %: the cost model's instance rule is this one at a steady rate);
- a request waits for an instance at most the greater of 10 s and 3.5 times the average start time.
Assumed, which Google leaves unstated: IDLE_S, DEMAND_TICK_S, METRICS_INTERVAL_S (the page says the autoscaler
evaluates "periodically"), the CPU an instance uses (the latency profile's cpu_ms per request, not a
measurement), and, for the spike's prediction, that instances starting together share the machine's cores (their
imports are CPU-bound): k of them on C cores take start_s x max(1, k / C) each.
"""
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from visitkit.catalogue import QUEUE_TIMEOUT_S
from visitkit.model.occupancy import TARGET_UTILIZATION
from visitkit.settings import FunctionSettings

METRICS_WINDOW_S = 60.0  # Google: "over a one minute window"
START_WAIT_FACTOR = 3.5  # Google: a request waits up to 3.5 x the average start time, at least 10 s
IDLE_S = 900.0  # assumed: an instance kept idle 15 minutes before it stops
DEMAND_TICK_S = 0.25  # assumed: how often waiting requests are looked at
METRICS_INTERVAL_S = 5.0  # assumed: how often the one-minute averages are turned into instances


@dataclass(frozen=True)
class Limits:
    """One autoscaled function's rules."""
    min_instances: int
    max_instances: int
    concurrency: int
    vcpus: float
    cpu_s_per_request: float | None = None  # None: no CPU driver (the profile gives no cpu_ms)


@dataclass(frozen=True)
class Sample:
    """One look at a function's backend: requests in flight on its instances, queued in HAProxy (every slot
    busy), waiting for an instance (none UP), and its cumulative requests."""
    time: float
    in_flight: float
    queued: float
    waiting: float
    requests: float


def limits_of(spec: FunctionSettings, cpu_ms: float | None) -> Limits:
    """A function's rules from its settings and the latency profile's CPU per request (ms on one vCPU; None: no
    CPU driver), as the twin's autoscaler runs them (twin/stack.py) and the spike's prediction takes them."""
    return Limits(spec.min_instances, spec.max_instances, spec.concurrency, float(spec.effective_cpu),
                  cpu_ms / 1000 if cpu_ms is not None else None)


def by_metrics(window: Sequence[Sample], limits: Limits) -> int:
    """Instances the one-minute averages ask for: concurrency at TARGET_UTILIZATION of the maximum, CPU at
    TARGET_UTILIZATION of the vCPUs (Google's two drivers); the larger."""
    if not window:
        return 0
    in_flight = sum(s.in_flight for s in window) / len(window)
    wanted = math.ceil(in_flight / (TARGET_UTILIZATION * limits.concurrency) - 1e-9)
    span = window[-1].time - window[0].time
    if limits.cpu_s_per_request is not None and span > 0:
        rate = (window[-1].requests - window[0].requests) / span
        cpu = rate * limits.cpu_s_per_request / limits.vcpus  # instances' worth of vCPU, busy
        wanted = max(wanted, math.ceil(cpu / TARGET_UTILIZATION - 1e-9))
    # Google: scaling from 1 to 0 can only be decided by whether the instance is processing requests; short
    # requests sampled between their arrivals average to nothing in flight, yet they keep one instance
    if window[-1].requests > window[0].requests or any(s.in_flight for s in window):
        wanted = max(wanted, 1)
    return wanted


def on_demand(sample: Sample, running: int, starting: int, limits: Limits) -> int:
    """Instances on-demand scaling asks for: none while no request waits; otherwise those running and starting,
    and enough more for the requests that wait beyond the free slots of the running ones (one just ready is not
    busy yet) and what the ones starting will take."""
    free = max(0, running * limits.concurrency - sample.in_flight) + starting * limits.concurrency
    waiting = sample.queued + sample.waiting - free
    if waiting <= 0:
        return 0
    return running + starting + math.ceil(waiting / limits.concurrency)


def target(metrics: int, demand: int, limits: Limits) -> int:
    """What the function should run: the larger driver, never below its minimum nor above its maximum."""
    return min(limits.max_instances, max(limits.min_instances, metrics, demand))


def kept(asked: Sequence[tuple[float, int]], now: float, window_s: float = METRICS_WINDOW_S) -> int:
    """The fewest instances a scale-in may leave: the most the rules asked for (on demand or on the averages)
    within the last window. ASSUMED (Google states no scale-in delay): without it the averages, which lag a
    jump by their minute, drain an instance on demand just started, the next waiting request starts it again,
    and a function flaps between its instances on every look (seen on the twin: iteration 1's ramp)."""
    return max((count for when, count in asked if when >= now - window_s), default=0)


def queue_wait_s(start_times_s: Sequence[float]) -> float:
    """How long a request waits for an instance: the greater of 10 s and 3.5 x the average start time."""
    average = sum(start_times_s) / len(start_times_s) if start_times_s else 0.0
    return max(QUEUE_TIMEOUT_S, START_WAIT_FACTOR * average)


@dataclass(frozen=True)
class ScaleOut:
    """A spike's predicted scale-out: (seconds after its start, instances ready) at each change, the instances
    that serve its requests without a wait (at full concurrency), and the lag until no request waits: those
    instances ready and the queue built while they started served (None: max_instances cannot, or not within the
    horizon)."""
    steps: list[tuple[float, int]]
    unwaited: int
    lag_s: float | None


def spike(limits: Limits, busy_s: float, before_rps: float, spike_rps: float, start_s: float, cores: int | None,
          horizon_s: float = 2 * METRICS_WINDOW_S, window_s: float = METRICS_WINDOW_S,
          running: int | None = None, busy_starting_s: float | None = None) -> ScaleOut:
    """The instances the rules run when a function's traffic jumps from before_rps (held long enough to have
    settled) to spike_rps (held), each request holding an instance busy_s, a new instance ready start_s after
    it is started (the cold-start benchmark's first 2xx: quiet), on a machine of `cores` cores (None: start_s is what
    each took already, its share of the cores included: a run's own starts); `running`: the
    instances up at the step when known (a run's), else those before_rps settles on; `busy_starting_s`: what a
    request holds an instance while others start, when that differs (a run's on shared cores: the starts' imports
    take the serving instances' CPU; Google's instances start on their own vCPUs). Requests in flight are
    taken by Little's law (rate x busy_s); those the ready instances cannot take queue as a fluid: the queue grows
    by the rate beyond their capacity (ready x concurrency / busy_s) and drains by the capacity beyond the rate,
    and it is what on-demand scaling sees waiting."""
    concurrency = limits.concurrency
    before, during = before_rps * busy_s, spike_rps * busy_s  # requests in flight, wanted
    settled = target(math.ceil(before / (TARGET_UTILIZATION * concurrency) - 1e-9), 0, limits)
    ready = settled if running is None else target(running, 0, limits)
    window: deque[Sample] = deque(Sample(t, before, 0, 0, before_rps * t)
                                  for t in _ticks(-window_s, 0))
    starting: list[float] = []  # when each will be ready
    steps, metrics, last_metrics = [(0.0, ready)], by_metrics(window, limits), -math.inf
    unwaited = min(limits.max_instances, math.ceil(during / concurrency - 1e-9))
    lag = 0.0 if ready >= unwaited else None
    queue = 0.0  # requests waiting for a slot
    for t in _ticks(0, horizon_s):
        now_ready = [when for when in starting if when <= t]
        if now_ready:
            ready += len(now_ready)
            starting = [when for when in starting if when > t]
            steps.append((round(t, 2), ready))
        busy = busy_starting_s if starting and busy_starting_s is not None else busy_s
        queue = max(0.0, queue + (spike_rps - ready * concurrency / busy) * DEMAND_TICK_S)
        if lag is None and ready >= unwaited and queue == 0:
            lag = round(t, 2)
        served = min(spike_rps * busy, ready * concurrency)
        held = queue
        sample = Sample(t, served, held if ready else 0, 0 if ready else held, spike_rps * t)
        window.append(sample)
        while window[0].time < t - window_s:
            window.popleft()
        if t - last_metrics >= METRICS_INTERVAL_S:
            metrics, last_metrics = by_metrics(window, limits), t
        wanted = target(metrics, on_demand(sample, ready, len(starting), limits), limits)
        new = wanted - ready - len(starting)
        if new > 0:
            each = start_s * (1.0 if cores is None else max(1.0, (len(starting) + new) / cores))
            starting += [t + each] * new
    return ScaleOut(steps, unwaited, lag)


def _ticks(start: float, end: float) -> list[float]:
    count = round((end - start) / DEMAND_TICK_S)
    return [start + i * DEMAND_TICK_S for i in range(count)]

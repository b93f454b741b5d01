"""A spike's scale-out on the twin, measured: for a spike test with scaling "auto", per function, how long after
the load's first step up (the spike) requests still waited for an instance, and what the instances and the
latency did meanwhile. model/scaleout.py predicts the same lag from Cloud Run's rules (docs.py's `scale-out` kind
sets the two side by side).

The lag ends where the model's does (ScaleOut.lag_s): at the first of the run's per-second server samples with
HAProxy's queue for the function empty (`queued`: every slot of its ready instances busy) and as many instances
up as the spike needs at full concurrency (ScaleOut.unwaited, from the run's own rate and service time over the
step): a queue that empties between two bursts while fewer run is not the end of the wait, and one that forms
again for a second once they all run is queueing for a slot, not for an instance. A request that waits in the
Lua action for a first instance (none up, twin/await_instance.lua) is not in the samples; a spike from a base
load has at least one instance up, the base load's.
"""
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from visitkit.catalogue import FUNCTIONS
from visitkit.model.scaleout import METRICS_WINDOW_S, Limits, limits_of, spike
from visitkit.results import overload
from visitkit.results.analysis import during, fn_field
from visitkit.results.records import ScaleOut, ScaleOutFunction
from visitkit.samples import Sample
from visitkit.settings import Settings

EARLY_S = 10  # the spike's first seconds: Locust's per-second percentiles are over its last 10 s
STEADY_SHARE = 0.5  # the steady state: the spike's last half


def spike_step(history: Sequence[Mapping[str, Any]]) -> tuple[float, float] | None:
    """(start, end) of the load's first step up, a spike test's spike: from the first second of the users' rise
    to its peak (the first second above the level held before it) to the peak's last second
    (overload.spike_window); None without users."""
    peak_start, peak_end = overload.spike_window(history)
    if peak_start is None or peak_end is None:
        return None
    before = [s for s in history if s["time"] <= peak_start]
    rise = len(before) - 1
    while rise > 0 and before[rise - 1]["users"] < before[rise]["users"]:
        rise -= 1
    # before[rise] holds the level before the rise (the base, or no user yet); the step is the second after it
    return before[min(rise + 1, len(before) - 1)]["time"], peak_end


def lag_s(samples: Sequence[Sample], function: str, start: float, end: float, unwaited: int = 1) -> float | None:
    """Seconds from the step's start until no request of `function` waits: the first sample with its queue empty
    and at least `unwaited` instances up, 0 when that is the step's first; None when none is by the step's end
    (or the samples have no queue)."""
    window = during(samples, start, end)
    for sample in window:
        queued = fn_field(function, "queued")(sample)
        if queued is None:
            return None
        if not queued and (fn_field(function, "instances")(sample) or 0) >= unwaited:
            return 0.0 if sample is window[0] else round(sample["time"] - start, 1)
    return None


def unwaited(settings: Settings | None, function: str, rps: float | None, busy_ms: float | None) -> int:
    """The instances a spike of `rps` requests of `busy_ms` each needs at full concurrency, at most the function's
    max_instances (the model's ScaleOut.unwaited); 1 when a figure is missing."""
    if settings is None or rps is None or busy_ms is None:
        return 1
    spec = settings.functions[function]
    return max(1, min(spec.max_instances, math.ceil(rps * busy_ms / 1000 / spec.concurrency - 1e-9)))


def starts_within(events: Sequence[Mapping[str, Any]], function: str, start: float,
                  end: float) -> tuple[float, float] | None:
    """(the median start in ms, launch to listening; when the last was ready, unix s) of the function's instances
    launched from `start` to `end` (the autoscaler's events file); None when none was."""
    launched = {e["instance"] for e in events
                if e["event"] == "start" and e["function"] == function and start <= e["time"] <= end}
    ready = [e for e in events if e["event"] == "ready" and e["instance"] in launched]
    if not ready:
        return None
    return statistics.median(e["start_ms"] for e in ready), max(e["time"] for e in ready)


def model_lag(limits: Limits, row: ScaleOutFunction) -> float | None:
    """The model's scale-out lag (model/scaleout.py, spike) given the run's own: its requests/s before and during
    the step, its service time, its instances at the step, its starts there and the service time meanwhile (their
    share of the cores included: not shared again). None when a figure is missing, or when the model wants an
    instance started and the run started none at the step (its start time unknown)."""
    busy_ms, before, during = row["service_ms"], row["rps_before"], row["rps_spike"]
    if busy_ms is None or before is None or during is None:
        return None
    start_ms, starting_ms = row.get("start_step_ms"), row.get("service_starting_ms")
    return spike(limits, busy_ms / 1000, before, during, math.inf if start_ms is None else start_ms / 1000, None,
                 running=row["instances_at_start"],
                 busy_starting_s=None if starting_ms is None else starting_ms / 1000).lag_s


def figures(history: Sequence[Mapping[str, Any]], samples: Sequence[Sample], settings: Settings | None = None,
            events: Sequence[Mapping[str, Any]] = (), cpu_ms: Mapping[str, float] | None = None) -> ScaleOut | None:
    """The spike's step and, per function: its scale-out lag (lag_s, the instances it needs from `unwaited`); its
    instances at the step, at its end and the most; its worst page's p95 in the first EARLY_S seconds (the highest
    Locust reported, each second over its last 10 s) and steady (the median over the step's last STEADY_SHARE),
    None for a function Locust does not call; and what the model's prediction takes (model/scaleout.py, spike): its
    requests/s over the minute before the step and over the step, HAProxy's mean service time (what a request holds
    an instance) over the steady part, and the run's own starts at the step: the median start of the instances
    launched in it (`events`, the autoscaler's) and the service time while they started, by Little's law (mean in
    flight / requests/s: the starts' share of the cores included); and, with the settings, the model's lag given
    those (model_lag; `cpu_ms`: the latency profile's per function, the CPU driver's). None without a step or
    samples."""
    step = spike_step(history)
    if step is None or not samples:
        return None
    start, end = step
    steady_from = end - STEADY_SHARE * (end - start)
    early = [s for s in history if start <= s["time"] <= start + EARLY_S]
    steady = [s for s in history if steady_from <= s["time"] <= end]
    inside = during(samples, start, end)
    functions: dict[str, ScaleOutFunction] = {}
    for name in FUNCTIONS:
        instances = fn_field(name, "instances")
        at_start = [s for s in samples if s["time"] <= start]
        at_end = [s for s in samples if s["time"] <= end]
        service = [v for s in during(samples, steady_from, end) if (v := fn_field(name, "service_ms")(s)) is not None]
        p95_early = [v for s in early if (v := _p95(s, name)) is not None]
        p95_steady = [v for s in steady if (v := _p95(s, name)) is not None]
        rps_spike = _rate(inside, name)
        service_ms = statistics.median(service) if service else None
        starts = starts_within(events, name, start, end)
        starting = during(samples, start, starts[1]) if starts else []
        functions[name] = {
            "lag_s": lag_s(samples, name, start, end, unwaited(settings, name, rps_spike, service_ms)),
            "instances_at_start": instances(at_start[-1]) if at_start else None,
            "instances_end": instances(at_end[-1]) if at_end else None,
            "instances_max": max((v for s in inside if (v := instances(s)) is not None), default=None),
            "p95_first_ms": max(p95_early, default=None),
            "p95_steady_ms": statistics.median(p95_steady) if p95_steady else None,
            "rps_before": _rate(during(samples, start - METRICS_WINDOW_S, start), name),
            "rps_spike": rps_spike,
            "service_ms": service_ms,
            "start_step_ms": starts[0] if starts else None,
            "service_starting_ms": _little(starting, name, _rate(starting, name)),
        }
        functions[name]["model_lag_s"] = (model_lag(limits_of(settings.functions[name], (cpu_ms or {}).get(name)),
                                                    functions[name]) if settings is not None else None)
    return {"start": start, "end": end, "functions": functions}


def _little(window: Sequence[Sample], function: str, rps: float | None) -> float | None:
    """The mean time a request held an instance over the window (ms), by Little's law: mean in flight / rate."""
    in_flight = [v for s in window if (v := fn_field(function, "in_flight")(s)) is not None]
    if not in_flight or not rps:
        return None
    return round(statistics.fmean(in_flight) / rps * 1000, 1)


def _p95(second: Mapping[str, Any], function: str) -> float | None:
    return (second.get("p95_ms_by_function") or {}).get(function)


def _rate(window: Sequence[Sample], function: str) -> float | None:
    """The function's requests/s over the window, from its cumulative count."""
    if len(window) < 2:
        return None
    first, last = (fn_field(function, "requests")(window[i]) for i in (0, -1))
    span = window[-1]["time"] - window[0]["time"]
    return (last - first) / span if first is not None and last is not None and span > 0 else None

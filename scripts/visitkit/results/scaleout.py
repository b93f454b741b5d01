"""A spike's scale-out on the twin, measured: for a spike test with scaling "auto", per function, how long after
the load's first step up (the spike) requests still waited for an instance, and what the instances and the
latency did meanwhile. model/scaleout.py predicts the same lag from Cloud Run's rules (docs.py's `scale-out` kind
sets the two side by side).

The lag is the model's (ScaleOut.lag_s: until no request waits), read off the run's per-second server samples:
a function's requests wait while HAProxy's queue for it is not empty (`queued`: every slot of its ready instances
busy). A request that waits in the Lua action for a first instance (none up, twin/await_instance.lua) is not in
the samples; a spike from a base load has at least one instance up, the base load's.
"""
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from visitkit.catalogue import FUNCTIONS
from visitkit.model.scaleout import METRICS_WINDOW_S
from visitkit.results import overload
from visitkit.results.analysis import during, fn_field
from visitkit.results.records import ScaleOut, ScaleOutFunction
from visitkit.samples import Sample

LAG_HOLD_S = 5  # the scale-out is over once no request waited this many seconds in a row (samples 1 s apart)
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


def lag_s(samples: Sequence[Sample], function: str, start: float, end: float) -> float | None:
    """Seconds from the step's start until no request of `function` waits: the first of LAG_HOLD_S seconds in a
    row with its queue empty, 0 when it was from the step's first sample on; None when requests still waited by
    the step's end (or the samples have no queue)."""
    window = during(samples, start, end)
    calm_since = None
    for sample in window:
        queued = fn_field(function, "queued")(sample)
        if queued is None:
            return None
        if queued:
            calm_since = None
            continue
        calm_since = sample["time"] if calm_since is None else calm_since
        if sample["time"] - calm_since >= LAG_HOLD_S - 1:
            return 0.0 if calm_since == window[0]["time"] else round(calm_since - start, 1)
    return None


def figures(history: Sequence[Mapping[str, Any]], samples: Sequence[Sample]) -> ScaleOut | None:
    """The spike's step and, per function: its scale-out lag (lag_s); its instances at the step, at its end and
    the most; its worst page's p95 in the first EARLY_S seconds (the highest Locust reported, each second over
    its last 10 s) and steady (the median over the step's last STEADY_SHARE), None for a function Locust does
    not call; and what the model's prediction takes (model/scaleout.py, spike): its requests/s over the minute
    before the step and over the step, and HAProxy's mean service time (what a request holds an instance)
    over the steady part. None without a step or samples."""
    step = spike_step(history)
    if step is None or not samples:
        return None
    start, end = step
    steady_from = end - STEADY_SHARE * (end - start)
    early = [s for s in history if start <= s["time"] <= start + EARLY_S]
    steady = [s for s in history if steady_from <= s["time"] <= end]
    functions: dict[str, ScaleOutFunction] = {}
    for name in FUNCTIONS:
        instances = fn_field(name, "instances")
        at_start = [s for s in samples if s["time"] <= start]
        at_end = [s for s in samples if s["time"] <= end]
        inside = during(samples, start, end)
        service = [v for s in during(samples, steady_from, end) if (v := fn_field(name, "service_ms")(s)) is not None]
        p95_early = [v for s in early if (v := _p95(s, name)) is not None]
        p95_steady = [v for s in steady if (v := _p95(s, name)) is not None]
        functions[name] = {
            "lag_s": lag_s(samples, name, start, end),
            "instances_at_start": instances(at_start[-1]) if at_start else None,
            "instances_end": instances(at_end[-1]) if at_end else None,
            "instances_max": max((v for s in inside if (v := instances(s)) is not None), default=None),
            "p95_first_ms": max(p95_early, default=None),
            "p95_steady_ms": statistics.median(p95_steady) if p95_steady else None,
            "rps_before": _rate(during(samples, start - METRICS_WINDOW_S, start), name),
            "rps_spike": _rate(inside, name),
            "service_ms": statistics.median(service) if service else None,
        }
    return {"start": start, "end": end, "functions": functions}


def _p95(second: Mapping[str, Any], function: str) -> float | None:
    return (second.get("p95_ms_by_function") or {}).get(function)


def _rate(window: Sequence[Sample], function: str) -> float | None:
    """The function's requests/s over the window, from its cumulative count."""
    if len(window) < 2:
        return None
    first, last = (fn_field(function, "requests")(window[i]) for i in (0, -1))
    span = window[-1]["time"] - window[0]["time"]
    return (last - first) / span if first is not None and last is not None and span > 0 else None

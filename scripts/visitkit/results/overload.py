"""Overload and recovery, for a spike test: how the system answered while users were far beyond
its knee, and how long after the spike its latency came back to what it was before.

From Locust's per-second history and failures only, so it reads the same on every target.
"""
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from visitkit.results.records import Failure, Overload

RECOVERY_FACTOR = 1.5  # p95 within 1.5 x the pre-spike p95 ...
RECOVERY_HOLD_S = 5  # ... for this many seconds in a row
TOO_MANY = re.compile(r"\b429\b")


def spike_window(history: Iterable[Mapping[str, Any]]) -> tuple[float, float] | tuple[None, None]:
    """(start, end) of the spike: the seconds with the run's highest user count, or (None, None)."""
    loaded = [s for s in history if s["users"] > 0]
    if not loaded:
        return None, None
    peak = max(s["users"] for s in loaded)
    at_peak = [s["time"] for s in loaded if s["users"] >= 0.9 * peak]
    return at_peak[0], at_peak[-1]


def figures(history: Sequence[Mapping[str, Any]], failures: Iterable[Failure]) -> Overload | None:
    """{"spike_users", "spike_s", "baseline_p95_ms", "spike_p95_ms", "recovery_s", "refused_429",
    "other_errors"}; recovery_s is None when latency had not come back by the end of the load."""
    start, end = spike_window(history)
    if start is None or end is None:  # spike_window gives both or neither
        return None
    before = [s["p95_ms"] for s in history if s["time"] < start and s["users"] > 0 and s["p95_ms"] is not None]
    during = [s["p95_ms"] for s in history if start <= s["time"] <= end and s["p95_ms"] is not None]
    baseline = statistics.median(before) if before else None
    recovery = None
    if baseline is not None:
        calm_since = None
        for sample in (s for s in history if s["time"] > end and s["users"] > 0):
            calm = sample["p95_ms"] is not None and sample["p95_ms"] <= RECOVERY_FACTOR * baseline \
                and sample["failures_per_s"] == 0
            calm_since = (calm_since or sample["time"]) if calm else None
            if calm_since is not None and sample["time"] - calm_since >= RECOVERY_HOLD_S - 1:
                recovery = calm_since - end
                break
    refused = sum(count for _, error, count in failures if TOO_MANY.search(error))
    return {"spike_users": max(s["users"] for s in history), "spike_s": end - start,
            "baseline_p95_ms": baseline, "spike_p95_ms": max(during, default=None), "recovery_s": recovery,
            "refused_429": refused, "other_errors": sum(count for _, _, count in failures) - refused}

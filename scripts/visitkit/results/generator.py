"""The load generator's own health in a run (locust/health.py's samples): was Locust itself the
limit? A process is saturated once its CPU stays at or above Locust's own warning threshold, or
its event loop runs late by LAG_SATURATED_MS, for HOLD_S seconds running; saturation before the
knee means the knee may be the load generator's, not the system's."""
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from visitkit.results.records import LoadGenerator, ProcessHealth, Saturation

CPU_SATURATED = 90.0  # % of one core: Locust warns above it (runners.py, CPU_WARNING_THRESHOLD)
LAG_SATURATED_MS = 100.0  # a 0.1 s sleep waking this late delays every request that much
HOLD_S = 3


def figures(health: Sequence[Mapping[str, Any]], knee_time: float | None = None,
            workers: int = 0) -> LoadGenerator | None:
    """{"workers", "processes", "per_process": {name: {cpu_max, lag_max_ms, saturated_at}},
    "saturated": [{process, time, users, why, before_knee}]} from the health rows, or None without any."""
    if not health:
        return None
    by_process: dict[str, list[Mapping[str, Any]]] = {}
    for row in sorted(health, key=lambda r: r["time"]):
        by_process.setdefault(row["process"], []).append(row)
    per_process: dict[str, ProcessHealth] = {}
    saturated: list[Saturation] = []
    for name, rows in sorted(by_process.items()):
        onset = saturation_onset(rows)
        per_process[name] = {"cpu_max": max((r["cpu_percent"] or 0 for r in rows), default=0),
                             "lag_max_ms": max((r["loop_lag_ms"] or 0 for r in rows), default=0),
                             "saturated_at": onset["time"] if onset else None}
        if onset:
            saturated.append({"process": name, "time": onset["time"], "users": onset["users"], "why": onset["why"],
                              "before_knee": knee_time is None or onset["time"] <= knee_time})
    return {"workers": workers, "processes": len(per_process), "per_process": per_process,
            "saturated": sorted(saturated, key=lambda s: s["time"])}


def saturation_onset(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The first row of the first HOLD_S-second run of saturated rows, with why; or None."""
    run: list[tuple[Mapping[str, Any], str]] = []
    for row in rows:
        why = reason(row)
        run = run + [(row, why)] if why else []
        if len(run) >= HOLD_S:
            first, why = run[0]
            return {**first, "why": why}
    return None


def reason(row: Mapping[str, Any]) -> str | None:
    if (row["cpu_percent"] or 0) >= CPU_SATURATED:
        return f"CPU {row['cpu_percent']:.0f} %"
    if (row["loop_lag_ms"] or 0) >= LAG_SATURATED_MS:
        return f"event loop {row['loop_lag_ms']:.0f} ms late"
    return None

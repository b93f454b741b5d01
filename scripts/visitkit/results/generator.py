"""The load generator's own health in a run (locust/health.py's samples): was Locust itself the
limit? A process is saturated once its CPU stays at or above Locust's own warning threshold, or
its event loop runs late by LAG_SATURATED_MS, for HOLD_S seconds running; saturation before the
knee means the knee may be the load generator's, not the system's.

Watched too, live and again after the run (Watch): a process warns earlier, once its CPU stays at or
above the share of a core where the load-generator benchmark's latency still holds (model/fleet.py,
holding_cpu_percent) or its loop runs late, for HOLD_S seconds running; and the master warns at once
when a worker's heartbeat is HEARTBEAT_LATE_S late or Locust marks it missing. A starved worker shows
a late loop and late heartbeats rather than a busy CPU. A knee after a warning is the load
generator's, not the system's (the headline's knee_generator_warned)."""
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from visitkit.results.records import Heartbeats, LoadGenerator, ProcessHealth, Saturation

CPU_SATURATED = 90.0  # % of one core: Locust warns above it (runners.py, CPU_WARNING_THRESHOLD)
LAG_SATURATED_MS = 100.0  # a 0.1 s sleep waking this late delays every request that much
HOLD_S = 3
# Locust (2.47, runners.py) hears each worker's heartbeat every second and marks it missing after
# HEARTBEAT_LIVENESS = 3 beats without one: warn one beat before.
HEARTBEAT_LATE_S = 3.0
# The master sends no requests: its own CPU and loop (busy writing the merged ledger, say) do not slow the
# load; its view of the workers does. (The name locust/locustfile.py gives its probe.)
MASTER = "master"


def figures(health: Sequence[Mapping[str, Any]], knee_time: float | None = None,
            workers: int = 0, watch: Mapping[str, Any] | None = None) -> LoadGenerator | None:
    """{"workers", "processes", "per_process": {name: {cpu_max, lag_max_ms, saturated_at}},
    "saturated": [{process, time, users, why, before_knee}], "heartbeats": the master's view where the
    file has it, and for a watched run (`watch`: run.json's generator_watch) "watch": {cpu_percent, source, live,
    warnings}} from the health rows, or None without any."""
    if not health:
        return None
    rows_in_time = sorted(health, key=lambda r: r["time"])
    by_process: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows_in_time:
        by_process.setdefault(row["process"], []).append(row)
    per_process: dict[str, ProcessHealth] = {}
    saturated: list[Saturation] = []
    for name, rows in sorted(by_process.items()):
        onset = saturation_onset(rows)
        per_process[name] = {"cpu_max": max((r["cpu_percent"] or 0 for r in rows), default=0),
                             "lag_max_ms": max((r["loop_lag_ms"] or 0 for r in rows), default=0),
                             "saturated_at": onset["time"] if onset else None}
        if onset:
            saturated.append(dated(onset, onset["why"], knee_time))
    found: LoadGenerator = {"workers": workers, "processes": len(per_process), "per_process": per_process,
                            "saturated": sorted(saturated, key=lambda s: s["time"])}
    beats = heartbeats(rows_in_time)
    if beats is not None:  # absent: one process, or a health.csv from before the master's view (unknown)
        found["heartbeats"] = beats
    if watch:
        warnings = Watch(watch["cpu_percent"]).feed(rows_in_time)
        found["watch"] = {"cpu_percent": watch["cpu_percent"], "source": watch.get("source"),
                          "live": bool(watch.get("live")),
                          "warnings": [dated(row, why, knee_time) for row, why in warnings]}
    return found


def dated(row: Mapping[str, Any], why: str, knee_time: float | None) -> Saturation:
    return {"process": row["process"], "time": row["time"], "users": row["users"], "why": why,
            "before_knee": knee_time is None or row["time"] <= knee_time}


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


def reason(row: Mapping[str, Any], cpu_percent: float = CPU_SATURATED) -> str | None:
    if (row["cpu_percent"] or 0) >= cpu_percent:
        return f"CPU {row['cpu_percent']:.0f} %"
    if (row["loop_lag_ms"] or 0) >= LAG_SATURATED_MS:
        return f"event loop {row['loop_lag_ms']:.0f} ms late"
    return None


def worker_reasons(row: Mapping[str, Any]) -> dict[str, str]:
    """The master's view in one of its rows: {"heartbeat": why, "missing": why}, either or both, or {}
    (and {} for a row without the view: a worker's, or an older health.csv's)."""
    found, expected = {}, row.get("workers_expected")
    if (row.get("heartbeat_late_s") or 0) >= HEARTBEAT_LATE_S:
        found["heartbeat"] = f"a worker's heartbeat {row['heartbeat_late_s']:.0f} s late"
    if row.get("workers_missing"):
        found["missing"] = f"{row['workers_missing']} of {expected} workers missing (no heartbeat)"
    return found


class Watch:
    """The warnings rows raise, fed in each process's time order (live: as the master appends them):
    a load process's first HOLD_S-row run at or above `cpu_percent` or LAG_SATURATED_MS late (a worker's,
    or the only process's), dated to the run's first row; a worker's heartbeat late or missing in the
    master's view, at once. Each once."""

    def __init__(self, cpu_percent: float):
        self.cpu_percent = cpu_percent
        self.runs: dict[str, list[tuple[Mapping[str, Any], str]]] = {}  # process -> its current run of rows
        self.warned: set[tuple[str, str]] = set()  # (process, kind)

    def feed(self, rows: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], str]]:
        """The new warnings, as (the row they are dated to, why)."""
        new: list[tuple[Mapping[str, Any], str]] = []
        for row in rows:
            name = row["process"]
            why = reason(row, self.cpu_percent) if name != MASTER else None
            run = self.runs[name] = self.runs.get(name, []) + [(row, why)] if why else []
            if len(run) >= HOLD_S and (name, "process") not in self.warned:
                self.warned.add((name, "process"))
                first, first_why = run[0]
                new.append((first, f"{first_why} for {HOLD_S} s running"))
            for kind, text in worker_reasons(row).items():
                if (name, kind) not in self.warned:
                    self.warned.add((name, kind))
                    new.append((row, text))
        return new


def heartbeats(rows: Sequence[Mapping[str, Any]]) -> Heartbeats | None:
    """The master's view of its workers over the run (its rows' WORKER_COLUMNS), or None where the
    health file has none: a single process, or a file from before the master recorded them (unknown)."""
    viewed = [row for row in rows if row.get("workers_expected") is not None]
    if not viewed:
        return None
    missing = [row for row in viewed if row.get("workers_missing")]
    return {"expected": max(row["workers_expected"] for row in viewed),
            "missing_max": max((row["workers_missing"] for row in missing), default=0),
            "missing_at": missing[0]["time"] if missing else None,
            "heartbeat_late_max_s": max((row.get("heartbeat_late_s") or 0.0 for row in viewed), default=0.0),
            "rebalances": max((row.get("rebalances") or 0 for row in viewed), default=0)}


def knee_warned(found: Mapping[str, Any] | None, has_knee: bool) -> bool | None:
    """Whether a watched run's load generator warned before its knee (None: no knee, or not watched)."""
    watch = found.get("watch") if found else None
    if not has_knee or not watch:
        return None
    return any(warning["before_knee"] for warning in watch["warnings"])

"""The load generator watched while the load runs: the rows the master (or the only Locust process)
appends to health.csv as they come (locust/health.py, HealthLog) go through results/generator.py's
Watch, and each warning is shown as it comes. The CPU threshold is the share of a core at which the
load-generator benchmark's latency still holds (model/fleet.py, holding_cpu_percent); run.json keeps
it (generator_watch), and the report gives the same warnings from the whole file.

Locally a row reaches the kit within a second (the master's own, with its view of the workers'
heartbeats) or about three (a worker's, with its stats report). A fleet's master writes the file on
its VM: the kit reads it once the files are copied, and the report marks those warnings as not live.
"""
import csv
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from visitkit.errors import VisitkitError
from visitkit.model import fleet
from visitkit.results import analysis, generator
from visitkit.runs.state import RunState


def threshold() -> dict[str, Any]:
    """{"cpu_percent", "source"}: the newest load-generator benchmark's holding share of a core, or
    without one Locust's own warning threshold (source None)."""
    try:
        folder, record = fleet.load_benchmark()  # the newest: the one a fleet is sized from
        return {"cpu_percent": fleet.holding_cpu_percent(record), "source": f"benchmarks/{Path(folder).name}"}
    except (VisitkitError, OSError, KeyError, TypeError, ValueError):
        return {"cpu_percent": generator.CPU_SATURATED, "source": None}


def plan_line() -> str:
    """What the watch warns of, as a dry run shows it."""
    found = threshold()
    source = (f"where {found['source']}'s latency still holds" if found["source"]
              else "Locust's own warning: no load-generator benchmark")
    return (f"watch the load generator every second (health.csv, as the master appends it): warn when a load "
            f"process stays at or above {found['cpu_percent']:g} % CPU ({source}) or its event loop runs "
            f"{generator.LAG_SATURATED_MS:g} ms late, for {generator.HOLD_S} s running, or when a worker's heartbeat "
            f"is {generator.HEARTBEAT_LATE_S:g} s late or it is missing")


class HealthTail:
    """health.csv's complete lines as they are appended, from where the last read stopped; read again
    from its start once it is replaced (the master writes it whole, in time order, when it quits)."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0
        self.inode: int | None = None
        self.header: list[str] | None = None

    def read(self) -> list[dict[str, str]]:
        try:
            with open(self.path, "rb") as f:
                inode = os.fstat(f.fileno()).st_ino
                if inode != self.inode:
                    self.inode, self.offset, self.header = inode, 0, None
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        complete = data[:data.rfind(b"\n") + 1]  # a line being written waits for the next read
        self.offset += len(complete)
        rows = [row for row in csv.reader(complete.decode().splitlines()) if row]
        if self.header is None and rows:
            self.header, rows = rows[0], rows[1:]
        return [dict(zip(self.header or [], row)) for row in rows]


class LiveWatch:
    """Feeds the health rows not seen yet to a Watch, and shows each new warning."""

    def __init__(self, state: RunState, path: Path, live: bool = True):
        self.state, self.tail = state, HealthTail(path)
        self.seen: set[tuple[str, float]] = set()  # (process, time): the file is read again once rewritten
        watched = state.record["generator_watch"] = {**threshold(), "live": live}
        self.watch = generator.Watch(watched["cpu_percent"])

    def poll(self) -> None:
        rows = [row for row in analysis.health_rows(self.tail.read()) if (row["process"], row["time"]) not in self.seen]
        self.seen.update((row["process"], row["time"]) for row in rows)
        for row, why in self.watch.feed(sorted(rows, key=lambda row: row["time"])):
            self.state.log(warning_line(row, why, self.state.load_started))


def warning_line(row: Mapping[str, Any], why: str, load_started: float | None) -> str:
    when = f"{row['time'] - load_started:.0f} s into the load" if load_started is not None else "during the load"
    return (f"  WARNING load generator, {when}: {row['process']}: {why} ({row['users']:,} users); a knee from here on "
            "is Locust's, not the system's")

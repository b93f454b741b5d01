"""An open-model run's arrivals (arrivals.csv, written by locust/arrivals.py): per second, the visits the
target rate asked (`target_per_s`, every Locust process together), those started and those the generator
could not start (no user free within its tolerance: k6's dropped iterations).

The steady window, over which `achieved` is measured: the file's seconds but its first and its last (the
clocks start and stop within them); of a held rate (load, endurance) only the seconds whose target is at
least HELD_SHARE of the highest (the held rate; an endurance test's highest stage), which leaves out a ramp
up to it and a second a worker's clock started within; of a ramp (breakpoint) all of them.
"""
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from visitkit.results.records import ArrivalRate
from visitkit.suite import locust_module

ARRIVALS = locust_module("arrivals")
COLUMNS = ARRIVALS.COLUMNS  # ("time", "target_per_s", "started", "not_started")
HELD_SHARE = 0.99
RAMP_TESTS = ("breakpoint",)  # whose rate rises throughout: no held rate to keep to


class ArrivalRow(TypedDict):
    time: int  # unix second
    target_per_s: float
    started: int
    not_started: int


def rows(found: Sequence[Mapping[str, str]]) -> list[ArrivalRow]:
    """arrivals.csv's rows (read_csv's dicts of strings), typed, in time order."""
    return sorted(({"time": int(row["time"]), "target_per_s": float(row["target_per_s"]),
                    "started": int(row["started"]), "not_started": int(row["not_started"])} for row in found),
                  key=lambda row: row["time"])


def steady_window(found: Sequence[ArrivalRow], ramp: bool) -> list[ArrivalRow]:
    """The rows of the steady window (the module's docstring), in time order."""
    inner = list(found[1:-1])
    if ramp or not inner:
        return inner
    held = max(row["target_per_s"] for row in inner)
    return [row for row in inner if row["target_per_s"] >= HELD_SHARE * held]


def figures(run: Mapping[str, Any], found: Sequence[ArrivalRow]) -> ArrivalRate:
    """summary.json's load.arrival_rate: an open-model run's target and achieved rates, and the arrivals it
    did not start. `run`: run.json's record (its test and its `arrivals` plan)."""
    plan = run.get("arrivals") or {}
    window = steady_window(found, run.get("test") in RAMP_TESTS)
    seconds = len(window)
    peak = round(max(row["target_per_s"] for row in window), 2) if window else plan.get("rate")
    figures: ArrivalRate = {
            "target": peak,
            "ramp_per_s": plan.get("ramp_per_s") if run.get("test") in RAMP_TESTS else None,
            "achieved": round(sum(row["started"] for row in window) / seconds, 2) if seconds else None,
            "window_target": round(sum(row["target_per_s"] for row in window) / seconds, 2) if seconds else None,
            "window": [window[0]["time"], window[-1]["time"]] if window else None, "seconds": seconds,
            "started": sum(row["started"] for row in found),
            "not_started": sum(row["not_started"] for row in found),
            "users_max": plan.get("users_max")}
    if plan.get("gaps", ARRIVALS.EVEN) != ARRIVALS.EVEN:  # a paced run (each before arrival_gaps) keeps its summary
        figures["gaps"] = plan["gaps"]
    return figures

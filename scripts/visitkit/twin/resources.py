"""What each part consumed: CPU and memory per function (summed over its instances) and per
platform part, sampled from the processes every second (psutil) locally, read from Cloud Run's
metrics on Google Cloud; and the per-run figures the report shows, from those samples.

A sample's "resources" entry: {component: {"cpu_percent": % of one core, "rss_mb": MB}}.
"""
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psutil

from visitkit.catalogue import FUNCTIONS
from visitkit.samples import ResourceFigures, Sample
from visitkit.settings import Settings

INSTANCE_NAME = re.compile(r"^(?P<function>.+)-\d+$")


def component_of(process_name: str) -> str:
    """'get-counter-1' -> 'get-counter'; a platform part keeps its name."""
    found = INSTANCE_NAME.match(process_name)
    return found["function"] if found and found["function"] in FUNCTIONS else process_name


class ProcessSampler:
    """CPU % (of one core) and resident memory per component, from the processes' own counters.

    groups(): {component: [process group ids]}; watched: {component: pid} whose children count
    too (Locust's worker processes). The first sample has no CPU figure: CPU is a difference.
    """

    def __init__(self, groups: Callable[[], Mapping[str, list[int]]], now: Callable[[], float] = time.monotonic):
        self.groups, self.now = groups, now
        self.watched: dict[str, int] = {}
        self._last: tuple[float, dict[str, float]] | None = None  # (time, {component: cpu seconds})

    def watch(self, component: str, pid: int) -> None:
        self.watched[component] = pid

    def _processes(self) -> dict[str, list[psutil.Process]]:
        members: dict[str, list[psutil.Process]] = {}
        wanted = {pgid: component for component, pgids in self.groups().items() for pgid in pgids}
        for process in psutil.process_iter(["pid"]):
            try:
                component = wanted.get(os.getpgid(process.pid))
            except OSError:
                continue
            if component is not None:
                members.setdefault(component, []).append(process)
        for component, pid in self.watched.items():
            try:
                root = psutil.Process(pid)
                members.setdefault(component, []).extend([root, *root.children(recursive=True)])
            except psutil.Error:
                continue
        return members

    def sample(self) -> dict[str, ResourceFigures]:
        when = self.now()
        cpu: dict[str, float] = {}
        rss: dict[str, int] = {}
        for component, processes in self._processes().items():
            for process in processes:
                try:
                    with process.oneshot():
                        times, memory = process.cpu_times(), process.memory_info()
                except psutil.Error:  # it ended between listing and reading
                    continue
                cpu[component] = cpu.get(component, 0.0) + times.user + times.system
                rss[component] = rss.get(component, 0) + memory.rss
        last, self._last = self._last, (when, cpu)
        result: dict[str, ResourceFigures] = {}
        for component in cpu:
            percent = None
            if last is not None and component in last[1] and when > last[0]:
                percent = max(0.0, (cpu[component] - last[1][component]) / (when - last[0]) * 100)
            result[component] = {"cpu_percent": percent, "rss_mb": rss[component] / 2**20}
        return result


# ---- the run's figures ---------------------------------------------------------------------------
def summarize(samples: Sequence[Sample], start: float | None, end: float | None) -> dict[str, dict[str, Any]]:
    """{component: {cpu_seconds, cpu_percent_mean, cpu_percent_peak, memory_peak_mb}} over [start, end]
    from samples with a "resources" entry; CPU seconds integrate CPU % over the time between samples."""
    window = [s for s in samples
              if s.get("resources") and (start is None or end is None or start <= s["time"] <= end)]
    figures: dict[str, dict[str, Any]] = {}
    for before, after in zip(window, window[1:]):
        dt = after["time"] - before["time"]
        for component, now in after["resources"].items():
            row = figures.setdefault(component, {"cpu_seconds": 0.0, "percents": [], "rss": []})
            if (percent := now.get("cpu_percent")) is not None and dt > 0:
                row["cpu_seconds"] += percent / 100 * dt
                row["percents"].append(percent)
            if now.get("rss_mb") is not None:
                row["rss"].append(now["rss_mb"])
    return {component: {"cpu_seconds": row["cpu_seconds"],
                        "cpu_percent_mean": sum(row["percents"]) / len(row["percents"]) if row["percents"] else None,
                        "cpu_percent_peak": max(row["percents"], default=None),
                        "memory_peak_mb": max(row["rss"], default=None)}
            for component, row in figures.items()}


MACHINE_BUSY = 0.85  # of all cores: past this, every part of the twin waits for CPU
AROUND_S = 5  # seconds either side of a moment whose CPU is read


def machine_at(samples: Sequence[Sample], moment: float, cores: int | None) -> dict[str, Any] | None:
    """{cpu_percent, cores, busy}: every sampled part's CPU together (% of one core), the mean over
    AROUND_S either side of `moment`, and whether that is MACHINE_BUSY of the cores (None: cores
    unknown). None without samples then. On the local twin a knee the machine's CPU sets is the
    machine's, not the system's: the report says which."""
    totals = [sum(percent for part in s["resources"].values() if (percent := part.get("cpu_percent")) is not None)
              for s in samples if s.get("resources") and abs(s["time"] - moment) <= AROUND_S]
    if not totals:
        return None
    cpu = sum(totals) / len(totals)
    return {"cpu_percent": cpu, "cores": cores, "busy": cpu >= MACHINE_BUSY * cores * 100 if cores else None}


def cpu_ms_per_request(resources: Mapping[str, Mapping[str, Any]], requests: Mapping[str, float]) -> dict[str, float]:
    """{function: CPU milliseconds per request it served} where both are known."""
    return {name: resources[name]["cpu_seconds"] * 1000 / count
            for name, count in requests.items()
            if name in resources and count and resources[name]["cpu_seconds"] is not None}


def platform_summary(samples: Sequence[Sample], settings: Settings) -> dict[str, dict[str, Any]]:
    """The same figures from Cloud Run's per-minute metrics (the whole window): CPU seconds are billed
    instance-seconds x vCPU x mean utilization; CPU % is of one core, over the window; memory is the
    p95 utilization x memory x the minute's average instances billed."""
    from visitkit.model.cost import memory_gib

    figures = {}
    for name, spec in settings.functions.items():
        vcpu, mib = float(spec.effective_cpu), memory_gib(spec.memory) * 1024
        cpu_seconds = 0.0
        peaks: list[float] = []
        memory: list[float] = []
        for before, after in zip(samples, samples[1:]):
            f0, f1 = before["functions"][name], after["functions"][name]
            billed = (f1.get("billable_instance_s") or 0) - (f0.get("billable_instance_s") or 0)
            minute = after["time"] - before["time"]
            if (cpu_mean := f1.get("cpu_utilization")) is not None:
                cpu_seconds += billed * vcpu * cpu_mean
            if (cpu_p95 := f1.get("cpu_utilization_p95")) is not None and minute > 0:
                peaks.append(billed / minute * vcpu * cpu_p95 * 100)
            if (memory_p95 := f1.get("memory_utilization_p95")) is not None and minute > 0:
                memory.append(memory_p95 * mib * max(1.0, billed / minute))
        span = samples[-1]["time"] - samples[0]["time"] if len(samples) > 1 else 0
        figures[name] = {"cpu_seconds": cpu_seconds,
                         "cpu_percent_mean": cpu_seconds / span * 100 if span else None,
                         "cpu_percent_peak": max(peaks, default=None), "memory_peak_mb": max(memory, default=None)}
    return figures

"""Sizing a Locust fleet: how many requests one Locust worker process sends per second of its
own CPU, measured here, and what a planned rate of visits then needs on Google Cloud.

`benchmark(...)` runs SCENARIOS in turn from one master and one worker (locust/node.py, as on a
fleet's VMs) against a no-op functions-framework function on this machine, reads the worker's
CPU every second (health.csv) and Locust's exact per-second counts, and writes a results folder
under benchmarks/ (visitkit.benchmarks.benchfolder): benchmark.json (FORMAT), summary.md, and each scenario's
health.csv and per_second.csv. visitkit.model.fleet sizes a fleet from such a folder's record.
"""
import csv
import datetime
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from visitkit import suite
from visitkit.benchmarks import benchfolder
from visitkit.benchmarks.hotpath import NOOP_SOURCE
from visitkit.errors import VisitkitError
from visitkit.model.fleet import PLANNED_CPU, planning
from visitkit.net import free_port, http_status, wait_until
from visitkit.paths import ROOT
from visitkit.results import folder as results

FORMAT = 1
KIND = "loadgen"
NOOP_THREADS = 16
DEFAULT_SECONDS = 40
# Flat out, as Locust's own documentation measures; and the study's visitor as a fleet runs it: a
# crowd of users, each waiting 3-5 s between pages on a kept-alive connection of its own.
SCENARIOS = ({"name": "flat-out", "users": 64, "think_time": "0"},
             {"name": "study-visitor", "users": 2000, "think_time": "3-5"})
PLANNING_SCENARIO = "study-visitor"  # what a fleet is sized by


def benchmark(seconds: float = DEFAULT_SECONDS, out_root: str | Path = benchfolder.BENCHMARKS_DIR,
              now: Callable[[], datetime.datetime] = datetime.datetime.now,
              scenarios: Iterable[Mapping[str, Any]] = SCENARIOS) -> tuple[Path, dict[str, Any]]:
    """Runs each scenario in turn against one no-op server; returns (results folder, record)."""
    started = now()  # the folder's name and the record's "when"
    with benchfolder.new_folder(KIND, out_root, started) as folder:
        measured = measure(folder, seconds, scenarios)
        record = {"format": FORMAT, "benchmark": KIND, "when": started.isoformat(timespec="seconds"),
                  "machine": benchfolder.machine(), "locust": locust_version(), "seconds": seconds,
                  "target": "no-op functions-framework function on the same machine", "planned_cpu": PLANNED_CPU,
                  "scenarios": measured, "planning_scenario": PLANNING_SCENARIO}
        benchfolder.write(folder, record, summary_lines(record, folder.name))
    return folder, record


def measure(folder: Path, seconds: float, scenarios: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each scenario's figures, its files kept in `folder`."""
    port = free_port()
    # gunicorn's own limit of 1,000 open connections would refuse a crowd of kept-alive users
    server = subprocess.Popen([sys.executable, "-m", "functions_framework", "--target", "noop", "--source",
                               str(NOOP_SOURCE), "--host", "127.0.0.1", "--port", str(port)],
                              env={**os.environ, "THREADS": str(NOOP_THREADS),
                                   "GUNICORN_CMD_ARGS": "--worker-connections 20000"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    measured = []
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_status(url) is not None, timeout=30)
        for scenario in scenarios:
            with tempfile.TemporaryDirectory(prefix="bench-loadgen-") as run_dir:
                run_one_worker(url, scenario, seconds, Path(run_dir))
                for name in (results.HEALTH, results.PER_SECOND):
                    (folder / f"{scenario['name']}-{name}").write_bytes((Path(run_dir) / name).read_bytes())
            measured.append(figures(folder, scenario))
    finally:
        server.kill()
        server.wait()
    return measured


def run_one_worker(url: str, scenario: Mapping[str, Any], seconds: float, run_dir: Path) -> None:
    """A master and one worker process (locust/node.py), as on a fleet's VM."""
    conf = run_dir / results.RUN_CONF
    users = scenario["users"]
    conf.write_text(f"headless = true\nhost = {url}\nusers = {users}\nspawn-rate = {max(1, users // 10)}\n"
                    f"run-time = {seconds}s\nthink-time = {scenario['think_time']}\nstop-timeout = 5\n"
                    "only-summary = true\nexit-code-on-error = 0\n")
    bind = free_port()
    node = [sys.executable, str(suite.LOCUSTFILE.with_name("node.py"))]
    master = subprocess.Popen([*node, "master", "--config", str(conf), "--out", str(run_dir), "--bind-port", str(bind),
                               "--expect-workers", "1", "--wait-workers", "60"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=ROOT)
    worker = subprocess.Popen([*node, "worker", "--config", str(conf), "--master-host", "127.0.0.1", "--master-port",
                               str(bind)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        master.wait(seconds + 120)
        worker.wait(30)
    finally:
        for process in (master, worker):
            if process.poll() is None:
                process.kill()
                process.wait()


def figures(folder: Path, scenario: Mapping[str, Any]) -> dict[str, Any]:
    """One scenario's figures from its files, over the steady part of the run: from the last
    user's spawn (spawning costs CPU of its own) to the stop, its last fifth left out."""
    name = scenario["name"]
    with open(folder / f"{name}-{results.PER_SECOND}", newline="") as f:
        per_second = [(int(row["time"]), int(row["requests"])) for row in csv.DictReader(f)]
    with open(folder / f"{name}-{results.HEALTH}", newline="") as f:
        health = [row for row in csv.DictReader(f) if row["process"] != "master"]
    if not per_second or not health:
        raise VisitkitError(f"{folder}: the {name} scenario's Locust wrote no per-second counts or health")
    spawned = next((float(row["time"]) for row in health if int(row["users"]) >= scenario["users"]), None)
    first = (spawned or per_second[0][0]) + 2
    last: float = per_second[-1][0]
    last -= (last - first) // 5
    steady = [n for t, n in per_second if first <= t <= last]
    cpu = [float(row["cpu_percent"]) for row in health if first <= float(row["time"]) <= last]
    if not steady or not cpu:
        raise VisitkitError(f"{folder}: the {name} scenario had no steady part (too short a run?)")
    rps, cpu_percent = sum(steady) / len(steady), sum(cpu) / len(cpu)
    return {**scenario, "steady_s": len(steady), "rps": round(rps, 1), "worker_cpu_percent": round(cpu_percent, 1),
            "requests_per_core_second": round(rps / (cpu_percent / 100), 1)}


def locust_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("locust")


def load(folder: str | Path) -> dict[str, Any]:
    return benchfolder.load(folder, KIND, FORMAT)


def render(record: Mapping[str, Any]) -> list[str]:
    """The Markdown table of a record: one row per scenario, each rate per core-second also as a
    multiple of the first (flat out)'s."""
    first = record["scenarios"][0]["requests_per_core_second"]
    lines = ["| scenario | users | think time (s) | requests/s | worker CPU (% of a core) | requests per core-second "
             "| vs flat out |", "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {s['name']} | {s['users']:,} | {s['think_time']} | {s['rps']:,.0f} | {s['worker_cpu_percent']:.0f} "
              f"| {s['requests_per_core_second']:,.0f} | {s['requests_per_core_second'] / first:.2f}x |"
              for s in record["scenarios"]]
    return lines


def summary_lines(record: Mapping[str, Any], name: str) -> list[str]:
    lines = [f"# Load generator sizing ({name})", "",
             f"One Locust worker process against {record['target']} ({record['machine']['processor']}, "
             f"{record['machine']['cores']} cores; Locust {record['locust']}), {record['seconds']} s per scenario, "
             "read from its steady part (after the last user spawned).", "", *render(record)]
    plan = planning(record)
    lines += ["", f"A fleet is sized by {plan['name']}, at {record['planned_cpu']:.0%} of a core: "
                  f"{plan['requests_per_core_second'] * record['planned_cpu']:,.0f} requests/s per worker process "
                  "(`scripts/predict ITERATION --fleet VISITS_PER_S`).", "",
              "Where the worker used well under a core, the no-op server on the same machine was the limit; the "
              "figure per core-second is the requests/s over that share (Locust spends about the same CPU on each "
              "request). A cloud VM's vCPU is one hyperthread and the system is remote: read each fleet run's Load "
              "generator section rather than trust this figure alone.", "",
              f"one worker process ({plan['name']}): {plan['requests_per_core_second']:,.0f} requests per core-second"]
    return lines


def latest(out_root: str | Path = benchfolder.BENCHMARKS_DIR) -> tuple[Path, dict[str, Any]]:
    """The newest sizing benchmark: (folder, record)."""
    folders = sorted(Path(out_root).glob(f"{KIND}-*/{benchfolder.RECORD}"))
    if not folders:
        raise VisitkitError(f"no load-generator benchmark in {out_root}: run scripts/benchmark-loadgen")
    return folders[-1].parent, load(folders[-1].parent)


def chosen(folder: str | Path | None = None, out_root: str | Path = benchfolder.BENCHMARKS_DIR
           ) -> tuple[Path, dict[str, Any]]:
    """A sizing benchmark, (folder, record): `folder` (a path, or a folder's name in out_root), by
    default the newest; naming one keeps what predict prints from following a newer local run."""
    if folder is None:
        return latest(out_root)
    path = Path(folder) if Path(folder).exists() else Path(out_root) / folder
    return path, load(path)

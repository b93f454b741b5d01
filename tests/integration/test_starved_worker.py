"""A local `--workers 2` run with one worker starved of CPU on purpose (stopped and let go again, as an
overloaded machine would): the runner warns while the load runs (visitkit.runs.watch), and the report
says so again, with the master's view of the missed heartbeats in health.csv (locust/health.py)."""
import csv
import json
import os
import shutil
import signal
import threading
import time

import psutil
import pytest

from visitkit.net import wait_until
from visitkit.paths import ROOT
from visitkit.reports import publish
from visitkit.runs import runner
from visitkit.runs.config import RunConfig

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
MISSING_STOP_S = 8  # Locust marks a worker missing ~5 s after its last heartbeat (HEARTBEAT_LIVENESS 3)
CYCLES, STOPPED_S, RUNNING_S = 5, 1.2, 0.3  # then starved in bursts: its event loop wakes late


def locust_workers(under):
    """The Locust worker processes of the run whose files are under `under` (their --config is there)."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "--worker" in cmdline and any(part.startswith(str(under)) for part in cmdline):
            found.append(process)
    return sorted(found, key=lambda process: process.pid)


def starve(under, done):
    """Once the test has run a few seconds, stops one worker long enough to be missed, then in bursts."""
    wait_until(lambda: any(len(path.read_text().splitlines()) > 8
                           for path in under.glob("results/*/locust_stats_history.csv")), timeout=120)
    workers = locust_workers(under)
    assert len(workers) == 2, workers
    starved = workers[0]
    done["pid"], done["from"] = starved.pid, time.time()
    try:
        starved.send_signal(signal.SIGSTOP)
        time.sleep(MISSING_STOP_S)
        for _ in range(CYCLES):
            starved.send_signal(signal.SIGCONT)
            time.sleep(RUNNING_S)
            starved.send_signal(signal.SIGSTOP)
            time.sleep(STOPPED_S)
    finally:
        starved.send_signal(signal.SIGCONT)
        done["until"] = time.time()


def test_a_starved_worker_is_warned_of_while_the_load_runs_and_again_in_the_report(tmp_path):
    iteration = tmp_path / "iteration-0"
    iteration.mkdir()
    shutil.copy(ROOT / "iterations" / "iteration-0" / "settings.tfvars.json", iteration)
    config = RunConfig.build(iteration, "breakpoint", duration="32s", shape_set="spawn_rate=2", workers=2,
                             convergence_timeout=60, warm_up="0")
    shown: list[tuple[float, str]] = []
    done: dict[str, float] = {}
    starver = threading.Thread(target=starve, args=(iteration, done), daemon=True)
    starver.start()
    try:
        results, summary = runner.run(config, log=lambda line: shown.append((time.time(), line)),
                                      publish=publish.publish)
    finally:
        starver.join(60)
        if "pid" in done and "until" not in done:
            os.kill(int(done["pid"]), signal.SIGCONT)
    assert "until" in done, "the worker was never starved"

    # live: warned in the terminal while Locust still ran, after the starving began
    load_end = json.loads((results / "run.json").read_text())["load_window"][1]
    live = [(at, line) for at, line in shown if "WARNING load generator" in line and done["from"] <= at < load_end]
    said = "\n".join(line for _, line in live)
    assert "master: a worker's heartbeat" in said and "workers missing (no heartbeat)" in said, shown
    assert "event loop" in said and "ms late for 3 s running" in said, shown

    # the master's view, second by second, in health.csv
    with open(results / "health.csv", newline="") as f:
        master = [row for row in csv.DictReader(f) if row["process"] == "master"]
    assert max(int(row["workers_missing"]) for row in master) == 1
    assert max(float(row["heartbeat_late_s"]) for row in master) >= MISSING_STOP_S - 2
    assert int(master[-1]["rebalances"]) >= 2  # its users moved to the other worker, then back
    assert {row["workers_expected"] for row in master} == {"2"}

    # the report says it again
    watch = summary.load_generator["watch"]
    assert watch["live"] and watch["cpu_percent"] < 90 and watch["source"].startswith("benchmarks/loadgen-")
    assert any("event loop" in warning["why"] for warning in watch["warnings"])
    report = (results / "report.md").read_text()
    assert "warned in the terminal as each came" in report and "**Warned**: master (1 of 2 workers missing" in report
    assert "Workers' heartbeats, the master's view: 2 expected, **1 missing** at worst" in report
    if summary.breakpoint["knee"] and summary.breakpoint["knee"]["time"] >= done["from"] + MISSING_STOP_S:
        assert summary.headline["knee_generator_warned"] is True

"""Locust in distributed mode on one machine, as `--workers N` runs it: a master and its workers,
each started by locust/node.py (the fleet's VMs start the same way), over loopback."""
import contextlib
import csv
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from visitkit.reports import publish
from visitkit.results import audit
from visitkit.runs import runner
from visitkit.runs.config import LoadPlan, RunConfig
from visitkit.net import free_port, wait_until
from visitkit.paths import ROOT
from visitkit.results.summary import ledger_figures


@pytest.mark.slow
def test_a_breakpoint_run_with_two_workers_audits_every_visit_exactly(tmp_path):
    iteration = tmp_path / "iteration-0"
    iteration.mkdir()
    shutil.copy(ROOT / "iterations" / "iteration-0" / "settings.tfvars.json", iteration)
    config = RunConfig.build(iteration, "breakpoint", duration="20s", shape_set="spawn_rate=3", workers=2,
                             convergence_timeout=120, warm_up="0", retry_visits=1)
    results, summary = runner.run(config, log=lambda *_: None, publish=publish.publish)

    ledger = json.loads((results / "ledger.json").read_text())
    assert ledger["complete"] and len(ledger["workers"]) == 2
    assert all(entry["final"] for entry in ledger["workers"].values())
    # every worker's visits reached the master by id: their running counts add up to the merged ids
    assert len(audit.visit_ids(ledger)) == sum(ledger["sent"].values()) > 0 and ledger["untracked"] == {}
    visits = summary.visits["total"]
    assert summary.audit["method"] == "exact" and summary.audit["reads"] == visits["sent"]
    assert visits["acknowledged"] == visits["acknowledged_stored"] == sum(ledger["acknowledged"].values()) > 0
    assert visits["lost"] == visits["duplicated"] == 0
    assert summary.load["workers"] == 2
    # users finish their page when the load ends, and the exact per-second counts hold every request
    with open(results / "per_second.csv", newline="") as f:
        assert sum(int(row["requests"]) for row in csv.DictReader(f)) == summary.load["requests"]
    with open(results / "health.csv", newline="") as f:
        processes = {row["process"] for row in csv.DictReader(f)}
    assert "master" in processes and len(processes) == 3
    assert summary.load_generator["processes"] == 3 and not summary.load_generator["saturated"]
    run = json.loads((results / "run.json").read_text())
    assert run["locust_command"][2] == "master" and run["locust_workers_command"][-2:] == ["--processes", "2"]
    assert "shape-set = spawn_rate=3,duration_s=20" in (results / "run.conf").read_text()
    report = (results / "report.md").read_text()
    assert "Locust ran as a master and 2 workers" in report and "No process saturated" in report


@contextlib.contextmanager
def nodes(*commands):
    """locust/node.py processes, each in a process group of its own, all killed on the way out."""
    started = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
               for command in commands]
    try:
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_killed_worker_leaves_the_ledger_incomplete_and_named(stack, tmp_path):
    load = LoadPlan("breakpoint", shape_set="spawn_rate=4,duration_s=16,quit_wait_s=3", workers=2)
    conf = tmp_path / "run.conf"
    conf.write_text(load.run_conf(stack.base_url))
    master, worker = load.node_commands(conf, tmp_path, free_port(), processes=1, expect_workers=2)
    with nodes(master, worker, worker) as started:
        history = tmp_path / "locust_stats_history.csv"
        wait_until(lambda: history.exists() and len(history.read_text().splitlines()) > 16, timeout=60)
        os.killpg(started[2].pid, signal.SIGKILL)  # one worker dies mid-run, with visits under way
        assert started[0].wait(90) == 0
    ledger = json.loads((tmp_path / "ledger.json").read_text())
    assert not ledger["complete"]
    finals = [name for name, entry in ledger["workers"].items() if entry["final"]]
    assert len(ledger["workers"]) == 2 and len(finals) == 1
    assert ledger_figures(ledger)["missing_workers"] == sorted(set(ledger["workers"]) - set(finals))
    survivor = ledger["workers"][finals[0]]["counts"]
    # the dead worker's visits up to its last report are in the merged ledger
    assert len(audit.visit_ids(ledger)) > sum(survivor["sent"].values())


def test_the_masters_options_reach_remote_workers_when_the_test_starts(stack, tmp_path):
    """Workers started with only the master's address read its options once the test starts (Locust
    issue #2206): --think-time 0 (2 users make many more visits in 6 s than with 3-5 s between pages),
    and --ledger-ids (beyond it visits are counted, not kept by id)."""
    load = LoadPlan("load", shape_set="warmup_users=2,warmup_s=6,rampup_s=0,plateau_s=0,cleanup_s=0")
    conf = tmp_path / "run.conf"
    conf.write_text(load.run_conf(stack.base_url) + "think-time = 0\nledger-ids = 4\n")
    worker_conf = tmp_path / "worker.conf"
    worker_conf.write_text(f"host = {stack.base_url}\n")  # a worker's own command line says nothing of it
    master, worker = load.node_commands(conf, tmp_path, free_port(), processes=1)
    worker[worker.index("--config") + 1] = str(worker_conf)
    started = time.monotonic()
    with nodes(master, worker) as processes:
        assert processes[0].wait(90) == 0
    ledger = json.loads((tmp_path / "ledger.json").read_text())
    assert time.monotonic() - started < 90
    sent = sum(ledger["sent"].values())
    assert sent > 2 * 3  # 3-5 s between pages would allow at most 2 x 2 visits
    assert len(audit.visit_ids(ledger)) == 4 and sum(ledger["untracked"].values()) == sent - 4
    assert not ledger["complete"]

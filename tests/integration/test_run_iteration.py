"""A short real run of the whole loop against the local stack: files, figures, nothing lost or duplicated."""
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from visitkit.reports import docs, publish
from visitkit.runs import runner
from visitkit.runs.config import RunConfig
from visitkit.paths import ROOT


@pytest.mark.slow
def test_short_breakpoint_run_writes_a_consistent_report(tmp_path):
    iteration = tmp_path / "iteration-0"
    iteration.mkdir()
    shutil.copy(ROOT / "iterations" / "iteration-0" / "settings.tfvars.json", iteration)
    (iteration / "README.md").write_text("## Hypothesis\n\nBaseline.\n\n**Check:** `requests > 0`\n")

    config = RunConfig.build(iteration, "breakpoint", duration="15s", shape_set="spawn_rate=2",
                             convergence_timeout=120, warm_up="4s", warm_up_users=4, retry_visits=2,
                             update_readme=True)
    results, summary = runner.run(config, log=lambda *_: None, publish=publish.publish)

    # the warm-up's visits are stored before the test and count in neither its visits nor its push figures
    warm = json.loads((results / "run.json").read_text())["warm_up"]
    assert warm["acknowledged"] == sum(json.loads((results / "warm-up" / "ledger.json").read_text())
                                       ["acknowledged"].values()) > 0
    assert summary.twin["push"]["acked"] == summary.visits["total"]["stored"]
    assert "Warm-up before the test: 4 users" in (results / "report.md").read_text()

    for name in ("report.md", "summary.json", "run.json", "ledger.json", "locust_stats.csv",
                 "locust_stats_history.csv", "locust.html", "server-samples.jsonl", "convergence.jsonl",
                 "load.png", "server.png", "audit.json"):
        assert (results / name).stat().st_size > 0, name
    ledger = json.loads((results / "ledger.json").read_text())
    visits = summary.visits["total"]
    assert visits["acknowledged"] == sum(ledger["acknowledged"].values()) > 0
    assert visits["lost"] == visits["duplicated"] == 0
    # Audited visit by visit: every acknowledged one stored, and the fate of every other one known.
    assert summary.audit["method"] == "exact" and summary.audit["reads"] == visits["sent"]
    assert visits["acknowledged_stored"] == visits["acknowledged"]
    assert visits["stored"] == visits["acknowledged_stored"] + visits["stored_unacknowledged"]
    assert visits["sent"] == visits["acknowledged"] + visits["stored_unacknowledged"] + visits["neither"]
    assert "## Visits: every visit's fate" in (results / "report.md").read_text()
    assert "--retry-visits 2" in " ".join(json.loads((results / "run.json").read_text())["locust_command"])
    assert summary.convergence["converged"]
    assert summary.load["requests"] == 3 * visits["sent"]  # users finish their page when the load ends
    endpoints = {row["name"] for row in summary.percentiles}
    assert "/inc-counter?visit_type=jobs" in endpoints and "Aggregated" in endpoints
    assert summary.server_source == "local-haproxy"
    assert summary.verdict["outcome"] == "supported"
    assert f"<!-- figures run: results/{results.name} -->" in (iteration / "README.md").read_text()
    assert docs.check([iteration / "README.md"])[0] == []  # the block the runner wrote is what docs writes
    assert "| Function | client mean" in (results / "report.md").read_text()


def test_a_run_stopped_by_kill_stops_locust_and_the_stack(tmp_path):
    iteration = tmp_path / "iteration-0"
    iteration.mkdir()
    shutil.copy(ROOT / "iterations" / "iteration-0" / "settings.tfvars.json", iteration)
    run = subprocess.Popen([sys.executable, "-m", "visitkit.cli", "run", str(iteration), "--test", "breakpoint",
                            "--duration", "5m", "--processes", "2", "--warm-up", "0"],  # workers too must stop
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    history = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and history is None:  # wait until Locust writes its history
        history = next(iteration.glob("results/*/locust_stats_history.csv"), None)
        time.sleep(0.5)
    assert history is not None, "the load never started"
    stack = history.parent / "stack"
    pids = [int(p.read_text()) for p in stack.glob("*.pid")]
    assert pids
    run.send_signal(signal.SIGTERM)  # to the run alone, not its process group
    output, _ = run.communicate(timeout=120)
    assert run.returncode == 130, output
    assert "interrupted" in output

    def alive(pid):  # a zombie waiting for init to reap it has stopped too
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [pid for pid in pids if alive(pid)], output
    locust = subprocess.run(["pgrep", "-f", f"locust.*{history.parent}"], capture_output=True, text=True)
    assert locust.stdout.strip() == "", "Locust still runs"

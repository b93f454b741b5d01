"""`scripts/run-iteration` with gates, run for real on the local twin: a short run whose thresholds and expected
verdict hold exits 0; one whose threshold fails exits 3, and with --abort-on-fail stops its load early yet still
converges and audits every visit; each writes its JUnit XML; `visitkit report` judges a folder's gates again."""
import json
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from visitkit.paths import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # a short run each: ~40 s and ~25 s (tests/README.md)

RUN = ROOT / "scripts" / "run-iteration"
KIT = ROOT / "scripts" / "kit"


@pytest.fixture
def iteration(tmp_path):
    folder = tmp_path / "iterations" / "iteration-0"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "iterations" / "iteration-0" / "settings.tfvars.json", folder)
    (folder / "README.md").write_text("## Hypothesis\n\nIt serves.\n\n**Check:** `requests > 0`\n")
    return folder


def run(iteration, *args):
    return subprocess.run([str(RUN), str(iteration), "--test", "breakpoint", "--warm-up", "0", *args],
                          capture_output=True, text=True, timeout=420)


def only_folder(iteration):
    [folder] = (iteration / "results").iterdir()
    return folder


def junit_cases(path):
    [suite] = ET.parse(path).getroot().findall("testsuite")
    return {case.get("name"): case.find("failure") for case in suite.findall("testcase")}, suite


def test_thresholds_that_hold_exit_0(iteration, tmp_path):
    junit = tmp_path / "held.xml"
    result = run(iteration, "--duration", "20s", "--shape-set", "spawn_rate=2", "--threshold", "visits.lost==0",
                 "--threshold", "requests>0", "--threshold", "failure_ratio<=0.5", "--expect", "supported",
                 "--junit", str(junit))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "gates: all hold" in result.stdout
    cases, suite = junit_cases(junit)
    assert list(cases) == ["visits.lost == 0", "requests > 0", "failure_ratio <= 0.5", "verdict is supported"]
    assert not any(failure is not None for failure in cases.values()) and suite.get("failures") == "0"
    folder = only_folder(iteration)
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["gates"]["passed"] and summary["gates"]["stopped_early"] is None
    assert summary["load"]["seconds"] >= 15  # the whole load ran
    assert "## Thresholds" in (folder / "report.md").read_text()


def test_a_threshold_that_fails_exits_3_and_with_abort_on_fail_stops_the_load(iteration, tmp_path):
    junit = tmp_path / "failed.xml"
    # no get-counter answers within 1 ms: Locust's last ~10 s show it once 50 requests were made
    result = run(iteration, "--duration", "90s", "--shape-set", "spawn_rate=5", "--threshold", "visits.lost==0",
                 "--threshold", "p95_ms.get-counter<1", "--abort-on-fail", "--junit", str(junit))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "gates: FAILED (exit status 3)" in result.stdout
    folder = only_folder(iteration)
    stopped = json.loads((folder / "run.json").read_text())["stopped_early"]
    assert stopped["threshold"] == "p95_ms.get-counter < 1" and stopped["at_s"] < 60
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["load"]["seconds"] < 60  # of the 90 s planned
    # the load stopped as at its end: the counters converged and every visit was audited, none lost
    assert summary["convergence"]["converged"] and summary["audit"]["method"] == "exact"
    assert summary["visits"]["total"]["acknowledged"] > 0 and summary["visits"]["total"]["lost"] == 0
    gates = {o["threshold"]: o for o in summary["gates"]["thresholds"]}
    assert gates["visits.lost == 0"]["holds"] and not gates["p95_ms.get-counter < 1"]["holds"]
    assert "The load was stopped early" in (folder / "report.md").read_text()
    cases, suite = junit_cases(junit)
    assert cases["visits.lost == 0"] is None and suite.get("failures") == "1"
    assert "p95_ms.get-counter" in cases["p95_ms.get-counter < 1"].get("message")
    # rebuilt from the folder alone, the gates are judged again
    rebuilt = subprocess.run([str(KIT), "report", str(folder)], capture_output=True, text=True, timeout=120)
    assert rebuilt.returncode == 3, rebuilt.stdout + rebuilt.stderr
    # and with only the threshold that held, 0
    record = json.loads((folder / "run.json").read_text())
    del record["stopped_early"]
    record["gates"]["thresholds"] = ["visits.lost == 0"]
    (folder / "run.json").write_text(json.dumps(record))
    rebuilt = subprocess.run([str(KIT), "report", str(folder)], capture_output=True, text=True, timeout=120)
    assert rebuilt.returncode == 0 and "gates: all hold" in rebuilt.stdout, rebuilt.stdout + rebuilt.stderr

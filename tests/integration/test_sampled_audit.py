"""A local run past the visit-id limit (issue #39): with --ledger-ids set low, the ledger keeps a uniform
sample of the ids over the whole load rather than its first ones, the audit reads the sample's markers in
every part of the load, and the report says what the sample bounds."""
import json
import shutil

import pytest

from visitkit.paths import ROOT
from visitkit.reports import publish
from visitkit.results import audit
from visitkit.runs import runner
from visitkit.runs.config import RunConfig
from visitkit.suite import locust_module

RATE, SECONDS, LIMIT = 25, 48, 200  # 1,200 planned visits, 6 times the ids kept


@pytest.mark.slow
def test_a_run_past_the_id_limit_audits_a_sample_across_the_whole_load(tmp_path):
    iteration = tmp_path / "iteration-1"
    iteration.mkdir()
    shutil.copy(ROOT / "iterations" / "iteration-1" / "settings.tfvars.json", iteration)
    config = RunConfig.build(iteration, "load", duration=f"{SECONDS}s", arrival_rate=RATE, ledger_ids=LIMIT,
                             warm_up="0", convergence_timeout=120)
    results, summary = runner.run(config, log=lambda *_: None, publish=publish.publish)

    ledger = json.loads((results / "ledger.json").read_text())
    sent, kept = sum(ledger["sent"].values()), audit.visit_ids(ledger)
    fraction = ledger["sample"]["fraction"]
    # the fraction was set before the run from the open model's plan: 80 % of the limit over 1,200 visits
    assert ledger["format"] == 5 and ledger["sample"]["planned_visits"] == RATE * SECONDS
    assert fraction == pytest.approx(0.8 * LIMIT / (RATE * SECONDS))
    assert sent > 5 * LIMIT and 0 < len(kept) <= LIMIT and ledger["complete"]
    assert sum(ledger["unsampled"].values()) == sent - len(kept) and not ledger["untracked"]
    assert all(locust_module("ledger").sampled(visit_id, fraction) for visit_id in kept)
    # the sample spans the load: ids from its first tenth and from its last
    start, end = summary.load["start"], summary.load["end"]
    times = audit.sent_times(ledger).values()
    assert min(times) < start + (end - start) / 10 and max(times) >= end - (end - start) / 10

    # the audit read the sample's markers, and checked them in every part of the load
    assert json.loads((results / "audit.json").read_text())["method"] == "sample"
    found = summary.audit["sample"]
    assert summary.audit["reads"] >= len(kept) == found["sampled"]
    assert all(part["sampled"] > 0 for part in found["parts"]) and len(found["parts"]) == 10
    assert found["lost"] == 0 and found["acknowledged"] > 0.9 * len(kept)
    assert found["loss_rate_bound"] == pytest.approx(1 - 0.05 ** (1 / found["acknowledged"]))
    # the whole run's visits are still accounted for by the totals
    assert summary.visits["total"]["sent"] == sent and summary.visits["total"]["lost"] == 0

    text = (results / "report.md").read_text()
    assert "### The sample of visit ids, across the load" in text
    assert f"the run rules out a loss rate above **{found['loss_rate_bound'] * 100:.1f} %**" in text
    saved = json.loads((results / "summary.json").read_text())["audit"]["sample"]
    assert saved["loss_rate_bound"] == pytest.approx(found["loss_rate_bound"])

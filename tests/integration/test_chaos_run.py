"""A short load test with chaos on the real local stack: instances killed and paused, Firestore and
Pub/Sub frozen, the push delivery killed, while Locust keeps the system busy. Whatever happened, no
acknowledged visit is lost and none is counted twice, every visit's fate is known from its id, and
the report says what was done when."""
import shutil

import pytest

from visitkit.reports import publish
from visitkit.runs import runner
from visitkit.runs.config import RunConfig
from visitkit.paths import ROOT

pytestmark = pytest.mark.slow


def test_a_run_with_chaos_loses_and_doubles_nothing(tmp_path):
    iteration = tmp_path / "iteration-1"
    iteration.mkdir()
    shutil.copy(ROOT / "iterations" / "iteration-1" / "settings.tfvars.json", iteration)
    config = RunConfig.build(iteration, "breakpoint", duration="38s", shape_set="spawn_rate=2",
                             chaos="every=5,seed=5,stall=2-4", convergence_timeout=240, warm_up="0")
    folder, summary = runner.run(config, log=lambda *_: None, publish=publish.publish)

    found = summary.chaos
    actions = {event["action"] for event in found["events"] if not event.get("error")}
    assert len(found["events"]) >= 6 and len(actions) >= 3, found["events"]
    visits = summary.visits["total"]
    assert visits["acknowledged"] > 0
    assert visits["lost"] == 0 and visits["duplicated"] == 0, visits
    assert summary.convergence["converged"]
    report = (folder / "report.md").read_text()
    assert "## Chaos" in report and "**0 lost, 0 duplicated**" in report


def test_visits_retried_through_a_pubsub_outage_each_count_once_and_every_fate_is_known(tmp_path):
    iteration = tmp_path / "iteration-1"
    iteration.mkdir()
    shutil.copy(ROOT / "iterations" / "iteration-1" / "settings.tfvars.json", iteration)
    # Seed 1 freezes Pub/Sub first, for longer than inc-counter's publish deadline (8 s): 503s, some
    # of whose publishes land when it resumes, and visits posted again with the same id.
    config = RunConfig.build(iteration, "breakpoint", duration="32s", shape_set="spawn_rate=2",
                             chaos="every=8,seed=1,stall=9-10,actions=freeze-pubsub+kill-instance+pause-instance",
                             convergence_timeout=240, warm_up="0", retry_visits=3)
    folder, summary = runner.run(config, log=lambda *_: None, publish=publish.publish)

    assert summary.chaos["events"][0]["action"] == "freeze-pubsub"
    visits = summary.visits["total"]
    assert summary.audit["method"] == "exact"
    assert visits["retried"] > 0, visits  # the outage made the visitor post again
    assert visits["lost"] == 0 and visits["duplicated"] == 0, visits
    # Each visit's fate read from its marker: stored (acknowledged or not) or not, nothing left unknown.
    assert visits["sent"] == visits["acknowledged_stored"] + visits["stored_unacknowledged"] + visits["neither"]
    assert visits["stored"] == visits["acknowledged_stored"] + visits["stored_unacknowledged"]
    assert "## Visits: every visit's fate" in (folder / "report.md").read_text()

"""A short load test with chaos on the real local stack: instances killed and paused, Firestore
frozen, the push delivery killed, while Locust keeps the system busy. Whatever happened, no
acknowledged visit is lost and none is counted twice, and the report says what was done when."""
import shutil
from pathlib import Path

from visitkit import runner

ROOT = Path(__file__).resolve().parents[2]


def test_a_run_with_chaos_loses_and_doubles_nothing(tmp_path):
    iteration = tmp_path / "iteration-1"
    iteration.mkdir()
    shutil.copy(ROOT / "iterations" / "iteration-1" / "settings.tfvars.json", iteration)
    config = runner.RunConfig.build(iteration, "breakpoint", duration="48s", shape_set="spawn_rate=2",
                                    chaos="every=6,seed=5,stall=2-4", convergence_timeout=240, warm_up="0")
    folder, summary = runner.run(config, log=lambda *_: None)

    found = summary["chaos"]
    actions = {event["action"] for event in found["events"] if not event.get("error")}
    assert len(found["events"]) >= 6 and len(actions) >= 3, found["events"]
    visits = summary["visits"]["total"]
    assert visits["acknowledged"] > 0
    assert visits["lost"] == 0 and visits["duplicated"] == 0, visits
    assert summary["convergence"]["converged"]
    report = (folder / "report.md").read_text()
    assert "## Chaos" in report and "**0 lost, 0 duplicated**" in report

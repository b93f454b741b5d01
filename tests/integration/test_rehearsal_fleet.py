"""A two-worker Locust fleet, rehearsed (--rehearse --workers 2): the kit's own fleet steps, its
terraform commands of infra/loadgen run through the stand-in provider, and each VM's node.py line read
from its startup script as rendered in the applied state, run here (rehearsal/fleet.py). The run ends
with a report whose audit finds every acknowledged visit stored exactly once, both workers having sent
their whole ledger to the master."""
import json

import pytest
from test_rehearsal import check_audit, rehearse, samples

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_a_two_worker_fleet_is_rehearsed_from_its_startup_scripts(tmp_path):
    result, folder = rehearse(tmp_path, "iteration-0", "--workers", "2")
    headline = check_audit(folder)["headline"]
    # Monitoring's figures (the stand-in's, from what the functions logged) hold the fleet's visits, never
    # more than Firestore holds. Not the store's throughput (check_report's): it is measured while a backlog
    # is seen, every 10 s, which a light load may never show.
    last = samples(folder)[-1]
    stored = sum(json.loads((folder / "convergence.jsonl").read_text().splitlines()[-1])["totals"].values())
    assert headline["visits.acknowledged"] <= last["store"]["accepted"] <= stored, (last["store"], stored)
    assert headline["visits.stored"] <= last["store"]["counted"] <= stored, (last["store"], stored)
    ledger = json.loads((folder / "ledger.json").read_text())
    assert len(ledger["workers"]) == 2 and ledger["complete"], ledger["workers"]
    assert all(entry["final"] for entry in ledger["workers"].values())
    run = json.loads((folder / "run.json").read_text())
    assert run["locust_exit_code"] == 0
    assert run["fleet"]["processes"] == 2
    assert sorted(run["fleet"]["logs"]) == ["master.log", "visitkit-locust-worker-01.log",
                                            "visitkit-locust-worker-02.log"]
    # Each VM ran the node.py line of its startup script, read from the applied state; the destroy deleted them.
    assert "locust/node.py master" in result.stdout and result.stdout.count("locust/node.py worker") >= 2
    assert not (folder / "rehearsal" / "fleet" / "vms").exists()

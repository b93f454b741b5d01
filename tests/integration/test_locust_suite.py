"""The Locust suite against the real local stack: the ledger of acknowledged visits matches what
Firestore stored, in one process and in distributed mode (the master sums the workers' ledgers)."""
import json
import subprocess

import pytest
from helpers import settle

from visitkit import runner


@pytest.mark.parametrize("processes", [None, 2])
def test_the_ledger_matches_what_was_stored(stack, tmp_path, processes):
    before = stack.totals()
    load = runner.LoadPlan("breakpoint", shape_set="spawn_rate=4,duration_s=8,step_s=2", processes=processes)
    command = load.locust_command(stack.base_url, tmp_path)
    subprocess.run(command, check=True, timeout=120, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ledger = json.loads((tmp_path / "ledger.json").read_text())
    acknowledged = ledger["acknowledged"]
    assert sum(acknowledged.values()) > 0 and set(acknowledged) <= set(before)
    answered = {page: acknowledged.get(page, 0) + ledger["refused"].get(page, 0) + ledger["failed"].get(page, 0)
                for page in before}
    assert answered == {page: ledger["sent"].get(page, 0) for page in before}  # users finish their visit
    # Every acknowledged visit stored, and no more than the ambiguous (5xx) ones on top.
    settle(stack, {page: before[page] + acknowledged.get(page, 0) for page in before},
           {page: before[page] + acknowledged.get(page, 0) + ledger["failed"].get(page, 0) for page in before})
    assert (tmp_path / "locust_stats_history.csv").exists()

"""The twin with a pull store (store_mode "pull", iteration 7's design), on the real emulators: no push
relay; store-inc-counter's one instance pulls the subscription itself and records each batch's visit ids
in one document. Visits posted with repeated ids, some at once, converge to each id counted once, and the
exact audit reads every visit's fate from the batch documents: 0 lost, 0 duplicated, also when the
store's instance is killed in the middle of the load (its supervisor restarts it; the new one takes the
lease and refuses what the old one had committed but not acknowledged)."""
import json
import os
import signal
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import running_stack
from helpers import call

from visitkit import catalogue
from visitkit.catalogue import PAGES, PUSH_FUNCTION
from visitkit.paths import ITERATIONS_DIR, SETTINGS_FILE
from visitkit.results import audit

pytestmark = pytest.mark.timeout(300)

HOLD_S = 3.0  # once converged, the totals must hold this long (no late second count)


def pull_settings(folder):
    """Iteration 4's settings with the pull store: one store instance, kept running, small batches."""
    raw = json.loads((ITERATIONS_DIR / "iteration-4" / SETTINGS_FILE).read_text())
    raw["store_mode"] = "pull"
    raw["pull"] = {"batch_size": 50, "flush_ms": 200, "dedup_window_minutes": 60}
    raw["functions"][PUSH_FUNCTION] = {**raw["functions"][PUSH_FUNCTION], "max_instances": 1, "min_instances": 1}
    path = folder / "settings.json"
    path.write_text(json.dumps(raw))
    return path


@pytest.fixture(scope="module")
def pull_twin(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pull-twin")
    with running_stack(folder / "stack", pull_settings(folder)) as local:
        yield local


def post_visits(stack, visits, workers=8):
    """Posts (page, visit id) pairs, several at once: the ledger's {page: {outcome: [ids]}} (an id
    posted several times is one visit, acknowledged if any of its posts was)."""
    def post(visit):
        page, visit_id = visit
        status, _ = call(f"{stack.base_url}/inc-counter?visit_type={page}&visit_id={visit_id}", "POST", timeout=60)
        return page, visit_id, status

    with ThreadPoolExecutor(max_workers=workers) as pool:
        answers = list(pool.map(post, visits))
    acknowledged = {(page, visit_id) for page, visit_id, status in answers if status == 202}
    ledger = {"visits": {page: {"acknowledged": [], "failed": []} for page in PAGES}}
    for page, visit_id in dict.fromkeys((page, visit_id) for page, visit_id, _ in answers):
        ledger["visits"][page]["acknowledged" if (page, visit_id) in acknowledged else "failed"].append(visit_id)
    return ledger


def visits_with_repeats(count, repeats_every=5, times=3):
    """`count` visits over the pages; every `repeats_every`-th one posted `times` times, the copies
    shuffled in among the others so that some go at once and some in other batches."""
    visits = [(PAGES[i % len(PAGES)], str(uuid.uuid4())) for i in range(count)]
    copies = [visit for i, visit in enumerate(visits) if i % repeats_every == 0 for _ in range(times - 1)]
    return [visit for pair in zip(visits, copies + [None] * (len(visits) - len(copies))) for visit in pair if visit]


def converge(stack, before, ledger, timeout=180, empty_backlog=True):
    """Waits until every page holds before + its acknowledged visits and (with `empty_backlog`) the
    store's backlog is 0, then holds; returns the totals. More than expected fails at once."""
    expected = {page: before[page] + len(ledger["visits"][page]["acknowledged"]) for page in PAGES}
    deadline = time.monotonic() + timeout
    while True:
        totals, store = stack.totals(), stack.sample()["store"]
        assert all(totals[page] <= expected[page] for page in PAGES), (totals, expected)
        if totals == expected and (store["backlog"] == 0 or not empty_backlog):
            break
        assert time.monotonic() < deadline, f"not converged: {totals} of {expected}, store {store}"
        time.sleep(0.5)
    time.sleep(HOLD_S)
    assert stack.totals() == totals, "counted after converging"
    return totals


def exact_audit(stack, ledger, before, after):
    record = audit.run(ledger, "exact", lambda ids: catalogue.counted_in_batches(stack.firestore(), ids),
                       totals=stack.totals)
    return record, audit.exact_accounting(ledger, record, before, after)["total"]


def test_the_pull_twin_runs_no_relay_and_its_puller_answers_its_status(pull_twin):
    names = [name for name, *_ in pull_twin.status()]
    assert "push-relay" not in names and names.count(f"{PUSH_FUNCTION}-0") == 1, names
    assert f"{PUSH_FUNCTION}-1" not in names
    assert pull_twin.store_status() is not None
    sample = pull_twin.sample()
    assert "push" not in sample and sample["store"]["backlog"] is not None


def test_repeated_ids_converge_to_each_visit_counted_once_and_the_audit_finds_every_one(pull_twin):
    before = pull_twin.totals()
    ledger = post_visits(pull_twin, visits_with_repeats(200))
    after = converge(pull_twin, before, ledger)
    record, total = exact_audit(pull_twin, ledger, before, after)
    assert total["acknowledged"] == 200 and record["counted_twice"] == {}
    assert (total["lost"], total["duplicated"], total["acknowledged_stored"]) == (0, 0, 200), total
    assert pull_twin.sample()["store"]["already_counted"] >= 200 // 5 * 2  # the copies, refused


@pytest.mark.slow
def test_a_store_instance_killed_mid_load_loses_and_doubles_nothing(tmp_path):
    with running_stack(tmp_path / "stack", pull_settings(tmp_path)) as stack:
        before, ledgers = stack.totals(), []
        poster = threading.Thread(target=lambda: ledgers.append(post_visits(stack, visits_with_repeats(600), 4)))
        poster.start()
        # sampled as a run samples (every second there): the puller's refusals are read before the kill
        wait_for(lambda: stack.sample()["store"]["stored"] > sum(before.values()) + 50, "the puller counted nothing")
        os.kill(stack.instance_pid(f"{PUSH_FUNCTION}-0"), signal.SIGKILL)
        wait_for(lambda: stack.restarts().get(PUSH_FUNCTION, 0) == 1, "the supervisor did not restart the store")
        poster.join()
        [ledger] = ledgers
        # The new instance waits out the old one's lease (30 s). The backlog may stay above 0 by the copies
        # the killed one refused after its last status read (LocalStack._puller_refused): not waited for.
        after = converge(stack, before, ledger, timeout=240, empty_backlog=False)
        record, total = exact_audit(stack, ledger, before, after)
        assert total["acknowledged"] == 600 and record["counted_twice"] == {}
        assert (total["lost"], total["duplicated"], total["acknowledged_stored"]) == (0, 0, 600), total


def wait_for(condition, failure, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.2)


"""Exactly once by visit id, through the real stack (emulators, HAProxy, relay): the same visit
posted twice, ten times at once, or published twice by a publish retried after a fault on the
Pub/Sub path (Toxiproxy) counts once; a visit answered 503 may be posted again safely; the study's
own visitor, which sends no id, still runs without a failure."""
import csv
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import running_stack
from helpers import call, relay_figures, settle

from visitkit.twin import toxiproxy
from visitkit.net import wait_until
from visitkit.twin.profile import Profile

STUDY_VISITOR = Path(__file__).resolve().parents[1] / "fixtures" / "locust" / "study_visitor.py"


def post(stack, page, visit_id=None, timeout=60):
    query = f"visit_type={page}" + (f"&visit_id={visit_id}" if visit_id else "")
    return call(f"{stack.base_url}/inc-counter?{query}", "POST", timeout=timeout)


def only(totals, page, expected):
    return {**totals, page: expected}


def test_the_same_visit_posted_twice_counts_once(stack):
    before, visit_id = stack.totals(), str(uuid.uuid4())
    first, second = post(stack, "about", visit_id), post(stack, "about", visit_id)
    assert first[0] == second[0] == 202 and first[1]["visit_id"] == second[1]["visit_id"] == visit_id
    assert first[1]["message_id"] != second[1]["message_id"]  # two messages, one visit
    settle(stack, only(before, "about", before["about"] + 1))


def test_the_same_visit_posted_ten_times_at_once_counts_once(stack):
    before, visit_id = stack.totals(), str(uuid.uuid4())
    with ThreadPoolExecutor(max_workers=10) as pool:
        statuses = [status for status, _ in pool.map(lambda _: post(stack, "jobs", visit_id), range(10))]
    assert statuses.count(202) >= 1 and set(statuses) <= {202, 429}, statuses
    settle(stack, only(before, "jobs", before["jobs"] + 1))


def test_visits_without_an_id_get_one_each_and_all_count(stack):
    before = stack.totals()
    replies = [post(stack, "home") for _ in range(5)]
    ids = {reply["visit_id"] for status, reply in replies if status == 202}
    assert len(ids) == 5 and all(str(uuid.UUID(i)) == i for i in ids)
    settle(stack, only(before, "home", before["home"] + 5))


@pytest.mark.parametrize("visit_id", ["", "not-a-uuid", "3F2B8C1E-9A4D-4E6F-8B7A-1C2D3E4F5A6B"])
def test_a_malformed_visit_id_gets_a_400_and_publishes_nothing(stack, visit_id):
    delivered = relay_figures(stack)["deliveries"]
    status, reply = call(f"{stack.base_url}/inc-counter?visit_type=home&visit_id={visit_id}", "POST")
    assert status == 400 and "visit_id" in reply["error"]
    time.sleep(1.5)  # the relay pulls every 50 ms: a message published would have been delivered
    assert relay_figures(stack)["deliveries"] == delivered


def test_the_studys_own_visitor_runs_without_a_failure(stack, tmp_path):
    before = stack.totals()
    subprocess.run([sys.executable, "-m", "locust", "-f", str(STUDY_VISITOR), "--headless", "--host", stack.base_url,
                    "--users", "10", "--spawn-rate", "10", "--run-time", "10s", "--stop-timeout", "15",
                    "--csv", str(tmp_path / "study"), "--only-summary"],
                   check=True, timeout=120, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # exit 1 on a failure
    rows = {row["Name"]: row for row in csv.DictReader(open(tmp_path / "study_stats.csv"))}
    assert rows["Aggregated"]["Failure Count"] == "0"
    posted = {name.split("=")[1]: int(row["Request Count"]) for name, row in rows.items()
              if name.startswith("/inc-counter")}
    assert sum(posted.values()) > 0
    # Locust's CSV may be written before a visit under way at the stop is answered: each of the 10
    # users may have one more on top.
    low = {page: before[page] + posted.get(page, 0) for page in before}
    settle(stack, low, {page: low[page] + 10 for page in before})


# ---- a fault on the Pub/Sub path -----------------------------------------------------------------
@pytest.fixture(scope="module")
def proxied_stack(tmp_path_factory):
    """A stack whose functions reach Pub/Sub through Toxiproxy (+1 ms), so that a test can cut the
    connection mid-publish."""
    profile = Profile(name="pubsub-through-toxiproxy", latency_ms={"pubsub": 1}, service_ms={})
    with running_stack(tmp_path_factory.mktemp("proxied"), profile=profile) as local:
        yield local


def toxiproxy_api(stack):
    port = next(p["port"] for p in stack.state()["processes"] if p["name"] == "toxiproxy")
    return toxiproxy.Toxiproxy(f"127.0.0.1:{port}")


def test_a_publish_retried_after_its_answer_was_cut_counts_once(proxied_stack):
    """Pub/Sub accepts the message but its answer never reaches inc-counter (Toxiproxy drops every
    byte back and closes the connection after 0.5 s), so the client library publishes the visit
    again on a new connection, and again, until the fault is lifted. Several messages of one visit
    reach the store; it counts one."""
    stack, proxies = proxied_stack, toxiproxy_api(proxied_stack)
    # Every inc-counter instance's connection to Pub/Sub open first: a connection made under the
    # fault never completes its handshake, so nothing would be published at all.
    warm = stack.totals()
    assert [post(stack, "about_legals")[0] for _ in range(6)] == [202] * 6
    settle(stack, only(warm, "about_legals", warm["about_legals"] + 6))
    before, acked_before = stack.totals(), relay_figures(stack)["acked"]
    visit_id, answers = str(uuid.uuid4()), []
    proxies.toxic("pubsub", {"name": "cut_answers", "type": "timeout", "stream": "downstream",
                             "attributes": {"timeout": 500}})
    try:
        poster = threading.Thread(target=lambda: answers.append(post(stack, "about_legals", visit_id)))
        poster.start()
        # The first message lands although its publish failed: the store counts it.
        assert wait_until(lambda: stack.totals()["about_legals"] == before["about_legals"] + 1, timeout=30,
                          interval=0.1)
    finally:
        proxies.remove_toxic("pubsub", "cut_answers")
    poster.join(60)
    status, reply = answers[0]
    if status == 503:  # every retry fell within the fault: the careful client posts the same id again
        assert "same visit_id again is safe" in reply["error"] and reply["visit_id"] == visit_id
        status, reply = post(stack, "about_legals", visit_id)
    assert status == 202 and reply["visit_id"] == visit_id
    settle(stack, only(before, "about_legals", before["about_legals"] + 1))
    assert relay_figures(stack)["acked"] - acked_before >= 2  # the visit's second message was delivered too

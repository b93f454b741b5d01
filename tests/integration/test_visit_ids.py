"""Exactly once by visit id, through the real stack (emulators, HAProxy, relay): the same visit
posted twice, ten times at once, or published twice by a publish retried after a fault on the
Pub/Sub path (Toxiproxy) counts once; a visit answered 503 may be posted again safely; the study's
own visitor, which sends no id, still runs without a failure."""
import collections
import csv
import json
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

from visitkit.net import wait_until
from visitkit.twin import toxiproxy
from visitkit.twin.profile import Profile
from visitkit.twin.stack import PROJECT, TOPIC

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


def test_visits_posted_again_with_their_ids_leave_no_backlog_once_delivered(stack):
    """Issue #40: 18 posts of 8 distinct visits are 18 messages and 8 stored visits. Once all are
    delivered the backlog (messages not yet acknowledged) is what it was before (0 on a fresh
    stack), not 10 more (accepted - stored)."""
    before, backlog = stack.totals(), stack.sample()["store"]["backlog"]
    ids = [str(uuid.uuid4()) for _ in range(8)]
    assert [post(stack, "about_offices", visit_id)[0] for visit_id in ids + ids + ids[:2]] == [202] * 18
    assert wait_until(lambda: stack.totals()["about_offices"] == before["about_offices"] + 8, timeout=60, interval=0.2)
    assert wait_until(lambda: stack.sample()["store"]["backlog"] == backlog, timeout=30, interval=0.2), \
        (backlog, stack.sample()["store"])
    assert stack.totals()["about_offices"] == before["about_offices"] + 8


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


class AuditSubscription:
    """A pull subscription of the stack's visits topic that only the test reads: every message published
    from its creation on, counted by the visit id it carries."""

    def __init__(self, stack):
        self.url = (f"http://{stack.state()['pubsub']}/v1/projects/{PROJECT}/subscriptions/"
                    f"audit-{uuid.uuid4().hex[:12]}")
        status, reply = self._call("", "PUT", {"topic": f"projects/{PROJECT}/topics/{TOPIC}",
                                               "ackDeadlineSeconds": 600})
        assert status == 200, reply
        self.seen = collections.Counter()

    def _call(self, verb, method, body):
        return call(self.url + verb, method, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def messages_of(self, visit_id):
        """How many messages of the visit were published so far (each pulled and acknowledged once)."""
        while True:
            status, reply = self._call(":pull", "POST", {"maxMessages": 100, "returnImmediately": True})
            assert status == 200, reply
            received = reply.get("receivedMessages") or []
            if not received:
                return self.seen[visit_id]
            self.seen.update(m["message"].get("attributes", {}).get("visit_id") for m in received)
            assert self._call(":acknowledge", "POST", {"ackIds": [m["ackId"] for m in received]})[0] == 200

    def settled_count(self, visit_id, at_least):
        """messages_of(visit_id) once it is at least `at_least` and two reads 0.3 s apart agree."""
        counts = [self.messages_of(visit_id)]
        deadline = time.monotonic() + 15
        while not (counts[-1] >= at_least and counts[-2:] == [counts[-1]] * 2):
            assert time.monotonic() < deadline, (
                f"messages of the visit: {counts[-1]} after 15 s, expected at least {at_least}")
            time.sleep(0.3)
            counts.append(self.messages_of(visit_id))
        return counts[-1]


def test_a_publish_retried_after_its_answer_was_cut_counts_once(proxied_stack):
    """Pub/Sub accepts the message but its answer never reaches inc-counter (Toxiproxy drops every
    byte back and closes the connection after 0.5 s), so the client library publishes the visit
    again on a new connection, and again, until the fault is lifted. Several messages of one visit
    reach the store; it counts one. Counted on a subscription of the test's own: the visit's messages
    before anyone posts it again (so that the second one is the library's retry, not the test's), then
    exactly one more for a post of the same visit again without the fault."""
    stack, proxies = proxied_stack, toxiproxy_api(proxied_stack)
    # Every inc-counter instance's connection to Pub/Sub open first: a connection made under the
    # fault never completes its handshake, so nothing would be published at all.
    warm = stack.totals()
    assert [post(stack, "about_legals")[0] for _ in range(6)] == [202] * 6
    settle(stack, only(warm, "about_legals", warm["about_legals"] + 6))
    before, acked_before, audit = stack.totals(), relay_figures(stack)["acked"], AuditSubscription(stack)
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
    assert status in (202, 503) and reply["visit_id"] == visit_id, answers
    if status == 503:  # every retry fell within the fault
        assert "same visit_id again is safe" in reply["error"]
    # inc-counter's one request, before any post again, published the visit more than once: its retries
    retried = audit.settled_count(visit_id, at_least=2)
    # The careful client posts the same visit again after a 503 (and may after a 202 whose answer it lost):
    # without the fault, that post publishes exactly one message more, and the visit still counts once.
    status, reply = post(stack, "about_legals", visit_id)
    assert status == 202 and reply["visit_id"] == visit_id
    settle(stack, only(before, "about_legals", before["about_legals"] + 1))
    assert audit.settled_count(visit_id, at_least=retried + 1) == retried + 1, (
        "one post published more than one message")
    assert relay_figures(stack)["acked"] - acked_before >= retried + 1  # every message of the visit was delivered

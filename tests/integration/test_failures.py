"""Failure cases: an emulator down or frozen, a function crash, redelivery. An acknowledged visit
is never lost nor counted twice; a visit that could not be recorded is answered with a 5xx.
"""
import http.client
import os
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from clients import CALL_DEADLINE_SECONDS as DEADLINE
from conftest import running_stack
from helpers import call, closed_address, function_server, platform_figures, push_body, settle, store_activity

from visitkit.net import wait_until

# Every call to Firestore or Pub/Sub ends within DEADLINE, retries included (functions/clients.py).
PUBLISH_TIMEOUT = WRITE_TIMEOUT = DEADLINE
# What an answer may take beyond the function's own deadline: HAProxy, Flask, a busy machine.
SLACK = 2.0


def timed_call(*args, **kwargs):
    started = time.monotonic()
    status, reply = call(*args, **kwargs)
    return status, reply, time.monotonic() - started


def test_inc_counter_answers_503_when_pubsub_is_down():
    with closed_address() as closed, function_server("inc-counter", PUBSUB_EMULATOR_HOST=closed,
                                                     CALL_DEADLINE_SECONDS="3") as url:
        status, reply, took = timed_call(f"{url}/?visit_type=home", "POST")
    assert status == 503
    assert "not known to be recorded" in reply["error"] and reply["visit_id"]
    assert took < 3 + SLACK  # within its publish timeout, not the client's


def test_get_counter_answers_503_when_firestore_is_down():
    with closed_address() as closed, function_server("get-counter", FIRESTORE_EMULATOR_HOST=closed) as url:
        status, reply, took = timed_call(f"{url}/?visit_type=home")
    assert status == 503
    assert "unavailable" in reply["error"]
    assert took < DEADLINE + SLACK  # get-counter's read deadline


def test_store_inc_counter_answers_500_when_firestore_is_down():
    # A 500 is a nack: Pub/Sub delivers the message again. That the redelivery then counts the
    # visit once is checked on a whole stack below (Firestore frozen).
    with closed_address() as closed, function_server("store-inc-counter", FIRESTORE_EMULATOR_HOST=closed) as url:
        status, _, took = timed_call(url, "POST", push_body("home", str(uuid.uuid4())),
                                     {"Content-Type": "application/json"})
    assert status == 500
    assert took < WRITE_TIMEOUT + SLACK  # fails within its write deadline: the delivery is not held


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """A stack of this module's own: its tests freeze the emulators and kill instances."""
    with running_stack(tmp_path_factory.mktemp("failures")) as local:
        yield local


NO_ANSWER = None  # the connection ended before a whole answer: the visit's fate is unknown to the client


def post_visit(base_url, page):
    """A visit's status, or NO_ANSWER when the connection was cut (an instance killed after sending
    its status line but before its body ends the answer so too)."""
    try:
        return call(f"{base_url}/inc-counter?visit_type={page}", "POST", timeout=60)[0]
    except (http.client.HTTPException, ConnectionError):
        return NO_ANSWER


def post_visits(base_url, page, count, threads=8):
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda _: post_visit(base_url, page), range(count)))


def pid_of(stack, name):
    return next(p["pid"] for p in stack.state()["processes"] if p["name"] == name)


def only(totals, page, low, high=None):
    """settle() bounds that pin one page and leave the others where they are."""
    return {**totals, page: low}, {**totals, page: low if high is None else high}


def test_a_visit_answered_503_while_pubsub_hangs_counts_once_when_posted_again(stack):
    before, visit_id = stack.totals(), str(uuid.uuid4())
    pubsub = pid_of(stack, "pubsub-emulator")
    os.killpg(pubsub, signal.SIGSTOP)  # Pub/Sub stops answering: the publish can only time out
    try:
        # The functions never answer 429: one is HAProxy's (both instances busy past its queue timeout, or not
        # yet counted up, which the stack now waits for), the visit was not published, and the client asks again.
        for _ in range(3):
            status, reply, took = timed_call(
                f"{stack.base_url}/inc-counter?visit_type=about_offices&visit_id={visit_id}", "POST")
            if status != 429:
                break
    finally:
        os.killpg(pubsub, signal.SIGCONT)
    assert status == 503 and "same visit_id again is safe" in reply["error"] and reply["visit_id"] == visit_id
    assert took < PUBLISH_TIMEOUT + SLACK
    # Its publish may yet land once Pub/Sub is back; posting the same id again counts it once either way.
    assert call(f"{stack.base_url}/inc-counter?visit_type=about_offices&visit_id={visit_id}", "POST")[0] == 202
    settle(stack, *only(before, "about_offices", before["about_offices"] + 1))


@pytest.mark.slow
def test_visits_published_while_firestore_hangs_are_stored_once_it_is_back(stack):
    before = stack.totals()
    failed_before = platform_figures(stack)["store-inc-counter"]["responses_5xx"]
    deliveries_before, _ = store_activity(stack)
    firestore = pid_of(stack, "firestore-emulator")
    os.killpg(firestore, signal.SIGSTOP)  # Firestore stops answering: writes time out
    try:
        statuses = post_visits(stack.base_url, "about", 40)
        # Hold it until store-inc-counter has given up on some writes (its write deadline).
        failed = wait_until(lambda: platform_figures(stack)["store-inc-counter"]["responses_5xx"] > failed_before,
                            timeout=WRITE_TIMEOUT * 4, interval=0.5)
    finally:
        os.killpg(firestore, signal.SIGCONT)
    assert failed, "no delivery failed while Firestore was frozen"
    assert statuses.count(202) == 40  # publishing does not need Firestore
    # Every visit stored once, and no late redelivery of a write that had in fact committed adds one.
    settle(stack, *only(before, "about", before["about"] + 40))
    deliveries, _ = store_activity(stack)
    assert deliveries - deliveries_before > 40  # Pub/Sub did deliver the failed messages again


def test_a_crashed_store_instance_loses_no_visit(stack):
    before = stack.totals()
    backlog_before = stack.sample()["store"]["backlog"]
    with ThreadPoolExecutor(max_workers=1) as pool:
        burst = pool.submit(post_visits, stack.base_url, "home", 600)
        assert wait_until(lambda: stack.sample()["store"]["backlog"] > backlog_before + 20, timeout=60, interval=0.1)
        os.killpg(pid_of(stack, "store-inc-counter-0"), signal.SIGKILL)
        statuses = burst.result()
    acknowledged, failed = statuses.count(202), sum(1 for s in statuses if s >= 500)
    assert acknowledged >= 570, statuses  # inc-counter did not crash: nearly every visit got through
    settle(stack, *only(before, "home", before["home"] + acknowledged, before["home"] + acknowledged + failed))


def test_a_crashed_inc_instance_loses_no_acknowledged_visit(stack):
    before = stack.totals()
    accepted_before = stack.sample()["functions"]["inc-counter"]["responses_2xx"]
    with ThreadPoolExecutor(max_workers=1) as pool:
        burst = pool.submit(post_visits, stack.base_url, "jobs", 400)
        # killed mid-burst: once this burst (not an earlier test) has had 50 visits accepted
        assert wait_until(lambda: stack.sample()["functions"]["inc-counter"]["responses_2xx"] > accepted_before + 50,
                          timeout=60, interval=0.1)
        os.killpg(pid_of(stack, "inc-counter-0"), signal.SIGKILL)
        statuses = burst.result()
    acknowledged, failed = statuses.count(202), len(statuses) - statuses.count(202)
    assert acknowledged >= 300  # the other instance took over
    assert all(status is NO_ANSWER or status >= 500 for status in statuses if status != 202)
    # Every acknowledged visit is stored; a request cut by the crash (a 5xx or no whole answer) may or
    # may not have been published before it died, but it was never acknowledged.
    settle(stack, *only(before, "jobs", before["jobs"] + acknowledged, before["jobs"] + acknowledged + failed))

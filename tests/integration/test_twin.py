"""The local twin with the study profile, for real: Toxiproxy between the instances and the emulators,
the push relay delivering like Pub/Sub, the supervisor restarting a crashed instance.

One stack for the module: store-inc-counter has a single instance and the queue timeout is 1 s, so a
backlog published at once overfills it and gets 429s; the retry backoff is 1 s and messages are
dead-lettered after 10 attempts (enough that the 429s alone do not exhaust them), so the tests take
seconds, not minutes.
"""
import base64
import json
import os
import signal
import statistics
import time
import urllib.request

import pytest

from conftest import running_stack
from helpers import call, push_body
from visitkit.catalogue import CATALOGUE, FUNCTIONS, PAGES, PUSH_FUNCTION
from visitkit.net import http_status, wait_until
from visitkit.twin.profile import load_profile

STUDY = load_profile("study")


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    folder = tmp_path_factory.mktemp("twin")
    functions = {name: {"max_instances": 2, "concurrency": 1} for name in FUNCTIONS}
    functions["store-inc-counter"]["max_instances"] = 1
    settings = folder / "settings.json"
    settings.write_text(json.dumps({
        "shards_per_page": 2, "cache_ttl_seconds": 0, "functions": functions,
        "subscription": {"ack_deadline_seconds": 10, "minimum_backoff_seconds": 1, "maximum_backoff_seconds": 1,
                         "max_delivery_attempts": 10}}))
    with running_stack(folder / "stack", settings, queue_timeout=1.0, profile=STUDY) as local:
        yield local


def publish(stack, visits):
    """Visits straight into the topic, as a backlog at once (what inc-counter would publish)."""
    state = stack.state()
    url = f"http://{state['pubsub']}/v1/projects/{state['project']}/topics/{state['topic']}:publish"
    messages = [{"data": base64.b64encode(json.dumps({"visit_type": PAGES[i % len(PAGES)]}).encode()).decode()}
                for i in range(visits)]
    request = urllib.request.Request(url, data=json.dumps({"messages": messages}).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30).close()


def median_ms(url, times=15):
    taken = []
    for _ in range(times):
        started = time.perf_counter()
        assert call(url)[0] == 200
        taken.append((time.perf_counter() - started) * 1000)
    return statistics.median(taken[3:])


def test_the_profile_adds_its_latency_to_a_function(twin, stack):
    """get-counter waits on one Firestore query per request (no cache here): the profile's Firestore
    latency moves it by about that much; serve-page waits on nothing and does not move."""
    path = "/get-counter?visit_type=about"
    added = median_ms(twin.base_url + path) - median_ms(stack.base_url + path)
    assert STUDY.latency_ms["firestore"] * 0.8 < added < STUDY.latency_ms["firestore"] * 1.5
    page = median_ms(twin.base_url + "/app?view=about") - median_ms(stack.base_url + "/app?view=about")
    assert abs(page) < 30
    assert twin.state()["profile"]["name"] == "study"


def test_a_push_delivery_holds_the_store_slot_for_the_profiles_overhead(twin):
    """Through HAProxy's push port a delivery takes the instance's time plus the profile's push
    overhead (Toxiproxy between HAProxy and the instance), so the slot HAProxy holds for it does too."""
    state = twin.state()
    instance = next(p["port"] for p in state["processes"] if p["name"] == "store-inc-counter-0")
    path = CATALOGUE[PUSH_FUNCTION].path

    def median_delivery_ms(base, tag):
        taken = []
        for i in range(12):
            started = time.perf_counter()
            status, _ = call(base + path, "POST", push_body("jobs", f"slot-{tag}-{i}"),
                             {"Content-Type": "application/json"})
            assert 200 <= status < 300, status
            taken.append((time.perf_counter() - started) * 1000)
        return statistics.median(taken[2:])

    added = median_delivery_ms(state["push_url"], "haproxy") - median_delivery_ms(f"http://127.0.0.1:{instance}", "direct")
    assert STUDY.push_overhead_ms * 0.8 < added < STUDY.push_overhead_ms * 1.5


@pytest.mark.slow
def test_push_window_grows_shrinks_on_429_and_counts_exactly(twin):
    before = sum(twin.totals().values())
    start = twin.sample()["push"]
    visits = 120
    publish(twin, visits)
    # one store instance at ~150 ms behind a 1 s queue: the window outgrows what it can queue, 429s follow
    assert wait_until(lambda: sum(twin.totals().values()) - before >= visits, timeout=180), twin.sample()["push"]
    time.sleep(3)  # a late redelivery would show now
    assert sum(twin.totals().values()) - before == visits
    figures = twin.sample()
    push, store = figures["push"], figures["functions"]["store-inc-counter"]
    assert push["window_peak"] > start["window_peak"]  # it grew with successes
    assert push["responses_429"] > start["responses_429"] and store["responses_429"] > 0
    assert push["window_shrinks"] > start["window_shrinks"]  # and shrank on the 429s
    assert push["retries"] > start["retries"] and push["dead_lettered"] == start["dead_lettered"]
    assert push["in_flight"] == 0


def test_a_crashed_instance_is_restarted(twin):
    name = "get-counter-0"
    pid = twin.instance_pid(name)
    port = next(p["port"] for p in twin.state()["processes"] if p["name"] == name)
    os.kill(pid, signal.SIGKILL)  # the server itself dies; its supervisor stays
    assert wait_until(lambda: twin.restarts().get("get-counter") == 1, timeout=30)
    assert wait_until(lambda: http_status(f"http://127.0.0.1:{port}/") is not None, timeout=30)
    assert twin.instance_pid(name) != pid
    assert twin.sample()["functions"]["get-counter"]["restarts"] == 1


def test_undeliverable_visits_are_dead_lettered_after_max_attempts(twin):
    """Last in the module: it takes store-inc-counter away for good."""
    state = twin.state()
    before, start = sum(twin.totals().values()), twin.sample()["push"]
    store = next(p["pid"] for p in state["processes"] if p["name"] == "store-inc-counter-0")
    os.killpg(store, signal.SIGKILL)  # instance and supervisor: nothing answers the push any more
    publish(twin, 3)
    assert wait_until(lambda: twin.sample()["push"]["dead_lettered"] - start["dead_lettered"] >= 3, timeout=90)
    pull = (f"http://{state['pubsub']}/v1/projects/{state['project']}/subscriptions/"
            f"{state['dead_letter_topic']}:pull")
    request = urllib.request.Request(pull, data=json.dumps({"maxMessages": 10}).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        received = json.load(reply).get("receivedMessages", [])
    assert len(received) == 3
    assert {m["message"]["attributes"]["CloudPubSubDeadLetterSourceDeliveryCount"] for m in received} == {"10"}
    assert sum(twin.totals().values()) == before

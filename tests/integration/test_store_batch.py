"""The pull store (functions/store_batch.py) for real: Google's Firestore and Pub/Sub emulators, the
Firestore one behind a Toxiproxy proxy the tests can make hold every byte, and store-inc-counter's
functions-framework server with STORE_MODE=pull pulling from a subscription of its own per test.

Exactly once is checked both ways: the shards' totals and the visit_batches documents (each counted
key in exactly one batch)."""
import base64
import contextlib
import datetime
import json
import os
import random
import signal
import tempfile
import threading
import time
import uuid
from collections import Counter
from types import SimpleNamespace
from unittest import mock

import pytest
from helpers import call, function_process

from visitkit.catalogue import FIRESTORE, PAGES, stored_totals
from visitkit.net import free_port, http_status, wait_until
from visitkit.twin import toxiproxy
from visitkit.twin.stack import PROJECT, LocalStack, delete_all_documents, emulator_commands

pytestmark = pytest.mark.timeout(180)

TOPIC = "visits"
ACK_DEADLINE_SECONDS = 10  # the subscriptions' here: a message pulled and never settled comes back after it
JSON = {"Content-Type": "application/json"}
STATUS_KEYS = {"owner", "holding", "pulling", "generation", "pulled", "counted", "duplicates", "malformed", "nacked",
               "batches", "commit_failures", "pull_errors", "ack_errors", "acked", "pulled_unacked", "window",
               "batch_size", "flush_ms", "dedup_window_minutes", "last_commit_age_s"}


@pytest.fixture(scope="module")
def backends():
    """The emulators, Firestore's also behind a Toxiproxy proxy (`route`); a Firestore client on it
    directly (`db`); the visits topic."""
    firestore_port, pubsub_port, api = free_port(), free_port(), free_port()
    firestore_command, pubsub_command = emulator_commands(firestore_port, pubsub_port)
    with tempfile.TemporaryDirectory(prefix="store-batch-") as state_dir:
        processes = LocalStack(state_dir)  # for its way of starting and stopping process groups
        state = {"processes": []}
        try:
            processes._start(state, "firestore-emulator", firestore_command, port=firestore_port)
            processes._start(state, "pubsub-emulator", pubsub_command, port=pubsub_port)
            processes._start(state, "toxiproxy", toxiproxy.server_command(api), port=api)
            assert wait_until(lambda: all(http_status(f"http://127.0.0.1:{port}/", timeout=1) is not None
                                          for port in (firestore_port, pubsub_port, api)), timeout=90, interval=0.2)
            direct = {"firestore": f"127.0.0.1:{firestore_port}", "pubsub": f"127.0.0.1:{pubsub_port}"}
            proxies = toxiproxy.Toxiproxy(f"127.0.0.1:{api}")
            route = f"127.0.0.1:{free_port()}"
            proxies.proxy("firestore", route, direct["firestore"], round_trip_ms=0)
            assert call(f"http://{direct['pubsub']}/v1/projects/{PROJECT}/topics/{TOPIC}", "PUT", b"{}", JSON)[0] == 200
            from google.cloud import firestore

            with mock.patch.dict(os.environ, {"FIRESTORE_EMULATOR_HOST": direct["firestore"]}):
                db = firestore.Client(project=PROJECT)
            yield SimpleNamespace(direct=direct, route=route, proxies=proxies, db=db, logs=state_dir)
        finally:
            processes.down()


@pytest.fixture
def subscription(backends):
    """A pull subscription of this test's own on the topic (it sees only what is published from now
    on), and an empty Firestore."""
    delete_all_documents(backends.direct["firestore"], PROJECT)
    name = f"store-{uuid.uuid4().hex[:8]}"
    assert create_subscription(backends, name) == 200
    yield name
    call(f"http://{backends.direct['pubsub']}/v1/projects/{PROJECT}/subscriptions/{name}", "DELETE")


def create_subscription(backends, name):
    body = json.dumps({"topic": f"projects/{PROJECT}/topics/{TOPIC}", "ackDeadlineSeconds": ACK_DEADLINE_SECONDS})
    return call(f"http://{backends.direct['pubsub']}/v1/projects/{PROJECT}/subscriptions/{name}", "PUT",
                body.encode(), JSON)[0]


@contextlib.contextmanager
def puller(backends, subscription, through_proxy=False, **env):
    """store-inc-counter in pull mode; its log lines in a file of the module's folder. (URL, process, log)."""
    log_path = os.path.join(backends.logs, f"puller-{uuid.uuid4().hex[:6]}.log")
    settings = {"STORE_MODE": "pull", "PULL_SUBSCRIPTION": subscription, "PULL_FLUSH_MS": "100",
                "FIRESTORE_EMULATOR_HOST": backends.route if through_proxy else backends.direct["firestore"],
                "PUBSUB_EMULATOR_HOST": backends.direct["pubsub"], **env}
    with open(log_path, "w") as log, function_process("store-inc-counter", stdout=log, **settings) as (url, process):
        try:
            yield url, process, log_path
        finally:
            crash(process)


def crash(process):
    """Kills the server and its gunicorn worker, where the puller runs: killed alone, the server
    leaves the worker running until it notices (about a second), renewing its lease meanwhile."""
    children = []
    with contextlib.suppress(OSError):  # already gone
        children = open(f"/proc/{process.pid}/task/{process.pid}/children").read().split()
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    process.kill()


def status(url):
    answer = call(url, timeout=10)
    assert answer[0] == 200, answer
    return answer[1]


def wait_status(url, check, timeout=60, what="the puller"):
    """The puller's status once check(status) holds."""
    found = {}

    def ready():
        found["status"] = status(url)
        return check(found["status"])
    assert wait_until(ready, timeout=timeout, interval=0.2), f"{what} never got there: {found.get('status')}"
    return found["status"]


def holding(url, timeout=60):
    """The status once the puller holds the lease and has loaded the window: it pulls."""
    return wait_status(url, lambda s: s["pulling"], timeout, "the lease")


def publish(backends, visits):
    """Publishes [(page or raw bytes, visit id or None or a raw attribute)], up to 1000 per request."""
    for start in range(0, len(visits), 1000):
        messages = []
        for page, visit_id in visits[start:start + 1000]:
            data = page if isinstance(page, bytes) else json.dumps({"visit_type": page}).encode()
            attributes = {} if visit_id is None else {"visit_id": visit_id}
            messages.append({"data": base64.b64encode(data).decode(), "attributes": attributes})
        answer = call(f"http://{backends.direct['pubsub']}/v1/projects/{PROJECT}/topics/{TOPIC}:publish", "POST",
                      json.dumps({"messages": messages}).encode(), JSON)
        assert answer[0] == 200, answer


def new_visits(count):
    return [(random.choice(PAGES), str(uuid.uuid4())) for _ in range(count)]


def expected_totals(visits):
    return {page: Counter(page for page, _ in visits)[page] for page in PAGES}


def batch_documents(backends):
    return [document.to_dict() for document in backends.db.collection(FIRESTORE["batches"]).stream()]


def assert_counted_once(backends, visits):
    """Each distinct visit counted exactly once, in the totals and in the batch documents."""
    distinct = dict((visit_id, page) for page, visit_id in visits)
    assert stored_totals(backends.db) == expected_totals([(page, key) for key, page in distinct.items()])
    ids = [key for document in batch_documents(backends) for key in document["ids"]]
    assert sorted(ids) == sorted(distinct), "every visit in exactly one batch document"


def settled(url, messages, timeout=60):
    """The status once `messages` have been acknowledged and nothing pulled waits."""
    return wait_status(url, lambda s: s["acked"] >= messages and s["pulled_unacked"] == 0, timeout)


# ---- counting -------------------------------------------------------------------------------------
def test_batches_are_counted_exactly_in_the_shards_and_the_batch_documents(backends, subscription):
    visits = new_visits(1500)
    with puller(backends, subscription) as (url, _, _):
        first = holding(url)
        assert set(first) == STATUS_KEYS, "the status keys other parts read"
        publish(backends, visits)
        done = settled(url, len(visits))
    assert (done["counted"], done["duplicates"], done["malformed"], done["nacked"]) == (1500, 0, 0, 0)
    assert_counted_once(backends, visits)
    documents = batch_documents(backends)
    assert len(documents) == done["batches"] and len(documents) >= 3  # at most 500 a batch
    for document in documents:
        assert sum(document["pages"].values()) == len(document["ids"]) <= 500
        assert document["writer"] == first["generation"]
        assert document["published_from"] <= document["published_to"]
        assert (document["expire_at"] - document["published_to"]).days == 7  # MARKER_TTL_DAYS' default


def test_the_same_visit_posted_ten_times_at_once_is_counted_once(backends, subscription):
    visits = new_visits(20)
    start = threading.Barrier(10)

    def post_all():
        start.wait()
        for visit in visits:
            publish(backends, [visit])

    with puller(backends, subscription) as (url, _, _):
        holding(url)
        threads = [threading.Thread(target=post_all) for _ in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        done = settled(url, 200)
    assert (done["counted"], done["duplicates"]) == (20, 180)
    assert_counted_once(backends, visits)


def test_malformed_messages_are_acknowledged_and_not_counted(backends, subscription):
    bad = [(b"not json", None), (json.dumps({"visit_type": "careers"}).encode(), None),
           ("home", "NOT-A-VISIT-ID")]
    with puller(backends, subscription) as (url, _, log_path):
        holding(url)
        publish(backends, bad)
        done = settled(url, 3)
    assert (done["malformed"], done["counted"], done["nacked"]) == (3, 0, 0)
    assert sum(stored_totals(backends.db).values()) == 0 and batch_documents(backends) == []
    assert no_message_left(backends, subscription)
    lines = [json.loads(line) for line in open(log_path) if '"visit batch"' in line]
    assert any(line["malformed"] == 3 and line["severity"] == "INFO" for line in lines)


def no_message_left(backends, subscription):
    """Nothing to pull from the subscription after the ack deadline: every message was acknowledged."""
    time.sleep(ACK_DEADLINE_SECONDS + 1)
    answer = call(f"http://{backends.direct['pubsub']}/v1/projects/{PROJECT}/subscriptions/{subscription}:pull",
                  "POST", json.dumps({"maxMessages": 10, "returnImmediately": True}).encode(), JSON)
    return answer[0] == 200 and not answer[1].get("receivedMessages")


# ---- the window -----------------------------------------------------------------------------------
def test_a_batch_delivered_again_after_a_crash_before_its_ack_is_counted_once(backends, subscription):
    """A second subscription receives the same messages (ids, publish times, data) as the unacked
    batch a crash leaves: a new puller, which takes the lease and loads the window from
    visit_batches, refuses them all."""
    again = f"{subscription}-again"
    assert create_subscription(backends, again) == 200
    visits = new_visits(600)
    with puller(backends, subscription) as (url, process, _):
        holding(url)
        publish(backends, visits)
        settled(url, len(visits))
        crash(process)  # its lease is still held for up to 30 s: let it run out now
    backends.db.collection(FIRESTORE["leases"]).document("store-inc-counter").delete()
    batches = len(batch_documents(backends))
    with puller(backends, again) as (url, _, _):
        holding(url)
        done = settled(url, len(visits))
    assert (done["counted"], done["duplicates"]) == (0, 600)
    assert_counted_once(backends, visits)
    assert len(batch_documents(backends)) == batches


def test_a_repeat_published_later_within_the_window_is_refused(backends, subscription):
    visits = new_visits(5)
    with puller(backends, subscription, DEDUP_WINDOW_MINUTES="1") as (url, _, _):
        holding(url)
        publish(backends, visits)
        settled(url, 5)
        time.sleep(12)  # published again well after the first copies were counted and acked
        publish(backends, visits)
        done = settled(url, 10)
    assert (done["counted"], done["duplicates"]) == (5, 5)
    assert_counted_once(backends, visits)


def test_a_repeat_published_beyond_the_window_is_a_new_visit(backends, subscription):
    visits = new_visits(5)
    with puller(backends, subscription, DEDUP_WINDOW_MINUTES="0.05") as (url, _, _):  # 3 s
        holding(url)
        publish(backends, visits)
        settled(url, 5)
        time.sleep(4)
        publish(backends, visits)
        done = settled(url, 10)
    assert (done["counted"], done["duplicates"]) == (10, 0)  # the stated horizon
    assert stored_totals(backends.db) == expected_totals(visits + visits)


# ---- one writer ---------------------------------------------------------------------------------
def test_of_two_pullers_only_the_lease_holder_commits(backends, subscription):
    visits = new_visits(2000)
    repeats = visits[::10]
    with puller(backends, subscription) as (first, _, _), puller(backends, subscription) as (second, _, _):
        assert wait_until(lambda: status(first)["pulling"] or status(second)["pulling"], timeout=30)
        publish(backends, visits + repeats)
        assert wait_until(lambda: status(first)["acked"] + status(second)["acked"] >= 2200, timeout=60)
        one, other = status(first), status(second)
    holder, idle = (one, other) if one["holding"] else (other, one)
    assert holder["holding"] and not idle["holding"]
    assert (holder["counted"], holder["duplicates"]) == (2000, 200)
    assert idle["pulled"] == 0 and idle["batches"] == 0
    assert_counted_once(backends, visits)
    assert {document["writer"] for document in batch_documents(backends)} == {holder["generation"]}


@contextlib.contextmanager
def firestore_held(backends):
    """Toxiproxy holds every byte to Firestore from the pullers routed through it until the block ends."""
    backends.proxies.toxic("firestore", {"name": "hold", "type": "timeout", "stream": "upstream",
                                         "attributes": {"timeout": 0}})
    try:
        yield
    finally:
        backends.proxies.remove_toxic("firestore", "hold")


@pytest.mark.slow
def test_a_puller_whose_lease_was_taken_over_cannot_commit(backends, subscription):
    """The holder's batch hangs in its commit (Firestore held for it alone) past its lease; another
    puller takes the lease over and counts the redelivered messages; when Firestore answers the first
    one again, its transaction finds the lease someone else's and commits nothing."""
    visits = new_visits(50)
    with puller(backends, subscription, through_proxy=True) as (paused, _, paused_log):
        holding(paused)
        with firestore_held(backends):
            publish(backends, visits)
            wait_status(paused, lambda s: s["pulled"] >= 50)
            with puller(backends, subscription) as (taker, _, _):
                took = holding(taker, timeout=60)
                assert took["generation"] == status(paused)["generation"] + 1
                done = settled(taker, 50)
        fenced = wait_status(paused, lambda s: s["commit_failures"] >= 1, timeout=90)
    assert (done["counted"], fenced["counted"]) == (50, 0)
    assert any('"lease_lost"' in line for line in open(paused_log))
    assert_counted_once(backends, visits)
    assert {document["writer"] for document in batch_documents(backends)} == {took["generation"]}


@pytest.mark.slow
def test_firestore_unreachable_during_a_commit_acknowledges_nothing_and_counts_once_later(backends, subscription):
    visits = new_visits(100)
    with puller(backends, subscription, through_proxy=True) as (url, _, _):
        holding(url)
        with firestore_held(backends):
            publish(backends, visits)
            wait_status(url, lambda s: s["pulled"] >= 100)
            # Past the ack deadline, Pub/Sub delivers them again: none was acknowledged.
            frozen = wait_status(url, lambda s: s["pulled"] >= 200, timeout=3 * ACK_DEADLINE_SECONDS)
            assert (frozen["acked"], frozen["counted"]) == (0, 0)
        done = wait_status(url, lambda s: s["counted"] == 100 and s["pulled_unacked"] == 0, timeout=120)
        time.sleep(ACK_DEADLINE_SECONDS)  # any delivery still owed comes and is refused
        done = wait_status(url, lambda s: s["pulled_unacked"] == 0)
    assert done["counted"] == 100
    assert_counted_once(backends, visits)


# ---- a stale window, the real commit --------------------------------------------------------------
@pytest.fixture
def in_process(backends, subscription, monkeypatch):
    """store_batch's own Puller in this process, its Google clients made afresh on the emulators (and
    this test's subscription): the real process() and commit(), transaction and all."""
    import clients
    import store_batch

    monkeypatch.setattr(clients, "_made", {})
    monkeypatch.setattr(store_batch, "SUBSCRIPTION", subscription)
    for name, value in (("FIRESTORE_EMULATOR_HOST", backends.direct["firestore"]),
                        ("PUBSUB_EMULATOR_HOST", backends.direct["pubsub"]), ("GOOGLE_CLOUD_PROJECT", PROJECT)):
        monkeypatch.setenv(name, value)
    yield store_batch


def pulled(store_batch, subscription, count):
    """`count` messages pulled from the subscription by the puller's own subscriber, as it reads them."""
    path = store_batch.subscriber().subscription_path(PROJECT, subscription)
    messages, deadline = [], time.monotonic() + 30
    while len(messages) < count and time.monotonic() < deadline:
        reply = store_batch.subscriber().pull(request={"subscription": path, "max_messages": count}, timeout=10)
        messages += [store_batch.message_of(received) for received in reply.received_messages]
    assert len(messages) == count, messages
    return messages


def test_a_commit_for_a_window_of_another_generation_of_the_same_owner_writes_nothing(
        backends, subscription, in_process, capsys):
    """A takeover and a takeback: the lease is ours again, at generation 6, while the window was loaded
    for generation 4. The batch's transaction reads the lease, finds the generation moved on and writes
    nothing; the refusal is a lease_lost and a nack. Loaded for generation 6, the same batch commits."""
    store_batch = in_process
    puller = store_batch.Puller()
    now = datetime.datetime.now(datetime.UTC)
    backends.db.collection(FIRESTORE["leases"]).document(store_batch.LEASE_NAME).set(
        {"owner": puller.owner, "generation": 6, "expires_at": now + datetime.timedelta(seconds=30)})
    puller.generation, puller.lease_valid_until = 6, time.monotonic() + 25
    puller.load_window()
    puller.loaded_generation = 4  # the window as it was before the takeover
    visits = new_visits(3)
    publish(backends, visits)
    batch = pulled(store_batch, subscription, 3)
    capsys.readouterr()

    puller.process(batch)

    assert batch_documents(backends) == [] and sum(stored_totals(backends.db).values()) == 0
    assert (puller.figures["counted"], puller.figures["commit_failures"], puller.figures["nacked"]) == (0, 1, 3)
    assert puller.unsure is None and not any(puller.window.refuses(m.key, m.published) for m in batch)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["severity"], line["outcome"], line["generation"]) for line in lines
            if line["message"] == "visit batch"] == [("WARNING", "lease_lost", 4)]

    again = pulled(store_batch, subscription, 3)  # nacked: delivered again at once
    puller.loaded_generation = 6
    puller.process(again)
    assert_counted_once(backends, visits)
    assert [document["writer"] for document in batch_documents(backends)] == [6]

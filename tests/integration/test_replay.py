"""`replay-dead-letters` (visitkit/cloud/replay.py) against the real emulators, in push mode (the shared
local stack: inc-counter, the push relay, store-inc-counter) and in pull mode (store-inc-counter's puller
on the stack's emulators, with a topic of its own).

The dead letters are real: each visit is also published to a source topic whose subscription has a
dead-letter policy (5 attempts), and nacked until the Pub/Sub emulator forwards it to the dead-letter
topic, as Google does (new message, CloudPubSubDeadLetterSource* attributes). The replay's clock is the
`now` it takes: "an hour later" is the visit's original publish time plus an hour.

What the replay republished is read from a probe subscription on the visits topic, made before it runs:
replay() returns once Pub/Sub has accepted every copy it republished, so the probe holds them at once."""
import contextlib
import datetime
import json
import os
import time
import uuid
from types import SimpleNamespace
from unittest import mock

import pytest
from google.api_core.exceptions import AlreadyExists
from helpers import call, function_process
from test_store_batch import crash

from visitkit.catalogue import FIRESTORE, stored_visits
from visitkit.cloud import replay
from visitkit.net import wait_until
from visitkit.settings import load_settings
from visitkit.twin.stack import TOPIC

# The dead-letter helpers ask the emulator with return_immediately, which Google deprecated for its own
# service (it may answer empty while messages wait); the emulator answers at once.
pytestmark = [pytest.mark.timeout(120),
              pytest.mark.filterwarnings("ignore:The return_immediately flag is deprecated:DeprecationWarning")]

MAX_DELIVERY_ATTEMPTS = 5  # Pub/Sub's least
HOUR = datetime.timedelta(hours=1)


@pytest.fixture(scope="module")
def clients(stack):
    """The real Pub/Sub and Firestore clients, on the stack's emulators."""
    from google.cloud import firestore, pubsub_v1

    state = stack.state()
    with mock.patch.dict(os.environ, {"PUBSUB_EMULATOR_HOST": state["pubsub"],
                                      "FIRESTORE_EMULATOR_HOST": state["firestore"]}):
        yield SimpleNamespace(project=state["project"], publisher=pubsub_v1.PublisherClient(),
                              subscriber=pubsub_v1.SubscriberClient(), db=firestore.Client(project=state["project"]))


@contextlib.contextmanager
def topics_and_subscriptions(clients, *specs):
    """Creates (topic, subscription, dead-letter topic or None) triples (a topic unless it exists), deletes
    what it made afterwards."""
    publisher, subscriber = clients.publisher, clients.subscriber
    made, topics = [], []
    try:
        for topic, subscription, dead_letter_topic in specs:
            topic_path = publisher.topic_path(clients.project, topic)
            with contextlib.suppress(AlreadyExists):
                topics.append(publisher.create_topic(name=topic_path).name)
            request = {"name": subscriber.subscription_path(clients.project, subscription), "topic": topic_path,
                       "ack_deadline_seconds": 60}
            if dead_letter_topic:
                request["dead_letter_policy"] = {"dead_letter_topic": publisher.topic_path(clients.project,
                                                                                           dead_letter_topic),
                                                 "max_delivery_attempts": MAX_DELIVERY_ATTEMPTS}
            made.append(subscriber.create_subscription(request=request).name)
        yield
    finally:
        for subscription_path in made:
            subscriber.delete_subscription(subscription=subscription_path)
        for topic_path in topics:
            publisher.delete_topic(topic=topic_path)


def pull_now(clients, subscription, most=10):
    reply = clients.subscriber.pull(request={"subscription": clients.subscriber.subscription_path(
        clients.project, subscription), "max_messages": most, "return_immediately": True}, timeout=10)
    return list(reply.received_messages)


def nack(clients, subscription, received):
    if received:
        clients.subscriber.modify_ack_deadline(request={
            "subscription": clients.subscriber.subscription_path(clients.project, subscription),
            "ack_ids": [r.ack_id for r in received], "ack_deadline_seconds": 0})


@pytest.fixture
def dead_letters(clients):
    """A source topic whose subscription dead-letters after 5 nacks, and the dead-letter topic's pull
    subscription the replay reads. letters.send((page, visit_id), ...) publishes visits as inc-counter
    does, nacks them until each is dead-lettered, and returns the earliest original publish time."""
    name = f"replay-{uuid.uuid4().hex[:8]}"
    source, dead_letter = f"{name}-source", f"{name}-dead-letter"
    forwarded_ids = set()

    def send(*visits):
        for page, visit_id in visits:
            clients.publisher.publish(clients.publisher.topic_path(clients.project, source),
                                      json.dumps({"visit_type": page}).encode(), visit_type=page,
                                      visit_id=visit_id).result(timeout=30)
        new = []
        deadline = time.monotonic() + 30
        while len(new) < len(visits):
            assert time.monotonic() < deadline, f"dead-lettered within 30 s: {len(new)} of {visits}"
            nack(clients, source, pull_now(clients, source))
            there = pull_now(clients, dead_letter)
            nack(clients, dead_letter, there)
            new += [r.message for r in there if r.message.message_id not in forwarded_ids]
            forwarded_ids.update(m.message_id for m in new)
            time.sleep(0.01)
        assert sorted(m.attributes["visit_id"] for m in new) == sorted(visit_id for _, visit_id in visits)
        return min(replay.parsed_time(m.attributes[replay.ORIGINAL_PUBLISH_TIME]) for m in new)

    with topics_and_subscriptions(clients, (dead_letter, dead_letter, None), (source, source, dead_letter)):
        yield SimpleNamespace(subscription=dead_letter, send=send)


def left_in(clients, subscription):
    """The visit ids still in a subscription (made visible again at once)."""
    received = pull_now(clients, subscription, most=100)
    nack(clients, subscription, received)
    return sorted(r.message.attributes.get("visit_id") for r in received)


# ---- the two stores -------------------------------------------------------------------------------
class PushStore:
    """The shared local stack: inc-counter publishes to its topic, the relay pushes to store-inc-counter."""
    mode = "push"

    def __init__(self, stack, clients):
        self.stack, self.clients, self.topic = stack, clients, TOPIC
        self.ttl_days = load_settings(stack.state()["settings"]).marker_ttl_days

    def count(self, page, visit_id):
        answer = call(f"{self.stack.base_url}/inc-counter?visit_type={page}&visit_id={visit_id}", "POST")
        assert answer[0] == 202, answer
        assert wait_until(lambda: self.times_counted(visit_id) == 1, timeout=30, interval=0.1), "never stored"

    def times_counted(self, visit_id):
        return len(stored_visits(self.clients.db, [visit_id]))  # a marker is there or not



class PullStore:
    """store-inc-counter's puller on a topic of its own; it counts into the stack's Firestore."""
    mode = "pull"
    ttl_days = 7  # the puller's MARKER_TTL_DAYS default

    def __init__(self, clients, topic, url):
        self.clients, self.topic, self.url = clients, topic, url

    def status(self):
        answer = call(self.url, timeout=10)
        assert answer[0] == 200, answer
        return answer[1]

    def count(self, page, visit_id):
        data = json.dumps({"visit_type": page}).encode()
        self.clients.publisher.publish(self.clients.publisher.topic_path(self.clients.project, self.topic), data,
                                       visit_type=page, visit_id=visit_id).result(timeout=30)
        assert wait_until(lambda: self.times_counted(visit_id) == 1, timeout=30, interval=0.1), "never stored"

    def times_counted(self, visit_id):
        batches = self.clients.db.collection(FIRESTORE["batches"]).stream()
        return sum((batch.get("ids") or []).count(visit_id) for batch in batches)



@pytest.fixture(scope="module")
def pull_store(stack, clients, tmp_path_factory):
    state = stack.state()
    topic = f"replay-pull-{uuid.uuid4().hex[:8]}"
    log = tmp_path_factory.mktemp("replay") / "puller.log"
    env = {"STORE_MODE": "pull", "PULL_SUBSCRIPTION": topic, "PULL_FLUSH_MS": "100",
           "FIRESTORE_EMULATOR_HOST": state["firestore"], "PUBSUB_EMULATOR_HOST": state["pubsub"]}
    with topics_and_subscriptions(clients, (topic, topic, None)), open(log, "w") as out, \
            function_process("store-inc-counter", stdout=out, **env) as (url, process):
        store = PullStore(clients, topic, url)
        try:
            assert wait_until(lambda: store.status()["pulling"], timeout=60, interval=0.2), "the puller never pulled"
            yield store
        finally:
            crash(process)


@pytest.fixture(params=["push", "pull"])
def store(request, stack, clients):
    return PushStore(stack, clients) if request.param == "push" else request.getfixturevalue("pull_store")


@pytest.fixture
def republished(store, clients):
    """republished() -> the visit ids published to the store's topic since the test began."""
    probe = f"replay-probe-{uuid.uuid4().hex[:8]}"
    with topics_and_subscriptions(clients, (store.topic, probe, None)):
        yield lambda: left_in(clients, probe)


def replayed(store, clients, letters, now):
    deployment = replay.Deployment(project=clients.project, topic=store.topic,
                                   dead_letter_subscription=letters.subscription, store_mode=store.mode,
                                   marker_ttl_days=store.ttl_days)
    outcomes, more = replay.replay(deployment, clients.subscriber, clients.publisher, clients.db, now,
                                   pull_timeout=1)
    assert not more
    print("\n".join(replay.report_lines(outcomes, deployment, dry_run=False, more=more)))
    return [(o.action, o.letter.visit_id) for o in outcomes], replay.exit_status(outcomes)


# ---- the tests ------------------------------------------------------------------------------------
def test_a_dead_lettered_copy_of_a_counted_visit_replayed_an_hour_later_is_not_counted_again(
        store, clients, dead_letters, republished):
    visit_id = str(uuid.uuid4())
    store.count("jobs", visit_id)
    published = dead_letters.send(("jobs", visit_id))
    outcomes, status = replayed(store, clients, dead_letters, now=published + HOUR)
    assert outcomes == [(replay.ALREADY_STORED, visit_id)] and status == 0
    assert republished() == [visit_id], "only its first copy, counted before the replay"
    assert store.times_counted(visit_id) == 1
    assert left_in(clients, dead_letters.subscription) == [], "acknowledged"


def test_a_dead_lettered_visit_past_the_ttl_is_refused_and_left(store, clients, dead_letters, republished):
    visit_id = str(uuid.uuid4())  # never counted: only the refusal keeps it from being republished
    published = dead_letters.send(("about", visit_id))
    now = published + datetime.timedelta(days=store.ttl_days, minutes=1)
    outcomes, status = replayed(store, clients, dead_letters, now=now)
    assert outcomes == [(replay.REFUSED, visit_id)] and status == 1
    assert republished() == []
    assert left_in(clients, dead_letters.subscription) == [visit_id]


def test_a_dead_lettered_visit_not_counted_yet_is_republished_and_counted_once(
        store, clients, dead_letters, republished):
    visit_id, other = str(uuid.uuid4()), str(uuid.uuid4())
    # Pub/Sub may dead-letter one visit twice: it is republished once
    published = dead_letters.send(("home", visit_id), ("home", other), ("home", other))
    outcomes, status = replayed(store, clients, dead_letters, now=published + HOUR)
    assert sorted(outcomes) == sorted([(replay.REPUBLISHED, visit_id), (replay.REPUBLISHED, other),
                                       (replay.ALREADY_STORED, other)]) and status == 0
    assert sorted(republished()) == sorted([visit_id, other])
    assert wait_until(lambda: store.times_counted(visit_id) == store.times_counted(other) == 1, timeout=30,
                      interval=0.1), "the republished visits were counted"
    assert left_in(clients, dead_letters.subscription) == []

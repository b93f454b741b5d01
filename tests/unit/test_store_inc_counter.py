"""How store-inc-counter reads a Pub/Sub message and counts it (pure logic: Firestore's client is
replaced by a recorder of the writes it is asked to make)."""
import base64
import json
import re

import pytest
from google.api_core import exceptions as google_errors

import store_inc_counter
from common import FIRESTORE
from store_inc_counter import visit_key, visit_of
from visits import marker_id


def message(payload):
    return {"data": base64.b64encode(payload).decode(), "messageId": "1"}


def test_a_visit_names_its_page():
    assert visit_of(message(json.dumps({"visit_type": "about_offices"}).encode())) == "about_offices"


@pytest.mark.parametrize("bad", [
    {},
    {"data": "not base64!"},
    message(b"not json"),
    message(b"[1, 2]"),
    message(json.dumps({"visit_type": "careers"}).encode()),
    message(json.dumps({"visit_type": "../home"}).encode()),
    message(json.dumps({"page": "home"}).encode()),
])
def test_malformed_messages_are_recognised(bad):
    assert visit_of(bad) is None


def test_marker_ids_are_stable_and_spread():
    assert marker_id("42") == marker_id("42")
    assert re.fullmatch(r"[0-9a-f]{64}", marker_id("42"))  # a SHA-256, never the raw id
    assert marker_id("42") == "73475cb40a568e8da8a045ced110137e159f890ac4da883b6b17dc651b3a8049"
    # Pub/Sub's ids grow one by one; their markers must not share a prefix (Firestore hotspots).
    first_characters = {marker_id(str(1_000_000 + n))[0] for n in range(100)}
    assert len(first_characters) >= 12


class FakeBatch:
    def __init__(self, db):
        self.db, self.writes = db, []

    def create(self, ref, data):
        self.writes.append(("create", ref, data))

    def set(self, ref, data, merge=False):
        self.writes.append(("set", ref, data, merge))

    def commit(self, timeout=None, retry=None):
        self.db.commits.append(self.writes)
        # Firestore applies a batch all or nothing: a marker that exists fails the whole batch.
        if any(w[0] == "create" and w[1] in self.db.markers for w in self.writes):
            raise google_errors.AlreadyExists("Document already exists")
        self.db.markers.update(w[1] for w in self.writes if w[0] == "create")


class FakeFirestore:
    """Records batches; refs are plain path tuples. Any other call (a read, a write outside a
    batch) fails the test: counting must be one atomic batch."""
    def __init__(self):
        self.commits, self.markers = [], set()

    def batch(self):
        return FakeBatch(self)

    def collection(self, name):
        return FakeRef((name,))


class FakeRef(tuple):
    def document(self, name):
        return FakeRef((*self, name))

    def collection(self, name):
        return FakeRef((*self, name))


@pytest.fixture
def db(monkeypatch):
    fake = FakeFirestore()
    monkeypatch.setattr(store_inc_counter.clients, "firestore", lambda: fake)
    monkeypatch.setattr(store_inc_counter, "shards_of",
                        lambda page: FakeRef((FIRESTORE["counters"], page, FIRESTORE["shards"])))
    return fake


def test_a_visit_is_counted_in_one_batch_with_its_marker(db):
    assert store_inc_counter.count_visit("jobs", "m-1", 3) is True
    [writes] = db.commits
    kinds = sorted((w[0], w[1]) for w in writes)
    assert kinds == [("create", (FIRESTORE["markers"], marker_id("m-1"))),
                     ("set", (FIRESTORE["counters"], "jobs", FIRESTORE["shards"], "3"))]
    marker = next(w for w in writes if w[0] == "create")[2]
    assert marker["visit_type"] == "jobs" and FIRESTORE["marker_expiry_field"] in marker


def test_a_message_already_counted_changes_nothing(db):
    assert store_inc_counter.count_visit("jobs", "m-1", 0) is True
    # Redelivered, to another shard: the batch fails on the marker and is not retried or split.
    assert store_inc_counter.count_visit("jobs", "m-1", 1) is False
    assert len(db.commits) == 2
    assert store_inc_counter.count_visit("jobs", "m-2", 1) is True


def test_a_redelivery_is_acknowledged_and_logged_as_already_counted(db, capsys):
    event = {"message": {"data": base64.b64encode(b'{"visit_type": "about"}').decode(), "messageId": "m-9"}}

    class CloudEvent:
        data = event

        def __getitem__(self, key):
            return "event-id"

    store_inc_counter.store_inc_counter(CloudEvent())
    store_inc_counter.store_inc_counter(CloudEvent())  # returns normally: Pub/Sub gets a 2xx, no retry
    outcomes = [json.loads(line)["outcome"] for line in capsys.readouterr().out.splitlines()]
    assert outcomes == ["counted", "already_counted"]


VISIT = "3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b"


def test_a_visit_is_named_by_its_visit_id_and_an_older_message_by_its_message_id():
    assert visit_key({"attributes": {"visit_type": "home", "visit_id": VISIT}}, "m-1") == VISIT
    assert visit_key({"attributes": {"visit_type": "home"}}, "m-1") == "m-1"
    assert visit_key({}, "m-1") == "m-1"


@pytest.mark.parametrize("bad", ["", "not-a-uuid", VISIT.upper(), VISIT + " ", "{" + VISIT + "}"])
def test_a_malformed_visit_id_makes_the_message_malformed(bad):
    assert visit_key({"attributes": {"visit_id": bad}}, "m-1") is None


def cloud_event(message):
    class CloudEvent:
        data = {"message": message}

        def __getitem__(self, key):
            return "event-id"

    return CloudEvent()


def test_two_messages_of_one_visit_count_once(db, capsys):
    """A publish retried after a timeout that had landed: two message ids, one visit id."""
    data = base64.b64encode(b'{"visit_type": "jobs"}').decode()
    for message_id in ("m-1", "m-2"):
        store_inc_counter.store_inc_counter(cloud_event(
            {"data": data, "messageId": message_id, "attributes": {"visit_type": "jobs", "visit_id": VISIT}}))
    outcomes = [json.loads(line)["outcome"] for line in capsys.readouterr().out.splitlines()]
    assert outcomes == ["counted", "already_counted"]
    assert db.markers == {(FIRESTORE["markers"], marker_id(VISIT))}


TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_a_failed_write_is_logged_as_failed_with_its_visit_and_raised_for_redelivery(monkeypatch, capsys):
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p")

    def unavailable(*_):
        raise google_errors.ServiceUnavailable("Firestore is down")

    monkeypatch.setattr(store_inc_counter, "count_visit", unavailable)
    data = base64.b64encode(b'{"visit_type": "jobs"}').decode()
    with pytest.raises(google_errors.ServiceUnavailable):  # the 500 makes Pub/Sub deliver it again
        store_inc_counter.store_inc_counter(cloud_event(
            {"data": data, "messageId": "m-7", "attributes": {"visit_id": VISIT, "trace": TRACE}}))
    line = json.loads(capsys.readouterr().out)
    assert (line["severity"], line["outcome"], line["message_id"], line["visit_id"]) == ("ERROR", "failed", "m-7",
                                                                                          VISIT)
    assert "ServiceUnavailable: 503 Firestore is down" in line["stack_trace"]
    assert line["logging.googleapis.com/trace"] == f"projects/p/traces/{TRACE}"  # the publishing request's


@pytest.mark.parametrize("attributes, trace", [({"trace": TRACE}, (TRACE, None)), ({"trace": "x" * 32}, (None, None)),
                                               ({}, (None, None)), (None, (None, None))])
def test_a_message_carries_the_trace_of_the_request_that_published_it(attributes, trace):
    assert store_inc_counter.trace_of({"attributes": attributes}) == trace

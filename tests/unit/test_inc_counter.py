"""inc-counter's request checks and what it publishes (pure logic: Flask test requests, the
publisher replaced by a recorder; the real publish is tested through the stack)."""
import json
import uuid
from types import SimpleNamespace

import flask
import pytest
from google.api_core import exceptions as google_errors

import inc_counter

app = flask.Flask(__name__)
VISIT = "3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b"


class Publisher:
    def __init__(self, error=None):
        self.calls, self.error = [], error

    def publish(self, topic, messages, retry, timeout):
        self.calls.append(messages)
        if self.error:
            raise self.error
        return SimpleNamespace(message_ids=[str(len(self.calls))])


@pytest.fixture
def publisher(monkeypatch):
    recorder = Publisher()
    monkeypatch.setattr(inc_counter.clients, "publisher", lambda: recorder)
    monkeypatch.setattr(inc_counter, "topic_path", lambda: "projects/p/topics/visits")
    return recorder


def post(query, headers=False):
    with app.test_request_context(f"/inc-counter?{query}", method="POST"):
        reply = flask.make_response(inc_counter.inc_counter(flask.request))
    if headers:
        return reply.status_code, json.loads(reply.get_data()), reply.headers
    return reply.status_code, json.loads(reply.get_data())


def test_the_visit_id_sent_is_published_and_answered(publisher):
    assert post(f"visit_type=jobs&visit_id={VISIT}") == (
        202, {"visit_type": "jobs", "visit_id": VISIT, "message_id": "1"})
    [[message]] = publisher.calls
    assert message["attributes"] == {"visit_type": "jobs", "visit_id": VISIT}


def test_a_visit_without_an_id_gets_a_new_one(publisher):
    first, second = post("visit_type=home")[1]["visit_id"], post("visit_type=home")[1]["visit_id"]
    assert first != second and str(uuid.UUID(first)) == first
    assert [m["attributes"]["visit_id"] for [m] in publisher.calls] == [first, second]


@pytest.mark.parametrize("visit_id", ["", "42", VISIT.upper(), VISIT.replace("-", ""), VISIT + "0",
                                      "{" + VISIT + "}", "urn:uuid:" + VISIT])
def test_a_malformed_visit_id_is_refused_and_publishes_nothing(publisher, visit_id):
    status, reply = post(f"visit_type=home&visit_id={visit_id}")
    assert status == 400 and "visit_id" in reply["error"]
    assert publisher.calls == []


def test_a_repeated_visit_id_is_refused(publisher):
    status, reply = post(f"visit_type=home&visit_id={VISIT}&visit_id={VISIT}")
    assert status == 400 and "more than once" in reply["error"]
    assert publisher.calls == []


def test_an_unconfirmed_publish_says_a_retry_with_the_same_id_is_safe(monkeypatch):
    monkeypatch.setattr(inc_counter.clients, "publisher", lambda: Publisher(google_errors.DeadlineExceeded("slow")))
    monkeypatch.setattr(inc_counter, "topic_path", lambda: "projects/p/topics/visits")
    status, reply, headers = post("visit_type=about", headers=True)
    assert status == 503
    assert "not known to be recorded" in reply["error"] and "same visit_id again is safe" in reply["error"]
    assert str(uuid.UUID(reply["visit_id"])) == reply["visit_id"]  # the id to post again
    assert headers["Retry-After"] == "1"  # seconds; the page waits at least this before it posts again


@pytest.mark.parametrize("error, retried", [
    (google_errors.DeadlineExceeded("late"), True), (google_errors.ServiceUnavailable("reset"), True),
    (google_errors.Aborted("x"), True), (google_errors.InternalServerError("x"), True),
    (google_errors.PermissionDenied("no"), False), (google_errors.NotFound("no topic"), False),
])
def test_the_publish_is_retried_on_pubsubs_own_retryable_errors(error, retried):
    # Safe since a visit published twice counts once; a permission or topic error cannot heal.
    assert inc_counter.PUBLISH_RETRY._predicate(error) is retried


def test_a_post_from_another_sites_page_is_refused_and_publishes_nothing(publisher):
    with app.test_request_context(f"/inc-counter?visit_type=home&visit_id={VISIT}", method="POST",
                                  headers={"Origin": "https://elsewhere.example", "Sec-Fetch-Site": "cross-site"}):
        reply = flask.make_response(inc_counter.inc_counter(flask.request))
    assert reply.status_code == 403 and "another site" in json.loads(reply.get_data())["error"]
    assert publisher.calls == []


def test_the_requests_trace_travels_with_the_visit(publisher):
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    with app.test_request_context(f"/inc-counter?visit_type=home&visit_id={VISIT}", method="POST",
                                  headers={"X-Cloud-Trace-Context": f"{trace}/1;o=1"}):
        assert flask.make_response(inc_counter.inc_counter(flask.request)).status_code == 202
    [[message]] = publisher.calls
    assert message["attributes"]["trace"] == trace

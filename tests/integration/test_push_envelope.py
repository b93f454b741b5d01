"""store-inc-counter behind Google Cloud's own push subscription: the exact body Pub/Sub POSTs
(wrapped message with attributes, both id spellings, publish time; the subscription; and, because
the subscription has a dead-letter policy, deliveryAttempt), sent through the real
functions-framework, counts the visit once, however often it is delivered."""
import base64
import json
import uuid

from helpers import call

from visitkit.net import wait_until


def google_push_body(page, message_id, attempt, visit_id=None):
    data = base64.b64encode(json.dumps({"visit_type": page}).encode()).decode()
    return json.dumps({
        "message": {
            "attributes": {"visit_type": page, **({"visit_id": visit_id} if visit_id else {})},
            "data": data,
            "messageId": message_id,
            "message_id": message_id,
            "publishTime": "2026-11-22T10:00:00.123Z",
            "publish_time": "2026-11-22T10:00:00.123Z",
        },
        "subscription": "projects/visitkit-demo/subscriptions/visits-store-inc-counter",
        "deliveryAttempt": attempt,
    }).encode()


# Cloud Run checks the OIDC token before the function runs; the function receives it and ignores it.
HEADERS = {"Content-Type": "application/json", "User-Agent": "APIs-Google", "Authorization": "Bearer not-checked-here"}


def test_googles_push_envelope_is_counted_once_however_often_it_comes(stack):
    push_url = stack.state()["push_url"] + "/store-inc-counter"
    before = stack.totals()["about_offices"]
    for attempt in (1, 2, 5):  # a first delivery, then redeliveries of the same message
        status, _ = call(push_url, "POST", google_push_body("about_offices", "google-envelope-1", attempt), HEADERS)
        assert 200 <= status < 300, status
    assert wait_until(lambda: stack.totals()["about_offices"] == before + 1, timeout=10)
    assert stack.totals()["about_offices"] == before + 1


def test_two_messages_of_one_visit_in_googles_envelope_count_once(stack):
    """A publish retried after a lost answer: two message ids, one visit id in the attributes, which
    must survive functions-framework's conversion of the push body into a CloudEvent."""
    push_url = stack.state()["push_url"] + "/store-inc-counter"
    before, visit_id = stack.totals()["about"], str(uuid.uuid4())
    for message_id in ("google-envelope-3", "google-envelope-4"):
        status, _ = call(push_url, "POST", google_push_body("about", message_id, 1, visit_id), HEADERS)
        assert 200 <= status < 300, status
    assert wait_until(lambda: stack.totals()["about"] == before + 1, timeout=10)
    assert stack.totals()["about"] == before + 1


def test_a_malformed_message_in_googles_envelope_is_acknowledged_and_changes_nothing(stack):
    push_url = stack.state()["push_url"] + "/store-inc-counter"
    before = stack.totals()
    body = json.loads(google_push_body("jobs", "google-envelope-2", 1))
    body["message"]["data"] = base64.b64encode(b'{"visit_type": "../etc"}').decode()
    status, _ = call(push_url, "POST", json.dumps(body).encode(), HEADERS)
    assert 200 <= status < 300  # acknowledged: retrying a malformed message cannot help
    assert stack.totals() == before

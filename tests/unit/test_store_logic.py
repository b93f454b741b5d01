"""How store-inc-counter reads a Pub/Sub message (pure logic)."""
import base64
import json

import pytest

from store_inc_counter import marker_id, visit_of


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
    assert marker_id("42") != marker_id("43")
    assert marker_id("42")[:8] != marker_id("43")[:8]

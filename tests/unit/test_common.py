"""Request checks and replies shared by the HTTP functions (pure logic, Flask test requests)."""
import json

import flask
import pytest

from common import MAX_BODY_BYTES, PAGES, check_request, page_from

app = flask.Flask(__name__)


def page_for(query):
    with app.test_request_context(f"/get-counter?{query}"):
        return page_from(flask.request, "visit_type")


@pytest.mark.parametrize("page", PAGES)
def test_every_page_is_accepted(page):
    assert page_for(f"visit_type={page}") == (page, None)


@pytest.mark.parametrize("query, status", [
    ("", 400),
    ("visit_type=", 400),
    ("visit_type=home&visit_type=jobs", 400),
    ("visit_type=../../etc/passwd", 400),
    ("visit_type=HOME", 400),
    ("visit_type=home%00", 400),
    ("visit_type=" + "a" * 5000, 400),
    ("visit_type=careers", 404),
])
def test_bad_page_gets_a_json_4xx(query, status):
    page, reply = page_for(query)
    assert page is None
    assert reply.status_code == status
    assert "error" in json.loads(reply.get_data())


@pytest.mark.parametrize("method, allowed, status", [
    ("GET", ("GET", "HEAD"), None),
    ("POST", ("POST",), None),
    ("DELETE", ("POST",), 405),
    ("PUT", ("GET", "HEAD"), 405),
    ("OPTIONS", ("POST",), 204),
])
def test_methods(method, allowed, status):
    with app.test_request_context("/", method=method):
        reply = check_request(flask.request, allowed)
    assert (reply.status_code if reply else None) == status
    if status == 405:
        assert reply.headers["Allow"] == ", ".join(allowed)


def test_oversized_body_is_rejected_with_413():
    with app.test_request_context("/", method="POST", data=b"x" * (MAX_BODY_BYTES + 1)):
        assert check_request(flask.request, ("POST",)).status_code == 413
    with app.test_request_context("/", method="POST", data=b"x" * MAX_BODY_BYTES):
        assert check_request(flask.request, ("POST",)) is None

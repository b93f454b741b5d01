"""Counting end to end on the real emulators through the local stack (iteration 0 settings)."""
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import call, push_body, wait_for

from visitkit.catalogue import PAGES
from visitkit.net import http_status

VISITS_PER_PAGE = 500


def test_every_acknowledged_visit_is_counted_exactly_once(stack):
    stack.reset_counts()
    base = stack.base_url

    def visit(page):
        return call(f"{base}/inc-counter?visit_type={page}", "POST")[0]

    with ThreadPoolExecutor(max_workers=10) as pool:
        statuses = list(pool.map(visit, [p for p in PAGES for _ in range(VISITS_PER_PAGE)]))
    assert statuses.count(202) == len(statuses), {s: statuses.count(s) for s in set(statuses)}

    expected = {page: VISITS_PER_PAGE for page in PAGES}
    assert wait_for(lambda: stack.totals() == expected, timeout=180), stack.totals()
    for page in PAGES:  # TTL 0: get-counter reads the shards every time
        assert call(f"{base}/get-counter?visit_type={page}") == (200, {"visit_type": page, "count": 500})


def test_a_page_never_visited_counts_zero(stack):
    stack.reset_counts()
    assert call(f"{stack.base_url}/get-counter?visit_type=about_legals") == (
        200, {"visit_type": "about_legals", "count": 0})


def test_a_redelivered_message_is_counted_once(stack):
    before = stack.totals()["jobs"]
    message_id = str(uuid.uuid4())
    push = f"{stack.state()['push_url']}/store-inc-counter"
    for _ in range(3):  # Pub/Sub may deliver the same message again, e.g. after a lost ack
        status, _ = call(push, "POST", push_body("jobs", message_id), {"Content-Type": "application/json"})
        assert status in (200, 204)
    assert stack.totals()["jobs"] == before + 1


@pytest.mark.parametrize("data", ["bm90IGpzb24=", "not base64!", ""])
def test_a_malformed_message_is_acknowledged_and_changes_nothing(stack, data):
    before = stack.totals()
    push = f"{stack.state()['push_url']}/store-inc-counter"
    status, _ = call(push, "POST", push_body("home", str(uuid.uuid4()), data), {"Content-Type": "application/json"})
    assert status in (200, 204)  # acknowledged: retrying it could never succeed
    assert stack.totals() == before


BAD_REQUESTS = [
    ("POST", "/inc-counter", None, 400),
    ("POST", "/inc-counter?visit_type=", None, 400),
    ("POST", "/inc-counter?visit_type=careers", None, 404),
    ("POST", "/inc-counter?visit_type=../../etc/passwd", None, 400),
    ("POST", "/inc-counter?visit_type=%2e%2e%2fhome", None, 400),
    ("POST", "/inc-counter?visit_type=home&visit_type=jobs", None, 400),
    ("GET", "/inc-counter?visit_type=home", None, 405),
    ("PUT", "/inc-counter?visit_type=home", None, 405),
    ("POST", "/inc-counter?visit_type=home", b"x" * 100_000, 413),
    ("GET", "/get-counter?visit_type=careers", None, 404),
    ("GET", "/get-counter", None, 400),
    ("POST", "/get-counter?visit_type=home", None, 405),
    ("GET", "/app?view=../../etc/passwd", None, 400),
    ("GET", "/app?view=careers", None, 404),
    ("GET", "/app", None, 400),
    ("DELETE", "/app?view=home", None, 405),
    ("GET", "/store-inc-counter", None, 404),  # not public: only the push subscription reaches it
    ("GET", "/../etc/passwd", None, 404),
]


@pytest.mark.parametrize("method, path, body, status", BAD_REQUESTS)
def test_bad_input_gets_a_clear_4xx_and_changes_nothing(stack, method, path, body, status):
    before = stack.totals()
    accepted = stack.sample()["store"]["accepted"]
    got, reply = call(stack.base_url + path, method, body)
    assert got == status
    assert isinstance(reply, dict) and reply["error"]
    assert stack.totals() == before
    assert stack.sample()["store"]["accepted"] == accepted


def test_a_cors_preflight_is_not_counted_as_an_accepted_visit(stack):
    before = stack.sample()["store"]
    assert http_status(f"{stack.base_url}/inc-counter?visit_type=home", "OPTIONS") == 204
    after = stack.sample()["store"]
    assert after["accepted"] == before["accepted"] and after["backlog"] == before["backlog"]
    status, _ = call(f"{stack.base_url}/inc-counter?visit_type=home", "POST")
    assert status == 202
    assert stack.sample()["store"]["accepted"] == before["accepted"] + 1


def test_pages_are_served_with_their_counter_wiring(stack):
    status, html = call(f"{stack.base_url}/app?view=about_offices")
    assert status == 200
    assert "Our offices" in html and 'id="visit-count"' in html
    assert '"incUrl": "/inc-counter"' in html and '"view": "about_offices"' in html

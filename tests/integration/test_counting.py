"""Counting end to end on the real emulators through the local stack (iteration 0 settings)."""
import collections
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import call, function_server, push_body, relay_figures, settle, store_activity

from visitkit.catalogue import PAGES
from visitkit.net import http_status, wait_until

VISITS_PER_PAGE = 500
JSON = {"Content-Type": "application/json"}


def post_visits(base_url, pages, threads=10):
    """{page: Counter of statuses} of one POST to inc-counter per entry of `pages`."""
    def visit(page):
        return page, call(f"{base_url}/inc-counter?visit_type={page}", "POST", timeout=60)[0]

    answers = collections.defaultdict(collections.Counter)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for page, status in pool.map(visit, pages):
            answers[page][status] += 1
    return answers


def bounds(before, acknowledged, ambiguous):
    """(low, high) of the totals: every acknowledged visit stored, plus at most the ambiguous ones
    (a 5xx may or may not have been published), page by page."""
    low = {page: before[page] + acknowledged.get(page, 0) for page in PAGES}
    return low, {page: low[page] + ambiguous.get(page, 0) for page in PAGES}


@pytest.mark.slow
def test_every_acknowledged_visit_is_counted_exactly_once(stack):
    stack.reset_counts()
    before = {page: 0 for page in PAGES}
    answers = post_visits(stack.base_url, [p for p in PAGES for _ in range(VISITS_PER_PAGE)])
    statuses = sum(answers.values(), collections.Counter())
    # A slow machine may queue a request past the platform's timeout (429) or time a publish out
    # (503); neither is a counting error, but almost every visit must get through.
    assert set(statuses) <= {202, 429, 503} and statuses[202] >= 0.95 * len(PAGES) * VISITS_PER_PAGE, statuses
    acknowledged = {page: answers[page][202] for page in PAGES}
    ambiguous = {page: answers[page][503] for page in PAGES}

    totals = settle(stack, *bounds(before, acknowledged, ambiguous))
    for page in PAGES:  # TTL 0: get-counter reads the shards every time
        assert call(f"{stack.base_url}/get-counter?visit_type={page}") == (
            200, {"visit_type": page, "count": totals[page]})


def test_simultaneous_redeliveries_of_one_message_count_once(stack):
    """Pub/Sub may push one message to several instances at once (an ack lost, a deadline passed):
    24 deliveries of the same id at the same moment, to a store-inc-counter of 24 threads on the
    stack's Firestore, must add exactly one visit. A check-then-write count would add several."""
    copies, messages = 24, 5
    before = stack.totals()["about_legals"]
    with function_server("store-inc-counter", FIRESTORE_EMULATOR_HOST=stack.state()["firestore"],
                         THREADS=str(copies)) as url, ThreadPoolExecutor(max_workers=copies) as pool:
        for _ in range(messages):
            body = push_body("about_legals", str(uuid.uuid4()))
            start = threading.Barrier(copies)

            def deliver(_):
                start.wait(timeout=30)
                return call(url, "POST", body, JSON)[0]

            statuses = list(pool.map(deliver, range(copies)))
            assert all(200 <= status < 300 for status in statuses), statuses  # acknowledged: no retry
    assert stack.totals()["about_legals"] == before + messages


def test_many_messages_redelivered_under_load_count_once(stack):
    """While real visits flow through inc-counter and Pub/Sub, 60 more message ids are each pushed
    5 times at once through the platform to store-inc-counter's instances: once the backlog is
    empty, and after a hold, every id added exactly one visit."""
    ids = {page: [str(uuid.uuid4()) for _ in range(12)] for page in PAGES}
    copies = 5
    push = f"{stack.state()['push_url']}/store-inc-counter"
    before = stack.totals()

    def redeliver(page, message_id):
        body = push_body(page, message_id)
        start = threading.Barrier(copies)

        def deliver(_):
            start.wait(timeout=30)
            return call(push, "POST", body, JSON, timeout=60)[0]

        with ThreadPoolExecutor(max_workers=copies) as pool:
            return list(pool.map(deliver, range(copies)))

    with ThreadPoolExecutor(max_workers=2) as outer:
        load = outer.submit(post_visits, stack.base_url, [p for p in PAGES for _ in range(60)], 6)
        redelivered = [redeliver(page, message_id) for page in PAGES for message_id in ids[page]]
        answers = load.result()
    assert all(200 <= s < 300 for statuses in redelivered for s in statuses), redelivered
    acknowledged = {page: answers[page][202] + len(ids[page]) for page in PAGES}
    ambiguous = {page: sum(n for status, n in answers[page].items() if status >= 500) for page in PAGES}
    assert sum(answers[page][202] for page in PAGES) >= 0.9 * 60 * len(PAGES), answers
    settle(stack, *bounds(before, acknowledged, ambiguous))


def test_a_page_never_visited_counts_zero(stack):
    stack.reset_counts()
    assert call(f"{stack.base_url}/get-counter?visit_type=about_legals") == (
        200, {"visit_type": "about_legals", "count": 0})


def test_a_redelivered_message_is_counted_once(stack):
    before = stack.totals()["jobs"]
    message_id = str(uuid.uuid4())
    push = f"{stack.state()['push_url']}/store-inc-counter"
    for _ in range(3):  # Pub/Sub may deliver the same message again, e.g. after a lost ack
        status, _ = call(push, "POST", push_body("jobs", message_id), JSON)
        assert status in (200, 204)
    assert stack.totals()["jobs"] == before + 1


@pytest.mark.parametrize("data", ["bm90IGpzb24=", "not base64!", ""])
def test_a_malformed_message_is_acknowledged_and_changes_nothing(stack, data):
    before = stack.totals()
    push = f"{stack.state()['push_url']}/store-inc-counter"
    status, _ = call(push, "POST", push_body("home", str(uuid.uuid4()), data), JSON)
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


MARKER_PAGE = "about_offices"


def published_nothing_but_a_marker(stack, before, delivered):
    """After requests that must publish nothing: one good visit (the marker) is posted, and once it is
    stored and nothing is on its way to the store (the relay idle, store-inc-counter idle), the relay has
    made exactly one delivery since `delivered` and the totals are `before` plus the marker. A message
    the requests had published, earlier than the marker's, is pulled with it or before it: it would show
    as a delivery more (even one store-inc-counter drops as malformed) or a visit more. No fixed wait."""
    status, reply = call(f"{stack.base_url}/inc-counter?visit_type={MARKER_PAGE}", "POST")
    assert status == 202, reply
    expected = {**before, MARKER_PAGE: before[MARKER_PAGE] + 1}
    assert wait_until(lambda: stack.totals()[MARKER_PAGE] >= expected[MARKER_PAGE] and not store_activity(stack)[1],
                      timeout=30, interval=0.05), f"the marker visit was not stored: {stack.totals()}"
    assert stack.totals() == expected, "a visit was stored beside the marker"
    assert relay_figures(stack)["deliveries"] - delivered == 1, "a message was published beside the marker"


@pytest.mark.parametrize("method, path, body, status", BAD_REQUESTS)
def test_bad_input_gets_a_clear_4xx_and_changes_nothing(stack, method, path, body, status):
    before, delivered = stack.totals(), relay_figures(stack)["deliveries"]
    accepted = stack.sample()["store"]["accepted"]
    got, reply = call(stack.base_url + path, method, body)
    assert got == status
    assert isinstance(reply, dict) and reply["error"]
    assert stack.sample()["store"]["accepted"] == accepted  # HAProxy counted no 202
    published_nothing_but_a_marker(stack, before, delivered)  # and nothing reached the topic or the store


def test_a_cors_preflight_is_not_counted_as_an_accepted_visit(stack):
    # No other site is allowed (CORS_ALLOWED_ORIGINS is empty), so the preflight is refused; an allowed
    # one's 204 is a 2xx too, and HAProxy counts only the 202s (tests/unit/test_common.py answers it).
    # Not the backlog: it is accepted minus what the push relay settled, read from two processes at two
    # moments, and it moved by one once in CI with accepted unchanged; the marker below is what
    # shows that nothing was published.
    before, totals, delivered = stack.sample()["store"], stack.totals(), relay_figures(stack)["deliveries"]
    assert http_status(f"{stack.base_url}/inc-counter?visit_type=home", "OPTIONS") == 403
    assert stack.sample()["store"]["accepted"] == before["accepted"]
    # nothing published or stored for it: the marker visit alone is delivered and counted, and accepted
    published_nothing_but_a_marker(stack, totals, delivered)
    assert stack.sample()["store"]["accepted"] == before["accepted"] + 1


def test_pages_are_served_with_their_counter_wiring(stack):
    status, html = call(f"{stack.base_url}/app?view=about_offices")
    assert status == 200
    assert "Our offices" in html and 'id="visit-count"' in html
    assert '"incUrl": "/inc-counter"' in html and '"view": "about_offices"' in html

"""Request checks and replies shared by the HTTP functions (pure logic, Flask test requests)."""
import json

import flask
import pytest

import common
from common import MAX_BODY_BYTES, PAGES, check_request, from_another_site, json_reply, log, page_from, trace_of
from visitkit.cloud import gcp
from visitkit.net import Answer

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
    ("OPTIONS", ("POST",), 403),  # a preflight comes from another site's page, and none is allowed
])
def test_methods(method, allowed, status):
    with app.test_request_context("/", method=method):
        reply = check_request(flask.request, allowed)
    assert (reply.status_code if reply else None) == status
    if status == 405:
        assert reply.headers["Allow"] == ", ".join(allowed)


@pytest.mark.parametrize("allowed", [("GET", "HEAD"), ("POST",)])
def test_the_kits_readiness_probe_is_refused_as_the_kit_knows_our_code_by(allowed):
    """visitkit.cloud.gcp.wait_until_answering takes a function as serving on this answer alone."""
    with app.test_request_context("/?visit_type=home", method=gcp.READY_METHOD):
        reply = check_request(flask.request, allowed)
    answer = Answer(reply.status_code, {name.lower(): value for name, value in reply.headers.items()},
                    reply.get_data())
    assert gcp.is_our_refusal(answer)


def test_oversized_body_is_rejected_with_413():
    with app.test_request_context("/", method="POST", data=b"x" * (MAX_BODY_BYTES + 1)):
        assert check_request(flask.request, ("POST",)).status_code == 413
    with app.test_request_context("/", method="POST", data=b"x" * MAX_BODY_BYTES):
        assert check_request(flask.request, ("POST",)) is None


OTHER = "https://other.example"


@pytest.mark.parametrize("headers, refused", [
    ({}, False),  # curl, Locust: no browser, nothing to go by
    ({"Sec-Fetch-Site": "same-origin", "Origin": "http://localhost"}, False),
    ({"Sec-Fetch-Site": "cross-site", "Origin": OTHER}, True),
    ({"Sec-Fetch-Site": "same-site", "Origin": "https://sub.localhost"}, True),  # another origin all the same
    ({"Origin": OTHER}, True),  # a browser without Sec-Fetch-Site: its Origin against the host
    ({"Origin": "http://localhost"}, False),
    ({"Origin": "null"}, True),  # a sandboxed page
])
def test_a_post_from_another_sites_page_is_told_apart(headers, refused):
    with app.test_request_context("/inc-counter", method="POST", headers=headers, base_url="http://localhost"):
        assert from_another_site(flask.request) is refused


def test_an_allowed_origin_may_call_and_gets_its_cors_headers(monkeypatch):
    monkeypatch.setattr(common, "CORS_ALLOWED_ORIGINS", frozenset({OTHER}))
    headers = {"Origin": OTHER, "Sec-Fetch-Site": "cross-site"}
    with app.test_request_context("/inc-counter", method="POST", headers=headers):
        assert from_another_site(flask.request) is False
        reply = json_reply({"ok": True})
    assert reply.headers["Access-Control-Allow-Origin"] == OTHER and reply.headers["Vary"] == "Origin"
    with app.test_request_context("/inc-counter", method="OPTIONS", headers=headers):
        preflight = check_request(flask.request, ("POST",))
    assert preflight.status_code == 204 and preflight.headers["Access-Control-Allow-Methods"] == "POST"


def test_no_reply_carries_a_wildcard_cors_header_and_every_one_is_never_sniffed_or_framed():
    with app.test_request_context("/get-counter", headers={"Origin": OTHER}):
        reply = json_reply({"count": 1})
    assert "Access-Control-Allow-Origin" not in reply.headers
    assert reply.headers["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in reply.headers["Content-Security-Policy"]


TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.mark.parametrize("headers, expected", [
    ({"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"}, (TRACE, "00f067aa0ba902b7")),
    ({"X-Cloud-Trace-Context": f"{TRACE.upper()}/123;o=1"}, (TRACE, format(123, "016x"))),
    ({"X-Cloud-Trace-Context": TRACE}, (TRACE, None)),
    ({"traceparent": "00-nothex-00f067aa0ba902b7-01"}, (None, None)),
    ({"X-Cloud-Trace-Context": "../../etc"}, (None, None)),
    ({}, (None, None)),
])
def test_a_requests_trace_comes_from_either_header(headers, expected):
    with app.test_request_context("/", headers=headers):
        assert trace_of(flask.request) == expected


def test_a_log_line_joins_its_trace_and_an_error_carries_its_stack_trace(capsys, monkeypatch):
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p")
    try:
        raise TimeoutError("Firestore did not answer")
    except TimeoutError as error:
        log("ERROR", "visit message", trace=(TRACE, "00f067aa0ba902b7"), exception=error, outcome="failed")
    line = json.loads(capsys.readouterr().out)
    assert line["logging.googleapis.com/trace"] == f"projects/p/traces/{TRACE}"
    assert line["logging.googleapis.com/spanId"] == "00f067aa0ba902b7"
    assert line["@type"].endswith("ReportedErrorEvent") and line["outcome"] == "failed"
    assert line["stack_trace"].startswith("Traceback (most recent call last):")
    assert "TimeoutError: Firestore did not answer" in line["stack_trace"]
    log("INFO", "visit message", outcome="counted")
    plain = json.loads(capsys.readouterr().out)
    assert "@type" not in plain and "logging.googleapis.com/trace" not in plain


def test_lines_logged_by_many_threads_at_once_each_arrive_whole(monkeypatch):
    """An instance serves THREADS requests at once, each logging: every line must reach stdout in one
    write, or two threads' lines can merge into one that Cloud Logging cannot parse. The stand-in
    stdout yields the processor inside each write, so that a line written in parts is interleaved."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    class Stdout:
        def __init__(self):
            self.writes = []

        def write(self, text):
            time.sleep(0.0001)  # another thread runs here
            self.writes.append(text)
            return len(text)

        def flush(self):
            pass

    stdout = Stdout()
    monkeypatch.setattr(common.sys, "stdout", stdout)
    threads, lines = 16, 40
    start = threading.Barrier(threads)

    def logs(n):
        start.wait(timeout=10)
        for i in range(lines):
            log("INFO", "visit message", thread=n, line=i, padding="x" * 2000)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(logs, range(threads)))
    assert all(text.endswith("\n") and text.count("\n") == 1 for text in stdout.writes)  # one call per line
    parsed = [json.loads(line) for line in "".join(stdout.writes).splitlines()]
    assert sorted((entry["thread"], entry["line"]) for entry in parsed) == [
        (n, i) for n in range(threads) for i in range(lines)]

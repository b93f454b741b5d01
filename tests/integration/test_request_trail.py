"""Through the local stack: a visit's two log lines (inc-counter's request, store-inc-counter's
delivery) share the request's trace, a POST another site's page makes is refused and publishes
nothing, and every answer carries its security headers."""
import json
import urllib.error
import urllib.request
import uuid

import pytest
from helpers import call, relay_figures, settle

from visitkit.net import wait_until

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def log_lines(stack, name):
    lines = []
    for path in stack.logs.glob(f"{name}-*.log"):
        lines += [json.loads(line) for line in path.read_text(errors="replace").splitlines() if line.startswith("{")]
    return lines


@pytest.mark.parametrize("header", [
    {"X-Cloud-Trace-Context": f"{TRACE}/1;o=1"},  # Cloud Run's own
    {"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"},  # W3C Trace Context, as OpenTelemetry sends it
])
def test_the_store_line_of_a_visit_joins_the_trace_of_the_request_that_sent_it(stack, header):
    visit_id = str(uuid.uuid4())
    status, _ = call(f"{stack.base_url}/inc-counter?visit_type=jobs&visit_id={visit_id}", "POST", headers=header)
    assert status == 202
    found = wait_until(lambda: [line for line in log_lines(stack, "store-inc-counter")
                                if line.get("visit_id") == visit_id], timeout=30, interval=0.5)
    assert found, "store-inc-counter logged no line for the visit"
    [line] = found
    assert line["outcome"] == "counted"
    assert line["logging.googleapis.com/trace"].endswith(f"/traces/{TRACE}")


def test_a_visit_posted_by_another_sites_page_is_refused_and_publishes_nothing(stack):
    before, acked = stack.totals(), relay_figures(stack)["acked"]
    status, reply = call(f"{stack.base_url}/inc-counter?visit_type=home", "POST",
                         headers={"Origin": "https://elsewhere.example", "Sec-Fetch-Site": "cross-site"})
    assert status == 403 and "another site" in reply["error"]
    # the site's own page, as a browser sends it, is not refused
    assert call(f"{stack.base_url}/inc-counter?visit_type=home", "POST",
                headers={"Origin": stack.base_url, "Sec-Fetch-Site": "same-origin"})[0] == 202
    # one visit stored and one message pushed: had the refused POST published, home would count two
    settle(stack, {**before, "home": before["home"] + 1})
    assert relay_figures(stack)["acked"] - acked == 1


def headers_of(url, method="GET", headers=None):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method, headers=headers or {}),
                                    timeout=30) as reply:
            return reply.status, reply.headers
    except urllib.error.HTTPError as error:
        return error.code, error.headers


def test_the_page_and_the_api_answer_with_their_security_headers(stack):
    status, page = headers_of(f"{stack.base_url}/app?view=home")
    assert status == 200
    assert "frame-ancestors 'none'" in page["Content-Security-Policy"] and page["X-Content-Type-Options"] == "nosniff"
    answers = [(200, "/get-counter?visit_type=home", "GET", {}), (404, "/get-counter?visit_type=nope", "GET", {}),
               (202, "/inc-counter?visit_type=home", "POST", {}),
               (403, "/inc-counter?visit_type=home", "POST", {"Origin": "https://elsewhere.example"})]
    for expected, path, method, headers in answers:
        status, api = headers_of(stack.base_url + path, method, headers)
        assert status == expected, path
        assert api["X-Content-Type-Options"] == "nosniff" and "Access-Control-Allow-Origin" not in api, path

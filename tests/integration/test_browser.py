"""A person's view in a real browser (headless Chromium): a page opened twice shows its count rise,
and a visit whose fate is unknown (5xx, no answer in time) is posted once more with the same id."""
import contextlib
import re
import shutil
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers import function_server

from visitkit.net import wait_until

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="needs Debian's chromium and chromium-driver (make test installs them)")


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)  # a page that never loads fails the test instead of hanging it
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


def displayed_count(browser):
    from selenium.webdriver.common.by import By

    value = browser.find_element(By.ID, "visit-count").get_attribute("data-count")
    return int(value) if value else None


def test_a_page_opened_twice_shows_its_count_rise(stack, browser):
    url = f"{stack.base_url}/app?view=about_offices"
    before = stack.totals()["about_offices"]

    browser.get(url)
    from selenium.webdriver.common.by import By

    assert browser.title == "Offices · Institute for Public Research"
    assert browser.find_element(By.TAG_NAME, "h1").text == "Our offices"
    first = wait_until(lambda: displayed_count(browser), timeout=20, interval=0.2)
    assert first is not None and first >= before
    assert wait_until(lambda: stack.totals()["about_offices"] == before + 1, timeout=30)  # the visit was counted

    browser.get(url)
    # The page shows the total it read after registering its visit, then refreshes it.
    assert wait_until(lambda: (displayed_count(browser) or 0) > first, timeout=20, interval=0.2)
    assert wait_until(lambda: stack.totals()["about_offices"] == before + 2, timeout=30)


@contextlib.contextmanager
def flaky_inc_counter(first_answer):
    """A stand-in for inc-counter that records every POST's query and fails the first one
    (first_answer: a status, or "hang" to answer too late), then answers 202."""
    posts = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the http.server interface
            posts.append(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query))
            if len(posts) == 1 and first_answer == "hang":
                time.sleep(3)  # beyond the page's timeout: the browser has given up on it
            status = first_answer if len(posts) == 1 and first_answer != "hang" else 202
            body = b'{"error": "test"}' if status >= 400 else b"{}"
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Access-Control-Allow-Origin", "*")  # the page is served from another port
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/inc-counter", posts
    finally:
        server.shutdown()


@pytest.mark.parametrize("first_answer", [503, "hang"])
def test_a_visit_with_an_unknown_fate_is_posted_once_more_with_the_same_id(stack, browser, first_answer):
    with flaky_inc_counter(first_answer) as (inc_url, posts), function_server(
            "serve-page", INC_COUNTER_URL=inc_url, GET_COUNTER_URL=f"{stack.base_url}/get-counter",
            VISIT_TIMEOUT_SECONDS="1") as page_url:
        browser.get(f"{page_url}/?view=jobs")
        assert wait_until(lambda: len(posts) >= 2, timeout=20, interval=0.2), posts
        time.sleep(1.5)  # no third attempt
    assert len(posts) == 2
    [first_id], [second_id] = posts[0]["visit_id"], posts[1]["visit_id"]
    assert first_id == second_id and str(uuid.UUID(first_id)) == first_id  # one canonical id, sent twice
    assert posts[0]["visit_type"] == ["jobs"]


def test_a_refused_visit_is_not_posted_again(stack, browser):
    with flaky_inc_counter(429) as (inc_url, posts), function_server(
            "serve-page", INC_COUNTER_URL=inc_url, GET_COUNTER_URL=f"{stack.base_url}/get-counter") as page_url:
        browser.get(f"{page_url}/?view=jobs")
        assert wait_until(lambda: posts, timeout=20, interval=0.2)
        from selenium.webdriver.common.by import By

        assert wait_until(lambda: "HTTP 429" in browser.find_element(By.ID, "visit-status").text, timeout=10)
        time.sleep(2)
    assert len(posts) == 1


def test_the_page_makes_its_id_and_its_timeout_without_randomuuid_or_abortsignal_timeout(stack, browser):
    """Older browsers, and pages served over plain http off localhost, lack one or both."""
    with flaky_inc_counter(202) as (inc_url, posts), function_server(
            "serve-page", INC_COUNTER_URL=inc_url, GET_COUNTER_URL=f"{stack.base_url}/get-counter") as page_url:
        browser.get(f"{page_url}/?view=home")
        assert wait_until(lambda: posts, timeout=20, interval=0.2)
        visit_id, aborted, reason = browser.execute_async_script("""
            const done = arguments[arguments.length - 1];
            crypto.randomUUID = undefined;
            AbortSignal.timeout = undefined;
            const id = newVisitId();
            const signal = timeoutSignal(50);
            signal.addEventListener("abort", () => done([id, signal.aborted, signal.reason.name]));
        """)
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", visit_id)
    assert aborted and reason == "TimeoutError"

"""A person's view in a real browser (headless Chromium): a page opened twice shows its count rise,
a visit whose fate is unknown (5xx, no answer in time) is posted once more with the same id, and the
count is polled one read at a time, each with a timeout, backing off on errors and not while hidden."""
import contextlib
import json
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


@contextlib.contextmanager
def polled_page(browser, answer, **settings):
    """The jobs page, served by a real serve-page with the settings given (COUNTER_REFRESH_SECONDS...)
    and opened in the browser, beside stand-ins for inc-counter (202 at once) and get-counter.
    answer(n) says how the n-th read (from 1) is answered: (status, seconds before answering, headers);
    None seconds: never, until the test ends. Yields each read as [start, end], in monotonic seconds
    as the stand-in saw them (end None while unanswered)."""
    reads, lock, release = [], threading.Lock(), threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server interface
            with lock:
                read = [time.monotonic(), None]
                reads.append(read)
                status, delay, headers = answer(len(reads))
            release.wait(delay)  # None: until the test ends
            self.answer(status, {"count": len(reads)} if status == 200 else {"error": "test"}, headers)
            read[1] = time.monotonic()

        def do_POST(self):  # noqa: N802
            self.answer(202, {}, {})

        def answer(self, status, body, headers):
            body = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Access-Control-Allow-Origin", "*")  # the page is served from another port
            self.send_header("Access-Control-Expose-Headers", "Retry-After")  # so it may read this one
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the page may have given up on this read
                self.wfile.write(body)

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        with function_server("serve-page", INC_COUNTER_URL=f"{base}/inc-counter",
                             GET_COUNTER_URL=f"{base}/get-counter",
                             **{name: str(value) for name, value in settings.items()}) as page_url:
            browser.get(f"{page_url}/?view=jobs")
            yield reads
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def counter_status(browser):
    from selenium.webdriver.common.by import By

    return browser.find_element(By.ID, "counter-status").text


def most_in_flight(reads):
    """The most reads that were under way at one moment."""
    edges = sorted([(start, 1) for start, _ in reads] + [(end, -1) for _, end in reads if end is not None],
                   key=lambda edge: (edge[0], edge[1]))  # an end before a start at the same instant
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def gaps(reads):
    """Seconds from each read's end to the next read's start: the page's wait between them."""
    return [round(after[0] - before[1], 3) for before, after in zip(reads, reads[1:])]


def test_slow_answers_never_overlap(browser):
    """Every read takes three refresh intervals: a timer that fires regardless (setInterval) would have
    three under way at once; chained timers have one, and wait the interval after each."""
    with polled_page(browser, lambda n: (200, 0.6, {}), COUNTER_REFRESH_SECONDS=0.2) as reads:
        assert wait_until(lambda: len(reads) >= 5, timeout=20, interval=0.2), reads
        time.sleep(0.7)  # the fifth read ends
        reads = [read for read in reads if read[1] is not None]
    assert most_in_flight(reads) == 1, reads
    assert all(gap >= 0.15 for gap in gaps(reads)), gaps(reads)
    assert displayed_count(browser) >= 4


def test_a_read_that_never_ends_is_abandoned_after_its_timeout(browser):
    """The first read hangs: the page gives up on it after COUNTER_TIMEOUT_SECONDS, says so, and reads
    again (after an error's longer wait) long before the hung read could have ended."""
    with polled_page(browser, lambda n: (200, None if n == 1 else 0, {}), COUNTER_REFRESH_SECONDS=0.2,
                     COUNTER_TIMEOUT_SECONDS=0.5) as reads:
        assert wait_until(lambda: "no answer in time" in counter_status(browser), timeout=20, interval=0.05)
        assert wait_until(lambda: len(reads) >= 2, timeout=5, interval=0.05), reads
        assert reads[0][1] is None  # still hung on the stand-in's side
        assert 0.5 + 0.3 <= reads[1][0] - reads[0][0] < 2.5  # timeout, then at least 3/4 of twice 0.2 s
        assert wait_until(lambda: displayed_count(browser) == 2, timeout=5, interval=0.05)
        assert counter_status(browser) == ""  # a success clears the problem


def test_errors_make_the_page_back_off_and_a_success_restores_the_interval(browser):
    """Four 503s in a row: the wait doubles from the 0.25 s interval (with up to a quarter less as
    jitter) up to the 1.6 s ceiling; after a success it is 0.25 s again."""
    with polled_page(browser, lambda n: (503 if n <= 4 else 200, 0, {}), COUNTER_REFRESH_SECONDS=0.25,
                     COUNTER_BACKOFF_MAX_SECONDS=1.6) as reads:
        assert wait_until(lambda: len(reads) >= 8, timeout=30, interval=0.1), reads
        waits = gaps(reads[:8])
    slack = 0.3  # a busy machine's late timers, and the stand-in's own time
    for wait, (low, high) in zip(waits, [(0.375, 0.5), (0.75, 1.0), (1.2, 1.6), (1.2, 1.6), (0.25, 0.25),
                                         (0.25, 0.25), (0.25, 0.25)]):
        assert low - 0.02 <= wait <= high + slack, waits
    assert waits[0] < waits[1] < waits[2]
    assert displayed_count(browser) >= 5


def test_a_retry_after_is_honoured(browser):
    with polled_page(browser, lambda n: (429, 0, {"Retry-After": "1"}) if n == 1 else (200, 0, {}),
                     COUNTER_REFRESH_SECONDS=0.2) as reads:
        assert wait_until(lambda: len(reads) >= 3, timeout=20, interval=0.1), reads
        waits = gaps(reads[:3])
    assert waits[0] >= 0.98 and waits[1] < 0.2 + 0.3, waits


def hide(browser):
    """Minimises the window: Chromium itself (headless too) then makes the page hidden and fires its
    visibilitychange, as when a person switches tabs, rather than a script faking document.hidden."""
    browser.minimize_window()
    assert wait_until(lambda: browser.execute_script("return document.visibilityState") == "hidden", timeout=5)


def show(browser):
    browser.maximize_window()
    assert wait_until(lambda: browser.execute_script("return document.visibilityState") == "visible", timeout=5)


def test_a_hidden_page_reads_nothing_and_reads_at_once_when_shown(browser):
    with polled_page(browser, lambda n: (200, 0, {}), COUNTER_REFRESH_SECONDS=1) as reads:
        assert wait_until(lambda: len(reads) >= 2, timeout=20, interval=0.1), reads
        hide(browser)
        time.sleep(0.3)  # a read under way as the page was hidden ends
        seen = len(reads)
        time.sleep(3)  # three intervals
        assert len(reads) == seen
        shown = time.monotonic()
        show(browser)
        assert wait_until(lambda: len(reads) > seen, timeout=5, interval=0.05)
        assert reads[seen][0] - shown < 0.5  # at once, not after an interval
        assert wait_until(lambda: displayed_count(browser) == seen + 1, timeout=5, interval=0.05)
        assert wait_until(lambda: len(reads) > seen + 1, timeout=5, interval=0.05)  # and on as before

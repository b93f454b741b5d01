"""A person's view in a real browser (headless Chromium): a page opened twice shows its count rise;
a visit refused for now (429) or whose fate is unknown (5xx, no answer in time) is posted again with
the same id, backing off and honouring Retry-After, and is counted once, up to a number of tries; the
count is polled one read at a time, each with a timeout, no faster than get-counter's cache lets it
change, from the browser's cache while get-counter says it is fresh, backing off on errors, and not
while hidden or left alone."""
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
from conftest import running_stack
from helpers import call, closed_address, function_server, platform_figures, settle

from visitkit.net import wait_until
from visitkit.paths import ITERATIONS_DIR, SETTINGS_FILE

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


def send(handler, status, body, headers=None):
    """A stand-in's JSON answer, readable by the page served from another port."""
    body = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Access-Control-Allow-Origin", "*")  # the page is served from another port
    handler.send_header("Access-Control-Expose-Headers", "Retry-After")  # so it may read this one
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    with contextlib.suppress(OSError):  # the page may have given up on this request
        handler.wfile.write(body)


@contextlib.contextmanager
def stand_in(do_post):
    """An HTTP server whose POSTs do_post(handler) answers: yields its inc-counter URL."""
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the http.server interface
            do_post(self)

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/inc-counter"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def flaky_inc_counter(*answers):
    """A stand-in for inc-counter that records every POST's query (posts) and when it came (times),
    and answers the n-th with answers[n-1] (a status, or "hang" to answer too late), 202 past them."""
    posts, times = [], []

    def answer(handler):
        posts.append(urllib.parse.parse_qs(urllib.parse.urlsplit(handler.path).query))
        times.append(time.monotonic())
        status = answers[len(posts) - 1] if len(posts) <= len(answers) else 202
        if status == "hang":
            time.sleep(3)  # beyond the page's timeout: the browser has given up on it
            status = 202
        send(handler, status, {"error": "test"} if status >= 400 else {})

    with stand_in(answer) as url:
        yield url, posts, times


@pytest.mark.parametrize("first_answer", [503, "hang"])
def test_a_visit_with_an_unknown_fate_is_posted_once_more_with_the_same_id(stack, browser, first_answer):
    with flaky_inc_counter(first_answer) as (inc_url, posts, _), function_server(
            "serve-page", INC_COUNTER_URL=inc_url, GET_COUNTER_URL=f"{stack.base_url}/get-counter",
            VISIT_TIMEOUT_SECONDS="1") as page_url:
        browser.get(f"{page_url}/?view=jobs")
        assert wait_until(lambda: len(posts) >= 2, timeout=20, interval=0.2), posts
        time.sleep(1.5)  # no third attempt
    assert len(posts) == 2
    [first_id], [second_id] = posts[0]["visit_id"], posts[1]["visit_id"]
    assert first_id == second_id and str(uuid.UUID(first_id)) == first_id  # one canonical id, sent twice
    assert posts[0]["visit_type"] == ["jobs"]


def visit_status(browser):
    from selenium.webdriver.common.by import By

    return browser.find_element(By.ID, "visit-status").text


def test_a_visit_refused_for_good_is_not_posted_again(stack, browser):
    """A 4xx other than 429 recorded nothing and would not by retrying: one post, and the page says so."""
    with flaky_inc_counter(400) as (inc_url, posts, _), function_server(
            "serve-page", INC_COUNTER_URL=inc_url, GET_COUNTER_URL=f"{stack.base_url}/get-counter") as page_url:
        browser.get(f"{page_url}/?view=jobs")
        assert wait_until(lambda: posts, timeout=20, interval=0.2)
        assert wait_until(lambda: "this visit was not counted: HTTP 400" in visit_status(browser), timeout=10)
        time.sleep(2)
    assert len(posts) == 1


@contextlib.contextmanager
def in_front_of_inc_counter(stack, first_answer):
    """A stand-in in front of the stack's real inc-counter, which answers the page's first POST itself:
    429 (Retry-After: 2) without passing it on, as the platform does when every instance stays busy;
    or 503 (Retry-After: 1) after passing it on, as inc-counter does when a publish that landed was not
    confirmed. It passes the later ones on and answers what inc-counter answered. Yields (its inc-counter
    URL, [(when, query, the status the page got)])."""
    posts = []

    def answer(handler):
        at, query = time.monotonic(), urllib.parse.parse_qs(urllib.parse.urlsplit(handler.path).query)
        status, body = (first_answer, {"error": "test"}) if not posts and first_answer == 429 else \
            call(f"{stack.base_url}{handler.path}", "POST")
        if not posts and first_answer == 503:
            status, body = 503, {"error": "test", "visit_id": query["visit_id"][0]}  # published all the same
        posts.append((at, query, status))
        send(handler, status, body, {"Retry-After": "2" if first_answer == 429 else "1"} if status >= 400 else {})

    with stand_in(answer) as url:
        yield url, posts


@pytest.mark.parametrize("first_answer", [429, 503])
def test_a_visit_refused_for_now_is_posted_again_after_the_retry_after_and_counted_once(stack, browser,
                                                                                        first_answer):
    before = stack.totals()
    with in_front_of_inc_counter(stack, first_answer) as (inc_url, posts), function_server(
            "serve-page", INC_COUNTER_URL=inc_url, GET_COUNTER_URL=f"{stack.base_url}/get-counter") as page_url:
        browser.get(f"{page_url}/?view=about_legals")
        assert wait_until(lambda: len(posts) >= 2, timeout=20, interval=0.2), posts
        time.sleep(2)  # no third post
    assert [status for *_, status in posts] == [first_answer, 202]
    (first_at, first, _), (second_at, second, _) = posts
    assert first["visit_id"] == second["visit_id"]
    retry_after = 2 if first_answer == 429 else 1
    assert second_at - first_at >= retry_after - 0.05  # at least what Retry-After asked (the backoff: ~1 s)
    assert visit_status(browser) == ""
    settle(stack, {**before, "about_legals": before["about_legals"] + 1})  # counted, and once


def test_a_visit_refused_every_time_is_given_up_after_its_tries_and_the_page_says_so(stack, browser):
    """VISIT_TRIES posts, waiting about 1 s then 2 s (a quarter either way as jitter) between them."""
    with flaky_inc_counter(*[429] * 10) as (inc_url, posts, times), function_server(
            "serve-page", INC_COUNTER_URL=inc_url, GET_COUNTER_URL=f"{stack.base_url}/get-counter",
            VISIT_TRIES="3") as page_url:
        browser.get(f"{page_url}/?view=jobs")
        assert wait_until(lambda: "this visit was not counted: HTTP 429" in visit_status(browser), timeout=20,
                          interval=0.1)
        time.sleep(3)  # no fourth post
    assert len(posts) == 3 and len({query["visit_id"][0] for query in posts}) == 1
    waits = [round(after - before, 2) for before, after in zip(times, times[1:])]
    slack = 0.3  # a busy machine's late timers
    assert 0.75 - 0.05 <= waits[0] <= 1.25 + slack and 1.5 - 0.05 <= waits[1] <= 2.5 + slack, waits


def test_the_page_makes_its_id_and_its_timeout_without_randomuuid_or_abortsignal_timeout(stack, browser):
    """Older browsers, and pages served over plain http off localhost, lack one or both."""
    with flaky_inc_counter(202) as (inc_url, posts, _), function_server(
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
            send(self, status, {"count": len(reads)} if status == 200 else {"error": "test"}, headers)
            read[1] = time.monotonic()

        def do_POST(self):  # noqa: N802
            send(self, 202, {})

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
        # timeout, then at least 3/4 of twice 0.2 s; the times are the reads' arrivals here, so the first one's own
        # way from the browser (late on a busy machine: 3 ms in one CI run) may shorten the gap a little
        assert 0.5 + 0.3 - 0.05 <= reads[1][0] - reads[0][0] < 2.5
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


def page_reads(browser):
    """The page's reads of the count as the browser itself saw them, the browser's cache included."""
    return browser.execute_script(
        "return performance.getEntriesByType('resource').filter((e) => e.name.includes('/get-counter')).length")


def test_the_browsers_cache_answers_the_reads_while_get_counter_says_the_count_is_fresh(browser):
    """get-counter's Cache-Control: max-age=N lets the browser answer the page's reads itself for N
    seconds: the page reads every 0.2 s, the stand-in sees one read until the 2 s are over."""
    fresh = {"Cache-Control": "public, max-age=2"}
    with polled_page(browser, lambda n: (200, 0, fresh), COUNTER_REFRESH_SECONDS=0.2) as reads:
        assert wait_until(lambda: page_reads(browser) >= 5, timeout=20, interval=0.1)
        assert len(reads) == 1 and displayed_count(browser) == 1
        assert wait_until(lambda: len(reads) == 2, timeout=5, interval=0.05)  # expired: read again
        assert wait_until(lambda: displayed_count(browser) == 2, timeout=5, interval=0.05)


def touch(browser):
    """A person's touch, as WebDriver sends it: a key pressed on the page."""
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).send_keys("a").perform()


def test_a_visible_page_left_alone_stops_reading_says_so_and_reads_again_at_a_touch(browser):
    idle = 2
    with polled_page(browser, lambda n: (200, 0, {}), COUNTER_REFRESH_SECONDS=0.2, PAGE_IDLE_SECONDS=idle) as reads:
        opened = time.monotonic()
        assert wait_until(lambda: "counter paused" in counter_status(browser), timeout=20, interval=0.05)
        paused = time.monotonic()
        assert idle - 0.5 <= paused - opened < idle + 2, paused - opened  # after the idle setting, not before
        assert counter_status(browser) == (
            "(counter paused: no activity for 2 seconds; it updates again when you come back)")
        assert len(reads) >= 5  # it did read until then
        time.sleep(0.3)  # a read under way ends
        seen = len(reads)
        time.sleep(2)  # ten intervals
        assert len(reads) == seen and browser.execute_script("return document.visibilityState") == "visible"
        touched = time.monotonic()
        touch(browser)
        assert wait_until(lambda: len(reads) > seen, timeout=5, interval=0.05)
        assert reads[seen][0] - touched < 0.5  # at once, not after an interval
        assert wait_until(lambda: counter_status(browser) == "", timeout=5, interval=0.05)
        assert wait_until(lambda: len(reads) > seen + 3, timeout=5, interval=0.05)  # and on as before
        assert wait_until(lambda: "counter paused" in counter_status(browser), timeout=idle + 3, interval=0.05)
        assert time.monotonic() - touched >= idle - 0.1  # idle counted from the touch


def test_a_page_whose_idle_setting_is_0_never_stops_reading(browser):
    with polled_page(browser, lambda n: (200, 0, {}), COUNTER_REFRESH_SECONDS=0.2, PAGE_IDLE_SECONDS=0) as reads:
        time.sleep(3)
        assert len(reads) >= 8 and "paused" not in counter_status(browser)


# ---- with get-counter's cache: iteration 1's settings (a 10 s cache) -----------------------------
ITERATION_1 = ITERATIONS_DIR / "iteration-1" / SETTINGS_FILE
LEFT_ALONE_S = 65
MOST_READS = 8  # one read at least 10 s apart (the cache's lifetime): 7 in 65 s, plus one of slack


@pytest.fixture(scope="module")
def cached_stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("cached"), ITERATION_1) as local:
        yield local


def test_get_counter_tells_the_browser_how_long_its_total_stays_fresh(cached_stack):
    """Each instance's first read of a page is fresh for the whole 10 s: max-age=9 (whole seconds,
    rounded down), less as the entry ages."""
    def cache_control():
        request = urllib.request.Request(f"{cached_stack.base_url}/get-counter?visit_type=about")
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.headers["Cache-Control"]

    answers = [cache_control() for _ in range(4)]  # each of the two instances at least once
    ages = [int(re.fullmatch(r"public, max-age=(\d)", answer)[1]) for answer in answers]
    assert ages[0] == 9 and all(1 <= age <= 9 for age in ages), answers
    time.sleep(3)
    assert all(int(re.fullmatch(r"public, max-age=(\d)", cache_control())[1]) <= 6 for _ in range(4))


@pytest.mark.slow
def test_a_visible_page_left_alone_reads_no_faster_than_get_counters_cache(cached_stack, browser):
    """The page's refresh setting is 5 s, the cache's 10 s: a read every 10-12 s, not every 5. Counted
    where get-counter gets them (HAProxy) and where the page makes them (the browser's own list, its
    cache's answers included: max-age alone would hide reads every 5 s from get-counter)."""
    def reads():
        return platform_figures(cached_stack)["get-counter"]["requests"]

    before = reads()
    browser.get(f"{cached_stack.base_url}/app?view=jobs")
    opened = time.monotonic()
    assert wait_until(lambda: displayed_count(browser) is not None, timeout=20, interval=0.2)
    time.sleep(LEFT_ALONE_S - (time.monotonic() - opened))
    made, asked = reads() - before, page_reads(browser)
    assert browser.execute_script("return document.visibilityState") == "visible"
    assert 5 <= made <= MOST_READS, made  # and it did keep reading
    assert 5 <= asked <= MOST_READS, asked


# ---- a page served with its count (serve-page's PAGE_EMBEDS_COUNT=1) ------------------------------
@contextlib.contextmanager
def counted_page(browser, firestore, post_delay_s=1.5, answer=lambda n: 1000 + n, **settings):
    """The jobs page, served by a real serve-page that embeds its count read from `firestore` (host:port),
    opened in the browser beside stand-ins for inc-counter (202 after post_delay_s) and get-counter (its
    n-th read answers answer(n)). Yields (posts, reads): the monotonic times each came."""
    posts, reads = [], []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server interface
            reads.append(time.monotonic())
            send(self, 200, {"count": answer(len(reads))})

        def do_POST(self):  # noqa: N802
            posts.append(time.monotonic())
            time.sleep(post_delay_s)
            send(self, 202, {})

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        with function_server("serve-page", PAGE_EMBEDS_COUNT="1", FIRESTORE_EMULATOR_HOST=firestore,
                             INC_COUNTER_URL=f"{base}/inc-counter", GET_COUNTER_URL=f"{base}/get-counter",
                             **{name: str(value) for name, value in settings.items()}) as page_url:
            browser.get(f"{page_url}/?view=jobs")
            yield posts, reads
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_served_with_its_count_shows_it_then_one_more_for_its_visit_and_reads_only_later(stack, browser):
    """The count at once (no read), + 1 once the visit's 202 came, the first read one refresh interval later."""
    stored = stack.totals()["jobs"]
    with counted_page(browser, stack.state()["firestore"], answer=lambda n: stored + 1000 + n,
                      COUNTER_REFRESH_SECONDS=3) as (posts, reads):
        assert displayed_count(browser) == stored  # as the page loaded, before its visit was answered
        assert wait_until(lambda: displayed_count(browser) == stored + 1, timeout=10, interval=0.05)
        acknowledged = time.monotonic()
        assert reads == [] and len(posts) == 1
        assert wait_until(lambda: displayed_count(browser) == stored + 1001, timeout=10, interval=0.05)
        assert reads[0] - acknowledged >= 3 - 0.3  # a refresh interval (and its jitter) after the 202


def test_a_page_whose_count_could_not_be_read_is_served_and_reads_it_as_by_default(browser):
    """Firestore unreachable: the page is served all the same, without a count, and reads it at once."""
    with closed_address() as nowhere, counted_page(browser, nowhere, post_delay_s=0, CALL_DEADLINE_SECONDS=2,
                                                   COUNTER_REFRESH_SECONDS=30) as (posts, reads):
        assert browser.title == "Jobs · Institute for Public Research"
        assert wait_until(lambda: displayed_count(browser) == 1001, timeout=10, interval=0.05)
        assert len(reads) == 1 and reads[0] >= posts[0]  # its first read, once its visit was registered


def test_a_read_behind_the_count_shown_does_not_take_the_visit_back(stack, browser):
    """The store has not counted this visit yet (its batch is still open): the first read answers the total
    without it, and the page keeps showing the visit counted, since a total only grows."""
    stored = stack.totals()["jobs"]
    with counted_page(browser, stack.state()["firestore"], post_delay_s=0, answer=lambda n: stored,
                      COUNTER_REFRESH_SECONDS=1) as (_posts, reads):
        assert wait_until(lambda: displayed_count(browser) == stored + 1, timeout=10, interval=0.05)
        assert wait_until(lambda: len(reads) >= 2, timeout=10, interval=0.05)
        assert displayed_count(browser) == stored + 1

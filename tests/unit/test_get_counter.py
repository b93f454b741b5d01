"""get-counter's in-process cache (totals.py, which serve-page shares; pure logic: Firestore's read
is replaced by a counter): a fresh total and how long it stays fresh; an expired one answered at once
while one background read refreshes it; what it answers when reads fail (the last known total, marked
stale past a bound, or a 503), and the failure memory that backs off from 2 s to 30 s."""
import collections
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import flask
import pytest
from google.api_core import exceptions as google_errors

import get_counter
import totals

app = flask.Flask(__name__)
TTL = 10


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch):
    monkeypatch.setattr(totals, "_cache", {})
    monkeypatch.setattr(totals, "_failed", {})
    # and the locks: a test that fails with a background read never run leaves its page's lock held
    monkeypatch.setattr(totals, "_locks", collections.defaultdict(threading.Lock))


@pytest.fixture
def cache(monkeypatch):
    """A cache of TTL seconds, marked stale past TTL + the read deadline (as deployed)."""
    monkeypatch.setattr(totals, "CACHE_TTL_SECONDS", TTL)
    monkeypatch.setattr(totals, "STALE_AFTER_SECONDS", TTL + totals.READ_TIMEOUT_SECONDS)


@pytest.fixture
def reads(monkeypatch):
    """Each read returns how many reads there were, or raises what is put in `reads.failing`."""
    class Reads(list):
        failing = None

    calls = Reads()

    def read_total(page):
        calls.append(page)
        if calls.failing:
            raise calls.failing
        return len(calls)

    monkeypatch.setattr(totals, "read_total", read_total)
    return calls


@pytest.fixture
def background(monkeypatch):
    """The background reads, kept until the test runs them: background.run()."""
    class Background(list):
        def run(self):
            while self:
                self.pop(0)()

    started = Background()
    monkeypatch.setattr(totals, "in_background", started.append)
    return started


def test_no_cache_reads_every_time(reads, monkeypatch):
    monkeypatch.setattr(totals, "CACHE_TTL_SECONDS", 0)
    assert [totals.cached_total("home") for _ in range(3)] == [(1, None, 0), (2, None, 0), (3, None, 0)]


def test_a_fresh_total_says_how_long_it_stays_fresh(reads, cache):
    clock = Clock()
    assert totals.cached_total("home", clock) == (1, None, TTL)
    clock.now += 3.5
    assert totals.cached_total("home", clock) == (1, None, TTL - 3.5)
    assert reads == ["home"]


def test_an_expired_total_is_answered_at_once_while_one_background_read_refreshes_it(reads, cache, background):
    clock = Clock()
    assert totals.cached_total("home", clock) == (1, None, TTL)
    clock.now += TTL
    # Expired: the old total at once, fresh for no time, not marked stale; one read started, not one each.
    assert [totals.cached_total("home", clock) for _ in range(5)] == [(1, None, 0)] * 5
    assert len(background) == 1 and reads == ["home"]
    background.run()
    assert reads == ["home", "home"]
    assert totals.cached_total("home", clock) == (2, None, TTL)  # fresh from the read's end
    assert background == []


def test_each_page_has_its_own_entry(reads, cache):
    clock = Clock()
    assert totals.cached_total("home", clock) == (1, None, TTL)
    assert totals.cached_total("jobs", clock) == (2, None, TTL)
    assert totals.cached_total("home", clock) == (1, None, TTL)


def test_a_total_nobody_asked_for_past_the_bound_is_read_again_before_it_is_answered(reads, cache, background):
    """An idle page's first reader is not shown a count minutes old: past TTL + the read deadline, a
    total is answered without a read only while reads fail."""
    clock = Clock()
    assert totals.cached_total("home", clock) == (1, None, TTL)
    clock.now += totals.STALE_AFTER_SECONDS
    assert totals.cached_total("home", clock) == (2, None, TTL)
    assert background == []


def test_concurrent_misses_read_firestore_once_per_page(monkeypatch, cache):
    """Many requests for a page never read at once (a thread each, as in an instance of concurrency
    > 1) wait for one read instead of each reading Firestore."""
    reads, guard = [], threading.Lock()

    def slow_read(page):
        with guard:
            reads.append(page)
            value = len(reads)
        time.sleep(0.05)  # a Firestore round trip: long enough for every thread to miss meanwhile
        return value

    monkeypatch.setattr(totals, "read_total", slow_read)
    pages = ["home"] * 12 + ["jobs"] * 12
    answers = concurrently(len(pages), lambda n: (pages[n], totals.cached_total(pages[n])))
    assert sorted(reads) == ["home", "jobs"]  # one read per page
    for page in ("home", "jobs"):  # and every caller got that read's value
        assert len({answer[1][0] for _, answer in answers if answer[0] == page}) == 1


def test_concurrent_requests_for_an_expired_page_answer_at_once_during_its_one_slow_read(monkeypatch, cache):
    """With real threads: Firestore takes 0.5 s; the requests arriving meanwhile wait for none of it."""
    totals._cache["home"] = (41, time.monotonic() - TTL)  # just expired
    reads, done = [], threading.Event()

    def slow_read(page):
        reads.append(page)
        time.sleep(0.5)
        done.set()
        return 42

    monkeypatch.setattr(totals, "read_total", slow_read)
    answers = concurrently(12, lambda _: totals.cached_total("home"))
    assert max(took for took, _ in answers) < 0.25, answers
    assert {answer for _, answer in answers} == {(41, None, 0)}
    assert done.wait(timeout=5) and reads == ["home"]
    assert wait_for(lambda: totals.cached_total("home")[0] == 42)


# ---- when Firestore fails -------------------------------------------------------------------------
def test_a_failure_without_a_known_total_is_unavailable_and_remembered_longer_each_time(reads, cache):
    clock = Clock()
    reads.failing = google_errors.DeadlineExceeded("the read's deadline passed")
    for memory in (2, 4, 8, 16, 30, 30):  # doubling from 2 s up to 30 s while reads keep failing
        with pytest.raises(totals.Unavailable, match="deadline passed") as failed:
            totals.cached_total("home", clock)
        assert failed.value.retry_after == memory
        clock.now += memory - 0.5  # remembered: no read, the same answer, and when to come back
        with pytest.raises(totals.Unavailable, match="deadline passed") as failed:
            totals.cached_total("home", clock)
        assert failed.value.retry_after == 0.5
        clock.now += 0.5  # forgotten: Firestore is read again
    assert len(reads) == 6
    reads.failing = None
    assert totals.cached_total("home", clock) == (7, None, TTL)  # back
    clock.now += TTL + totals.STALE_AFTER_SECONDS  # long unread: read again, and it fails
    reads.failing = google_errors.ServiceUnavailable("down")
    assert totals.cached_total("home", clock) == (7, "503 down", 0)
    assert totals._failed["home"][2] == 2  # a success reset the memory to 2 s


def test_while_reads_fail_the_last_total_is_answered_at_once_marked_stale_past_the_bound(reads, cache, background):
    """Firestore fails from the moment the total expires: every request is answered at once with the
    last good total, unmarked until it is older than TTL + the read deadline, stale after; one read
    is tried each time the failure memory ends, which doubles; the first success ends it all."""
    clock = Clock()
    assert totals.cached_total("home", clock) == (1, None, TTL)
    reads.failing = google_errors.ServiceUnavailable("connection refused")
    clock.now += TTL
    assert totals.cached_total("home", clock) == (1, None, 0)
    background.run()  # the refresh fails: remembered 2 s
    assert reads == ["home", "home"]
    clock.now += 1.9
    assert totals.cached_total("home", clock) == (1, None, 0)  # age 11.9 s: within the bound
    assert background == []  # remembered: no read
    clock.now = 100 + totals.STALE_AFTER_SECONDS  # past the bound: stale, and a read is tried
    assert totals.cached_total("home", clock) == (1, "503 connection refused", 0)
    assert len(background) == 1
    background.run()  # fails again: remembered 4 s
    clock.now += 3.9
    assert totals.cached_total("home", clock) == (1, "503 connection refused", 0)
    assert background == []
    clock.now += 0.1
    assert totals.cached_total("home", clock) == (1, "503 connection refused", 0)
    reads.failing = None
    background.run()  # Firestore is back
    assert reads == ["home"] * 4
    assert totals.cached_total("home", clock) == (4, None, TTL)
    assert "home" not in totals._failed


def test_no_cache_remembers_no_failure(reads, monkeypatch):
    """Without a cache there is no lock to queue on: each request waits for its own read only."""
    monkeypatch.setattr(totals, "CACHE_TTL_SECONDS", 0)
    reads.failing = google_errors.ServiceUnavailable("down")
    for _ in range(2):
        with pytest.raises(totals.Unavailable):
            totals.cached_total("home")
    assert reads == ["home", "home"]


def wait_for(condition, timeout=5):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def concurrently(count, call):
    """[(seconds taken, what call(n) returned or raised)] of `count` threads n calling at once."""
    start = threading.Barrier(count)

    def one(n):
        start.wait(timeout=10)
        began = time.monotonic()
        try:
            answer = call(n)
        except Exception as error:  # noqa: BLE001  the answer under test
            answer = error
        return time.monotonic() - began, answer

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


@pytest.mark.parametrize("known", [False, True], ids=["no total known", "a total known"])
def test_requests_waiting_for_a_failed_read_answer_with_it_not_one_read_each(monkeypatch, cache, known):
    """The pile-up: Firestore hangs, each read ends at its deadline. The requests queued on the
    page's lock (nothing usable cached) answer as soon as the one read fails (not the k-th after k
    deadlines)."""
    deadline, reads = 0.3, []
    if known:
        totals._cache["home"] = (41, 0.0)  # read once, long ago: read again before answering

    def hanging_read(page):
        reads.append(page)
        time.sleep(deadline)
        raise google_errors.DeadlineExceeded("hung")

    monkeypatch.setattr(totals, "read_total", hanging_read)
    answers = concurrently(12, lambda _: totals.cached_total("home"))
    assert reads == ["home"]
    assert max(took for took, _ in answers) < 2 * deadline  # about one deadline each, not up to 12
    for _, answer in answers:
        if known:
            assert answer == (41, "504 hung", 0)
        else:
            assert isinstance(answer, totals.Unavailable) and str(answer) == "504 hung"


def test_waiting_for_the_lock_is_bounded_by_the_deadline(monkeypatch, cache):
    """Should a read outlast its deadline, the requests waiting for it still answer within theirs."""
    monkeypatch.setattr(totals, "READ_TIMEOUT_SECONDS", 0.2)
    totals._cache["home"] = (41, 0.0)
    release, entered = threading.Event(), threading.Event()

    def stuck_read(page):
        entered.set()
        release.wait(timeout=10)
        return 42

    monkeypatch.setattr(totals, "read_total", stuck_read)
    with ThreadPoolExecutor(max_workers=1) as pool:
        holder = pool.submit(totals.cached_total, "home")
        assert entered.wait(timeout=5)
        try:
            answers = concurrently(6, lambda _: totals.cached_total("home"))
        finally:
            release.set()
        assert holder.result(timeout=5)[:2] == (42, None)
    assert all(0.15 < took < 1.0 for took, _ in answers), answers
    assert all(answer[0] == 41 and "still under way" in answer[1] for _, answer in answers)
    assert totals.cached_total("home")[:2] == (42, None)


# ---- the replies ----------------------------------------------------------------------------------
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE}-00f067aa0ba902b7-01"


def get(monkeypatch, answer):
    def cached_total(page):
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(totals, "cached_total", cached_total)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "demo-visit-counter")
    with app.test_request_context("/get-counter?visit_type=home", headers={"traceparent": TRACEPARENT}):
        reply = flask.make_response(get_counter.get_counter(flask.request))
    return reply.status_code, json.loads(reply.get_data()), reply.headers


@pytest.mark.parametrize("fresh_for, cache_control", [
    (9.99, "public, max-age=9"),  # rounded down: the browser never keeps it longer than the instance
    (1.0, "public, max-age=1"),
    (0.99, "no-store"),  # under a second left, or expired (its refresh under way)
    (0, "no-store"),  # and no cache configured (CACHE_TTL_SECONDS=0)
])
def test_a_fresh_total_may_be_kept_by_the_browser_while_it_stays_fresh(monkeypatch, fresh_for, cache_control):
    status, body, headers = get(monkeypatch, (7, None, fresh_for))
    assert (status, body) == (200, {"visit_type": "home", "count": 7})
    assert headers["Cache-Control"] == cache_control
    assert get_counter.STALE_HEADER not in headers


def test_a_stale_total_is_marked_in_the_body_and_a_header_and_never_kept(monkeypatch, capsys):
    status, body, headers = get(monkeypatch, (7, "504 Deadline Exceeded", 0))
    assert (status, body) == (200, {"visit_type": "home", "count": 7, "stale": True})
    assert headers[get_counter.STALE_HEADER] == "true"
    assert headers["Cache-Control"] == "no-store"
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert line["logging.googleapis.com/trace"] == f"projects/demo-visit-counter/traces/{TRACE}"
    assert line["severity"] == "WARNING" and line["error"] == "504 Deadline Exceeded" and line["answered"] == "stale"


@pytest.mark.parametrize("retry_after, header", [(3.2, "4"), (30, "30"), (0.01, "1")])
def test_no_total_is_a_503_that_says_when_to_come_back(monkeypatch, capsys, retry_after, header):
    status, body, headers = get(monkeypatch, totals.Unavailable("504 Deadline Exceeded", retry_after))
    assert status == 503 and "unavailable" in body["error"]
    assert headers["Retry-After"] == header  # whole seconds, rounded up: the failure memory left
    assert headers["Cache-Control"] == "no-store"
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert line["logging.googleapis.com/trace"] == f"projects/demo-visit-counter/traces/{TRACE}"
    assert line["severity"] == "ERROR" and line["error"] == "504 Deadline Exceeded"
    assert "Unavailable: 504 Deadline Exceeded" in line["stack_trace"]  # for Error Reporting

"""get-counter's in-process cache (pure logic: Firestore's read is replaced by a counter), and what
it answers when the read fails: the last known total marked stale, or a 503; a failure remembered
briefly, so that requests waiting for a failed read do not each read again."""
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import flask
import pytest
from google.api_core import exceptions as google_errors

import get_counter

app = flask.Flask(__name__)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch):
    monkeypatch.setattr(get_counter, "_cache", {})
    monkeypatch.setattr(get_counter, "_failed", {})


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

    monkeypatch.setattr(get_counter, "read_total", read_total)
    return calls


def test_no_cache_reads_every_time(reads, monkeypatch):
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 0)
    assert [get_counter.cached_total("home") for _ in range(3)] == [(1, None), (2, None), (3, None)]


def test_cache_serves_until_the_ttl_ends(reads, monkeypatch):
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 10)
    clock = Clock()
    assert get_counter.cached_total("home", clock) == (1, None)
    clock.now += 9.9
    assert get_counter.cached_total("home", clock) == (1, None)
    clock.now += 0.2
    assert get_counter.cached_total("home", clock) == (2, None)
    assert reads == ["home", "home"]


def test_each_page_has_its_own_entry(reads, monkeypatch):
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 10)
    clock = Clock()
    assert get_counter.cached_total("home", clock) == (1, None)
    assert get_counter.cached_total("jobs", clock) == (2, None)
    assert get_counter.cached_total("home", clock) == (1, None)


def test_concurrent_misses_read_firestore_once_per_page_per_expiry(monkeypatch):
    """Many requests for an expired page at once (a thread each, as in an instance of concurrency
    > 1) wait for one read instead of each reading Firestore."""
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 10)
    clock, reads, guard = Clock(), [], threading.Lock()

    def slow_read(page):
        with guard:
            reads.append(page)
            value = len(reads)
        time.sleep(0.05)  # a Firestore round trip: long enough for every thread to miss meanwhile
        return value

    monkeypatch.setattr(get_counter, "read_total", slow_read)
    pages = ["home"] * 12 + ["jobs"] * 12

    def burst():
        start = threading.Barrier(len(pages))

        def one(page):
            start.wait(timeout=10)
            return page, get_counter.cached_total(page, clock)

        with ThreadPoolExecutor(max_workers=len(pages)) as pool:
            return list(pool.map(one, pages))

    answers = burst()
    assert sorted(reads) == ["home", "jobs"]  # one read per page
    for page in ("home", "jobs"):  # and every caller got that read's value
        assert len({value for p, value in answers if p == page}) == 1
    clock.now += 10.1  # expired: the next burst reads each page once more
    burst()
    assert sorted(reads) == ["home", "home", "jobs", "jobs"]


# ---- when Firestore fails -------------------------------------------------------------------------
def test_a_failure_without_a_known_total_is_unavailable_and_remembered_briefly(reads, monkeypatch):
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 10)
    clock = Clock()
    reads.failing = google_errors.DeadlineExceeded("the read's deadline passed")
    with pytest.raises(get_counter.Unavailable, match="deadline passed"):
        get_counter.cached_total("home", clock)
    clock.now += get_counter.FAILURE_TTL_SECONDS - 0.1  # remembered: no read, the same answer
    with pytest.raises(get_counter.Unavailable, match="deadline passed"):
        get_counter.cached_total("home", clock)
    assert reads == ["home"]
    reads.failing = None
    clock.now += 0.2  # forgotten: Firestore is read again, and is back
    assert get_counter.cached_total("home", clock) == (2, None)


def test_a_failure_answers_the_last_good_total_as_stale(reads, monkeypatch):
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 10)
    clock = Clock()
    assert get_counter.cached_total("home", clock) == (1, None)
    clock.now += 10.1  # expired, and Firestore now fails
    reads.failing = google_errors.ServiceUnavailable("connection refused")
    assert get_counter.cached_total("home", clock) == (1, "503 connection refused")
    clock.now += get_counter.FAILURE_TTL_SECONDS - 0.1
    assert get_counter.cached_total("home", clock) == (1, "503 connection refused")  # without a read
    assert reads == ["home", "home"]
    reads.failing = None
    clock.now += 0.2
    assert get_counter.cached_total("home", clock) == (3, None)  # fresh again
    clock.now += 9.9
    assert get_counter.cached_total("home", clock) == (3, None)  # and cached for the full TTL


def test_no_cache_remembers_no_failure(reads, monkeypatch):
    """Without a cache there is no lock to queue on: each request waits for its own read only."""
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 0)
    reads.failing = google_errors.ServiceUnavailable("down")
    for _ in range(2):
        with pytest.raises(get_counter.Unavailable):
            get_counter.cached_total("home")
    assert reads == ["home", "home"]


def concurrently(count, call):
    """[(seconds taken, what call() returned or raised)] of `count` threads calling at once."""
    start = threading.Barrier(count)

    def one(_):
        start.wait(timeout=10)
        began = time.monotonic()
        try:
            answer = call()
        except Exception as error:  # noqa: BLE001  the answer under test
            answer = error
        return time.monotonic() - began, answer

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


@pytest.mark.parametrize("known", [False, True], ids=["no total known", "a total known"])
def test_requests_waiting_for_a_failed_read_answer_with_it_not_one_read_each(monkeypatch, known):
    """The pile-up: Firestore hangs, each read ends at its deadline. The requests queued on the
    page's lock answer as soon as the one read fails (not the k-th after k deadlines)."""
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 10)
    deadline, reads = 0.3, []
    if known:
        get_counter._cache["home"] = (41, 0.0)  # read once, long expired

    def hanging_read(page):
        reads.append(page)
        time.sleep(deadline)
        raise google_errors.DeadlineExceeded("hung")

    monkeypatch.setattr(get_counter, "read_total", hanging_read)
    answers = concurrently(12, lambda: get_counter.cached_total("home"))
    assert reads == ["home"]
    assert max(took for took, _ in answers) < 2 * deadline  # about one deadline each, not up to 12
    for _, answer in answers:
        if known:
            assert answer == (41, "504 hung")
        else:
            assert isinstance(answer, get_counter.Unavailable) and str(answer) == "504 hung"


def test_waiting_for_the_lock_is_bounded_by_the_deadline(monkeypatch):
    """Should a read outlast its deadline, the requests waiting for it still answer within theirs."""
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 10)
    monkeypatch.setattr(get_counter, "READ_TIMEOUT_SECONDS", 0.2)
    get_counter._cache["home"] = (41, 0.0)
    release, entered = threading.Event(), threading.Event()

    def stuck_read(page):
        entered.set()
        release.wait(timeout=10)
        return 42

    monkeypatch.setattr(get_counter, "read_total", stuck_read)
    with ThreadPoolExecutor(max_workers=1) as pool:
        holder = pool.submit(get_counter.cached_total, "home")
        assert entered.wait(timeout=5)
        try:
            answers = concurrently(6, lambda: get_counter.cached_total("home"))
        finally:
            release.set()
        assert holder.result(timeout=5) == (42, None)
    assert all(0.15 < took < 1.0 for took, _ in answers), answers
    assert all(answer[0] == 41 and "still under way" in answer[1] for _, answer in answers)
    assert get_counter.cached_total("home") == (42, None)


# ---- the replies ----------------------------------------------------------------------------------
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE}-00f067aa0ba902b7-01"


def get(monkeypatch, answer):
    def cached_total(page):
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(get_counter, "cached_total", cached_total)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "demo-visit-counter")
    with app.test_request_context("/get-counter?visit_type=home", headers={"traceparent": TRACEPARENT}):
        reply = flask.make_response(get_counter.get_counter(flask.request))
    return reply.status_code, json.loads(reply.get_data()), reply.headers


def test_a_fresh_total_is_answered_as_before(monkeypatch):
    status, body, headers = get(monkeypatch, (7, None))
    assert (status, body) == (200, {"visit_type": "home", "count": 7})
    assert get_counter.STALE_HEADER not in headers


def test_a_stale_total_is_marked_in_the_body_and_a_header(monkeypatch, capsys):
    status, body, headers = get(monkeypatch, (7, "504 Deadline Exceeded"))
    assert (status, body) == (200, {"visit_type": "home", "count": 7, "stale": True})
    assert headers[get_counter.STALE_HEADER] == "true"
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert line["logging.googleapis.com/trace"] == f"projects/demo-visit-counter/traces/{TRACE}"
    assert line["severity"] == "WARNING" and line["error"] == "504 Deadline Exceeded" and line["answered"] == "stale"


def test_no_total_is_a_503(monkeypatch, capsys):
    status, body, _ = get(monkeypatch, get_counter.Unavailable("504 Deadline Exceeded"))
    assert status == 503 and "unavailable" in body["error"]
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert line["logging.googleapis.com/trace"] == f"projects/demo-visit-counter/traces/{TRACE}"
    assert line["severity"] == "ERROR" and line["error"] == "504 Deadline Exceeded"
    assert "Unavailable: 504 Deadline Exceeded" in line["stack_trace"]  # for Error Reporting

"""get-counter's in-process cache (pure logic: Firestore's read is replaced by a counter)."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import get_counter


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def reads(monkeypatch):
    calls = []

    def read_total(page):
        calls.append(page)
        return len(calls)

    monkeypatch.setattr(get_counter, "read_total", read_total)
    monkeypatch.setattr(get_counter, "_cache", {})
    return calls


def test_no_cache_reads_every_time(reads, monkeypatch):
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 0)
    assert [get_counter.cached_total("home") for _ in range(3)] == [1, 2, 3]


def test_cache_serves_until_the_ttl_ends(reads, monkeypatch):
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 10)
    clock = Clock()
    assert get_counter.cached_total("home", clock) == 1
    clock.now += 9.9
    assert get_counter.cached_total("home", clock) == 1
    clock.now += 0.2
    assert get_counter.cached_total("home", clock) == 2
    assert reads == ["home", "home"]


def test_each_page_has_its_own_entry(reads, monkeypatch):
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 10)
    clock = Clock()
    assert get_counter.cached_total("home", clock) == 1
    assert get_counter.cached_total("jobs", clock) == 2
    assert get_counter.cached_total("home", clock) == 1


def test_concurrent_misses_read_firestore_once_per_page_per_expiry(monkeypatch):
    """Many requests for an expired page at once (a thread each, as in an instance of concurrency
    > 1) wait for one read instead of each reading Firestore."""
    monkeypatch.setattr(get_counter, "CACHE_TTL_SECONDS", 10)
    monkeypatch.setattr(get_counter, "_cache", {})
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

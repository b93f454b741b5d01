"""get-counter's in-process cache (pure logic: Firestore's read is replaced by a counter)."""
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

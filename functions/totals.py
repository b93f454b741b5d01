"""A page's total visits, behind an in-process cache: what get-counter answers and, with
PAGE_EMBEDS_COUNT=1, what serve-page embeds in the page it serves (one implementation, the same rules).

Sums the page's shard documents in one aggregation query, behind a cache whose lifetime is
CACHE_TTL_SECONDS (0: no cache, every call reads Firestore).

An expired total is answered at once while one background thread reads the page again, so that no
request waits for Firestore once the page has a total: only the first read of a page, or of one
left unread past STALE_AFTER_SECONDS, is waited for (one read; the requests meanwhile wait for it).

When Firestore fails, the page's last known total is answered, marked stale once it is older than
STALE_AFTER_SECONDS, or Unavailable is raised when none is known; the failure is remembered for a
while that doubles from 2 s to 30 s as reads keep failing: meanwhile no read is tried, and
Unavailable says when to come back (retry_after).
"""
import collections
import threading
import time

import google.cloud.firestore  # noqa: F401  imported as the instance starts, not by its first request
from google.api_core import exceptions as google_errors

import clients
from common import FIRESTORE, env_int, shards_of

CACHE_TTL_SECONDS = env_int("CACHE_TTL_SECONDS", 0)
READ_RETRY, READ_TIMEOUT_SECONDS = clients.within_deadline(*clients.FIRESTORE_READ_RETRYABLE)
# A total is marked stale once older than its TTL plus one read's deadline: younger, it is what a
# healthy (if slow) Firestore would have let this instance answer anyway; older, a read has failed
# (or none was asked for: then one is waited for first). With a 10 s TTL and the 8 s deadline: 18 s.
# (2 x TTL would be 20 s there, but 2 s with a 1 s TTL, shorter than one slow read.)
STALE_AFTER_SECONDS = CACHE_TTL_SECONDS + READ_TIMEOUT_SECONDS
# How long a failed read is remembered, so that the requests meanwhile answer at once instead of each
# trying a read that would likely wait through its deadline too: 2 s, doubled at each failure in a
# row up to 30 s (a long outage costs one read per page and instance every 30 s), forgotten on success.
FAILURE_MEMORY_SECONDS, FAILURE_MEMORY_MAX_SECONDS = 2.0, 30.0

_cache: dict[str, tuple[int, float]] = {}  # page -> (last good total, monotonic time it was read)
# page -> (why its last read failed, monotonic time until which that is remembered, memory s)
_failed: dict[str, tuple[str, float, float]] = {}
# One lock per page: held by the one read of the page under way, so that it is read once, not once per request.
_locks: collections.defaultdict[str, threading.Lock] = collections.defaultdict(threading.Lock)


class Unavailable(Exception):
    """The page's total could not be read, and none is known; retry_after: seconds to come back."""

    def __init__(self, why, retry_after=1):
        super().__init__(why)
        self.retry_after = retry_after


def read_total(page):
    """The page's stored visits: the sum of its shards (0 for a page never visited)."""
    # The client's default retries an unreachable Firestore for minutes.
    result = shards_of(page).sum(FIRESTORE["count_field"], alias="total").get(
        timeout=READ_TIMEOUT_SECONDS, retry=READ_RETRY)
    return int(result[0][0].value or 0) if result else 0


def in_background(work):
    # Cloud Run throttles an instance's CPU between requests (request-based billing): a read left running
    # by a quiet instance's last request may end late, or fail at its deadline and back off; the
    # answers meanwhile are the last total all the same.
    threading.Thread(target=work, daemon=True).start()


def cached_total(page, now=time.monotonic):
    """(total, why it is stale or None, seconds it stays fresh). Raises Unavailable when the page's
    total cannot be read and none is known."""
    if CACHE_TTL_SECONDS <= 0:  # no cache, no lock: each request waits for its own read only
        try:
            return read_total(page), None, 0
        except google_errors.GoogleAPIError as error:
            raise Unavailable(str(error)) from error
    answer = _answer_at_once(page, now)
    if answer:
        return answer
    # Nothing usable cached: wait for the one read of the page, bounded by its deadline whatever happens.
    if not _locks[page].acquire(timeout=READ_TIMEOUT_SECONDS):
        why = f"another read of this page was still under way after {READ_TIMEOUT_SECONDS:g} s"
        if page not in _cache:
            raise Unavailable(why)
        return _cache[page][0], why, 0
    try:
        answer = _answer_at_once(page, now)  # what the read this request waited for found
        if answer:
            return answer
        _read(page, now)
        return _answer_at_once(page, now)  # now a fresh total, the last good one, or Unavailable
    finally:
        _locks[page].release()


def _answer_at_once(page, now):
    """The answer without waiting for a read, or None when a read must be waited for. An expired
    total is answered while one background read refreshes it; one older than STALE_AFTER_SECONDS
    only while reads are failing (else nobody asked for it for a while: it is read again first)."""
    at = now()
    failed = _failed.get(page)
    remembered = failed and failed[1] > at
    hit = _cache.get(page)
    if hit:
        total, read_at = hit
        age = at - read_at
        if age < CACHE_TTL_SECONDS:
            return total, None, CACHE_TTL_SECONDS - age
        if age < STALE_AFTER_SECONDS or failed:
            if not remembered and _locks[page].acquire(blocking=False):  # one read at a time
                in_background(lambda: _refresh(page, now))
            return total, failed[0] if failed and age >= STALE_AFTER_SECONDS else None, 0
    elif remembered:
        raise Unavailable(failed[0], failed[1] - at)
    return None


def _refresh(page, now):
    try:
        _read(page, now)
    finally:
        _locks[page].release()


def _read(page, now):
    """Reads the page's total into the cache, or remembers why it could not (longer each time in a row)."""
    try:
        total = read_total(page)
    except google_errors.GoogleAPIError as error:  # failed, or retried until the deadline
        memory = min(2 * _failed[page][2], FAILURE_MEMORY_MAX_SECONDS) if page in _failed else FAILURE_MEMORY_SECONDS
        _failed[page] = (str(error), now() + memory, memory)
        return
    _cache[page] = (total, now())
    _failed.pop(page, None)

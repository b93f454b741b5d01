"""get-counter: GET /get-counter?visit_type=P -> {"visit_type": P, "count": N}.

Sums the page's shard documents in one aggregation query, behind an in-process cache whose
lifetime is CACHE_TTL_SECONDS (0: no cache, every request reads Firestore).

When Firestore fails, a cached page answers its last known total marked stale (`"stale": true` and
the header X-Counter-Stale: true) rather than a 503, and the failure is remembered for
FAILURE_TTL_SECONDS: the requests that waited for the failed read, and those arriving meanwhile,
answer at once instead of each waiting through a deadline of its own.
"""
import collections
import threading
import time

import functions_framework
import google.cloud.firestore  # noqa: F401  imported as the instance starts, not by its first request
from google.api_core import exceptions as google_errors

import clients
from common import FIRESTORE, check_request, env_int, error_reply, json_reply, log, page_from, shards_of, trace_of

CACHE_TTL_SECONDS = env_int("CACHE_TTL_SECONDS", 0)
# Long enough that a burst of requests meets one failed read, not one each; short enough that the
# counter comes back within a couple of seconds of Firestore.
FAILURE_TTL_SECONDS = 2.0
READ_RETRY, READ_TIMEOUT_SECONDS = clients.within_deadline(*clients.FIRESTORE_READ_RETRYABLE)
STALE_HEADER = "X-Counter-Stale"  # a HEAD request sees no body (Warning: 110 is obsolete since RFC 9111)

_cache = {}  # page -> (last good total, monotonic time until which it is fresh)
_failed = {}  # page -> (why its last read failed, monotonic time until which that is remembered)
# One lock per page, so that concurrent misses for a page read Firestore once, not once each.
_locks = collections.defaultdict(threading.Lock)


class Unavailable(Exception):
    """The page's total could not be read, and none is known."""


def read_total(page):
    """The page's stored visits: the sum of its shards (0 for a page never visited)."""
    # The client's default retries an unreachable Firestore for minutes.
    result = shards_of(page).sum(FIRESTORE["count_field"], alias="total").get(
        timeout=READ_TIMEOUT_SECONDS, retry=READ_RETRY)
    return int(result[0][0].value or 0) if result else 0


def cached_total(page, now=time.monotonic):
    """(total, None) when fresh; (last good total, why it is stale) when Firestore failed now or
    within FAILURE_TTL_SECONDS. Raises Unavailable when it failed and no total is known."""
    if CACHE_TTL_SECONDS <= 0:  # no cache, no lock: each request waits for its own read only
        try:
            return read_total(page), None
        except google_errors.GoogleAPIError as error:
            raise Unavailable(str(error)) from error
    known = _known(page, now())
    if known:
        return known
    # A read under way ends within its deadline; a waiter is bounded by it too, whatever happens.
    if not _locks[page].acquire(timeout=READ_TIMEOUT_SECONDS):
        return _last_good(page, f"another read of this page was still under way after {READ_TIMEOUT_SECONDS:g} s")
    try:
        known = _known(page, now())  # what the read this request waited for found
        if known:
            return known
        try:
            total = read_total(page)
        except google_errors.GoogleAPIError as error:  # failed, or retried until the deadline
            _failed[page] = (str(error), now() + FAILURE_TTL_SECONDS)
            return _last_good(page, str(error))
        _cache[page] = (total, now() + CACHE_TTL_SECONDS)
        _failed.pop(page, None)
        return total, None
    finally:
        _locks[page].release()


def _known(page, at):
    """The answer without a read: a fresh total, or a recent failure's; None when a read is due."""
    hit = _cache.get(page)
    if hit and hit[1] > at:
        return hit[0], None
    failed = _failed.get(page)
    if failed and failed[1] > at:
        return _last_good(page, failed[0])
    return None


def _last_good(page, why):
    if page not in _cache:
        raise Unavailable(why)
    return _cache[page][0], why


@functions_framework.http
def get_counter(request):
    rejected = check_request(request, ("GET", "HEAD"))
    if rejected:
        return rejected
    page, rejected = page_from(request, "visit_type")
    if rejected:
        return rejected
    try:
        count, stale = cached_total(page)
    except Unavailable as error:
        log("ERROR", "could not read the counter", trace=trace_of(request), exception=error, visit_type=page,
            error=str(error))
        return error_reply(503, "counter store unavailable, try again later")
    if stale:
        log("WARNING", "could not read the counter", trace=trace_of(request), visit_type=page, error=stale,
            answered="stale")
        return json_reply({"visit_type": page, "count": count, "stale": True}, headers={STALE_HEADER: "true"})
    return json_reply({"visit_type": page, "count": count})

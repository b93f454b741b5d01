"""get-counter: GET /get-counter?visit_type=P -> {"visit_type": P, "count": N}.

Sums the page's shard documents in one aggregation query, behind an in-process cache whose
lifetime is CACHE_TTL_SECONDS (0: no cache, every request reads Firestore).
"""
import collections
import threading
import time

import functions_framework
import google.cloud.firestore  # noqa: F401  imported as the instance starts, not by its first request
from google.api_core import exceptions as google_errors

import clients
from common import FIRESTORE, check_request, env_int, error_reply, json_reply, log, page_from, shards_of

CACHE_TTL_SECONDS = env_int("CACHE_TTL_SECONDS", 0)
READ_RETRY, READ_TIMEOUT_SECONDS = clients.within_deadline(*clients.FIRESTORE_READ_RETRYABLE)

_cache = {}  # page -> (count, monotonic time it expires)
# One lock per page, so that concurrent misses for a page read Firestore once, not once each.
_locks = collections.defaultdict(threading.Lock)


def read_total(page):
    """The page's stored visits: the sum of its shards (0 for a page never visited)."""
    # The client's default retries an unreachable Firestore for minutes.
    result = shards_of(page).sum(FIRESTORE["count_field"], alias="total").get(
        timeout=READ_TIMEOUT_SECONDS, retry=READ_RETRY)
    return int(result[0][0].value or 0) if result else 0


def cached_total(page, now=time.monotonic):
    if CACHE_TTL_SECONDS <= 0:
        return read_total(page)
    hit = _cache.get(page)
    if hit and hit[1] > now():
        return hit[0]
    with _locks[page]:
        hit = _cache.get(page)
        if hit and hit[1] > now():
            return hit[0]
        total = read_total(page)
        _cache[page] = (total, now() + CACHE_TTL_SECONDS)
        return total


@functions_framework.http
def get_counter(request):
    rejected = check_request(request, ("GET", "HEAD"))
    if rejected:
        return rejected
    page, rejected = page_from(request, "visit_type")
    if rejected:
        return rejected
    try:
        count = cached_total(page)
    except google_errors.GoogleAPIError as error:  # failed, or retried until the deadline
        log("ERROR", "could not read the counter", visit_type=page, error=str(error))
        return error_reply(503, "counter store unavailable, try again later")
    return json_reply({"visit_type": page, "count": count})

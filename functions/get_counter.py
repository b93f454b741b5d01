"""get-counter: GET /get-counter?visit_type=P -> {"visit_type": P, "count": N}.

The page's total comes from totals.py: its shards summed behind an in-process cache whose lifetime
is CACHE_TTL_SECONDS (serve-page embeds the same total in the page with PAGE_EMBEDS_COUNT=1). A
fresh answer tells the browser how long it stays fresh (Cache-Control: public, max-age=the entry's
remaining seconds).

When Firestore fails, the page answers its last known total, marked stale (`"stale": true` and the
header X-Counter-Stale: true) once it is older than totals.STALE_AFTER_SECONDS, or a 503 when it
knows none, saying when to come back (Retry-After: what is left of the failure's memory).
"""
import math

import functions_framework

import totals
from common import check_request, error_reply, json_reply, log, page_from, trace_of

STALE_HEADER = "X-Counter-Stale"  # a HEAD request sees no body (Warning: 110 is obsolete since RFC 9111)


@functions_framework.http
def get_counter(request):
    rejected = check_request(request, ("GET", "HEAD"))
    if rejected:
        return rejected
    page, rejected = page_from(request, "visit_type")
    if rejected:
        return rejected
    try:
        count, stale, fresh_for = totals.cached_total(page)
    except totals.Unavailable as error:
        log("ERROR", "could not read the counter", trace=trace_of(request), exception=error, visit_type=page,
            error=str(error))
        return error_reply(503, "counter store unavailable, try again later",
                           {"Retry-After": str(max(1, math.ceil(error.retry_after)))})
    if stale:  # json_reply's no-store: a browser must not keep showing it once Firestore is back
        log("WARNING", "could not read the counter", trace=trace_of(request), visit_type=page, error=stale,
            answered="stale")
        return json_reply({"visit_type": page, "count": count, "stale": True}, headers={STALE_HEADER: "true"})
    # The browser may answer the page's next reads itself while this instance would answer the same
    # total; rounded down, so it never keeps it longer. Under a second left: no-store (json_reply's).
    max_age = int(fresh_for)
    return json_reply({"visit_type": page, "count": count},
                      headers={"Cache-Control": f"public, max-age={max_age}"} if max_age > 0 else None)

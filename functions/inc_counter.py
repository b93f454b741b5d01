"""inc-counter: POST /inc-counter?visit_type=P[&visit_id=ID] publishes one visit to the Pub/Sub topic.

A visit is named by its id, a canonical UUID the client makes once per page view (inc-counter makes
one when the client sends none), and store-inc-counter counts each id once within its horizon: in
push mode while the visit's marker lives (MARKER_TTL_DAYS from when it was counted), in pull mode when
the repeat's publish time is within the puller's window (DEDUP_WINDOW_MINUTES) of the counted copy's.
So a client may post the same visit again, and this function may publish it again (both within
seconds to minutes), without counting it twice; the same id posted beyond the horizon counts again.

It answers 202, with the visit id, only once Pub/Sub has accepted the message: an acknowledged visit
is never lost. It answers 503 when Pub/Sub did not confirm the publish (a timeout, an outage, a
refusal); a publish that timed out may still have landed, so a 503 means "not known to be recorded",
and posting the same visit id again is safe.
"""
import functools
import json
import os
import uuid

import functions_framework
import google.pubsub_v1  # noqa: F401  imported as the instance starts, not by its first request

import clients
from common import check_request, error_reply, from_another_site, json_reply, log, page_from, trace_of
from visits import is_visit_id

TOPIC = os.environ.get("PUBSUB_TOPIC", "visits")
# Pub/Sub's own retryable errors for Publish; retrying them is safe because a visit published twice is
# counted once. The answer comes within the deadline, retries included.
PUBLISH_RETRY, PUBLISH_TIMEOUT_SECONDS = clients.within_deadline(*clients.PUBLISH_RETRYABLE)
CROSS_SITE = ("a visit is counted from the site's own pages only: this request comes from another site "
              "(Origin / Sec-Fetch-Site); nothing was recorded")
# A 503's Retry-After, in seconds: short, since the failed publish was already retried within its
# deadline (up to 8 s); the client's own backoff (the page doubles its wait) spaces further tries.
RETRY_AFTER_SECONDS = 1
NOT_CONFIRMED = ("visit not known to be recorded: the queue did not confirm it; posting the same visit_id "
                 "again is safe (it is counted once)")


@functools.cache
def topic_path():
    return clients.publisher().topic_path(clients.project_id(), TOPIC)


def visit_id_from(request):
    """(the visit id the client sent, or a new one, None) or (None, a 400 reply)."""
    values = request.args.getlist("visit_id")
    if not values:
        return str(uuid.uuid4()), None
    if len(values) > 1:
        return None, error_reply(400, "query parameter 'visit_id' given more than once")
    if not is_visit_id(values[0]):
        return None, error_reply(400, "invalid visit_id: a canonical UUID in lowercase, as crypto.randomUUID() "
                                      "makes it (e.g. 3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b); omit it and one is made")
    return values[0], None


@functions_framework.http
def inc_counter(request):
    rejected = check_request(request, ("POST",))
    if rejected:
        return rejected
    if from_another_site(request):  # another site's page cannot inflate the counters (or the bill)
        return error_reply(403, CROSS_SITE)
    page, rejected = page_from(request, "visit_type")
    if rejected:
        return rejected
    visit_id, rejected = visit_id_from(request)
    if rejected:
        return rejected
    trace = trace_of(request)
    attributes = {"visit_type": page, "visit_id": visit_id}
    if trace[0]:
        attributes["trace"] = trace[0]  # so that store-inc-counter's line joins this request's trace
    data = json.dumps({"visit_type": page}).encode()
    try:
        reply = clients.publisher().publish(
            topic=topic_path(), messages=[{"data": data, "attributes": attributes}],
            retry=PUBLISH_RETRY, timeout=PUBLISH_TIMEOUT_SECONDS)
    except Exception as error:  # any failure to publish means the same to the client
        log("ERROR", "could not publish a visit", trace=trace, exception=error, visit_type=page, visit_id=visit_id)
        # With the visit id, so that a client that sent none can post the same visit again.
        return json_reply({"error": NOT_CONFIRMED, "visit_id": visit_id}, 503,
                          {"Retry-After": str(RETRY_AFTER_SECONDS)})
    return json_reply({"visit_type": page, "visit_id": visit_id, "message_id": reply.message_ids[0]}, 202)

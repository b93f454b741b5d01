"""store-inc-counter: a Pub/Sub message (CloudEvent) adds one visit to a random shard of its page.

Pub/Sub delivers at least once, and one visit may be published more than once (a publish retried
after a timeout that had in fact landed, a client posting the same visit again). So each visit is
counted in one atomic batch that also creates a marker document named after its visit id (the
message id only for a message without one): a second delivery or a second message of the same visit
fails to create the marker again and changes nothing. That holds while the marker lives: it expires
MARKER_TTL_DAYS after the visit was counted (a Firestore TTL policy deletes it some time after), and
a copy that comes later is counted again. A malformed message is logged and acknowledged (retrying it
cannot help); a Firestore failure is logged (outcome "failed", with its stack trace) and raised, the
function answers 500 and Pub/Sub delivers the message again, up to the subscription's
max_delivery_attempts: then it is dead-lettered, and `scripts/kit replay-dead-letters` publishes it
again only if no marker holds it and it is young enough for the marker to tell.
"""
import base64
import binascii
import datetime
import json
import random

import functions_framework
from google.api_core import exceptions as google_errors
from google.cloud import firestore

import clients
from common import FIRESTORE, PAGES, TRACE_ID, env_int, log, shards_of
from visits import is_visit_id, marker_id

SHARDS_PER_PAGE = env_int("SHARDS_PER_PAGE", 2)
MARKER_TTL_DAYS = env_int("MARKER_TTL_DAYS", 7)
WRITE_RETRY, WRITE_TIMEOUT_SECONDS = clients.within_deadline(*clients.FIRESTORE_COMMIT_RETRYABLE)


def visit_of(message):
    """The page a Pub/Sub message (its push envelope's form: data in base64) counts a visit for, or None when the
    message is malformed."""
    try:
        data = base64.b64decode(message.get("data") or "", validate=True)
    except (binascii.Error, ValueError, TypeError):
        return None
    return page_of(data)


def page_of(data):
    """The page a message's data (bytes: {"visit_type": PAGE}) counts a visit for, or None when it is malformed."""
    try:
        payload = json.loads(data)
    except (ValueError, TypeError):
        return None
    page = payload.get("visit_type") if isinstance(payload, dict) else None
    return page if page in PAGES else None


def visit_key(message, message_id):
    """What names the visit of a message: its visit id, or its message id when it carries none (a
    message published before visit ids existed). None when the visit id is malformed."""
    attributes = message.get("attributes")
    visit_id = attributes.get("visit_id") if isinstance(attributes, dict) else None
    if visit_id is None:
        return message_id
    return visit_id if is_visit_id(visit_id) else None


def trace_of(message):
    """(trace id, None) of the request that published the message (its "trace" attribute), or (None, None)."""
    attributes = message.get("attributes")
    trace_id = attributes.get("trace") if isinstance(attributes, dict) else None
    return (trace_id, None) if isinstance(trace_id, str) and TRACE_ID.match(trace_id) else (None, None)


def count_visit(page, key, shard):
    """Adds one visit to the shard unless this visit (key) was counted before. True if it counted."""
    db = clients.firestore()
    expire_at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=MARKER_TTL_DAYS)
    batch = db.batch()
    batch.create(db.collection(FIRESTORE["markers"]).document(marker_id(key)),
                 {"visit_type": page, FIRESTORE["marker_expiry_field"]: expire_at})
    batch.set(shards_of(page).document(str(shard)), {FIRESTORE["count_field"]: firestore.Increment(1)}, merge=True)
    try:
        batch.commit(timeout=WRITE_TIMEOUT_SECONDS, retry=WRITE_RETRY)
    except google_errors.AlreadyExists:
        return False
    return True


@functions_framework.cloud_event
def store_inc_counter(cloud_event):
    message = (cloud_event.data or {}).get("message") or {}
    message_id = message.get("messageId") or message.get("message_id") or cloud_event["id"]
    page, key, trace = visit_of(message), visit_key(message, message_id), trace_of(message)
    # One structured line per delivery: on Google Cloud a log-based metric counts them by outcome.
    if page is None or key is None:
        log("WARNING", "visit message", trace=trace, outcome="malformed", message_id=message_id)
        return
    visit_id = key if key != message_id else None
    try:
        counted = count_visit(page, key, random.randrange(SHARDS_PER_PAGE))
    except Exception as error:  # the 500 makes Pub/Sub deliver it again; the line says which visit failed
        log("ERROR", "visit message", trace=trace, exception=error, outcome="failed", message_id=message_id,
            visit_id=visit_id, visit_type=page)
        raise
    log("INFO", "visit message", trace=trace, outcome="counted" if counted else "already_counted",
        message_id=message_id, visit_id=visit_id, visit_type=page)

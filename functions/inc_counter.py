"""inc-counter: POST /inc-counter?visit_type=P publishes one visit to the Pub/Sub topic.

It answers 202 only once Pub/Sub has accepted the message, so an acknowledged visit is never
lost; 503 when it could not publish, so the client knows the visit was not recorded.
"""
import functools
import json
import os

import functions_framework
from google.api_core.retry import Retry

from common import check_request, env_int, error_reply, json_reply, log, page_from, project_id

TOPIC = os.environ.get("PUBSUB_TOPIC", "visits")
PUBLISH_TIMEOUT_SECONDS = env_int("PUBLISH_TIMEOUT_SECONDS", 10)


# No attempt starts later than this, so the last one still has over a second of the deadline
# (api_core gives an attempt left with less than 1 s the whole timeout again): the answer comes
# within PUBLISH_TIMEOUT_SECONDS, and a visit answered 503 has no publish left in flight.
PUBLISH_RETRY = Retry(timeout=min(PUBLISH_TIMEOUT_SECONDS * 0.8, PUBLISH_TIMEOUT_SECONDS - 1.5))


@functools.cache
def publisher():
    from google.cloud import pubsub_v1

    # The generated client under PublisherClient: one synchronous Publish call per visit. The
    # batching client would start a commit thread and a future for every message, and a visit is
    # a single message the request waits for anyway.
    return pubsub_v1.PublisherClient().api


@functools.cache
def topic_path():
    return publisher().topic_path(project_id(), TOPIC)


@functions_framework.http
def inc_counter(request):
    rejected = check_request(request, ("POST",))
    if rejected:
        return rejected
    page, rejected = page_from(request, "visit_type")
    if rejected:
        return rejected
    data = json.dumps({"visit_type": page}).encode()
    try:
        reply = publisher().publish(topic=topic_path(), messages=[{"data": data, "attributes": {"visit_type": page}}],
                                    retry=PUBLISH_RETRY, timeout=PUBLISH_TIMEOUT_SECONDS)
    except Exception as error:  # any failure to publish means the same to the client
        log("ERROR", "could not publish a visit", visit_type=page, error=repr(error))
        return error_reply(503, "visit not recorded: the queue is unavailable, try again later")
    return json_reply({"visit_type": page, "message_id": reply.message_ids[0]}, 202)

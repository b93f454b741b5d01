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


@functools.cache
def publisher():
    from google.cloud import pubsub_v1

    # The client's own retries stop before we give up on the result, so a visit reported as
    # not recorded is not published later behind the client's back.
    options = pubsub_v1.types.PublisherOptions(
        retry=Retry(timeout=PUBLISH_TIMEOUT_SECONDS * 0.8), timeout=PUBLISH_TIMEOUT_SECONDS * 0.8)
    # Each request publishes one message and waits for it: a long batching window only adds latency.
    batching = pubsub_v1.types.BatchSettings(max_latency=0.002)
    return pubsub_v1.PublisherClient(batch_settings=batching, publisher_options=options)


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
        message_id = publisher().publish(topic_path(), data, visit_type=page).result(
            timeout=PUBLISH_TIMEOUT_SECONDS)
    except Exception as error:  # any failure to publish means the same to the client
        log("ERROR", "could not publish a visit", visit_type=page, error=repr(error))
        return error_reply(503, "visit not recorded: the queue is unavailable, try again later")
    return json_reply({"visit_type": page, "message_id": message_id}, 202)

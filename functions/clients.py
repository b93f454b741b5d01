"""The Google clients, each created once per process, and the deadline every call to them keeps.

A client is built on an instance's first request that needs it, and a cold instance may get many
requests at once: a lock makes sure one client (one gRPC channel) is built, not one per request.

Every call ends within CALL_DEADLINE_SECONDS, retries included, so that a request's worst case fits
inside the 10 s Cloud Run gives an instance between SIGTERM and its end.
"""
import os
import threading
from typing import Any

CALL_DEADLINE_SECONDS = float(os.environ.get("CALL_DEADLINE_SECONDS", 8))

_lock = threading.Lock()
_made: dict[str, Any] = {}  # factory name -> what it made


def once(factory):
    """factory() the first time, under a lock; the same object afterwards."""
    def get():
        made = _made.get(factory.__name__)
        if made is None:
            with _lock:
                made = _made.get(factory.__name__)
                if made is None:
                    made = _made[factory.__name__] = factory()
        return made
    get.__name__ = factory.__name__
    return get


def project_id():
    return os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("GCP_PROJECT")


@once
def firestore():
    from google.cloud import firestore as firestore_module

    return firestore_module.Client(project=project_id())


@once
def publisher():
    """Pub/Sub's generated client: one synchronous Publish call per visit (the batching client would
    start a commit thread and a future for every message, and a visit is one message the request
    waits for anyway). Pointed at the emulator as the batching client points itself."""
    from google import pubsub_v1
    from google.auth.credentials import AnonymousCredentials

    emulator = os.environ.get("PUBSUB_EMULATOR_HOST")
    if emulator:
        return pubsub_v1.PublisherClient(client_options={"api_endpoint": emulator},
                                         credentials=AnonymousCredentials())
    return pubsub_v1.PublisherClient()


def within_deadline(*retryable):
    """(retry, timeout) for a call that must end within CALL_DEADLINE_SECONDS, retrying the method's
    own retryable errors (names in google.api_core.exceptions; Retry(...) alone would replace the
    client's list with its defaults). No attempt starts later than the retry's deadline, which leaves
    the last one over a second (api_core gives an attempt left with less than 1 s the whole timeout
    again)."""
    from google.api_core import exceptions
    from google.api_core.retry import Retry, if_exception_type

    deadline = CALL_DEADLINE_SECONDS
    predicate = if_exception_type(*(getattr(exceptions, name) for name in retryable))
    return Retry(predicate=predicate, timeout=min(deadline * 0.8, deadline - 1.5)), deadline


# Each method's retryable errors, as its generated client's defaults list them (by name, so that
# serve-page, which imports this module, loads no Google library).
FIRESTORE_READ_RETRYABLE = ("DeadlineExceeded", "InternalServerError", "ServiceUnavailable")
FIRESTORE_COMMIT_RETRYABLE = ("ResourceExhausted", "ServiceUnavailable")
# Publish's own list; retrying them is safe because a visit published twice is counted once.
PUBLISH_RETRYABLE = ("Aborted", "Cancelled", "DeadlineExceeded", "InternalServerError", "ResourceExhausted",
                     "ServiceUnavailable", "Unknown")

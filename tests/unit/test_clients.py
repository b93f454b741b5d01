"""The Google clients: one per process however many first requests race for it, and every call's
deadline, retries included, inside the shutdown grace Cloud Run gives an instance."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import clients
import pytest
from google.api_core import exceptions as google_errors


def test_a_client_is_built_once_when_many_first_requests_race_for_it(monkeypatch):
    monkeypatch.setattr(clients, "_made", {})
    built, start = [], threading.Barrier(16)

    @clients.once
    def slow_client():
        built.append(object())
        time.sleep(0.05)  # a channel's creation: long enough for every racer to arrive
        return built[-1]

    def first_request(_):
        start.wait()
        return slow_client()

    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(first_request, range(16)))
    assert len(built) == 1 and all(client is built[0] for client in got)


def test_every_call_ends_within_the_deadline_and_inside_the_shutdown_grace():
    retry, timeout = clients.within_deadline(*clients.FIRESTORE_COMMIT_RETRYABLE)
    assert timeout == clients.CALL_DEADLINE_SECONDS <= 8 < 10  # Cloud Run: 10 s from SIGTERM to the end
    # no attempt starts after the retry's deadline, which leaves the last attempt over a second
    assert retry._timeout <= timeout - 1.5


@pytest.mark.parametrize("retryable, error, retried", [
    (clients.FIRESTORE_COMMIT_RETRYABLE, google_errors.ServiceUnavailable("x"), True),
    (clients.FIRESTORE_COMMIT_RETRYABLE, google_errors.Aborted("contention"), False),
    (clients.FIRESTORE_READ_RETRYABLE, google_errors.DeadlineExceeded("x"), True),
    (clients.FIRESTORE_READ_RETRYABLE, google_errors.PermissionDenied("x"), False),
    (clients.PUBLISH_RETRYABLE, google_errors.Unknown("x"), True),
    (clients.PUBLISH_RETRYABLE, google_errors.NotFound("no topic"), False),
])
def test_a_call_retries_its_methods_own_retryable_errors_only(retryable, error, retried):
    retry, _ = clients.within_deadline(*retryable)
    assert retry._predicate(error) is retried

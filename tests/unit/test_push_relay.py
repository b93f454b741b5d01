"""The push relay's pure parts: the push window, the retry backoff, the push envelope."""
import base64
import datetime
from types import SimpleNamespace

from visitkit.push import INITIAL_WINDOW, Window, backoff_seconds, envelope


def test_the_window_starts_small_grows_per_success_and_halves_per_failure():
    window = Window()
    assert window.size == INITIAL_WINDOW < 10
    for _ in range(7):
        window.success()
    assert window.size == window.peak == INITIAL_WINDOW + 7
    window.failure()
    assert window.size == (INITIAL_WINDOW + 7) // 2 and window.shrinks == 1
    for _ in range(10):
        window.failure()
    assert window.size == 1  # never closes


def test_the_window_has_a_ceiling():
    window = Window(initial=3, largest=5)
    for _ in range(10):
        window.success()
    assert window.size == 5


def test_backoff_doubles_from_the_minimum_to_the_maximum():
    assert [backoff_seconds(n, 10, 600) for n in range(1, 9)] == [10, 20, 40, 80, 160, 320, 600, 600]
    assert backoff_seconds(3, 0, 600) == 0


def test_the_envelope_is_what_pub_sub_posts():
    message = SimpleNamespace(data=b'{"visit_type": "home"}', attributes={"visit_type": "home"}, message_id="42",
                              publish_time=datetime.datetime(2026, 11, 22, 10, 0, 0, tzinfo=datetime.timezone.utc))
    body = envelope("projects/p/subscriptions/s", message)
    assert body == {"subscription": "projects/p/subscriptions/s",
                    "message": {"data": base64.b64encode(message.data).decode(), "attributes": {"visit_type": "home"},
                                "messageId": "42", "publishTime": "2026-11-22T10:00:00Z"}}

"""The push relay's parts: the push window, the retry backoff, the push envelope, batched
acknowledgements, and the kept-alive connection to the push endpoint."""
import base64
import datetime
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

from visitkit.twin.push import INITIAL_WINDOW, Acker, PushClient, Window, backoff_seconds, envelope


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


def test_acknowledgements_go_out_together_and_none_is_left_behind():
    sent = []
    acker = Acker(sent.append, every_s=3600, most=2)  # the timer never fires here: flushes by hand
    for ack_id in "abcde":
        acker.add(ack_id)
    assert sent == []
    assert acker.flush() == 2 and sent == [["a", "b"]]
    acker.stop()  # what is pending goes out on the way out
    assert sent == [["a", "b"], ["c", "d"], ["e"]]


def test_a_failed_acknowledgement_does_not_stop_the_relay():
    def refuse(_):
        raise RuntimeError("emulator restarting")

    acker = Acker(refuse, every_s=3600)
    acker.add("a")
    assert acker.flush() == 1  # dropped: the message comes back after its ack deadline
    acker.stop()


def test_the_push_client_keeps_its_connection_and_reconnects_when_it_was_closed():
    connections = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802 - the http.server interface
            if self.connection not in connections:
                connections.append(self.connection)
            self.rfile.read(int(self.headers["Content-Length"]))
            status = 429 if self.path == "/full" else 204
            self.send_response(status)
            self.send_header("Content-Length", "0")
            if self.headers.get("X-Close"):
                self.send_header("Connection", "close")
            self.end_headers()

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = PushClient(f"http://127.0.0.1:{server.server_port}/push", timeout=5)
        assert [client.post(b"{}") for _ in range(3)] == [204, 204, 204]
        assert len(connections) == 1  # one connection for all three
        connections[0].shutdown(socket.SHUT_RDWR)  # the other side drops the idle connection
        time.sleep(0.2)
        assert client.post(b"{}") == 204  # the POST fails on the dead connection and goes again on a new one
        assert len(connections) == 2
        assert PushClient(f"http://127.0.0.1:{server.server_port}/full", timeout=5).post(b"{}") == 429
    finally:
        server.shutdown()


class FakeSubscriber:
    """The subscriber calls the relay makes, recorded."""
    def __init__(self):
        self.acked, self.deadlines = [], []

    def subscription_path(self, project, name):
        return f"projects/{project}/subscriptions/{name}"

    def acknowledge(self, request):
        self.acked.extend(request["ack_ids"])

    def modify_ack_deadline(self, request):
        self.deadlines.append((request["ack_ids"], request["ack_deadline_seconds"]))


class FakePublisher:
    def __init__(self):
        self.published = []

    def topic_path(self, project, name):
        return f"projects/{project}/topics/{name}"

    def publish(self, topic, data, **attributes):
        self.published.append((topic, data, attributes))
        return SimpleNamespace(result=lambda timeout: "dl-1")


class Answers:
    """The push endpoint's answers in turn: a status, or an exception to raise."""
    def __init__(self, *answers):
        self.answers = list(answers)

    def post(self, body):
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def relay_answering(*answers, attempts=4, settled_file=None):
    from visitkit.twin.push import Relay, RelayConfig

    config = RelayConfig(pubsub_host="-", project="p", subscription="s", dead_letter_topic="dl", push_url="http://-/",
                         ack_deadline_seconds=60, minimum_backoff_seconds=10, maximum_backoff_seconds=600,
                         max_delivery_attempts=attempts, port=0, settled_file=settled_file)
    relay = Relay(config, subscriber=FakeSubscriber(), publisher=FakePublisher())
    relay.client = Answers(*answers)
    return relay


def delivered(relay, times, ack_id="ack-1"):
    """Delivers one message `times` times, as the emulator hands it out again after each backoff."""
    message = SimpleNamespace(data=b'{"visit_type": "home"}', attributes={"visit_type": "home"}, message_id="42",
                              publish_time="2026-11-22T10:00:00Z")
    for _ in range(times):
        relay.in_flight += 1  # as run() counts a pulled message
        relay._deliver(SimpleNamespace(message=message, ack_id=ack_id))
    relay.acker.stop()  # what is pending goes out
    return relay


def test_a_2xx_is_acknowledged_once():
    relay = delivered(relay_answering(204), 1)
    assert relay.subscriber.acked == ["ack-1"] and relay.subscriber.deadlines == []
    assert relay.stats()["acked"] == 1 and relay.stats()["in_flight"] == 0


def test_a_5xx_a_timeout_and_a_429_are_retried_after_a_growing_backoff_then_acknowledged():
    relay = delivered(relay_answering(503, TimeoutError("no answer"), 429, 200), 4)
    assert relay.subscriber.deadlines == [(["ack-1"], 10), (["ack-1"], 20), (["ack-1"], 40)]
    assert relay.subscriber.acked == ["ack-1"]  # only after the 2xx
    stats = relay.stats()
    assert (stats["responses_5xx"], stats["timeouts"], stats["responses_429"]) == (1, 1, 1)
    assert (stats["deliveries"], stats["retries"], stats["failures"], stats["acked"]) == (4, 3, 3, 1)
    assert relay.publisher.published == []


def test_after_the_last_attempt_the_message_goes_to_the_dead_letter_topic():
    relay = delivered(relay_answering(500, 500, 500, attempts=3), 3)
    [(topic, data, attributes)] = relay.publisher.published
    assert topic == "projects/p/topics/dl" and data == b'{"visit_type": "home"}'
    assert attributes == {"visit_type": "home", "CloudPubSubDeadLetterSourceDeliveryCount": "3",
                          "CloudPubSubDeadLetterSourceSubscription": "s",
                          "CloudPubSubDeadLetterSourceSubscriptionProject": "p",
                          "CloudPubSubDeadLetterSourceTopicPublishTime": "2026-11-22T10:00:00Z"}
    assert relay.subscriber.acked == ["ack-1"]  # acknowledged once it is dead-lettered
    assert relay.stats()["dead_lettered"] == 1


def test_without_a_dead_letter_topic_a_failing_message_is_retried_past_the_attempts_never_dead_lettered():
    from visitkit.settings import SubscriptionSettings
    from visitkit.twin.push import RelayConfig

    config = RelayConfig.from_settings(SubscriptionSettings(max_delivery_attempts=5), dead_letter=False,
                                       pubsub_host="-", project="p", subscription="s", dead_letter_topic="dl",
                                       push_url="http://-/", port=0)
    assert config.max_delivery_attempts is None
    relay = delivered(relay_answering(*[500] * 7, attempts=None), 7)
    assert relay.publisher.published == [] and relay.subscriber.acked == [] and len(relay.subscriber.deadlines) == 7


def test_settled_counts_each_message_once_delivered_or_dead_lettered_and_survives_a_restart(tmp_path):
    settled = tmp_path / "settled.txt"
    relay = delivered(relay_answering(204, 204, settled_file=str(settled)), 2)  # again, as after a lost ack
    assert relay.stats()["acked"] == 2 and relay.stats()["settled"] == 1
    assert relay_answering(settled_file=str(settled)).stats()["settled"] == 1  # the relay restarted
    dead = delivered(relay_answering(500, 500, attempts=2, settled_file=str(settled)), 2, ack_id="ack-2")
    assert dead.stats()["dead_lettered"] == 1 and dead.stats()["settled"] == 1  # the same message id, 42
    assert settled.read_text() == "42\n"


def test_the_ids_are_recorded_before_their_acknowledgement_goes_out():
    calls = []
    acker = Acker(lambda ack_ids: calls.append(("ack", ack_ids)), every_s=3600,
                  record=lambda ids: calls.append(("record", ids)))
    acker.add("a", "m1")
    acker.add("b")  # no message id: acknowledged, not recorded
    acker.stop()
    assert calls == [("record", ["m1"]), ("ack", ["a", "b"])]


def test_a_fault_of_the_relays_own_is_logged_and_frees_its_window_slot(capsys):
    relay = delivered(relay_answering(ValueError("a bug")), 1)
    assert relay.stats()["in_flight"] == 0 and relay.stats()["errors"] == 1
    assert "message 42 failed: ValueError('a bug')" in capsys.readouterr().err
    assert relay.subscriber.acked == []  # it comes back after its ack deadline

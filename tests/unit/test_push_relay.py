"""The push relay's parts: the push window, the retry backoff, the push envelope, batched
acknowledgements, and the kept-alive connection to the push endpoint."""
import base64
import datetime
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

from visitkit.push import INITIAL_WINDOW, Acker, PushClient, Window, backoff_seconds, envelope


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

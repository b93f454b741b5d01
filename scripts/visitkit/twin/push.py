"""Push delivery as Pub/Sub does it for a push subscription, for the local twin.

The Pub/Sub emulator's own push keeps at most 2 requests in flight, so locally the store path could
never show what more store-inc-counter instances do. This process takes its place: it PULLS from the
emulator's subscription with the google-cloud-pubsub client and POSTs each message, in the push
envelope Pub/Sub sends, to store-inc-counter through HAProxy's push front end. It follows what
Google documents for push subscriptions:

- a push window (the most requests in flight) that starts small, grows by one with each success (so
  it doubles every round trip while all goes well) and halves on a failure: a non-2xx answer (429,
  5xx) or no answer within the ack deadline;
- the subscription's ack deadline as the request's timeout;
- a failed message comes back after the retry policy's exponential backoff, from the minimum to the
  maximum backoff (its ack deadline is set to that delay, so the emulator redelivers it then);
- after max_delivery_attempts the message goes to the dead-letter topic and is acknowledged.

Run as `python -m visitkit.twin.push --config FILE`; GET / on its --port answers its figures as JSON
(window, in_flight, deliveries, retries, dead_lettered, ...), which `scripts/local stats` shows.
`settled` is how many distinct messages it has acknowledged (delivered, or dead-lettered) since the
stack started: their ids are written to the config's settled_file before their acknowledgement goes
out, so the count survives a restart of the relay and a message delivered again is not counted twice.
The stack's backlog is inc-counter's 202s minus it (LocalStack.sample).
"""
from __future__ import annotations

import argparse
import base64
import datetime
import http.client
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from visitkit.samples import PushFigures

if TYPE_CHECKING:  # the relay's own process needs none of the kit's settings
    from visitkit.settings import SubscriptionSettings

INITIAL_WINDOW = 3  # "a small single-digit window"
MAX_WINDOW = 400  # threads are cheap here; Google's own cap is far above what 2 cores serve
MAX_PULL = 100  # messages per pull request
ACK_EVERY_S = 0.05  # acknowledgements wait at most this long to go out together
MAX_ACK_IDS = 1000  # per acknowledge request


@dataclass(frozen=True)
class PushToken:
    """Whose OIDC token each push carries, and where it is minted: Pub/Sub signs one as the push
    subscription's service account, for its audience (a rehearsal's control plane stand-in answers
    IAM Credentials' generateIdToken for it)."""
    endpoint: str  # IAM Credentials' base URL
    email: str
    audience: str


class TokenSource:
    """The push account's ID token, minted again a few minutes before it expires (Google's live an hour)."""

    def __init__(self, token: PushToken, margin_s: float = 300, lifetime_s: float = 3600):
        self.token, self.margin_s, self.lifetime_s = token, margin_s, lifetime_s
        self.lock = threading.Lock()
        self.value, self.expiry = "", 0.0

    def header(self) -> dict[str, str]:
        with self.lock:
            if time.time() >= self.expiry - self.margin_s:
                url = f"{self.token.endpoint}/v1/projects/-/serviceAccounts/{self.token.email}:generateIdToken"
                request = urllib.request.Request(url, method="POST", headers={"Content-Type": "application/json"},
                                                 data=json.dumps({"audience": self.token.audience,
                                                                  "includeEmail": True}).encode())
                with urllib.request.urlopen(request, timeout=30) as reply:
                    self.value, self.expiry = json.load(reply)["token"], time.time() + self.lifetime_s
            return {"Authorization": f"Bearer {self.value}"}


@dataclass(frozen=True)
class RelayConfig:
    """What the relay needs; written by the local stack as JSON, read back at start."""
    pubsub_host: str  # the emulator, host:port
    project: str
    subscription: str  # its short name
    dead_letter_topic: str
    push_url: str  # store-inc-counter through HAProxy's push front end
    ack_deadline_seconds: int
    minimum_backoff_seconds: int
    maximum_backoff_seconds: int
    max_delivery_attempts: int | None  # None: no dead-letter topic (dead_letter false), retried until it expires
    port: int  # where GET / answers the figures
    # the ids of the messages acknowledged so far, one a line (None: kept in memory only)
    settled_file: str | None = None
    token: PushToken | None = None  # None: pushes carry no token (the twin's front lets them in)

    @classmethod
    def from_settings(cls, subscription_settings: SubscriptionSettings, dead_letter: bool = True,
                      **values: Any) -> Self:
        s = subscription_settings
        return cls(ack_deadline_seconds=s.ack_deadline_seconds, minimum_backoff_seconds=s.minimum_backoff_seconds,
                   maximum_backoff_seconds=s.maximum_backoff_seconds,
                   max_delivery_attempts=s.max_delivery_attempts if dead_letter else None, **values)


class Window:
    """The push window: grows by one per success up to `largest`, halves on a failure."""

    def __init__(self, initial: int = INITIAL_WINDOW, largest: int = MAX_WINDOW):
        self.size, self.largest, self.peak, self.shrinks = initial, largest, initial, 0

    def success(self) -> None:
        self.size = min(self.largest, self.size + 1)
        self.peak = max(self.peak, self.size)

    def failure(self) -> None:
        smaller = max(1, self.size // 2)
        self.shrinks += smaller < self.size
        self.size = smaller


def backoff_seconds(attempt: int, minimum: float, maximum: float) -> float:
    """The delay before a message's next attempt after its `attempt`-th failed one."""
    return min(maximum, minimum * 2 ** (attempt - 1))


def publish_time_text(message: Any) -> str:
    """A message's publish time as Pub/Sub writes it (RFC 3339, UTC, Z)."""
    published = message.publish_time
    if isinstance(published, datetime.datetime):
        published = published.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    return str(published)


def envelope(subscription_path: str, message: Any) -> dict[str, Any]:
    """The JSON body Pub/Sub POSTs to a push endpoint for one message (the wrapped format)."""
    return {"subscription": subscription_path,
            "message": {"data": base64.b64encode(message.data).decode(), "attributes": dict(message.attributes),
                        "messageId": message.message_id, "publishTime": publish_time_text(message)}}

# The relay's counters (the rest of its stats are levels: window, window_peak, in_flight).
COUNTERS = ("deliveries", "acked", "retries", "failures", "responses_429", "responses_5xx", "timeouts",
            "dead_lettered", "pull_errors", "errors")


class Acker:
    """Acknowledges in batches: one request per ACK_EVERY_S instead of one per message. What this
    relay costs is the twin's, not the system's; an acknowledgement lost with the relay only brings
    the message back, and store-inc-counter counts it once. `record`, if given, is handed a batch's
    message ids before its acknowledgement goes out."""

    def __init__(self, acknowledge: Callable[[list[str]], object], every_s: float = ACK_EVERY_S,
                 most: int = MAX_ACK_IDS, record: Callable[[list[str]], object] | None = None):
        self.acknowledge, self.every_s, self.most, self.record = acknowledge, every_s, most, record
        self.pending: list[tuple[str, str | None]] = []
        self.lock, self.stopping = threading.Lock(), threading.Event()
        self.thread = threading.Thread(target=self._run, name="acker", daemon=True)
        self.thread.start()

    def add(self, ack_id: str, message_id: str | None = None) -> None:
        with self.lock:
            self.pending.append((ack_id, message_id))

    def flush(self) -> int:
        with self.lock:
            batch, self.pending = self.pending[:self.most], self.pending[self.most:]
        if batch:
            try:
                if self.record:
                    self.record([message_id for _, message_id in batch if message_id is not None])
                self.acknowledge([ack_id for ack_id, _ in batch])
            except Exception:  # the emulator will redeliver after the ack deadline; counted once anyway
                pass
        return len(batch)

    def _run(self) -> None:
        while not self.stopping.wait(self.every_s):
            while self.flush() == self.most:
                pass

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()
        while self.flush():
            pass


class PushClient:
    """POSTs to the push endpoint over one kept-alive connection per delivery thread (a new TCP
    connection per message cost the relay and HAProxy more than the POST). Returns the status; raises
    OSError when there is no answer within the timeout."""

    def __init__(self, url: str, timeout: float, token: TokenSource | None = None):
        self.token = token
        parts = urllib.parse.urlsplit(url)
        if not parts.hostname:
            raise ValueError(f"the push URL {url!r} names no host")
        self.host, self.port, self.path, self.timeout = parts.hostname, parts.port, parts.path or "/", timeout
        self.local = threading.local()

    def post(self, body: bytes) -> int:
        for attempt in (1, 2):
            connection: http.client.HTTPConnection | None = getattr(self.local, "connection", None)
            fresh = connection is None
            if connection is None:
                connection = self.local.connection = http.client.HTTPConnection(self.host, self.port,
                                                                                 timeout=self.timeout)
            try:
                headers = {"Content-Type": "application/json", **(self.token.header() if self.token else {})}
                connection.request("POST", self.path, body=body, headers=headers)
                answer = connection.getresponse()
                answer.read()
                return answer.status
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # a kept-alive connection the other side had closed: once more on a new one (a
                # second delivery of a message is one Pub/Sub may make too; it is counted once)
                self._drop()
                if fresh or attempt == 2:
                    raise
            except BaseException:
                self._drop()
                raise
        raise AssertionError("not reached: the second attempt returns or raises")

    def _drop(self) -> None:
        connection = getattr(self.local, "connection", None)
        self.local.connection = None
        if connection is not None:
            connection.close()


class Relay:
    def __init__(self, config: RelayConfig, subscriber: Any = None, publisher: Any = None):
        from google.cloud import pubsub_v1

        self.config = config
        self.subscriber = subscriber or pubsub_v1.SubscriberClient()
        self.publisher = publisher or pubsub_v1.PublisherClient()
        self.subscription = self.subscriber.subscription_path(config.project, config.subscription)
        self.dead_letter = self.publisher.topic_path(config.project, config.dead_letter_topic)
        self.window = Window()
        self.lock = threading.Condition()
        self.in_flight = 0
        self.attempts: dict[str, int] = {}  # message id -> failed attempts so far (the emulator does not count them)
        self.figures = dict.fromkeys(COUNTERS, 0)
        self.settled = read_settled(config.settled_file)  # ids of the messages acknowledged, before a restart too
        self.stopping = threading.Event()
        self.workers = ThreadPoolExecutor(MAX_WINDOW, thread_name_prefix="push")
        self.acker = Acker(lambda ack_ids: self.subscriber.acknowledge(
            request={"subscription": self.subscription, "ack_ids": ack_ids}), record=self._settle)
        self.client = PushClient(config.push_url, config.ack_deadline_seconds,
                                 TokenSource(config.token) if config.token else None)

    # ---- figures ------------------------------------------------------------------------------
    def stats(self) -> PushFigures:
        with self.lock:
            f = self.figures  # each of COUNTERS by name, so that mypy holds them to the schema
            return {"window": self.window.size, "window_peak": self.window.peak, "window_shrinks": self.window.shrinks,
                    "in_flight": self.in_flight, "settled": len(self.settled), "deliveries": f["deliveries"],
                    "acked": f["acked"], "retries": f["retries"], "failures": f["failures"],
                    "responses_429": f["responses_429"], "responses_5xx": f["responses_5xx"], "timeouts": f["timeouts"],
                    "dead_lettered": f["dead_lettered"], "pull_errors": f["pull_errors"], "errors": f["errors"]}

    def _count(self, key: str) -> None:
        self.figures[key] += 1

    def _settle(self, message_ids: list[str]) -> None:
        """Notes messages as acknowledged, on disk first (the Acker calls this before it acknowledges
        them: a relay killed in between sees them again, and counts them once)."""
        with self.lock:
            new = list(dict.fromkeys(m for m in message_ids if m not in self.settled))
        if new and self.config.settled_file:  # one write: a kill leaves no line cut short
            out = os.open(self.config.settled_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(out, "".join(f"{message_id}\n" for message_id in new).encode())
            finally:
                os.close(out)
        with self.lock:
            self.settled.update(new)

    # ---- the loop -----------------------------------------------------------------------------
    def run(self) -> None:
        while not self.stopping.is_set():
            with self.lock:
                while self.in_flight >= self.window.size and not self.stopping.is_set():
                    self.lock.wait(0.5)
                room = min(MAX_PULL, self.window.size - self.in_flight)
            if self.stopping.is_set():
                break
            try:
                reply = self.subscriber.pull(request={"subscription": self.subscription, "max_messages": room},
                                             timeout=10)
            except Exception:  # the emulator restarting, a deadline: try again shortly
                with self.lock:
                    self._count("pull_errors")
                self.stopping.wait(0.5)
                continue
            if not reply.received_messages:
                self.stopping.wait(0.05)
                continue
            with self.lock:
                self.in_flight += len(reply.received_messages)
            for received in reply.received_messages:
                self.workers.submit(self._deliver, received)
        self.workers.shutdown(wait=False, cancel_futures=True)
        self.acker.stop()

    def _deliver(self, received):
        try:
            self._push(received)
        except Exception as error:  # a fault of the relay's own: logged, and the window slot still released
            with self.lock:
                self._count("errors")
            print(f"push relay: delivering message {received.message.message_id} failed: {error!r} "
                  "(it comes back after its ack deadline)", file=sys.stderr, flush=True)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.lock.notify_all()

    def _push(self, received):
        """One delivery of one message: POST it, then acknowledge it, schedule its retry after the
        backoff, or dead-letter it after the last attempt."""
        message, config = received.message, self.config
        retry = message.message_id in self.attempts
        body = json.dumps(envelope(self.subscription, message)).encode()
        outcome = None
        try:
            status = self.client.post(body)
            ok = 200 <= status < 300
            if not ok:
                outcome = "responses_429" if status == 429 else "responses_5xx" if status >= 500 else None
        except (OSError, http.client.HTTPException):  # no (whole) answer within the ack deadline, or no connection
            ok, outcome = False, "timeouts"
        with self.lock:
            self._count("deliveries")
            if retry:
                self._count("retries")
            if ok:
                self._count("acked")
                self.window.success()
                self.attempts.pop(message.message_id, None)
            else:
                self._count("failures")
                if outcome:
                    self._count(outcome)
                self.window.failure()
                attempt = self.attempts[message.message_id] = self.attempts.get(message.message_id, 0) + 1
        if ok:
            self.acker.add(received.ack_id, message.message_id)
        elif config.max_delivery_attempts is not None and attempt >= config.max_delivery_attempts:
            self._dead_letter(received)
        else:
            delay = backoff_seconds(attempt, config.minimum_backoff_seconds, config.maximum_backoff_seconds)
            try:
                self.subscriber.modify_ack_deadline(request={"subscription": self.subscription,
                                                             "ack_ids": [received.ack_id],
                                                             "ack_deadline_seconds": int(delay)})
            except Exception:  # the emulator will redeliver after the ack deadline anyway
                pass

    def _dead_letter(self, received):
        message = received.message
        # What Pub/Sub adds to the copy it forwards (docs/google-cloud.md, "Counted once, within a horizon"), so that
        # scripts/kit replay-dead-letters judges the twin's dead letters as it judges Google's.
        attributes = {**message.attributes,
                      "CloudPubSubDeadLetterSourceDeliveryCount": str(self.config.max_delivery_attempts),
                      "CloudPubSubDeadLetterSourceSubscription": self.config.subscription,
                      "CloudPubSubDeadLetterSourceSubscriptionProject": self.config.project,
                      "CloudPubSubDeadLetterSourceTopicPublishTime": publish_time_text(message)}
        self.publisher.publish(self.dead_letter, message.data, **attributes).result(timeout=30)
        self.acker.add(received.ack_id, message.message_id)
        with self.lock:
            self.attempts.pop(message.message_id, None)
            self._count("dead_lettered")


def read_settled(path: str | None) -> set[str]:
    """The message ids a settled_file holds (a line cut short, were a disk full, is no id: it comes back)."""
    if not path or not os.path.exists(path):
        return set()
    with open(path) as f:
        return {line[:-1] for line in f if line.endswith("\n")}


def serve_stats(relay: Relay, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server interface
            body = json.dumps(relay.stats()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def read_stats(port: int, timeout: float = 2) -> PushFigures | None:
    """The relay's figures, or None when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=timeout) as reply:
            return json.load(reply)
    except (OSError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="visitkit.twin.push", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the RelayConfig as a JSON file")
    args = parser.parse_args(argv)
    with open(args.config) as f:
        values = json.load(f)
        config = RelayConfig(**{**values, "token": PushToken(**values["token"]) if values.get("token") else None})
    os.environ["PUBSUB_EMULATOR_HOST"] = config.pubsub_host  # read by the clients when built
    relay = Relay(config)

    def stop(*_: Any) -> None:
        # A pull can block for seconds: stop at once after a short grace. Nothing is lost: whatever was
        # pulled and not acknowledged comes back after its ack deadline, as after any relay crash.
        relay.stopping.set()
        threading.Timer(1.0, os._exit, (0,)).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server = serve_stats(relay, config.port)
    relay.run()
    server.shutdown()
    return 0


def write_config(config: RelayConfig, path: Path) -> Path:
    path.write_text(json.dumps(asdict(config), indent=2))
    return path


if __name__ == "__main__":
    sys.exit(main())

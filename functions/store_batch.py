"""store-inc-counter in pull mode (STORE_MODE=pull): one long-running puller counts visits in batches.

It pulls up to PULL_BATCH_SIZE messages at a time from the pull subscription and commits each batch
in ONE Firestore transaction: one Increment(n) per page on a random shard, and one visit_batches
document naming the batch's visit keys. Pub/Sub delivers at least once, and a visit may be published
twice, so a key is refused when a copy of it published within DEDUP_WINDOW_MINUTES was counted
already (redeliveries share their publish time; retried publishes and re-posted visits come within
minutes). The window is kept in memory, loaded from visit_batches when the lease is taken, and for
a message older than the memory covers.

The horizon: a repeat is refused only when its publish time is within DEDUP_WINDOW_MINUTES of the counted
copy's; a later copy (a dead-lettered visit republished hours later) would be counted again, so dead letters
are replayed with `scripts/kit replay-dead-letters`, which first looks the visit up in the visit_batches
documents (kept MARKER_TTL_DAYS after a batch's newest publish time).

One writer: a lease document (store_leases/store-inc-counter) with a generation. Every batch
transaction reads it and aborts unless it is still ours (fencing), so an instance paused or replaced
can never commit after another took over, and the memory of one writer is the whole truth.

Messages are acknowledged after their batch committed: counted, duplicate and malformed alike; a
failed commit nacks the whole batch (it comes back). An acknowledgement lost after a commit is
harmless: the redelivery is refused by the window.

functions-framework imports this module in gunicorn's arbiter and forks the worker that serves
requests, so threads started at import would run in the arbiter (measured with functions-framework
3.10): the puller starts in the forked worker (os.register_at_fork), or on the first request where
nothing forks (Cloud Run's startup probe on / is one). GET / answers the puller's status.
"""
import collections
import datetime
import heapq
import itertools
import os
import queue
import random
import threading
import time
import uuid
from dataclasses import dataclass

import functions_framework
from google.api_core import exceptions as google_errors
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

import clients
from common import FIRESTORE, check_request, env_int, json_reply, log, shards_of
from store_inc_counter import MARKER_TTL_DAYS, SHARDS_PER_PAGE, page_of, visit_key
from visits import is_visit_id

SUBSCRIPTION = os.environ.get("PULL_SUBSCRIPTION", "store-inc-counter")
BATCH_SIZE = env_int("PULL_BATCH_SIZE", 500)
FLUSH_SECONDS = env_int("PULL_FLUSH_MS", 500) / 1000
# Settings allow whole minutes; a fraction here lets the tests cross the horizon in seconds.
WINDOW_SECONDS = float(os.environ.get("DEDUP_WINDOW_MINUTES", 60)) * 60
# Taking the lease loads the batches published a little before the window too: publish times come
# from Pub/Sub's clock, "now" from this instance's.
LOAD_MARGIN_SECONDS = 5 * 60
LEASE_NAME = "store-inc-counter"
LEASE_SECONDS = 30
RENEW_EVERY_SECONDS = 10
PULL_TIMEOUT_SECONDS = 10
QUEUE_LIMIT = 2 * BATCH_SIZE  # pulled messages waiting for the committer: two batches, well inside their ack deadline
READ_RETRY, READ_TIMEOUT_SECONDS = clients.within_deadline(*clients.FIRESTORE_READ_RETRYABLE)
ACK_RETRY, ACK_TIMEOUT_SECONDS = clients.within_deadline(*clients.PUBLISH_RETRYABLE)


class LeaseLost(Exception):
    """The lease is another instance's now: this batch must not be committed."""


@dataclass(frozen=True)
class Message:
    ack_id: str
    message_id: str
    page: str | None  # None: malformed
    key: str | None  # the visit id, or the message id for a message without one; None: malformed
    published: float  # publish time, seconds since the epoch


def message_of(received):
    """A pulled message (ReceivedMessage) as the puller decides on it, read by store-inc-counter's
    own rules (page_of, visit_key)."""
    pulled = received.message
    page, key = page_of(pulled.data), visit_key({"attributes": dict(pulled.attributes)}, pulled.message_id)
    malformed = page is None or key is None
    return Message(received.ack_id, pulled.message_id, None if malformed else page, None if malformed else key,
                   pulled.publish_time.timestamp())


def held(key):
    """A key as the window holds it: a visit id as its 128-bit number (48 bytes; its text takes 85), any
    other key (a message id) as it is. Two keys never share a form: a number never equals a text."""
    return int(key.replace("-", ""), 16) if is_visit_id(key) else key


def latest_of(entry):
    return entry if isinstance(entry, float) else entry[1]


class Window:
    """The visit keys counted lately, each with the publish time of its counted copy: a float when
    known, else (earliest, latest), the span of the batch document it was loaded from, one tuple
    shared by the batch's keys. Keys are held compactly (held()): at the knee a retake loads millions.

    Invariant: every counted copy published at or after `covers_from` is here (None: nothing loaded).
    Entries are evicted a batch at a time once the batch's newest copy is older than the newest
    publish time seen minus the window."""

    def __init__(self, span_seconds):
        self.span = span_seconds
        self.keys = {}  # held key -> publish time, or (earliest, latest), of its counted copy
        self.expiry = []  # heap of (batch's latest publish time, sequence, its keys)
        self.sequence = itertools.count()
        self.covers_from = None
        self.newest = None

    def __len__(self):
        return len(self.keys)

    def needs_load_from(self, published):
        """The publish time from which batches must be loaded before deciding on a copy published
        then, or None when the memory covers it."""
        since = published - self.span
        return since if self.covers_from is None or since < self.covers_from else None

    def refuses(self, key, published):
        seen = self.keys.get(held(key))
        if seen is None:
            return False
        earliest, latest = (seen, seen) if isinstance(seen, float) else seen
        return earliest - self.span <= published <= latest + self.span

    def add_batch(self, keys, earliest, latest, exact=None):
        """Remembers a committed batch's keys; `exact` gives each key's own publish time when known."""
        span, kept = (earliest, latest), []
        for key in keys:
            entry, compact = float(exact[key]) if exact else span, held(key)
            if compact not in self.keys or latest_of(self.keys[compact]) <= latest_of(entry):  # the newest copy wins
                self.keys[compact] = entry
            kept.append(compact)
        heapq.heappush(self.expiry, (latest, next(self.sequence), kept))

    def loaded(self, since, batches):
        """Adds the batches read from Firestore (ids, published_from, published_to): memory now
        holds every counted copy published at or after `since`."""
        for ids, earliest, latest in batches:
            self.add_batch(ids, earliest, latest)
        self.covers_from = since if self.covers_from is None else min(self.covers_from, since)

    def saw(self, published):
        self.newest = published if self.newest is None else max(self.newest, published)

    def evict(self):
        if self.newest is None:
            return
        bound = self.newest - self.span
        while self.expiry and self.expiry[0][0] < bound:
            latest, _, keys = heapq.heappop(self.expiry)
            for key in keys:
                if key in self.keys and latest_of(self.keys[key]) <= latest:
                    del self.keys[key]
        if self.covers_from is not None:
            self.covers_from = max(self.covers_from, bound)


def decide(window, messages):
    """(counted, duplicates, malformed) of a batch: a copy is refused when the window holds a counted
    copy published within its span, or when its key came earlier in this batch."""
    counted, duplicates, malformed, in_batch = [], [], [], set()
    for message in messages:
        if message.key is None:
            malformed.append(message)
        elif message.key in in_batch or window.refuses(message.key, message.published):
            duplicates.append(message)
        else:
            in_batch.add(message.key)
            counted.append(message)
    return counted, duplicates, malformed


def batch_document(counted, generation):
    published = [m.published for m in counted]
    published_from, published_to = timestamp(min(published)), timestamp(max(published))
    return {"ids": [m.key for m in counted], "pages": dict(collections.Counter(m.page for m in counted)),
            "published_from": published_from, "published_to": published_to, "writer": generation,
            "expire_at": published_to + datetime.timedelta(days=MARKER_TTL_DAYS)}


def timestamp(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC)


def utc_now():
    return datetime.datetime.now(datetime.UTC)


def lease_is(lease, owner, generation, now):
    """Whether the lease document (a dict or None) is held by owner at generation and not expired."""
    return (lease is not None and lease.get("owner") == owner and lease.get("generation") == generation
            and lease.get("expires_at") is not None and lease["expires_at"] > now)


def lease_after(lease, owner, generation, now):
    """The generation owner holds after trying to take or renew the lease, or None while another
    instance holds it. Renewing keeps the generation (nobody else committed in between, even if it
    expired meanwhile); taking a free or expired lease starts a new one."""
    if lease is not None and lease.get("owner") == owner and lease.get("generation") == generation:
        return generation
    if lease is None or lease.get("expires_at") is None or lease["expires_at"] <= now:
        return (lease or {}).get("generation", 0) + 1
    return None


@clients.once
def subscriber():
    """Pub/Sub's generated subscriber client, pointed at the emulator as clients.publisher() is."""
    from google import pubsub_v1
    from google.auth.credentials import AnonymousCredentials

    emulator = os.environ.get("PUBSUB_EMULATOR_HOST")
    if emulator:
        return pubsub_v1.SubscriberClient(client_options={"api_endpoint": emulator},
                                          credentials=AnonymousCredentials())
    return pubsub_v1.SubscriberClient()


class Puller:
    def __init__(self):
        self.owner = uuid.uuid4().hex
        self.generation = None  # of the lease while we hold it
        self.lease_valid_until = 0.0  # monotonic: past it we stop pulling until renewed
        self.loaded_generation = None  # the generation the window was loaded for
        self.window = Window(WINDOW_SECONDS)
        self.queue = queue.Queue(QUEUE_LIMIT)
        self.unsure = None  # (batch id, its counted messages) of a commit that failed without saying whether it landed
        self.lock = threading.Lock()
        self.figures = dict.fromkeys(("pulled", "counted", "duplicates", "malformed", "nacked", "batches",
                                      "commit_failures", "pull_errors", "ack_errors"), 0)
        self.last_commit = None  # monotonic
        self.started_in = None  # the pid the threads run in

    # ---- status -------------------------------------------------------------------------------
    def holding(self):
        return self.generation is not None and time.monotonic() < self.lease_valid_until

    def pulling(self):
        """Holding the lease with the window loaded for it: only then are messages pulled."""
        return self.holding() and self.loaded_generation == self.generation

    def status(self):
        with self.lock:
            f = dict(self.figures)
        acked = f["counted"] + f["duplicates"] + f["malformed"]
        return {"owner": self.owner, "holding": self.holding(), "pulling": self.pulling(),
                "generation": self.generation, **f, "acked": acked, "pulled_unacked": f["pulled"] - acked - f["nacked"],
                "window": len(self.window), "batch_size": BATCH_SIZE, "flush_ms": round(FLUSH_SECONDS * 1000),
                "dedup_window_minutes": WINDOW_SECONDS / 60,
                "last_commit_age_s": None if self.last_commit is None
                else round(time.monotonic() - self.last_commit, 3)}

    def _count(self, **amounts):
        with self.lock:
            for name, amount in amounts.items():
                self.figures[name] += amount

    # ---- threads ------------------------------------------------------------------------------
    def start(self):
        with self.lock:
            if self.started_in is not None:
                return
            self.started_in = os.getpid()
        for name, loop in (("lease", self._lease_loop), ("pull", self._pull_loop), ("commit", self._commit_loop)):
            threading.Thread(target=loop, name=f"store-{name}", daemon=True).start()

    def started_elsewhere(self):
        """In a forked child of a process whose puller runs: not started again there."""
        return self.started_in is not None and self.started_in != os.getpid()

    def _lease_loop(self):
        while True:
            began = time.monotonic()
            try:
                self.take_or_renew_lease()
            except Exception as error:  # Firestore away: the lease runs out locally and pulling stops
                log("WARNING", "store lease", outcome="failed", error=repr(error), owner=self.owner)
            time.sleep(max(0.0, RENEW_EVERY_SECONDS - (time.monotonic() - began)))

    def take_or_renew_lease(self):
        db = clients.firestore()
        ref = db.collection(FIRESTORE["leases"]).document(LEASE_NAME)
        began = time.monotonic()
        # A plain read first: while another instance holds the lease, no transaction contends for it.
        current = ref.get(retry=READ_RETRY, timeout=READ_TIMEOUT_SECONDS)
        if lease_after(current.to_dict() if current.exists else None, self.owner, self.generation, utc_now()) is None:
            self._lost_lease()
            return

        @firestore.transactional
        def take(transaction):
            snapshot = ref.get(transaction=transaction, retry=READ_RETRY, timeout=READ_TIMEOUT_SECONDS)
            now = utc_now()
            generation = lease_after(snapshot.to_dict() if snapshot.exists else None, self.owner, self.generation, now)
            if generation is not None:
                transaction.set(ref, {"owner": self.owner, "generation": generation,
                                      "expires_at": now + datetime.timedelta(seconds=LEASE_SECONDS)})
            return generation

        generation = take(db.transaction(max_attempts=2))
        if generation is None:
            self._lost_lease()
            return
        if generation != self.generation:
            log("INFO", "store lease", outcome="taken", owner=self.owner, generation=generation)
        self.generation = generation
        # Held until the lease's end as counted from before the read, less a margin for clocks.
        self.lease_valid_until = began + LEASE_SECONDS - 5

    def _lost_lease(self):
        if self.generation is not None:
            log("WARNING", "store lease", outcome="held_by_another", owner=self.owner, generation=self.generation)
        self.generation = None

    def _pull_loop(self):
        path = subscriber().subscription_path(clients.project_id(), SUBSCRIPTION)
        while True:
            if not self.pulling():
                time.sleep(0.2)
                continue
            try:
                reply = subscriber().pull(request={"subscription": path, "max_messages": BATCH_SIZE},
                                          timeout=PULL_TIMEOUT_SECONDS)
            except google_errors.DeadlineExceeded:
                continue  # nothing to pull for a while
            except Exception as error:  # Pub/Sub away: try again shortly
                self._count(pull_errors=1)
                log("WARNING", "visit pull", outcome="failed", error=repr(error))
                time.sleep(1)
                continue
            self._count(pulled=len(reply.received_messages))
            for received in reply.received_messages:
                self.queue.put(message_of(received))

    def _take_batch(self):
        try:
            first = self.queue.get(timeout=0.5)
        except queue.Empty:
            return []
        batch, flush_at = [first], time.monotonic() + FLUSH_SECONDS
        while len(batch) < BATCH_SIZE:
            try:
                batch.append(self.queue.get(timeout=max(0.0, flush_at - time.monotonic())))
            except queue.Empty:
                break
        return batch

    def _commit_loop(self):
        while True:
            try:
                if self.holding() and self.loaded_generation != self.generation:
                    self.load_window()
                batch = self._take_batch()
                if batch:
                    self.process(batch)
            except Exception as error:  # the window's load failed (Firestore away), or a fault of our own
                log("ERROR", "visit window", exception=error, outcome="failed", generation=self.generation)
                time.sleep(1)

    # ---- the window ---------------------------------------------------------------------------
    def _read_batches(self, since, before=None):
        query = clients.firestore().collection(FIRESTORE["batches"]).where(
            filter=FieldFilter("published_to", ">=", timestamp(since)))
        if before is not None:
            query = query.where(filter=FieldFilter("published_to", "<", timestamp(before)))
        for document in query.stream(retry=READ_RETRY, timeout=READ_TIMEOUT_SECONDS):
            batch = document.to_dict()
            yield batch["ids"], batch["published_from"].timestamp(), batch["published_to"].timestamp()

    def load_window(self):
        """A fresh window of the batches committed lately, by any writer, once the lease is ours."""
        generation = self.generation
        # The old window is an ended generation's, whose commits the lease check refuses: let go of it
        # first, so that a retake never holds two windows at once (benchmarks/README.md: puller-memory).
        self.window, self.unsure, self.loaded_generation = Window(WINDOW_SECONDS), None, None
        since = time.time() - WINDOW_SECONDS - LOAD_MARGIN_SECONDS
        window = Window(WINDOW_SECONDS)
        window.loaded(since, self._read_batches(since))  # a document at a time: its ids' text is not all kept
        self.window, self.loaded_generation = window, generation
        log("INFO", "visit window", outcome="loaded", generation=generation, keys=len(window))

    def _resolve_unsure(self):
        """A commit that failed may still have landed: its batch document says so."""
        batch_id, counted = self.unsure
        snapshot = clients.firestore().collection(FIRESTORE["batches"]).document(batch_id).get(
            retry=READ_RETRY, timeout=READ_TIMEOUT_SECONDS)
        if snapshot.exists:
            self._remember(counted)
        self.unsure = None

    def _remember(self, counted):
        published = [m.published for m in counted]
        self.window.add_batch([m.key for m in counted], min(published), max(published),
                              exact={m.key: m.published for m in counted})

    # ---- one batch ----------------------------------------------------------------------------
    def process(self, batch):
        started = time.monotonic()
        # The generation the window was loaded for: after a lease lost and taken again, the commit
        # fails the lease check until the window has been loaded afresh.
        generation, batch_id = self.loaded_generation, uuid.uuid4().hex
        counted = duplicates = malformed = []
        try:
            if self.unsure:
                self._resolve_unsure()
            oldest = min(m.published for m in batch)
            since = self.window.needs_load_from(oldest)
            if since is not None:  # older than the memory covers: read those batches first
                self.window.loaded(since, list(self._read_batches(since, self.window.covers_from)))
            counted, duplicates, malformed = decide(self.window, batch)
            if counted:
                self.commit(counted, generation, batch_id)
        except Exception as error:
            if counted and not isinstance(error, LeaseLost):
                self.unsure = (batch_id, counted)
            self._nack(batch)
            self._count(nacked=len(batch), commit_failures=1)
            log("WARNING" if isinstance(error, LeaseLost) else "ERROR", "visit batch",
                exception=None if isinstance(error, LeaseLost) else error,
                outcome="lease_lost" if isinstance(error, LeaseLost) else "failed", nacked=len(batch),
                batch_id=batch_id, generation=generation, commit_ms=round((time.monotonic() - started) * 1000, 1))
            return
        if counted:
            self._remember(counted)
            self.last_commit = time.monotonic()
        for m in batch:
            self.window.saw(m.published)
        self.window.evict()
        committed_ms = round((time.monotonic() - started) * 1000, 1)
        self._ack(batch)
        self._count(counted=len(counted), duplicates=len(duplicates), malformed=len(malformed),
                    batches=1 if counted else 0)
        log("INFO", "visit batch", outcome="committed" if counted else "nothing_to_count", counted=len(counted),
            duplicates=len(duplicates), malformed=len(malformed), batch_id=batch_id if counted else None,
            generation=generation, pages=dict(collections.Counter(m.page for m in counted)), commit_ms=committed_ms,
            window=len(self.window), malformed_ids=[m.message_id for m in malformed][:10] or None)

    def commit(self, counted, generation, batch_id):
        """One transaction: the lease still ours (fencing), an Increment per page, the batch document."""
        db = clients.firestore()
        lease_ref = db.collection(FIRESTORE["leases"]).document(LEASE_NAME)
        document = batch_document(counted, generation)
        batch_ref = db.collection(FIRESTORE["batches"]).document(batch_id)

        @firestore.transactional
        def write(transaction):
            lease = lease_ref.get(transaction=transaction, retry=READ_RETRY, timeout=READ_TIMEOUT_SECONDS)
            if not lease_is(lease.to_dict() if lease.exists else None, self.owner, generation, utc_now()):
                raise LeaseLost()
            for page, visits in document["pages"].items():
                shard = shards_of(page).document(str(random.randrange(SHARDS_PER_PAGE)))
                transaction.set(shard, {FIRESTORE["count_field"]: firestore.Increment(visits)}, merge=True)
            transaction.create(batch_ref, document)

        write(db.transaction(max_attempts=3))

    def _settle(self, method, batch, **extra):
        path = subscriber().subscription_path(clients.project_id(), SUBSCRIPTION)
        ack_ids = [m.ack_id for m in batch]
        for start in range(0, len(ack_ids), 1000):  # well under a request's size limit
            method(request={"subscription": path, "ack_ids": ack_ids[start:start + 1000], **extra},
                   retry=ACK_RETRY, timeout=ACK_TIMEOUT_SECONDS)

    def _ack(self, batch):
        try:
            self._settle(subscriber().acknowledge, batch)
        except Exception as error:  # harmless: the redelivery is refused by the window
            self._count(ack_errors=1)
            log("WARNING", "visit ack", outcome="failed", error=repr(error), messages=len(batch))

    def _nack(self, batch):
        try:
            self._settle(subscriber().modify_ack_deadline, batch, ack_deadline_seconds=0)
        except Exception as error:  # they come back after their ack deadline instead
            log("WARNING", "visit nack", outcome="failed", error=repr(error), messages=len(batch))


PULLER = Puller()
if os.environ.get("STORE_MODE") == "pull":
    os.register_at_fork(after_in_child=lambda: None if PULLER.started_elsewhere() else PULLER.start())


@functions_framework.http
def store_inc_counter(request):
    """GET /: the puller's status (and its start, where no fork started it)."""
    PULLER.start()
    refused = check_request(request, ("GET",))
    if refused:
        return refused
    return json_reply(PULLER.status())

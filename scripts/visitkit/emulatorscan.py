"""How the Firestore emulator's cost of get-counter's read grows with the documents it holds.

Google's Firestore answers a query from an index, whatever else the database holds. The emulator
reads every stored document for each query, so on the twin get-counter's read slows down as the
store's dedup markers (one per visit) pile up, and deleting them does not undo it. This benchmark
starts a Firestore emulator of its own, stores markers as store-inc-counter does, and times a page's
aggregation query (the one get-counter and the runner's totals make) at each number of markers, then
once more after deleting every document.
"""
import datetime
import hashlib
import tempfile
import time

from visitkit.catalogue import FIRESTORE, PAGES, shards
from visitkit.errors import StackError
from visitkit.net import free_port, port_is_open, wait_until
from visitkit.stack import LocalStack, _environment, delete_all_documents, emulator_commands

DEFAULT_STEPS = (0, 10_000, 30_000, 60_000)
QUERIES = 300
BATCH = 500  # the most writes one Firestore batch takes
PROJECT = "emulator-scan"


def seed(client):
    """The page's two shards, as store-inc-counter leaves them."""
    for shard in range(2):
        shards(client, PAGES[0]).document(str(shard)).set({FIRESTORE["count_field"]: 1})


def query_ms(client, page, queries=QUERIES):
    """Mean wall time of one sum over the page's shards, ms (the client waits on the emulator alone)."""
    started = time.perf_counter()
    for _ in range(queries):
        shards(client, page).sum(FIRESTORE["count_field"], alias="total").get(timeout=30)
    return (time.perf_counter() - started) / queries * 1000


def add_markers(client, first, count):
    expire_at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=7)
    for start in range(first, first + count, BATCH):
        batch = client.batch()
        for n in range(start, min(first + count, start + BATCH)):
            marker = client.collection(FIRESTORE["markers"]).document(hashlib.sha256(f"bench-{n}".encode()).hexdigest())
            batch.create(marker, {"visit_type": PAGES[n % len(PAGES)], FIRESTORE["marker_expiry_field"]: expire_at})
        batch.commit(timeout=60)


def measure(steps=DEFAULT_STEPS, queries=QUERIES):
    """[(markers stored, ms per query)] on a fresh emulator, the last row (None, ms) after deleting them."""
    if list(steps) != sorted(set(steps)) or steps[0] < 0:
        raise StackError("marker counts must rise from 0 or more")
    from google.cloud import firestore

    port = free_port()
    command, _ = emulator_commands(port, free_port())
    with tempfile.TemporaryDirectory(prefix="emulator-scan-") as state_dir:
        stack = LocalStack(state_dir)  # for its way of starting and stopping a process group
        stack._start({"processes": []}, "firestore-emulator", command, port=port)
        try:
            if not wait_until(lambda: port_is_open(port), timeout=60):
                raise StackError("the Firestore emulator did not open its port within 60 s")
            with _environment(FIRESTORE_EMULATOR_HOST=f"127.0.0.1:{port}"):
                client = firestore.Client(project=PROJECT)
            seed(client)
            query_ms(client, PAGES[0])  # the JVM's first queries are slow: not the figure wanted
            rows, stored = [], 0
            for target in steps:
                add_markers(client, stored, target - stored)
                stored = target
                rows.append((stored, query_ms(client, PAGES[0], queries)))
            delete_all_documents(f"127.0.0.1:{port}", PROJECT)
            seed(client)
            rows.append((None, query_ms(client, PAGES[0], queries)))
            return rows
        finally:
            stack.down()


def scan_lines(rows):
    """The table, and the growth per 1,000 documents from the first count to the last."""
    lines = ["markers stored   ms per counter read (sum over 2 shards)   x the empty store's"]
    lines += [f"{'all deleted' if stored is None else f'{stored:,}':>14}   {ms:38.2f}   {ms / rows[0][1]:19.2f}x"
              for stored, ms in rows]
    counted = [row for row in rows if row[0] is not None]
    if len(counted) > 1 and counted[-1][0] > counted[0][0]:
        slope = (counted[-1][1] - counted[0][1]) / (counted[-1][0] - counted[0][0]) * 1000
        lines.append(f"each 1,000 stored documents add {slope:.2f} ms to every counter read "
                     "(Google's Firestore: nothing, it reads an index)")
    return lines

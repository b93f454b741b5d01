"""How the Firestore emulator's cost of get-counter's read grows with the documents it holds.

Google's Firestore answers a query from an index, whatever else the database holds. The emulator
reads every stored document for each query, so on the twin get-counter's read slows down as the
store's dedup markers (one per visit) pile up, and deleting them does not undo it. This benchmark
starts a Firestore emulator of its own, stores markers as store-inc-counter does, and times a page's
aggregation query (the one get-counter and the runner's totals make) at each number of markers, then
once more after deleting every document.

`benchmark(...)` writes a results folder under benchmarks/ (visitkit.benchmarks.benchfolder): benchmark.json
(FORMAT), summary.md, and queries.csv, every query's time.
"""
from __future__ import annotations

import csv
import datetime
import hashlib
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from visitkit.benchmarks import benchfolder
from visitkit.catalogue import FIRESTORE, PAGES, shards
from visitkit.errors import StackError
from visitkit.net import free_port, port_is_open, wait_until
from visitkit.twin.stack import LocalStack, _environment, delete_all_documents, emulator_commands

if TYPE_CHECKING:
    from google.cloud.firestore import Client as FirestoreClient

FORMAT = 1
KIND = "emulator-scan"
DEFAULT_STEPS = (0, 10_000, 30_000, 60_000)
QUERIES = 300
BATCH = 500  # the most writes one Firestore batch takes
PROJECT = "emulator-scan"
DELETED = "all deleted"  # queries.csv's and the table's name for the step after deleting every document


def seed(client: FirestoreClient) -> None:
    """The page's two shards, as store-inc-counter leaves them."""
    for shard in range(2):
        shards(client, PAGES[0]).document(str(shard)).set({FIRESTORE["count_field"]: 1})


def query_times(client: FirestoreClient, page: str, queries: int = QUERIES) -> list[float]:
    """Wall time of each sum over the page's shards, ms (the client waits on the emulator alone)."""
    times = []
    for _ in range(queries):
        started = time.perf_counter()
        shards(client, page).sum(FIRESTORE["count_field"], alias="total").get(timeout=30)
        times.append((time.perf_counter() - started) * 1000)
    return times


def add_markers(client: FirestoreClient, first: int, count: int) -> None:
    expire_at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=7)
    for start in range(first, first + count, BATCH):
        batch = client.batch()
        for n in range(start, min(first + count, start + BATCH)):
            marker = client.collection(FIRESTORE["markers"]).document(hashlib.sha256(f"bench-{n}".encode()).hexdigest())
            batch.create(marker, {"visit_type": PAGES[n % len(PAGES)], FIRESTORE["marker_expiry_field"]: expire_at})
        batch.commit(timeout=60)


def measure(steps: Sequence[int] = DEFAULT_STEPS, queries: int = QUERIES) -> list[tuple[int | None, list[float]]]:
    """[(markers stored, [ms of each query])] on a fresh emulator, the last row (None, [ms]) after deleting them."""
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
            query_times(client, PAGES[0])  # the JVM's first queries are slow: not the figure wanted
            rows: list[tuple[int | None, list[float]]] = []
            stored = 0
            for target in steps:
                add_markers(client, stored, target - stored)
                stored = target
                rows.append((stored, query_times(client, PAGES[0], queries)))
            delete_all_documents(f"127.0.0.1:{port}", PROJECT)
            seed(client)
            rows.append((None, query_times(client, PAGES[0], queries)))
            return rows
        finally:
            stack.down()


def benchmark(steps: Sequence[int] = DEFAULT_STEPS, queries: int = QUERIES,
              out_root: str | Path = benchfolder.BENCHMARKS_DIR,
              now: Callable[[], datetime.datetime] = datetime.datetime.now) -> tuple[Path, dict[str, Any]]:
    """Times the read at each number of markers; returns (results folder, record)."""
    started = now()  # the folder's name and the record's "when"
    with benchfolder.new_folder(KIND, out_root, started) as folder:
        rows = measure(steps, queries)
        with open(folder / "queries.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["markers", "ms"])
            writer.writerows([DELETED if stored is None else stored, f"{ms:.3f}"]
                             for stored, times in rows for ms in times)
        means = [{"markers": stored, "mean_ms": round(sum(times) / len(times), 3)} for stored, times in rows]
        record = {"format": FORMAT, "benchmark": KIND, "when": started.isoformat(timespec="seconds"),
                  "machine": benchfolder.machine(), "queries": queries, "steps": means,
                  "ms_per_1000_markers": growth(means)}
        benchfolder.write(folder, record, summary_lines(record, folder.name))
    return folder, record


def growth(steps: Sequence[Mapping[str, Any]]) -> float | None:
    """ms each 1,000 markers add to a read, from the first count to the last (None without two counts)."""
    counted = [step for step in steps if step["markers"] is not None]
    if len(counted) < 2 or counted[-1]["markers"] <= counted[0]["markers"]:
        return None
    first, last = counted[0], counted[-1]
    return round((last["mean_ms"] - first["mean_ms"]) / (last["markers"] - first["markers"]) * 1000, 3)


def load(folder: str | Path) -> dict[str, Any]:
    return benchfolder.load(folder, KIND, FORMAT)


def render(record: Mapping[str, Any]) -> list[str]:
    """The Markdown table of a record: the mean read at each step, and as a multiple of the empty store's."""
    empty = record["steps"][0]["mean_ms"]
    lines = ["| markers stored | ms per counter read (sum over 2 shards) | x the empty store's |", "|---:|---:|---:|"]
    lines += [f"| {step_name(step['markers'])} | {step['mean_ms']:.2f} | {step['mean_ms'] / empty:.2f}x |"
              for step in record["steps"]]
    return lines


def step_name(markers: int | None) -> str:
    return DELETED if markers is None else f"{markers:,}"


def summary_lines(record: Mapping[str, Any], name: str) -> list[str]:
    machine = record["machine"]
    lines = [f"# Firestore emulator scan ({name})", "",
             f"get-counter's read (an aggregation query summing a page's 2 shards) on a Firestore emulator of its "
             f"own ({machine['processor']}, {machine['cores']} cores): the mean of {record['queries']} queries at each "
             "number of dedup markers stored, then once more after deleting every document.", "", *render(record)]
    if record["ms_per_1000_markers"] is not None:
        lines += ["", f"each 1,000 stored documents add {record['ms_per_1000_markers']:.2f} ms to every counter read "
                      "(Google's Firestore: nothing, it reads an index)"]
    return lines

"""The pull store's puller (functions/store_batch.py) at the knee: its memory at a lease retake.

A retake reads back every visit id of visit_batches published within the dedup window and the load's
margin (store_batch.load_window: DEDUP_WINDOW_MINUTES + LOAD_MARGIN_SECONDS), so at the knee it holds
the capacity model's knee visits/s (scripts/predict's profile) times that span. This benchmark starts
Firestore and Pub/Sub emulators of its own, writes that many ids as the store writes them
(store_batch.batch_document, pull.batch_size ids a document), starts store-inc-counter as the puller
(the iteration's environment, functions-framework as Cloud Run runs it: gunicorn's master and one
worker) and makes it retake its lease twice. Each time the lease document is set to another owner's
next generation, already lapsed, as a takeover leaves it; the puller takes it back at the generation
after that and loads its window afresh: the first time with its window still empty, the second with
the full window of the first retake held when the load begins.

Memory per phase: the worker's peak resident set (VmHWM, reset before each phase through clear_refs)
plus what gunicorn's master holds alone (its unique set), as its container holds them, against the
memory the iteration deploys for store-inc-counter (HEADROOM times the peak at least).

`benchmark(...)` writes a results folder under benchmarks/ (visitkit.benchmarks.benchfolder): benchmark.json
(FORMAT), summary.md, and memory.csv (the instance's memory sampled through the run).
"""
import concurrent.futures
import csv
import datetime
import hashlib
import importlib
import json
import math
import random
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil

from visitkit.benchmarks import benchfolder
from visitkit.catalogue import CATALOGUE, FIRESTORE, PAGES, PUSH_FUNCTION
from visitkit.errors import VisitkitError
from visitkit.model import capacity
from visitkit.model.cost import memory_gib
from visitkit.net import free_port, port_is_open, wait_until
from visitkit.paths import FUNCTIONS_DIR, ITERATIONS_DIR, from_root
from visitkit.settings import Settings, function_environment, load_settings
from visitkit.twin.profile import load_profile
from visitkit.twin.stack import LocalStack, _environment, _put_json, emulator_commands, function_command

FORMAT = 1
KIND = "puller-memory"
DEFAULT_ITERATION = ITERATIONS_DIR / "iteration-7"
PROFILE = "study"  # scripts/predict's default: the knee the iteration's docs cite
HEADROOM = 1.5  # the memory deployed should be at least this many times the peak
PROJECT = "demo-puller-memory"
TOPIC = SUBSCRIPTION = "visits"
SPREAD_S = 60  # the ids' publish times lie in the minute before they are written: every load that begins
# within the window's span and margin less that minute after the writing began reads all of them (checked)
DOCUMENTS_PER_COMMIT = 20  # ~0.8 MB a commit at 1,000 ids a document, within a commit's 10 MiB
WRITERS = 4
SAMPLE_EVERY_S = 0.25
RETAKE_TIMEOUT_S = 900
OTHER_OWNER = "puller-memory-benchmark"  # the takeover's owner
PHASES = ("idle", "first load", "retake")
FIELDS = ("seconds", "phase", "worker_rss_mib", "master_uss_mib", "instance_mib")


def blob_id(path: Path) -> str:
    """The file's git blob id (`git hash-object`): which version of the puller a record measured."""
    content = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def store_module() -> ModuleType:
    """functions/store_batch.py as the puller runs it (with its imports from functions/)."""
    sys.path.insert(0, str(FUNCTIONS_DIR))
    try:
        return importlib.import_module("store_batch")
    finally:
        sys.path.remove(str(FUNCTIONS_DIR))


def window_ids(settings: Settings, store: ModuleType) -> dict[str, Any]:
    """The knee's visits/s and the ids a retake at the knee reads back (and the ids the window holds
    between loads, the dedup window's span alone)."""
    knee = capacity.predict(settings, load_profile(PROFILE)).knee_visits_per_s
    span_s = settings.pull.dedup_window_minutes * 60
    return {"profile": PROFILE, "knee_visits_per_s": round(knee, 1), "window_s": span_s,
            "load_margin_s": store.LOAD_MARGIN_SECONDS, "ids_held": round(knee * span_s),
            "ids": round(knee * (span_s + store.LOAD_MARGIN_SECONDS))}


def batch_documents(store: ModuleType, ids: int, batch_size: int, generation: int,
                    until: float) -> Iterator[dict[str, Any]]:
    """visit_batches documents of `ids` new visit ids in all, `batch_size` a document, as the store writes
    them, their publish times spread over the SPREAD_S seconds before `until`."""
    documents = math.ceil(ids / batch_size)
    for n in range(documents):
        count = min(batch_size, ids - n * batch_size)
        first = until - SPREAD_S * (n + 1) / documents
        step = SPREAD_S / documents / count
        yield store.batch_document([store.Message("", "", random.choice(PAGES), str(uuid.uuid4()), first + i * step)
                                    for i in range(count)], generation)


def write_batches(client: Any, documents: Iterator[dict[str, Any]]) -> int:
    """Creates the documents DOCUMENTS_PER_COMMIT a commit, WRITERS commits at once; returns how many."""
    collection = client.collection(FIRESTORE["batches"])

    def commit(chunk: list[dict[str, Any]]) -> int:
        batch = client.batch()
        for document in chunk:
            batch.create(collection.document(uuid.uuid4().hex), document)
        batch.commit(timeout=120)
        return len(chunk)

    written = 0
    with concurrent.futures.ThreadPoolExecutor(WRITERS) as pool:
        pending: set[concurrent.futures.Future[int]] = set()
        chunk: list[dict[str, Any]] = []
        for document in documents:
            chunk.append(document)
            if len(chunk) == DOCUMENTS_PER_COMMIT:
                pending.add(pool.submit(commit, chunk))
                chunk = []
            if len(pending) >= 2 * WRITERS:  # a bounded queue: the documents are made as they are written
                done, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
                written += sum(future.result() for future in done)
        if chunk:
            pending.add(pool.submit(commit, chunk))
        written += sum(future.result() for future in pending)
    return written


def status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as answer:
        return json.loads(answer.read())


def worker_of(master: psutil.Process) -> psutil.Process:
    """gunicorn's worker, where the puller runs (the iteration's concurrency: one worker)."""
    workers = master.children()
    if len(workers) != 1:
        raise VisitkitError(f"the puller's master has {len(workers)} children, not its one worker")
    return workers[0]


def mib(size: float) -> float:
    return round(size / 2**20, 1)


def peak_rss(process: psutil.Process) -> int:
    """The process's peak resident set since its start or the last reset_peak (VmHWM), in bytes."""
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise VisitkitError(f"no VmHWM in /proc/{process.pid}/status")


def reset_peak(process: psutil.Process) -> None:
    Path(f"/proc/{process.pid}/clear_refs").write_text("5")  # Linux: VmHWM starts again from the current RSS


class Sampler:
    """The instance's memory every SAMPLE_EVERY_S, labelled with the phase under way, for memory.csv."""

    def __init__(self, master: psutil.Process, worker: psutil.Process):
        self.master, self.worker, self.phase = master, worker, PHASES[0]
        self.rows: list[dict[str, Any]] = []
        self.started, self.stop = time.monotonic(), threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_EVERY_S):
            worker, master = self.worker.memory_info().rss, self.master.memory_full_info().uss
            self.rows.append({"seconds": round(time.monotonic() - self.started, 2), "phase": self.phase,
                              "worker_rss_mib": mib(worker), "master_uss_mib": mib(master),
                              "instance_mib": mib(worker + master)})

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def retake(db: Any, lease: str, port: int, worker: psutil.Process, master: psutil.Process) -> dict[str, Any]:
    """A takeover and a takeback: the lease set to another owner's next generation, lapsed; the puller
    takes it back at the one after and loads its window afresh. Its figures, memory in MiB."""
    before = status(port)
    reset_peak(worker)
    began = time.monotonic()
    taken_back = before["generation"] + 2
    db.collection(FIRESTORE["leases"]).document(lease).set(
        {"owner": OTHER_OWNER, "generation": taken_back - 1, "expires_at": datetime.datetime.now(datetime.UTC)})

    def loaded() -> dict[str, Any] | None:
        now = status(port)
        return now if now["generation"] == taken_back and now["pulling"] else None

    after = wait_until(loaded, timeout=RETAKE_TIMEOUT_S, interval=0.5)
    if after is None:
        raise VisitkitError(f"the puller did not take its lease back and load its window within {RETAKE_TIMEOUT_S} s")
    master_uss, worker_peak = master.memory_full_info().uss, peak_rss(worker)
    return {"window_before": before["window"], "window": after["window"], "generation": after["generation"],
            "retake_s": round(time.monotonic() - began, 1), "worker_peak_mib": mib(worker_peak),
            "master_uss_mib": mib(master_uss), "instance_peak_mib": mib(worker_peak + master_uss),
            "instance_after_mib": mib(worker.memory_info().rss + master_uss)}


def measure(iteration: str | Path = DEFAULT_ITERATION,
            ids: int | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the record's measured part, memory.csv's rows): the puller of the iteration's settings through an idle
    start and two retakes with the knee's window (or `ids` ids)."""
    settings = load_settings(iteration)
    if not settings.pulls:
        raise VisitkitError(f"{iteration}: store_mode is not \"pull\": no puller to measure")
    store = store_module()
    window = window_ids(settings, store)
    count = window["ids"] if ids is None else ids
    from google.cloud import firestore

    firestore_port, pubsub_port, port = free_port(), free_port(), free_port()
    firestore_command, pubsub_command = emulator_commands(firestore_port, pubsub_port)
    with tempfile.TemporaryDirectory(prefix="puller-memory-") as state_dir:
        stack = LocalStack(state_dir)  # for its way of starting and stopping process groups
        state: dict[str, Any] = {"processes": []}
        try:
            stack._start(state, "firestore-emulator", firestore_command, port=firestore_port)
            stack._start(state, "pubsub-emulator", pubsub_command, port=pubsub_port)
            if not wait_until(lambda: port_is_open(firestore_port) and port_is_open(pubsub_port), timeout=90):
                raise VisitkitError("the emulators did not open their ports within 90 s")
            hosts = {"FIRESTORE_EMULATOR_HOST": f"127.0.0.1:{firestore_port}",
                     "PUBSUB_EMULATOR_HOST": f"127.0.0.1:{pubsub_port}"}
            pubsub = f"http://{hosts['PUBSUB_EMULATOR_HOST']}/v1/projects/{PROJECT}"
            wait_until(lambda: _try_put(f"{pubsub}/topics/{TOPIC}", {}), timeout=60, interval=0.5)
            _put_json(f"{pubsub}/subscriptions/{SUBSCRIPTION}", {"topic": f"projects/{PROJECT}/topics/{TOPIC}"})
            with _environment(**hosts):
                db = firestore.Client(project=PROJECT)
            env = {**function_environment(settings, PUSH_FUNCTION, project=PROJECT, topic=TOPIC,
                                          pull_subscription=SUBSCRIPTION),
                   **hosts, "PYTHONUNBUFFERED": "1", "K_SERVICE": CATALOGUE[PUSH_FUNCTION].service}
            master = psutil.Process(stack._start(state, "puller", function_command(PUSH_FUNCTION, port), env=env,
                                                 port=port).pid)
            if not wait_until(lambda: _try_status(port).get("pulling"), timeout=120):
                raise VisitkitError("the puller did not take its lease within 120 s")
            worker = worker_of(master)
            sampler = Sampler(master, worker)
            try:
                time.sleep(2)  # idle: the window empty, nothing pulled
                idle = {"instance_mib": mib(worker.memory_info().rss + master.memory_full_info().uss)}
                began = time.time()
                sampler.phase = "writing"
                written = write_batches(db, batch_documents(store, count, settings.pull.batch_size,
                                                            status(port)["generation"], began))
                written_s = time.time() - began
                phases = {}
                for phase in PHASES[1:]:
                    sampler.phase = phase
                    phases[phase] = retake(db, store.LEASE_NAME, port, worker, master)
                    if phases[phase]["window"] != count:
                        raise VisitkitError(f"{phase}: the window loaded {phases[phase]['window']:,} ids, not "
                                            f"the {count:,} written")
            finally:
                sampler.close()
        finally:
            stack.down()
    deployed = settings.functions[PUSH_FUNCTION].memory
    peak = max(phase["instance_peak_mib"] for phase in phases.values())
    first = phases["first load"]
    measured = {
        "iteration": from_root(iteration), "store_batch_blob": blob_id(FUNCTIONS_DIR / "store_batch.py"), **window,
        "ids_written": count, "batch_size": settings.pull.batch_size,
        "documents": written, "writing_s": round(written_s, 1), "idle": idle, "phases": phases,
        "bytes_per_id": round((first["instance_after_mib"] - idle["instance_mib"]) * 2**20 / count),
        "peak_mib": peak, "deployed": deployed, "deployed_mib": round(memory_gib(deployed) * 1024),
        "headroom": HEADROOM}
    return measured, sampler.rows


def _try_put(url: str, body: dict[str, Any]) -> bool:
    """The emulator's port opens before it answers: a PUT tried until it is."""
    try:
        _put_json(url, body)
        return True
    except OSError:
        return False


def _try_status(port: int) -> dict[str, Any]:
    try:
        return status(port)
    except OSError:
        return {}


def benchmark(iteration: str | Path = DEFAULT_ITERATION, ids: int | None = None,
              out_root: str | Path = benchfolder.BENCHMARKS_DIR,
              now: Callable[[], datetime.datetime] = datetime.datetime.now) -> tuple[Path, dict[str, Any]]:
    """The puller's memory at a retake with the knee's window; returns (results folder, record)."""
    started = now()
    with benchfolder.new_folder(KIND, out_root, started) as folder:
        measured, samples = measure(iteration, ids)
        with open(folder / "memory.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, FIELDS)
            writer.writeheader()
            writer.writerows(samples)
        record = {"format": FORMAT, "benchmark": KIND, "when": started.isoformat(timespec="seconds"),
                  "machine": benchfolder.machine(), **measured}
        benchfolder.write(folder, record, summary_lines(record, folder.name))
    return folder, record


def load(folder: str | Path) -> dict[str, Any]:
    return benchfolder.load(folder, KIND, FORMAT)


def fits(record: Mapping[str, Any]) -> bool:
    """Whether the memory deployed is at least HEADROOM times the peak."""
    return record["deployed_mib"] >= record["headroom"] * record["peak_mib"]


def render(record: Mapping[str, Any]) -> list[str]:
    """The Markdown table of a record: the instance's memory idle and at each retake, against the memory deployed."""
    lines = ["| phase | ids in the window when the load began | ids loaded | instance peak MiB | instance after MiB |",
             "|---|---:|---:|---:|---:|",
             f"| idle (window empty) | 0 | 0 | | {record['idle']['instance_mib']:,.1f} |"]
    lines += [f"| {name} | {phase['window_before']:,} | {phase['window']:,} | {phase['instance_peak_mib']:,.1f} | "
              f"{phase['instance_after_mib']:,.1f} |" for name, phase in record["phases"].items()]
    lines.append(f"| the peak x {record['headroom']:g} | | | {record['peak_mib'] * record['headroom']:,.1f} "
                 f"({'within' if fits(record) else 'beyond'} the {record['deployed_mib']:,} deployed) | |")
    return lines


def summary_lines(record: Mapping[str, Any], name: str) -> list[str]:
    machine = record["machine"]
    return [f"# Puller memory ({name})", "",
            f"store-inc-counter as the pull store's puller (functions/store_batch.py of git blob "
            f"{record['store_batch_blob'][:12]}; {record['iteration']}'s settings, functions-framework "
            f"with its master and one worker; {machine['processor']}, {machine['cores']} cores, Python "
            f"{machine['python']}), against Firestore and Pub/Sub emulators. The knee: "
            f"{record['knee_visits_per_s']:,.1f} visits/s (capacity model, profile {record['profile']}); a retake "
            f"loads the ids published within the dedup window and the load's margin, {record['window_s']:,} + "
            f"{record['load_margin_s']:,} s: {record['ids']:,} ids ({record['ids_held']:,} within the window "
            f"alone). {record['ids_written']:,} ids written in {record['documents']:,} batch documents of up to "
            f"{record['batch_size']:,}; two retakes, each a takeover left to lapse and the lease taken back, the "
            "second with the first one's window held when its load began.", "",
            *render(record), "",
            f"Instance memory: the worker's peak resident set (VmHWM, reset before each retake) plus what gunicorn's "
            f"master holds alone (its unique set); {record['bytes_per_id']:,} bytes per id held (the first load's "
            f"resident growth over the idle instance). Peak {record['peak_mib']:,.1f} MiB; x{record['headroom']:g} = "
            f"{record['peak_mib'] * record['headroom']:,.1f} MiB against {record['deployed_mib']:,} MiB deployed.", "",
            "Not measured here: a window the puller built by counting rather than loading (each id with its own "
            "publish time, a float more an id, the knee's window alone between loads), which a retake lets go of "
            "before it loads all the same; the deployed runtime's Python (infra/main.tf's python_runtime) rather than "
            "this machine's."]

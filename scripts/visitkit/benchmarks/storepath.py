"""How fast the local store path drains a backlog, with each iteration's settings, side by side.

For each settings file: start the local stack, publish N visits straight into the Pub/Sub topic
(a backlog at once, as after a load peak), and time until Firestore holds all of them. Reports
the drain rate, store-inc-counter's service time, the most store requests HAProxy saw in flight,
and each rate as a ratio of the first one.

`benchmark(...)` writes a results folder under benchmarks/ (visitkit.benchmarks.benchfolder): benchmark.json
(FORMAT), summary.md, and per settings file a copy of it and <iteration>-drain.csv (seconds since
publishing began, visits stored, store requests in flight; every 0.2 s while it drained).
"""
import base64
import csv
import datetime
import json
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from visitkit.benchmarks import benchfolder
from visitkit.catalogue import PAGES, PUSH_FUNCTION
from visitkit.paths import ITERATIONS_DIR, SETTINGS_FILE
from visitkit.settings import Settings, load_settings
from visitkit.twin.profile import Profile, load_profile
from visitkit.twin.stack import LocalStack

FORMAT = 1
KIND = "store-path"
DEFAULT_SETTINGS = [ITERATIONS_DIR / f"iteration-{n}" / SETTINGS_FILE for n in (2, 3)]
DEFAULT_VISITS = 3000


def publish(stack: LocalStack, visits: int, batch: int = 500) -> None:
    state = stack.state()
    assert state is not None, "the stack is up"
    url = f"http://{state['pubsub']}/v1/projects/{state['project']}/topics/{state['topic']}:publish"
    for start in range(0, visits, batch):
        messages = [{"data": base64.b64encode(json.dumps({"visit_type": PAGES[i % len(PAGES)]}).encode()).decode()}
                    for i in range(start, min(visits, start + batch))]
        request = urllib.request.Request(url, data=json.dumps({"messages": messages}).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(request, timeout=60).close()


def measure(settings: Settings, visits: int, profile: Profile | None = None
            ) -> tuple[float, float | None, int, list[tuple[float, int | None, int | None]]]:
    """(drained msg/s, store service ms, most store requests in flight, [(seconds, stored, in flight)])
    for one Settings."""
    stack = LocalStack(tempfile.mkdtemp(prefix="benchmark-store-"))
    stack.up(settings, port=0, profile=profile)
    try:
        samples: list[tuple[float, int | None, int | None]] = []
        done = threading.Event()

        def watch():  # HAProxy's view of store-inc-counter, and the store's count, while it drains
            while not done.is_set():
                sample = stack.sample()
                samples.append((round(time.monotonic() - started, 2), sample["store"]["stored"],
                                sample["functions"][PUSH_FUNCTION]["in_flight"]))
                time.sleep(0.2)

        started = time.monotonic()
        publish(stack, visits)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        client = stack.firestore()
        while sum(stack.totals(client).values()) < visits:
            time.sleep(0.2)
        elapsed = time.monotonic() - started
        done.set()
        watcher.join()
        service_ms = stack.sample()["functions"][PUSH_FUNCTION]["service_ms"]
        most = max((in_flight for _, _, in_flight in samples if in_flight is not None), default=0)
        return visits / elapsed, service_ms, most, samples
    finally:
        stack.down()


def benchmark(paths: Iterable[str | Path] = DEFAULT_SETTINGS, visits: int = DEFAULT_VISITS,
              profile: Profile | None = None, out_root: str | Path = benchfolder.BENCHMARKS_DIR,
              now: Callable[[], datetime.datetime] = datetime.datetime.now) -> tuple[Path, dict[str, Any]]:
    """Drains a backlog with each settings file in turn; returns (results folder, record)."""
    profile = profile or load_profile()
    started = now()  # the folder's name and the record's "when"
    with benchfolder.new_folder(KIND, out_root, started) as folder:
        runs = []
        for path in map(Path, paths):
            settings, name = load_settings(path), path.parent.name
            rate, service_ms, in_flight, samples = measure(settings, visits, profile)
            (folder / f"{name}-{path.name}").write_bytes(path.read_bytes())
            with open(folder / f"{name}-drain.csv", "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["seconds", "stored", "in_flight"])
                writer.writerows(samples)
            store = settings.functions[PUSH_FUNCTION]
            runs.append({"settings": name, "instances": store.max_instances, "concurrency": store.concurrency,
                         "drained_per_s": round(rate, 1), "service_ms": service_ms, "most_in_flight": in_flight})
        record = {"format": FORMAT, "benchmark": KIND, "when": started.isoformat(timespec="seconds"),
                  "machine": benchfolder.machine(), "visits": visits, "profile": profile.describe(), "runs": runs}
        benchfolder.write(folder, record, summary_lines(record, folder.name))
    return folder, record


def load(folder: str | Path) -> dict[str, Any]:
    return benchfolder.load(folder, KIND, FORMAT)


def render(record: Mapping[str, Any]) -> list[str]:
    """The Markdown table of a record: one row per settings file, each rate also as a multiple of the first's."""
    first = record["runs"][0]["drained_per_s"]
    lines = ["| settings | store instances x concurrency | drained msg/s | service ms | most in flight | vs first |",
             "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {run['settings']} | {run['instances']}x{run['concurrency']} | {run['drained_per_s']:.0f} "
              f"| {run['service_ms']:.0f} | {run['most_in_flight']} | {run['drained_per_s'] / first:.2f}x |"
              for run in record["runs"]]
    return lines


def summary_lines(record: Mapping[str, Any], name: str) -> list[str]:
    machine = record["machine"]
    return [f"# Store path drain ({name})", "",
            f"{record['visits']:,} visits published at once into the local stack's Pub/Sub topic (a backlog, as after "
            "a load peak), timed until Firestore held all of them, once per settings file (latency profile "
            f"{record['profile']}; {machine['processor']}, {machine['cores']} cores).", "", *render(record), "",
            "service ms: HAProxy's average response time of store-inc-counter (over its last 1,024 requests); most "
            "in flight: the most store requests HAProxy saw at once, sampled every 0.2 s."]

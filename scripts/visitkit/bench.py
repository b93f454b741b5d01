"""How fast the local store path drains a backlog, with each iteration's settings, side by side.

For each settings file: start the local stack, publish N visits straight into the Pub/Sub topic
(a backlog at once, as after a load peak), and time until Firestore holds all of them. Reports
the drain rate, store-inc-counter's service time, the most store requests HAProxy saw in flight,
and each rate as a ratio of the first one.
"""
import base64
import json
import tempfile
import threading
import time
import urllib.request

from visitkit.catalogue import PAGES, PUSH_FUNCTION
from visitkit.paths import ITERATIONS_DIR, SETTINGS_FILE
from visitkit.profile import load_profile
from visitkit.settings import load_settings
from visitkit.stack import LocalStack

DEFAULT_SETTINGS = [ITERATIONS_DIR / f"iteration-{n}" / SETTINGS_FILE for n in (2, 3)]


def publish(stack, visits, batch=500):
    state = stack.state()
    url = f"http://{state['pubsub']}/v1/projects/{state['project']}/topics/{state['topic']}:publish"
    for start in range(0, visits, batch):
        messages = [{"data": base64.b64encode(json.dumps({"visit_type": PAGES[i % len(PAGES)]}).encode()).decode()}
                    for i in range(start, min(visits, start + batch))]
        request = urllib.request.Request(url, data=json.dumps({"messages": messages}).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(request, timeout=60).close()


def measure(settings, visits, profile=None):
    """(drained msg/s, store service ms, most store requests in flight) for one Settings."""
    stack = LocalStack(tempfile.mkdtemp(prefix="benchmark-store-"))
    stack.up(settings, port=0, profile=profile)
    try:
        most_in_flight, done = 0, threading.Event()

        def watch():  # HAProxy's view of store-inc-counter while it drains
            nonlocal most_in_flight
            while not done.is_set():
                most_in_flight = max(most_in_flight, stack.sample()["functions"][PUSH_FUNCTION]["in_flight"])
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
        return visits / elapsed, service_ms, most_in_flight
    finally:
        stack.down()


def store_path_table(paths, visits, profile=None):
    """The benchmark, as the lines of a Markdown table."""
    profile = profile or load_profile()
    rows = []
    for path in paths:
        settings = load_settings(path)
        store = settings.functions[PUSH_FUNCTION]
        rate, service_ms, in_flight = measure(settings, visits, profile)
        rows.append((path.parent.name, f"{store.max_instances}x{store.concurrency}", rate, service_ms, in_flight))
    lines = [f"store path, {visits} visits published at once, drained into Firestore "
             f"(latency profile {profile.describe()}):",
             "| settings | store instances x concurrency | drained msg/s | service ms | most in flight | vs first |",
             "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {name} | {limits} | {rate:.0f} | {service_ms:.0f} | {in_flight} | {rate / rows[0][2]:.2f}x |"
              for name, limits, rate, service_ms, in_flight in rows]
    return lines

"""Small helpers for the integration tests: HTTP calls, push bodies, one function server,
a port nothing listens on, and waiting for the store to settle."""
import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

from visitkit.twin import haproxy
from visitkit.catalogue import CATALOGUE
from visitkit.net import free_port, http_status, wait_until
from visitkit.twin.stack import PROJECT, SUBSCRIPTION, function_command


def call(url, method="GET", body=None, headers=None, timeout=30):
    """(status, parsed JSON or text) of one request; HTTP errors are answers, not exceptions."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            status, raw, kind = reply.status, reply.read(), reply.headers.get("Content-Type", "")
    except urllib.error.HTTPError as error:
        status, raw, kind = error.code, error.read(), error.headers.get("Content-Type", "")
    return status, json.loads(raw) if "json" in kind else raw.decode()


def push_body(page, message_id, data=None):
    """What the Pub/Sub emulator POSTs to a push endpoint for one message."""
    if data is None:
        data = base64.b64encode(json.dumps({"visit_type": page}).encode()).decode()
    return json.dumps({"subscription": f"projects/{PROJECT}/subscriptions/{SUBSCRIPTION}",
                       "message": {"data": data, "attributes": {"visit_type": page},
                                   "messageId": message_id, "publishTime": "2026-11-22T00:00:00Z"}}).encode()


@contextlib.contextmanager
def closed_address():
    """host:port where nothing listens, for as long as the test needs it: a socket bound but never
    listening refuses every connection, and holds the port so that nothing else (a stack started
    later) can take it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def platform_figures(stack):
    """Per function figures from HAProxy alone: no Firestore read, so usable while it is frozen."""
    return haproxy.function_figures(haproxy.show_stat(stack.state()["haproxy_stats"]), CATALOGUE)


def relay_figures(stack):
    """The push relay's figures when the stack delivers through one, else None."""
    port = stack.state().get("push_stats_port")
    if not port:
        return None
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as reply:
        return json.load(reply)


def store_activity(stack):
    """(deliveries that reached store-inc-counter so far, deliveries under way or still owed).
    Owed: each failed push is followed by exactly one retry or a dead-letter, after a backoff."""
    store = platform_figures(stack)["store-inc-counter"]
    busy = store["in_flight"] + store["queued"]
    relay = relay_figures(stack)
    if relay:
        busy += relay["in_flight"] + max(0, relay["failures"] - relay["retries"] - relay["dead_lettered"])
    return store["requests"], busy


# Longer than the wait before Pub/Sub's own push sends a message again after a failed delivery
# (about 1 s), so a redelivery still owed shows up inside the hold. The push relay, whose backoff
# is longer, says itself which retries it still owes (store_activity).
HOLD_SECONDS = 5.0


def settle(stack, low, high=None, timeout=180, hold=HOLD_SECONDS):
    """Waits until the store has caught up, then holds; returns the totals.

    Caught up: every page holds at least low[page] visits and nothing is in flight or queued to
    store-inc-counter. Held: no delivery at all has reached it for `hold` seconds since. A page
    above high[page] (default: low) fails at once: a visit was counted twice; so do totals that
    move during the hold (a late redelivery counted) and a store that does not catch up in time."""
    high = high or low

    def checked():
        totals = stack.totals()
        over = {page: (totals[page], high[page]) for page in high if totals[page] > high[page]}
        assert not over, f"counted more than expected (page: (stored, most expected)): {over}"
        return totals

    deadline = time.monotonic() + timeout
    while True:
        totals = checked()
        deliveries, busy = store_activity(stack)
        if all(totals[page] >= low[page] for page in low) and not busy:
            break
        assert time.monotonic() < deadline, f"the store did not catch up: {totals}, expected at least {low}"
        time.sleep(0.5)
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < hold:
        time.sleep(0.5)
        now_deliveries, busy = store_activity(stack)
        assert checked() == totals, f"counted after the backlog was empty: {totals} -> {stack.totals()}"
        if busy or now_deliveries != deliveries:  # a redelivery arrived: hold again from here
            deliveries, quiet_since = now_deliveries, time.monotonic()
        assert time.monotonic() < deadline + hold, "deliveries to store-inc-counter never stopped"
    return totals


@contextlib.contextmanager
def function_process(function, stdout=subprocess.DEVNULL, **env):
    """One real functions-framework server of a function (say "inc-counter"), started as the stack
    starts an instance, with the environment given: (its URL, its process). stdout=subprocess.PIPE
    keeps its log lines for process.communicate()."""
    port = free_port()
    process = subprocess.Popen(function_command(function, port),
                               env={**os.environ, "GOOGLE_CLOUD_PROJECT": PROJECT, "THREADS": "1", **env},
                               stdout=stdout, stderr=subprocess.DEVNULL, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        assert wait_until(lambda: http_status(url) is not None, timeout=30), f"{function} did not start"
        yield url, process
    finally:
        process.kill()
        process.wait()


@contextlib.contextmanager
def function_server(function, **env):
    """function_process's URL alone."""
    with function_process(function, **env) as (url, _):
        yield url


def rehearsal_missing():
    """Why the rehearsal's Terraform cannot run here ("" when it can): terraform and go on PATH, and the
    providers' schemas beside the checkout."""
    from visitkit.errors import GcpError
    from visitkit.rehearsal import terraform

    if shutil.which("terraform") is None or shutil.which("go") is None:
        return "needs terraform and go on PATH"
    try:
        terraform.schema_json()
    except GcpError as error:
        return str(error)
    return ""

"""Small helpers for the integration tests: HTTP calls, push bodies, polling, one function server."""
import base64
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

from visitkit.net import free_port, http_status
from visitkit.stack import FUNCTIONS_SOURCE


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
    return json.dumps({"subscription": "projects/demo-visit-counter/subscriptions/store-inc-counter",
                       "message": {"data": data, "attributes": {"visit_type": page},
                                   "messageId": message_id, "publishTime": "2026-11-22T00:00:00Z"}}).encode()


def wait_for(condition, timeout=120, interval=0.5):
    """Polls until condition() is truthy; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


@contextlib.contextmanager
def function_server(target, **env):
    """One real functions-framework server of a function, with the environment given."""
    port = free_port()
    command = [sys.executable, "-m", "functions_framework", "--target", target,
               "--source", str(FUNCTIONS_SOURCE), "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, env={**os.environ, "GOOGLE_CLOUD_PROJECT": "demo-visit-counter",
                                             "THREADS": "1", **env},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        assert wait_for(lambda: http_status(url) is not None, timeout=30, interval=0.2), f"{target} did not start"
        yield url
    finally:
        process.kill()
        process.wait()

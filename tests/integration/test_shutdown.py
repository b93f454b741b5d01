"""Cloud Run sends an instance SIGTERM and stops it 10 s later: functions-framework's gunicorn lets the
requests in flight finish, and each of the instance's processes logs its end before it exits."""
import json
import signal
import subprocess
import time

import pytest
from helpers import call

from visitkit.net import free_port, http_status, wait_until
from visitkit.twin.stack import function_command

pytestmark = pytest.mark.timeout(60)
GRACE_S = 10  # from SIGTERM to the end, on Cloud Run


def test_an_instance_logs_its_end_after_sigterm_within_the_grace():
    port = free_port()
    server = subprocess.Popen(function_command("serve-page", port), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, env={"PATH": "/usr/bin:/bin", "THREADS": "4", "K_SERVICE": "app"})
    try:
        url = f"http://127.0.0.1:{port}"
        assert wait_until(lambda: http_status(url) is not None, timeout=30), "serve-page did not start"
        assert call(f"{url}/?view=home")[0] == 200
        started = time.monotonic()
        server.send_signal(signal.SIGTERM)  # to the server's main process, as Cloud Run signals the container
        out, _ = server.communicate(timeout=GRACE_S)
        took = time.monotonic() - started
    finally:
        server.kill()
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    stopping = [line for line in lines if line["message"] == "instance stopping"]
    assert [line["message"] for line in lines][0] == "instance started"
    assert stopping and all(line["service"] == "app" and line["uptime_s"] > 0 for line in stopping)
    assert took < GRACE_S and server.returncode == 0

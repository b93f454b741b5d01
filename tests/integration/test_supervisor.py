"""The supervisor restarts a child that exits, and stops it when asked (a real child process)."""
import json
import os
import sys
import threading
import time

import pytest

from visitkit.twin.supervisor import supervise

pytestmark = pytest.mark.timeout(60)  # seconds: each test takes one or two


def test_a_crashed_child_is_started_again_and_counted(tmp_path):
    restarts, stopping = tmp_path / "restarts.jsonl", threading.Event()
    crash = [sys.executable, "-c", "import sys; sys.exit(3)"]
    worker = threading.Thread(target=supervise, args=("demo-0", crash, restarts, 0.05, stopping))
    worker.start()
    deadline = time.monotonic() + 20
    while (not restarts.exists() or len(restarts.read_text().splitlines()) < 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    stopping.set()
    worker.join(timeout=15)
    lines = [json.loads(line) for line in restarts.read_text().splitlines()]
    assert len(lines) >= 2 and not worker.is_alive()
    assert lines[0]["instance"] == "demo-0" and lines[0]["exit_code"] == 3
    assert lines[1]["after_s"] > lines[0]["after_s"]  # dying at once again: it waits longer each time


def test_stopping_ends_a_running_child(tmp_path):
    stopping = threading.Event()
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    worker = threading.Thread(target=supervise, args=("demo-0", sleeper, tmp_path / "restarts.jsonl", 0.05, stopping))
    worker.start()
    time.sleep(0.5)
    pid = int((tmp_path / "demo-0.pid").read_text())
    stopping.set()
    worker.join(timeout=15)
    assert not worker.is_alive()
    assert not (tmp_path / "restarts.jsonl").exists()
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive

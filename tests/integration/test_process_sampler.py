"""Resource figures sampled from real processes (visitkit.twin.resources.ProcessSampler): a busy one shows
CPU, an idle one does not, and a watched process counts its children's."""
import os
import subprocess
import sys
import time

import pytest

from visitkit.twin import resources

pytestmark = pytest.mark.timeout(60)  # seconds: each test takes one or two


@pytest.fixture
def processes():
    """A busy and an idle Python process, each in its own process group (as the stack starts them)."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    yield busy, idle
    for process in (busy, idle):
        process.kill()
        process.wait()


def test_a_busy_process_shows_cpu_and_an_idle_one_does_not(processes):
    busy, idle = processes
    sampler = resources.ProcessSampler(lambda: {"get-counter": [busy.pid], "haproxy": [idle.pid]})
    first = sampler.sample()
    assert first["get-counter"]["cpu_percent"] is None  # a difference needs two samples
    time.sleep(1.0)
    second = sampler.sample()
    assert second["get-counter"]["cpu_percent"] > 50  # one core, minus what the machine takes
    assert second["haproxy"]["cpu_percent"] < 5
    assert 1 < second["haproxy"]["rss_mb"] < 500


def test_watched_processes_count_their_children(processes):
    busy, _ = processes
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                               "subprocess.Popen([sys.executable, '-c', 'while True: pass']); time.sleep(60)"],
                              start_new_session=True)
    try:
        sampler = resources.ProcessSampler(lambda: {})
        sampler.watch("locust", parent.pid)
        sampler.sample()
        time.sleep(1.0)
        assert sampler.sample()["locust"]["cpu_percent"] > 50  # the child's CPU, not the sleeping parent's
    finally:
        os.killpg(parent.pid, 9)
        parent.wait()

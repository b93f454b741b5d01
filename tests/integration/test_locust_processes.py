"""--abort-on-fail ends Locust's test (visitkit.runs.load.LocustProcesses.end_test): real processes that stand in
for Locust's master and worker, signalled as a run signals them."""
import sys
import time

import pytest

from visitkit.runs import load

pytestmark = pytest.mark.timeout(60)


def process(tmp_path, on_int):
    """A process that, on SIGINT (Ctrl-C), runs `on_int` (Python) and exits 0; it says when it is ready."""
    ready = tmp_path / f"ready-{time.monotonic_ns()}"
    code = (f"import signal, sys, time, pathlib\n"
            f"def interrupted(*_):\n    {on_int}\n    sys.exit(0)\n"
            f"signal.signal(signal.SIGINT, interrupted)\npathlib.Path({str(ready)!r}).touch()\ntime.sleep(60)\n")
    return [sys.executable, "-c", code], ready


def wait_for(path):
    deadline = time.monotonic() + 20
    while not path.exists():
        assert time.monotonic() < deadline, "the process did not start"
        time.sleep(0.05)


def test_end_test_interrupts_the_master_alone_and_waits_for_its_files(tmp_path):
    written, worker_saw = tmp_path / "ledger.json", tmp_path / "worker-interrupted"
    master, master_ready = process(tmp_path, f"time.sleep(1); pathlib.Path({str(written)!r}).write_text('{{}}')")
    worker, worker_ready = process(tmp_path, f"pathlib.Path({str(worker_saw)!r}).touch()")
    with load.LocustProcesses([master, worker], stop_grace_s=1) as locust:
        wait_for(master_ready), wait_for(worker_ready)
        locust.end_test(grace_s=20)
        assert locust.returncode == 0 and written.exists()  # waited for the files, past stop()'s 1 s grace
        assert not worker_saw.exists()  # the master tells its workers; they are not signalled with it
        assert locust.processes[1].poll() is None


def test_end_test_stops_a_master_that_does_not_end_in_time(tmp_path):
    stuck, ready = process(tmp_path, "time.sleep(60)")
    with load.LocustProcesses([stuck], stop_grace_s=1) as locust:
        wait_for(ready)
        started = time.monotonic()
        locust.end_test(grace_s=1)
        assert locust.processes[0].wait(10) != 0 and time.monotonic() - started < 10  # killed by stop()

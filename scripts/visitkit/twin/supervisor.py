"""Restarts a crashed function instance after a short delay, as Cloud Run starts a new instance.

  python -m visitkit.twin.supervisor --name get-counter-0 --restarts FILE [--delay 1] -- COMMAND...

Runs COMMAND (one functions-framework server) as its child, in its own process group, so stopping
the group (`scripts/local down`) stops both and killing only the child is a crash. When the child
exits on its own it is started again after --delay seconds (doubled while it keeps dying within
STABLE_SECONDS of its start, up to MAX_DELAY, so a broken instance does not spin), and one JSON
line per restart is appended to the restarts file. The child's pid is kept in FILE's folder as
<name>.pid so a test can crash it.
"""
import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

STABLE_SECONDS = 10
MAX_DELAY = 30.0
# Stopped (SIGTERM to the supervisor: `down`, or the autoscaler scaling in), it gives its child SIGTERM and this
# long before SIGKILL, as Cloud Run does (https://cloud.google.com/run/docs/container-contract#lifecycle), and
# does not start it again: only a child that exits on its own is restarted.
GRACE_S = 10.0


def supervise(name: str, command: list[str], restarts_file: str | Path, delay: float = 1.0,
              stopping: threading.Event | None = None, clock: Callable[[], float] = time.monotonic) -> None:
    stopping = stopping or threading.Event()
    restarts_file = Path(restarts_file)
    pid_file = restarts_file.parent / f"{name}.pid"
    wait = delay
    while True:
        child = subprocess.Popen(command)
        pid_file.write_text(str(child.pid))
        started = clock()
        while child.poll() is None and not stopping.is_set():
            stopping.wait(0.2)
        if stopping.is_set():
            child.terminate()
            try:
                child.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
            return
        wait = delay if clock() - started > STABLE_SECONDS else min(MAX_DELAY, wait * 2 if wait else delay)
        if stopping.wait(wait):
            return
        with open(restarts_file, "a") as out:
            out.write(json.dumps({"time": time.time(), "instance": name, "exit_code": child.returncode,
                                  "after_s": wait}) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="visitkit.twin.supervisor", description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--restarts", required=True, type=Path)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the instance's command after --")
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    supervise(args.name, command, args.restarts, args.delay, stopping)
    return 0


if __name__ == "__main__":
    sys.exit(main())

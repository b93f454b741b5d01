"""Chaos's actions on real processes (sleeping stand-ins): they hit the processes they name, and
stalled processes are resumed on time and when chaos stops."""
import signal
import subprocess
import sys
import time

import pytest

from visitkit.twin import chaos

pytestmark = pytest.mark.timeout(60)  # seconds: each test takes one or two


class FakeStack:
    """What chaos asks a stack: the running instances, an instance's pid, and the process list (real processes)."""

    def __init__(self, pids, groups):
        self.pids, self.groups = pids, groups

    def running_instances(self, function, settings):
        return [f"{function}-{i}" for i in range(settings.functions[function].max_instances)]

    def instance_pid(self, name):
        return self.pids[name]

    def state(self):
        return {"processes": [{"name": name, "pid": pid} for name, pid in self.groups.items()]}


class Settings:
    functions = {name: type("F", (), {"max_instances": 1})() for name in
                 ("serve-page", "get-counter", "inc-counter", "store-inc-counter")}
    pulls = False  # a push store: the push relay is there to kill


def sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def state_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_pause_stops_a_process_and_resumes_it_on_time():
    target = sleeper()
    try:
        pids = {f"{name}-0": target.pid for name in Settings.functions}
        plan = chaos.ChaosPlan(every_s=0.2, actions=("pause-instance",), stall_s=(0.5, 0.5))
        run = chaos.Chaos(plan, FakeStack(pids, {}), Settings())
        run.start()
        deadline = time.monotonic() + 5
        while not run.events and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.1)
        assert state_of(target.pid) == "T"  # stopped
        time.sleep(1.0)
        run.stop()
        assert state_of(target.pid) in "SR"  # resumed
        assert run.events[0]["action"] == "pause-instance" and run.events[0]["seconds"] == 0.5
    finally:
        target.kill()
        target.wait()


def test_stopping_resumes_a_frozen_group_and_a_kill_kills():
    frozen, victim = sleeper(), sleeper()
    try:
        stack = FakeStack({"push-relay": victim.pid}, {"firestore-emulator": frozen.pid})
        plan = chaos.ChaosPlan(every_s=0.2, actions=("freeze-firestore",), stall_s=(30, 30))
        run = chaos.Chaos(plan, stack, Settings())
        run.start()
        time.sleep(0.6)
        assert state_of(frozen.pid) == "T"
        run.stop()  # long before the 30 s: stopping must not leave it frozen
        assert state_of(frozen.pid) in "SR"
        killer = chaos.Chaos(chaos.ChaosPlan(every_s=0.2, actions=("kill-push",)), stack, Settings())
        killer.start()
        assert victim.wait(timeout=5) == -signal.SIGKILL
        killer.stop()
        assert killer.events[0]["target"] == "push-relay"
    finally:
        for process in (frozen, victim):
            process.kill()
            process.wait()

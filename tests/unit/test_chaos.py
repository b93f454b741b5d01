"""The chaos schedule and its figures: plans are read and checked, actions hit the processes they
name, stalled processes are resumed, and the report's figures are worked out from the series."""
import os
import signal
import subprocess
import sys
import time

import pytest

from visitkit import chaos
from visitkit.errors import RunError


def test_the_default_plan_and_a_written_one():
    assert chaos.ChaosPlan.parse("") == chaos.ChaosPlan.parse("default") == chaos.ChaosPlan()
    plan = chaos.ChaosPlan.parse("every=5,seed=3,actions=kill-instance+pause-instance,stall=2-4")
    assert (plan.every_s, plan.seed, plan.actions, plan.stall_s) == (5.0, 3, ("kill-instance", "pause-instance"), (2.0, 4.0))


@pytest.mark.parametrize("text", ["every=0", "actions=explode", "stall=5", "stall=9-3", "often=1", "every=soon"])
def test_nonsense_plans_are_refused(text):
    with pytest.raises(RunError):
        chaos.ChaosPlan.parse(text)


class FakeStack:
    """The two things chaos asks a stack: an instance's pid, and the process list (real processes)."""

    def __init__(self, pids, groups):
        self.pids, self.groups = pids, groups

    def instance_pid(self, name):
        return self.pids[name]

    def state(self):
        return {"processes": [{"name": name, "pid": pid} for name, pid in self.groups.items()]}


class Settings:
    functions = {name: type("F", (), {"max_instances": 1})() for name in
                 ("serve-page", "get-counter", "inc-counter", "store-inc-counter")}


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


def history(failing_seconds):
    return [{"time": float(t), "users": 10, "failures_per_s": 1.0 if t in failing_seconds else 0.0}
            for t in range(100, 130)]


def test_recovery_is_the_time_to_five_calm_seconds():
    assert chaos.recovery_seconds(history({105, 106, 107, 109}), after=104) == 6  # calm from 110 on
    assert chaos.recovery_seconds(history(set()), after=104) == 0
    assert chaos.recovery_seconds(history(set(range(100, 130))), after=104) is None


def test_server_errors_around_an_event_per_function():
    samples = [{"time": t, "functions": {"inc-counter": {"responses_5xx": 2 * max(0, t - 10)}}} for t in range(0, 30)]
    errors = chaos.server_errors_around(samples, 12, 20)
    assert errors["inc-counter"] == 16 and errors["get-counter"] == 0


def test_figures_put_events_and_visits_together():
    record = {"plan": "every 20 s", "events": [{"time": 105.0, "action": "freeze-firestore", "target": "x", "seconds": 2}]}
    visits = {"total": {"acknowledged": 10, "stored": 10, "lost": 0, "duplicated": 0, "dead_lettered": None}}
    samples = [{"time": 100.0, "store": {"delivered": 12, "stored": 10}, "push": {"retries": 3}}]
    found = chaos.figures(record, history({107, 108}), samples, visits)
    assert found["events"][0]["recovery_s"] == 2 and found["visits"]["lost"] == 0
    assert found["redeliveries"] == 3 and found["deliveries_already_counted"] == 2


# ---- overload and recovery (a spike test) -----------------------------------------------------------
def spike_history():
    """20 users for 10 s (p95 100 ms), 200 users for 10 s (p95 9 s, failing), back to 20: p95 falls
    back under 150 ms 4 s after the spike and stays there."""
    rows = []
    for t in range(30):
        users = 200 if 10 <= t < 20 else 20
        p95 = 100.0 if t < 10 else 9000.0 if t < 20 else (3000.0 if t < 24 else 120.0)
        rows.append({"time": 1000.0 + t, "users": users, "p95_ms": p95, "failures_per_s": 5.0 if 12 <= t < 22 else 0.0})
    return rows


def test_a_spike_is_found_and_the_recovery_timed():
    from visitkit import overload

    failures = [("/inc-counter?visit_type=home", "HTTPError('429 Client Error: Too Many Requests')", 40),
                ("/get-counter?visit_type=home", "ConnectionTimeoutError", 3)]
    found = overload.figures(spike_history(), failures)
    assert found["spike_users"] == 200 and found["spike_s"] == 9
    assert found["baseline_p95_ms"] == 100 and found["spike_p95_ms"] == 9000
    assert found["recovery_s"] == 5  # calm from t=24; the spike's last second is t=19
    assert (found["refused_429"], found["other_errors"]) == (40, 3)


def test_no_recovery_when_latency_stays_high():
    from visitkit import overload

    rows = [{**row, "p95_ms": 9000.0 if row["time"] >= 1010 else 100.0} for row in spike_history()]
    assert overload.figures(rows, [])["recovery_s"] is None

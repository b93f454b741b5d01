"""The load generator's own health, per Locust process and second: its CPU, the lag of its event
loop (how late a 0.1 s sleep wakes: users wait that long on top of the system), and its users; on
the master's own rows, its view of the workers' heartbeats (WorkerView).

A saturated load generator understates the system: Locust warns once above 90 % CPU; this keeps
the timeline, so a report can say which process saturated, when, and whether before the knee.
Workers ship their samples with each stats report (every 3 s); the master (or the only process)
appends every row to the health file as it comes (HealthLog), so that the kit can watch them while
the load runs, and writes the file again in time order, with the exact requests and failures per
second, when the run ends.
"""
import csv
import os
import time

import gevent
import psutil
from locust.runners import STATE_MISSING, STATE_RUNNING, STATE_SPAWNING, STATE_STOPPED

PROBE_S = 0.1
SAMPLE_S = 1.0
PROCESS_COLUMNS = ("time", "process", "cpu_percent", "loop_lag_ms", "users")
# The master's view of its workers, on its own rows only (empty on the others, absent from older files).
WORKER_COLUMNS = ("workers_expected", "workers_connected", "workers_missing", "heartbeat_late_s", "rebalances")
HEALTH_COLUMNS = PROCESS_COLUMNS + WORKER_COLUMNS
PER_SECOND_COLUMNS = ("time", "requests", "failures")


class Probe:
    """Samples this process once a second, in a greenlet of its own; with a view (the master's), its
    columns too; with a log, appends each row to the health file as it is taken."""

    def __init__(self, runner, process_name, view=None, log=None):
        self.runner, self.process_name, self.view, self.log = runner, process_name, view, log
        self.samples = []  # rows in HEALTH_COLUMNS' order (a worker's: PROCESS_COLUMNS only)
        self.shipped = 0
        self._process = psutil.Process()
        self._process.cpu_percent()  # the first call only starts the count

    def start(self):
        return gevent.spawn(self.run)

    def run(self):
        while True:
            started, worst = time.monotonic(), 0.0
            while time.monotonic() - started < SAMPLE_S:
                before = time.monotonic()
                gevent.sleep(PROBE_S)
                worst = max(worst, time.monotonic() - before - PROBE_S)
            row = (round(time.time(), 1), self.process_name, self._process.cpu_percent(), round(1000 * worst, 1),
                   self.runner.user_count, *(self.view.columns() if self.view else ()))
            self.samples.append(row)
            if self.log:
                self.log.append([row])

    def take(self):
        """The samples since the last take (a worker's report)."""
        taken = self.samples[self.shipped:]
        self.shipped = len(self.samples)
        return taken


class WorkerView:
    """The master's view of its workers, read each second from Locust's MasterRunner (2.47, runners.py):
    the workers it expects, those connected and not missing, those Locust marked missing (no heartbeat
    for HEARTBEAT_LIVENESS = 3 beats of 1 s: heartbeat_worker), the longest any of them has now gone
    without a heartbeat (none once the test has stopped), and how many times the set of workers it
    dispatches users to changed while the test ran. Each such change makes Locust's dispatcher rebalance
    the users over the new set (dispatch.py add_worker/remove_worker): a worker too busy to beat has its
    users moved to the others (Locust issues #1158, #1843, #3065), then back when it beats again."""

    def __init__(self, runner, expected, now=time.time):
        self.runner, self.expected, self.now = runner, expected, now
        self.heard = {}  # client id -> when the master last heard it
        self.active = None  # the workers not missing, at the last look
        self.rebalances = 0
        events = runner.environment.events
        events.worker_connect.add_listener(self.heard_from)
        events.heartbeat_sent.add_listener(self.heard_from)  # fired on the master as it answers a heartbeat

    def heard_from(self, client_id, timestamp=None, **_kwargs):
        self.heard[client_id] = timestamp or self.now()

    def columns(self):
        """(expected, connected, missing, heartbeat_late_s, rebalances): WORKER_COLUMNS' values now."""
        now, clients = self.now(), list(self.runner.clients.values())
        active = frozenset(client.id for client in clients if client.state != STATE_MISSING)
        testing = self.runner.state in (STATE_SPAWNING, STATE_RUNNING)
        if testing and self.active is not None and active != self.active:
            self.rebalances += 1
        self.active = active
        late = round(max((now - self.heard.get(client.id, now) for client in clients), default=0.0), 1)
        if self.runner.state == STATE_STOPPED:  # quitting: the master no longer listens, whatever the workers do
            late = None
        return self.expected, len(active), len(clients) - len(active), late, self.rebalances


class HealthLog:
    """The health file, written as the run goes: a header at the start, then each row appended as it
    comes, so that the kit can watch it live; at the end the whole file again, in time order, replaced
    at once (never a half-written file to read)."""

    def __init__(self, path):
        self.path = path
        with open(path, "w", newline="") as f:
            csv.writer(f).writerow(HEALTH_COLUMNS)

    def append(self, rows):
        with open(self.path, "a", newline="") as f:
            csv.writer(f).writerows(padded(row) for row in rows)


def padded(row):
    """A row in HEALTH_COLUMNS' order: a worker's (PROCESS_COLUMNS only) with the master's columns empty."""
    return (*row, *([None] * (len(HEALTH_COLUMNS) - len(row))))


def write_health(path, samples):
    partial = f"{path}.partial"
    with open(partial, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(HEALTH_COLUMNS)
        out.writerows(padded(row) for row in sorted(samples, key=lambda row: (row[0], row[1])))
    os.replace(partial, path)


def write_per_second(path, total):
    """Requests and failures per second (Locust's own per-second counts, which every worker's
    reports add to: exact, where the history's running total moves in 3 s batches)."""
    seconds = sorted(set(total.num_reqs_per_sec) | set(total.num_fail_per_sec))
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(PER_SECOND_COLUMNS)
        out.writerows((second, total.num_reqs_per_sec.get(second, 0), total.num_fail_per_sec.get(second, 0))
                      for second in seconds)

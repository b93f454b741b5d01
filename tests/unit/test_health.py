"""locust/health.py without a Locust run: the master's view of its workers' heartbeats (WorkerView, on a
runner stand-in with Locust's own events), and the health file written as rows come, then whole."""
import csv
from types import SimpleNamespace

from locust.event import Events
from locust.runners import STATE_INIT, STATE_MISSING, STATE_RUNNING, STATE_STOPPED, STATE_STOPPING

import health
from visitkit.results import analysis


class Clock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


def a_master(*workers):
    clients = {name: SimpleNamespace(id=name, state=STATE_RUNNING) for name in workers}
    return SimpleNamespace(environment=SimpleNamespace(events=Events()), clients=clients, state=STATE_INIT)


def test_the_view_counts_missing_workers_their_late_heartbeats_and_each_change_of_the_set_during_the_test():
    clock, master = Clock(), a_master("w-1", "w-2")
    view = health.WorkerView(master, expected=2, now=clock)
    for name in ("w-1", "w-2"):
        master.environment.events.worker_connect.fire(client_id=name)
    assert view.columns() == (2, 2, 0, 0.0, 0)
    master.state = STATE_RUNNING
    clock.now += 2.5
    master.environment.events.heartbeat_sent.fire(client_id="w-1", timestamp=clock.now)
    assert view.columns() == (2, 2, 0, 2.5, 0)  # w-2 silent 2.5 s
    clock.now += 2.0
    master.clients["w-2"].state = STATE_MISSING  # Locust's heartbeat_worker: no beat for 3 beats
    assert view.columns() == (2, 1, 1, 4.5, 1)
    master.environment.events.heartbeat_sent.fire(client_id="w-2", timestamp=clock.now)
    master.clients["w-2"].state = STATE_RUNNING  # healed: its users rebalanced back
    assert view.columns() == (2, 2, 0, 2.0, 2)  # w-1 last heard 2 s ago
    master.state = STATE_STOPPING
    del master.clients["w-1"]  # stopped at the end: not a rebalance
    assert view.columns()[-1] == 2
    clock.now += 5
    master.state = STATE_STOPPED  # quitting: its listener is gone, so no heartbeat is heard, late or not
    assert view.columns() == (2, 1, 0, None, 2)


def test_the_file_grows_row_by_row_then_is_written_whole_in_time_order(tmp_path):
    path = tmp_path / "health.csv"
    log = health.HealthLog(path)
    master_row = (101.0, "master", 3.0, 1.0, 4, 2, 2, 0, 0.4, 0)
    worker_row = (100.0, "w-1", 40.0, 2.0, 2)  # a worker ships the process columns only
    log.append([master_row])
    log.append([worker_row])
    appended = list(csv.DictReader(path.open()))
    assert [row["process"] for row in appended] == ["master", "w-1"] and appended[1]["rebalances"] == ""
    health.write_health(path, [master_row, worker_row])
    written = analysis.health_rows(csv.DictReader(path.open()))
    assert [row["process"] for row in written] == ["w-1", "master"] and written[1]["heartbeat_late_s"] == 0.4
    assert not list(tmp_path.glob("*.partial"))


def test_the_kit_reads_the_columns_the_master_writes():
    assert tuple(analysis.HEALTH_WORKER_COLUMNS) == health.WORKER_COLUMNS

"""visitkit.runs.watch without a run: health.csv read as the master appends it and again once it is
rewritten, each warning shown once, and the threshold read from the load-generator benchmark."""
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from visitkit.errors import VisitkitError
from visitkit.model import fleet
from visitkit.runs import watch

COLUMNS = ["time", "process", "cpu_percent", "loop_lag_ms", "users", "workers_expected", "workers_connected",
           "workers_missing", "heartbeat_late_s", "rebalances"]


def lines(*rows):
    return "".join(",".join(str(value) for value in row) + "\n" for row in rows)


def worker(t, lag):
    return (t, "w-1", 10.0, lag, 5, "", "", "", "", "")


def test_the_tail_gives_complete_lines_once_and_starts_again_when_the_file_is_replaced(tmp_path):
    path = tmp_path / "health.csv"
    tail = watch.HealthTail(path)
    assert tail.read() == []  # not there yet
    path.write_text(lines(COLUMNS, worker(100.0, 1.0)) + "101.0,w-1,1")  # the master is mid-line
    assert [row["time"] for row in tail.read()] == ["100.0"]
    with open(path, "a") as f:
        f.write("0.0,2.0,5,,,,,\n")
    assert [(row["time"], row["cpu_percent"]) for row in tail.read()] == [("101.0", "10.0")]
    assert tail.read() == []
    replaced = tmp_path / "health.csv.partial"
    replaced.write_text(lines(COLUMNS, worker(100.0, 1.0), worker(101.0, 2.0)))
    os.replace(replaced, path)  # the master's final write, in time order
    assert [row["time"] for row in tail.read()] == ["100.0", "101.0"]


def test_each_warning_is_shown_once_as_it_comes_even_across_the_final_rewrite(tmp_path, monkeypatch):
    monkeypatch.setattr(watch, "threshold", lambda: {"cpu_percent": 70.0, "source": "benchmarks/loadgen-x"})
    path, shown = tmp_path / "health.csv", []
    state = SimpleNamespace(record={}, log=shown.append, load_started=90.0)
    live = watch.LiveWatch(state, path)
    assert state.record["generator_watch"] == {"cpu_percent": 70.0, "source": "benchmarks/loadgen-x", "live": True}
    path.write_text(lines(COLUMNS, worker(100.0, 1.0), worker(101.0, 800.0), worker(102.0, 900.0)))
    live.poll()
    assert shown == []
    with open(path, "a") as f:
        f.write(lines(worker(103.0, 700.0)))
    live.poll()
    assert shown == ["  WARNING load generator, 11 s into the load: w-1: event loop 800 ms late for 3 s running "
                     "(5 users); a knee from here on is Locust's, not the system's"]
    late_twice = [(100.0 + i, "w-2", 10.0, 800.0, 5, "", "", "", "", "") for i in range(2)]
    with open(path, "a") as f:
        f.write(lines(*late_twice))
    live.poll()
    final = tmp_path / "final.csv"
    final.write_text(lines(COLUMNS, *(worker(100.0 + i, 800.0) for i in range(6)), *late_twice,
                           (102.0, "w-2", 10.0, 1.0, 5, "", "", "", "", "")))
    os.replace(final, path)
    live.poll()
    assert len(shown) == 1  # w-2 was late twice, not four times: rows read again are not counted again


def test_the_threshold_is_the_benchmarks_holding_share_or_locusts_own_without_one(monkeypatch):
    monkeypatch.setattr(fleet, "load_benchmark", lambda: (Path("/somewhere/benchmarks/loadgen-1"), {"curve": 1}))
    monkeypatch.setattr(fleet, "holding_cpu_percent", lambda record: 62.0 if record == {"curve": 1} else None)
    assert watch.threshold() == {"cpu_percent": 62.0, "source": "benchmarks/loadgen-1"}

    def no_benchmark():
        raise VisitkitError("no load-generator benchmark")

    monkeypatch.setattr(fleet, "load_benchmark", no_benchmark)
    assert watch.threshold() == {"cpu_percent": 90.0, "source": None}
    assert "90 % CPU (Locust's own warning" in watch.plan_line()


@pytest.mark.parametrize("started, words", [(90.0, "11 s into the load"), (None, "during the load")])
def test_a_warning_says_when(started, words):
    row = {"time": 101.0, "process": "master", "users": 1200}
    assert words in watch.warning_line(row, "a worker's heartbeat 4 s late", started)
    assert "1,200 users" in watch.warning_line(row, "x", started)

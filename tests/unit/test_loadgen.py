"""Sizing a Locust fleet (visitkit.benchmarks.loadgen, visitkit.model.fleet) from a benchmark's files (pure logic)."""
import datetime
import json

import pytest

from visitkit.benchmarks import benchfolder, loadgen, registry
from visitkit.errors import VisitkitError
from visitkit.model.fleet import fleet_lines, fleet_plan, planning


def write_scenario(folder, name, users, rps, cpu, seconds=20, spawned_at=5):
    with open(folder / f"{name}-per_second.csv", "w") as f:
        f.write("time,requests,failures\n" + "".join(f"{1000 + t},{rps if t >= spawned_at else 1},0\n"
                                                     for t in range(seconds)))
    with open(folder / f"{name}-health.csv", "w") as f:
        f.write("time,process,cpu_percent,loop_lag_ms,users\n")
        for t in range(seconds):
            f.write(f"{1000 + t},master,3,1,{users}\n")
            f.write(f"{1000 + t},w1,{cpu if t >= spawned_at else 99},1,{users if t >= spawned_at else 1}\n")


def test_a_scenario_is_read_from_its_steady_part_after_spawning(tmp_path):
    write_scenario(tmp_path, "study-visitor", 2000, rps=1500, cpu=50)
    found = loadgen.figures(tmp_path, {"name": "study-visitor", "users": 2000, "think_time": "3-5"})
    assert found["rps"] == 1500 and found["worker_cpu_percent"] == 50  # spawning's busy seconds left out
    assert found["requests_per_core_second"] == 3000


def test_a_fleet_is_sized_by_the_planning_scenario_at_70_percent_of_a_core():
    record = {"planned_cpu": 0.7, "planning_scenario": "study-visitor",
              "scenarios": [{"name": "flat-out", "requests_per_core_second": 6000},
                            {"name": "study-visitor", "requests_per_core_second": 3000}]}
    plan = fleet_plan(10000, "e2-standard-4", "us-central1", record)
    # 30,000 requests/s over 2,100 per process: 15 processes, 4 per e2-standard-4
    assert (plan["rps"], plan["processes"], plan["worker_vms"]) == (30000, 15, 4)
    assert plan["usd_per_hour"] == pytest.approx(4 * 0.13402284 + 0.06701142 + 5 * 0.0014)
    assert "--workers 4" in fleet_lines(plan, "benchmarks/loadgen-x")[-1]
    with pytest.raises(VisitkitError):
        fleet_plan(0, record=record)


def test_the_latest_benchmark_is_read_and_its_format_checked(tmp_path):
    for name, fmt in (("loadgen-20260101-000000", 1), ("loadgen-20260202-000000", 99)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "benchmark.json").write_text(json.dumps({"format": fmt, "benchmark": "loadgen"}))
    with pytest.raises(VisitkitError, match="format 99"):
        loadgen.latest(tmp_path)
    with pytest.raises(VisitkitError, match="scripts/benchmark-loadgen"):
        loadgen.latest(tmp_path / "none")


def test_the_committed_benchmark_reads_and_sizes_a_fleet():
    folder, record = loadgen.latest()
    assert planning(record)["requests_per_core_second"] > 0
    assert fleet_plan(1000, record=record)["worker_vms"] >= 1


def test_the_committed_benchmark_renders_its_table():
    folder = benchfolder.BENCHMARKS_DIR / "loadgen-20261123-135950"
    table = [
        "| scenario | users | think time (s) | requests/s | worker CPU (% of a core) | requests per core-second "
        "| vs flat out |", "|---|---:|---:|---:|---:|---:|---:|",
        "| flat-out | 64 | 0 | 3,258 | 53 | 6,110 | 1.00x |",
        "| study-visitor | 2,000 | 3-5 | 1,499 | 53 | 2,851 | 0.47x |"]
    assert loadgen.render(loadgen.load(folder)) == registry.render(folder) == table
    assert "\n".join(table) in (folder / "summary.md").read_text()


def test_a_run_writes_a_folder_its_loader_reads_back_and_a_failed_one_leaves_none(tmp_path, monkeypatch):
    started = datetime.datetime(2026, 11, 23, 13, 59, 50)
    scenarios = [{"name": "flat-out", "users": 64, "think_time": "0", "rps": 3000.0, "worker_cpu_percent": 50.0,
                  "requests_per_core_second": 6000.0},
                 {"name": "study-visitor", "users": 2000, "think_time": "3-5", "rps": 1500.0,
                  "worker_cpu_percent": 50.0, "requests_per_core_second": 3000.0}]
    monkeypatch.setattr(loadgen, "measure", lambda folder, seconds, scenarios_: scenarios)
    clock = iter([started, started + datetime.timedelta(minutes=5)]).__next__  # a second reading would differ
    folder, record = loadgen.benchmark(10, out_root=tmp_path, now=clock)
    assert folder == tmp_path / "loadgen-20261123-135950" and loadgen.load(folder) == record
    assert record["when"] == "2026-11-23T13:59:50"  # the start, as the folder's name
    assert (folder / "summary.md").read_text() == "\n".join(loadgen.summary_lines(record, folder.name)) + "\n"

    def fails(*_):
        raise RuntimeError("the no-op server did not start")

    monkeypatch.setattr(loadgen, "measure", fails)
    with pytest.raises(RuntimeError):
        loadgen.benchmark(10, out_root=tmp_path / "failed", now=lambda: started)
    assert not list((tmp_path / "failed").iterdir())


def test_a_benchmark_is_chosen_by_path_or_by_name_and_by_default_the_newest(tmp_path):
    for name, rate in (("loadgen-20260101-000000", 1000), ("loadgen-20260202-000000", 2000)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "benchmark.json").write_text(json.dumps({"format": 1, "benchmark": "loadgen", "rate": rate}))
    assert loadgen.chosen(out_root=tmp_path)[1]["rate"] == 2000
    assert loadgen.chosen("loadgen-20260101-000000", tmp_path) == (tmp_path / "loadgen-20260101-000000",
                                                                   {"format": 1, "benchmark": "loadgen", "rate": 1000})
    assert loadgen.chosen(tmp_path / "loadgen-20260101-000000")[1]["rate"] == 1000
    with pytest.raises(VisitkitError, match="no benchmark.json"):
        loadgen.chosen("loadgen-20990101-000000", tmp_path)

"""Sizing a Locust fleet (visitkit.loadgen) from a benchmark's files (pure logic)."""
import json

import pytest

from visitkit import loadgen
from visitkit.errors import VisitkitError


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
    plan = loadgen.fleet_plan(10000, "e2-standard-4", "us-central1", record)
    # 30,000 requests/s over 2,100 per process: 15 processes, 4 per e2-standard-4
    assert (plan["rps"], plan["processes"], plan["worker_vms"]) == (30000, 15, 4)
    assert plan["usd_per_hour"] == pytest.approx(4 * 0.13402284 + 0.06701142 + 5 * 0.0014)
    assert "--workers 4" in loadgen.fleet_lines(plan, "benchmarks/loadgen-x")[-1]
    with pytest.raises(VisitkitError):
        loadgen.fleet_plan(0, record=record)


def test_the_latest_benchmark_is_read_and_its_format_checked(tmp_path):
    for name, fmt in (("loadgen-20260101-000000", 1), ("loadgen-20260202-000000", 99)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "benchmark.json").write_text(json.dumps({"format": fmt}))
    with pytest.raises(VisitkitError, match="format 99"):
        loadgen.latest(tmp_path)
    with pytest.raises(VisitkitError, match="scripts/benchmark-loadgen"):
        loadgen.latest(tmp_path / "none")


def test_the_committed_benchmark_reads_and_sizes_a_fleet():
    folder, record = loadgen.latest()
    assert loadgen.planning(record)["requests_per_core_second"] > 0
    assert loadgen.fleet_plan(1000, record=record)["worker_vms"] >= 1

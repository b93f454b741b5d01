"""The load generator's health (visitkit.results.generator) and the distributed run's files (pure logic)."""
import pytest
from fakes import a_summary

from visitkit.results import analysis, generator
from visitkit.reports import report
from visitkit import suite
from visitkit.errors import RunError
from visitkit.runs.config import NODE, LoadPlan


def rows(process, cpu, lag=1.0, start=100.0, users=10):
    return [{"time": start + i, "process": process, "cpu_percent": c, "loop_lag_ms": lag if isinstance(lag, float)
             else lag[i], "users": users + i} for i, c in enumerate(cpu)]


def test_a_process_is_saturated_after_hold_s_seconds_at_the_threshold_and_dated_to_their_start():
    health = rows("worker-1", [50, 95, 91, 92, 40]) + rows("worker-2", [95, 95, 50, 95, 95])
    found = generator.figures(health, knee_time=110.0, workers=2)
    assert found["per_process"]["worker-1"]["saturated_at"] == 101.0
    assert found["per_process"]["worker-2"]["saturated_at"] is None  # never 3 s running
    assert found["saturated"] == [{"process": "worker-1", "time": 101.0, "users": 11, "why": "CPU 95 %",
                                   "before_knee": True}]


def test_a_late_event_loop_saturates_too_and_after_the_knee_is_said_so():
    found = generator.figures(rows("master", [10] * 4, lag=[5.0, 150.0, 120.0, 300.0]), knee_time=100.5)
    assert found["saturated"][0]["why"] == "event loop 150 ms late" and not found["saturated"][0]["before_knee"]
    assert generator.figures([]) is None


def test_the_report_flags_a_load_generator_that_saturated_before_the_knee():
    summary = a_summary(load={"start": 90.0}, load_generator=generator.figures(rows("worker-1", [95] * 3), 120.0, 2),
                        ledger={"complete": False, "workers": 2, "missing_workers": ["worker-2"], "untracked": 1200})
    lines = "\n".join(report.generator_section(summary, ()))
    assert "a master and 2 workers" in lines and "**Saturated**: worker-1 (CPU 95 %) at 10 s, 10 users" in lines
    assert "before the knee" in lines and "worker-2 sent no final ledger" in lines
    assert "counted 1,200 visits beyond Locust's `--ledger-ids`" in lines


def test_rps_is_read_from_the_exact_per_second_counts_where_there_are_some():
    loaded = [{"time": float(t), "requests": 300 * (t // 3), "rps": 0.0} for t in range(100, 110)]  # 3 s batches
    per_second = {t: 100 for t in range(90, 120)}
    assert analysis.counted_rps(loaded, per_second=per_second) == [100.0] * 10
    assert analysis.counted_rps(loaded) != [100.0] * 10


def test_run_conf_holds_the_tests_options_and_the_master_adds_its_files():
    load = LoadPlan.build("endurance", stages="300:60", workers=3, local=True, retry_visits=2)
    conf = load.run_conf("http://system", ["--auth", "id-token", "--quota-project", "p"], stages="stages.csv")
    assert "host = http://system\n" in conf and "stages = stages.csv\n" in conf and "retry-visits = 2\n" in conf
    assert "auth = id-token\n" in conf and "quota-project = p\n" in conf and "headless = true\n" in conf
    assert "\ncsv" not in conf  # a worker refuses --csv-full-history without --csv: files are the master's
    master, worker = load.node_commands("run.conf", "out", 5600)
    assert master[1:3] == [str(NODE), "master"] and master[master.index("--expect-workers") + 1] == "3"
    assert worker[worker.index("--processes") + 1] == "3" and worker[worker.index("--master-port") + 1] == "5600"
    started = suite.node.master_command("run.conf", "out", 5600, 3)
    assert started[started.index("--ledger-file") + 1] == "out/ledger.json" and "--csv-full-history" in started


@pytest.mark.parametrize("options", [{"workers": 0}, {"workers": 65}, {"workers": 2, "processes": 2}])
def test_workers_are_checked(options):
    with pytest.raises(RunError):
        LoadPlan.build("breakpoint", **options)

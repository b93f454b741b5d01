"""The load generator's health (visitkit.results.generator) and the distributed run's files (pure logic)."""
import pytest
from fakes import a_summary

from visitkit import suite
from visitkit.errors import RunError
from visitkit.reports import report, verdict
from visitkit.results import analysis, generator
from visitkit.results import summary as summary_module
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


# ---- watched live: the warning, the knee after it, the master's view of the heartbeats ------------
def master_rows(start=100.0, late=(0.5,), missing=None, rebalances=None, expected=2):
    missing, rebalances = missing or [0] * len(late), rebalances or [0] * len(late)
    return [{"time": start + i, "process": "master", "cpu_percent": 5.0, "loop_lag_ms": 1.0, "users": 10,
             "workers_expected": expected, "workers_connected": expected - m, "workers_missing": m,
             "heartbeat_late_s": s, "rebalances": r} for i, (s, m, r) in enumerate(zip(late, missing, rebalances))]


def test_a_starved_workers_late_loop_warns_after_hold_s_rows_dated_to_their_start_and_only_once():
    watch = generator.Watch(cpu_percent=70.0)
    starved = rows("worker-1", [20] * 4, lag=[1.0, 1500.0, 900.0, 400.0])  # stopped: its sleeps wake late, CPU idle
    assert watch.feed(starved[:3]) == []  # two rows late: not yet
    warned = watch.feed(starved[3:])
    assert [(row["time"], why) for row, why in warned] == [(101.0, "event loop 1500 ms late for 3 s running")]
    assert watch.feed(rows("worker-1", [20] * 3, lag=500.0, start=110.0)) == []  # once per process


def test_the_cpu_warning_is_at_the_curves_holding_share_not_at_locusts_90():
    busy = rows("worker-1", [75, 72, 70])
    assert [why for _, why in generator.Watch(cpu_percent=70.0).feed(busy)] == ["CPU 75 % for 3 s running"]
    assert generator.Watch(cpu_percent=76.0).feed(busy) == []
    assert generator.figures(busy)["saturated"] == []  # Locust's own 90 % sees nothing yet


def test_the_masters_view_warns_at_once_when_a_heartbeat_is_late_and_again_when_a_worker_goes_missing():
    view = master_rows(late=(0.4, 3.2, 4.1, 5.0, 0.3), missing=(0, 0, 0, 1, 0))
    warned = generator.Watch(cpu_percent=70.0).feed(view)
    assert [(row["time"], why) for row, why in warned] == [(101.0, "a worker's heartbeat 3 s late"),
                                                           (103.0, "1 of 2 workers missing (no heartbeat)")]
    assert generator.Watch(cpu_percent=70.0).feed(master_rows(late=(2.9,))) == []
    writing = [{**row, "loop_lag_ms": 2500.0, "cpu_percent": 99.0} for row in master_rows(late=(0.5,) * 4)]
    assert generator.Watch(cpu_percent=70.0).feed(writing) == []  # the master's own loop sends no requests


def test_a_knee_after_a_warning_is_the_load_generators_and_leaves_the_check_undetermined():
    health = rows("worker-1", [20] * 4, lag=[1.0, 800.0, 800.0, 800.0])  # warned, dated 101
    watch = {"cpu_percent": 70.0, "source": "benchmarks/loadgen-x", "live": True}
    after = generator.figures(health, knee_time=105.0, workers=2, watch=watch)
    assert after["watch"]["warnings"] == [{"process": "worker-1", "time": 101.0, "users": 11, "before_knee": True,
                                           "why": "event loop 800 ms late for 3 s running"}]
    assert generator.knee_warned(after, has_knee=True) is True
    before = generator.figures(health, knee_time=100.5, workers=2, watch=watch)  # the knee came first
    assert generator.knee_warned(before, has_knee=True) is False
    assert generator.knee_warned(generator.figures(health, 105.0, 2), has_knee=True) is None  # not watched
    assert generator.knee_warned(after, has_knee=False) is None

    summary = a_summary(load={**a_summary().load, "start": 90.0}, load_generator=after)
    figures = summary_module.headline(summary.to_json())
    assert figures["knee_generator_warned"] is True
    ok, detail = verdict.evaluate_check("knee_users >= 10", figures, lambda name: None)
    assert ok is None and "after the load generator warned" in detail
    unwatched = a_summary(load={**a_summary().load, "start": 90.0}, load_generator=generator.figures(health, 105.0, 2))
    assert "knee_generator_warned" not in summary_module.headline(unwatched.to_json())  # a run from before: as it was
    assert "knee_generator_warned" in summary_module.headline_names()
    summary.headline = figures
    text = "\n".join(report.headline_section(summary, ()))
    assert "**The knee is the load generator's, not the system's**: Locust warned first, worker-1" in text
    section = "\n".join(report.generator_section(summary, ()))
    assert "at or above 70 % CPU" in section and "benchmarks/loadgen-x" in section
    assert ("**Warned**: worker-1 (event loop 800 ms late for 3 s running) at 11 s, 11 users — before the knee"
            in section)


def test_the_heartbeat_columns_are_read_and_an_older_health_csv_reads_as_unknown():
    new = {"time": "100.0", "process": "master", "cpu_percent": "4.0", "loop_lag_ms": "1.2", "users": "10",
           "workers_expected": "2", "workers_connected": "1", "workers_missing": "1", "heartbeat_late_s": "5.1",
           "rebalances": "1"}
    worker = {**new, "process": "w-1", **dict.fromkeys(list(new)[5:], "")}  # a worker's row: the view left empty
    old = {key: new[key] for key in list(new)[:5]}  # a committed run's health.csv: five columns
    parsed = analysis.health_rows([new, worker, old])
    assert parsed[0]["workers_missing"] == 1 and parsed[0]["heartbeat_late_s"] == 5.1 and parsed[0]["rebalances"] == 1
    assert parsed[1]["workers_expected"] is None and parsed[2]["workers_missing"] is None
    assert generator.heartbeats(parsed) == {"expected": 2, "missing_max": 1, "missing_at": 100.0,
                                            "heartbeat_late_max_s": 5.1, "rebalances": 1}
    assert generator.heartbeats(parsed[1:]) is None  # unknown, not "none missing"
    assert "heartbeats" not in generator.figures(parsed[1:], workers=2)  # a committed summary stays as it was
    older = a_summary(load={"start": 90.0}, load_generator=generator.figures(parsed[2:], workers=2))
    assert "heartbeats, the master's view: unknown" in "\n".join(report.generator_section(older, ()))
    seen = a_summary(load={"start": 90.0}, load_generator=generator.figures(parsed, workers=2))
    assert ("2 expected, **1 missing** at worst, from 10 s; a heartbeat at most 5 s late; users rebalanced 1 times"
            in "\n".join(report.generator_section(seen, ())))

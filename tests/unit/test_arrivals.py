"""The open model's pacing and sizing (locust/arrivals.py and the shapes' rates): pure functions of time,
driven here at chosen moments, no Locust run."""
import collections
import csv
import random
import statistics

import pytest

import arrivals
import shapes
from visitkit.errors import RunError


def steady(rate, end):
    return lambda elapsed: rate if 0 <= elapsed < end else None


def schedule(clock, until=1e9):
    """Every arrival due before `until`, as the clock hands them out when a user is always free on time."""
    taken = []
    while clock.due is not None and clock.due < until:
        taken.append(clock.take(clock.due))
        clock.started(taken[-1])
    return taken


def test_sixty_seconds_at_fifteen_visits_a_second_are_900_evenly_spaced_arrivals():
    taken = schedule(arrivals.ArrivalClock(steady(15, 60)))
    assert len(taken) == 900
    assert taken[0] == 0 and taken[-1] == pytest.approx(59 + 14 / 15)
    assert max(b - a for a, b in zip(taken, taken[1:])) == pytest.approx(1 / 15)  # paced, not random
    assert min(b - a for a, b in zip(taken, taken[1:])) == pytest.approx(1 / 15)


def test_random_gaps_are_a_poisson_process_of_the_rate():
    shape = shapes.make_shape("load", {"arrival_rate": "15", "duration_s": "600", "arrival_gaps": "random"})
    clock = arrivals.ArrivalClock(steady(15, 600), gaps=shape.arrival_gaps, rng=random.Random(7))
    taken = schedule(clock)
    gaps = [b - a for a, b in zip(taken, taken[1:])]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(1 / 15, rel=0.03)
    assert statistics.pstdev(gaps) / mean == pytest.approx(1, abs=0.05)  # exponential gaps: 0 when paced
    per_second = collections.Counter(int(t) for t in taken)
    counts = [per_second[second] for second in range(600)]
    assert statistics.pvariance(counts) / statistics.fmean(counts) == pytest.approx(1, abs=0.15)  # Poisson counts


def test_unknown_gaps_are_refused():
    with pytest.raises(ValueError, match="arrival gaps 'poisson'"):
        arrivals.ArrivalClock(steady(15, 60), gaps="poisson")


def test_a_ramp_starts_as_many_arrivals_as_its_rate_integrated():
    shape = shapes.make_shape("breakpoint", {"arrival_ramp": "2", "arrival_start": "1", "duration_s": "30"})
    taken = schedule(arrivals.ArrivalClock(shape.rate_at))
    assert len(taken) == pytest.approx(1 * 30 + 2 * 30 ** 2 / 2, abs=1)  # 930: the rate's integral
    assert len([t for t in taken if 20 <= t < 21]) == 42  # the rate at 20.5 s: 1 + 2 x 20.5


@pytest.mark.parametrize("processes", [2, 3, 7])
def test_processes_split_the_rate_and_together_keep_the_pace(processes):
    together = sorted(due for index in range(processes) for due in schedule(
        arrivals.ArrivalClock(steady(15, 60), share=1 / processes, phase=index / processes)))
    assert len(together) == 900  # not one more where a float sum lands a hair before the end
    assert max(b - a for a, b in zip(together, together[1:])) == pytest.approx(1 / 15)


def test_an_arrival_no_user_took_in_time_is_not_started_and_never_made_up():
    clock = arrivals.ArrivalClock(steady(10, 10), origin_wall=1000.0)
    assert clock.take(0.0) == 0.0
    clock.started(0.0)
    # every user busy until 1.05 s: the arrivals due at 0.1 ... 0.8 are more than LATE_S late
    assert clock.take(1.05) == pytest.approx(0.9)  # 0.15 s late: within LATE_S, started late
    clock.started(0.9)
    rows = {second: row for second, *row in clock.take_rows(1.05)}
    assert rows[1000][1:] == [2, 8]  # started, not started
    assert clock.take(1.05) == pytest.approx(1.0)  # the next one, not a burst of the missed ones
    assert clock.not_started == 8


def test_the_targets_are_the_rate_per_second_and_the_end_counts_whats_due():
    clock = arrivals.ArrivalClock(steady(15, 60), origin_wall=1000.5)  # starts mid-second
    schedule(clock, until=29.98)  # a user free on time for each arrival up to 29.93 s ...
    clock.take(31.05)  # ... then none until 31.05 s: the arrivals more than LATE_S late are not started
    clock.end(31.05)  # and at the end, those due before it: 15 of the 16 due from 30 s (the one at 30.87 s taken)
    table = {}
    arrivals.merge(table, clock.take_rows(31.05))
    assert table[1000][0] == pytest.approx(7.5)  # half a second of it
    assert table[1010][0] == pytest.approx(15.0)
    assert sum(row[2] for row in table.values()) == 15
    assert table[1030][1:] == [7, 8] and table[1031][1:] == [0, 7]  # 29.5-30.5 s and 30.5-31.05 s of the load
    assert max(table) == 1031 and table[1031][0] == pytest.approx(0.55 * 15)  # nothing past the end (31.55)
    assert clock.take(40.0) is None  # and nothing more is handed out


def test_ending_the_load_counts_the_arrivals_due_before_it_that_no_one_took():
    clock = arrivals.ArrivalClock(steady(10, 60))
    clock.end(0.55)  # due at 0, 0.1 ... 0.5, none taken
    assert clock.not_started == 6


def test_the_master_adds_up_the_workers_rows_and_writes_them(tmp_path):
    table = {}
    arrivals.merge(table, [[1000, 7.5, 7, 0], [1001, 7.5, 8, 0]])
    arrivals.merge(table, [[1000, 7.5, 8, 0], [1001, 7.5, 6, 1]])
    arrivals.write_arrivals(tmp_path / "arrivals.csv", table)
    with open(tmp_path / "arrivals.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == ("time", "target_per_s", "started", "not_started")
    assert [(r["time"], r["target_per_s"], r["started"], r["not_started"]) for r in rows] == [
        ("1000", "15.0", "15", "0"), ("1001", "15.0", "14", "1")]


@pytest.mark.parametrize("users, rate, visit_s, short, ceiling, wanted", [
    (0, 15, 0.1, 0, 5000, 18),  # 15 x (0.1 x 2 + 1)
    (0, 15, 2.0, 0, 5000, 75),  # slower visits, more users (Little's law)
    (80, 15, 0.1, 0, 5000, 80),  # never fewer during the load
    (18, 15, 0.1, 5, 5000, 23),  # one more per arrival not started
    (0, 15, 2.0, 0, 40, 40),  # up to the ceiling
])
def test_users_follow_the_rate_and_the_visits_duration_up_to_the_ceiling(users, rate, visit_s, short, ceiling,
                                                                          wanted):
    assert arrivals.users_wanted(users, rate, visit_s, short, ceiling=ceiling) == wanted


def test_the_visits_duration_is_measured_over_the_last_requests():
    duration = arrivals.VisitDuration()
    assert duration.update(0.0, 0, 0.0) == arrivals.VISIT_GUESS_S  # nothing measured yet
    assert duration.update(1.0, 30, 3000.0) == pytest.approx(0.3)  # 100 ms a request, 3 a visit
    for t in range(2, 20):
        duration.update(float(t), 30 + 30 * (t - 1), 3000.0 + 30 * 1000.0 * (t - 1))  # 1 s a request now
    assert duration.seconds == pytest.approx(3.0)  # the window no longer holds the fast ones


class Runner:
    def __init__(self, requests=0, total_ms=0.0):
        self.user_count = 0
        self.stats = type("Stats", (), {})()
        self.stats.total = type("Total", (), {"num_requests": requests, "num_failures": 0,
                                              "total_response_time": total_ms})()


def test_an_open_model_load_sizes_users_to_its_rate_and_ends_with_its_duration():
    shape = shapes.make_shape("load", {"arrival_rate": "15", "duration_s": "60", "settle_s": "0"})
    assert shape.open_model and shape.rate_at(0) == 15 and shape.rate_at(59.9) == 15 and shape.rate_at(60) is None
    ended, missed = [], [0]
    runner = Runner()
    runner.user_count = 200
    shape.runner, shape.on_load_end, shape.arrivals_missed = runner, lambda: ended.append(True), lambda: missed[0]
    assert shape.tick_at(0.0) == (45, 90.0)  # a visit guessed at 1 s: 15 x (1 x 2 + 1), within half a second
    runner.stats.total.num_requests, runner.stats.total.total_response_time = 300, 300 * 2000.0  # 6 s visits
    assert shape.tick_at(1.0)[0] == 15 * (6 * 2 + 1)
    missed[0] = 7
    assert shape.tick_at(2.0)[0] == 15 * 13 + 7  # the arrivals not started since, one more user each
    assert shape.tick_at(3.0)[0] == 15 * 13 + 7  # and not again
    assert ended == [] and shape.tick_at(60.0) == (0, shapes.STOP_RATE) and ended == [True]


def test_without_a_rate_the_shapes_stay_closed_model():
    for name in ("load", "breakpoint", "endurance", "spike"):
        shape = shapes.make_shape(name, stages="10:10" if name == "endurance" else None)
        assert not shape.open_model and shape.rate_at(1.0) is None
    assert shapes.make_shape("load").own_seconds() == 195  # the cleanup too


def test_a_breakpoint_ramps_its_rate_from_arrival_start():
    shape = shapes.make_shape("breakpoint", {"arrival_ramp": "2", "arrival_start": "5", "duration_s": "300"})
    assert [shape.rate_at(t) for t in (0, 10, 299)] == [5, 25, 603] and shape.rate_at(300) is None


def test_an_open_model_load_without_a_duration_lasts_the_users_loads_loaded_part():
    shape = shapes.make_shape("load", {"arrival_rate": "15"})
    assert shape.planned_seconds() == 30 + 30 + 120 and shape.rate_at(179) == 15 and shape.rate_at(180) is None


def test_endurance_stages_in_visits_per_second_are_its_rate(tmp_path):
    inline = shapes.make_shape("endurance", {"arrival_ramp": "1"}, stages="10/s:5,4/s:5")
    assert inline.open_model
    # 0 -> 10 visits/s at +1/s (10 s), held 5 s; down to 4 at -1/s (6 s), held 5 s: 26 s
    assert inline.own_seconds() == 26
    assert [inline.rate_at(t) for t in (5, 12, 17, 23, 26)] == [5, 10, 8, 4, None]
    path = tmp_path / "stages.csv"
    path.write_text("# comment\nvisits_per_s,hold_s\n250,300\n375,300\n")
    stepped = shapes.make_shape("endurance", stages=str(path))
    assert stepped.open_model and [stepped.rate_at(t) for t in (0, 299, 300, 599)] == [250, 250, 375, 375]
    with pytest.raises(ValueError, match="one unit"):
        shapes.make_shape("endurance", stages="10/s:5,40:5")


# ---- the kit's side: the run's options, and what the summary and the report make of arrivals.csv ----------
def load_plan(test="load", **given):
    from visitkit.runs.config import LoadPlan

    return LoadPlan.build(test, **given)


def test_an_arrival_rate_reaches_locust_as_the_shapes_setting_and_the_run_record_says_open():
    plan = load_plan(duration="60s", arrival_rate=15)
    assert plan.load_model == "open" and plan.arrivals.record() == {
        "rate": 15, "ramp_per_s": None, "start": None, "stages": False, "users_max": arrivals.USERS_MAX,
        "gaps": "even"}
    options = dict(plan.options("http://x"))
    assert shapes.parse_assignments(options["--shape-set"]) == {"duration_s": "60", "arrival_rate": "15"}
    assert "open model: 15 visits/s held, paced" in plan.describe()
    assert "arrival-rate = " not in plan.run_conf("http://x") and "shape-set = duration_s=60,arrival_rate=15" in \
        plan.run_conf("http://x")  # a distributed run's master and workers read the same
    ramp = load_plan("breakpoint", arrival_ramp=2, shape_set="arrival_users_max=800,arrival_gaps=random")
    assert ramp.arrivals.record() == {"rate": None, "ramp_per_s": 2, "start": arrivals.RAMP_START, "stages": False,
                                      "users_max": 800, "gaps": "random"}
    assert "+2 visits/s each second, at random (a Poisson process)" in ramp.describe()
    with pytest.raises(RunError, match="arrival_gaps=poisson: even or random"):
        load_plan(arrival_rate=15, shape_set="arrival_gaps=poisson")
    assert load_plan().load_model == "closed" and load_plan().arrivals is None


def test_endurance_stages_in_visits_per_second_make_an_open_model_run():
    plan = load_plan("endurance", stages="10/s:60,20/s:60", arrival_ramp=1)
    assert plan.arrivals.stages and plan.arrivals.ramp_per_s == 1
    assert "the stages in visits/s, changing by 1 visits/s each second" in plan.describe()


@pytest.mark.parametrize("test, given, words", [
    ("breakpoint", {"arrival_rate": 15}, "--arrival-rate R holds R visits/s with --test load"),
    ("spike", {"arrival_rate": 15}, "the spike test is in users only"),
    ("load", {"arrival_ramp": 2}, "--arrival-ramp raises the rate with --test breakpoint"),
    ("endurance", {"arrival_ramp": 2}, "--arrival-ramp raises the rate with --test breakpoint"),  # stages in users
    ("breakpoint", {"arrival_start": 5}, "--arrival-start is where an --arrival-ramp starts"),
    ("load", {"arrival_rate": 0}, "above 0"),
    ("load", {"arrival_rate": 15, "shape_set": "arrival_rate=20"}, "disagree: give it once"),
    ("load", {"arrival_rate": 15, "shape_set": "plateau_users=40"}, "leave out --shape-set plateau_users"),
    ("load", {"arrival_rate": 15, "dwell": 60}, "--dwell runs readers"),
    ("load", {"arrival_rate": 15, "shape_set": "arrival_users_max=0"}, "arrival_users_max"),
    ("endurance", {"stages": "10/s:60,40:60"}, "one unit"),
])
def test_arrival_options_are_refused_where_they_do_not_fit(test, given, words):

    with pytest.raises(RunError, match=words.replace("(", r"\(").replace(")", r"\)")):
        load_plan(test, **given)


def test_an_arrival_rate_in_shape_set_alone_is_the_open_model_too():
    plan = load_plan(shape_set="arrival_rate=12", duration="30s")
    assert plan.arrivals.rate == 12 and plan.load_model == "open"


def csv_rows(*rows):
    from visitkit.results import arrivals as found

    return found.rows([dict(zip(arrivals.COLUMNS, map(str, row))) for row in rows])


def test_achieved_is_the_started_per_second_over_the_held_seconds_the_first_and_last_left_out():
    from visitkit.results import arrivals as found

    rows = csv_rows((100, 7.2, 7, 0), (101, 15, 15, 0), (102, 15, 14, 1), (103, 15, 15, 0), (104, 14.1, 14, 0),
                    (105, 15, 16, 0), (106, 3.3, 3, 0))
    # 104: a second a worker's clock started within (below 99 % of the held 15/s); 100 and 106: partial
    assert [row["time"] for row in found.steady_window(rows, ramp=False)] == [101, 102, 103, 105]
    figures = found.figures({"test": "load", "arrivals": {"rate": 15.0, "users_max": 5000}}, rows)
    assert figures == {"target": 15.0, "ramp_per_s": None, "achieved": 15.0, "window_target": 15.0,
                       "window": [101, 105], "seconds": 4, "started": 84, "not_started": 1, "users_max": 5000}


def test_a_ramps_window_is_all_its_full_seconds_and_its_target_the_peak():
    from visitkit.results import arrivals as found

    rows = csv_rows((100, 0.5, 1, 0), (101, 2, 2, 0), (102, 4, 3, 1), (103, 6, 5, 1), (104, 3, 3, 0))
    figures = found.figures({"test": "breakpoint", "arrivals": {"ramp_per_s": 2.0, "users_max": 50}}, rows)
    assert (figures["target"], figures["ramp_per_s"], figures["seconds"]) == (6, 2.0, 3)
    assert (figures["achieved"], figures["window_target"]) == (pytest.approx(10 / 3, abs=0.01), 4.0)


def test_a_results_folder_reads_arrivals_csv(tmp_path):
    from visitkit.results import folder as results

    folder = results.ResultsFolder(tmp_path)
    folder.save_run({"iteration": "iteration-1", "test": "load", "target": "local"})
    assert folder.load().arrivals == []  # a closed-model run writes none
    arrivals.write_arrivals(folder / results.ARRIVALS, {1001: [15.0, 14, 1], 1000: [7.5, 7, 0]})
    assert folder.load().arrivals == [{"time": 1000, "target_per_s": 7.5, "started": 7, "not_started": 0},
                                      {"time": 1001, "target_per_s": 15.0, "started": 14, "not_started": 1}]


def test_the_summary_records_the_arrivals_of_an_open_model_run_only():
    import json

    from visitkit.paths import ITERATIONS_DIR
    from visitkit.reports.report import render
    from visitkit.results import folder as results
    from visitkit.results.summary import summarize

    data = results.ResultsFolder(ITERATIONS_DIR / "iteration-0" / "results" / "breakpoint-20261123-213523").load()
    closed = summarize(data)
    assert "arrival_rate" not in closed.load and "arrival_rate.achieved" not in closed.headline
    data.run = {**data.run, "test": "load", "load_model": "open", "arrivals": {"rate": 15.0, "users_max": 5000}}
    data.arrivals = csv_rows(*[(1000 + s, 15.0, 15 - (s == 3), int(s == 3)) for s in range(62)])
    summary = summarize(data)
    assert summary.load["arrival_rate"]["achieved"] == pytest.approx(15 - 1 / 60, abs=0.01)
    assert summary.headline["arrival_rate.not_started"] == 1 and summary.headline["arrival_rate.target"] == 15
    again = summary.from_json(json.loads(json.dumps(summary.to_json())))
    assert again.to_json() == summary.to_json()
    report = render(summary)
    assert "- Open model: target 15.00 visits/s, achieved 14.98 visits/s started over the steady window (60 full " \
           "seconds at the held rate); 1 arrivals not started" in report


def test_an_open_model_runs_convergence_wait_follows_the_visits_it_started(tmp_path):
    """The wait after an open-model load gives the store the model's time to drain what the arrivals started,
    not only 3 x the load: 100 visits/s for 60 s into iteration 1's store (the study profile's ~9 visits/s) leaves
    minutes of backlog."""
    import json
    from types import SimpleNamespace

    from visitkit.paths import ROOT
    from visitkit.results import folder as results
    from visitkit.runs import convergence

    study_profile_run = ROOT / "iterations" / "iteration-1" / "results" / "breakpoint-20261125-191233"
    record = {**json.loads((study_profile_run / results.RUN).read_text()), "load_model": "open"}
    start = 1_800_000_000
    (tmp_path / results.RUN).write_text(json.dumps(record))
    (tmp_path / results.ARRIVALS).write_text("time,target_per_s,started,not_started\n" + "".join(
        f"{start + s},100,100,0\n" for s in range(60)))
    state = SimpleNamespace(record=record, folder=results.ResultsFolder(tmp_path),
                            config=SimpleNamespace(convergence_timeout=None),
                            target=SimpleNamespace(min_convergence_wait=0), load_started=start, load_ended=start + 60)
    assert convergence.state_convergence_wait(state) > 2 * 3 * 60  # the model's drain, well past 3 x the load

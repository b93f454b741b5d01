"""Tick sequences of the load shapes (no Locust run: ticks at chosen times)."""
from pathlib import Path

import pytest

import shapes

STAGES = Path(shapes.__file__).parent / "stages"


class FakeRunner:
    def __init__(self):
        self.user_count = 0
        self.stats = type("Stats", (), {})()
        self.stats.total = type("Total", (), {"num_requests": 0, "num_failures": 0})()


def ticks(shape, seconds, runner=None):
    """tick_at(t) for t = 0..seconds-1, following the users it asks for like Locust would."""
    shape.runner = runner
    out = []
    for t in range(seconds):
        tick = shape.tick_at(float(t))
        out.append(tick)
        if runner and tick:
            runner.user_count = tick[0]
    return out


def test_breakpoint_adds_spawn_rate_users_per_second_until_its_duration_then_stops():
    shape = shapes.make_shape("breakpoint", {"spawn_rate": "2", "duration_s": "5", "settle_s": "0"})
    seq = ticks(shape, 8, FakeRunner())
    assert [t[0] for t in seq[:5]] == [1, 2, 4, 6, 8]
    assert seq[5] == (0, shapes.STOP_RATE)  # all users stopped first ...
    assert seq[6] is None  # ... then the test ends


def test_each_step_is_spawned_within_one_tick():
    shape = shapes.make_shape("breakpoint", {"spawn_rate": "10"})
    users, rate = shape.tick_at(3.0)
    assert users == 30 and rate >= 2 * 30  # from 0 to 30 in half a second


def test_step_s_changes_the_target_every_step_to_the_users_due_at_its_end_at_the_ramps_pace():
    shape = shapes.make_shape("breakpoint", {"step_s": "10"})
    seq = [shape.tick_at(float(t)) for t in (0, 5, 9, 10, 19, 20)]
    assert [users for users, _ in seq] == [10, 10, 10, 20, 20, 30]  # not a step behind the ramp
    assert {rate for _, rate in seq} == {1.0}  # spawned as the ramp goes: +1 user/s


def test_a_spike_in_steps_rises_at_spike_rate_and_comes_down_from_what_it_reached():
    shape = shapes.make_shape("spike", {"base_users": "20", "base_s": "60", "spike_users": "2000", "spike_rate": "10",
                                        "spike_s": "60", "recover_s": "60", "step_s": "10"})
    runner = FakeRunner()
    seq = dict(zip(range(200), ticks(shape, 200, runner)))
    assert seq[60] == (120, 10.0)  # the step's 100 users at the spike's 10 users/s, not at once
    assert seq[110][0] == 620  # 20 + 60 s x 10/s: spike_users (2,000) is never reached ...
    assert seq[120] == (520, 10.0) and seq[150][0] == 220  # ... so the way down starts from 620, at 10/s


def test_a_spike_rises_at_spike_rate_with_one_second_steps_too():
    shape = shapes.make_shape("spike", {"base_users": "20", "spike_users": "2000", "spike_rate": "10"})
    seq = ticks(shape, 130, FakeRunner())
    assert [seq[t][0] for t in (60, 61, 62, 119, 120)] == [20, 30, 40, 610, 620]
    assert seq[121][0] == 610  # down from the 620 reached, not from 2,000


def test_users_stop_at_least_as_fast_as_there_are_users_in_one_stop_message():
    shape = shapes.make_shape("breakpoint", {"duration_s": "5", "settle_s": "0"})
    runner = FakeRunner()
    shape.runner = runner
    runner.user_count = 40000
    assert shape.tick_at(6.0) == (0, 40000.0)
    runner.user_count = 12000  # stopping: the same tick, so Locust sends no new message
    assert shape.tick_at(7.0) == (0, 40000.0)


def test_the_quit_gate_holds_the_end_until_it_opens_or_quit_wait_s_passes():
    runner = FakeRunner()
    shape = shapes.make_shape("breakpoint", {"duration_s": "2", "settle_s": "2", "quit_wait_s": "5"})
    shape.runner = runner
    opened = []
    shape.quit_gate = lambda: bool(opened)
    assert [shape.tick_at(float(t)) is None for t in range(2, 8)] == [False] * 6  # settle 2 s, gate shut
    opened.append(True)
    assert shape.tick_at(8.0) is None
    shut = shapes.make_shape("breakpoint", {"duration_s": "2", "settle_s": "2", "quit_wait_s": "5"})
    shut.runner, shut.quit_gate = runner, lambda: False
    assert [shut.tick_at(float(t)) is None for t in range(2, 10)] == [False] * 7 + [True]  # 2 + 2 + 5 s


def test_settle_keeps_zero_users_until_workers_report():
    shape = shapes.make_shape("load", {"warmup_s": "1", "rampup_s": "1", "plateau_s": "1", "cleanup_s": "0",
                                       "settle_s": "3"})
    runner = FakeRunner()
    seq = ticks(shape, 8, runner)
    # t=3: the load is over, users are stopped; t=4..6: 0 users for settle_s; then the end
    assert [t[0] if t else None for t in seq] == [7, 7, 40, 0, 0, 0, 0, None]


def test_breakpoint_stop_rule_needs_a_full_window_of_failures():
    shape = shapes.make_shape("breakpoint", {"stop_failure_ratio": "0.5", "stop_window_s": "3", "settle_s": "0"})
    runner = FakeRunner()
    shape.runner = runner
    total = runner.stats.total
    seq = []
    for t in range(10):
        # healthy for 4 s, then 90 % of the new requests fail
        total.num_requests += 10
        total.num_failures += 0 if t < 4 else 9
        tick = shape.tick_at(float(t))
        seq.append(tick)
        runner.user_count = tick[0] if tick else 0
    stopped_at = seq.index((0, shapes.STOP_RATE))
    # t=4: 9 failures in the last 30 requests (0.3); t=5: 18 in 30 (0.6 > 0.5)
    assert stopped_at == 5
    assert all(t[0] > 0 for t in seq[:stopped_at])


def test_breakpoint_keeps_going_while_failures_stay_below_the_ratio():
    shape = shapes.make_shape("breakpoint", {"stop_failure_ratio": "0.5", "stop_window_s": "3"})
    runner = FakeRunner()
    shape.runner = runner
    for t in range(20):
        runner.stats.total.num_requests += 10
        runner.stats.total.num_failures += 4
        assert shape.tick_at(float(t))[0] > 0


def test_endurance_ramps_at_spawn_rate_and_holds_each_stage():
    shape = shapes.make_shape("endurance", {"spawn_rate": "2", "settle_s": "0"}, stages="4:3,2:2")
    # 0 -> 4 users takes 2 s, hold 3 s (ends at 5); 4 -> 2 takes 1 s, hold 2 s (ends at 8)
    assert shape.own_seconds() == 8
    seq = ticks(shape, 10, FakeRunner())
    assert [t[0] for t in seq[:8]] == [0, 2, 4, 4, 4, 4, 2, 2]
    assert seq[8] == (0, shapes.STOP_RATE) and seq[9] is None


def test_endurance_users_scale_shrinks_the_stages():
    shape = shapes.make_shape("endurance", {"users_scale": "0.1"}, stages="300:10,650:10")
    assert [stage[4] for stage in shape.schedule()] == [30, 65]


def test_endurance_stages_file(tmp_path):
    path = tmp_path / "stages.csv"
    path.write_text("# comment\nusers,hold_s\n300,180\n650,120\n")
    assert shapes.parse_stages(str(path)) == [(300, 180.0), (650, 120.0)]


def test_study_stages_file_steps_around_the_breakpoint_in_about_22_minutes():
    shape = shapes.make_shape("endurance", stages=str(STAGES / "endurance-study.csv"))
    assert max(users for users, _ in shape.stages) == 650
    assert 20 * 60 <= shape.own_seconds() <= 25 * 60


def test_load_phases_warm_up_ramp_plateau_cleanup():
    shape = shapes.LoadShape()
    assert shape.users_at(10) == 7
    assert shape.users_at(45) == pytest.approx(7 + 33 / 2)
    assert shape.users_at(100) == 40
    assert shape.users_at(185) == 0
    assert shape.users_at(196) is None


def test_spike_jumps_up_and_back_down():
    shape = shapes.make_shape("spike", {"base_users": "10", "spike_users": "110", "spike_rate": "50",
                                        "base_s": "10", "spike_s": "10", "recover_s": "10"})
    assert [shape.users_at(t) for t in (5, 11, 12, 15, 21, 25, 31)] == [10, 60, 110, 110, 60, 10, None]


def test_duration_caps_any_shape():
    shape = shapes.make_shape("load", {"duration_s": "50"})
    assert shape.planned_seconds() == 50
    assert shape.tick_at(60.0) == (0, shapes.STOP_RATE)


def test_settings_are_checked():
    with pytest.raises(ValueError):
        shapes.make_shape("breakpoint", {"max_user": "3"})
    with pytest.raises(ValueError):
        shapes.make_shape("nope")
    with pytest.raises(ValueError):
        shapes.make_shape("load", stages="1:1")
    assert shapes.parse_assignments("a=1, b=2.5") == {"a": "1", "b": "2.5"}


def test_iteration_5s_stages_follow_firestores_500_50_5_ramp():
    """Each stage at most 1.5 x the one before, held 5 minutes, from 500 writes/s (2 per visit, 0.739
    requests/s per user, 3 per visit) up to the planned 40,600 users."""
    shape = shapes.make_shape("endurance", {"spawn_rate": "100"},
                              stages=str(STAGES / "endurance-iteration-5.csv"))
    users = [u for u, _ in shape.stages]
    assert users[0] * 0.739 / 3 * 2 == pytest.approx(500, rel=0.01)
    assert all(later <= 1.5 * earlier + 1 for earlier, later in zip(users, users[1:]))
    assert all(hold >= 300 for _, hold in shape.stages) and users[-1] == 40600
    assert 65 * 60 <= shape.own_seconds() <= 80 * 60


def test_iteration_5s_stages_in_visits_per_second_follow_the_same_ramp_to_10000():
    """The same 500/50/5 ramp in visits/s (2 writes a visit): each stage at most 1.5 x the one before, held
    5 minutes, from 250 visits/s up to 10,000 held 15 minutes, in the open model."""
    shape = shapes.make_shape("endurance", stages=str(STAGES / "endurance-iteration-5-visits.csv"))
    rates = [rate for rate, _ in shape.stages]
    assert shape.open_model and rates[0] * 2 == 500 and rates[-1] == 10000
    assert all(later <= 1.5 * earlier for earlier, later in zip(rates, rates[1:]))
    assert [hold for _, hold in shape.stages] == [300] * 10 + [900]
    assert shape.rate_at(0) == 250 and shape.rate_at(shape.own_seconds() - 1) == 10000


def test_the_planned_visits_are_an_open_shapes_arrivals_or_each_users_visits_at_its_shortest_think_time():
    held = shapes.make_shape("load", {"arrival_rate": "40", "duration_s": "30"})
    assert held.planned_visits() == pytest.approx(40 * 30)
    ramp = shapes.make_shape("breakpoint", {"arrival_ramp": "10", "arrival_start": "0", "duration_s": "60"})
    assert ramp.planned_visits() == pytest.approx(10 * 60 ** 2 / 2)
    users = shapes.make_shape("load", {"warmup_users": "12", "warmup_s": "30", "rampup_s": "0", "plateau_s": "0",
                                       "cleanup_s": "0"})
    assert users.planned_visits(3.0) == pytest.approx(12 * 30 / 3 + 12)  # each at once, then one per 3 s at most
    assert users.planned_visits(0) is None  # without think time nothing bounds them
    assert shapes.make_shape("breakpoint").planned_visits(3.0) is None  # no end: no plan

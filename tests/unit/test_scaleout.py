"""A spike's scale-out by the autoscaler's rules (visitkit/model/scaleout.py), and as a run measures it
(visitkit/results/scaleout.py), worked by hand."""
from visitkit.model.occupancy import occupancy
from visitkit.model.scaleout import Limits, spike
from visitkit.results import scaleout as measured

LIMITS = Limits(min_instances=0, max_instances=6, concurrency=10, vcpus=1.0)


def test_a_spike_is_met_on_demand_first_then_by_the_one_minute_averages_up_to_the_cost_models_count():
    # 2 -> 400 requests/s of 50 ms: 20 in flight. On demand at once: 10 wait beyond the one instance's 10 slots,
    # one more starts, ready 0.44 s later (seen at the next 0.25 s tick); the averages then climb over the window
    # to 20 / (0.6 x 10) = 4 instances, the cost model's count at that rate.
    result = spike(LIMITS, busy_s=0.05, before_rps=2, spike_rps=400, start_s=0.44, cores=2)
    assert result.steps[:2] == [(0.0, 1), (0.5, 2)]
    assert (result.unwaited, result.lag_s) == (2, 0.5)
    assert [count for _, count in result.steps] == [1, 2, 3, 4]  # in steps
    assert 0.5 < result.steps[2][0] < result.steps[3][0] <= 60 + 0.44 + 5
    assert result.steps[-1][1] == occupancy(400, 0.05, 10 / 0.05, 10, 0, 6).instances


def test_instances_started_together_share_the_cores():
    # from zero, 6 instances' worth of requests wait at once: 6 start together on 2 cores, 3 x 0.4 s each
    result = spike(LIMITS, busy_s=0.1, before_rps=0, spike_rps=600, start_s=0.4, cores=2)
    assert result.steps[:2] == [(0.0, 0), (1.25, 6)] and result.lag_s == 1.25


def test_min_instances_at_max_instances_need_no_scale_out():
    result = spike(Limits(6, 6, 10, 1.0), busy_s=0.05, before_rps=2, spike_rps=400, start_s=0.44, cores=2)
    assert (result.steps, result.lag_s) == ([(0.0, 6)], 0.0)


# ---- the same scale-out, measured on a run (visitkit/results/scaleout.py) ---------------------------------------
def spike_run():
    """A spike by hand, one row a second. Users: none at 0, 20 from 1 to 60, then 70, 120, 170 and 200 from 64 to
    93 (its peak), 20 again from 94. serve-page's queue: empty but from 61 to 66, at 68 and 74; get-counter's always
    empty; inc-counter's never. serve-page's instances 1, 2 from 65, 4 from 70, 5 from 80; its requests 2/s to 61,
    then 20/s; HAProxy's service time 50 ms, 40 ms from 77; its worst page's p95 300 ms, 100 ms at 61, 900 ms at
    65, and from 77 120 ms on odd seconds, 130 ms on even ones."""
    users = {**{t: 20 for t in range(1, 61)}, 61: 70, 62: 120, 63: 170, **{t: 200 for t in range(64, 94)},
             **{t: 20 for t in range(94, 101)}}
    history, samples = [], []
    for t in range(101):
        p95 = 100.0 if t == 61 else 900.0 if t == 65 else (120.0 if t % 2 else 130.0) if t >= 77 else 300.0
        history.append({"time": float(t), "users": users.get(t, 0),
                        "p95_ms_by_function": {"serve-page": p95, "get-counter": 20.0, "inc-counter": None}})
        page = {"instances": 5 if t >= 80 else 4 if t >= 70 else 2 if t >= 65 else 1,
                "queued": 3 if 61 <= t <= 66 or t in (68, 74) else 0, "requests": 2 * t if t <= 61 else 122 + 20 * (t - 61),
                "service_ms": 40.0 if t >= 77 else 50.0}
        samples.append({"time": float(t), "functions": {
            "serve-page": page, "get-counter": {**page, "queued": 0}, "inc-counter": {**page, "queued": 1},
            "store-inc-counter": page}})
    return history, samples


def test_the_spike_starts_at_the_users_rise_and_ends_with_its_peak():
    history, _ = spike_run()
    assert measured.spike_step(history) == (61.0, 93.0)  # 20 users at 60, 70 at 61; the peak's last second 93
    # from no user at all: the step is the first second with users
    assert measured.spike_step([{"time": 0.0, "users": 0}, {"time": 1.0, "users": 100}, {"time": 2.0, "users": 200},
                                {"time": 3.0, "users": 200}]) == (1.0, 3.0)


def test_the_scale_out_lag_lasts_until_no_request_waited_five_seconds_in_a_row():
    history, samples = spike_run()
    # serve-page: waits at 61-66, 67 empty, waits at 68, empty 69-73 (five seconds, from 69: 8 s after the step),
    # waits at 74
    assert measured.lag_s(samples, "serve-page", 61, 93) == 8.0
    assert measured.lag_s(samples, "get-counter", 61, 93) == 0.0  # nothing waited from the step on
    assert measured.lag_s(samples, "inc-counter", 61, 93) is None  # still waiting at the spike's end


def test_the_spikes_instances_latency_and_the_models_inputs_per_function():
    found = measured.figures(*spike_run())
    assert (found["start"], found["end"]) == (61.0, 93.0)
    page = found["functions"]["serve-page"]
    assert page == {
        "lag_s": 8.0, "instances_at_start": 1, "instances_end": 5, "instances_max": 5,
        # the highest p95 in 61-71; the steady part is 77-93 (the last half of 32 s): nine 120s, eight 130s
        "p95_first_ms": 900.0, "p95_steady_ms": 120.0,
        "rps_before": 2.0,  # 2 to 122 requests over the minute from 1 to 61
        "rps_spike": 20.0,  # 122 to 762 from 61 to 93
        "service_ms": 40.0}
    assert found["functions"]["store-inc-counter"]["p95_first_ms"] is None  # Locust does not call it
    assert found["functions"]["inc-counter"]["lag_s"] is None

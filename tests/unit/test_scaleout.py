"""A spike's scale-out by the autoscaler's rules (visitkit/model/scaleout.py), and as a run measures it
(visitkit/results/scaleout.py), worked by hand."""
from visitkit.catalogue import FUNCTIONS
from visitkit.model.occupancy import occupancy
from visitkit.model.scaleout import Limits, spike
from visitkit.results import scaleout as measured
from visitkit.settings import parse_settings

LIMITS = Limits(min_instances=0, max_instances=6, concurrency=10, vcpus=1.0)


def test_a_spike_beyond_the_instances_is_met_on_demand_at_once_and_its_queue_served():
    # 2 -> 400 requests/s of 50 ms on one instance of 10 slots (200/s): 50 requests queue each 0.25 s tick, so on
    # demand asks for 1 + 50 / 10 at once, capped at 6: 5 start together on 2 cores, 2.5 x 0.44 s, ready at the
    # 1.25 s tick with 250 queued; 1,200/s against 400 serves them in two ticks: no request waits from 1.5 s
    result = spike(LIMITS, busy_s=0.05, before_rps=2, spike_rps=400, start_s=0.44, cores=2)
    assert (result.steps, result.unwaited, result.lag_s) == ([(0.0, 1), (1.25, 6)], 2, 1.5)


def test_a_spike_the_instances_can_take_grows_by_the_one_minute_averages_to_the_cost_models_count():
    # 2 -> 150 requests/s of 50 ms: 7.5 in flight, within one instance's 10: nothing waits (lag 0); the minute's
    # average in flight, (0.1 (60 - t) + 7.5 t) / 60, passes 0.6 x 10 at 48.6 s, seen at the 50 s look (every 5 s),
    # and the second instance is ready 0.44 s later: the cost model's count at that rate
    result = spike(LIMITS, busy_s=0.05, before_rps=2, spike_rps=150, start_s=0.44, cores=2)
    assert (result.steps, result.lag_s) == ([(0.0, 1), (50.5, 2)], 0.0)
    assert result.steps[-1][1] == occupancy(150, 0.05, 10 / 0.05, 10, 0, 6).instances


def test_instances_started_together_share_the_cores_and_the_queue_built_meanwhile_is_served_after():
    # from zero, 500 requests/s of 100 ms: 6 start together on 2 cores, 3 x 0.4 s each, ready at the 1.25 s tick
    # with 5 ticks x 125 = 625 queued; 600/s against 500 serves 25 a tick: the queue is empty at 1.25 + 24 x 0.25 s
    result = spike(LIMITS, busy_s=0.1, before_rps=0, spike_rps=500, start_s=0.4, cores=2)
    assert (result.steps, result.lag_s) == ([(0.0, 0), (1.25, 6)], 7.25)
    # at exactly max_instances' capacity the queue built while they started never goes: no lag to state
    assert spike(LIMITS, busy_s=0.1, before_rps=0, spike_rps=600, start_s=0.4, cores=2).lag_s is None


def test_a_run_gives_the_instances_up_at_the_step():
    result = spike(LIMITS, busy_s=0.05, before_rps=2, spike_rps=400, start_s=0.44, cores=2, running=2)
    assert (result.steps[0], result.lag_s) == ((0.0, 2), 0.0)  # 2 x 10 slots take 20 in flight: none waits


def test_a_runs_own_starts_are_not_shared_again_and_a_slower_service_meanwhile_builds_more_queue():
    # the first spike with starts of 0.9 s as a run measured them (cores None: their share of the cores included):
    # the 5 started at 0 are ready at the 1.0 s tick, the 4 ticks before it queued 50 each, served in one tick
    assert spike(LIMITS, busy_s=0.05, before_rps=2, spike_rps=400, start_s=0.9, cores=None).lag_s == 1.0
    # requests of 75 ms while they start: 133/s served, 66.7 queued a tick, 266.7 by 1.0 s, two ticks to serve
    result = spike(LIMITS, busy_s=0.05, before_rps=2, spike_rps=400, start_s=0.9, cores=None, busy_starting_s=0.075)
    assert (result.steps, result.lag_s) == ([(0.0, 1), (1.0, 6)], 1.25)


def test_the_models_lag_given_a_runs_own_figures():
    # the spike above as a run measured it: one instance up, its starts at the step of 0.9 s, 75 ms meanwhile
    row = {"service_ms": 50.0, "rps_before": 2.0, "rps_spike": 400.0, "instances_at_start": 1,
           "start_step_ms": 900.0, "service_starting_ms": 75.0}
    assert measured.model_lag(LIMITS, row) == 1.25
    assert measured.model_lag(LIMITS, {**row, "start_step_ms": None}) is None  # it wants a start the run did not make
    assert measured.model_lag(LIMITS, {**row, "start_step_ms": None, "instances_at_start": 2}) == 0.0  # none wanted
    assert measured.model_lag(LIMITS, {**row, "service_ms": None}) is None


def test_min_instances_at_max_instances_need_no_scale_out():
    result = spike(Limits(6, 6, 10, 1.0), busy_s=0.05, before_rps=2, spike_rps=400, start_s=0.44, cores=2)
    assert (result.steps, result.lag_s) == ([(0.0, 6)], 0.0)


# ---- the same scale-out, measured on a run (visitkit/results/scaleout.py) ---------------------------------------
def spike_run():
    """A spike by hand, one row a second. Users: none at 0, 20 from 1 to 60, then 70, 120, 170 and 200 from 64 to
    93 (its peak), 20 again from 94. serve-page's queue: empty but from 61 to 66, at 68 and 74; get-counter's always
    empty; inc-counter's never. serve-page's instances 1, 2 from 65, 4 from 70, 5 from 80; its requests 2/s to 61,
    then 20/s; 6 in flight to 70, 4 after; HAProxy's service time 50 ms, 40 ms from 77; its worst page's p95
    300 ms, 100 ms at 61, 900 ms at 65, and from 77 120 ms on odd seconds, 130 ms on even ones."""
    users = {**{t: 20 for t in range(1, 61)}, 61: 70, 62: 120, 63: 170, **{t: 200 for t in range(64, 94)},
             **{t: 20 for t in range(94, 101)}}
    history, samples = [], []
    for t in range(101):
        p95 = 100.0 if t == 61 else 900.0 if t == 65 else (120.0 if t % 2 else 130.0) if t >= 77 else 300.0
        history.append({"time": float(t), "users": users.get(t, 0),
                        "p95_ms_by_function": {"serve-page": p95, "get-counter": 20.0, "inc-counter": None}})
        page = {"instances": 5 if t >= 80 else 4 if t >= 70 else 2 if t >= 65 else 1,
                "queued": 3 if 61 <= t <= 66 or t in (68, 74) else 0, "in_flight": 6 if t <= 70 else 4,
                "requests": 2 * t if t <= 61 else 122 + 20 * (t - 61),
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


def test_the_scale_out_lag_lasts_until_the_queue_is_empty_with_the_instances_the_spike_needs():
    history, samples = spike_run()
    # serve-page waits at 61-66, and at 68 and 74; its instances: 2 from 65, 4 from 70
    assert measured.lag_s(samples, "serve-page", 61, 93) == 6.0  # one instance needed: empty at 67
    # four needed: the empty 67 and 69 had 2; at 70 four, empty (74's queue is for a slot, not an instance)
    assert measured.lag_s(samples, "serve-page", 61, 93, unwaited=4) == 9.0
    assert measured.lag_s(samples, "get-counter", 61, 93) == 0.0  # nothing waited from the step on
    assert measured.lag_s(samples, "inc-counter", 61, 93) is None  # still waiting at the spike's end


def test_the_instances_a_spike_needs_at_full_concurrency_are_capped_at_max_instances():
    functions = {name: {"max_instances": 6, "concurrency": 10} for name in FUNCTIONS}
    settings = parse_settings({"shards_per_page": 2, "cache_ttl_seconds": 10, "functions": functions}, "test")
    assert measured.unwaited(settings, "serve-page", 400, 50.0) == 2  # 20 in flight, 10 an instance
    assert measured.unwaited(settings, "serve-page", 401, 50.0) == 3
    assert measured.unwaited(settings, "serve-page", 4000, 50.0) == 6
    assert measured.unwaited(None, "serve-page", 4000, 50.0) == 1


def test_the_spikes_instances_latency_and_the_models_inputs_per_function():
    # serve-page launched one instance before the step (at 30) and two in it: ready at 65 and 70, in 900 and
    # 1,000 ms; get-counter one after the step's end
    events = [{"time": 30.0, "event": "start", "function": "serve-page", "instance": "serve-page-0"},
              {"time": 31.0, "event": "ready", "function": "serve-page", "instance": "serve-page-0", "start_ms": 700},
              {"time": 64.1, "event": "start", "function": "serve-page", "instance": "serve-page-1"},
              {"time": 65.0, "event": "ready", "function": "serve-page", "instance": "serve-page-1", "start_ms": 900},
              {"time": 69.0, "event": "start", "function": "serve-page", "instance": "serve-page-2"},
              {"time": 70.0, "event": "ready", "function": "serve-page", "instance": "serve-page-2", "start_ms": 1000},
              {"time": 95.0, "event": "start", "function": "get-counter", "instance": "get-counter-1"},
              {"time": 96.0, "event": "ready", "function": "get-counter", "instance": "get-counter-1", "start_ms": 500}]
    found = measured.figures(*spike_run(), events=events)
    assert (found["start"], found["end"]) == (61.0, 93.0)
    page = found["functions"]["serve-page"]
    assert page == {
        "lag_s": 6.0, "instances_at_start": 1, "instances_end": 5, "instances_max": 5,
        # the highest p95 in 61-71; the steady part is 77-93 (the last half of 32 s): nine 120s, eight 130s
        "p95_first_ms": 900.0, "p95_steady_ms": 120.0,
        "rps_before": 2.0,  # 2 to 122 requests over the minute from 1 to 61
        "rps_spike": 20.0,  # 122 to 762 from 61 to 93
        "service_ms": 40.0,
        "start_step_ms": 950.0,  # the median of the two launched in the step
        "service_starting_ms": 300.0,  # until 70, when the last was ready: 6 in flight at 20/s
        "model_lag_s": None}  # without the settings, no model
    assert found["functions"]["store-inc-counter"]["p95_first_ms"] is None  # Locust does not call it
    assert found["functions"]["inc-counter"]["lag_s"] is None
    assert found["functions"]["get-counter"]["start_step_ms"] is None  # launched after the step's end
    # with its settings, the lag waits for the instances the spike needs: 20/s of 400 ms, 2 at once: 4 (from 70)
    history, samples = spike_run()
    for sample in samples:
        sample["functions"]["serve-page"] = {**sample["functions"]["serve-page"], "service_ms": 400.0}
    functions = {name: {"max_instances": 6, "concurrency": 2} for name in FUNCTIONS}
    settings = parse_settings({"shards_per_page": 2, "cache_ttl_seconds": 10, "functions": functions}, "test")
    page = measured.figures(history, samples, settings, events)["functions"]["serve-page"]
    assert page["lag_s"] == 9.0
    # the model given the run's own (1 up, 2 -> 20/s of 400 ms, 300 ms while its 0.95 s starts run): on demand
    # asks for 3, 5, then 6 (the cap) in the first three ticks, ready at 1.0, 1.25 and 1.5 s with 13.75 queued;
    # 20/s served at 1.25 s, then 30/s: the queue is gone at the 2.5 s tick
    assert page["model_lag_s"] == 2.5

"""A spike's scale-out by the autoscaler's rules (visitkit/model/scaleout.py), worked by hand."""
from visitkit.model.occupancy import occupancy
from visitkit.model.scaleout import Limits, spike

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

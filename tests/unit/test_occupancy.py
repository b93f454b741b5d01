"""Request-based billing by occupancy (model/occupancy.py), against closed forms worked by hand."""
import math

import pytest

from visitkit.model import occupancy as o


def test_an_mm1_queue_is_empty_one_minus_its_load_of_the_time():
    assert o.empty_probability(1, 0.25) == pytest.approx(0.75)


def test_an_mm2_queue_is_empty_as_erlangs_formula_says():
    # P0 = 1 / (1 + a + a^2 / (2 (1 - a/2))) with a = 1: 1 / (1 + 1 + 1) = 1/3
    assert o.empty_probability(2, 1.0) == pytest.approx(1 / 3)


def test_a_saturated_instance_is_never_empty_and_a_large_one_does_not_overflow():
    assert o.empty_probability(4, 4.0) == 0.0
    assert 0 <= o.empty_probability(1000, 999.0) < 1e-6


def test_a_short_busy_period_is_billed_the_rounding_and_a_long_one_its_length_and_half_of_it():
    assert o.rounded_period_s(0.001) == pytest.approx(o.BILLING_ROUND_S)
    assert o.rounded_period_s(100.0) == pytest.approx(100.0 + o.BILLING_ROUND_S / 2, rel=1e-4)


def test_one_request_a_second_of_20_ms_on_one_instance_by_hand():
    """M/M/1 with lambda = 1/s, s = 20 ms: rho = 0.02, busy periods start lambda (1 - rho) = 0.98 a second and last
    s / (1 - rho) on average, each billed 0.1 / (1 - exp(-0.1 / that)) s."""
    found = o.occupancy(1.0, 0.02, 50.0, 1, 0, 4)
    mean = 0.02 / 0.98
    assert found.instances == 1 and found.busy_share == pytest.approx(0.02)
    assert found.active_per_s == pytest.approx(0.98 * 0.1 / (1 - math.exp(-0.1 / mean)))
    assert 0.098 < found.active_per_s < 0.1  # about one rounded 100 ms a second, not the 20 ms served


def test_instances_follow_the_60_percent_target_between_min_and_max():
    # 80 requests at once per instance, 100 ms each: 800/s an instance, scaled out at 480/s
    assert o.occupancy(400, 0.1, 800, 80, 0, 10).instances == 1
    assert o.occupancy(1000, 0.1, 800, 80, 0, 10).instances == 3  # 1000 / 480 = 2.08
    assert o.occupancy(100_000, 0.1, 800, 80, 0, 10).instances == 10
    assert o.occupancy(10, 0.1, 800, 80, 3, 10).instances == 3


def test_at_the_knee_every_instance_is_billed_all_the_time():
    found = o.occupancy(8000, 0.1, 800, 80, 0, 10)
    assert (found.instances, found.active_per_s) == (10, 10.0)


def test_minimum_instances_are_billed_idle_when_they_serve_nothing():
    assert o.occupancy(0, 0.1, 800, 80, 2, 10).idle_per_s == 2.0
    busy = o.occupancy(1, 0.02, 50.0, 1, 2, 4)
    assert busy.idle_per_s == pytest.approx(2 - busy.active_per_s)


def test_requests_beyond_what_the_instances_serve_are_billed_when_they_are_served_later():
    # 10 instances of 800/s get 12,000 pushes a second: 15 instance-seconds of work a second, served as the backlog
    # drains
    assert o.occupancy(12_000, 0.1, 800, 80, 0, 10).active_per_s == pytest.approx(15.0)

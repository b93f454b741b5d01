"""The latency model (model/latency.py) against Erlang's formulas worked by hand."""
import math

import pytest

from visitkit.model import capacity, latency
from visitkit.paths import ITERATIONS_DIR
from visitkit.settings import load_settings
from visitkit.twin.profile import load_profile


def erlang_b_recursion(servers: int, offered: float) -> float:
    """Erlang C from Erlang B's recursion, a formula independent of the model's."""
    blocked = 1.0
    for j in range(1, servers + 1):
        blocked = offered * blocked / (j + offered * blocked)
    return servers * blocked / (servers - offered * (1 - blocked))


def test_two_servers_at_one_erlang_wait_a_third_of_the_time():
    # C(2, 1) = (a^2 / 2!) / (1 - a/2) x P0, P0 = 1/3: (1/2) / (1/2) / 3 = 1/3
    assert latency.erlang_c(2, 1.0) == pytest.approx(1 / 3)


@pytest.mark.parametrize("servers, offered", [(20, 11.1), (300, 100.0), (1000, 900.0), (5000, 4900.0)])
def test_erlang_c_agrees_with_erlang_b_on_every_path(servers, offered):
    assert latency.erlang_c(servers, offered) == pytest.approx(erlang_b_recursion(servers, offered), rel=1e-9,
                                                               abs=1e-300)


def test_one_server_p95_wait_by_hand():
    # M/M/1, 100 ms, 5 requests/s: waits with probability rho = 0.5, P(W > t) = 0.5 exp(-5 t): t95 = ln(10) / 5
    assert latency.wait_quantile_s(1, 0.1, 5.0, 0.95) == pytest.approx(math.log(10) / 5)
    assert latency.wait_quantile_s(1, 0.1, 5.0, 0.5) == 0.0  # half never wait
    assert latency.wait_quantile_s(1, 0.1, 10.0, 0.95) == math.inf


def test_iteration_3s_inc_counter_queues_as_the_rate_nears_its_knee():
    settings, profile = load_settings(ITERATIONS_DIR / "iteration-3"), load_profile("study")
    knee = capacity.predict(settings, profile).knee_visits_per_s
    p95 = [latency.predict_latency(settings, profile, knee * share)["inc-counter"].p95_ms for share in (0.3, 0.6, 0.8)]
    assert 37 <= p95[0] < p95[1] < p95[2]  # from its service time up
    assert latency.predict_latency(settings, profile, knee)["inc-counter"].p95_ms == math.inf
    # 2 instances x 1 at once: two servers of 37 ms (the profile's time, measured at the deployed CPU)
    found = latency.predict_latency(settings, profile, knee * 0.6)["inc-counter"]
    assert (found.servers, found.service_ms) == (2, pytest.approx(37.0))


SETTINGS_FILES = ITERATIONS_DIR.glob("*/settings.tfvars.json")


@pytest.mark.parametrize("iteration", sorted(path.parent.name for path in SETTINGS_FILES))
def test_each_queue_saturates_at_the_capacity_models_capacity(iteration):
    settings, profile = load_settings(ITERATIONS_DIR / iteration), load_profile("study")
    prediction = capacity.predict(settings, profile)
    for function in latency.predict_latency(settings, profile, 0.1):
        servers, service_s = latency.queue_of(settings, prediction, function)
        assert servers / service_s == pytest.approx(prediction.capacity_rps[function]), function
        assert service_s >= prediction.busy_ms[function] / 1000 - 1e-12, function  # never faster than its service

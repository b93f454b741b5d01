"""Resource figures: the aggregation per function and over the load, Cloud Run's figures, and the
machine's CPU at a moment (sampling real processes: integration/test_process_sampler.py)."""
import pytest

from visitkit.twin import resources
from visitkit.paths import ITERATIONS_DIR
from visitkit.settings import load_settings

ITERATION_1 = ITERATIONS_DIR / "iteration-1"


def test_instances_add_up_to_their_function():
    assert resources.component_of("get-counter-3") == "get-counter"
    assert resources.component_of("store-inc-counter-0") == "store-inc-counter"
    assert resources.component_of("pubsub-emulator") == "pubsub-emulator"


def sample(t, cpu, rss):
    return {"time": t, "resources": {"inc-counter": {"cpu_percent": cpu, "rss_mb": rss}}}


def test_the_runs_figures_integrate_cpu_over_the_load():
    samples = [sample(0, None, 40), sample(1, 50.0, 41), sample(3, 100.0, 45), sample(4, 20.0, 42),
               sample(9, 400.0, 90)]  # after the load: left out
    figures = resources.summarize(samples, 0, 4)["inc-counter"]
    assert figures["cpu_seconds"] == pytest.approx(0.5 * 1 + 1.0 * 2 + 0.2 * 1)
    assert figures["cpu_percent_mean"] == pytest.approx((50 + 100 + 20) / 3)
    assert figures["cpu_percent_peak"] == 100 and figures["memory_peak_mb"] == 45
    assert resources.cpu_ms_per_request({"inc-counter": figures}, {"inc-counter": 900}) == {
        "inc-counter": pytest.approx(2700 / 900)}


def gcp_sample(t, billed, cpu, cpu95, mem95):
    functions = {name: {"billable_instance_s": 0, "cpu_utilization": None, "cpu_utilization_p95": None,
                        "memory_utilization_p95": None} for name in ("serve-page", "get-counter", "store-inc-counter")}
    functions["inc-counter"] = {"billable_instance_s": billed, "cpu_utilization": cpu, "cpu_utilization_p95": cpu95,
                                "memory_utilization_p95": mem95}
    return {"time": t, "functions": functions}


def test_cloud_runs_figures_from_billed_time_and_utilization():
    # iteration 1: inc-counter has 0.167 vCPU and 256M (= 244.14 MiB)
    samples = [gcp_sample(0, 0, None, None, None), gcp_sample(60, 60, 0.25, 0.3, 0.4),
               gcp_sample(120, 180, 0.5, 0.6, 0.5)]
    figures = resources.platform_summary(samples, load_settings(ITERATION_1))["inc-counter"]
    assert figures["cpu_seconds"] == pytest.approx(0.167 * (60 * 0.25 + 120 * 0.5))  # 12.525
    assert figures["cpu_percent_mean"] == pytest.approx(12.525 / 120 * 100)
    assert figures["cpu_percent_peak"] == pytest.approx(2 * 0.167 * 0.6 * 100)  # 2 instances billed all minute
    assert figures["memory_peak_mb"] == pytest.approx(0.5 * 256e6 / 2**20 * 2)


def test_the_machines_cpu_at_a_moment_adds_every_part_over_five_seconds_either_side():
    def sample(t, a, b):
        return {"time": t, "resources": {"get-counter": {"cpu_percent": a}, "locust": {"cpu_percent": b}}}

    samples = [sample(0, 10, 10), sample(95, 100, 80), sample(100, 90, 90), sample(105, None, 160),
               sample(106, 500, 500)]
    busy = resources.machine_at(samples, 100, cores=2)
    assert busy["cpu_percent"] == pytest.approx((180 + 180 + 160) / 3)
    assert busy["busy"] is True  # 173 % of 200 % >= 85 %
    assert resources.machine_at(samples, 0, cores=2)["busy"] is False
    assert resources.machine_at(samples, 100, cores=None)["busy"] is None
    assert resources.machine_at(samples, 50, cores=2) is None  # no sample near it

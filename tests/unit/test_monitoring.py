"""The Monitoring queries and their parsing, offline: a fake client answers with saved responses.

The fixtures in tests/fixtures/monitoring/ are ListTimeSeries responses in the API's JSON shape
(camelCase fields, int64 values as strings, each series' points newest first) for a 3-minute
window, 10:00 to 10:03 UTC on 2025-11-22, with two services under load (429s) and a growing
backlog. Expected figures below are worked out by hand from those files.
"""
import csv
import datetime as dt

import pytest

from google.api.distribution_pb2 import Distribution
from google.cloud import monitoring_v3  # parses fixtures only; no client is built

from visitkit.cloud import monitoring
from visitkit.catalogue import FUNCTIONS
from visitkit.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "monitoring"
T0 = int(dt.datetime(2025, 11, 22, 10, 0, tzinfo=dt.timezone.utc).timestamp())
MINUTE = 60
SUBSCRIPTION = "eventarc-us-central1-store-inc-counter-123-sub-456"
LOG_METRICS = {"requests_429": "visitkit_requests_429", "store_deliveries": "visitkit_store_deliveries"}


class FakeMetricClient:
    """Answers list_time_series from the fixture named after the query whose filter it got."""

    def __init__(self):
        self.requests = []

    def list_time_series(self, request):
        self.requests.append(request)
        for query in monitoring.QUERIES:
            if f'metric.type = "{monitoring.metric_type(query, LOG_METRICS)}"' in request["filter"]:
                return load(query.name)
        raise AssertionError(f"unexpected filter {request['filter']}")


def load(name):
    text = (FIXTURES / f"{name}.json").read_text()
    return monitoring_v3.ListTimeSeriesResponse.from_json(text).time_series


@pytest.fixture
def samples(tmp_path):
    return monitoring.fetch_window("visit-counter-test", T0 + 5, T0 + 3 * MINUTE - 10, SUBSCRIPTION,
                                   tmp_path, client=FakeMetricClient(), ingestion_delay=0,
                                   now=lambda: T0 + 10 * MINUTE, sleep=pytest.fail, log_metrics=LOG_METRICS)


def by_time(samples, when):
    [sample] = [s for s in samples if s["time"] == when]
    return sample


# --- requests --------------------------------------------------------------------------------

def test_one_request_per_metric_over_the_window_widened_to_whole_minutes():
    requests = monitoring.build_requests("p1", T0 + 5, T0 + 2 * MINUTE + 1, "sub-1")
    assert set(requests) == {q.name for q in monitoring.QUERIES}
    for request in requests.values():
        assert request["name"] == "projects/p1"
        assert request["interval"] == {"start_time": {"seconds": T0},
                                       "end_time": {"seconds": T0 + 3 * MINUTE}}
        assert request["aggregation"]["alignment_period"] == {"seconds": 60}


def test_cloud_run_queries_name_the_deployed_services_and_group_by_service():
    request = monitoring.build_requests("p1", T0, T0 + MINUTE, "sub-1")["request_count"]
    assert 'metric.type = "run.googleapis.com/request_count"' in request["filter"]
    assert 'resource.type = "cloud_run_revision"' in request["filter"]
    # serve-page is deployed as the Cloud Run service `app`
    assert ('resource.labels.service_name = monitoring.regex.full_match('
            '"app|get-counter|inc-counter|store-inc-counter")') in request["filter"]
    assert request["aggregation"]["per_series_aligner"] == "ALIGN_DELTA"
    assert request["aggregation"]["cross_series_reducer"] == "REDUCE_SUM"
    assert request["aggregation"]["group_by_fields"] == ["resource.label.service_name",
                                                         "metric.label.response_code"]


def test_subscription_queries_name_the_subscription():
    requests = monitoring.build_requests("p1", T0, T0 + MINUTE, "sub-1")
    for name in ("undelivered_messages", "oldest_unacked_age", "dead_lettered"):
        assert 'resource.labels.subscription_id = "sub-1"' in requests[name]["filter"]
        assert 'resource.type = "pubsub_subscription"' in requests[name]["filter"]


def test_firestore_writes_are_read_from_the_default_database_only():
    request = monitoring.build_requests("p1", T0, T0 + MINUTE, "sub-1")["firestore_writes"]
    assert 'resource.type = "firestore.googleapis.com/Database"' in request["filter"]
    assert 'resource.labels.database_id = "(default)"' in request["filter"]


def test_log_based_metrics_take_their_names_from_the_deployment():
    requests = monitoring.build_requests("p1", T0, T0 + MINUTE, "sub-1", log_metrics=LOG_METRICS)
    assert 'metric.type = "logging.googleapis.com/user/visitkit_requests_429"' in requests["requests_429_logged"]["filter"]
    assert requests["requests_429_logged"]["aggregation"]["group_by_fields"] == ["metric.label.service_name"]
    assert requests["store_deliveries"]["aggregation"]["group_by_fields"] == ["metric.label.outcome"]
    # before a deployment (a dry run) the name is a placeholder that says where it comes from
    unnamed = monitoring.build_requests("p1", T0, T0 + MINUTE, "sub-1")["store_deliveries"]["filter"]
    assert "<store_deliveries_metric_name>" in unnamed


def test_requests_are_accepted_by_the_client_library_request_type():
    # Catches misspelled fields or enum names without contacting Google.
    for request in monitoring.build_requests("p1", T0, T0 + MINUTE, "sub-1").values():
        parsed = monitoring_v3.ListTimeSeriesRequest(request)
        assert parsed.view == monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL


# --- parsing ---------------------------------------------------------------------------------

def test_rows_come_out_in_time_order_with_short_label_names():
    rows = monitoring.rows_from_time_series(load("undelivered_messages"))
    assert [(r["time"], r["value"]) for r in rows] == [
        (T0 + MINUTE, 930), (T0 + 2 * MINUTE, 1970), (T0 + 3 * MINUTE, 3035)]
    assert rows[0]["subscription_id"] == SUBSCRIPTION
    assert "project_id" not in rows[0]


def test_percentiles_interpolate_inside_exponential_buckets():
    rows = monitoring.rows_from_time_series(load("request_latencies"))
    app = [r for r in rows if r["service_name"] == "app"][0]
    # 40 samples in [32, 64), 50 in [64, 128), 10 in [128, 256)
    assert app["count"] == 100
    assert app["p50"] == pytest.approx(64 + 64 * 10 / 50)
    assert app["p95"] == pytest.approx(128 + 128 * 5 / 10)


def test_percentile_in_the_overflow_bucket_is_its_lower_bound():
    distribution = Distribution(
        count=10, bucket_options={"linear_buckets": {"num_finite_buckets": 2, "width": 10, "offset": 0}},
        bucket_counts=[0, 1, 1, 8])
    assert monitoring.percentile(distribution, 0.95) == 20
    assert monitoring.percentile(distribution, 0.10) == pytest.approx(10)


def test_percentile_with_explicit_buckets_and_empty_distribution():
    distribution = Distribution(
        count=4, bucket_options={"explicit_buckets": {"bounds": [0, 100, 1000]}}, bucket_counts=[0, 2, 2])
    assert monitoring.percentile(distribution, 0.75) == pytest.approx(100 + 900 * 1 / 2)
    assert monitoring.percentile(Distribution(), 0.5) is None


# --- samples ---------------------------------------------------------------------------------

def test_one_sample_per_minute_in_the_local_schema(samples):
    assert [s["time"] for s in samples] == [T0 + MINUTE, T0 + 2 * MINUTE, T0 + 3 * MINUTE]
    for sample in samples:
        assert sample["source"] == "gcp-monitoring"
        assert set(sample["functions"]) == set(FUNCTIONS)
        for figures in sample["functions"].values():
            # the local schema, plus the 429s the request logs saw (only Google Cloud has those)
            assert set(figures) == {"instances", "in_flight", "queued", "requests", "responses_2xx",
                                    "responses_4xx", "responses_429", "responses_5xx", "service_ms",
                                    "service_ms_p95", "queue_ms", "responses_429_logged", "billable_instance_s",
                                    "cpu_utilization", "cpu_utilization_p95", "memory_utilization",
                                    "memory_utilization_p95"}
            assert figures["in_flight"] is None and figures["queued"] is None
            assert figures["queue_ms"] is None
        assert {"accepted", "delivered", "stored", "backlog"} <= set(sample["store"])


def test_counters_are_cumulative_from_the_window_start(samples):
    first = by_time(samples, T0 + MINUTE)["functions"]["inc-counter"]
    assert (first["requests"], first["responses_2xx"], first["responses_4xx"],
            first["responses_429"], first["responses_5xx"]) == (1452, 1450, 2, 0, 0)
    last = by_time(samples, T0 + 3 * MINUTE)["functions"]["inc-counter"]
    assert last["requests"] == 1450 + 1600 + 1620 + 200 + 280 + 3 + 2
    assert last["responses_2xx"] == 4670
    assert last["responses_4xx"] == 482  # 480 429s and 2 404s
    assert last["responses_429"] == 480
    assert last["responses_5xx"] == 3
    get_counter = by_time(samples, T0 + 2 * MINUTE)["functions"]["get-counter"]
    assert (get_counter["responses_2xx"], get_counter["responses_429"]) == (2900, 50)


def test_serve_page_figures_come_from_the_app_service(samples):
    serve_page = by_time(samples, T0 + MINUTE)["functions"]["serve-page"]
    assert serve_page["requests"] == 1500
    assert serve_page["instances"] == 2  # 1 active + 1 idle
    assert serve_page["service_ms"] == pytest.approx(76.8)


def test_latency_and_instances_are_per_minute_and_missing_minutes_are_none(samples):
    inc = by_time(samples, T0 + 3 * MINUTE)["functions"]["inc-counter"]
    assert inc["service_ms"] == pytest.approx(192)
    assert inc["service_ms_p95"] == pytest.approx(3072)
    assert inc["instances"] == 2
    assert by_time(samples, T0 + 3 * MINUTE)["functions"]["get-counter"]["service_ms"] is None
    assert by_time(samples, T0 + 2 * MINUTE)["functions"]["store-inc-counter"]["instances"] == 4


def test_store_figures(samples):
    store = by_time(samples, T0 + 3 * MINUTE)["store"]
    assert store["accepted"] == 4670  # inc-counter's 202s
    assert store["delivered"] == 520 + 560 + 555  # store-inc-counter's 2xx
    assert store["stored"] is None  # no per-minute figure on Google Cloud
    assert store["backlog"] == 3035
    assert store["oldest_unacked_s"] == 212
    assert store["firestore_writes"] == 1040 + 1120 + 1110
    assert store["dead_lettered"] == 2 + 3
    assert (store["counted"], store["already_counted"], store["malformed"]) == (515 + 550 + 545, 8 + 10, 1)


def test_billed_instance_time_and_utilizations_per_function(samples):
    inc = [by_time(samples, T0 + m * MINUTE)["functions"]["inc-counter"] for m in (1, 2, 3)]
    assert [f["billable_instance_s"] for f in inc] == [60, 180, 300]  # cumulative
    assert [f["cpu_utilization"] for f in inc] == [0.25, 0.5, 0.75]
    assert inc[2]["cpu_utilization_p95"] == pytest.approx(0.795)  # inside the [0.7, 0.8) bucket
    assert inc[0]["memory_utilization_p95"] == pytest.approx(0.495)
    assert by_time(samples, T0 + 3 * MINUTE)["functions"]["serve-page"]["billable_instance_s"] == 0
    store = by_time(samples, T0 + 3 * MINUTE)["store"]
    assert (store["firestore_reads"], store["firestore_deletes"]) == (200 + 240 + 260, 4)


def test_429s_from_the_request_logs_beside_request_count(samples):
    inc = by_time(samples, T0 + 3 * MINUTE)["functions"]["inc-counter"]
    assert inc["responses_429_logged"] == 140 + 310
    assert by_time(samples, T0 + 3 * MINUTE)["functions"]["get-counter"]["responses_429_logged"] == 60 + 130 + 210
    assert by_time(samples, T0 + 3 * MINUTE)["functions"]["serve-page"]["responses_429_logged"] == 0


def test_every_metric_is_saved_as_a_csv(tmp_path, samples):
    saved = {p.stem for p in (tmp_path / "metrics").glob("*.csv")}
    assert saved == {q.name for q in monitoring.QUERIES}
    with open(tmp_path / "metrics" / "request_count.csv") as f:
        rows = list(csv.DictReader(f))
    assert {"time", "service_name", "response_code", "value"} <= set(rows[0])
    assert sum(int(r["value"]) for r in rows if r["response_code"] == "429") == 50 + 120 + 200 + 280
    with open(tmp_path / "metrics" / "request_latencies.csv") as f:
        assert {"count", "mean", "p50", "p95"} <= set(csv.DictReader(f).fieldnames)


def test_waits_for_ingestion_only_as_long_as_needed():
    slept = []
    monitoring.wait_for_ingestion(end=1000, delay=240, now=lambda: 1100, sleep=slept.append)
    monitoring.wait_for_ingestion(end=1000, delay=240, now=lambda: 1300, sleep=slept.append)
    assert slept == [140]


def test_samples_ignore_services_that_are_not_ours():
    rows = {"request_count": [{"time": T0, "service_name": "someone-else", "response_code": "200",
                               "value": 7}]}
    [sample] = monitoring.samples_from_rows(rows)
    assert all(f["requests"] == 0 for f in sample["functions"].values())
    assert sample["store"]["backlog"] is None


def test_every_query_feeds_the_samples():
    assert set(monitoring.ACCUMULATORS) == {q.name for q in monitoring.QUERIES}


def test_rows_in_one_minute_combine_by_kind():
    rows = {"request_count": [{"time": T0, "service_name": "inc-counter", "response_code": code, "value": count}
                              for code, count in (("202", 7), ("204", 5), ("302", 3))],
            "instance_count": [{"time": T0, "service_name": "app", "state": state, "value": count}
                               for state, count in (("active", 1), ("idle", 2))],
            "undelivered_messages": [{"time": T0, "value": 3}, {"time": T0, "value": 8}],
            "store_deliveries": [{"time": T0, "outcome": outcome, "value": 2} for outcome in ("counted", "unknown")]}
    [sample] = monitoring.samples_from_rows(rows)
    inc = sample["functions"]["inc-counter"]
    assert (inc["requests"], inc["responses_2xx"]) == (15, 12)  # a 3xx is in requests only
    assert sample["store"]["accepted"] == 7  # the 202s; a CORS preflight's 204 is not a visit
    assert sample["functions"]["serve-page"]["instances"] == 3  # active and idle together
    assert sample["store"]["backlog"] == 8
    assert (sample["store"]["counted"], "unknown" in sample["store"]) == (2, False)

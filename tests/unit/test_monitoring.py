"""The Monitoring queries and their parsing, offline: a fake client answers with saved responses.

The fixtures in tests/fixtures/monitoring/ are ListTimeSeries responses in the API's JSON shape
(camelCase fields, int64 values as strings, each series' points newest first) for a 3-minute
window, 10:00 to 10:03 UTC on 2025-11-22, with two services under load (429s) and a growing
backlog. Expected figures below are worked out by hand from those files.
"""
import csv
import datetime as dt
import json

import pytest

from google.api.distribution_pb2 import Distribution
from google.api_core import exceptions
from google.cloud import monitoring_v3  # parses fixtures only; no client is built

from visitkit.catalogue import FUNCTIONS, PUSH_FUNCTION
from visitkit.cloud import monitoring
from visitkit.errors import RunError
from visitkit.paths import ROOT
from visitkit.results import analysis

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


class FailingMetricClient(FakeMetricClient):
    """A FakeMetricClient whose queries named in `errors` raise their errors first, in turn; with
    `forever`, the last one on every later call too."""

    def __init__(self, errors, forever=False):
        super().__init__()
        self.errors, self.forever, self.asked = {name: list(raised) for name, raised in errors.items()}, forever, []

    def list_time_series(self, request):
        [name] = [q.name for q in monitoring.QUERIES
                  if f'metric.type = "{monitoring.metric_type(q, LOG_METRICS)}"' in request["filter"]]
        self.asked.append(name)
        raised = self.errors.get(name)
        if raised:
            raise raised[0] if self.forever and len(raised) == 1 else raised.pop(0)
        return super().list_time_series(request)


def fetch(results_dir, client, sleep=pytest.fail):
    return monitoring.fetch_window("visit-counter-test", T0 + 5, T0 + 3 * MINUTE - 10, SUBSCRIPTION, results_dir,
                                   client=client, ingestion_delay=0, now=lambda: T0 + 10 * MINUTE, sleep=sleep,
                                   log_metrics=LOG_METRICS)


DENIED = "Permission monitoring.timeSeries.list denied (or the resource may not exist)."


def load(name):
    text = (FIXTURES / f"{name}.json").read_text()
    return monitoring_v3.ListTimeSeriesResponse.from_json(text).time_series


@pytest.fixture
def samples(tmp_path):
    return fetch(tmp_path, FakeMetricClient())


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
    # from the window's start, where the counters are zero
    assert [s["time"] for s in samples] == [T0, T0 + MINUTE, T0 + 2 * MINUTE, T0 + 3 * MINUTE]
    assert samples[0]["functions"]["inc-counter"]["requests"] == 0 and samples[0]["store"]["backlog"] is None
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
    assert set(monitoring.ACCUMULATORS) == {q.name for q in (*monitoring.QUERIES, *monitoring.PULL_QUERIES)}


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


# --- a query that fails --------------------------------------------------------------------------

def test_a_query_that_fails_loses_its_own_figures_only(tmp_path):
    client = FailingMetricClient({"dead_lettered": [exceptions.PermissionDenied(DENIED)]})
    samples = fetch(tmp_path, client)  # sleep=pytest.fail: a permission is not asked again
    assert client.asked.count("dead_lettered") == 1
    assert [s["time"] for s in samples] == [T0, T0 + MINUTE, T0 + 2 * MINUTE, T0 + 3 * MINUTE]
    assert all(s["store"]["dead_lettered"] is None for s in samples)  # not 0, not even at the window's start
    last = by_time(samples, T0 + 3 * MINUTE)
    assert last["store"]["backlog"] == 3035 and last["functions"]["inc-counter"]["responses_429"] == 480
    assert last["store"]["firestore_writes"] == 1040 + 1120 + 1110
    assert not (tmp_path / "metrics" / "dead_lettered.csv").exists()
    assert (tmp_path / "metrics" / "request_count.csv").exists()
    assert json.loads((tmp_path / "metrics" / "missing.json").read_text()) == {"format": 1, "missing": [{
        "metric": "dead_lettered", "metric_type": "pubsub.googleapis.com/subscription/dead_letter_message_count",
        "error": "PermissionDenied", "code": 403, "reason": DENIED}]}
    assert monitoring.read_missing(tmp_path / "metrics")[0]["error"] == "PermissionDenied"


def test_a_log_based_metric_not_visible_yet_is_named_by_its_deployed_name(tmp_path):
    error = exceptions.NotFound("Cannot find metric(s) that match type = " + "x" * 500)
    samples = fetch(tmp_path, FailingMetricClient({"store_deliveries": [error]}))
    [missing] = monitoring.read_missing(tmp_path / "metrics")
    assert missing["metric_type"] == "logging.googleapis.com/user/visitkit_store_deliveries"
    assert (missing["error"], missing["code"]) == ("NotFound", 404)
    assert len(missing["reason"]) <= monitoring.REASON_CHARS and missing["reason"].endswith(" ...")
    store = by_time(samples, T0 + 3 * MINUTE)["store"]
    assert all(store[outcome] is None for outcome in monitoring.DELIVERY_OUTCOMES)
    assert store["dead_lettered"] == 5


def test_request_count_failing_leaves_the_requests_and_the_stores_accepted_empty(tmp_path):
    samples = fetch(tmp_path, FailingMetricClient({"request_count": [exceptions.InvalidArgument("bad filter")]}))
    last = by_time(samples, T0 + 3 * MINUTE)
    inc = last["functions"]["inc-counter"]
    assert (inc["requests"], inc["responses_429"], last["store"]["accepted"], last["store"]["delivered"]) == (
        None, None, None, None)
    assert inc["responses_429_logged"] == 140 + 310 and inc["service_ms"] == pytest.approx(192)


def test_a_transient_error_is_asked_again_after_a_short_wait(tmp_path):
    slept = []
    client = FailingMetricClient({"undelivered_messages": [exceptions.ServiceUnavailable("try again"),
                                                           exceptions.DeadlineExceeded("slow")]})
    samples = fetch(tmp_path, client, sleep=slept.append)
    assert slept == list(monitoring.RETRY_WAITS_S) and client.asked.count("undelivered_messages") == 3
    assert by_time(samples, T0 + 3 * MINUTE)["store"]["backlog"] == 3035
    assert monitoring.read_missing(tmp_path / "metrics") == []  # written, and empty: every query was read


def test_a_transient_error_that_lasts_is_missing_after_the_retries(tmp_path):
    slept = []
    client = FailingMetricClient({"instance_count": [exceptions.TooManyRequests("quota")]}, forever=True)
    samples = fetch(tmp_path, client, sleep=slept.append)
    assert client.asked.count("instance_count") == len(monitoring.RETRY_WAITS_S) + 1
    assert [m["error"] for m in monitoring.read_missing(tmp_path / "metrics")] == ["TooManyRequests"]
    assert all(f["instances"] is None for s in samples for f in s["functions"].values())


def test_when_every_query_fails_there_are_no_samples_and_every_query_is_named(tmp_path):
    client = FailingMetricClient({q.name: [exceptions.PermissionDenied(DENIED)] for q in monitoring.QUERIES})
    assert fetch(tmp_path, client) == []
    assert [m["metric"] for m in monitoring.read_missing(tmp_path / "metrics")] == [q.name for q in monitoring.QUERIES]


def test_every_query_names_the_figures_it_fills():
    assert set(monitoring.FIELDS) == {q.name for q in (*monitoring.QUERIES, *monitoring.PULL_QUERIES)}
    sample = monitoring.window_start_sample(T0)
    schema = {*sample["store"], *sample["functions"]["inc-counter"]}
    assert {field for fields in monitoring.FIELDS.values() for field in fields} <= schema


def test_missing_json_of_another_format_is_refused(tmp_path):
    (tmp_path / "missing.json").write_text(json.dumps({"format": 2, "missing": []}))
    with pytest.raises(RunError, match="format 2"):
        monitoring.read_missing(tmp_path)
    assert monitoring.read_missing(tmp_path / "older-run") == []


# --- a pull store (store_mode "pull") --------------------------------------------------------------
# Its puller logs one "visit batch" line per batch of up to 1,000 visits, with the batch's counts
# (functions/store_batch.py), and nothing invokes it. Each count's log-based DISTRIBUTION metric
# (infra/logging.tf) answers per minute a distribution of the batch lines' values, in Monitoring's
# JSON below: minute 1 three committed batches, minute 2 two, and one batch of 1,000 that failed.
PULL_LOG_METRIC = LOG_METRICS["store_deliveries"]
STORE = monitoring.SERVICE_NAMES[PUSH_FUNCTION]
BATCH_BUCKETS = {"exponentialBuckets": {"numFiniteBuckets": 12, "growthFactor": 2, "scale": 1}}
# {count: [(end of the minute, each batch line's value, bucketCounts by hand: bucket i >= 1 holds [2^(i-1), 2^i))]}
BATCH_LINES = {
    "counted": [(T0 + MINUTE, [1000, 1000, 430], ["0"] * 9 + ["1", "2"]),
                (T0 + 2 * MINUTE, [1000, 12], ["0"] * 4 + ["1"] + ["0"] * 5 + ["1"])],
    "duplicates": [(T0 + MINUTE, [0, 3, 0], ["2", "0", "1"]), (T0 + 2 * MINUTE, [0, 0], ["2"])],
    "malformed": [(T0 + MINUTE, [0, 0, 1], ["2", "1"]), (T0 + 2 * MINUTE, [0, 0], ["2"])],
    "nacked": [(T0 + 2 * MINUTE, [1000], ["0"] * 10 + ["1"])],
}


def batch_response(count):
    """store_batch_<count>'s ListTimeSeries answer, as Monitoring gives a DELTA DISTRIBUTION log-based
    metric reduced to one series (points newest first)."""
    points = []
    for end, values, buckets in reversed(BATCH_LINES[count]):
        mean = sum(values) / len(values)
        start = dt.datetime.fromtimestamp(end - MINUTE, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        points.append({"interval": {"startTime": start,
                                    "endTime": dt.datetime.fromtimestamp(end, dt.timezone.utc).strftime(
                                        "%Y-%m-%dT%H:%M:%SZ")},
                       "value": {"distributionValue": {
                           "count": str(len(values)), "mean": mean,
                           "sumOfSquaredDeviation": sum((v - mean) ** 2 for v in values),
                           "bucketOptions": BATCH_BUCKETS, "bucketCounts": buckets}}})
    return {"timeSeries": [{
        "metric": {"type": f"logging.googleapis.com/user/{PULL_LOG_METRIC}_{count}"},
        "resource": {"type": "cloud_run_revision", "labels": {"project_id": "visit-counter-test"}},
        "metricKind": "DELTA", "valueType": "DISTRIBUTION", "points": points}], "unit": "1"}


class PullStoreClient:
    """A pull store's window: request_count (store-inc-counter's left out: nothing invokes the puller)
    and the backlog from the saved answers, the batches' metrics from batch_response, every other
    query an empty answer (a metric without data)."""

    def __init__(self):
        self.asked = []

    def list_time_series(self, request):
        [query] = [q for q in monitoring.queries(pulls=True)
                   if f'metric.type = "{monitoring.metric_type(q, LOG_METRICS)}"' in request["filter"]]
        self.asked.append(query.name)
        if query.name.startswith("store_batch_"):
            return monitoring_v3.ListTimeSeriesResponse.from_json(
                json.dumps(batch_response(query.name.removeprefix("store_batch_")))).time_series
        if query.name in ("request_count", "undelivered_messages"):  # nothing invokes the puller
            return [series for series in load(query.name) if series.resource.labels.get("service_name") != STORE]
        return []


def pull_samples(tmp_path):
    return monitoring.fetch_window("visit-counter-test", T0 + 5, T0 + 3 * MINUTE - 10, SUBSCRIPTION, tmp_path,
                                   client=PullStoreClient(), ingestion_delay=0, now=lambda: T0 + 10 * MINUTE,
                                   sleep=pytest.fail, log_metrics=LOG_METRICS, pulls=True)


def test_the_batch_answers_fit_monitorings_schema():
    import google_schemas

    for count in BATCH_LINES:
        assert google_schemas.response_problems(batch_response(count), "monitoring.v3",
                                                "monitoring.projects.timeSeries.list") == [], count


def test_a_pull_store_reads_its_batches_visits_not_its_lines():
    requests = monitoring.build_requests("p1", T0, T0 + MINUTE, "sub-1", log_metrics=LOG_METRICS, pulls=True)
    assert "store_deliveries" not in requests  # it counts batch lines there
    for count in ("counted", "duplicates", "malformed", "nacked"):
        request = requests[f"store_batch_{count}"]
        assert f'metric.type = "logging.googleapis.com/user/visitkit_store_deliveries_{count}"' in request["filter"]
        assert (request["aggregation"]["per_series_aligner"], request["aggregation"]["cross_series_reducer"]) == (
            "ALIGN_DELTA", "REDUCE_SUM")
        monitoring_v3.ListTimeSeriesRequest(request)
    pushed = monitoring.build_requests("p1", T0, T0 + MINUTE, "sub-1", log_metrics=LOG_METRICS)
    assert set(pushed) == {q.name for q in monitoring.QUERIES}  # a push store's run is as it was


def test_a_pull_stores_figures_are_its_batches_visits(tmp_path):
    samples = pull_samples(tmp_path)
    last = by_time(samples, T0 + 3 * MINUTE)["store"]
    assert last["counted"] == 1000 + 1000 + 430 + 1000 + 12  # visits, not the 5 committed lines
    assert (last["already_counted"], last["malformed"]) == (3, 1)
    assert last["failed"] == 1000  # the failed batch's visits, sent back to Pub/Sub: not 1 delivery
    # delivered: what the puller acknowledged, though no request reached store-inc-counter
    assert by_time(samples, T0 + 3 * MINUTE)["functions"][PUSH_FUNCTION]["responses_2xx"] == 0
    assert [s["store"]["delivered"] for s in samples] == [0, 2430 + 3 + 1, 3446, 3446]
    with open(tmp_path / "metrics" / "store_batch_counted.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["time"]), int(r["count"])) for r in rows] == [(T0 + MINUTE, 3), (T0 + 2 * MINUTE, 2)]


def test_a_pull_stores_throughput_is_what_it_acknowledged(tmp_path):
    figures = analysis.store_figures(pull_samples(tmp_path), T0, T0 + 3 * MINUTE)
    assert figures["throughput_of"] == "delivered"  # no per-minute stored figure on Google Cloud
    # the backlog (930, 1970, 3035) is above 0 in every minute: each minute's acknowledged messages
    assert figures["throughput_per_s"] == pytest.approx((2434 + 1012 + 0) / 3 / MINUTE)
    assert figures["delivered_per_s"] == pytest.approx(3446 / 3 / MINUTE)


def test_a_pull_stores_failed_batch_query_leaves_only_its_figure_empty(tmp_path):
    class Failing(PullStoreClient):
        def list_time_series(self, request):
            if "_nacked" in request["filter"]:
                raise exceptions.PermissionDenied(DENIED)
            return super().list_time_series(request)

    samples = monitoring.fetch_window("visit-counter-test", T0 + 5, T0 + 3 * MINUTE - 10, SUBSCRIPTION, tmp_path,
                                      client=Failing(), ingestion_delay=0, now=lambda: T0 + 10 * MINUTE,
                                      sleep=pytest.fail, log_metrics=LOG_METRICS, pulls=True)
    last = by_time(samples, T0 + 3 * MINUTE)["store"]
    assert last["failed"] is None and (last["counted"], last["delivered"]) == (3442, 3446)
    [missing] = monitoring.read_missing(tmp_path / "metrics")
    assert missing["metric_type"] == "logging.googleapis.com/user/visitkit_store_deliveries_nacked"
    counted_missing = monitoring.window_start_sample(T0, ["store_batch_counted"], pulls=True)["store"]
    assert (counted_missing["counted"], counted_missing["delivered"]) == (None, None)

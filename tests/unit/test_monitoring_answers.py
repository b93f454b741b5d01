"""The rehearsal's Monitoring stand-in (visitkit.rehearsal.monitoring) where no function needs to run: what it
answers as Monitoring answers it (a metric it does not know, a query it cannot read), read with the real
MetricServiceClient over gRPC; how it reads the twin's log files; its histograms. What it answers from the
functions' and HAProxy's real lines: tests/integration/test_rehearsal_monitoring.py."""
import pytest
from google.api.distribution_pb2 import Distribution
from google.api_core import exceptions

from visitkit.cloud import monitoring
from visitkit.rehearsal.monitoring import MonitoringStandIn, Tail, bucket_counts

PROJECT = "visitkit-stand-in"
SUBSCRIPTION = "store-inc-counter"
LOG_METRICS = {"requests_429": "visitkit_requests_429", "store_deliveries": "visitkit_store_deliveries"}


@pytest.fixture
def stand_in(tmp_path):
    """A stand-in of a twin that wrote nothing yet, with no log-based metric deployed."""
    with MonitoringStandIn(PROJECT, tmp_path / "haproxy.log", {"inc-counter": [tmp_path / "inc-counter-0.log"]},
                           backlog=lambda: None, subscription=SUBSCRIPTION, log_metrics={}) as running:
        yield running


def test_what_it_cannot_stand_for_has_no_data_and_a_metric_not_deployed_is_not_found(stand_in, tmp_path):
    samples = monitoring.fetch_window(PROJECT, 0, 120, SUBSCRIPTION, tmp_path, client=stand_in.client(),
                                      ingestion_delay=0, log_metrics=LOG_METRICS, sleep=pytest.fail)
    assert samples == []  # no query had a point
    missing = monitoring.read_missing(tmp_path / "metrics")
    assert [(m["metric"], m["error"], m["code"]) for m in missing] == [
        ("requests_429_logged", "NotFound", 404), ("store_deliveries", "NotFound", 404)]  # as Monitoring says it
    assert missing[0]["reason"] == 'Cannot find metric(s) that match type = "logging.googleapis.com/user/' \
                                   'visitkit_requests_429".'
    assert (tmp_path / "metrics" / "cpu_utilizations.csv").read_text().strip() == "time"  # read, and empty


def test_a_query_it_cannot_read_is_refused_not_guessed(stand_in):
    client = stand_in.client()
    request = monitoring.build_requests(PROJECT, 0, 120, SUBSCRIPTION)["request_count"]
    with pytest.raises(exceptions.InvalidArgument, match="cannot read the filter term"):
        list(client.list_time_series(request={**request, "filter": request["filter"] + ' OR metric.type = "x"'}))
    rate = {**request["aggregation"], "per_series_aligner": "ALIGN_RATE"}
    with pytest.raises(exceptions.MethodNotImplemented, match="ALIGN_RATE"):
        list(client.list_time_series(request={**request, "aggregation": rate}))


def test_a_log_file_is_read_a_whole_line_at_a_time(tmp_path):
    path = tmp_path / "get-counter-0.log"
    tail = Tail(path)
    assert tail.read() == []  # the instance has not started yet
    path.write_text('{"severity": "INFO", "message": "instance started"}\n{"severity": "INF')
    assert tail.read() == ['{"severity": "INFO", "message": "instance started"}']
    with open(path, "a") as f:
        f.write('O", "message": "visit batch"}\n')
    assert tail.read() == ['{"severity": "INFO", "message": "visit batch"}']
    assert tail.read() == []


def test_histograms_are_the_metrics_own_buckets():
    # infra/logging.tf's store_batch_visits buckets: 0 underflows, [1, 2), [2, 4), ... [512, 1024) is bucket 10
    options = {"exponential_buckets": {"num_finite_buckets": 11, "growth_factor": 2, "scale": 1}}
    counts = bucket_counts(options, [0, 1, 3, 3, 1000])
    assert counts == [1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 1]
    distribution = Distribution(count=5, bucket_options=options, bucket_counts=counts)
    assert monitoring.percentile(distribution, 0.5) == pytest.approx(2 + 2 * 0.5 / 2)

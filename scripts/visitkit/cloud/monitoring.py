"""The platform's own figures for a test window, read from the Cloud Monitoring API.

Three steps, kept apart so the last two run offline in tests:
1. `build_requests` makes the ListTimeSeries requests (plain dicts) for a window;
2. `rows_from_time_series` turns the API's TimeSeries into plain rows, one per point;
3. `samples_from_rows` turns those rows into the server-side samples the report reads
   (the same schema as the local stack's, fields the platform has no figure for set to None).
`fetch_window` does all three with a real (or fake) MetricServiceClient and saves one CSV per
metric. Monitoring data arrives per minute and late, so it is read once, after the run. A query
that fails (after a couple of retries if its error is transient) loses its own figures only: they
are None in the samples, never 0, and the query is named with its error in metrics/missing.json.

Metric types, kinds and labels (what 2nd-gen functions report: they run as Cloud Run services,
so their figures are Cloud Run's, under resource type `cloud_run_revision`), as looked up in the
Cloud Monitoring metric lists and the client's reference:
- run.googleapis.com/request_count: DELTA, INT64, labels response_code, response_code_class;
  "Number of requests reaching the revision. Excludes requests that are not reaching your
  container instances (e.g. unauthorized requests or when maximum number of instances is
  reached)"; sampled every 60 s, visible after up to 180 s.
- run.googleapis.com/request_latencies: DELTA, DISTRIBUTION, ms; time spent in the container,
  so queueing in front of a busy revision is NOT in it (the gap the study saw against Locust).
- run.googleapis.com/container/instance_count: GAUGE, INT64, label state (active, idle).
- pubsub.googleapis.com/subscription/num_undelivered_messages: GAUGE, INT64, resource
  pubsub_subscription (label subscription_id); sampled every 60 s, visible after up to 120 s.
- pubsub.googleapis.com/subscription/oldest_unacked_message_age: GAUGE, INT64, s; same resource.
- firestore.googleapis.com/document/write_count: DELTA, INT64, read on the resource type Google
  recommends, firestore.googleapis.com/Database, narrowed to database_id "(default)" (the kit's).
- pubsub.googleapis.com/subscription/dead_letter_message_count: DELTA, INT64, on the main
  subscription: messages Pub/Sub forwarded to the dead-letter topic.
- run.googleapis.com/container/billable_instance_time: DELTA, DOUBLE, s: instance time billed.
- run.googleapis.com/container/cpu/utilizations and container/memory/utilizations: DELTA,
  DISTRIBUTION, fractions of the allocated CPU and memory, merged per service like latencies.
- firestore.googleapis.com/document/read_count and delete_count: DELTA, INT64 (for the cost).
- logging.googleapis.com/user/<name>: the kit's log-based metrics (infra/logging.tf, names from
  `terraform output`), DELTA INT64 counters on cloud_run_revision: requests answered 429 per
  service, from the request logs (Cloud Run's request_count leaves out requests refused at max
  instances), and store-inc-counter's deliveries by outcome (counted, already_counted, malformed)
  from its structured logs.
- In pull mode (store_mode "pull") store-inc-counter is one puller that logs a line per batch, not
  per visit: the counter above counts batches there, so it is not read; four DELTA DISTRIBUTION
  log-based metrics (infra/logging.tf, named after it: <name>_counted, _duplicates, _malformed,
  _nacked) take each batch line's own count as their value, and a minute's sum of visits is its
  distribution's mean x count (`distribution_sum`).
- Aggregation: ALIGN_DELTA keeps a distribution a distribution; REDUCE_SUM "is valid for DELTA
  and GAUGE metrics with numeric and distribution values", so per-revision latency histograms are
  merged per service here and percentiles computed from the merged buckets (see `percentile`).
"""
import csv
import json
import math
import textwrap
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from visitkit.catalogue import CATALOGUE, FUNCTIONS, PUBLISHER_FUNCTION, PUSH_FUNCTION
from visitkit.errors import RunError
from visitkit.samples import FunctionFigures, Sample, StoreFigures

if TYPE_CHECKING:  # Google's client libraries are imported when the window is read, not with this module
    from google.api.distribution_pb2 import Distribution
    from google.cloud.monitoring_v3 import MetricServiceClient, Point, TimeSeries

PERIOD_SECONDS = 60
# request_count's data may take up to 180 s to become visible; leave some margin on top.
DEFAULT_INGESTION_DELAY_SECONDS = 240
# A query answered DeadlineExceeded, ServiceUnavailable, InternalServerError or TooManyRequests is
# asked again after each of these waits; any other error (PermissionDenied, NotFound, ...) at once fails.
RETRY_WAITS_S = (5, 15)
MISSING = "missing.json"  # in metrics/: the queries that could not be read, and why
MISSING_FORMAT = 1
REASON_CHARS = 200

# Cloud Run service names of the deployed functions, by logical name (serve-page is deployed as `app`).
SERVICE_NAMES = {name: function.service for name, function in CATALOGUE.items()}

SERVICE = "resource.label.service_name"


@dataclass(frozen=True)
class MetricQuery:
    name: str  # also the CSV file's name
    metric_type: str
    aligner: str
    reducer: str
    accumulator: "Accumulator"  # what its rows add to the samples
    group_by: tuple[str, ...] = ()
    resource_type: str = ""
    scope: str = ""  # "services", "subscription" or "database": which label the filter narrows
    log_metric: str = ""  # the key of a log-based metric's name in LOG_METRIC_OUTPUTS
    store_mode: str = ""  # "push" or "pull": asked only for a store of that mode; "": for either


# The queries, QUERIES, are defined under "samples", after the Accumulators they hold.
# terraform output names of the log-based metrics, by MetricQuery.log_metric.
LOG_METRIC_OUTPUTS = {"requests_429": "requests_429_metric_name", "store_deliveries": "store_deliveries_metric_name"}
DATABASE = "(default)"  # the Firestore database the functions use


def aligned_window(start: float, end: float, period: int = PERIOD_SECONDS) -> tuple[int, int]:
    """The window widened to whole alignment periods, so no minute is cut in two."""
    return (int(start) // period * period, -(-int(end) // period) * period)


def metric_type(query: MetricQuery, log_metrics: Mapping[str, str]) -> str:
    """The query's metric type; a log-based metric's name comes from `terraform output`."""
    if not query.log_metric:
        return query.metric_type
    return query.metric_type.format(log_metrics.get(query.log_metric, f"<{LOG_METRIC_OUTPUTS[query.log_metric]}>"))


def metric_filter(query: MetricQuery, services: Iterable[str], subscription: str,
                  log_metrics: Mapping[str, str] | None = None) -> str:
    parts = [f'metric.type = "{metric_type(query, log_metrics or {})}"']
    if query.resource_type:
        parts.append(f'resource.type = "{query.resource_type}"')
    if query.scope == "services":
        names = "|".join(sorted(services))
        parts.append(f'resource.labels.service_name = monitoring.regex.full_match("{names}")')
    elif query.scope == "subscription":
        parts.append(f'resource.labels.subscription_id = "{subscription}"')
    elif query.scope == "database":
        parts.append(f'resource.labels.database_id = "{DATABASE}"')
    return " AND ".join(parts)


def build_requests(project: str, start: float, end: float, subscription: str, services: Iterable[str] | None = None,
                   period: int = PERIOD_SECONDS, log_metrics: Mapping[str, str] | None = None,
                   pulls: bool = False) -> dict[str, dict[str, Any]]:
    """{query name: ListTimeSeries request} for the window [start, end] (unix seconds), the queries of
    a push store or, with `pulls`, of a pull store (`queries`).
    log_metrics: {MetricQuery.log_metric: the deployed metric's name}."""
    services = services or SERVICE_NAMES.values()
    start, end = aligned_window(start, end, period)
    requests: dict[str, dict[str, Any]] = {}
    for query in queries(pulls):
        aggregation: dict[str, Any] = {"alignment_period": {"seconds": period}, "per_series_aligner": query.aligner,
                                       "cross_series_reducer": query.reducer}
        if query.group_by:
            aggregation["group_by_fields"] = list(query.group_by)
        requests[query.name] = {
            "name": f"projects/{project}",
            "filter": metric_filter(query, services, subscription, log_metrics),
            "interval": {"start_time": {"seconds": start}, "end_time": {"seconds": end}},
            "aggregation": aggregation,
            "view": "FULL",
        }
    return requests


# --- parsing ---------------------------------------------------------------------------------

def bucket_bounds(options: "Distribution.BucketOptions", index: int) -> tuple[float, float]:
    """(lower, upper) of histogram bucket `index`; bucket 0 is the underflow, the last the overflow."""
    kind = options.WhichOneof("options")  # a google.api Distribution.BucketOptions (plain protobuf)
    if kind == "exponential_buckets":
        spec = options.exponential_buckets

        def bound(i: int) -> float:
            return spec.scale * spec.growth_factor ** i

        finite = spec.num_finite_buckets
    elif kind == "linear_buckets":
        spec = options.linear_buckets

        def bound(i: int) -> float:
            return spec.offset + spec.width * i

        finite = spec.num_finite_buckets
    else:
        bounds = list(options.explicit_buckets.bounds)

        def bound(i: int) -> float:
            return bounds[i]

        finite = len(bounds) - 1
    lower = -math.inf if index == 0 else bound(index - 1)
    upper = math.inf if index > finite else bound(index)
    return lower, upper


def percentile(distribution: "Distribution", fraction: float) -> float | None:
    """The value below which `fraction` of the distribution's samples fall, or None if empty.

    Interpolates linearly inside the bucket holding that rank, as Monitoring's percentile
    aligners do; a rank in the underflow or overflow bucket gets that bucket's finite bound.
    """
    counts = [int(c) for c in distribution.bucket_counts]
    total = sum(counts)
    if total == 0:
        return None
    rank = fraction * total
    seen = 0
    for index, count in enumerate(counts):
        if count and seen + count >= rank:
            lower, upper = bucket_bounds(distribution.bucket_options, index)
            if math.isinf(lower):
                return upper
            if math.isinf(upper):
                return lower
            return lower + (upper - lower) * (rank - seen) / count
        seen += count
    return bucket_bounds(distribution.bucket_options, len(counts) - 1)[0]


def _point_value(point: "Point") -> dict[str, Any]:
    value = point.value
    kind = type(value).pb(value).WhichOneof("value")
    if kind == "distribution_value":
        distribution = value.distribution_value
        count = int(distribution.count)
        return {"count": count, "mean": distribution.mean if count else None,
                "p50": percentile(distribution, 0.50), "p95": percentile(distribution, 0.95)}
    return {"value": getattr(value, kind)}


def rows_from_time_series(time_series: Iterable["TimeSeries"]) -> list[dict[str, Any]]:
    """One plain dict per point: time (unix seconds, end of its minute), its labels, its value(s).

    Only the labels the query grouped by survive a cross-series reduction; they are kept under
    their short names (service_name, response_code, state, ...). Rows come out in time order
    (the API lists each series' points newest first).
    """
    rows: list[dict[str, Any]] = []
    for series in time_series:
        labels = {**dict(series.resource.labels), **dict(series.metric.labels)}
        labels.pop("project_id", None)
        for point in series.points:
            when = int(point.interval.end_time.timestamp())
            rows.append({"time": when, **labels, **_point_value(point)})
    rows.sort(key=lambda row: (row["time"], sorted((k, str(v)) for k, v in row.items())))
    return rows


# --- samples in the report's schema -------------------------------------------------------------

COUNTERS = ("requests", "responses_2xx", "responses_4xx", "responses_429", "responses_5xx", "responses_429_logged",
            "billable_instance_s")
# Per minute, fractions of what an instance is allocated (Cloud Run's utilization distributions).
UTILIZATIONS = ("cpu_utilization", "cpu_utilization_p95", "memory_utilization", "memory_utilization_p95")
DELIVERY_OUTCOMES = ("counted", "already_counted", "malformed", "failed")


def empty_function() -> FunctionFigures:
    # in_flight, queued and queue_ms: Cloud Run publishes no figure for them. COUNTERS (at 0) and
    # UTILIZATIONS spelled out, so that mypy holds each key to the schema (visitkit/samples.py).
    return {"instances": None, "in_flight": None, "queued": None, "requests": 0, "responses_2xx": 0,
            "responses_4xx": 0, "responses_429": 0, "responses_5xx": 0, "responses_429_logged": 0,
            "billable_instance_s": 0, "service_ms": None, "service_ms_p95": None, "queue_ms": None,
            "cpu_utilization": None, "cpu_utilization_p95": None, "memory_utilization": None,
            "memory_utilization_p95": None}


def empty_store() -> StoreFigures:
    # DELIVERY_OUTCOMES (at 0) spelled out, so that mypy holds each key to the schema.
    return {"accepted": 0, "delivered": 0, "stored": None, "backlog": None, "oldest_unacked_s": None,
            "firestore_writes": 0, "firestore_reads": 0, "firestore_deletes": 0, "dead_lettered": 0,
            "counted": 0, "already_counted": 0, "malformed": 0, "failed": 0}


def window_start_sample(when: float, missing: Iterable[str] = (), pulls: bool = False) -> Sample:
    """A sample at the window's start: counters at zero (None those of the `missing` queries), gauges unknown."""
    return with_delivered(without({"time": when, "source": "gcp-monitoring",
                                   "functions": {name: empty_function() for name in FUNCTIONS},
                                   "store": empty_store()}, missing), pulls)


STORE = "store"  # a figure of the sample's store section, not of a function's


def _responses(row, name):
    code, count = int(row["response_code"]), int(row["value"])
    figures = [(name, "requests", count)]
    if f"responses_{code // 100}xx" in COUNTERS:  # a 1xx or 3xx is in `requests` only
        figures.append((name, f"responses_{code // 100}xx", count))
    if code == 429:
        figures.append((name, "responses_429", count))
    if code == 202 and name == PUBLISHER_FUNCTION:
        figures.append((STORE, "accepted", count))
    return figures


def _function(field, value=lambda row: int(row["value"])):
    return lambda row, name: [(name, field, value(row))]


def _store(field):
    return lambda row, _name: [(STORE, field, int(row["value"]))]


def _deliveries(row, _name):
    outcome = row.get("outcome")
    return [(STORE, outcome, int(row["value"]))] if outcome in DELIVERY_OUTCOMES else []


def distribution_sum(row: Mapping[str, Any]) -> int:
    """The sum of a minute's distribution of whole numbers: its mean x its count (0 when empty)."""
    return round(row["mean"] * row["count"]) if row["count"] else 0


def _batch_visits(field):
    """The visits of the minute's batch lines, summed from the distribution of one of their counts."""
    return lambda row, _name: [(STORE, field, distribution_sum(row))]


def _distribution(field, centre):
    """A merged distribution's figures for the minute: its `centre` (p50 or mean) and its p95."""
    return lambda row, name: [(name, field, row[centre]), (name, f"{field}_p95", row["p95"])]


def _add(kept, value):
    return (kept or 0) + value


def _max(kept, value):
    return value if kept is None else max(kept, value)


def _set(_kept, value):
    return value


@dataclass(frozen=True)
class Accumulator:
    """What a query's rows add to the samples."""
    # (row, its service's function or None) -> [(function or STORE, field, value)]; a function None is dropped
    figures: Callable[[dict[str, Any], str | None], list[tuple[str | None, str, Any]]]
    combine: Callable[[Any, Any], Any] = _add  # (the figure so far or None, the row's value) -> the figure
    running: bool = True  # kept from the window's start (a counter), else the minute's own (a gauge)


# One per metric read: what to ask the API and what its rows add to the samples; a figure of a
# service that is not ours (its function None) is dropped. QUERIES: a push store's run reads them all,
# a pull store's all but store_deliveries, and PULL_QUERIES (`queries`).
QUERIES = (
    MetricQuery("request_count", "run.googleapis.com/request_count", "ALIGN_DELTA", "REDUCE_SUM",
                Accumulator(_responses), (SERVICE, "metric.label.response_code"), "cloud_run_revision", "services"),
    MetricQuery("request_latencies", "run.googleapis.com/request_latencies", "ALIGN_DELTA", "REDUCE_SUM",
                Accumulator(_distribution("service_ms", "p50"), _set, running=False),
                (SERVICE,), "cloud_run_revision", "services"),
    MetricQuery("instance_count", "run.googleapis.com/container/instance_count", "ALIGN_MAX", "REDUCE_SUM",
                Accumulator(_function("instances"), running=False),  # active + idle
                (SERVICE, "metric.label.state"), "cloud_run_revision", "services"),
    MetricQuery("undelivered_messages", "pubsub.googleapis.com/subscription/num_undelivered_messages",
                "ALIGN_MAX", "REDUCE_SUM", Accumulator(_store("backlog"), _max, running=False),
                (), "pubsub_subscription", "subscription"),
    MetricQuery("oldest_unacked_age", "pubsub.googleapis.com/subscription/oldest_unacked_message_age",
                "ALIGN_MAX", "REDUCE_MAX", Accumulator(_store("oldest_unacked_s"), _max, running=False),
                (), "pubsub_subscription", "subscription"),
    MetricQuery("firestore_writes", "firestore.googleapis.com/document/write_count", "ALIGN_DELTA", "REDUCE_SUM",
                Accumulator(_store("firestore_writes")), (), "firestore.googleapis.com/Database", "database"),
    MetricQuery("billable_instance_time", "run.googleapis.com/container/billable_instance_time", "ALIGN_DELTA",
                "REDUCE_SUM", Accumulator(_function("billable_instance_s", lambda row: float(row["value"]))),
                (SERVICE,), "cloud_run_revision", "services"),
    MetricQuery("cpu_utilizations", "run.googleapis.com/container/cpu/utilizations", "ALIGN_DELTA", "REDUCE_SUM",
                Accumulator(_distribution("cpu_utilization", "mean"), _set, running=False),
                (SERVICE,), "cloud_run_revision", "services"),
    MetricQuery("memory_utilizations", "run.googleapis.com/container/memory/utilizations", "ALIGN_DELTA",
                "REDUCE_SUM", Accumulator(_distribution("memory_utilization", "mean"), _set, running=False),
                (SERVICE,), "cloud_run_revision", "services"),
    MetricQuery("firestore_reads", "firestore.googleapis.com/document/read_count", "ALIGN_DELTA", "REDUCE_SUM",
                Accumulator(_store("firestore_reads")), (), "firestore.googleapis.com/Database", "database"),
    MetricQuery("firestore_deletes", "firestore.googleapis.com/document/delete_count", "ALIGN_DELTA", "REDUCE_SUM",
                Accumulator(_store("firestore_deletes")), (), "firestore.googleapis.com/Database", "database"),
    MetricQuery("dead_lettered", "pubsub.googleapis.com/subscription/dead_letter_message_count",
                "ALIGN_DELTA", "REDUCE_SUM", Accumulator(_store("dead_lettered")),
                (), "pubsub_subscription", "subscription"),
    MetricQuery("requests_429_logged", "logging.googleapis.com/user/{}", "ALIGN_DELTA", "REDUCE_SUM",
                Accumulator(_function("responses_429_logged")),
                ("metric.label.service_name",), "cloud_run_revision", log_metric="requests_429"),
    MetricQuery("store_deliveries", "logging.googleapis.com/user/{}", "ALIGN_DELTA", "REDUCE_SUM",
                Accumulator(_deliveries), ("metric.label.outcome",), "cloud_run_revision",
                log_metric="store_deliveries", store_mode="push"),
)
# A pull store's "visit batch" lines, by what each count says of the batch's visits: counted (stored),
# duplicates (refused, already counted), malformed (refused) in a committed or nothing_to_count batch;
# nacked: all of a failed or lease_lost batch's, sent back to Pub/Sub. The store's figure each fills.
BATCH_COUNTS = {"counted": "counted", "duplicates": "already_counted", "malformed": "malformed", "nacked": "failed"}
PULL_QUERIES = tuple(
    MetricQuery(f"store_batch_{count}", "logging.googleapis.com/user/{}_" + count, "ALIGN_DELTA", "REDUCE_SUM",
                Accumulator(_batch_visits(field)), (), "cloud_run_revision", log_metric="store_deliveries",
                store_mode="pull")
    for count, field in BATCH_COUNTS.items())


def queries(pulls: bool) -> tuple[MetricQuery, ...]:
    """The queries of a run: a push store's deliveries (QUERIES) or, with `pulls`, a pull store's batches."""
    mode = "pull" if pulls else "push"
    return tuple(query for query in (*QUERIES, *PULL_QUERIES) if query.store_mode in ("", mode))


ACCUMULATORS = {query.name: query.accumulator for query in (*QUERIES, *PULL_QUERIES)}
# The samples' figures (a function's or the store's) each query fills: None, never 0, if it fails.
FIELDS = {
    "request_count": ("requests", "responses_2xx", "responses_4xx", "responses_429", "responses_5xx", "accepted"),
    "request_latencies": ("service_ms", "service_ms_p95"),
    "instance_count": ("instances",),
    "undelivered_messages": ("backlog",),
    "oldest_unacked_age": ("oldest_unacked_s",),
    "firestore_writes": ("firestore_writes",),
    "billable_instance_time": ("billable_instance_s",),
    "cpu_utilizations": ("cpu_utilization", "cpu_utilization_p95"),
    "memory_utilizations": ("memory_utilization", "memory_utilization_p95"),
    "firestore_reads": ("firestore_reads",),
    "firestore_deletes": ("firestore_deletes",),
    "dead_lettered": ("dead_lettered",),
    "requests_429_logged": ("responses_429_logged",),
    "store_deliveries": DELIVERY_OUTCOMES,
    **{f"store_batch_{count}": (field,) for count, field in BATCH_COUNTS.items()},
}
# The figures store.delivered is made of (with_delivered): a push store's 2xx answers, a pull store's
# messages acknowledged.
DELIVERED_FROM = {"push": ("responses_2xx",), "pull": ("counted", "already_counted", "malformed")}


def without(sample: Sample, missing: Iterable[str]) -> Sample:
    """The sample with the figures of the `missing` queries (their names) set to None."""
    fields = {field for name in missing for field in FIELDS[name]}
    for figures in (*sample["functions"].values(), sample["store"]):
        # keys named at run time (FIELDS), which mypy cannot hold to a TypedDict; only keys it has are set
        cast(dict[str, Any], figures).update({field: None for field in fields & figures.keys()})
    return sample


def with_delivered(sample: Sample, pulls: bool) -> Sample:
    """The sample with store.delivered, the messages the store acknowledged (redeliveries included):
    a push store's are store-inc-counter's 2xx answers (each acknowledges one delivery); a pull store
    (nothing invokes it) acknowledges each message of a batch it committed: counted, duplicate or
    malformed. None when a figure it is made of is."""
    if pulls:
        parts = [sample["store"].get(field) for field in DELIVERED_FROM["pull"]]
    else:
        parts = [sample["functions"][PUSH_FUNCTION].get(field) for field in DELIVERED_FROM["push"]]
    sample["store"]["delivered"] = None if None in parts else sum(cast(list[int], parts))
    return sample


def samples_from_rows(rows_by_query: Mapping[str, list[dict[str, Any]]], service_names: Mapping[str, str] | None = None,
                      missing: Iterable[str] = (), pulls: bool = False) -> list[Sample]:
    """One sample per minute that has any data, cumulative counters from the window's start; the
    figures of the `missing` queries (that could not be read) None.

    store.accepted counts inc-counter's 202 answers (it answers 202 only once Pub/Sub accepted
    the visit; a CORS preflight's 204 is not one) and store.delivered the messages the store
    acknowledged (`with_delivered`; `pulls`: a pull store's), both per the platform;
    store.counted, already_counted, malformed and failed are deliveries by outcome from a push
    store's lines, visits by what a pull store's batch lines say; store.stored (visits in
    Firestore) has no per-minute figure here; store.backlog is the subscription's undelivered
    messages. oldest_unacked_s and firestore_writes are extra fields the local stack has no figure for.
    """
    service_names = service_names or SERVICE_NAMES
    function_of = {service: name for name, service in service_names.items()}
    by_time: dict[int, list[tuple[Any, dict[str, Any]]]] = {}  # time -> [(its query's Accumulator, row)]
    for query, rows in rows_by_query.items():
        for row in rows:
            by_time.setdefault(row["time"], []).append((ACCUMULATORS[query], row))
    running: dict[str, dict[str, Any]] = {}  # function or STORE -> {field: figure}
    samples: list[Sample] = []
    for when in sorted(by_time):
        minute: dict[str, dict[str, Any]] = {}
        for accumulator, row in by_time[when]:
            for owner, field, value in accumulator.figures(row, function_of.get(row.get("service_name", ""))):
                if owner is not None:
                    kept = (running if accumulator.running else minute).setdefault(owner, {})
                    kept[field] = accumulator.combine(kept.get(field), value)
        # The accumulators' fields are named at run time (FIELDS), which mypy cannot hold to the schema:
        # tests/unit/test_samples.py holds these samples to its keys.
        functions = {name: cast(FunctionFigures, {**empty_function(), **running.get(name, {}), **minute.get(name, {})})
                     for name in service_names}
        store = cast(StoreFigures, {**empty_store(), **running.get(STORE, {}), **minute.get(STORE, {})})
        samples.append(with_delivered(without(
            {"time": when, "source": "gcp-monitoring", "functions": functions, "store": store}, missing), pulls))
    return samples


# --- fetching and saving ------------------------------------------------------------------------

def write_csv(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """The rows as a CSV, columns in first-seen order (time first)."""
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns or ["time"])
        writer.writeheader()
        writer.writerows(rows)


def monitoring_client(project: str) -> "MetricServiceClient":
    """The real client, built only when asked for: importing this module never reaches Google. Its
    calls are billed to the project it reads."""
    from google.cloud import monitoring_v3

    from visitkit.cloud.credentials import default_credentials

    return monitoring_v3.MetricServiceClient(credentials=default_credentials(project))


def wait_for_ingestion(end: float, delay: float = DEFAULT_INGESTION_DELAY_SECONDS, now: Callable[[], float] = time.time,
                       sleep: Callable[[float], None] = time.sleep) -> None:
    """Sleep until `delay` seconds after the window's end, so its last minutes have arrived."""
    remaining = end + delay - now()
    if remaining > 0:
        sleep(remaining)


def read_query(client: "MetricServiceClient", request: dict[str, Any], sleep: Callable[[float], None] = time.sleep,
               waits: Iterable[float] = RETRY_WAITS_S) -> list[dict[str, Any]]:
    """The query's rows; asked again after each of `waits` while its error is a transient one."""
    from google.api_core import exceptions

    transient = (exceptions.DeadlineExceeded, exceptions.ServiceUnavailable, exceptions.InternalServerError,
                 exceptions.TooManyRequests)
    for wait in (*waits, None):
        try:
            return rows_from_time_series(client.list_time_series(request=request))
        except transient:
            if wait is None:
                raise
            sleep(wait)
    raise AssertionError("unreachable: the last try returns or raises")


def missing_entry(query: str, metric: str, error: BaseException) -> dict[str, Any]:
    """What missing.json says of a query that failed: its error's class, HTTP code and message, shortened."""
    code = getattr(error, "code", None)
    reason = getattr(error, "message", None) or str(error)
    return {"metric": query, "metric_type": metric, "error": type(error).__name__,
            "code": int(code) if code is not None else None,
            "reason": textwrap.shorten(reason, REASON_CHARS, placeholder=" ...")}


def write_missing(metrics_dir: str | Path, missing: list[dict[str, Any]]) -> None:
    (Path(metrics_dir) / MISSING).write_text(json.dumps({"format": MISSING_FORMAT, "missing": missing}, indent=1))


def read_missing(metrics_dir: str | Path) -> list[dict[str, Any]]:
    """The queries a run could not read ([] for a run that read them all or was recorded before missing.json)."""
    path = Path(metrics_dir) / MISSING
    if not path.exists():
        return []
    found = json.loads(path.read_text())
    if found.get("format") != MISSING_FORMAT:
        raise RunError(f"{path}: format {found.get('format')!r}; this kit reads format {MISSING_FORMAT}")
    return found["missing"]


def fetch_window(project: str, start: float, end: float, subscription: str, results_dir: str | Path,
                 client: "MetricServiceClient | None" = None, ingestion_delay: float = DEFAULT_INGESTION_DELAY_SECONDS,
                 now: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 service_names: Mapping[str, str] | None = None,
                 log_metrics: Mapping[str, str] | None = None, pulls: bool = False) -> list[Sample]:
    """Read every metric for [start, end], save metrics/<name>.csv, and metrics/missing.json naming
    the queries that failed; return the samples, from a window-start sample with zero counters.
    pulls: the store is a pull store (Settings.pulls), whose figures come from its batch lines."""
    from google.api_core.exceptions import GoogleAPIError

    service_names = service_names or SERVICE_NAMES
    wait_for_ingestion(end, ingestion_delay, now, sleep)
    client = client or monitoring_client(project)
    out = Path(results_dir) / "metrics"
    out.mkdir(parents=True, exist_ok=True)
    requests = build_requests(project, start, end, subscription, service_names.values(), log_metrics=log_metrics,
                              pulls=pulls)
    rows_by_query: dict[str, list[dict[str, Any]]] = {}
    missing: list[dict[str, Any]] = []  # missing_entry of each query that failed
    for query in queries(pulls):
        try:
            rows = read_query(client, requests[query.name], sleep)
        except GoogleAPIError as error:
            missing.append(missing_entry(query.name, metric_type(query, log_metrics or {}), error))
            continue
        write_csv(out / f"{query.name}.csv", rows)
        rows_by_query[query.name] = rows
    write_missing(out, missing)
    failed = [entry["metric"] for entry in missing]
    samples = samples_from_rows(rows_by_query, service_names, failed, pulls)
    window_start = aligned_window(start, end)[0]
    if samples and samples[0]["time"] > window_start:
        # The counters count from the window's start: saying so with a zero sample there lets the
        # first minute's requests, 429s and stored visits count in the report's differences.
        samples.insert(0, window_start_sample(window_start, failed, pulls))
    return samples

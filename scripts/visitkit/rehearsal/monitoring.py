"""Cloud Monitoring stood in for, in a rehearsal: the kit's queries answered from what our functions
really did on the twin.

It serves google.monitoring.v3.MetricService's ListTimeSeries over gRPC on 127.0.0.1, in Monitoring's
own messages (google-cloud-monitoring's types), so that the kit reads it with the real
MetricServiceClient (`client()`) through its own reader, visitkit.cloud.monitoring.fetch_window. gRPC
and not REST: that client has no REST transport (its transports are grpc and grpc_asyncio).

What it stands for, from:
- run.googleapis.com/request_count and request_latencies: HAProxy's request log of the twin (one JSON
  line per request, twin/haproxy.py REQUEST_LOG_FORMAT; a backend is named after its function). As
  Cloud Run's, only the requests that reached an instance (an instance answered, or timed out: 504):
  not the 429s HAProxy answers itself at max instances (logged as its error file's 503), nor the front's
  401 and 403, nor its 404 for a path no function serves. A request counts in the minute it ended
  (its accept time, %Ts, plus its total time); its latency is its time in the instance (total - queue).
- logging.googleapis.com/user/<name>: the deployed log-based metrics (LogMetric: filter, label and value
  extractors, as google_logging_metric has them), evaluated (visitkit.cloud.logquery) on the entries
  Cloud Logging would hold: a request log entry (run.googleapis.com/requests) per HAProxy line of a
  function, its status the one the client got (429 for HAProxy's 503), and each line the functions
  wrote on stdout (their log files in the twin), a JSON line as a structured entry (severity lifted
  out, the rest its jsonPayload), any other as textPayload. A line carries no time of its own: it is
  stamped when the stand-in reads it (every POLL_SECONDS), as Cloud Logging stamps what it receives.
  A counter counts matching entries (DELTA INT64); a DISTRIBUTION metric takes its value_extractor's
  value (an entry without one is left out).
- pubsub.googleapis.com/subscription/num_undelivered_messages: `backlog()` (GAUGE INT64), asked every
  BACKLOG_SECONDS (None: no point then).

What it cannot stand for is answered with no time series, as Monitoring answers a metric without
data (NO_DATA): the instances, their CPU, memory and billable time, Firestore's document counts, the
oldest unacked message's age and the dead-lettered messages. A metric type it does not know, a
log-based metric not deployed among them, is NOT_FOUND, as Monitoring answers it.

Aggregation as the kit asks it: ALIGN_DELTA (a counter's sum, a distribution's merge) or ALIGN_MAX
(a gauge) per alignment period, then REDUCE_SUM or REDUCE_MAX across the series of each group
(group_by_fields); the periods are laid from the interval's start, and only whole periods inside it
are answered. Each series keeps the resource's project_id and the labels it was grouped by, its
points newest first, all in one page. Its filter may only be what the kit builds (metric.type,
resource.type, a resource or metric label equal to a string or monitoring.regex.full_match of one,
joined by AND): anything else is INVALID_ARGUMENT.
"""
from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from visitkit.catalogue import CATALOGUE
from visitkit.cloud import logquery
from visitkit.cloud.monitoring import SERVICE_NAMES, bucket_bounds

if TYPE_CHECKING:
    import grpc
    from google.cloud.monitoring_v3 import ListTimeSeriesRequest, ListTimeSeriesResponse, MetricServiceClient

    from visitkit.twin.cloudrun import Deployment
    from visitkit.twin.stack import LocalStack

POLL_SECONDS = 1.0
BACKLOG_SECONDS = 10.0
REQUEST_COUNT = "run.googleapis.com/request_count"
REQUEST_LATENCIES = "run.googleapis.com/request_latencies"
UNDELIVERED = "pubsub.googleapis.com/subscription/num_undelivered_messages"
LOG_METRIC_PREFIX = "logging.googleapis.com/user/"
NO_DATA = frozenset({
    "run.googleapis.com/container/instance_count", "run.googleapis.com/container/billable_instance_time",
    "run.googleapis.com/container/cpu/utilizations", "run.googleapis.com/container/memory/utilizations",
    "firestore.googleapis.com/document/write_count", "firestore.googleapis.com/document/read_count",
    "firestore.googleapis.com/document/delete_count", "pubsub.googleapis.com/subscription/oldest_unacked_message_age",
    "pubsub.googleapis.com/subscription/dead_letter_message_count"})
# The stand-in's own buckets for latencies (ms): 1, 1.25, 1.5625, ... up to about 4.9e9.
LATENCY_BUCKETS = {"exponential_buckets": {"num_finite_buckets": 100, "growth_factor": 1.25, "scale": 1.0}}
REVISION = "cloud_run_revision"
SUBSCRIPTION = "pubsub_subscription"
# HAProxy answers a request no instance took in time with its 503 error file, which says 429 (twin/haproxy.py).
HAPROXY_OWN_503 = 503
TOO_MANY_REQUESTS = 429
GATEWAY_TIMEOUT = 504  # HAProxy's answer when the instance did not answer within the function's timeout
FILTER_TERM = re.compile(r'\s*([\w.]+)\s*=\s*(?:"([^"]*)"|monitoring\.regex\.full_match\("([^"]*)"\))\s*')


class QueryError(Exception):
    """A query the stand-in answers with an error: `code` is the grpc.StatusCode's name."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class LogMetric:
    """A log-based metric as deployed (google_logging_metric): its filter, {label: its extractor} and,
    for a DISTRIBUTION metric, its value's extractor and its bucket options (BucketOptions' fields,
    e.g. {"exponential_buckets": {"num_finite_buckets": 11, "growth_factor": 2, "scale": 1}})."""
    filter: str
    label_extractors: Mapping[str, str] = field(default_factory=dict)
    value_extractor: str = ""  # "": a counter of the matching entries
    bucket_options: Mapping[str, Any] = field(default_factory=dict)


def log_metrics_from_state(state: Mapping[str, Any]) -> dict[str, LogMetric]:
    """{metric name: LogMetric} of every google_logging_metric in an applied state (`terraform show -json`),
    or in a saved plan's planned values (`terraform show -json PLAN`)."""
    found: dict[str, LogMetric] = {}
    modules = [(state.get("values") or state.get("planned_values") or {}).get("root_module", {})]
    while modules:
        module = modules.pop()
        modules += module.get("child_modules", [])
        for resource in module.get("resources", []):
            if resource.get("type") != "google_logging_metric" or resource.get("mode") != "managed":
                continue
            values = resource["values"]
            options: dict[str, Any] = {}
            for kind, spec in ((values.get("bucket_options") or [{}])[0] or {}).items():
                if spec:  # the state lists each kind as a block list: the one set has one element
                    options[kind] = {"bounds" if kind == "explicit_buckets" else key: value
                                     for key, value in spec[0].items()}
            found[values["name"]] = LogMetric(values["filter"], dict(values.get("label_extractors") or {}),
                                              values.get("value_extractor") or "", options)
    return found


@dataclass(frozen=True)
class Observation:
    """One thing a metric saw: when, on which resource, its labels ("resource.label.X", "metric.label.X")
    and its value (1 for one request or entry counted)."""
    time: float
    resource_type: str
    labels: Mapping[str, str]
    value: float


class Tail:
    """The whole lines added to a file since the last read (none while it does not exist)."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0

    def read(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        whole = data.rfind(b"\n") + 1
        self.offset += whole
        return data[:whole].decode(errors="replace").splitlines()


# --- what Cloud Run and Cloud Logging would have -----------------------------------------------------

def request_of(line: str) -> dict[str, Any] | None:
    """An HAProxy request log line, or None for anything else HAProxy wrote (its warnings)."""
    if not line.startswith("{"):
        return None
    try:
        request = json.loads(line)
    except ValueError:
        return None
    return request if isinstance(request, dict) and "backend" in request else None


def client_status(request: Mapping[str, Any]) -> int:
    """The status the client got: HAProxy logs its 429 error file as the 503 it stands for."""
    own = request["response_ms"] < 0 and request["status"] == HAPROXY_OWN_503
    return TOO_MANY_REQUESTS if own else int(request["status"])


def reached_an_instance(request: Mapping[str, Any]) -> bool:
    return request["response_ms"] >= 0 or request["status"] == GATEWAY_TIMEOUT


def ended(request: Mapping[str, Any]) -> float:
    return float(request["time"]) + max(0, request["total_ms"]) / 1000


def request_entry(project: str, service: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """The Cloud Run request log entry of a request to a service (the fields the filters read)."""
    status = client_status(request)
    return {"logName": f"projects/{project}/logs/run.googleapis.com%2Frequests",
            "resource": {"type": REVISION, "labels": {"project_id": project, "service_name": service}},
            "severity": "ERROR" if status >= 500 else "WARNING" if status >= 400 else "INFO",
            "httpRequest": {"status": status, "requestMethod": request["method"], "requestUrl": request["path"],
                            "latency": f"{max(0, request['total_ms']) / 1000}s"}}


def stdout_entry(project: str, service: str, line: str) -> dict[str, Any]:
    """A line a function wrote, as Cloud Logging stores it: a JSON object as a structured entry
    (severity and the logging.googleapis.com/ fields lifted out of its jsonPayload), else its text."""
    entry: dict[str, Any] = {"logName": f"projects/{project}/logs/run.googleapis.com%2Fstdout",
                             "resource": {"type": REVISION, "labels": {"project_id": project,
                                                                       "service_name": service}}}
    try:
        payload = json.loads(line)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        return {**entry, "severity": "DEFAULT", "textPayload": line}
    severity = str(payload.pop("severity", "DEFAULT"))
    return {**entry, "severity": severity,
            "jsonPayload": {k: v for k, v in payload.items() if not k.startswith("logging.googleapis.com/")}}


# --- the answers -----------------------------------------------------------------------------------

def equals(wanted: str) -> Callable[[str], bool]:
    return lambda value: value == wanted


def full_match(pattern: str) -> Callable[[str], bool]:
    compiled = re.compile(pattern)
    return lambda value: compiled.fullmatch(value) is not None


def parse_filter(text: str) -> tuple[str, dict[str, Callable[[str], bool]]]:
    """(its metric type, {"resource.type" | "resource.label.X" | "metric.label.X": its test}) of a filter
    the kit builds; QueryError INVALID_ARGUMENT for any other."""
    metric_type, tests = "", dict[str, Callable[[str], bool]]()
    for term in text.split(" AND "):
        found = FILTER_TERM.fullmatch(term)
        if not found:
            raise QueryError("INVALID_ARGUMENT", f"the stand-in cannot read the filter term {term!r}")
        key, equal, pattern = found[1].replace(".labels.", ".label."), found[2], found[3]
        if key == "metric.type" and equal is not None:
            metric_type = equal
        else:
            tests[key] = equals(equal) if equal is not None else full_match(pattern)
    if not metric_type:
        raise QueryError("INVALID_ARGUMENT", f"the filter {text!r} names no metric.type")
    return metric_type, tests


def passes(seen: Observation, tests: Mapping[str, Callable[[str], bool]]) -> bool:
    """Whether an observation passes each test of a filter (a label it does not have fails)."""
    for key, test in tests.items():
        value = seen.resource_type if key == "resource.type" else seen.labels.get(key)
        if value is None or not test(value):
            return False
    return True


def labels_under(prefix: str, labels: Mapping[str, str]) -> dict[str, str]:
    """{short name: value} of the labels named under a prefix ("metric.label.")."""
    return {key.removeprefix(prefix): value for key, value in labels.items() if key.startswith(prefix)}


def bucket_counts(options: Mapping[str, Any], values: Sequence[float]) -> list[int]:
    """How many of `values` each bucket of the options holds (monitoring.bucket_bounds' buckets),
    trailing empty buckets left out as Monitoring does."""
    from google.api.distribution_pb2 import Distribution

    bucket_options = Distribution.BucketOptions(**options)
    counts: list[int] = []
    for value in values:
        index = 0
        while not bucket_bounds(bucket_options, index)[0] <= value < bucket_bounds(bucket_options, index)[1]:
            index += 1
        counts += [0] * (index + 1 - len(counts))
        counts[index] += 1
    return counts


def distribution(options: Mapping[str, Any], values: Sequence[float]) -> dict[str, Any]:
    mean = sum(values) / len(values) if values else 0.0
    return {"count": len(values), "mean": mean, "sum_of_squared_deviation": sum((v - mean) ** 2 for v in values),
            "bucket_options": dict(options), "bucket_counts": bucket_counts(options, values)}


def typed_value(value_type: str, buckets: Mapping[str, Any], value: Any) -> dict[str, Any]:
    """A period's TypedValue: a distribution of its values, or an INT64, a delta's sum or a gauge's most."""
    if value_type == "DISTRIBUTION":
        return {"distribution_value": distribution(buckets, value)}
    return {"int64_value": int(sum(value) if isinstance(value, list) else value)}


def aggregate(observations: Iterable[Observation], start: int, end: int, period: int, aligner: str,
              reducer: str, group_by: Sequence[str]) -> dict[tuple[str, ...], dict[int, Any]]:
    """{group's label values: {period's start: its value}}: per series (its labels) and period, the
    aligner's value (ALIGN_DELTA: the list of what it saw, a counter's increments or a distribution's
    values; ALIGN_MAX: the most), then the reducer's across the group's series (REDUCE_SUM: the lists
    merged, or the sum of the most; REDUCE_MAX: the most)."""
    if aligner not in ("ALIGN_DELTA", "ALIGN_MAX") or reducer not in ("REDUCE_SUM", "REDUCE_MAX"):
        raise QueryError("UNIMPLEMENTED", f"the stand-in aligns with ALIGN_DELTA or ALIGN_MAX and reduces with "
                                          f"REDUCE_SUM or REDUCE_MAX, not {aligner} and {reducer}")
    aligned: dict[tuple[tuple[tuple[str, str], ...], int], list[float]] = {}
    for seen in observations:
        if start <= seen.time < end - (end - start) % period:
            when = start + int((seen.time - start) // period) * period
            aligned.setdefault((tuple(sorted(seen.labels.items())), when), []).append(seen.value)
    groups: dict[tuple[str, ...], dict[int, list[Any]]] = {}
    for (labels, when), values in aligned.items():
        key = tuple(dict(labels).get(name, "") for name in group_by)
        groups.setdefault(key, {}).setdefault(when, []).append(max(values) if aligner == "ALIGN_MAX" else values)
    combine: Callable[[list[Any]], Any]
    if aligner == "ALIGN_MAX":
        combine = max if reducer == "REDUCE_MAX" else sum
    elif reducer == "REDUCE_SUM":
        def combine(series: list[Any]) -> Any:
            return [value for values in series for value in values]
    else:
        raise QueryError("INVALID_ARGUMENT", "REDUCE_MAX of a delta needs ALIGN_MAX here")
    return {key: {when: combine(series) for when, series in periods.items()} for key, periods in groups.items()}


class MonitoringStandIn:
    """Cloud Monitoring's ListTimeSeries over gRPC, from the twin's HAProxy log, the functions' logs,
    the subscription's backlog and the deployed log-based metrics.

    project: the project the kit asks about; haproxy_log: HAProxy's request log (twin/haproxy.py's
    REQUEST_LOG_FORMAT lines); function_logs: {Cloud Run service name: the log files of its instances};
    backlog: the subscription's undelivered messages now (None: not known now); subscription: its name;
    log_metrics: {deployed name: LogMetric} (log_metrics_from_state); services: {HAProxy backend (a
    function): its Cloud Run service name}. Start it (or use it as a context manager), read it with
    `client()`, stop it."""

    def __init__(self, project: str, haproxy_log: Path, function_logs: Mapping[str, Iterable[Path]],
                 backlog: Callable[[], int | None], subscription: str, log_metrics: Mapping[str, LogMetric],
                 services: Mapping[str, str] = SERVICE_NAMES, clock: Callable[[], float] = time.time,
                 poll_seconds: float = POLL_SECONDS, backlog_seconds: float = BACKLOG_SECONDS):
        self.project, self.subscription, self.services, self.clock = project, subscription, services, clock
        self.log_metrics = dict(log_metrics)
        for metric in self.log_metrics.values():  # an extractor it cannot evaluate fails now, not in a query
            for extractor in (*metric.label_extractors.values(), *filter(None, [metric.value_extractor])):
                logquery.extracted_field(extractor)
            logquery.Parser(metric.filter).parse()
        self.backlog, self.poll_seconds, self.backlog_seconds = backlog, poll_seconds, backlog_seconds
        self._haproxy = Tail(Path(haproxy_log))
        self._function_logs = [(service, Tail(Path(path)))
                               for service, paths in function_logs.items() for path in paths]
        self._requests: list[tuple[float, str, dict[str, Any]]] = []  # (end, service, HAProxy's line)
        self._entries: list[tuple[float, dict[str, Any]]] = []  # (timestamp, log entry)
        self._backlogs: list[tuple[float, int]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._server: grpc.Server | None = None
        self.endpoint = ""  # host:port, once started

    @classmethod
    def for_stack(cls, stack: LocalStack, deployment: Deployment, state: Mapping[str, Any],
                  backlog: Callable[[], int | None] | None = None) -> MonitoringStandIn:
        """The stand-in of a twin started from an applied deployment: its HAProxy log and instances' logs
        (the stack's processes, named <function>-<n>), the deployment's project and subscription, the
        log-based metrics of the applied state (`terraform show -json`); the backlog the twin's own
        (accepted visits not yet acknowledged), unless given."""
        processes = (stack.state() or {}).get("processes", [])
        logs: dict[str, list[Path]] = {}
        for process in processes:
            function, _, number = process["name"].rpartition("-")
            if function in CATALOGUE and number.isdigit():
                logs.setdefault(SERVICE_NAMES[function], []).append(Path(process["log"]))
        haproxy_log = next((Path(p["log"]) for p in processes if p["name"] == "haproxy"), stack.logs / "haproxy.log")
        return cls(deployment.project, haproxy_log, logs, backlog or (lambda: stack.sample()["store"]["backlog"]),
                   deployment.subscription, log_metrics_from_state(state))

    # --- lifecycle ---
    def start(self) -> MonitoringStandIn:
        import grpc
        from google.cloud.monitoring_v3 import ListTimeSeriesRequest, ListTimeSeriesResponse

        self._collect()
        self._sample_backlog()
        self._thread = threading.Thread(target=self._poll, name="monitoring-stand-in", daemon=True)
        self._thread.start()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("google.monitoring.v3.MetricService", {
            "ListTimeSeries": grpc.unary_unary_rpc_method_handler(
                self._serve, request_deserializer=ListTimeSeriesRequest.deserialize,
                response_serializer=ListTimeSeriesResponse.serialize)}),))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._server, self.endpoint = server, f"127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.stop(grace=1).wait()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> MonitoringStandIn:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def client(self) -> MetricServiceClient:
        """The real MetricServiceClient, on a plain gRPC channel to the stand-in."""
        import grpc
        from google.cloud.monitoring_v3 import MetricServiceClient
        from google.cloud.monitoring_v3.services.metric_service.transports import MetricServiceGrpcTransport

        return MetricServiceClient(transport=MetricServiceGrpcTransport(channel=grpc.insecure_channel(self.endpoint)))

    # --- reading what happened ---
    def _poll(self) -> None:
        last_backlog = self.clock()
        while not self._stopping.wait(self.poll_seconds):
            self._collect()
            if self.clock() - last_backlog >= self.backlog_seconds:
                self._sample_backlog()
                last_backlog = self.clock()

    def _sample_backlog(self) -> None:
        try:
            value = self.backlog()
        except Exception:  # the twin between two states (a restart): no point now, as a missed sample
            return
        if value is not None:
            with self._lock:
                self._backlogs.append((self.clock(), int(value)))

    def _collect(self) -> None:
        """The lines written since the last read: HAProxy's with their own times, the functions' stamped now."""
        with self._lock:
            now = self.clock()
            for line in self._haproxy.read():
                request = request_of(line)
                service = self.services.get(request["backend"]) if request else None
                if request and service:  # the front's own answers (a path no function serves) are no service's
                    self._requests.append((ended(request), service, request))
                    self._entries.append((ended(request), request_entry(self.project, service, request)))
            for service, tail in self._function_logs:
                self._entries += [(now, stdout_entry(self.project, service, line)) for line in tail.read() if line]

    def observations(self, metric_type: str) -> tuple[list[Observation], str, str, Mapping[str, Any]]:
        """(what the metric saw so far, its kind, its value type, its buckets for a distribution)."""
        self._collect()
        with self._lock:
            requests, entries, backlogs = list(self._requests), list(self._entries), list(self._backlogs)
        if metric_type in (REQUEST_COUNT, REQUEST_LATENCIES):
            seen = [(end, {"resource.label.service_name": service}, request)
                    for end, service, request in requests if reached_an_instance(request)]
            if metric_type == REQUEST_LATENCIES:
                return ([Observation(end, REVISION, labels, max(0, request["total_ms"] - max(0, request["queue_ms"])))
                         for end, labels, request in seen], "DELTA", "DISTRIBUTION", LATENCY_BUCKETS)
            return ([Observation(end, REVISION, {**labels, "metric.label.response_code": str(request["status"]),
                                                 "metric.label.response_code_class": f"{request['status'] // 100}xx"},
                                 1) for end, labels, request in seen], "DELTA", "INT64", {})
        if metric_type == UNDELIVERED:
            labels = {"resource.label.subscription_id": self.subscription}
            return [Observation(when, SUBSCRIPTION, labels, value) for when, value in backlogs], "GAUGE", "INT64", {}
        name = metric_type.removeprefix(LOG_METRIC_PREFIX)
        metric = self.log_metrics.get(name) if metric_type.startswith(LOG_METRIC_PREFIX) else None
        if metric is None:
            raise QueryError("NOT_FOUND", f"Cannot find metric(s) that match type = \"{metric_type}\".")
        tree = logquery.Parser(metric.filter).parse()
        value_field = logquery.extracted_field(metric.value_extractor) if metric.value_extractor else ""
        seen_entries: list[Observation] = []
        for when, entry in entries:
            if not logquery.evaluate(tree, entry):
                continue
            value = logquery.field_of(entry, value_field) if value_field else 1
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                continue  # a distribution's entry without a number to extract
            labels = {f"resource.label.{key}": str(found) for key, found in entry["resource"]["labels"].items()}
            for label, extractor in metric.label_extractors.items():
                found = logquery.field_of(entry, logquery.extracted_field(extractor))
                labels[f"metric.label.{label}"] = "" if found is None else str(found)
            seen_entries.append(Observation(when, REVISION, labels, value))
        return seen_entries, "DELTA", "DISTRIBUTION" if value_field else "INT64", metric.bucket_options

    def list_time_series(self, request: ListTimeSeriesRequest) -> ListTimeSeriesResponse:
        """ListTimeSeries' answer; QueryError for a query it cannot answer."""
        from google.cloud.monitoring_v3 import ListTimeSeriesResponse

        metric_type, tests = parse_filter(request.filter)
        if metric_type in NO_DATA:
            return ListTimeSeriesResponse()
        observations, kind, value_type, buckets = self.observations(metric_type)
        if value_type == "DISTRIBUTION" and request.aggregation.per_series_aligner.name != "ALIGN_DELTA":
            raise QueryError("UNIMPLEMENTED", "the stand-in aligns a distribution with ALIGN_DELTA only")
        kept = [seen for seen in observations if passes(seen, tests)]
        aggregation = request.aggregation
        period = int(aggregation.alignment_period.total_seconds()) or 60
        group_by = [name.replace(".labels.", ".label.") for name in aggregation.group_by_fields]
        groups = aggregate(kept, int(request.interval.start_time.timestamp()),
                           int(request.interval.end_time.timestamp()), period, aggregation.per_series_aligner.name,
                           aggregation.cross_series_reducer.name, group_by)
        resource_type = next((seen.resource_type for seen in kept), REVISION)
        series = []
        for key, periods in sorted(groups.items()):
            labels = dict(zip(group_by, key))
            points = [{"interval": {"start_time": {"seconds": when}, "end_time": {"seconds": when + period}},
                       "value": typed_value(value_type, buckets, periods[when])}
                      for when in sorted(periods, reverse=True)]  # newest first, as Monitoring lists them
            series.append({"metric": {"type": metric_type, "labels": labels_under("metric.label.", labels)},
                           "resource": {"type": resource_type, "labels": {
                               "project_id": self.project, **labels_under("resource.label.", labels)}},
                           "metric_kind": kind, "value_type": value_type, "points": points})
        return ListTimeSeriesResponse(time_series=series)

    def _serve(self, request: ListTimeSeriesRequest, context: grpc.ServicerContext) -> ListTimeSeriesResponse:
        import grpc

        try:
            return self.list_time_series(request)
        except QueryError as error:
            context.abort(getattr(grpc.StatusCode, error.code), str(error))
            raise  # abort raises; this line is never reached

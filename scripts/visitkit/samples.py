"""The server-sample schema, written once: one row of a run's server-samples.jsonl, the platform's own
figures at one moment. Three producers build it: on the local twin HAProxy's statistics and the push
relay's figures (twin/stack.py, `LocalStack.sample`; a local run adds the processes' resources,
runs/targets.py), and on Google Cloud, Cloud Monitoring's time series (cloud/monitoring.py, one sample
per minute). runs/ writes them; results/ and reports/ read them.

`source` says which: "local-haproxy" or "gcp-monitoring" (and "url": a run against a system known only
by its URL, which samples no figures, runs/targets.py). Each writes every required key; a figure the
platform has no measure of is None, never 0. The optional keys are one producer's alone (said for each),
or were added after older results folders were written (those rows lack them). Counters are cumulative:
locally since the stack started (the push relay's since the test began, in a run), on Google Cloud
since the window's start; a rate is the difference between two samples.

tests/unit/test_samples.py holds committed local rows and the Monitoring path's samples to exactly
these keys.
"""
from typing import Literal, NotRequired, TypedDict

Source = Literal["local-haproxy", "gcp-monitoring", "url"]


class FunctionFigures(TypedDict):
    """One function's figures (summed over its instances)."""
    instances: int | None  # instances up: HAProxy's servers UP; Cloud Run's instance count, active + idle
    in_flight: int | None  # requests being served now (HAProxy's scur); None on Google Cloud: no such metric
    queued: int | None  # requests waiting in HAProxy's queue (qcur); None on Google Cloud
    # counter: requests received (on Google Cloud those that reached an instance); None: its query failed
    requests: int | None
    responses_2xx: int | None  # counter: 2xx answers
    responses_4xx: int | None  # counter: 4xx answers (the 429s among them on Google Cloud, not locally)
    responses_429: int | None  # counter: 429s, requests no instance took in time (locally HAProxy's queue timeouts)
    responses_5xx: int | None  # counter: 5xx answers (locally the instances' own only)
    service_ms: float | None  # ms: HAProxy's mean response time (last 1,024 requests); the minute's p50 on Google Cloud
    service_ms_p95: float | None  # ms: the minute's 95th percentile on Google Cloud; None locally
    queue_ms: float | None  # ms: HAProxy's mean time in its queue (last 1,024 requests); None on Google Cloud
    restarts: NotRequired[int]  # local only, counter: its instances' restarts by their supervisors
    responses_429_logged: NotRequired[int | None]  # Google Cloud only, counter: 429s in the request logs
    billable_instance_s: NotRequired[float | None]  # Google Cloud only, counter: instance seconds billed
    cpu_utilization: NotRequired[float | None]  # Google Cloud only: the minute's mean CPU use, fraction of allocated
    cpu_utilization_p95: NotRequired[float | None]  # Google Cloud only: its 95th percentile, fraction
    memory_utilization: NotRequired[float | None]  # Google Cloud only: the minute's mean memory use, fraction
    memory_utilization_p95: NotRequired[float | None]  # Google Cloud only: its 95th percentile, fraction


class StoreFigures(TypedDict):
    """The store path: visits accepted by inc-counter, delivered to store-inc-counter, stored.
    (Results folders of format 1 named `accepted` `published`; results/folder.py renames it.)"""
    accepted: int | None  # counter: inc-counter's 202s, visits Pub/Sub accepted (a CORS preflight's 204 is not one)
    delivered: int | None  # counter: store-inc-counter's 2xx, push deliveries acknowledged, redeliveries included
    stored: int | None  # visits in Firestore, summed from the shards locally; None on Google Cloud
    # messages not yet acknowledged: locally accepted - the push relay's settled (None while it does not
    # answer); on Google Cloud the subscription's undelivered messages, the minute's most
    backlog: int | None
    oldest_unacked_s: NotRequired[int | None]  # Google Cloud only: s, the oldest unacknowledged message's age
    firestore_writes: NotRequired[int | None]  # Google Cloud only, counter: document writes
    firestore_reads: NotRequired[int | None]  # Google Cloud only, counter: document reads
    firestore_deletes: NotRequired[int | None]  # Google Cloud only, counter: document deletes
    dead_lettered: NotRequired[int | None]  # Google Cloud only, counter: messages sent to the dead-letter topic
    # Google Cloud only, counters: store-inc-counter's deliveries by outcome, from its structured logs
    counted: NotRequired[int | None]
    already_counted: NotRequired[int | None]
    malformed: NotRequired[int | None]
    failed: NotRequired[int | None]


class PushFigures(TypedDict):
    """The local push relay's figures (twin/push.py, its GET /). Levels: window, window_peak, in_flight,
    settled; the rest are counters (twin.push.COUNTERS)."""
    window: int  # the push window: the most deliveries it lets be in flight now
    window_peak: int  # the largest window so far
    window_shrinks: int  # counter: times a failure halved the window
    in_flight: int  # deliveries awaiting their answer
    # distinct messages acknowledged (delivered or dead-lettered) since the stack started; absent in
    # rows written before 2026-11-25
    settled: NotRequired[int]
    deliveries: int  # counter: POSTs to store-inc-counter, retries included
    acked: int  # counter: deliveries answered 2xx
    retries: int  # counter: deliveries of a message that had failed before
    failures: int  # counter: deliveries not answered 2xx (429, 5xx, timeout, other)
    responses_429: int  # counter: deliveries answered 429
    responses_5xx: int  # counter: deliveries answered 5xx
    timeouts: int  # counter: deliveries without an answer within the ack deadline
    dead_lettered: int  # counter: messages sent to the dead-letter topic after the last attempt
    pull_errors: int  # counter: pulls from the emulator that failed
    errors: NotRequired[int]  # counter: the relay's own faults delivering; absent in rows written before 2026-11-23


class ResourceFigures(TypedDict):
    """What one component (a function's instances, a platform part, Locust) uses (twin/resources.py)."""
    cpu_percent: float | None  # % of one core since the previous sample; None in the first
    rss_mb: float  # MiB resident, summed over its processes


class Sample(TypedDict):
    """One row of server-samples.jsonl."""
    time: float  # unix seconds: when sampled; on Google Cloud the end of the sample's minute
    source: Source
    functions: dict[str, FunctionFigures]  # by function name (catalogue.FUNCTIONS)
    store: StoreFigures
    push: NotRequired[PushFigures | None]  # local only: the push relay's figures; None when it did not answer
    resources: NotRequired[dict[str, ResourceFigures]]  # a local run's only: by component

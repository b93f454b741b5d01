"""An estimated cost of a Google Cloud run from what the platform billed: instance time, requests,
Firestore reads/writes/deletes and Pub/Sub volume, at the list prices of the run's region in
prices.json (dated, with sources); what it leaves out (Cloud Build, Artifact Registry, and for a run's own
usage Cloud Logging and egress) is named with an order of magnitude. An estimate, and the report says so.

The model's costs (at_rate: per_million_visits, hourly_at, monthly_at) price a steady rate of visits: each
function's instance time by occupancy (occupancy.py: billed while a request is in flight, rounded up, the
min_instances idle otherwise), its requests, Pub/Sub's billed requests (pubsub_usage), the answers' internet
egress (response_bytes.py), optionally less the free tiers (free_tier.py), and what every visit leaves behind:
- Cloud Logging: Cloud Run writes a request log entry for every request (the page, the API calls, each
  push delivery), and store-inc-counter one structured line per delivery (functions/store_inc_counter.py,
  functions/common.py's log). What an entry weighs is measured, not guessed (tests/unit/test_cost.py):
  REQUEST_LOG_ENTRY_BYTES is a real Cloud Run request log entry's JSON (tests/fixtures/logging/), and
  STORE_LINE_ENTRY_BYTES the LogEntry Cloud Run makes of store-inc-counter's line, written by common.log
  with a delivery's fields, in that entry's envelope (resource, labels, timestamps, log name).
- The marker each visit writes (processed_messages/<sha256 of its visit id>), kept marker_ttl_days by the
  TTL policy: its size by Firestore's documented rules (marker_bytes), stored for its TTL.
- A pull store (store_mode "pull", iteration 7) instead: per batch of batch_size visits one Increment per page it
  touches and one batch document (visit_batches/<id>, its visits' ids), deleted by the TTL policy marker_ttl_days
  later (batch_bytes); the lease read in each commit's transaction; the lease renewed (read twice, written
  once) every LEASE_RENEWAL_S; one log line per batch, no request per visit; and its one instance billed
  instance-based all the time it runs.
"""
import json
import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from visitkit.catalogue import FIRESTORE, PAGES, PUSH_FUNCTION, READER_FUNCTION
from visitkit.errors import VisitkitError
from visitkit.model import capacity, response_bytes
from visitkit.model.occupancy import Occupancy, occupancy
from visitkit.settings import MEMORY, MEMORY_BYTES, FunctionSettings, Settings

Prediction = capacity.Prediction

PRICES_FILE = Path(__file__).with_name("prices.json")
DEFAULT_REGION = "southamerica-east1"  # infra/variables.tf's default, the study's region
HOUR = 3600
GIB = 2**30  # Cloud Logging and Firestore bill binary units
DAYS_PER_MONTH = 365.25 / 12  # a GiB-month of storage, pro rata by the day ("all charges accrue daily")
# The JSON of one Cloud Run request log entry, without whitespace: tests/fixtures/logging/cloud-run-request-log.json.
REQUEST_LOG_ENTRY_BYTES = 1350
# store-inc-counter's line per delivery as Cloud Logging stores it: its JSON fields as jsonPayload, severity and
# trace lifted into the entry, in the request entry's envelope (tests/unit/test_cost.py measures both).
STORE_LINE_ENTRY_BYTES = 1155
# The pull store renews its lease this often, each time a plain read of it, then a transaction that reads and
# writes it: two reads and a write (functions/store_batch.py, take_or_renew_lease).
LEASE_RENEWAL_S = 10
LEASE_RENEWAL_READS = 2
# A visit id as the page makes it: a UUID in its 36-character text form (functions/templates/page.html).
VISIT_ID_CHARS = 36
# A pull store's batch document (functions/store_batch.py): catalogue.json's "batches" collection (its default
# until the catalogue names it), the fields it writes, and those left indexed (the others are exempt:
# infra/firestore.tf): the built-in document name and published_to, which the window's query reads.
BATCHES = FIRESTORE.get("batches", "visit_batches")
BATCH_TIMESTAMPS = ("published_from", "published_to", "expire_at")
BATCH_INDEXED_TIMESTAMP = "published_to"
# Services in the order their lines come: by_service's keys.
SERVICES = ("Cloud Run", "Firestore", "Pub/Sub", "Cloud Logging", "Network egress")


def load_prices(path: str | Path = PRICES_FILE) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def memory_gib(memory: str) -> float:
    """'256M' -> GiB."""
    found = MEMORY.match(memory)
    if found is None:
        raise ValueError(f"not a memory size such as 256M or 1Gi: {memory!r}")
    return int(memory[:found.start(1)]) * MEMORY_BYTES[found[1]] / 2**30


def regional(prices: Mapping[str, Any], region: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(Cloud Run's prices, Firestore's prices, tier) in `region`; VisitkitError for a region the
    price list does not know (better no figure than one from another region's prices)."""
    run, firestore = prices["cloud_run"], prices["firestore"]
    tier = run["region_tiers"].get(region)
    if tier is None or region not in firestore["regions"]:
        known = sorted(set(run["region_tiers"]) & set(firestore["regions"]))
        raise VisitkitError(f"scripts/visitkit/model/prices.json has no prices for region {region}: add them from the "
                            f"sources it names (it knows {', '.join(known)})")
    return ({**run["tiers"][tier], "per_million_requests": run["per_million_requests"]}, firestore["regions"][region],
            tier)


def instance_rates(spec: FunctionSettings, run: Mapping[str, float]) -> tuple[float, float]:
    """(USD per active instance-second, USD per idle instance-second) of one function's size."""
    vcpu, gib = float(spec.effective_cpu), memory_gib(spec.memory)
    return (vcpu * run["per_vcpu_second"] + gib * run["per_gib_second"],
            vcpu * run["idle_per_vcpu_second"] + gib * run["idle_per_gib_second"])


def instance_based_rate(spec: FunctionSettings, run: Mapping[str, float]) -> float:
    """USD per instance-second of one function's size under instance-based billing (the CPU always allocated,
    billed for the instance's whole life, no fee per request): how a pull store runs."""
    return (float(spec.effective_cpu) * run["instance_based_per_vcpu_second"]
            + memory_gib(spec.memory) * run["instance_based_per_gib_second"])


def estimate(usage: Mapping[str, Any], settings: Settings, prices: Mapping[str, Any],
             region: str = DEFAULT_REGION, free_months: float | None = None) -> dict[str, Any]:
    """usage: {"functions": {name: {"billable_instance_s", "requests"[, "idle_instance_s", "instance_based"]}},
    "firestore_reads", "firestore_writes", "firestore_deletes", and Pub/Sub's "pubsub_messages" (a run's own: each
    billed its 1,000-byte minimum) or, from the model, "pubsub": {"requests", "billed_bytes"}; from the model too
    "marker_gib_months" / "batch_gib_months" (the store's storage), "log_entries": {"bytes", "entries"} (Cloud
    Logging) and "egress_bytes" (the answers sent to the visitors); settings: the run's Settings (each function's CPU
    and memory). free_months: the free tiers of that many months taken off (free_tier.py), None for list prices.
    Returns {"lines": [(item, quantity text, USD)], "total", "as_of", "currency", "region", "tier", "left_out"}:
    what the usage does not give (Cloud Logging, egress for a run's own usage) is named among what is left out."""
    run, firestore, tier = regional(prices, region)
    pubsub, logging = prices["pubsub"], prices["cloud_logging"]
    lines: list[tuple[str, str, float]] = []
    for name, used in usage["functions"].items():
        spec = settings.functions[name]
        seconds = used.get("billable_instance_s") or 0.0
        size = f"{float(spec.effective_cpu):g} vCPU, {memory_gib(spec.memory):g} GiB"
        if used.get("instance_based"):
            lines.append((f"Cloud Run: {name}", f"{seconds:,.0f} instance-s x {size}, instance-based (always on)",
                          seconds * instance_based_rate(spec, run)))
            continue
        active, idle = instance_rates(spec, run)
        requests = (used.get("requests") or 0) * run["per_million_requests"] / 1e6
        idle_s = used.get("idle_instance_s") or 0.0
        kept = f" + {idle_s:,.0f} idle (min_instances)" if idle_s else ""
        lines.append((f"Cloud Run: {name}",
                      f"{seconds:,.0f} instance-s{kept} x {size}; {used.get('requests') or 0:,.0f} requests",
                      seconds * active + idle_s * idle + requests))
    for kind in ("reads", "writes", "deletes"):
        count = usage.get(f"firestore_{kind}") or 0
        lines.append((f"Firestore document {kind}", f"{count:,.0f}", count * firestore[f"per_100k_{kind}"] / 1e5))
    if "marker_gib_months" in usage:
        gib_months = usage["marker_gib_months"]
        lines.append(("Firestore marker storage", f"{gib_months:,.4f} GiB-months ({marker_bytes()} B a marker, "
                                                  f"kept {settings.marker_ttl_days} days)",
                      gib_months * firestore["per_gib_month"]))
    if "batch_gib_months" in usage:
        gib_months, batch = usage["batch_gib_months"], settings.pull.batch_size
        lines.append(("Firestore batch storage", f"{gib_months:,.4f} GiB-months ({batch_bytes(batch):,} B a batch of "
                                                 f"{batch} ids, kept {settings.marker_ttl_days} days)",
                      gib_months * firestore["per_gib_month"]))
    if "pubsub" in usage:
        billed = usage["pubsub"]
        lines.append(("Pub/Sub throughput", f"{billed['requests']:,.0f} publish, push and pull requests, "
                                            f"{billed['billed_bytes'] / GIB:,.2f} GiB billed (>= 1,000 B a request)",
                      billed["billed_bytes"] / 2**40 * pubsub["per_tib"]))
    else:
        messages = usage.get("pubsub_messages") or 0
        volume_tib = messages * pubsub["min_bytes_per_message"] / 2**40
        lines.append(("Pub/Sub throughput", f"{messages:,} messages published or delivered (>= 1 KB each)",
                      volume_tib * pubsub["per_tib"]))
    left_out = [f"{item}: {text}" for item, text in prices["left_out"].items()]
    logged = usage.get("log_entries")
    if logged is not None:
        lines.append(("Cloud Logging", f"{logged['bytes'] / GIB:,.2f} GiB in {logged['entries']:,.0f} entries",
                      logged["bytes"] / GIB * logging["per_gib"]))
    else:
        left_out.append(f"Cloud Logging: ${logging['per_gib']:.2f}/GiB beyond "
                        f"{logging['free_gib_per_project_month']} GiB a month per project, not measured for a run: "
                        f"a request log entry of about {REQUEST_LOG_ENTRY_BYTES:,} bytes per request and one of "
                        f"{STORE_LINE_ENTRY_BYTES:,} per push delivery (scripts/predict prices them)")
    if "egress_bytes" in usage:
        per_gib = egress_price(prices, region)
        lines.append(("Network egress", f"{usage['egress_bytes'] / GIB:,.2f} GiB of answers to the visitors, at "
                                        f"${per_gib:.2f}/GiB", usage["egress_bytes"] / GIB * per_gib))
    else:
        egress = prices["network_egress"]
        left_out.insert(0, f"network egress: the answers to the machine running Locust, at "
                           f"${egress_price(prices, region):.2f}/GiB from {region}: {egress['run_note']}")
    if free_months is not None:
        from visitkit.model.free_tier import free_lines

        lines += free_lines(lines, usage, prices, region, free_months, firestore, egress_price(prices, region))
    return {"lines": lines, "total": sum(usd for _, _, usd in lines), "as_of": prices["as_of"],
            "currency": prices["currency"], "region": region, "tier": tier, "left_out": left_out,
            "free_tier": free_months is not None}


def egress_price(prices: Mapping[str, Any], region: str) -> float:
    """USD per GiB of internet egress from `region` (premium tier, the first tier's price)."""
    found = prices["network_egress"]["per_gib"].get(region)
    if found is None:
        raise VisitkitError(f"scripts/visitkit/model/prices.json has no egress price for region {region}: add it "
                            "from the source it names")
    return float(found)


def log_entries(requests: float, store_lines: float) -> dict[str, float]:
    """{"bytes", "entries"} Cloud Logging ingests for `requests` requests to Cloud Run (one request log entry each,
    push deliveries included) and store-inc-counter's `store_lines` lines (one per push delivery, or per batch of
    a pull store: about as heavy, a handful of counts in place of a visit's fields)."""
    return {"bytes": requests * REQUEST_LOG_ENTRY_BYTES + store_lines * STORE_LINE_ENTRY_BYTES,
            "entries": requests + store_lines}


def string_bytes(text: str) -> int:
    """Firestore's string size: its UTF-8 bytes + 1."""
    return len(text.encode()) + 1


def document_name_bytes(collection: str, document_id: str) -> int:
    """A top-level document's name, by Firestore's storage size rules: each collection and document ID's string
    size + 16."""
    return string_bytes(collection) + string_bytes(document_id) + 16


def index_entry_bytes(name: int, field: str, value: int) -> int:
    """An entry of a single-field index with collection scope, for a document whose name is `name` bytes in a
    top-level collection (no parent document): its name + the field's name + its value + 32."""
    return name + 0 + string_bytes(field) + value + 32


def marker_bytes() -> int:
    """What one visit's marker (processed_messages/<64 hex digits>: visit_type, expire_at) stores, by Firestore's
    storage size rules (prices.json's firestore_storage_size source):
      document name = each collection and document ID's string size + 16;
      document = its name + each field's name and value + 32 (a string value its string size, a timestamp 8);
      an entry of a single-field index with collection scope = the document's name + its parent document's
      name (none: a top-level collection) + the field's name + its value + 32.
    infra/firestore.tf exempts the marker's fields from single-field indexing (expire_at, which the TTL policy reads,
    and visit_type), so the only index entry left is the built-in one on the document name (__name__, its value
    a reference: the document name's size), sized by the same rule. visit_type is the longest page's name."""
    name = document_name_bytes(FIRESTORE["markers"], "0" * 64)
    fields = (string_bytes("visit_type") + max(string_bytes(page) for page in PAGES)
              + string_bytes(FIRESTORE["marker_expiry_field"]) + 8)
    document = name + fields + 32
    return document + index_entry_bytes(name, "__name__", name)


def batch_bytes(batch_size: int) -> int:
    """What a pull store's full batch document (visit_batches/<uuid4 hex>: ids, pages, published_from,
    published_to, writer, expire_at) stores, by the rules marker_bytes follows: an array's value is the sum of its
    elements' (batch_size visit ids of VISIT_ID_CHARS), a map's the sum of its keys' and values' (a count for each
    page, an integer: 8), a timestamp or an integer 8. Its fields but published_to are exempt from single-field
    indexing, so its index entries are the document name's and published_to's."""
    name = document_name_bytes(BATCHES, "0" * 32)
    pages = sum(string_bytes(page) + 8 for page in PAGES[:batch_size])
    fields = (string_bytes("ids") + batch_size * string_bytes("0" * VISIT_ID_CHARS) + string_bytes("pages") + pages
              + sum(string_bytes(field) + 8 for field in (*BATCH_TIMESTAMPS, "writer")))
    return (name + fields + 32 + index_entry_bytes(name, "__name__", name)
            + index_entry_bytes(name, BATCH_INDEXED_TIMESTAMP, 8))


def batch_gib_months(settings: Settings, visits: float) -> float:
    """The GiB-months the batch documents of `visits` visits are stored for, full batches kept marker_ttl_days."""
    batches = visits / settings.pull.batch_size
    return batches * batch_bytes(settings.pull.batch_size) / GIB * settings.marker_ttl_days / DAYS_PER_MONTH


def store_usage(settings: Settings, visits: float, seconds: float) -> dict[str, Any]:
    """What `visits` visits in `seconds` leave behind beyond the functions' requests: Firestore writes, deletes
    and the store's own reads, storage, Pub/Sub messages (a publish and a delivery each) and store-inc-counter's
    log lines. Push: per visit 2 writes (its shard and its marker), a TTL delete, the marker stored, a line per
    delivery. Pull: per full batch an Increment per page it touches and its batch document, a TTL delete of that
    document, the lease read in its commit, a line; the lease renewed (LEASE_RENEWAL_READS reads and a write) every
    LEASE_RENEWAL_S."""
    if not settings.pulls:
        return {"firestore_writes": int(2 * visits), "firestore_deletes": int(visits), "store_reads": 0,
                "pubsub_messages": int(2 * visits), "marker_gib_months": marker_gib_months(settings, int(visits)),
                "store_lines": int(visits)}
    batches = visits / settings.pull.batch_size
    pages_per_batch = min(len(PAGES), settings.pull.batch_size)
    renewals = seconds / LEASE_RENEWAL_S
    return {"firestore_writes": round(batches * (pages_per_batch + 1) + renewals),
            "firestore_deletes": round(batches), "store_reads": round(batches + LEASE_RENEWAL_READS * renewals),
            "pubsub_messages": int(2 * visits), "batch_gib_months": batch_gib_months(settings, visits),
            "store_lines": round(batches)}


def marker_gib_months(settings: Settings, visits: float) -> float:
    """The GiB-months the markers of `visits` visits are stored for, each kept marker_ttl_days."""
    return visits * marker_bytes() / GIB * settings.marker_ttl_days / DAYS_PER_MONTH


MILLION = 1_000_000
MONTH_S = DAYS_PER_MONTH * 24 * HOUR
# Where --cost-per-million prices a visit: the study's region (Cloud Run Tier 2) and a Tier 1 one.
PER_MILLION_REGIONS = ("southamerica-east1", "us-central1")
# Pub/Sub bills each publish, push and pull request at least this many bytes (prices.json's pubsub quote).
PUBSUB_MIN_REQUEST_BYTES = 1000
# A pull returns what the subscription holds when it arrives, up to the batch: about what arrives during one pull's
# round trip, ASSUMED 50 ms (a synchronous Pull in the same region); an empty pull waits PULL_TIMEOUT_S
# (functions/store_batch.py's PULL_TIMEOUT_SECONDS) and is billed its minimum too.
PULL_ROUND_TRIP_S = 0.05
PULL_TIMEOUT_S = 10
# A trace id as Cloud Run's X-Cloud-Trace-Context gives it: 32 hex digits (functions/common.py's trace_of).
TRACE_ID_CHARS = 32


def visit_message_bytes() -> int:
    """What one visit's message weighs for Pub/Sub (functions/inc_counter.py): its data {"visit_type": page} as
    JSON and its attributes' keys and values (visit_type, visit_id, trace), for the longest page."""
    page = max(PAGES, key=len)
    data = len(json.dumps({"visit_type": page}).encode())
    attributes = {"visit_type": page, "visit_id": "0" * VISIT_ID_CHARS, "trace": "0" * TRACE_ID_CHARS}
    return data + sum(len(key) + len(value) for key, value in attributes.items())


def pubsub_usage(settings: Settings, visits: float, visits_per_s: float, seconds: float) -> dict[str, float]:
    """{"requests", "billed_bytes"} of `visits` visits at visits_per_s over `seconds`: inc-counter publishes each
    visit in a Publish request of its own (functions/clients.py: no batching); Pub/Sub pushes each in a request of
    its own; a pull store pulls them in requests of up to batch_size messages (PULL_ROUND_TRIP_S's arrivals each),
    plus an empty pull each PULL_TIMEOUT_S that found nothing. Each request is billed at least
    PUBSUB_MIN_REQUEST_BYTES."""
    message = visit_message_bytes()
    single = max(PUBSUB_MIN_REQUEST_BYTES, message)
    if not settings.pulls:
        return {"requests": 2 * visits, "billed_bytes": 2 * visits * single}
    per_pull = min(settings.pull.batch_size, max(1.0, visits_per_s * PULL_ROUND_TRIP_S))
    pulls = visits / per_pull
    empty = seconds / PULL_TIMEOUT_S * math.exp(-visits_per_s * PULL_TIMEOUT_S)
    return {"requests": visits + pulls + empty,
            "billed_bytes": visits * single + pulls * max(PUBSUB_MIN_REQUEST_BYTES, per_pull * message)
            + empty * PUBSUB_MIN_REQUEST_BYTES}


def function_rates(settings: Settings, prediction: Prediction, visits_per_s: float) -> dict[str, float]:
    """{function: requests/s} at visits_per_s: each public function its requests per visit (get-counter the page's
    reads_per_visit), store-inc-counter a push delivery a visit (a pull store none)."""
    return {name: visits_per_s * requests_per_visit(name, prediction.reads_per_visit, settings.pulls)
            for name in settings.functions}


def occupancies(settings: Settings, prediction: Prediction, visits_per_s: float) -> dict[str, Occupancy]:
    """{function: its Occupancy at visits_per_s} for the functions billed by request (not a pull store)."""
    found = {}
    for name, rate in function_rates(settings, prediction, visits_per_s).items():
        if settings.pulls and name == PUSH_FUNCTION:
            continue
        spec = settings.functions[name]
        per_instance = prediction.capacity_rps[name] / spec.max_instances
        found[name] = occupancy(rate, prediction.busy_ms[name] / 1000, per_instance, spec.concurrency,
                                spec.min_instances, spec.max_instances)
    return found


def usage_at(settings: Settings, prediction: Prediction, visits_per_s: float, seconds: float) -> dict[str, Any]:
    """estimate's usage for `seconds` at a steady visits_per_s: each function's requests and the instance time
    request-based billing charges for them (occupancy.py: the instances in use, billed while a request is in
    flight, rounded up, the min_instances idle otherwise), a pull store's instance billed instance-based all the
    time; get-counter's and serve-page's aggregation reads from their caches on the instances in use; what
    store_usage says the visits leave behind; Pub/Sub's billed requests; the answers' egress (response_bytes.py)."""
    visits = visits_per_s * seconds
    rates = function_rates(settings, prediction, visits_per_s)
    used = occupancies(settings, prediction, visits_per_s)
    per_function: dict[str, dict[str, Any]] = {}
    for name, spec in settings.functions.items():
        if name not in used:  # a pull store: one instance, always on
            per_function[name] = {"requests": 0, "instance_based": True,
                                  "billable_instance_s": max(1, spec.min_instances) * seconds}
            continue
        per_function[name] = {"requests": rates[name] * seconds,
                              "billable_instance_s": used[name].active_per_s * seconds,
                              "idle_instance_s": used[name].idle_per_s * seconds}
    in_use = replace(settings, functions={name: replace(spec, max_instances=used[name].instances if name in used
                                                        else spec.max_instances)
                                          for name, spec in settings.functions.items()})
    reads_per_s = capacity.count_reads_per_s(in_use, visits_per_s, prediction.reads_per_visit)
    left = store_usage(settings, visits, seconds)
    storage: dict[str, float] = {key: left[key] for key in ("marker_gib_months", "batch_gib_months") if key in left}
    return {"functions": per_function, "firestore_writes": left["firestore_writes"],
            "firestore_deletes": left["firestore_deletes"],
            "firestore_reads": reads_per_s * billed_reads_per_query(settings) * seconds + left["store_reads"],
            "pubsub": pubsub_usage(settings, visits, visits_per_s, seconds), **storage,
            "log_entries": log_entries(sum(f["requests"] for f in per_function.values()), left["store_lines"]),
            "egress_bytes": visits * response_bytes.per_visit(prediction.reads_per_visit)}


def at_rate(settings: Settings, prediction: Prediction, visits_per_s: float, prices: Mapping[str, Any],
            region: str = DEFAULT_REGION, *, seconds: float, free_tier: bool = False) -> dict[str, Any]:
    """The estimate of `seconds` at a steady visits_per_s (usage_at), the free tiers taken off when asked."""
    if visits_per_s < 0:
        raise VisitkitError(f"a rate is 0 visits/s or more, not {visits_per_s:g}")
    return estimate(usage_at(settings, prediction, visits_per_s, seconds), settings, prices, region,
                    free_months=seconds / MONTH_S if free_tier else None)


def hourly_at(settings: Settings, prediction: Prediction, visits_per_s: float, prices: Mapping[str, Any],
              region: str = DEFAULT_REGION, free_tier: bool = False) -> dict[str, Any]:
    """One hour at a steady visits_per_s (at_rate)."""
    return at_rate(settings, prediction, visits_per_s, prices, region, seconds=HOUR, free_tier=free_tier)


def monthly_at(settings: Settings, prediction: Prediction, visits_per_s: float, prices: Mapping[str, Any],
               region: str = DEFAULT_REGION, free_tier: bool = False) -> dict[str, Any]:
    """One month (MONTH_S) at a steady visits_per_s (at_rate)."""
    return at_rate(settings, prediction, visits_per_s, prices, region, seconds=MONTH_S, free_tier=free_tier)


def per_million_visits(settings: Settings, prediction: Prediction, prices: Mapping[str, Any],
                       region: str = DEFAULT_REGION, *, visits_per_s: float | None = None,
                       free_tier: bool = False) -> dict[str, Any]:
    """What a million visits cost arriving at visits_per_s (None: the knee's, where every instance is full, the
    cheapest a visit gets with a function billed by request), by at_rate. With free_tier, the free tiers of the
    time they take."""
    rate = prediction.knee_visits_per_s if visits_per_s is None else visits_per_s
    return at_rate(settings, prediction, rate, prices, region, seconds=MILLION / rate, free_tier=free_tier)


def cost_per_million(settings: Settings, prediction: Prediction, prices: Mapping[str, Any],
                     region: str, visits_per_s: float | None = None,
                     free_tier: bool = False) -> tuple[float, dict[str, Any]]:
    """(visits/s, cost.per_million_visits there): a million visits at visits_per_s (None: the knee's, the most the
    deployment serves, where every instance is full)."""
    rate = prediction.knee_visits_per_s if visits_per_s is None else visits_per_s
    return rate, per_million_visits(settings, prediction, prices, region, visits_per_s=rate, free_tier=free_tier)


def requests_per_visit(function: str, get_counter_requests_per_visit: int = 1, pulls: bool = False) -> int:
    """Requests a visit makes to `function`: one each (store-inc-counter its push delivery; a pull store none),
    get-counter's as given."""
    if function == READER_FUNCTION:
        return get_counter_requests_per_visit
    return 0 if pulls and function == PUSH_FUNCTION else 1


def by_service(estimate_: Mapping[str, Any]) -> dict[str, float]:
    """An estimate's total split into Cloud Run, Firestore, Pub/Sub and Cloud Logging (those it has), as
    {service: USD}."""
    split: dict[str, float] = {}
    for item, _, usd in estimate_["lines"]:
        service = next(name for name in SERVICES if item.startswith(name))
        split[service] = split.get(service, 0.0) + usd
    return split


def billed_reads_per_query(settings: Settings) -> int:
    """Firestore bills an aggregation query one document read per batch of up to 1,000 index entries it
    matches (at least one): get-counter's sum over a page's shards."""
    return max(1, math.ceil(settings.shards_per_page / 1000))


def idle_hourly(settings: Settings, prices: Mapping[str, Any],
                region: str = DEFAULT_REGION) -> tuple[list[tuple[str, int, float]], float]:
    """What the functions' min_instances cost an hour without a single request (Cloud Run bills a
    minimum instance at the idle rate while it waits; a pull store's at the instance-based rate, as it always
    runs): [(function, instances, USD)], and the total."""
    run, _, _ = regional(prices, region)
    lines = [(name, spec.min_instances, spec.min_instances * HOUR
              * (instance_based_rate(spec, run) if settings.pulls and name == PUSH_FUNCTION
                 else instance_rates(spec, run)[1]))
             for name, spec in settings.functions.items() if spec.min_instances]
    return lines, sum(usd for _, _, usd in lines)

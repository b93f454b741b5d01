"""An estimated cost of a Google Cloud run from what the platform billed: instance time, requests,
Firestore reads/writes/deletes and Pub/Sub volume, at the list prices of the run's region in
prices.json (dated, with sources); what it leaves out (egress, Cloud Build, and for a run's own usage
Cloud Logging) is named with an order of magnitude. An estimate, and the report says so.

The model's costs (per_million_visits, hourly_at) also price what every visit leaves behind:
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
from pathlib import Path
from typing import Any

from visitkit.catalogue import FIRESTORE, PAGES, PUSH_FUNCTION, READER_FUNCTION
from visitkit.errors import VisitkitError
from visitkit.settings import MEMORY, MEMORY_BYTES, FunctionSettings, Settings

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
SERVICES = ("Cloud Run", "Firestore", "Pub/Sub", "Cloud Logging")


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
             region: str = DEFAULT_REGION) -> dict[str, Any]:
    """usage: {"functions": {name: {"billable_instance_s", "requests"}}, "firestore_reads", "firestore_writes",
    "firestore_deletes", "pubsub_messages"} and, from the model, "marker_gib_months" (the markers' storage) and
    "log_entries": {"bytes", "entries"} (Cloud Logging); settings: the run's Settings (each function's CPU and
    memory). Returns {"lines": [(item, quantity text, USD)], "total", "as_of", "currency", "region", "tier",
    "left_out"}: without "log_entries" (a run's own usage), Cloud Logging is named among what is left out."""
    run, firestore, tier = regional(prices, region)
    pubsub, logging = prices["pubsub"], prices["cloud_logging"]
    lines: list[tuple[str, str, float]] = []
    for name, used in usage["functions"].items():
        spec = settings.functions[name]
        seconds = used.get("billable_instance_s") or 0.0
        if used.get("instance_based"):
            lines.append((f"Cloud Run: {name}", f"{seconds:,.0f} instance-s x {float(spec.effective_cpu):g} vCPU, "
                                                f"{memory_gib(spec.memory):g} GiB, instance-based (always on)",
                          seconds * instance_based_rate(spec, run)))
            continue
        active, _ = instance_rates(spec, run)
        requests = (used.get("requests") or 0) * run["per_million_requests"] / 1e6
        lines.append((f"Cloud Run: {name}", f"{seconds:,.0f} instance-s x {float(spec.effective_cpu):g} vCPU, "
                                            f"{memory_gib(spec.memory):g} GiB; {used.get('requests') or 0:,} requests",
                      seconds * active + requests))
    for kind in ("reads", "writes", "deletes"):
        count = usage.get(f"firestore_{kind}") or 0
        lines.append((f"Firestore document {kind}", f"{count:,}", count * firestore[f"per_100k_{kind}"] / 1e5))
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
    messages = usage.get("pubsub_messages") or 0
    volume_tib = messages * pubsub["min_bytes_per_message"] / 2**40
    lines.append(("Pub/Sub throughput", f"{messages:,} messages published or delivered (>= 1 KB each)",
                  volume_tib * pubsub["per_tib"]))
    left_out = [f"{item}: {text}" for item, text in prices["left_out"].items()]
    logged = usage.get("log_entries")
    if logged is not None:
        lines.append(("Cloud Logging", f"{logged['bytes'] / GIB:,.2f} GiB in {logged['entries']:,} entries",
                      logged["bytes"] / GIB * logging["per_gib"]))
    else:
        left_out.insert(2, f"Cloud Logging: ${logging['per_gib']:.2f}/GiB beyond "
                           f"{logging['free_gib_per_project_month']} GiB a month per project, not measured for a run: "
                           f"a request log entry of about {REQUEST_LOG_ENTRY_BYTES:,} bytes per request and one of "
                           f"{STORE_LINE_ENTRY_BYTES:,} per push delivery (scripts/predict prices them)")
    return {"lines": lines, "total": sum(usd for _, _, usd in lines), "as_of": prices["as_of"],
            "currency": prices["currency"], "region": region, "tier": tier, "left_out": left_out}


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


def _usage(settings: Settings, per_function: dict[str, dict[str, Any]], counter_reads: float, visits: float,
           seconds: float) -> dict[str, Any]:
    """estimate's usage: the functions' as given, get-counter's `counter_reads` billed reads, and store_usage."""
    left = store_usage(settings, visits, seconds)
    storage: dict[str, float] = {key: left[key] for key in ("marker_gib_months", "batch_gib_months") if key in left}
    return {"functions": per_function, "firestore_writes": left["firestore_writes"],
            "firestore_deletes": left["firestore_deletes"], "firestore_reads": counter_reads + left["store_reads"],
            "pubsub_messages": left["pubsub_messages"], **storage,
            "log_entries": log_entries(sum(used["requests"] for used in per_function.values()), left["store_lines"])}


def marker_gib_months(settings: Settings, visits: float) -> float:
    """The GiB-months the markers of `visits` visits are stored for, each kept marker_ttl_days."""
    return visits * marker_bytes() / GIB * settings.marker_ttl_days / DAYS_PER_MONTH


def hourly_at(settings: Settings, visits_per_s: float, prices: Mapping[str, Any], region: str = DEFAULT_REGION, *,
              get_counter_reads_per_s: float, get_counter_requests_per_visit: int = 1) -> dict[str, Any]:
    """An upper bound of the cost of one hour at a steady `visits_per_s`: every instance the
    settings allow billed all hour; each visit a request to each public function (get-counter
    get_counter_requests_per_visit: the page's re-reads while it stays open) and one push delivery
    (a pull store none: its instance billed instance-based); what store_usage says the visits leave
    behind (Firestore writes, TTL deletes and storage, two messages a visit, the store's lines);
    get-counter's Firestore reads as given, with serve-page's when it embeds the count (capacity.count_reads_per_s:
    their caches spare most), each an aggregation query billed one read per batch of up to 1,000 index entries
    (its page's shards);
    a request log entry per request in Cloud Logging."""
    per_function = {name: {"billable_instance_s": spec.max_instances * HOUR,
                           "requests": int(visits_per_s * HOUR
                                           * requests_per_visit(name, get_counter_requests_per_visit, settings.pulls)),
                           **({"instance_based": True} if settings.pulls and name == PUSH_FUNCTION else {})}
                    for name, spec in settings.functions.items()}
    counter_reads = int(get_counter_reads_per_s * billed_reads_per_query(settings) * HOUR)
    return estimate(_usage(settings, per_function, counter_reads, visits_per_s * HOUR, HOUR), settings, prices, region)


def requests_per_visit(function: str, get_counter_requests_per_visit: int = 1, pulls: bool = False) -> int:
    """Requests a visit makes to `function`: one each (store-inc-counter its push delivery; a pull store none),
    get-counter's as given."""
    if function == READER_FUNCTION:
        return get_counter_requests_per_visit
    return 0 if pulls and function == PUSH_FUNCTION else 1


MILLION = 1_000_000
# Where --cost-per-million prices a visit: the study's region (Cloud Run Tier 2) and a Tier 1 one.
PER_MILLION_REGIONS = ("southamerica-east1", "us-central1")


def per_million_visits(settings: Settings, capacity_rps: Mapping[str, float], counter_reads_per_visit: float,
                       prices: Mapping[str, Any], region: str = DEFAULT_REGION, *,
                       get_counter_requests_per_visit: int = 1, visits_per_s: float | None = None) -> dict[str, Any]:
    """What a million visits cost at list prices: each visit's requests (one to each public function, get-counter
    get_counter_requests_per_visit) and 1 push delivery, the instance time they take with every instance packed to
    its concurrency (an instance serves a function's capacity / max_instances requests a second at most: Cloud Run
    bills it while it serves, so this is a lower bound, reached at the bottleneck), get-counter's billed reads, and
    what store_usage says they leave behind (push: 2 writes and a TTL delete a visit, the marker's storage until
    then, 2 messages, a line per delivery), with the requests' log entries. A pull store takes no request: its one
    instance is billed instance-based for the million visits' time at visits_per_s (required then). No
    min_instances, no free tier."""
    per_function: dict[str, dict[str, Any]] = {}
    for name, spec in settings.functions.items():
        requests = MILLION * requests_per_visit(name, get_counter_requests_per_visit, settings.pulls)
        per_function[name] = {"requests": requests,
                              "billable_instance_s": requests * spec.max_instances / capacity_rps[name]}
    seconds = 0.0
    if settings.pulls:
        if not visits_per_s:
            raise VisitkitError("a pull store's million visits need their rate (visits_per_s): its instance runs "
                                "all the time they take")
        seconds = MILLION / visits_per_s
        per_function[PUSH_FUNCTION] = {"requests": 0, "billable_instance_s": seconds, "instance_based": True}
    counter_reads = round(MILLION * counter_reads_per_visit * billed_reads_per_query(settings))
    return estimate(_usage(settings, per_function, counter_reads, MILLION, seconds), settings, prices, region)


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

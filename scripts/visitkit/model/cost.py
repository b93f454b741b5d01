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
"""
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from visitkit.catalogue import FIRESTORE, PAGES, READER_FUNCTION
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


def log_entries(requests: float, deliveries: float) -> dict[str, float]:
    """{"bytes", "entries"} Cloud Logging ingests for `requests` requests to Cloud Run (one request log entry each,
    push deliveries included) of which `deliveries` reach store-inc-counter (one line more each)."""
    return {"bytes": requests * REQUEST_LOG_ENTRY_BYTES + deliveries * STORE_LINE_ENTRY_BYTES,
            "entries": requests + deliveries}


def string_bytes(text: str) -> int:
    """Firestore's string size: its UTF-8 bytes + 1."""
    return len(text.encode()) + 1


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
    name = string_bytes(FIRESTORE["markers"]) + string_bytes("0" * 64) + 16
    fields = (string_bytes("visit_type") + max(string_bytes(page) for page in PAGES)
              + string_bytes(FIRESTORE["marker_expiry_field"]) + 8)
    document = name + fields + 32
    name_index_entry = name + 0 + string_bytes("__name__") + name + 32
    return document + name_index_entry


def marker_gib_months(settings: Settings, visits: float) -> float:
    """The GiB-months the markers of `visits` visits are stored for, each kept marker_ttl_days."""
    return visits * marker_bytes() / GIB * settings.marker_ttl_days / DAYS_PER_MONTH


def hourly_at(settings: Settings, visits_per_s: float, prices: Mapping[str, Any], region: str = DEFAULT_REGION, *,
              get_counter_reads_per_s: float, get_counter_requests_per_visit: int = 1) -> dict[str, Any]:
    """An upper bound of the cost of one hour at a steady `visits_per_s`: every instance the
    settings allow billed all hour; each visit a request to each public function (get-counter
    get_counter_requests_per_visit: the page's re-reads while it stays open) and one push delivery;
    two document writes per visit (the shard and the dedup marker) and, 7 days later, one TTL delete,
    the marker stored until then; one published and one delivered message per visit; get-counter's
    Firestore reads as given (predict.counter_reads_per_s: its cache spares most), each an
    aggregation query billed one read per batch of up to 1,000 index entries (its page's shards);
    a request log entry per request and store-inc-counter's line per delivery in Cloud Logging."""
    visits = int(visits_per_s * HOUR)
    per_function = {name: {"billable_instance_s": spec.max_instances * HOUR,
                           "requests": int(visits_per_s * HOUR
                                           * requests_per_visit(name, get_counter_requests_per_visit))}
                    for name, spec in settings.functions.items()}
    usage = {"functions": per_function, "firestore_writes": int(2 * visits_per_s * HOUR),
             "firestore_deletes": visits,
             "firestore_reads": int(get_counter_reads_per_s * billed_reads_per_query(settings) * HOUR),
             "pubsub_messages": int(2 * visits_per_s * HOUR), "marker_gib_months": marker_gib_months(settings, visits),
             "log_entries": log_entries(sum(used["requests"] for used in per_function.values()), visits)}
    return estimate(usage, settings, prices, region)


def requests_per_visit(function: str, get_counter_requests_per_visit: int = 1) -> int:
    """Requests a visit makes to `function`: one each (store-inc-counter its push delivery), get-counter's as given."""
    return get_counter_requests_per_visit if function == READER_FUNCTION else 1


MILLION = 1_000_000
# Where --cost-per-million prices a visit: the study's region (Cloud Run Tier 2) and a Tier 1 one.
PER_MILLION_REGIONS = ("southamerica-east1", "us-central1")


def per_million_visits(settings: Settings, capacity_rps: Mapping[str, float], counter_reads_per_visit: float,
                       prices: Mapping[str, Any], region: str = DEFAULT_REGION, *,
                       get_counter_requests_per_visit: int = 1) -> dict[str, Any]:
    """What a million visits cost at list prices: each visit's requests (one to each public function, get-counter
    get_counter_requests_per_visit) and 1 push delivery, the instance time they take with every instance packed to
    its concurrency (an instance serves a function's capacity / max_instances requests a second at most: Cloud Run
    bills it while it serves, so this is a lower bound, reached at the bottleneck), 2 writes and a TTL delete, the
    marker's storage until then, get-counter's billed reads, 2 messages, and the requests' and deliveries' log
    entries. No min_instances, no free tier."""
    per_function: dict[str, dict[str, float]] = {}
    for name, spec in settings.functions.items():
        requests = MILLION * requests_per_visit(name, get_counter_requests_per_visit)
        per_function[name] = {"requests": requests,
                              "billable_instance_s": requests * spec.max_instances / capacity_rps[name]}
    usage = {"functions": per_function, "firestore_writes": 2 * MILLION, "firestore_deletes": MILLION,
             "firestore_reads": round(MILLION * counter_reads_per_visit * billed_reads_per_query(settings)),
             "pubsub_messages": 2 * MILLION, "marker_gib_months": marker_gib_months(settings, MILLION),
             "log_entries": log_entries(sum(used["requests"] for used in per_function.values()), MILLION)}
    return estimate(usage, settings, prices, region)


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
    minimum instance at the idle rate while it waits): [(function, instances, USD)], and the total."""
    run, _, _ = regional(prices, region)
    lines = [(name, spec.min_instances, spec.min_instances * HOUR * instance_rates(spec, run)[1])
             for name, spec in settings.functions.items() if spec.min_instances]
    return lines, sum(usd for _, _, usd in lines)

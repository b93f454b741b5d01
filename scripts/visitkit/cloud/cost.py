"""An estimated cost of a Google Cloud run from what the platform billed: instance time, requests,
Firestore reads/writes/deletes and Pub/Sub volume, at the list prices of the run's region in
prices.json (dated, with sources); what it leaves out (egress, Cloud Build, Logging) is named with
an order of magnitude. An estimate, and the report says so."""
import json
import math
from pathlib import Path

from visitkit.errors import VisitkitError
from visitkit.settings import MEMORY_BYTES, MEMORY

PRICES_FILE = Path(__file__).with_name("prices.json")
DEFAULT_REGION = "southamerica-east1"  # infra/variables.tf's default, the study's region
HOUR = 3600


def load_prices(path=PRICES_FILE):
    return json.loads(Path(path).read_text())


def memory_gib(memory):
    """'256M' -> GiB."""
    found = MEMORY.match(memory)
    return int(memory[:found.start(1)]) * MEMORY_BYTES[found[1]] / 2**30


def regional(prices, region):
    """(Cloud Run's prices, Firestore's prices, tier) in `region`; VisitkitError for a region the
    price list does not know (better no figure than one from another region's prices)."""
    run, firestore = prices["cloud_run"], prices["firestore"]
    tier = run["region_tiers"].get(region)
    if tier is None or region not in firestore["regions"]:
        known = sorted(set(run["region_tiers"]) & set(firestore["regions"]))
        raise VisitkitError(f"scripts/visitkit/cloud/prices.json has no prices for region {region}: add them from the "
                            f"sources it names (it knows {', '.join(known)})")
    return {**run["tiers"][tier], "per_million_requests": run["per_million_requests"]}, firestore["regions"][region], tier


def instance_rates(spec, run):
    """(USD per active instance-second, USD per idle instance-second) of one function's size."""
    vcpu, gib = float(spec.effective_cpu), memory_gib(spec.memory)
    return (vcpu * run["per_vcpu_second"] + gib * run["per_gib_second"],
            vcpu * run["idle_per_vcpu_second"] + gib * run["idle_per_gib_second"])


def estimate(usage, settings, prices, region=DEFAULT_REGION):
    """usage: {"functions": {name: {"billable_instance_s", "requests"}}, "firestore_reads", "firestore_writes",
    "firestore_deletes", "pubsub_messages"}; settings: the run's Settings (each function's CPU and memory).
    Returns {"lines": [(item, quantity text, USD)], "total", "as_of", "currency", "region", "tier", "left_out"}."""
    run, firestore, tier = regional(prices, region)
    pubsub = prices["pubsub"]
    lines = []
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
    messages = usage.get("pubsub_messages") or 0
    volume_tib = messages * pubsub["min_bytes_per_message"] / 2**40
    lines.append(("Pub/Sub throughput", f"{messages:,} messages published or delivered (>= 1 KB each)",
                  volume_tib * pubsub["per_tib"]))
    return {"lines": lines, "total": sum(usd for _, _, usd in lines), "as_of": prices["as_of"],
            "currency": prices["currency"], "region": region, "tier": tier,
            "left_out": [f"{item}: {text}" for item, text in prices["left_out"].items()]}


def hourly_at(settings, visits_per_s, prices, region=DEFAULT_REGION, *, get_counter_reads_per_s):
    """An upper bound of the cost of one hour at a steady `visits_per_s`: every instance the
    settings allow billed all hour; each visit 3 public requests (page, inc-counter, get-counter) and
    one push delivery; two document writes per visit (the shard and the dedup marker) and, 7 days
    later, one TTL delete; one published and one delivered message per visit; get-counter's
    Firestore reads as given (predict.counter_reads_per_s: its cache spares most), each an
    aggregation query billed one read per batch of up to 1,000 index entries (its page's shards)."""
    # every function gets one request per visit: the three public ones from the page, store-inc-counter
    # one push delivery
    per_function = {name: {"billable_instance_s": spec.max_instances * HOUR, "requests": int(visits_per_s * HOUR)}
                    for name, spec in settings.functions.items()}
    usage = {"functions": per_function, "firestore_writes": int(2 * visits_per_s * HOUR),
             "firestore_deletes": int(visits_per_s * HOUR), "firestore_reads": int(get_counter_reads_per_s * billed_reads_per_query(settings) * HOUR),
             "pubsub_messages": int(2 * visits_per_s * HOUR)}
    return estimate(usage, settings, prices, region)


MILLION = 1_000_000
# Where --cost-per-million prices a visit: the study's region (Cloud Run Tier 2) and a Tier 1 one.
PER_MILLION_REGIONS = ("southamerica-east1", "us-central1")


def per_million_visits(settings, capacity_rps, counter_reads_per_visit, prices, region=DEFAULT_REGION):
    """What a million visits cost at list prices: each visit's 3 public requests and 1 push delivery, the
    instance time they take with every instance packed to its concurrency (an instance serves a function's
    capacity / max_instances requests a second at most: Cloud Run bills it while it serves, so this is a lower
    bound, reached at the bottleneck), 2 writes and a TTL delete, get-counter's billed reads, 2 messages.
    No min_instances, no free tier."""
    per_function = {name: {"requests": MILLION, "billable_instance_s": MILLION * spec.max_instances / capacity_rps[name]}
                    for name, spec in settings.functions.items()}
    usage = {"functions": per_function, "firestore_writes": 2 * MILLION, "firestore_deletes": MILLION,
             "firestore_reads": round(MILLION * counter_reads_per_visit * billed_reads_per_query(settings)),
             "pubsub_messages": 2 * MILLION}
    return estimate(usage, settings, prices, region)


def by_service(estimate_):
    """An estimate's total split into Cloud Run, Firestore and Pub/Sub, as {service: USD}."""
    split = {}
    for item, _, usd in estimate_["lines"]:
        service = item.split(":")[0].split(" document")[0].split(" throughput")[0]
        split[service] = split.get(service, 0.0) + usd
    return split


def billed_reads_per_query(settings):
    """Firestore bills an aggregation query one document read per batch of up to 1,000 index entries it
    matches (at least one): get-counter's sum over a page's shards."""
    return max(1, math.ceil(settings.shards_per_page / 1000))


def idle_hourly(settings, prices, region=DEFAULT_REGION):
    """What the functions' min_instances cost an hour without a single request (Cloud Run bills a
    minimum instance at the idle rate while it waits): [(function, instances, USD)], and the total."""
    run, _, _ = regional(prices, region)
    lines = [(name, spec.min_instances, spec.min_instances * HOUR * instance_rates(spec, run)[1])
             for name, spec in settings.functions.items() if spec.min_instances]
    return lines, sum(usd for _, _, usd in lines)

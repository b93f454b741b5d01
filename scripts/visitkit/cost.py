"""An estimated cost of a Google Cloud run from what the platform billed: instance time, requests,
Firestore reads/writes/deletes and Pub/Sub volume, at the list prices in prices.json (dated, with
sources). An estimate, and the report says so."""
import json
from pathlib import Path

from visitkit.settings import MEMORY_BYTES, MEMORY

PRICES_FILE = Path(__file__).with_name("prices.json")


def load_prices(path=PRICES_FILE):
    return json.loads(Path(path).read_text())


def memory_gib(memory):
    """'256M' -> GiB."""
    found = MEMORY.match(memory)
    return int(memory[:found.start(1)]) * MEMORY_BYTES[found[1]] / 2**30


def estimate(usage, settings, prices):
    """usage: {"functions": {name: {"billable_instance_s", "requests"}}, "firestore_reads", "firestore_writes",
    "firestore_deletes", "pubsub_messages"}; settings: the run's Settings (each function's CPU and memory).
    Returns {"lines": [(item, quantity text, USD)], "total": USD, "as_of", "currency"}."""
    run, firestore, pubsub = prices["cloud_run"], prices["firestore"], prices["pubsub"]
    lines = []
    for name, used in usage["functions"].items():
        spec = settings.functions[name]
        seconds = used.get("billable_instance_s") or 0.0
        vcpu, gib = float(spec.effective_cpu), memory_gib(spec.memory)
        compute = seconds * (vcpu * run["per_vcpu_second"] + gib * run["per_gib_second"])
        requests = (used.get("requests") or 0) * run["per_million_requests"] / 1e6
        lines.append((f"Cloud Run: {name}", f"{seconds:,.0f} instance-s x {vcpu:g} vCPU, {gib:g} GiB; "
                                            f"{used.get('requests') or 0:,} requests", compute + requests))
    for kind in ("reads", "writes", "deletes"):
        count = usage.get(f"firestore_{kind}") or 0
        lines.append((f"Firestore document {kind}", f"{count:,}", count * firestore[f"per_100k_{kind}"] / 1e5))
    messages = usage.get("pubsub_messages") or 0
    volume_tib = messages * pubsub["min_bytes_per_message"] / 2**40
    lines.append(("Pub/Sub throughput", f"{messages:,} messages published or delivered (>= 1 KB each)",
                  volume_tib * pubsub["per_tib"]))
    return {"lines": lines, "total": sum(usd for _, _, usd in lines), "as_of": prices["as_of"],
            "currency": prices["currency"]}


def hourly_at(settings, visits_per_s, prices, get_counter_reads_per_s=0.0):
    """An upper bound of the cost of one hour at a steady `visits_per_s`: every instance the
    settings allow billed all hour; each visit 3 public requests (page, inc-counter, get-counter) and
    one push delivery; two document writes per visit (the shard and the dedup marker) and, 7 days
    later, one TTL delete; one published and one delivered message per visit."""
    hour = 3600
    # every function gets one request per visit: the three public ones from the page, store-inc-counter
    # one push delivery
    per_function = {name: {"billable_instance_s": spec.max_instances * hour, "requests": int(visits_per_s * hour)}
                    for name, spec in settings.functions.items()}
    usage = {"functions": per_function, "firestore_writes": int(2 * visits_per_s * hour),
             "firestore_deletes": int(visits_per_s * hour), "firestore_reads": int(get_counter_reads_per_s * hour),
             "pubsub_messages": int(2 * visits_per_s * hour)}
    return estimate(usage, settings, prices)

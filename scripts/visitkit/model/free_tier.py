"""The free tiers, as Google states each one (prices.json's free_tier, quoted and dated there), taken off an
estimate as lines of their own, each at most what its service was billed:
- Cloud Run: its monthly free vCPU-seconds, GiB-seconds and requests, per billing account, worth their Tier 1
  prices wherever they are used (a spending credit); the instance-based free tier against a pull store's
  instance-based charges, the request-based one against the rest (how the two combine is not stated: ASSUMED);
- Firestore: its daily free reads and writes and its free stored GiB, for one database per project; TTL deletes
  are not covered by the free deletes, and this design deletes only by TTL;
- Pub/Sub: its free GiB a month;
- Cloud Logging: its free GiB a month per project;
- network egress: its free GiB a month, within North America only.
A free tier is a month's: a period of `months` months gets that share of it. One project, one billing account,
nothing else of the user's using them: a site that shares them with other work gets less.
"""
from collections.abc import Mapping, Sequence
from typing import Any

GIB = 2**30


def cloud_run_credit(prices: Mapping[str, Any], months: float, instance_based: bool = False) -> float:
    """USD a Cloud Run free tier is worth over `months`: its free units at Tier 1's prices (request-based billing's,
    or instance-based billing's)."""
    run, free = prices["cloud_run"], prices["free_tier"]["cloud_run"]
    tier1 = run["tiers"]["1"]
    if instance_based:
        units = free["instance_based"]
        return months * (units["vcpu_seconds"] * tier1["instance_based_per_vcpu_second"]
                         + units["gib_seconds"] * tier1["instance_based_per_gib_second"])
    return months * (free["vcpu_seconds"] * tier1["per_vcpu_second"] + free["gib_seconds"] * tier1["per_gib_second"]
                     + free["requests"] * run["per_million_requests"] / 1e6)


def free_lines(lines: Sequence[tuple[str, str, float]], usage: Mapping[str, Any], prices: Mapping[str, Any],
               region: str, months: float, firestore: Mapping[str, float],
               egress_per_gib: float) -> list[tuple[str, str, float]]:
    """The free tiers of `months` months against an estimate's `lines` for `usage` in `region` (whose Firestore
    prices and egress price per GiB are given): negative lines, none of them larger than what it frees."""
    free = prices["free_tier"]
    days = months * free["days_per_month"]
    found: list[tuple[str, str, float]] = []

    always_on = {f"Cloud Run: {name}" for name, used in usage["functions"].items() if used.get("instance_based")}
    for instance_based, kind in ((False, "request-based"), (True, "instance-based")):
        charged = sum(usd for item, _, usd in lines if item.startswith("Cloud Run:")
                      and (item in always_on) == instance_based)
        credit = cloud_run_credit(prices, months, instance_based)
        found.append((f"Cloud Run free tier, {kind}", f"{credit:,.2f} USD of free units at Tier 1 prices",
                      -min(credit, charged)))

    store = free["firestore"]
    for kind in ("reads", "writes"):
        count = usage.get(f"firestore_{kind}") or 0
        covered = min(count, store[f"{kind}_per_day"] * days)
        found.append((f"Firestore free {kind}", f"{covered:,.0f} of {store[f'{kind}_per_day']:,} a day",
                      -covered * firestore[f"per_100k_{kind}"] / 1e5))
    stored = sum(usage.get(key) or 0 for key in ("marker_gib_months", "batch_gib_months"))
    covered_gib = min(stored, store["stored_gib"] * months)
    found.append(("Firestore free storage", f"{covered_gib:,.4f} GiB-months of {store['stored_gib']} GiB",
                  -covered_gib * firestore["per_gib_month"]))

    if "pubsub" in usage:
        billed = usage["pubsub"]["billed_bytes"] / GIB
        allowance = prices["pubsub"]["free_gib_per_month"]
        covered_gib = min(billed, allowance * months)
        found.append(("Pub/Sub free tier", f"{covered_gib:,.2f} GiB of {allowance} a month",
                      -covered_gib / 1024 * prices["pubsub"]["per_tib"]))

    logged = usage.get("log_entries")
    if logged is not None:
        allotment = prices["cloud_logging"]["free_gib_per_project_month"]
        covered_gib = min(logged["bytes"] / GIB, allotment * months)
        found.append(("Cloud Logging free allotment", f"{covered_gib:,.2f} GiB of {allotment} a month",
                      -covered_gib * prices["cloud_logging"]["per_gib"]))

    egress = free["network_egress"]
    if "egress_bytes" in usage and region in egress["regions"]:
        covered_gib = min(usage["egress_bytes"] / GIB, egress["gib_per_month"] * months)
        found.append(("Network egress free tier", f"{covered_gib:,.2f} GiB of {egress['gib_per_month']} a month "
                                                  "within North America", -covered_gib * egress_per_gib))
    return [line for line in found if line[2]]

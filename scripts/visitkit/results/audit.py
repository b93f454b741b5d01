"""The audit of a run's visits: what each client was told (the ledger) against what the store holds.

exact   reads the store's marker of every visit id in the ledger (batched document reads), so the
        fate of every visit is known: acknowledged and stored, acknowledged and not stored (lost),
        not acknowledged and stored (a 5xx or no answer whose publish did land), neither. A page's
        shards grown beyond its stored ids are "stored beyond the ids" (duplicated: a visit counted
        twice, or one from outside the run's ledger, such as a warm-up visit with a 5xx that landed late).
totals  compares each page's shard growth with the ledger's counts: a 5xx or unanswered visit is
        ambiguous, and only a growth beyond every acknowledged and ambiguous visit is duplicated.
        For a target whose store the kit cannot read, a ledger without ids or with visits it only
        counted (beyond Locust's --ledger-ids), or a Google Cloud run above EXACT_MAX_READS visits
        (--audit exact reads them anyway).

The markers are read after convergence, and again for the ids still without one, until every
acknowledged visit has its marker or `wait_s` passes (convergence can end while acknowledged visits
still wait in a retry backoff, when visits with a 5xx that did land make up the totals), and until
the stored totals read before and after a round agree, so the markers and the totals are one moment.

audit.json (format 1): {"format": 1, "method": "exact"|"totals", "why": words, "reads": N,
"read_cost_usd": x or null, "not_stored": [ids of the ledger without a marker],
"totals": {page: stored} read with the markers (exact only)}.

A visit posted several times (--retry-visits) has one id and one marker: it counts once among the
stored, and its store counting it twice would show as duplicated. The outcomes are the ledger's
(locust/ledger.py, one definition); a ledger of an older format lacks the newer ones (`upgraded`).
"""
import time
from collections.abc import Callable, Mapping
from typing import Any

from visitkit.catalogue import PAGES
from visitkit.model import cost
from visitkit.suite import locust_module

FORMAT = 1
METHODS = ("auto", "exact", "totals")
# Above this many visits a Google Cloud run audits by totals unless asked: each id is one billed
# document read (about 0.30 USD per million at Tier 1 prices), and reading a million takes minutes.
EXACT_MAX_READS = 1_000_000


OUTCOMES = locust_module("ledger").OUTCOMES
GAVE_UP_SINCE = 4  # the ledger format that added gave_up
NEVER_PUBLISHED = ("refused", "gave_up")  # every answer a 4xx: nothing was published
STEADY_WAIT_S = 60  # beyond the wait, how long the totals may keep moving before the audit takes them as they are


def upgraded(ledger: dict[str, Any]) -> dict[str, Any]:
    """A ledger.json as the reports read it: one written before format 4 (or none at all) has no visit
    that gave up (its visitor posted a visit again only after a 5xx or no answer, never after a 429)."""
    if ledger.get("format", 1) >= GAVE_UP_SINCE:
        return ledger
    return {**ledger, "gave_up": {}}


def visit_ids(ledger: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """{visit id: (page, outcome)} of a ledger.json; empty for a ledger written before visit ids."""
    return {visit_id: (page, outcome) for page, by_outcome in ledger.get("visits", {}).items()
            for outcome, ids in by_outcome.items() for visit_id in ids}


def choose(requested: str, ids: int, can_read: bool, billed: bool, untracked: int = 0) -> tuple[str, str]:
    """(method, why) for `ids` visits: exact where the store's markers can be read and, on a billed
    store, the reads are few enough or were asked for; never when the ledger counted visits it kept
    no id of (`untracked`)."""
    if requested == "totals":
        return "totals", "asked for (--audit totals)"
    if not ids:
        return "totals", "the ledger has no visit ids (written before they existed)"
    if untracked:
        return "totals", (f"the ledger kept the ids of {ids:,} visits and only counted {untracked:,} more "
                          "(Locust's --ledger-ids)")
    if not can_read:
        return "totals", "the kit cannot read this target's store (a deployment known only by its URL)"
    if billed and requested == "auto" and ids > EXACT_MAX_READS:
        return "totals", (f"{ids:,} visits is above {EXACT_MAX_READS:,} billed reads (--audit exact reads "
                          "them anyway)")
    return "exact", "asked for (--audit exact)" if requested == "exact" else "every visit id read"


def read_cost(reads: int, region: str) -> float:
    """USD of `reads` Firestore document reads at the region's list price (each requested document
    taken as one billed read, found or not: an estimate that errs high)."""
    _, firestore, _ = cost.regional(cost.load_prices(), region)
    return reads * firestore["per_100k_reads"] / 100_000


def run(ledger: Mapping[str, Any], requested: str, stored_visits: Callable[[set[str]], set[str]] | None = None,
        region: str | None = None, totals: Callable[[], dict[str, int]] | None = None, wait_s: float = 0.0,
        interval: float = 2.0, now: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep) -> dict[str, Any]:
    """The audit.json of a run: `stored_visits(ids)` returns the ids whose marker exists (None: the
    target's store cannot be read); `region` is set for a billed store (Google Cloud); `totals()`
    reads the stored totals per page."""
    ids = visit_ids(ledger)
    untracked = sum(ledger.get("untracked", {}).values())
    method, why = choose(requested, len(ids), stored_visits is not None, region is not None, untracked)
    record: dict[str, Any] = {"format": FORMAT, "method": method, "why": why, "reads": 0, "read_cost_usd": None,
                              "not_stored": []}
    if method != "exact":
        return record
    assert stored_visits is not None  # choose: exact only where the store's markers can be read
    acknowledged = {visit_id for visit_id, (_, outcome) in ids.items() if outcome == "acknowledged"}
    missing, reads, deadline = set(ids), 0, now() + wait_s
    while True:
        first, asked = totals() if totals else None, set(missing)
        missing -= stored_visits(asked)
        reads += len(asked)
        last = totals() if totals else None
        if first == last and (not missing & acknowledged or now() >= deadline):
            break
        if now() >= deadline + STEADY_WAIT_S:  # the totals never held still: keep the last round
            break
        sleep(interval)
    record.update(reads=reads, not_stored=sorted(missing), totals=last,
                  read_cost_usd=read_cost(reads, region) if region else None)
    return record


def exact_accounting(ledger: Mapping[str, Any], audit: Mapping[str, Any], before: Mapping[str, int],
                     after: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """Per page and in total, each visit's fate from its marker (see the module's docstring)."""
    not_stored = set(audit["not_stored"])
    rows = {page: {key: 0 for key in ("sent", *OUTCOMES, "retried", "stored", "acknowledged_stored", "lost",
                                      "stored_unacknowledged", "refused_stored", "neither", "duplicated")}
            for page in PAGES}
    for visit_id, (page, outcome) in visit_ids(ledger).items():
        row = rows[page]
        row["sent"] += 1
        row[outcome] += 1
        stored = visit_id not in not_stored
        if outcome == "acknowledged":
            row["acknowledged_stored" if stored else "lost"] += 1
        elif stored:
            row["stored_unacknowledged"] += 1
            row["refused_stored"] += outcome in NEVER_PUBLISHED  # a 4xx must publish nothing
        else:
            row["neither"] += 1
    for page, row in rows.items():
        row["retried"] = ledger.get("retried", {}).get(page, 0)
        row["stored"] = after.get(page, 0) - before.get(page, 0)
        row["rejected"] = row["refused"] + row["gave_up"] + row["failed"]
        row["duplicated"] = max(0, row["stored"] - row["acknowledged_stored"] - row["stored_unacknowledged"])
    # Summed per page: a page that lost visits and one that counted some twice must not cancel out.
    rows["total"] = {key: sum(rows[page][key] for page in PAGES) for key in rows[PAGES[0]]}
    return rows

"""The audit of a run's visits: what each client was told (the ledger) against what the store holds.

exact   reads the store's marker of every visit id in the ledger (batched document reads), so the
        fate of every visit is known: acknowledged and stored, acknowledged and not stored (lost),
        not acknowledged and stored (a 5xx or no answer whose publish did land), neither. A page's
        shards grown beyond its stored ids are "stored beyond the ids" (duplicated: a visit counted
        twice, or one from outside the run's ledger, such as a warm-up visit with a 5xx that landed late).
totals  compares each page's shard growth with the ledger's counts: a 5xx or unanswered visit is
        ambiguous, and only a growth beyond every acknowledged and ambiguous visit is duplicated.
        For a target whose store the kit cannot read, a ledger without ids or with sampled visits it
        only counted (beyond Locust's --ledger-ids), or a Google Cloud run above EXACT_MAX_READS
        visits (--audit exact reads them anyway).
sample  for a ledger that kept a uniform sample of the ids (locust/ledger.py: the run planned more
        visits than --ledger-ids): the sample's markers are read as exact reads them all, and the
        visits' accounting goes by the totals. `sample_figures` gives the sample's fate in each part
        of the load (a tenth of it: for a ramp, a load level) and the loss rate it rules out. The
        reads are at most --ledger-ids, so a Google Cloud run reads them whatever its size.

The markers are read after convergence, and again for the ids still without one, until every
acknowledged visit has its marker or `wait_s` passes (convergence can end while acknowledged visits
still wait in a retry backoff, when visits with a 5xx that did land make up the totals), and until
the stored totals read before and after a round agree, so the markers and the totals are one moment.
When they never agree (STEADY_WAIT_S past the wait), the audit keeps its last round and records that
the totals were not steady.

A store that had not settled (`store_settled`: the run's counters did not converge, or the audit's totals
never held still) cannot tell a lost visit from one still on its way, nor a visit counted twice from one
stored after its marker was read: `exact_accounting` then calls them "not stored yet" and "stored while
the store still moved", and leaves lost and duplicated unknown (None).

A pull store (store_mode "pull") keeps no marker per visit: it records each batch's ids in one document
of `visit_batches` (functions/store_batch.py). Its audit reads that collection whole each round
(`catalogue.counted_in_batches`, few documents) instead of one marker per id; an id found in two batch documents
was counted twice, and is listed in "counted_twice" (`exact_accounting` counts it as duplicated).

audit.json (format 1): {"format": 1, "method": "exact"|"sample"|"totals", "why": words, "reads": N,
"read_cost_usd": x or null, "not_stored": [ids of the ledger without a marker],
"totals": {page: stored} read with the markers (exact and sample only),
"counted_twice": {id: times counted} (a pull store's audit only),
"steady": false (only when the totals never held still around a round of markers; absent otherwise, and in
every audit.json written before it was recorded)}.

A visit posted several times (--retry-visits) has one id and one marker: it counts once among the
stored, and its store counting it twice would show as duplicated. The outcomes are the ledger's
(locust/ledger.py, one definition); a ledger of an older format lacks the newer ones (`upgraded`).
"""
import math
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from visitkit.catalogue import PAGES
from visitkit.model import cost
from visitkit.results.records import SampledAudit, SamplePart
from visitkit.suite import locust_module

FORMAT = 1
METHODS = ("auto", "exact", "totals")
# Above this many visits a Google Cloud run audits by totals unless asked: each id is one billed
# document read (about 0.30 USD per million at Tier 1 prices), and reading a million takes minutes.
EXACT_MAX_READS = 1_000_000


OUTCOMES = locust_module("ledger").OUTCOMES
GAVE_UP_SINCE = 4  # the ledger format that added gave_up
PARTS = 10  # the sample's audit across the load: in tenths of it
CONFIDENCE = 0.95  # of the loss rate a sample rules out (one-sided)
NEVER_PUBLISHED = ("refused", "gave_up")  # every answer a 4xx: nothing was published
STEADY_WAIT_S = 60  # beyond the wait, how long the totals may keep moving before the audit takes them as they are


def upgraded(ledger: dict[str, Any]) -> dict[str, Any]:
    """A ledger.json as the reports read it: one written before format 4 (or none at all) has no visit
    that gave up (its visitor posted a visit again only after a 5xx or no answer, never after a 429)."""
    if ledger.get("format", 1) >= GAVE_UP_SINCE:
        return ledger
    return {**ledger, "gave_up": {}}


def one_in(fraction: float) -> str:
    """A sample's fraction in words: "1 in 12.5"."""
    return f"1 in {1 / fraction:,.1f}".removesuffix(".0")


def sample_fraction(ledger: Mapping[str, Any]) -> float:
    """The share of the visits the ledger kept by id: 1 (every one, up to its limit) for one without a
    sample, as every ledger before format 5 (which added it, and each id's time) is."""
    return float((ledger.get("sample") or {}).get("fraction", 1.0))


def visit_ids(ledger: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """{visit id: (page, outcome)} of a ledger.json; empty for a ledger written before visit ids."""
    return {visit_id: (page, outcome) for page, by_outcome in ledger.get("visits", {}).items()
            for outcome, ids in by_outcome.items() for visit_id in ids}


def choose(requested: str, ids: int, can_read: bool, billed: bool, untracked: int = 0,
           fraction: float = 1.0) -> tuple[str, str]:
    """(method, why) for `ids` visits: exact where the store's markers can be read and, on a billed
    store, the reads are few enough or were asked for; sample for a ledger that kept a sample
    (`fraction` < 1) of the ids; never when the ledger counted visits it should have kept by id
    (`untracked`)."""
    if requested == "totals":
        return "totals", "asked for (--audit totals)"
    if not ids:
        return "totals", "the ledger has no visit ids (written before they existed)"
    if untracked:
        return "totals", (f"the ledger kept the ids of {ids:,} visits and only counted {untracked:,} more "
                          "(Locust's --ledger-ids)")
    if not can_read:
        return "totals", "the kit cannot read this target's store (a deployment known only by its URL)"
    if fraction < 1:
        return "sample", (f"the ledger kept a uniform sample of the visit ids, {one_in(fraction)} (Locust's "
                          f"--ledger-ids): the store's marker of each of its {ids:,} ids read")
    if billed and requested == "auto" and ids > EXACT_MAX_READS:
        return "totals", (f"{ids:,} visits is above {EXACT_MAX_READS:,} billed reads (--audit exact reads "
                          "them anyway)")
    return "exact", "asked for (--audit exact)" if requested == "exact" else "every visit id read"


def read_cost(reads: int, region: str) -> float:
    """USD of `reads` Firestore document reads at the region's list price (each requested document
    taken as one billed read, found or not: an estimate that errs high)."""
    _, firestore, _ = cost.regional(cost.load_prices(), region)
    return reads * firestore["per_100k_reads"] / 100_000


def run(ledger: Mapping[str, Any], requested: str,
        stored_visits: Callable[[set[str]], Collection[str]] | None = None,
        region: str | None = None, totals: Callable[[], dict[str, int]] | None = None, wait_s: float = 0.0,
        interval: float = 2.0, now: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep) -> dict[str, Any]:
    """The audit.json of a run: `stored_visits(ids)` returns the ids whose marker exists, or {id: times
    counted} for a pull store (None: the target's store cannot be read); `region` is set for a billed
    store (Google Cloud); `totals()` reads the stored totals per page."""
    ids = visit_ids(ledger)
    untracked = sum(ledger.get("untracked", {}).values())
    method, why = choose(requested, len(ids), stored_visits is not None, region is not None, untracked,
                         sample_fraction(ledger))
    record: dict[str, Any] = {"format": FORMAT, "method": method, "why": why, "reads": 0, "read_cost_usd": None,
                              "not_stored": []}
    if method == "totals":
        return record
    assert stored_visits is not None  # choose: markers are read only where they can be
    acknowledged = {visit_id for visit_id, (_, outcome) in ids.items() if outcome == "acknowledged"}
    missing, reads, deadline = set(ids), 0, now() + wait_s
    counted_twice: dict[str, int] | None = None  # a pull store's: its ids counted in more than one batch
    steady = True
    while True:
        first, asked = totals() if totals else None, set(missing)
        found = stored_visits(asked)
        if isinstance(found, Mapping):
            counted_twice = {**(counted_twice or {}), **{i: n for i, n in found.items() if n > 1}}
        missing -= set(found)
        reads += len(asked)
        last = totals() if totals else None
        if first == last and (not missing & acknowledged or now() >= deadline):
            break
        if now() >= deadline + STEADY_WAIT_S:  # the totals never held still: keep the last round
            steady = False
            break
        sleep(interval)
    record.update(reads=reads, not_stored=sorted(missing), totals=last,
                  read_cost_usd=read_cost(reads, region) if region else None)
    if counted_twice is not None:
        record["counted_twice"] = dict(sorted(counted_twice.items()))
    if not steady:
        record["steady"] = False
    return record


def store_settled(record: Mapping[str, Any] | None, converged: bool) -> bool:
    """Whether the store had stopped moving when the audit read it: the run's counters converged, and the
    audit's totals held still around the markers it kept (an audit.json without `steady`: they did)."""
    return converged and (record or {}).get("steady", True) is not False


def exact_accounting(ledger: Mapping[str, Any], audit: Mapping[str, Any], before: Mapping[str, int],
                     after: Mapping[str, int], settled: bool = True) -> dict[str, dict[str, Any]]:
    """Per page and in total, each visit's fate from its marker (see the module's docstring). Where the store
    had not `settled`, what it cannot know moves: lost to not_stored_yet, the shards' growth beyond the
    markers to stored_while_moving, and lost and duplicated are None (but for ids counted in two batch
    documents, which were counted twice whatever the store did after)."""
    not_stored, counted_twice = set(audit["not_stored"]), audit.get("counted_twice") or {}
    rows: dict[str, dict[str, Any]] = {
        page: {key: 0 for key in ("sent", *OUTCOMES, "retried", "stored", "acknowledged_stored", "lost",
                                  "stored_unacknowledged", "refused_stored", "neither", "duplicated", "counted_again")}
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
        row["counted_again"] += counted_twice.get(visit_id, 1) - 1
    for page, row in rows.items():
        row["retried"] = ledger.get("retried", {}).get(page, 0)
        row["stored"] = after.get(page, 0) - before.get(page, 0)
        row["rejected"] = row["refused"] + row["gave_up"] + row["failed"]
        beyond = max(0, row["stored"] - row["acknowledged_stored"] - row["stored_unacknowledged"])
        if settled:
            # Beyond the ids the shards hold, or an id in two batch documents (a pull store): whichever is more,
            # since a visit counted twice shows in both.
            row["duplicated"] = max(beyond, row.pop("counted_again"))
        else:
            # The totals were read apart from the markers: visits stored in between are beyond them.
            row["stored_while_moving"], row["duplicated"] = beyond, row.pop("counted_again")
    # Summed per page: a page that lost visits and one that counted some twice must not cancel out.
    rows["total"] = {key: sum(rows[page][key] for page in PAGES) for key in rows[PAGES[0]]}
    if not settled:
        for row in rows.values():
            # Acknowledged without a marker: still queued, or lost; which, the store had not settled to say.
            row["not_stored_yet"], row["lost"] = row["lost"], None
            row["duplicated"] = row["duplicated"] or None  # with no id counted twice, not known
    return rows


def sent_times(ledger: Mapping[str, Any]) -> dict[str, int]:
    """{visit id: when it was first posted (unix s)} of a ledger.json of format 5 (empty before)."""
    return {visit_id: sent for page, by_outcome in ledger.get("visits", {}).items()
            for outcome, ids in by_outcome.items()
            for visit_id, sent in zip(ids, (ledger.get("sent_at") or {}).get(page, {}).get(outcome, ()))}


def loss_rate_bound(acknowledged: int, lost: int, confidence: float = CONFIDENCE) -> float | None:
    """The loss rate a sample of `acknowledged` visits with none lost rules out (one-sided): a higher
    rate would leave all of them stored with a chance below 1 - confidence, 1 - (1 - c)^(1/n) (about
    3/n at 95 %). None when some were lost (then the sample's rate is the estimate) or none sampled."""
    if lost or not acknowledged:
        return None
    return 1 - (1 - confidence) ** (1 / acknowledged)


def sample_figures(ledger: Mapping[str, Any], record: Mapping[str, Any], load_start: float | None,
                   load_end: float | None, parts: int = PARTS) -> SampledAudit:
    """The sampled visits' fate over the whole run and in each of `parts` equal parts of the load
    (load_start..load_end, unix s; without them, the sample's own first and last times): per part its
    visits/s (its sampled visits over the fraction), the sampled and acknowledged visits, the lost
    (acknowledged, no marker) and the stored ones not acknowledged. A visit posted outside the load
    (the last users finishing) counts in the nearest part."""
    fraction, not_stored = sample_fraction(ledger), set(record["not_stored"])
    ids, times = visit_ids(ledger), sent_times(ledger)
    start = load_start if load_start is not None else min(times.values(), default=0)
    end = load_end if load_end is not None else max(times.values(), default=0) + 1
    width = max(end - start, 1) / parts
    rows: list[SamplePart] = [{"start_s": round(k * width, 1), "end_s": round((k + 1) * width, 1),
                               "visits_per_s": 0.0, "sampled": 0, "acknowledged": 0, "lost": 0,
                               "stored_unacknowledged": 0} for k in range(parts)]
    for visit_id, (_page, outcome) in ids.items():
        row = rows[min(parts - 1, max(0, math.floor((times.get(visit_id, start) - start) / width)))]
        row["sampled"] += 1
        stored = visit_id not in not_stored
        if outcome == "acknowledged":
            row["acknowledged"] += 1
            row["lost"] += not stored
        else:
            row["stored_unacknowledged"] += stored
    for row in rows:
        row["visits_per_s"] = round(row["sampled"] / fraction / width, 1)
    acknowledged, lost = sum(row["acknowledged"] for row in rows), sum(row["lost"] for row in rows)
    return {"fraction": fraction, "planned_visits": (ledger.get("sample") or {}).get("planned_visits"),
            "sampled": len(ids), "acknowledged": acknowledged, "lost": lost,
            "stored_unacknowledged": sum(row["stored_unacknowledged"] for row in rows),
            "loss_rate_bound": loss_rate_bound(acknowledged, lost), "confidence": CONFIDENCE, "parts": rows}

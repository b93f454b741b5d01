"""The audit of every visit: which method, and each visit's fate from the store's markers (pure
logic: the markers are a set of the ids a fake store holds)."""
import json

import pytest
from fakes import FakeClock as Clock

from visitkit import catalogue
from visitkit.results import audit
from visitkit.results.summary import audit_figures


def ledger_of(**by_outcome):
    """A format-2 ledger of jobs visits: outcome -> ids."""
    visits = {"jobs": {outcome: list(ids) for outcome, ids in by_outcome.items()}}
    counts = {outcome: {"jobs": len(ids)} for outcome, ids in by_outcome.items()}
    return {"format": 2, "sent": {"jobs": sum(len(ids) for ids in by_outcome.values())}, **counts,
            "retried": {"jobs": 1}, "visits": visits}


LEDGER = ledger_of(acknowledged=["a1", "a2", "a3"], refused=["r1"], failed=["f1", "f2"], unanswered=["u1"])


@pytest.mark.parametrize("requested, ids, can_read, billed, method", [
    ("auto", 10, True, False, "exact"),
    ("auto", 10, False, False, "totals"),  # a deployment known by its URL
    ("auto", 0, True, False, "totals"),  # a ledger from before visit ids
    ("auto", audit.EXACT_MAX_READS + 1, True, False, "exact"),  # the emulator bills nothing
    ("auto", audit.EXACT_MAX_READS + 1, True, True, "totals"),
    ("exact", audit.EXACT_MAX_READS + 1, True, True, "exact"),
    ("totals", 10, True, False, "totals"),
])
def test_the_method_is_exact_where_the_markers_can_be_read_at_a_small_cost(requested, ids, can_read, billed, method):
    assert audit.choose(requested, ids, can_read, billed)[0] == method


def test_every_visits_fate_comes_from_its_marker():
    stored = {"a1", "a2", "f1", "u1"}  # a3 lost; f1 and u1 landed although unanswered; r1, f2 never stored
    asked = []
    record = audit.run(LEDGER, "auto", lambda ids: asked.append(set(ids)) or stored & set(ids))
    assert asked == [{"a1", "a2", "a3", "r1", "f1", "f2", "u1"}]
    assert record["method"] == "exact" and record["reads"] == 7 and record["not_stored"] == ["a3", "f2", "r1"]
    # The shards grew by 5: the 4 stored visits and one more (a visit counted twice).
    rows = audit.exact_accounting(LEDGER, record, {"jobs": 100}, {"jobs": 105})
    jobs = rows["jobs"]
    assert (jobs["acknowledged_stored"], jobs["lost"], jobs["stored_unacknowledged"], jobs["neither"],
            jobs["duplicated"]) == (2, 1, 2, 2, 1)
    assert (jobs["sent"], jobs["acknowledged"], jobs["refused"], jobs["failed"], jobs["unanswered"]) == (7, 3, 1, 2, 1)
    assert jobs["refused_stored"] == 0 and rows["total"]["lost"] == 1
    assert audit_figures(LEDGER, record)["lost_ids"] == ["a3"]


def test_a_refused_visit_that_was_stored_is_called_out():
    record = audit.run(LEDGER, "exact", lambda ids: set(ids))
    assert audit.exact_accounting(LEDGER, record, {}, {"jobs": 7})["jobs"]["refused_stored"] == 1


def test_reads_on_google_cloud_are_priced_at_the_regions_list_price():
    record = audit.run(LEDGER, "auto", lambda ids: set(ids), region="us-west1")
    assert record["read_cost_usd"] == pytest.approx(7 * 0.03 / 100_000)


def test_without_a_readable_store_the_audit_says_why_and_reads_nothing():
    record = audit.run(LEDGER, "auto", None)
    assert record["method"] == "totals" and record["reads"] == 0 and "URL" in record["why"]


class MarkerStore:
    """The calls catalogue.stored_visits makes of a Firestore client: collection, document, get_all."""

    def __init__(self, markers):
        self.markers, self.batches = markers, []

    def collection(self, name):
        assert name == "processed_messages"
        return self

    def document(self, name):
        return name

    def get_all(self, refs, field_paths, timeout):
        self.batches.append(len(refs))
        return [type("Snapshot", (), {"id": ref, "exists": ref in self.markers})() for ref in refs]


def test_markers_are_read_in_batches_by_their_hashed_names():
    from visitkit.catalogue import stored_visits, visits

    ids = [f"{n:08x}-0000-4000-8000-000000000000" for n in range(1201)]
    store = MarkerStore({visits.marker_id(visit_id) for visit_id in ids[::2]})
    assert stored_visits(store, ids) == set(ids[::2])
    assert store.batches == [500, 500, 201]  # one billed read per id, a few requests in all


def test_the_audit_waits_for_acknowledged_visits_still_in_a_retry_backoff():
    """Convergence ended on totals that a landed 5xx visit made up, while a3 waited in a backoff: the
    audit re-reads only the ids without a marker until a3 has one, and takes its totals from then."""
    clock, rounds = Clock(), []
    stored_by_round = [{"a1", "a2", "f1"}, set(), {"a3"}, set()]

    def stored_visits(ids):
        rounds.append(set(ids))
        return stored_by_round[len(rounds) - 1] & set(ids)

    # per round, the totals read before and after the markers: a3's shard moved during the third
    totals = iter([{"jobs": 3}, {"jobs": 3}, {"jobs": 3}, {"jobs": 3}, {"jobs": 3}, {"jobs": 4}, {"jobs": 4},
                   {"jobs": 4}])
    record = audit.run(LEDGER, "auto", stored_visits, totals=lambda: next(totals), wait_s=60, interval=2,
                       now=clock.now, sleep=clock.sleep)
    assert rounds[0] == set(audit.visit_ids(LEDGER)) and rounds[1] == {"a3", "r1", "f2", "u1"}
    assert record["not_stored"] == ["f2", "r1", "u1"] and record["reads"] == 7 + 4 + 4 + 3
    assert record["totals"] == {"jobs": 4}  # read with the round that found a3, once they held still


def test_a_lost_visit_is_waited_for_no_longer_than_the_wait():
    clock = Clock()
    record = audit.run(LEDGER, "auto", lambda ids: set(), totals=lambda: {"jobs": 0}, wait_s=10, interval=2,
                       now=clock.now, sleep=clock.sleep)
    assert "a1" in record["not_stored"] and 10 <= clock.t <= 12


def test_a_ledger_that_only_counted_some_visits_is_audited_by_the_totals_even_when_asked():
    from visitkit.results import audit

    ledger = {"visits": {"home": {"acknowledged": ["a"]}}, "untracked": {"home": 3}}
    record = audit.run(ledger, "exact", lambda ids: set(ids))
    assert record["method"] == "totals" and "only counted 3 more" in record["why"]


def test_the_audit_reads_the_ledgers_own_outcomes():
    import ledger

    assert audit.OUTCOMES == ledger.OUTCOMES and "gave_up" in audit.OUTCOMES


def test_a_visit_posted_three_times_under_one_id_is_stored_once_and_not_a_duplicate():
    # r3 was posted three times (two 429s, then a 202): one id, one marker
    ledger = {**ledger_of(acknowledged=["a1", "r3"], gave_up=["g1"], refused=["x1"]), "format": 4,
              "retried": {"jobs": 2}}
    record = audit.run(ledger, "exact", lambda ids: {"a1", "r3"} & set(ids))
    rows = audit.exact_accounting(ledger, record, {"jobs": 10}, {"jobs": 12})
    jobs = rows["jobs"]
    assert (jobs["sent"], jobs["retried"], jobs["acknowledged_stored"], jobs["duplicated"], jobs["lost"]) == (4, 2, 2, 0, 0)
    assert (jobs["gave_up"], jobs["refused"], jobs["neither"], jobs["refused_stored"]) == (1, 1, 2, 0)
    # had the store counted r3 at each of its three posts, its shards would hold two visits beyond the ids
    assert audit.exact_accounting(ledger, record, {"jobs": 10}, {"jobs": 14})["jobs"]["duplicated"] == 2


def test_a_visit_that_gave_up_and_was_stored_anyway_is_called_out():
    ledger = {**ledger_of(gave_up=["g1"]), "format": 4}
    record = audit.run(ledger, "exact", lambda ids: set(ids))
    assert audit.exact_accounting(ledger, record, {}, {"jobs": 1})["jobs"]["refused_stored"] == 1  # 429s publish nothing


def test_a_ledger_before_format_4_reads_as_one_where_no_visit_gave_up():
    assert audit.upgraded({"format": 3, "refused": {"home": 2}})["gave_up"] == {}
    assert audit.upgraded(LEDGER)["gave_up"] == {}  # format 2
    assert audit.upgraded({}) == {"gave_up": {}}  # no ledger at all
    current = {"format": 4, "gave_up": {"home": 1}}
    assert audit.upgraded(current) is current


# ---- a ledger that kept a uniform sample of the ids (format 5) -------------------------------------
START = 1_700_000_000  # the load's start (unix s)


def sampled_ledger():
    """A format-5 ledger that kept 1 visit in 10 over a 100 s load: acknowledged s<n> sent at n s, one
    failed visit f1 near the end."""
    acknowledged = [f"s{n}" for n in range(0, 100, 5)]
    ledger = ledger_of(acknowledged=acknowledged, failed=["f1"])
    return {**ledger, "format": 5, "sample": {"fraction": 0.1, "planned_visits": 2000},
            "unsampled": {"jobs": 189}, "untracked": {},
            "sent_at": {"jobs": {"acknowledged": [START + n for n in range(0, 100, 5)], "failed": [START + 97]}}}


@pytest.mark.parametrize("ids, untracked, can_read, billed, method", [
    (10, 0, True, False, "sample"),
    (audit.EXACT_MAX_READS + 1, 0, True, True, "sample"),  # at most --ledger-ids reads, whatever the run's size
    (10, 0, False, False, "totals"),  # a deployment known by its URL
    (10, 3, True, False, "totals"),  # the sample outgrew the limit: it is not uniform to the end
])
def test_a_sampled_ledger_is_audited_by_its_sample_where_the_markers_can_be_read(ids, untracked, can_read, billed,
                                                                                   method):
    assert audit.choose("auto", ids, can_read, billed, untracked, fraction=0.1)[0] == method
    assert audit.choose("exact", ids, can_read, billed, untracked, fraction=0.1)[0] == method


def test_the_sample_is_checked_in_each_part_of_the_load_and_bounds_the_loss_rate():
    ledger = sampled_ledger()
    record = audit.run(ledger, "auto", lambda ids: set(ids) - {"s95"})  # the last tenth lost one; f1 landed
    assert record["method"] == "sample" and record["reads"] == 21 and "1 in 10" in record["why"]
    found = audit.sample_figures(ledger, record, START, START + 100)
    parts = found["parts"]
    assert [part["sampled"] for part in parts] == [2] * 9 + [3]  # the ids of every tenth, f1 in the last
    assert [part["lost"] for part in parts] == [0] * 9 + [1] and parts[-1]["stored_unacknowledged"] == 1
    assert (parts[0]["start_s"], parts[0]["end_s"], parts[0]["visits_per_s"]) == (0, 10, 2.0)  # 2 sampled / 0.1 / 10 s
    assert (found["sampled"], found["acknowledged"], found["lost"]) == (21, 20, 1)
    assert found["loss_rate_bound"] is None and found["planned_visits"] == 2000
    all_stored = audit.sample_figures(ledger, audit.run(ledger, "auto", lambda ids: set(ids)), START, START + 100)
    assert all_stored["loss_rate_bound"] == pytest.approx(1 - 0.05 ** (1 / 20))
    assert audit_figures(ledger, record, load_start=START, load_end=START + 100)["sample"]["lost"] == 1


def test_with_none_of_n_lost_the_run_rules_out_a_loss_rate_above_about_3_over_n_at_95_percent():
    assert audit.loss_rate_bound(1000, 0) == pytest.approx(1 - 0.05 ** (1 / 1000))
    assert audit.loss_rate_bound(1000, 0) == pytest.approx(3 / 1000, rel=0.01)
    # at the bound, all n stored has a chance of exactly 5 %
    assert (1 - audit.loss_rate_bound(1_600_000, 0)) ** 1_600_000 == pytest.approx(0.05)
    assert audit.loss_rate_bound(1000, 2) is None and audit.loss_rate_bound(0, 0) is None


def test_a_committed_format_4_ledger_reads_as_every_id_kept_and_is_audited_exactly():
    from visitkit.paths import ROOT

    ledger = json.loads((ROOT / "iterations/iteration-1/results/load-20261125-234017/ledger.json").read_text())
    assert ledger["format"] == 4 and audit.sample_fraction(ledger) == 1.0 and audit.sent_times(ledger) == {}
    record = audit.run(ledger, "auto", lambda ids: set(ids))
    assert record["method"] == "exact" and record["reads"] == len(audit.visit_ids(ledger)) > 0
    assert "sample" not in audit_figures(ledger, record)


class BatchStore:
    """The calls catalogue.counted_in_batches makes of a Firestore client: collection, select, stream."""

    def __init__(self, batches):
        self.batches, self.streams = batches, 0

    def collection(self, name):
        assert name == "visit_batches"
        return self

    def select(self, fields):
        assert fields == ["ids"]
        return self

    def stream(self, timeout=None):
        self.streams += 1
        return [type("Snapshot", (), {"get": lambda _self, field, ids=ids: ids})() for ids in self.batches]


def test_a_pull_stores_visits_are_the_ids_of_its_batches_read_in_one_pass():
    store = BatchStore([["a1", "f1", "w9"], ["a2"], ["a1"], []])  # a1 in two batches; w9 not the ledger's
    assert catalogue.counted_in_batches(store, ["a1", "a2", "a3", "f1"]) == {"a1": 2, "a2": 1, "f1": 1}
    assert store.streams == 1


def test_an_id_in_two_batches_is_duplicated_though_the_shards_alone_would_not_show_it():
    counted = {"a1": 2, "a2": 1, "f1": 1}  # a1 counted twice; a3 lost
    record = audit.run(LEDGER, "exact", lambda ids: {i: n for i, n in counted.items() if i in ids})
    assert record["counted_twice"] == {"a1": 2} and record["not_stored"] == ["a3", "f2", "r1", "u1"]
    # shards: 3 distinct stored ids + a1's second count = 4, or read before it landed: 3
    for grown in (4, 3):
        jobs = audit.exact_accounting(LEDGER, record, {"jobs": 0}, {"jobs": grown})["jobs"]
        assert (jobs["duplicated"], jobs["lost"], jobs["acknowledged_stored"]) == (1, 1, 2)
    assert "counted_again" not in jobs


def test_a_marker_audit_records_no_counted_twice():
    record = audit.run(LEDGER, "exact", lambda ids: set(ids))
    assert "counted_twice" not in record


# ---- a store that had not settled when the audit read it ------------------------------------------------
def test_an_audit_whose_totals_never_hold_still_records_them_not_steady():
    clock, moving = Clock(), iter(range(1000))
    record = audit.run(LEDGER, "auto", lambda ids: set(ids), totals=lambda: {"jobs": next(moving)}, wait_s=10,
                       interval=2, now=clock.now, sleep=clock.sleep)
    assert record["steady"] is False and clock.t >= 10 + audit.STEADY_WAIT_S
    clock = Clock()
    held = audit.run(LEDGER, "auto", lambda ids: set(ids), totals=lambda: {"jobs": 7}, wait_s=10, interval=2,
                     now=clock.now, sleep=clock.sleep)
    assert "steady" not in held  # as every audit.json written before the key


def test_the_store_settled_only_when_the_counters_converged_and_the_audits_totals_held_still():
    assert audit.store_settled({"not_stored": []}, converged=True)  # an audit.json before `steady`
    assert not audit.store_settled({"not_stored": []}, converged=False)  # the run cut its convergence
    assert not audit.store_settled({"not_stored": [], "steady": False}, converged=True)


def test_a_store_not_settled_calls_no_visit_lost_or_duplicated_but_says_what_it_saw():
    """As test_every_visits_fate_comes_from_its_marker: a3 without its marker, the shards 1 beyond the markers;
    read from a store still moving, a3 may still be queued and the shard's visit stored after the markers."""
    record = audit.run(LEDGER, "exact", lambda ids: {"a1", "a2", "f1", "u1"} & set(ids))
    rows = audit.exact_accounting(LEDGER, record, {"jobs": 100}, {"jobs": 105}, settled=False)
    for row in (rows["jobs"], rows["total"]):
        assert (row["lost"], row["duplicated"], row["not_stored_yet"], row["stored_while_moving"]) == (None, None, 1, 1)
        assert (row["acknowledged_stored"], row["stored_unacknowledged"], row["stored"]) == (2, 2, 5)
    settled = audit.exact_accounting(LEDGER, record, {"jobs": 100}, {"jobs": 105})["total"]
    assert (settled["lost"], settled["duplicated"]) == (1, 1)  # a settled store's are the real thing
    assert "not_stored_yet" not in settled and "stored_while_moving" not in settled


def test_an_id_in_two_batches_is_duplicated_even_in_a_store_not_settled():
    counted = {"a1": 2, "a2": 1, "f1": 1}
    record = audit.run(LEDGER, "exact", lambda ids: {i: n for i, n in counted.items() if i in ids})
    jobs = audit.exact_accounting(LEDGER, record, {"jobs": 0}, {"jobs": 4}, settled=False)["jobs"]
    assert (jobs["duplicated"], jobs["lost"], jobs["not_stored_yet"], jobs["stored_while_moving"]) == (1, None, 1, 1)

"""The Locust suite's ledger of every visit, by visit id (pure logic)."""
import hashlib
import json
import random
import uuid

import pytest

import ledger as ledger_module
from ledger import OUTCOMES, VisitLedger, sample_fraction, sampled, settled
from visitkit.results import audit


def one_visit(ledger, visit_id, page, *statuses):
    for status in statuses:
        ledger.record_sent(page, visit_id)
        ledger.record_answer(visit_id, status)


def test_each_visit_lands_in_one_outcome_with_its_id():
    ledger = VisitLedger()
    for n, status in enumerate((202, 429, 400, 404, 502, 503, 500, 0)):
        one_visit(ledger, f"id-{n}", "home", status)
    ledger.record_sent("home", "id-9")  # posted, never answered (the user was stopped)
    written = ledger.as_dict()
    # 4xx (429 included) were never published; 5xx and no answer may or may not have been.
    assert {key: written[key] for key in ("sent", "acknowledged", "refused", "failed", "unanswered", "retried")} == {
        "sent": {"home": 9}, "acknowledged": {"home": 1}, "refused": {"home": 3}, "failed": {"home": 3},
        "unanswered": {"home": 2}, "retried": {}}
    assert written["visits"]["home"]["acknowledged"] == ["id-0"]
    assert sorted(written["visits"]["home"]["unanswered"]) == ["id-7", "id-9"]
    assert written["format"] == 5 and written["complete"] and written["workers"] == {}
    assert written["gave_up"] == {}  # one 429 and no retry: refused, as the study's visitor counts it


@pytest.mark.parametrize("statuses, outcome", [
    ((503, 202), "acknowledged"),
    ((0, 0, 202), "acknowledged"),
    ((503, 429), "failed"),  # the 503's publish may still land: the later 429 does not settle it
    ((0, 400), "unanswered"),
    ((429, 503), "failed"),
    ((503, 0), "unanswered"),
    ((429, 429), "refused"),
])
def test_a_retried_visit_is_acknowledged_by_any_2xx_and_stays_ambiguous_after_any_unknown_fate(statuses, outcome):
    ledger = VisitLedger()
    one_visit(ledger, "v", "jobs", *statuses)
    written = ledger.as_dict()
    assert written[outcome] == {"jobs": 1} and written["sent"] == {"jobs": 1} and written["retried"] == {"jobs": 1}


def test_settling_is_order_independent_once_acknowledged():
    assert settled("acknowledged", "failed") == settled("failed", "acknowledged") == "acknowledged"


def test_worker_reports_merge_on_the_master_by_visit_id():
    worker, master = VisitLedger(), VisitLedger()
    one_visit(worker, "a", "jobs", 202)
    worker.record_sent("jobs", "b")  # under way at the report
    master.report("w1", worker.counts(), worker.take())
    assert master.as_dict()["unanswered"] == {"jobs": 1}
    assert worker.take() == {}  # each report ships only what changed
    worker.record_answer("b", 503)
    worker.record_sent("jobs", "b")
    worker.record_answer("b", 202)  # retried and acknowledged
    master.report("w1", worker.counts(), worker.take())
    written = master.as_dict()
    assert written["sent"] == {"jobs": 2} and written["acknowledged"] == {"jobs": 2}
    assert written["retried"] == {"jobs": 1} and sorted(written["visits"]["jobs"]["acknowledged"]) == ["a", "b"]


def test_the_master_keeps_each_workers_latest_counts_and_is_complete_once_every_final_ledger_arrived():
    one, two, master = VisitLedger(), VisitLedger(), VisitLedger()
    one_visit(one, "a", "home", 202)
    one_visit(two, "b", "jobs", 503)
    master.report("w1", one.counts(), one.take())
    master.report("w2", two.counts(), two.take())
    one_visit(one, "c", "home", 202)
    master.report("w1", one.counts(), one.take())
    assert master.workers["w1"]["counts"]["acknowledged"] == {"home": 2}  # running totals: the latest wins
    assert not master.complete()
    master.report("w1", one.counts(), one.everything(), final=True)
    assert not master.as_dict()["complete"]
    master.report("w2", two.counts(), two.everything(), final=True)
    written = master.as_dict()
    assert written["complete"] and written["sent"] == {"home": 2, "jobs": 1}
    assert written["workers"]["w2"] == {"counts": two.counts(), "final": True}


def test_a_lost_report_is_made_good_by_the_final_ledger_and_a_dead_worker_leaves_it_incomplete():
    worker, master = VisitLedger(), VisitLedger()
    one_visit(worker, "a", "home", 202)
    worker.take()  # this report never reached the master
    one_visit(worker, "b", "home", 202)
    master.report("w1", worker.counts(), worker.take())
    written = master.as_dict()
    assert written["acknowledged"] == {"home": 2}  # the running counts hold both ...
    assert written["visits"]["home"]["acknowledged"] == ["b"]  # ... the ids one, until the final ledger
    master.report("w1", worker.counts(), worker.everything(), final=True)
    assert sorted(master.as_dict()["visits"]["home"]["acknowledged"]) == ["a", "b"] and master.complete()
    master.report("w2", {"sent": {"jobs": 5}})  # reported once, then died: no final ledger
    assert not master.complete()


def test_counts_are_kept_as_visits_are_recorded_and_match_the_ids():
    ledger = VisitLedger()
    for n, statuses in enumerate(((202,), (503, 202), (0, 429), (429,), (503,))):
        one_visit(ledger, f"v{n}", "home", *statuses)
    ledger.record_sent("jobs", "v9")
    written = ledger.as_dict()
    by_ids = {outcome: len(ids) for outcome, ids in written["visits"]["home"].items()}
    assert by_ids == {"acknowledged": 2, "unanswered": 1, "refused": 1, "failed": 1}
    assert {key: written[key].get("home", 0) for key in by_ids} == by_ids
    assert written["unanswered"]["jobs"] == 1 and written["retried"] == {"home": 2}
    assert written["untracked"] == {} and written["complete"]


def test_beyond_its_id_limit_a_ledger_counts_visits_and_forgets_them_once_settled():
    ledger = VisitLedger(id_limit=2)
    for n in range(5):
        one_visit(ledger, f"v{n}", "home", 503, 202)
        ledger.record_done(f"v{n}")
    ledger.record_sent("home", "v5")  # untracked, still under way
    written = ledger.as_dict()
    assert written["sent"] == {"home": 6} and written["acknowledged"] == {"home": 5} and written["retried"] == {"home": 5}
    assert written["untracked"] == {"home": 4} and sorted(written["visits"]["home"]["acknowledged"]) == ["v0", "v1"]
    assert not written["complete"] and list(ledger.in_flight) == ["v5"]  # settled untracked visits are gone


@pytest.mark.parametrize("statuses, outcome", [
    ((429, 429, 429), "gave_up"),  # refused for now at each of its tries, and no try left
    ((429,), "refused"),  # tried once (no --retry-visits): refused, as ever
    ((503, 429), "failed"),  # its 5xx may still land: ambiguous, not given up
    ((0, 429), "unanswered"),
    ((429, 202), "acknowledged"),
])
def test_a_visit_refused_at_each_of_its_tries_gave_up(statuses, outcome):
    ledger = VisitLedger()
    one_visit(ledger, "v", "jobs", *statuses)
    ledger.record_gave_up("v")  # the visitor ran out of tries on a 429 (or had no retries)
    written = ledger.as_dict()
    assert written[outcome] == {"jobs": 1} and written["visits"]["jobs"] == {outcome: ["v"]}
    assert sum(sum(written[key].values()) for key in OUTCOMES) == 1  # one outcome per visit, counted once


def test_a_visit_that_gave_up_reaches_the_master_in_the_next_report():
    worker, master = VisitLedger(), VisitLedger()
    one_visit(worker, "g", "home", 429, 429)
    master.report("w1", worker.counts(), worker.take())
    assert master.as_dict()["visits"]["home"] == {"refused": ["g"]}  # refused twice, its tries not yet over
    worker.record_gave_up("g")  # and no try left
    master.report("w1", worker.counts(), worker.take())
    written = master.as_dict()
    assert written["gave_up"] == {"home": 1} and written["refused"] == {} and written["retried"] == {"home": 1}
    assert written["visits"]["home"] == {"gave_up": ["g"]}


# ---- a uniform sample of the visit ids, beyond the id limit ---------------------------------------
def ids_in_order(count):
    """Visit ids as Locust makes them (UUIDs), the same at every run of the test."""
    return [str(uuid.UUID(int=random.Random(n).getrandbits(128), version=4)) for n in range(count)]


def test_every_id_is_kept_when_the_plan_fits_under_the_limit_and_a_sample_of_80_percent_of_it_beyond():
    assert sample_fraction(200, 150) == sample_fraction(200, 200) == 1.0
    assert sample_fraction(200, None) == 1.0  # no plan: the first 200, as before samples
    assert sample_fraction(200, 1000) == pytest.approx(0.8 * 200 / 1000)
    assert sample_fraction(2_000_000, 90_000_000) == pytest.approx(1.6 / 90)


def test_a_visit_is_sampled_when_the_sha256_of_its_id_falls_below_the_fraction():
    ids = ids_in_order(20_000)
    below = {visit_id for visit_id in ids  # the rule, written out again: the first 16 hex digits as a number
             if int(hashlib.sha256(visit_id.encode()).hexdigest()[:16], 16) / 2 ** 64 < 0.05}
    assert {visit_id for visit_id in ids if sampled(visit_id, 0.05)} == below
    assert len(below) == pytest.approx(1000, rel=0.15)
    assert below <= {visit_id for visit_id in ids if sampled(visit_id, 0.1)}  # a smaller sample lies within
    assert all(sampled(visit_id, 1.0) for visit_id in ids[:10])


def test_beyond_its_plan_a_ledger_keeps_a_sample_spread_over_the_whole_run_and_counts_the_rest():
    ledger = VisitLedger(id_limit=300, fraction=0.05, planned_visits=5000)
    ids = ids_in_order(4000)
    for n, visit_id in enumerate(ids):
        one_visit(ledger, visit_id, "home", 202 if n % 10 else 503)
        ledger.record_done(visit_id)
    written = ledger.as_dict()
    kept = set(audit.visit_ids(written))
    assert kept == {visit_id for visit_id in ids if sampled(visit_id, 0.05)}
    assert kept & set(ids[:400]) and kept & set(ids[-400:])  # the first tenth and the last
    assert written["sent"] == {"home": 4000} and written["unsampled"] == {"home": 4000 - len(kept)}
    assert written["untracked"] == {} and written["complete"]  # every sampled visit is held by id
    assert written["sample"] == {"fraction": 0.05, "planned_visits": 5000} and not ledger.in_flight
    assert len(audit.sent_times(written)) == len(kept)


def test_a_sample_that_outgrows_the_limit_counts_the_rest_as_untracked():
    ledger = VisitLedger(id_limit=10, fraction=0.5)
    for visit_id in ids_in_order(200):
        one_visit(ledger, visit_id, "jobs", 202)
        ledger.record_done(visit_id)
    written = ledger.as_dict()
    assert len(audit.visit_ids(written)) == 10 and written["untracked"]["jobs"] > 0 and not written["complete"]
    assert written["untracked"]["jobs"] + written["unsampled"]["jobs"] == 190


def test_two_workers_sample_alike_and_the_master_merges_their_samples_with_when_each_visit_was_sent(monkeypatch):
    fraction, ids = 0.2, ids_in_order(1000)
    one, two, master = (VisitLedger(id_limit=500, fraction=fraction) for _ in range(3))
    monkeypatch.setattr(ledger_module.time, "time", lambda: 1_700_000_000.7)
    for n, visit_id in enumerate(ids):
        one_visit(one if n % 2 else two, visit_id, "about", 202)
    master.report("w1", one.counts(), one.take())
    master.report("w2", two.counts(), two.take())
    master.report("w1", one.counts(), one.everything(), final=True)
    master.report("w2", two.counts(), two.everything(), final=True)
    written = master.as_dict()
    assert set(audit.visit_ids(written)) == {visit_id for visit_id in ids if sampled(visit_id, fraction)}
    assert written["sent"] == {"about": 1000} and written["complete"]
    assert sum(written["unsampled"].values()) == 1000 - len(audit.visit_ids(written))
    assert set(audit.sent_times(written).values()) == {1_700_000_000}


def test_the_ledger_file_is_replaced_whole_or_left_as_it_was(tmp_path, monkeypatch):
    path, ledger = tmp_path / "ledger.json", VisitLedger()
    one_visit(ledger, "a", "home", 202)
    ledger.write(path)
    before = path.read_text()
    monkeypatch.setattr(ledger, "as_dict", lambda: {"format": 5, "visits": {"home": object()}})  # fails half way
    with pytest.raises(TypeError):
        ledger.write(path)
    assert path.read_text() == before and json.loads(before)["visits"] == {"home": {"acknowledged": ["a"]}}

"""The Locust suite's ledger of every visit, by visit id (pure logic)."""
import pytest

from ledger import VisitLedger, settled


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
    assert written["format"] == 2


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
    master.add(worker.take())
    assert master.as_dict()["unanswered"] == {"jobs": 1}
    assert worker.take() == {}  # each report ships only what changed
    worker.record_answer("b", 503)
    worker.record_sent("jobs", "b")
    worker.record_answer("b", 202)  # retried and acknowledged
    master.add(worker.take())
    written = master.as_dict()
    assert written["sent"] == {"jobs": 2} and written["acknowledged"] == {"jobs": 2}
    assert written["retried"] == {"jobs": 1} and sorted(written["visits"]["jobs"]["acknowledged"]) == ["a", "b"]

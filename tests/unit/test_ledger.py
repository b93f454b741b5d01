"""The Locust suite's ledger of inc-counter answers (pure logic)."""
import pytest

from ledger import VisitLedger


def test_answers_are_acknowledged_refused_failed_or_missing():
    ledger = VisitLedger()
    for status in (202, 429, 400, 404, 502, 503, 500, 0):
        ledger.record_sent("home")
        ledger.record_answer("home", status)
    # 4xx (429 included) were never published; 5xx and no answer may or may not have been.
    assert ledger.as_dict() == {"sent": {"home": 8}, "acknowledged": {"home": 1}, "refused": {"home": 3},
                                "failed": {"home": 3}}


@pytest.mark.parametrize("status, outcome", [(202, "acknowledged"), (429, "refused"), (413, "refused"),
                                             (502, "failed"), (503, "failed")])
def test_each_status_lands_in_one_column(status, outcome):
    ledger = VisitLedger()
    ledger.record_answer("jobs", status)
    assert {key: counts for key, counts in ledger.as_dict().items() if counts} == {outcome: {"jobs": 1}}


def test_worker_reports_add_up_on_the_master():
    worker, master = VisitLedger(), VisitLedger()
    worker.record_sent("jobs")
    worker.record_answer("jobs", 202)
    worker.record_sent("jobs")
    worker.record_answer("jobs", 502)
    master.add(worker.take())
    # each report ships only new counts
    assert worker.take() == {"sent": {}, "acknowledged": {}, "refused": {}, "failed": {}}
    worker.record_sent("jobs")
    worker.record_answer("jobs", 202)
    master.add(worker.take())
    assert master.as_dict() == {"sent": {"jobs": 3}, "acknowledged": {"jobs": 2}, "refused": {}, "failed": {"jobs": 1}}

"""The Locust suite's ledger of inc-counter answers (pure logic)."""
from ledger import VisitLedger


def test_only_2xx_answers_are_acknowledged():
    ledger = VisitLedger()
    for status in (202, 429, 503, 0):
        ledger.record_sent("home")
        ledger.record_answer("home", status)
    assert ledger.as_dict() == {"sent": {"home": 4}, "acknowledged": {"home": 1}, "rejected": {"home": 2}}


def test_worker_reports_add_up_on_the_master():
    worker, master = VisitLedger(), VisitLedger()
    worker.record_sent("jobs")
    worker.record_answer("jobs", 202)
    master.add(worker.take())
    assert worker.take() == {"sent": {}, "acknowledged": {}, "rejected": {}}  # each report ships only new counts
    worker.record_sent("jobs")
    worker.record_answer("jobs", 202)
    master.add(worker.take())
    assert master.as_dict()["acknowledged"] == {"jobs": 2}

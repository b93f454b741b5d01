"""A rehearsal's check of Monitoring's store figures against the audit (visitkit.rehearsal.target.disagreements):
what the stand-in counted from the functions' logs must hold the visits the audit found stored, no more than
Firestore holds, and the store's deliveries are never 0 while visits were stored."""
from visitkit.rehearsal.target import disagreements

AUDIT = {"totals": {"home": 60, "jobs": 40}, "not_stored": []}  # 100 in Firestore
AGREES = {"counted": 100, "accepted": 98, "delivered": 100}  # 2 visits accepted before the window's first minute


def test_figures_that_hold_the_audits_visits_agree():
    assert disagreements(AGREES, acknowledged=90, audit=AUDIT) == []


def test_a_store_that_counted_fewer_than_the_audit_found_stored_disagrees():
    found = disagreements({**AGREES, "counted": 0}, acknowledged=90, audit=AUDIT)
    assert found == ["the store counted 0 visits, fewer than the 90 the audit found stored"]


def test_more_counted_than_firestore_holds_disagrees():
    assert disagreements({**AGREES, "counted": 101}, acknowledged=90, audit=AUDIT) == [
        "the store counted 101 visits, more than the 100 Firestore holds"]


def test_fewer_accepted_than_acknowledged_disagrees():
    assert disagreements({**AGREES, "accepted": 89}, acknowledged=90, audit=AUDIT) == [
        "inc-counter accepted 89 visits, fewer than the 90 Locust saw acknowledged"]


def test_no_deliveries_while_visits_were_stored_disagrees():
    for delivered in (0, None):
        assert disagreements({**AGREES, "delivered": delivered}, acknowledged=90, audit=AUDIT) == [
            f"the store's deliveries read {delivered} while Firestore holds 100 visits"]


def test_no_figure_at_all_is_said():
    assert disagreements({}, acknowledged=90, audit=AUDIT) == [
        "Monitoring has no figure of the visits counted or accepted"]

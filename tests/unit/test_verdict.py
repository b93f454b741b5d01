"""The verdict on a README's several `**Check:**` lines (reports/verdict.py): every check must hold."""
import pytest

from visitkit.reports import verdict

README = """## Hypothesis

Two figures move.

**Check:** `knee_visits_per_s >= 450`
**Check:** `p95_ms.inc-counter <= 300`
"""


def no_other(name: str) -> None:
    return None


def test_one_check_holding_and_one_failing_is_not_supported():
    found = verdict.judge({"knee_visits_per_s": 500, "p95_ms.inc-counter": 301}, README, no_other)
    assert [check["holds"] for check in found["checks"]] == [True, False]
    assert found["outcome"] == "not supported"


def test_a_failing_check_is_not_supported_even_beside_one_not_measured():
    found = verdict.judge({"p95_ms.inc-counter": 301}, README, no_other)
    assert [check["holds"] for check in found["checks"]] == [None, False]
    assert found["outcome"] == "not supported"


@pytest.mark.parametrize("figures", [{"knee_visits_per_s": 450, "p95_ms.inc-counter": 300},
                                     {"knee_visits_per_s": 450.0, "p95_ms.inc-counter": 300.0}])
def test_a_value_equal_to_its_bound_holds(figures):
    found = verdict.judge(figures, README, no_other)
    assert [check["holds"] for check in found["checks"]] == [True, True]
    assert found["outcome"] == "supported"


def test_a_check_not_measured_leaves_the_others_holding_undetermined():
    assert verdict.judge({"knee_visits_per_s": 500}, README, no_other)["outcome"] == "undetermined"

"""Cost curves (model/curve.py): the rates, the break-even points and the files, against bills worked by hand."""
import json

import pytest

from visitkit.model import capacity, cost, curve
from visitkit.paths import ROOT
from visitkit.settings import load_settings
from visitkit.twin.profile import load_profile


class Linear(curve.Priced):
    """An iteration whose monthly bill is fixed + per_visit_s x the rate (worked by hand, not by the model)."""

    def __init__(self, name, knee, fixed, per_visit_s):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_knee", knee)
        object.__setattr__(self, "_line", (fixed, per_visit_s))

    @property
    def knee(self):
        return self._knee

    def monthly(self, visits_per_s, prices, region, free_tier):
        fixed, slope = self._line
        return fixed + slope * visits_per_s


def test_rates_run_from_a_tenth_of_a_visit_to_the_knee_on_a_log_scale():
    found = curve.rates(1000, 5)
    assert found == pytest.approx([0.1, 1, 10, 100, 1000])


def test_an_always_on_design_is_cheaper_above_where_the_lines_cross_by_hand():
    """50 USD a month always on + 2 USD per visit/s against 12 USD per visit/s: equal at 50 / (12 - 2) = 5 visits/s,
    60 USD a month each."""
    always_on, per_request = Linear("pull", 1500, 50, 2), Linear("push", 60, 0, 12)
    found = curve.crossings(always_on, per_request, {}, "anywhere")
    assert len(found) == 1
    assert (found[0].cheaper_above, found[0].other) == ("pull", "push")
    assert found[0].visits_per_s == pytest.approx(5, rel=1e-6)
    assert found[0].monthly_usd == pytest.approx(60, rel=1e-6)


def test_bills_that_never_cross_below_the_lower_knee_have_no_break_even():
    assert curve.crossings(Linear("a", 100, 50, 2), Linear("b", 4, 0, 12), {}, "anywhere") == []


def test_a_share_of_the_others_bill_holds_from_where_it_is_reached_by_hand():
    """50 + 2 v <= (12 v) / 3 from v = 25; a quarter (50 + 2 v <= 3 v) only from 50, beyond the lower knee of 40."""
    always_on, per_request = Linear("pull", 1500, 50, 2), Linear("push", 40, 0, 12)
    assert curve.ratio_from(always_on, per_request, 1 / 3, {}, "anywhere") == pytest.approx(25, rel=1e-6)
    assert curve.ratio_from(always_on, per_request, 1 / 4, {}, "anywhere") is None


def test_the_curves_folder_holds_a_table_a_plot_and_a_record_of_the_iterations(tmp_path):
    study = load_profile("study")
    priced = [curve.Priced(f"iteration-{n}", settings, capacity.predict(settings, study))
              for n in (3, 7) for settings in [load_settings(ROOT / "iterations" / f"iteration-{n}")]]
    data = curve.write_curves(tmp_path, priced, cost.load_prices(), "us-central1")
    assert (tmp_path / "curves.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "curves.json").read_text()) == data and data["format"] == curve.FORMAT
    for name in ("iteration-3", "iteration-7"):
        points = data["iterations"][name]["points"]
        assert points[0]["visits_per_s"] == pytest.approx(0.1)
        assert points[-1]["visits_per_s"] == pytest.approx(data["iterations"][name]["knee_visits_per_s"])
    # the always-on puller costs more than iteration 3 at a tenth of a visit, less at iteration 3's knee
    seven, three = (data["iterations"][n]["points"] for n in ("iteration-7", "iteration-3"))
    assert seven[0]["monthly_usd"] > three[0]["monthly_usd"]
    crossing = data["crossings"][0]
    assert crossing["cheaper_above"] == "iteration-7" and 0.1 < crossing["visits_per_s"] < three[-1]["visits_per_s"]
    table = (tmp_path / "curves.md").read_text()
    assert f"iteration-7 is cheaper than iteration-3 above {crossing['visits_per_s']:,.1f} visits/s" in table
    assert "beyond its knee" in table  # iteration 3 does not reach 100 visits/s


@pytest.mark.parametrize("region", ["southamerica-east1", "us-central1"])
def test_the_committed_cost_curves_are_what_the_model_prices_today(tmp_path, region):
    """Iteration 7's README cites them: regenerate them (scripts/predict ... --cost-curve) when the model or the
    prices change."""
    committed = ROOT / "iterations" / "iteration-7" / f"cost-curve-{region}"
    study = load_profile("study")
    priced = [curve.Priced(f"iteration-{n}", settings, capacity.predict(settings, study))
              for n in (3, 4, 6, 7) for settings in [load_settings(ROOT / "iterations" / f"iteration-{n}")]]
    data = curve.write_curves(tmp_path, priced, cost.load_prices(), region)
    assert json.loads((committed / "curves.json").read_text()) == json.loads(json.dumps(data)), (
        f"stale: scripts/predict iterations/iteration-{{3,4,6,7}} --cost-curve {committed.relative_to(ROOT)} "
        f"--region {region}")
    assert (committed / "curves.md").read_text() == (tmp_path / "curves.md").read_text()


def test_predict_names_the_cheapest_iteration_that_holds_a_rate(capsys):
    from visitkit.cli import main

    three, seven = (str(ROOT / "iterations" / f"iteration-{n}") for n in (3, 7))
    assert main(["predict", three, seven, "--cost-at", "2", "--region", "us-central1"]) == 0
    printed = capsys.readouterr().out
    # below the break-even, iteration 3 (nothing always on)
    assert "  cheapest: iteration-3," in printed and "a month at 2 visits/s in us-central1, as set: iteration-3 " in printed
    assert main(["predict", three, seven, "--cost-at", "100", "--region", "us-central1"]) == 0
    printed = capsys.readouterr().out
    assert "  cheapest: iteration-7," in printed and "beyond iteration-3 (knee 54)" in printed

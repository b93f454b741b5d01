"""An open-model run read in its own unit: its knee and first failures in visits/s in the summary, the headline,
the report beside the capacity model's, and every closed-model run summarised as it was committed."""
import json

import pytest

from test_analysis import open_run
from visitkit.paths import ROOT
from visitkit.reports.report import prediction_section
from visitkit.results import folder as results
from visitkit.results.summary import headline_names, headline_table, summarize

ITERATION_0 = ROOT / "iterations" / "iteration-0" / "results" / "breakpoint-20261123-213523"
# a model whose knee is get-counter's 40 visits/s (120 RPS), where serve-page and inc-counter, before the publish,
# serve 200 and 60 a second and the store drains 30
PREDICTION = {"profile": "hand", "capacity_rps": {"serve-page": 200.0, "get-counter": 40.0, "inc-counter": 60.0},
              "knee_users": 160.0, "knee_rps": 120.0, "limited_by": "get-counter", "first_429_users": 560.0,
              "knee_visits_per_s": 40.0, "cycle_s": 4.0, "drain_per_s": 30.0, "extra_min_per_min": 0.33}


def open_breakpoint(**given):
    """A committed run's folder read, then made an open-model breakpoint (+2 visits/s each second from 5) on a
    system that serves 40 visits/s, with failures from second 30 (open_run)."""
    data = results.ResultsFolder(ITERATION_0).load()
    data.run = {**data.run, "load_model": "open", "prediction": PREDICTION,
                "arrivals": {"rate": None, "ramp_per_s": 2.0, "start": 5.0, "stages": False, "users_max": 5000}}
    data.arrivals, data.history = open_run(capacity=40, fail_from=30, **given)
    return data


def test_an_open_model_breakpoint_has_its_knee_and_first_failure_in_visits_per_s():
    summary = summarize(open_breakpoint())
    rate, h = summary.breakpoint["arrivals"], summary.headline
    assert 40 <= h["knee_visits_per_s"] <= 42 and h["knee_visits_per_s"] == rate["knee"]["offered"]
    assert h["first_failure_visits_per_s"] == pytest.approx(65) and h["served_peak_visits_per_s"] == pytest.approx(40)
    assert summary.breakpoint["knee"]["time"] == rate["knee"]["time"]  # the knee is one moment
    assert summary.breakpoint["healthy_rps_per_user"] is None
    header, _, row = headline_table(h)
    assert header.startswith("| knee (visits/s / RPS) | first failure (visits/s / RPS) |")
    assert row.startswith(f"| {h['knee_visits_per_s']:.1f} / ") and "| 65.0 / " in row
    again = summary.from_json(json.loads(json.dumps(summary.to_json())))
    assert again.to_json() == summary.to_json()


def test_the_model_is_compared_in_visits_per_s_and_applied_to_the_visits_started():
    summary = summarize(open_breakpoint())
    rows = prediction_section(summary, ())
    knee = summary.headline["knee_visits_per_s"]
    assert f"| knee: visits/s offered | 40.0 | {knee:.1f} |" in rows
    # the first 429 on a ramp of 2 visits/s from a knee of 40: 40 + 2 x (10 + sqrt(2 x 40 x 10 / 2)) = 100
    assert "| first 429 / first failure: visits/s offered | 100.0 | 65.0 |" in rows
    assert not any("users" in row or "past the knee" in row for row in rows)  # the users' steady figure
    # published min(started, inc-counter's 60) a second, drained 30: 1, 3, ... 29 left at the 15 rates from 31 to 59
    # visits/s started, then 30 more a second at the 33 from 61 to 125 (the last second's, 127, is the load's end)
    assert summary.model_load["backlog_at_end"] == pytest.approx(15 ** 2 + 30 * 33)


def test_a_closed_model_run_has_no_visits_per_s_figures():
    data = results.ResultsFolder(ITERATION_0).load()
    summary = summarize(data)
    assert "arrivals" not in summary.breakpoint
    assert not [name for name in summary.headline if "visits_per_s" in name]
    assert headline_table(summary.headline)[0].startswith("| knee (users / RPS) |")
    assert "| RPS knee: users |" in "\n".join(prediction_section(summary, ()))


COMMITTED = sorted(ROOT.glob(f"iterations/*/results/*/{results.SUMMARY}"))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: f"{path.parents[2].name}/{path.parent.name}")
def test_every_committed_run_is_summarised_again_as_it_was_committed(path):
    committed = json.loads(path.read_text())
    again = json.loads(json.dumps(summarize(results.ResultsFolder(path.parent).load()).to_json(), default=str))
    for publishes in ("verdict", "gates"):  # publish's, after the summary
        committed.pop(publishes, None), again.pop(publishes, None)
    assert again == committed


def test_a_threshold_or_a_check_may_name_the_visits_per_s_figures():
    assert {"knee_visits_per_s", "first_failure_visits_per_s", "served_peak_visits_per_s"} <= set(headline_names())


def test_iteration_5s_plan_sizes_the_users_of_its_arrivals_from_the_models_visit():
    from visitkit.reports import docs

    text = " ".join(docs.hold_text(ROOT / "iterations" / "iteration-5", "", "study 10000").split())
    # a visit's three responses take 59 ms in the model: 10,000 x (2 x 0.059 + 1) users (locust/arrivals.py)
    assert "at the model's 59 ms of responses a visit, 590 are under way at once" in text
    assert "Locust runs **11,180 users**" in text

"""Thresholds and the gates of a CI run (results/thresholds.py): one syntax with the hypotheses' checks, the
figures they may name, how each is judged (at the end, and live for --abort-on-fail), the expected verdict, the
report's section and the JUnit XML; and the load's side of --abort-on-fail (runs/load.py)."""
import dataclasses
import json
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
from fakes import a_summary
from test_report import make_results

from visitkit import cli
from visitkit.catalogue import CATALOGUE, FUNCTIONS
from visitkit.errors import RunError
from visitkit.paths import ROOT
from visitkit.reports import junit, publish, report, verdict
from visitkit.results import folder as results
from visitkit.results import summary as summary_module
from visitkit.results import thresholds
from visitkit.results.records import Summary
from visitkit.results.summary import headline_names
from visitkit.results.thresholds import Threshold, failing_live, judge_gates, parse_thresholds
from visitkit.runs import load, runner
from visitkit.runs.config import RunConfig

COMMITTED = sorted(ROOT.glob(f"iterations/*/results/*/{results.SUMMARY}"))
README_CHECKS = [check for path in sorted(ROOT.glob("iterations/*/README.md"))
                 for check in verdict.hypothesis_checks(path.read_text())]
ITERATION_0 = ROOT / "iterations" / "iteration-0"


# ---- one syntax ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text, parts", [
    ("knee_users>=200", ("knee_users", ">=", "200", None)),
    ("visits.lost==0", ("visits.lost", "==", "0", None)),
    (" p95_ms.inc-counter < 100 ", ("p95_ms.inc-counter", "<", "100", None)),
    ("extra_min_per_min<=1", ("extra_min_per_min", "<=", "1", None)),
    ("store.throughput_per_s >= 1.8 x iteration-2", ("store.throughput_per_s", ">=", "1.8", "iteration-2")),
    ("slowest_function != get-counter", ("slowest_function", "!=", "get-counter", None)),
])
def test_a_threshold_reads_figure_operator_and_bound(text, parts):
    threshold = Threshold.read(text)
    assert (threshold.figure, threshold.op, threshold.bound, threshold.baseline) == parts
    assert Threshold.read(str(threshold)) == threshold  # what run.json records reads back the same


@pytest.mark.parametrize("text", ["knee_users", "knee_users >> 2", "knee users >= 2", "knee_users >= ", "== 3"])
def test_an_unreadable_threshold_is_refused_before_the_run_and_leaves_a_check_undetermined(text):
    assert Threshold.read(text) is None
    with pytest.raises(RunError, match="FIGURE OP VALUE"):
        parse_thresholds([text], headline_names())
    assert verdict.evaluate_check(text, {"knee_users": 3}, lambda name: None) == (None, f"cannot read check `{text}`")


def test_every_committed_hypothesis_check_is_a_threshold():
    assert len(README_CHECKS) >= 8
    for check in README_CHECKS:
        threshold = Threshold.read(check)
        assert threshold is not None and threshold.figure in headline_names(), check


def test_a_check_is_judged_as_the_same_threshold_is():
    figures = {"visits.lost": 2, "rps_peak": 12.0, "slowest_function": "get-counter"}
    for text in ("visits.lost==0", "visits.lost <= 2", "rps_peak > 10", "slowest_function == get-counter",
                 "knee_users >= 1"):
        assert verdict.evaluate_check(text, figures, lambda name: None) == Threshold.read(text).judge(figures)


# ---- judging one figure --------------------------------------------------------------------------
@pytest.mark.parametrize("text, holds, detail", [
    ("visits.lost == 0", True, "visits.lost = 0, wanted == 0"),
    ("knee_users >= 200", False, "knee_users = 150, wanted >= 200"),
    ("failure_ratio < 0.001", False, "failure_ratio = 0.004, wanted < 0.001"),  # the bound's decimals
    ("failure_ratio == 0", False, "failure_ratio = 0.004, wanted == 0"),  # never shown as equal to a bound it is not
    ("p95_ms.inc-counter < 100", True, "p95_ms.inc-counter = 80.0, wanted < 100"),
    ("p95_ms.inc-counter < 80", False, "p95_ms.inc-counter = 80.0, wanted < 80"),
    ("slowest_function == get-counter", True, "slowest_function = get-counter, wanted == get-counter"),
    ("visits.dead_lettered == 0", None, "visits.dead_lettered was not measured"),
    ("slowest_function < 3", None, "slowest_function = get-counter cannot be compared with 3"),
])
def test_a_threshold_compares_its_figure_with_its_bound(text, holds, detail):
    figures = {"visits.lost": 0, "knee_users": 150, "failure_ratio": 0.0041, "p95_ms.inc-counter": 80.0,
               "slowest_function": "get-counter", "visits.dead_lettered": None}
    assert Threshold.read(text).judge(figures) == (holds, detail)


def test_a_bound_relative_to_another_iteration_reads_its_latest_figure():
    threshold = Threshold.read("knee_users >= 1.5 x iteration-0")
    assert threshold.judge({"knee_users": 160}, lambda name: {"knee_users": 100})[0] is True
    assert threshold.judge({"knee_users": 140}, lambda name: {"knee_users": 100})[0] is False
    assert threshold.judge({"knee_users": 140}, lambda name: None) == (
        None, "no knee_users from iteration-0 to compare with (run it first)")


# ---- the names a threshold may give --------------------------------------------------------------
def test_the_names_are_the_headlines_own():
    names = headline_names()
    public = [name for name in FUNCTIONS if CATALOGUE[name].public]
    for name in public:
        assert {f"p50_ms.{name}", f"p95_ms.{name}", f"failures.{name}"} <= set(names)
    for name in FUNCTIONS:
        assert {f"service_ms.{name}", f"responses_429.{name}"} <= set(names)
    assert not {f"p95_ms.{name}" for name in FUNCTIONS if name not in public} & set(names)  # the client never calls it
    assert {"knee_users", "visits.lost", "extra_min_per_min", "store.drain_per_s"} <= set(names)
    assert not {"store.throughput_of", "store.backlog_peak_time"} & set(names)  # the headline leaves them out


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: f"{path.parents[2].name}/{path.parent.name}")
def test_every_figure_a_committed_headline_has_may_be_named(path):
    assert set(json.loads(path.read_text())["headline"]) <= set(headline_names())


def test_an_optional_sections_figures_may_be_named_too():
    data = a_summary().to_json()  # a closed-model run: its headline has no arrival rate
    data["load"] = {**data["load"], "arrival_rate": {"target": 15.0, "achieved": 14.9, "not_started": 0}}
    names = set(summary_module.headline(data))
    assert "arrival_rate.achieved" in names - set(a_summary().headline) and names <= set(headline_names())


def test_an_unknown_figure_is_refused_with_the_names_that_exist():
    with pytest.raises(RunError) as refused:
        parse_thresholds(["visits.lost==0", "visits.lst==0"], headline_names())
    assert "'visits.lst'" in str(refused.value)
    assert "visits.lost" in str(refused.value) and "p95_ms.inc-counter" in str(refused.value)
    assert [str(t) for t in parse_thresholds(["visits.lost==0", "p95_ms.inc-counter<100"], headline_names())] == [
        "visits.lost == 0", "p95_ms.inc-counter < 100"]


def test_the_run_is_refused_before_it_starts():
    with pytest.raises(RunError, match="no headline figure is named 'knee'"):
        RunConfig.build(ITERATION_0, "breakpoint", thresholds=["knee>=3"])
    with pytest.raises(RunError, match="--expect must be one of"):
        RunConfig.build(ITERATION_0, "breakpoint", expect="maybe")
    with pytest.raises(RunError, match="judged at the end"):  # nothing --abort-on-fail could stop the load for
        RunConfig.build(ITERATION_0, "breakpoint", thresholds=["visits.lost==0", "failure_ratio>0.1"],
                        abort_on_fail=True)
    with pytest.raises(RunError, match="a fleet's are on its VMs"):
        RunConfig.build(ITERATION_0, "breakpoint", target="https://example.invalid", workers=2, project="p",
                        thresholds=["failure_ratio<0.1"], abort_on_fail=True)
    config = RunConfig.build(ITERATION_0, "breakpoint", thresholds=["failure_ratio<0.1"], expect="not-supported",
                             abort_on_fail=True)
    assert config.thresholds == (Threshold("failure_ratio", "<", "0.1"),) and config.expect == "not supported"


# ---- the gates: thresholds and the expected verdict ----------------------------------------------
def gates_of(thresholds_given=(), expect=None, headline=None, outcome="supported", stopped=None):
    run = {"gates": {"thresholds": list(thresholds_given), "expect": expect, "abort_on_fail": stopped is not None}}
    if stopped:
        run["stopped_early"] = stopped
    return judge_gates(run, headline or {}, outcome)


def test_a_run_given_no_gates_has_none():
    assert judge_gates({}, {"visits.lost": 0}, "supported") is None


def test_the_gates_pass_only_when_every_threshold_holds():
    headline = {"visits.lost": 0, "knee_users": 150}
    held = gates_of(["visits.lost == 0", "knee_users >= 100"], headline=headline)
    assert held["passed"] and [o["holds"] for o in held["thresholds"]] == [True, True]
    failed = gates_of(["visits.lost == 0", "knee_users >= 200"], headline=headline)
    assert not failed["passed"] and [o["holds"] for o in failed["thresholds"]] == [True, False]
    assert failed["thresholds"][1] == {"threshold": "knee_users >= 200", "value": 150, "holds": False,
                                       "detail": "knee_users = 150, wanted >= 200"}


def test_a_threshold_on_a_figure_not_measured_fails_and_says_so():
    gates = gates_of(["visits.dead_lettered == 0"], headline={"visits.dead_lettered": None})
    assert not gates["passed"]
    assert gates["thresholds"][0]["detail"] == ("visits.dead_lettered was not measured: a threshold that cannot be "
                                                "judged fails")


@pytest.mark.parametrize("expect, outcome, holds", [
    ("supported", "supported", True), ("not supported", "not supported", True),
    ("undetermined", "undetermined", True),
    ("supported", "undetermined", False), ("not supported", "undetermined", False),  # undetermined fails both
    ("supported", "not supported", False), ("undetermined", "supported", False),
    ("supported", "no check stated", False), ("supported", None, False),
])
def test_the_expected_verdict(expect, outcome, holds):
    gates = gates_of(expect=expect, outcome=outcome)
    assert gates["expectation"] == {"expected": expect, "outcome": outcome, "holds": holds}
    assert gates["passed"] is holds


def test_the_threshold_that_stopped_the_load_fails_whatever_the_whole_run_says():
    stopped = {"at_s": 12.0, "time": 1000.0, "threshold": "p95_ms.get-counter < 100",
               "detail": "p95_ms.get-counter = 300.0 over Locust's last ~10 s, wanted < 100"}
    gates = gates_of(["p95_ms.get-counter < 100", "visits.lost == 0"], stopped=stopped,
                     headline={"p95_ms.get-counter": 60.0, "visits.lost": 0})
    assert not gates["passed"] and gates["stopped_early"] == stopped
    first, second = gates["thresholds"]
    assert not first["holds"] and "it stopped the load (p95_ms.get-counter = 300.0" in first["detail"]
    assert "p95_ms.get-counter = 60.0, wanted < 100" in first["detail"]
    assert second["holds"]  # judged at the end, after convergence and the audit, as without the stop


def test_a_summary_keeps_its_gates_and_one_without_stays_without():
    summary = a_summary()
    assert "gates" not in summary.to_json()
    gates = gates_of(["visits.lost == 0"], headline=summary.headline)
    with_gates = dataclasses.replace(summary, gates=gates)
    data = json.loads(json.dumps(with_gates.to_json()))
    assert data["gates"] == gates and Summary.from_json(data).gates == gates
    assert list(data).index("gates") == list(data).index("verdict") + 1


def test_publishing_judges_the_gates_run_json_records_and_the_report_lists_them(tmp_path):
    iteration = tmp_path / "iterations" / "iteration-1"
    iteration.mkdir(parents=True)
    (iteration / "README.md").write_text("## Hypothesis\n\nIt works.\n\n**Check:** `requests > 0`\n")
    folder = make_results(iteration)
    run = json.loads((folder / "run.json").read_text())
    run["gates"] = {"thresholds": ["requests > 0", "p95_ms.get-counter < 100"], "expect": "supported",
                    "abort_on_fail": False}
    (folder / "run.json").write_text(json.dumps(run))
    summary = publish.publish(folder)
    assert [o["holds"] for o in summary.gates["thresholds"]] == [True, False]  # get-counter's p95: 9,000 ms
    assert summary.gates["expectation"]["holds"] and not summary.gates["passed"]
    assert json.loads((folder / "summary.json").read_text())["gates"] == summary.gates
    text = (folder / "report.md").read_text()
    section = text[text.index("## Thresholds"):].split("\n## ")[0]
    assert "**one or more fail** (exit status 3)" in section
    assert "- `requests > 0`: holds (requests = 150, wanted > 0)" in section
    assert "- `p95_ms.get-counter < 100`: **fails** (p95_ms.get-counter = 9,000.0, wanted < 100)" in section
    assert "- verdict expected supported: holds (the verdict is supported)" in section
    del run["gates"]
    (folder / "run.json").write_text(json.dumps(run))
    assert publish.publish(folder).gates is None and "## Thresholds" not in (folder / "report.md").read_text()


def test_the_report_says_when_the_load_was_stopped():
    stopped = {"at_s": 12.4, "time": 1000.0, "threshold": "failure_ratio < 0.01",
               "detail": "failure_ratio = 0.20 over the 60 requests so far, wanted < 0.01"}
    summary = a_summary(gates=gates_of(["failure_ratio < 0.01"], stopped=stopped, headline={"failure_ratio": 0.1}))
    section = report.thresholds_section(summary, ())
    assert section[0] == "## Thresholds"
    assert ("- **The load was stopped early**, 12 s after Locust started, by `failure_ratio < 0.01` "
            "(--abort-on-fail): failure_ratio = 0.20 over the 60 requests so far, wanted < 0.01") in section


# ---- JUnit XML -----------------------------------------------------------------------------------
def test_junit_has_one_testcase_per_gate_and_a_failure_in_each_that_fails(tmp_path):
    gates = gates_of(["visits.lost == 0", "knee_users >= 200"], expect="supported", outcome="undetermined",
                     headline={"visits.lost": 0, "knee_users": 150})
    summary = a_summary(gates=gates)
    path = tmp_path / "gates.xml"
    junit.write_junit(path, summary)
    root = ET.parse(path).getroot()
    # junit-10.xsd (pytest's, Jenkins'): a testsuite needs name, tests, failures and errors; a testcase a name;
    # testsuites may have no other attributes than name, time, tests, failures and errors
    assert root.tag == "testsuites" and root.get("tests") == "3" and root.get("failures") == "2"
    assert set(root.attrib) <= {"name", "time", "tests", "failures", "errors"}
    [suite] = root.findall("testsuite")
    assert {"name", "tests", "failures", "errors"} <= set(suite.attrib)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "2", "0")
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases] == ["visits.lost == 0", "knee_users >= 200", "verdict is supported"]
    assert all(case.get("classname") == f"visitkit.{summary.iteration}.breakpoint" for case in cases)
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure.get("message") == failure.text == "knee_users = 150, wanted >= 200"
    assert cases[2].find("failure").get("message") == "the verdict is undetermined"


def test_junit_names_the_threshold_that_stopped_the_load():
    stopped = {"at_s": 8.0, "time": 1.0, "threshold": "failures.inc-counter < 1", "detail": "failures = 3 so far"}
    gates = gates_of(["failures.inc-counter < 1"], stopped=stopped, headline={"failures.inc-counter": 3})
    root = ET.fromstring(junit.junit_xml(a_summary(), gates))
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties == {"stopped_early_by": "failures.inc-counter < 1", "stopped_early_at_s": "8"}


# ---- --abort-on-fail: the live judge -------------------------------------------------------------
LIVE = {"requests": 200, "failure_ratio": 0.02, "p95_ms.get-counter": 120.0, "failures.inc-counter": 3,
        "responses_429.inc-counter": 2}


def failing(*texts, live=None):
    found = failing_live([Threshold.read(text) for text in texts], {**LIVE, **(live or {})})
    return (str(found[0]), found[1]) if found else None


@pytest.mark.parametrize("text, fails", [
    ("failures.inc-counter < 3", True), ("failures.inc-counter <= 3", False), ("failures.inc-counter == 0", True),
    ("failures.inc-counter < 4", False), ("failures.inc-counter == 5", False),  # it may yet reach 5
    ("failures.inc-counter >= 10", False), ("failures.inc-counter != 3", False),  # judged at the end only
    ("responses_429.inc-counter == 0", True), ("responses_429.inc-counter <= 2", False),
    ("failure_ratio < 0.01", True), ("failure_ratio <= 0.02", False), ("failure_ratio == 0", True),
    ("p95_ms.get-counter < 100", True), ("p95_ms.get-counter <= 120", False), ("p95_ms.get-counter < 120", True),
    ("p95_ms.get-counter > 500", False),
    ("visits.lost == 0", False), ("requests < 10", False),  # not judged during the load
    ("failures.inc-counter <= 1 x iteration-0", False),  # another run's figure: at the end
])
def test_the_live_judge_stops_the_load_only_for_a_figure_above_its_upper_bound(text, fails):
    assert (failing(text) is not None) is fails


def test_a_ratio_or_a_percentile_is_judged_only_once_enough_requests_were_made():
    few = {"requests": thresholds.LIVE_MIN_REQUESTS - 1}
    assert failing("failure_ratio < 0.01", live=few) is None
    assert failing("p95_ms.get-counter < 100", live=few) is None
    assert failing("failures.inc-counter < 1", live=few) is not None  # a count is final whenever it is seen
    assert failing("p95_ms.get-counter < 100", live={"requests": thresholds.LIVE_MIN_REQUESTS}) is not None


def test_the_live_judge_says_which_figure_and_statistic_failed():
    assert failing("visits.lost == 0", "p95_ms.get-counter < 100", "failure_ratio < 0.01") == (
        "p95_ms.get-counter < 100", "p95_ms.get-counter = 120.0 over Locust's last ~10 s, wanted < 100")
    assert failing("failure_ratio < 0.01")[1] == "failure_ratio = 0.02 over the 200 requests so far, wanted < 0.01"
    assert failing("failures.inc-counter == 0")[1] == "failures.inc-counter = 3 so far, wanted == 0"
    assert failing("p95_ms.serve-page < 1") is None  # not seen yet


HISTORY_HEADER = ["Timestamp", "User Count", "Type", "Name", "Requests/s", "Failures/s", "50%", "60%", "70%", "80%",
                  "90%", "95%", "99%", "100%", "Total Request Count", "Total Failure Count"]


def history_second(t, p95_home, p95_jobs, failures=(0, 0)):
    """One second of Locust's full history: get-counter's two pages, inc-counter's one, then Aggregated."""
    return [[t, 5, "GET", "/get-counter?visit_type=home", 1, 0, 10, 0, 0, 0, 0, p95_home, 0, 0, 40, failures[0]],
            [t, 5, "GET", "/get-counter?visit_type=jobs", 1, 0, 12, 0, 0, 0, 0, p95_jobs, 0, 0, 40, failures[1]],
            [t, 5, "POST", "/inc-counter?visit_type=home", 1, 0, 30, 0, 0, 0, 0, "N/A", 0, 0, 40, 0],
            [t, 5, "", "Aggregated", 3, 0, 12, 0, 0, 0, 0, 50, 0, 0, 120, sum(failures)]]


def test_the_live_figures_are_the_latest_seconds_by_their_headline_names(tmp_path):
    path = tmp_path / "locust_stats_history.csv"
    rows = [HISTORY_HEADER, *history_second(1000, 90, 95), *history_second(1001, 40, 70, failures=(2, 1))]
    path.write_text("\n".join(",".join(map(str, row)) for row in rows) + "\n" + "1002,5,GET,/get-coun")  # mid-write
    latest = load.latest_history(path)
    assert [row["Name"] for row in latest][-1] == "Aggregated" and {row["Timestamp"] for row in latest} == {"1001"}
    assert load.last_aggregated(path)["Total Request Count"] == "120"
    first = {"functions": {"inc-counter": {"responses_429": 4}}}
    now = {"functions": {"inc-counter": {"responses_429": 9}}}
    figures = load.live_figures(latest, first, now)
    assert figures["requests"] == 120 and figures["failure_ratio"] == pytest.approx(3 / 120)
    assert figures["p95_ms.get-counter"] == 70 and figures["p50_ms.get-counter"] == 12  # the worst page's
    assert figures["p95_ms.inc-counter"] is None and figures["p95_ms.serve-page"] is None  # N/A, not seen
    assert figures["failures.get-counter"] == 3 and figures["failures.inc-counter"] == 0
    assert figures["responses_429.inc-counter"] == 5 and figures["responses_429.get-counter"] is None
    assert set(figures) <= set(headline_names())  # a live figure is the headline's figure of the same name


def test_before_locust_writes_a_second_there_is_nothing_to_judge(tmp_path):
    assert load.latest_history(tmp_path / "none.csv") == []
    (tmp_path / "half.csv").write_text(",".join(HISTORY_HEADER) + "\n1000,1,GET,/app?view=home,0,0")
    assert load.latest_history(tmp_path / "half.csv") == [] and load.last_aggregated(tmp_path / "half.csv") is None
    assert failing_live([Threshold.read("failure_ratio < 0.01")], load.live_figures([], None, None)) is None


def test_a_failing_live_threshold_records_why_and_ends_the_test_once(tmp_path):
    folder = results.ResultsFolder(tmp_path)
    ended, logged = [], []
    state = SimpleNamespace(config=SimpleNamespace(thresholds=(Threshold.read("failure_ratio < 0.01"),)),
                            sampler=None, record={"notes": []}, folder=folder, log=logged.append)
    locust = SimpleNamespace(end_test=ended.append)
    rows = [{"Name": "Aggregated", "Total Request Count": "100", "Total Failure Count": "0"}]
    assert not load.judge_live(state, locust, 5.0, rows) and not ended and "stopped_early" not in state.record
    rows = [{"Name": "Aggregated", "Total Request Count": "200", "Total Failure Count": "10"}]
    assert load.judge_live(state, locust, 9.6, rows)
    assert ended == [load.STOP_TIMEOUT_S + load.END_TEST_MARGIN_S]
    stopped = json.loads((tmp_path / "run.json").read_text())["stopped_early"]
    assert stopped["at_s"] == 9.6 and stopped["threshold"] == "failure_ratio < 0.01"
    assert stopped["detail"] == "failure_ratio = 0.05 over the 200 requests so far, wanted < 0.01"
    assert "stopping the load" in logged[0]


# ---- the command line ----------------------------------------------------------------------------
def test_a_dry_run_shows_the_gates_in_the_plan():
    config = RunConfig.build(ITERATION_0, "breakpoint", warm_up="0", expect="supported", abort_on_fail=True,
                             thresholds=["visits.lost==0", "p95_ms.inc-counter<100"])
    plan = "\n".join(runner.dry_run(config))
    assert ("judge `visits.lost == 0`, `p95_ms.inc-counter < 100`, the verdict (expected: supported): the run exits "
            "3 if one fails") in plan
    load_step = plan[plan.index("run the Locust test"):plan.index("wait for the counters")]
    assert "--abort-on-fail: stop the load (then converge and audit as usual) once `p95_ms.inc-counter < 100` fails" \
        in load_step  # only the threshold judged live
    plain = "\n".join(runner.dry_run(RunConfig.build(ITERATION_0, "breakpoint", warm_up="0")))
    assert "judge " not in plain and "--abort-on-fail" not in plain


def test_the_exit_status_is_3_when_a_gate_fails_and_report_judges_again(tmp_path, capsys):
    iteration = tmp_path / "iterations" / "iteration-1"
    iteration.mkdir(parents=True)
    folder = make_results(iteration)
    run = json.loads((folder / "run.json").read_text())
    run["gates"] = {"thresholds": ["requests > 0"], "expect": None, "abort_on_fail": False}
    (folder / "run.json").write_text(json.dumps(run))
    xml = tmp_path / "junit.xml"
    assert cli.main(["report", str(folder), "--junit", str(xml)]) == 0
    assert "gates: all hold" in capsys.readouterr().out and ET.parse(xml).getroot().get("failures") == "0"
    run["gates"]["thresholds"].append("p95_ms.get-counter < 100")
    (folder / "run.json").write_text(json.dumps(run))
    assert cli.main(["report", str(folder), "--junit", str(xml)]) == cli.GATES_FAILED == 3
    out = capsys.readouterr().out
    assert "gates: FAILED (exit status 3)" in out and "`p95_ms.get-counter < 100`: **fails**" in out
    assert ET.parse(xml).getroot().get("failures") == "1"


def test_the_command_line_refuses_unknown_figures_and_a_junit_file_without_gates(tmp_path, capsys):
    args = ["run", str(ITERATION_0), "--test", "breakpoint", "--dry-run"]
    assert cli.main([*args, "--threshold", "p95_ms.nope<1"]) == 2
    assert "no headline figure is named 'p95_ms.nope'" in capsys.readouterr().err
    assert cli.main([*args, "--junit", str(tmp_path / "j.xml")]) == 2
    assert "give --threshold or --expect" in capsys.readouterr().err
    assert cli.main([*args, "--threshold", "visits.lost==0", "--expect", "not-supported"]) == 0

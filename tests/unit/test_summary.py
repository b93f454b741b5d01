"""The run's headline, rendered once and shown by the terminal and the report, and the run's
settings read back through the settings parser."""
import json

from test_report import make_results
from visitkit.reports import docs, publish
from visitkit.runs import runner
from visitkit.paths import ITERATIONS_DIR, SETTINGS_FILE
from visitkit.settings import load_settings, summary_line
from visitkit.results.summary import headline_table, without_dead_letter_topic


def test_the_headline_table_reads_missing_figures_as_n_a():
    figures = {"knee_users": 1183, "knee_rps": 944.0, "first_failure_users": None, "first_failure_rps": None,
               "rps_peak": 950.0, "p95_ceiling_ms": 10000.0, "convergence_s": 152.0, "extra_min_per_min": 1.494,
               "visits.acknowledged": 12150, "visits.stored": 12150, "visits.lost": 0, "visits.duplicated": 0}
    header, _, row = headline_table(figures)
    assert header.count("|") == row.count("|")
    assert row == "| 1,183 / 944.0 | n/a / n/a | 950.0 | 10,000 ms | n/a | 152 s | 1.49 | 12,150 / 12,150 / 0 / 0 |"
    _, _, row = headline_table({**figures, "p95_ceiling_ms": None, "convergence_s": None})
    assert "| 950.0 | n/a | n/a | n/a | 1.49 |" in row  # a missing figure has no unit


def test_the_terminal_the_report_and_the_readme_show_the_same_headline(tmp_path):
    folder = make_results(tmp_path / "iteration-1")
    summary = publish.publish(folder)
    table = headline_table(summary.headline)
    assert "\n".join(table) in (folder / "report.md").read_text()
    assert [line.strip() for line in runner.headline_lines(folder, summary)[-3:]] == table
    assert "\n".join(table) in docs.run_table(summary, "results/x")


def test_the_settings_line_is_the_parsed_settings(tmp_path):
    folder = make_results(tmp_path / "iteration-1")
    run = json.loads((folder / "run.json").read_text())
    settings = load_settings(ITERATIONS_DIR / "iteration-0" / SETTINGS_FILE)
    (folder / "run.json").write_text(json.dumps({**run, "settings": settings.raw}))
    publish.publish(folder)
    assert f"- Settings: {summary_line(settings)}\n" in (folder / "report.md").read_text()


def test_settings_that_do_not_parse_are_named_not_shown(tmp_path):
    folder = make_results(tmp_path / "iteration-1")  # its settings name no function
    summary = publish.publish(folder)
    assert summary.settings_line is None
    assert "Settings and cost not shown: run.json's settings: functions must have" in (folder / "report.md").read_text()


def test_only_a_google_cloud_deployment_without_dead_letter_topic_is_said_to_have_none():
    settings = load_settings(ITERATIONS_DIR / "iteration-0" / SETTINGS_FILE)
    off = {"target": "gcp", "settings": {**settings.raw, "dead_letter": False}}
    assert without_dead_letter_topic(off, settings) == {
        "message_retention_seconds": settings.subscription.message_retention_seconds}
    assert without_dead_letter_topic(off, None) == {"message_retention_seconds": None}  # settings that did not parse
    assert without_dead_letter_topic({**off, "target": "local"}, settings) is None  # the twin always has one
    assert without_dead_letter_topic({"target": "gcp", "settings": settings.raw}, settings) is None  # true by default


def test_visits_that_gave_up_are_counted_apart_from_refused_and_lost_and_never_as_ambiguous():
    from visitkit.results import audit
    from visitkit.results.summary import visit_accounting

    ledger = {"format": 4, "sent": {"home": 10}, "acknowledged": {"home": 6}, "refused": {"home": 1},
              "gave_up": {"home": 2}, "failed": {}, "unanswered": {"home": 1}}
    rows = visit_accounting(ledger, None, {"home": 0}, {"home": 9})
    home = rows["home"]
    assert (home["refused"], home["gave_up"], home["unanswered"], home["lost"]) == (1, 2, 1, 0)
    # never published: 9 stored is 6 acknowledged, the one with no answer, and 2 counted twice
    assert (home["stored_unacknowledged"], home["duplicated"]) == (1, 2)
    assert (rows["total"]["gave_up"], rows["total"]["refused"]) == (2, 1)
    older = {key: value for key, value in ledger.items() if key != "gave_up"} | {"format": 3, "unanswered": {"home": 3}}
    older = visit_accounting(audit.upgraded(older), None, {"home": 0}, {"home": 9})
    assert older["total"]["gave_up"] == 0 and older["home"]["unanswered"] == 3


def test_the_summary_and_its_headline_say_how_many_visits_gave_up(tmp_path):
    folder = make_results(tmp_path / "iteration-1")
    (folder / "ledger.json").write_text(json.dumps({
        "format": 4, "sent": {"home": 30 + 5, "jobs": 40}, "acknowledged": {"home": 30, "jobs": 40},
        "refused": {"home": 1}, "gave_up": {"home": 4}, "retried": {"home": 4}}))
    summary = publish.publish(folder)
    assert summary.visits["total"]["gave_up"] == summary.headline["visits.gave_up"] == 4
    assert summary.headline["visits.refused"] == 1
    old = make_results(tmp_path / "iteration-2")  # its ledger has no format: written before gave_up
    assert publish.publish(old).headline["visits.gave_up"] == 0


def test_an_autoscaled_runs_cold_starts_are_in_its_summary_headline_and_report(tmp_path):
    folder = make_results(tmp_path / "iteration-1")
    (folder / "stack").mkdir(exist_ok=True)
    start = {"function": "get-counter", "instance": "get-counter-1", "in_flight": 2, "waiting": 5}
    (folder / "stack" / "scaling.jsonl").write_text("\n".join(json.dumps(event) for event in (
        {**start, "time": 1.0, "event": "start"},
        {**start, "time": 3.0, "event": "ready", "start_ms": 2000.0})) + "\n")
    summary = publish.publish(folder)
    assert summary.cold_starts["get-counter"]["under_load_count"] == 1
    assert summary.headline["cold_start_ms_max.get-counter"] == 2000.0
    report = (folder / "report.md").read_text()
    assert "## Instances and cold starts" in report and "| get-counter |" in report.split("cold starts")[-1]
    fixed = publish.publish(make_results(tmp_path / "iteration-2"))  # no events file: every instance ran throughout
    assert fixed.cold_starts is None and "cold_starts.get-counter" not in fixed.headline
    # autoscaled at min_instances = max_instances: no events either, and no cold start, which a threshold can judge
    warm = make_results(tmp_path / "iteration-4")
    run = json.loads((warm / "run.json").read_text())
    settings = load_settings(ITERATIONS_DIR / "iteration-4").with_scaling("auto").raw
    settings["functions"] = {name: {**spec, "min_instances": spec["max_instances"]}
                             for name, spec in settings["functions"].items()}
    (warm / "run.json").write_text(json.dumps({**run, "settings": settings}))
    summary = publish.publish(warm)
    assert summary.headline["cold_starts.store-inc-counter"] == 0
    assert summary.cold_starts["get-counter"]["under_load_count"] == 0


def test_a_spike_with_scaling_auto_has_its_scale_out_in_the_summary_headline_and_report(tmp_path):
    """make_results' users rise from the load's first second to 50 (the step: its second second); every function's
    queue holds 0 to 4 requests in turn (t % 5) on its 2 instances, enough for its traffic: the lag ends at its
    first empty queue, 1005 (4 s)."""
    from visitkit.reports.report import render
    from visitkit.results.folder import ResultsFolder
    from visitkit.results.summary import headline_names, summarize

    settings = load_settings(ITERATIONS_DIR / "iteration-4")
    for scaling in ("auto", "fixed"):
        folder = make_results(tmp_path / f"iteration-{scaling}")
        run = json.loads((folder / "run.json").read_text())
        (folder / "run.json").write_text(json.dumps({**run, "test": "spike",
                                                     "settings": settings.with_scaling(scaling).raw}))
        summary = summarize(ResultsFolder(folder).load())
        report = render(summary)
        if scaling == "auto":
            assert summary.scale_out["start"] == 1001.0 and summary.scale_out["functions"]["serve-page"]["lag_s"] == 4.0
            assert "scale_out_lag_s.serve-page" in summary.headline and "## Scale-out at the spike" in report
            # the model's: 1 request/s of 120 ms wants no instance beyond the 2 up at the step, so nothing waits
            assert "| serve-page | 4.0 s | 0.0 s | 2 / 2 / 2 |" in report
    # fixed instances: as before, no such section or figure (every committed run resummarises as committed)
    assert "scale_out" not in summary.to_json()
    assert "scale_out_lag_s.serve-page" not in summary.headline and "Scale-out" not in report
    assert "scale_out_lag_s.store-inc-counter" in headline_names()  # a --threshold may name it


def unsettled_run(tmp_path, stored, steady=None):
    """A run of two acknowledged home visits whose audit found a1's marker and not a2's, the home shards grown by
    `stored` (make_results: converged when they reach the 2 acknowledged), and audit.json's `steady` if given."""
    acked = {"home": 2, "jobs": 0, "about": 0, "about_legals": 0, "about_offices": 0}
    folder = make_results(tmp_path / "iteration-1", acked=acked, stored={**acked, "home": stored})
    (folder / "ledger.json").write_text(json.dumps({
        "format": 4, "sent": {"home": 2}, "acknowledged": {"home": 2}, "gave_up": {}, "refused": {}, "failed": {},
        "visits": {"home": {"acknowledged": ["a1", "a2"]}}}))
    audit_record = {"format": 1, "method": "exact", "why": "every visit id read", "reads": 2, "read_cost_usd": None,
                    "not_stored": ["a2"]}
    (folder / "audit.json").write_text(json.dumps({**audit_record, **({"steady": steady} if steady is not None
                                                                      else {})}))
    return folder


def test_a_store_not_settled_leaves_lost_and_duplicated_unknown_in_the_headline_report_and_thresholds(tmp_path):
    import dataclasses

    from visitkit.reports.report import overload_section, render
    from visitkit.results.folder import ResultsFolder
    from visitkit.results.summary import summarize
    from visitkit.results.thresholds import Threshold

    lost, duplicated = Threshold.read("visits.lost == 0"), Threshold.read("visits.duplicated == 0")
    # converged (3 >= 2), the audit's totals steady: a2 lost and 2 shards beyond a1's marker duplicated, and they fail
    settled = summarize(ResultsFolder(unsettled_run(tmp_path / "a", stored=3)).load())
    assert (settled.headline["visits.lost"], settled.headline["visits.duplicated"]) == (1, 2)
    assert lost.judge(settled.headline)[0] is False and duplicated.judge(settled.headline)[0] is False
    assert "visits.not_stored_yet" not in settled.headline and "not settled" not in render(settled)
    # the same store whose totals never held still around the audit's markers
    moving = summarize(ResultsFolder(unsettled_run(tmp_path / "b", stored=3, steady=False)).load())
    assert (moving.headline["visits.lost"], moving.headline["visits.duplicated"]) == (None, None)
    assert (moving.headline["visits.not_stored_yet"], moving.headline["visits.stored_while_moving"]) == (1, 2)
    assert lost.judge(moving.headline) == (None, "visits.lost is not known: the store had not settled when the "
                                                 "audit read it (1 acknowledged not stored yet, 2 stored while it "
                                                 "still moved)")
    report = render(moving)
    assert "the stored totals never held still while the audit read the markers" in report
    assert "| home | 2 | 0 | 1 | 1 | 0 | 0 | 2 |" in report and "First visit ids not stored yet: `a2`" in report
    # a convergence cut short (1 of 2 stored) with an audit.json from before `steady`: not settled either
    cut = summarize(ResultsFolder(unsettled_run(tmp_path / "c", stored=1)).load())
    assert not cut.convergence["converged"] and cut.headline["visits.lost"] is None
    assert "**the store had not settled** (the counters had not converged)" in render(cut)
    spike = dataclasses.replace(cut, overload={"spike_users": 40, "spike_s": 20, "baseline_p95_ms": 80,
                                               "spike_p95_ms": 1000, "recovery_s": 5, "refused_429": 30,
                                               "other_errors": 0})
    assert overload_section(spike, {})[5] == ("- Every acknowledged visit stored: not known, the store had not "
                                              "settled (1 not stored yet)")

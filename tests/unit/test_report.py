"""Report, verdict, README block, plots and comparison from a synthetic results folder."""
import csv
import dataclasses
import json
import re

import pytest
from fakes import a_summary

from visitkit.reports import compare, publish, readme, report, verdict

PERCENTILES = ["50%", "60%", "70%", "80%", "90%", "95%", "99%", "100%"]


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def make_results(iteration_dir, name="breakpoint-20260101-000000", get_counter_p95=9000, started="2026-01-01T00:00:00",
                 acked=None, stored=None):
    acked = acked or {"home": 30, "jobs": 40, "about": 20, "about_legals": 10, "about_offices": 20}
    stored = stored if stored is not None else acked
    results = iteration_dir / "results" / name
    results.mkdir(parents=True)
    before = {page: 5 for page in acked}
    (results / "run.json").write_text(json.dumps({
        "iteration": iteration_dir.name, "test": "breakpoint", "target": "local", "started": started,
        "settings": {"shards_per_page": 2, "cache_ttl_seconds": 0, "functions": {}}, "before": before,
        "notes": ["a note"], "format_version": 2}))
    (results / "ledger.json").write_text(json.dumps({"sent": acked, "acknowledged": acked, "rejected": {}}))
    stats_header = ["Type", "Name", "Request Count", "Failure Count", "Median Response Time", "Average Response Time",
                    "Min Response Time", "Max Response Time", "Average Content Size", "Requests/s", "Failures/s",
                    *PERCENTILES]
    rows = []
    for page in acked:
        rows.append(["GET", f"/app?view={page}", 10, 0, 60, 62, 50, 90, 100, 1, 0, 60, 61, 62, 65, 80, 130, 150, 160])
        rows.append(["GET", f"/get-counter?visit_type={page}", 10, 2, 9000, 8000, 50, 10000, 30, 1, 0.2,
                     9000, 9500, 10000, 10000, 10000, get_counter_p95, 10000, 10000])
        rows.append(["POST", f"/inc-counter?visit_type={page}", 10, 0, 77, 80, 50, 120, 30, 1, 0, 77, 78, 79, 82, 90, 110, 115, 120])
    rows.append(["", "Aggregated", 150, 10, 78, 2700, 50, 10000, 50, 3, 0.2, 78, 86, 310, 6000, 10000, 10000, 10000, 10000])
    write_csv(results / "locust_stats.csv", stats_header, rows)
    history_header = ["Timestamp", "User Count", "Type", "Name", "Requests/s", "Failures/s", *PERCENTILES,
                      "Total Request Count", "Total Failure Count"]
    history = []
    for t in range(60):
        users = min(t + 1, 50) if t < 55 else 0
        history.append([1000 + t, users, "", "Aggregated", 0.7 * min(users, 30), 0.0, 20, 20, 20, 20, 20,
                        50 + 10 * t, 60, 60, t * 3, 1 if t > 40 else 0])
    write_csv(results / "locust_stats_history.csv", history_header, history)
    write_csv(results / "locust_failures.csv", ["Method", "Name", "Error", "Occurrences"],
              [["GET", "/get-counter?visit_type=home", "429", 10]])
    samples = []
    for t in range(70):
        fn = {"instances": 2, "in_flight": 1, "queued": t % 5, "requests": t, "responses_2xx": t,
              "responses_4xx": 0, "responses_429": t // 10, "responses_5xx": 0, "service_ms": 120.0,
              "service_ms_p95": None, "queue_ms": 3000.0}
        accepted, stored_so_far = 2 * min(t, 55), min(t, 60) * 2 * 55 // 60
        samples.append({"time": 1000.0 + t, "source": "local-haproxy",
                        "functions": {n: dict(fn) for n in ("serve-page", "get-counter", "inc-counter", "store-inc-counter")},
                        "store": {"accepted": accepted, "stored": stored_so_far, "backlog": accepted - stored_so_far}})
    (results / "server-samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    after = {page: before[page] + stored[page] for page in acked}
    (results / "convergence.jsonl").write_text(json.dumps({"time": 1070.0, "totals": after}) + "\n")
    return results


def assert_plot(path, line_colours):
    """A real chart, not just a PNG header: a full-size image with its data lines drawn (pixels of
    each series' colour), not a blank or placeholder canvas."""
    import matplotlib.colors
    import matplotlib.image
    import numpy

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = matplotlib.image.imread(path)[..., :3]
    height, width = pixels.shape[:2]
    assert width >= 600 and height >= 500, (width, height)
    assert (pixels.min(axis=2) < 0.9).mean() > 0.02  # more than a blank canvas
    for colour in line_colours:
        close = numpy.abs(pixels - numpy.array(matplotlib.colors.to_rgb(colour))).max(axis=2) < 0.06
        assert close.sum() >= 50, f"no {colour} line in {path.name}"


@pytest.fixture
def iteration(tmp_path):
    folder = tmp_path / "iterations" / "iteration-1"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("# It 1\n\n## Hypothesis\n\nA cache makes\nget-counter fast.\n\n"
                                      "**Check:** `p95_ms.get-counter <= 0.5 x iteration-0`\n\n## More\n")
    return folder


def test_report_has_headline_table_and_consistent_visits(iteration):
    results = make_results(iteration)
    summary = publish.publish(results)
    text = (results / "report.md").read_text()
    assert text.index("## Headline") < text.index("## Response times per endpoint")
    assert "| GET | /get-counter?visit_type=home | 10 | 2 | 9,000 | 9,500 | 10,000 | 10,000 | 10,000 | 9,000 |" in text
    assert summary.visits["total"]["acknowledged"] == summary.visits["total"]["stored"] == 120
    assert summary.headline["slowest_function"] == "get-counter"
    assert summary.headline["first_failure_users"] == 42
    assert summary.convergence["seconds_after_load"] == pytest.approx(16)  # load ends at 1054, polled at 1070
    assert "a note" in text and json.loads((results / "summary.json").read_text())["test"] == "breakpoint"


def test_without_the_loads_start_the_moments_have_no_time_into_it(iteration):
    summary = publish.publish(make_results(iteration))
    when = lambda s: next(line for line in report.headline_section(s, {}) if line.startswith("- When"))  # noqa: E731
    assert when(summary).startswith("- When, into the load: knee 8 s, first failure 41 s,")
    assert when(dataclasses.replace(summary, load={**summary.load, "start": None})).startswith(
        "- When, into the load: knee time unknown, first failure time unknown,")  # not "knee yes"


def test_verdict_compares_with_the_other_iterations_latest_run(iteration):
    baseline = iteration.parent / "iteration-0"
    baseline.mkdir()
    publish.publish(make_results(baseline, get_counter_p95=9000))
    summary = publish.publish(make_results(iteration, get_counter_p95=150))
    assert summary.verdict["outcome"] == "supported"
    assert summary.verdict["hypothesis"] == "A cache makes get-counter fast."
    worse = publish.publish(make_results(iteration, "breakpoint-20260102-000000", get_counter_p95=8000,
                                             started="2026-01-02T00:00:00"))
    assert worse.verdict["outcome"] == "not supported"


def test_verdict_is_undetermined_without_a_baseline(iteration):
    summary = publish.publish(make_results(iteration))
    assert summary.verdict["outcome"] == "undetermined"
    assert "iteration-0" in summary.verdict["checks"][0]["detail"]


@pytest.mark.parametrize("expression, expected", [
    ("slowest_function == get-counter", True), ("slowest_function == inc-counter", False),
    ("rps_peak > 10", True), ("rps_peak <= 10", False), ("missing_metric > 1", None)])
def test_checks(expression, expected):
    figures = {"slowest_function": "get-counter", "rps_peak": 12.0}
    assert verdict.evaluate_check(expression, figures, lambda name: None)[0] is expected


def test_a_knee_the_machine_set_does_not_judge_a_hypothesis():
    busy = {"knee_users": 1183, "rps_peak": 944.0, "knee_machine_busy": True}
    holds, detail = verdict.evaluate_check("knee_users >= 100", busy, lambda name: None)
    assert holds is None and "this machine's CPU" in detail
    assert verdict.evaluate_check("rps_peak > 10", busy, lambda name: None)[0] is True  # not a knee figure
    assert verdict.evaluate_check("knee_users >= 100", {**busy, "knee_machine_busy": False},
                                  lambda name: None)[0] is True
    open_model = {"knee_visits_per_s": 250.0, "knee_machine_busy": True}  # an arrival-rate run's knee
    assert verdict.evaluate_check("knee_visits_per_s >= 100", open_model, lambda name: None)[0] is None


def test_readme_block_is_replaced_not_repeated(iteration):
    summary = publish.publish(make_results(iteration), update_readme=True)
    publish.publish(make_results(iteration, "breakpoint-20260103-000000", started="2026-01-03T00:00:00"),
                    update_readme=True)
    text = (iteration / "README.md").read_text()
    assert text.count("<!-- figures run:") == 1 and "breakpoint-20260103-000000" in text
    assert text.startswith("# It 1") and "## More" in text
    assert summary.results_dir not in text


def test_lost_visits_show_in_the_report(iteration):
    acked = {"home": 30, "jobs": 40, "about": 20, "about_legals": 10, "about_offices": 20}
    results = make_results(iteration, acked=acked, stored={**acked, "home": 27})
    summary = publish.publish(results)
    assert summary.headline["visits.lost"] == 3
    assert not summary.convergence["converged"]
    assert "did **not** converge" in (results / "report.md").read_text()


def test_plots_are_written_before_the_report_that_links_them(iteration):
    results = make_results(iteration)
    publish.publish(results)
    report = (results / "report.md").stat().st_mtime_ns
    assert_plot(results / "load.png", ["tab:blue", "tab:green", "tab:purple"])  # users, RPS, p95
    assert_plot(results / "server.png", ["tab:brown", "tab:blue", "tab:green"])  # backlog, accepted, stored
    for name in ("load.png", "server.png"):
        assert (results / name).stat().st_mtime_ns <= report
        assert f"]({name})" in (results / "report.md").read_text()


def test_compare_puts_iterations_side_by_side(iteration):
    baseline = iteration.parent / "iteration-0"
    baseline.mkdir()
    publish.publish(make_results(baseline, get_counter_p95=9000))
    publish.publish(make_results(iteration, get_counter_p95=150))
    table = compare.compare_table([baseline, iteration, iteration.parent / "iteration-9"])
    header, _, *rows = table.splitlines()
    assert header == "| figure | iteration-0 | iteration-1 | iteration-9 |"
    row = next(r for r in rows if r.startswith("| get-counter p95"))
    assert row == "| get-counter p95 (ms) | 9,000.0 | 150.0 | — |"


def test_a_stored_5xx_visit_is_reported_as_ambiguous_not_duplicated(iteration):
    acked = {"home": 30, "jobs": 40, "about": 20, "about_legals": 10, "about_offices": 20}
    results = make_results(iteration, acked=acked, stored={**acked, "home": 32})
    # home: 2 answers were 502/503 and both visits were stored anyway; 3 were refused with 429
    (results / "ledger.json").write_text(json.dumps({
        "sent": {**acked, "home": 35}, "acknowledged": acked, "refused": {"home": 3}, "failed": {"home": 2}}))
    summary = publish.publish(results)
    assert summary.headline["visits.duplicated"] == 0 and summary.headline["visits.lost"] == 0
    text = (results / "report.md").read_text()
    assert "| home | 35 | 30 | 3 | 0 | 2 | 0 | 32 | 0 | 0 |" in text  # none gave up: a ledger before format 4
    assert "2 stored after a 5xx or no answer" in text


def test_an_exact_audit_reports_each_visits_fate_and_names_the_lost_ones(iteration):
    acked = {"home": 3, "jobs": 0, "about": 0, "about_legals": 0, "about_offices": 0}
    results = make_results(iteration, acked=acked, stored={**acked, "home": 3})  # before 5, after 8
    (results / "ledger.json").write_text(json.dumps({
        "format": 2, "sent": {"home": 5}, "acknowledged": {"home": 3}, "failed": {"home": 1}, "unanswered": {"home": 1},
        "retried": {"home": 2}, "visits": {"home": {"acknowledged": ["a1", "a2", "a3"], "failed": ["f1"],
                                                     "unanswered": ["u1"]}}}))
    # a3 was lost; f1 landed after its 503; u1 never arrived
    (results / "audit.json").write_text(json.dumps({"format": 1, "method": "exact", "why": "every visit id read",
                                                    "reads": 5, "read_cost_usd": None, "not_stored": ["a3", "u1"]}))
    summary = publish.publish(results)
    assert summary.headline["visits.lost"] == 1 and summary.headline["visits.duplicated"] == 0
    text = (results / "report.md").read_text()
    assert "## Visits: every visit's fate" in text and "ambiguous" not in text
    assert "| home | 5 | 2 | 2 | 1 | 1 | 1 | 0 |" in text
    assert "First lost visit ids: `a3`" in text
    assert "of the 2 with a 5xx or no answer, 1 were stored" in text


def test_results_keep_no_path_of_this_machine(tmp_path):
    from pathlib import Path

    from visitkit.paths import ROOT
    from visitkit.results.folder import without_machine_paths

    (tmp_path / "stack").mkdir()
    (tmp_path / "stack" / "haproxy.cfg").write_text(f"    errorfile 503 {ROOT}/iterations/x/stack/429.http\n")
    (tmp_path / "run.json").write_text(json.dumps({"command": [f"{ROOT}/.venv/bin/python3", str(ROOT)]}))
    (tmp_path / "store.log").write_text(f'  File "{Path.home()}/.pyenv/lib/python3.11/http/client.py"\n')
    (tmp_path / "load.png").write_bytes(str(ROOT).encode())  # not text: left alone
    others = f"/srv{Path.home()}/x {ROOT}2/y"  # not this machine's home or checkout, only look alike
    (tmp_path / "other.txt").write_text(others)
    without_machine_paths(tmp_path)
    assert (tmp_path / "other.txt").read_text() == others
    assert (tmp_path / "stack" / "haproxy.cfg").read_text() == "    errorfile 503 iterations/x/stack/429.http\n"
    assert json.loads((tmp_path / "run.json").read_text()) == {"command": [".venv/bin/python3", "."]}
    assert (tmp_path / "store.log").read_text() == '  File "~/.pyenv/lib/python3.11/http/client.py"\n'
    assert (tmp_path / "load.png").read_bytes() == str(ROOT).encode()


def test_a_local_run_is_measured_against_the_knee_on_this_machine():
    from visitkit.reports import report

    prediction = {"knee_users": 6245, "knee_rps": 4615, "limited_by": "inc-counter", "first_429_users": 21629,
                  "drain_per_s": 2105, "extra_min_per_min": 0, "profile": "study",
                  "machine_knee_users": 938, "machine_knee_rps": 693, "machine_limited_by": "this machine's CPU",
                  "machine_first_429_users": 3248}
    summary = a_summary(target="local", prediction=prediction, headline={"knee_users": 900, "knee_rps": 680})
    local = "\n".join(report.prediction_section(summary, {}))
    assert "| RPS knee: users | 938 | 900 |" in local and "this machine's CPU" in local
    assert "| first 429 / first failure: users | 3,248 |" in local
    cloud = "\n".join(report.prediction_section(dataclasses.replace(summary, target="gcp"), {}))
    assert "| RPS knee: users | 6,245 | 900 |" in cloud


def test_the_store_drain_is_measured_only_when_a_backlog_built_up():
    from visitkit.reports import report

    prediction = {"knee_users": 220, "knee_rps": 162, "limited_by": "inc-counter", "first_429_users": 760,
                  "drain_per_s": 2105, "extra_min_per_min": 0, "profile": "study"}
    summary = a_summary(target="local", prediction=prediction, headline={"store.drain_per_s": 11.9},
                        store={"backlog_peak": 106, "accepted_per_s": 196.0})  # 0.5 s of visits: the store kept up
    assert "| store drain (msg/s) | 2,105 | n/a: kept up (backlog peak 106) |" in "\n".join(
        report.prediction_section(summary, {}))
    summary.store = {"backlog_peak": 3200, "accepted_per_s": 54.0}  # a minute of visits: drained at capacity
    summary.headline = {"store.drain_per_s": 26.7}
    assert "| store drain (msg/s) | 2,105 | 26.7 |" in "\n".join(report.prediction_section(summary, {}))


def test_a_knee_on_a_busy_machine_is_called_the_machines():
    from visitkit.reports import report

    def words(machine, moment="knee"):
        return report.machine_words(a_summary(machine={"knee": None, "peak": None, moment: machine}), moment)

    assert "busy" in words({"cpu_percent": 190, "cores": 2, "busy": True})
    assert "**" not in words({"cpu_percent": 90, "cores": 2, "busy": False})
    assert "had room (90 % of its 200 %)" in words({"cpu_percent": 90, "cores": 2, "busy": False})
    assert "of one core" in words({"cpu_percent": 90, "cores": None, "busy": None})
    assert words(None) == ""
    assert "the peak is the machine's" in words({"cpu_percent": 190, "cores": 2, "busy": True}, "peak")


def test_the_platform_section_names_the_queries_that_could_not_be_read_even_when_none_was():
    missing = [{"metric": "request_count", "metric_type": "run.googleapis.com/request_count",
                "error": "PermissionDenied", "code": 403, "reason": "Permission monitoring.timeSeries.list denied"},
               {"metric": "dead_lettered", "error": "RetryError", "code": None, "reason": "Deadline of 120.0s exceeded",
                "metric_type": "pubsub.googleapis.com/subscription/dead_letter_message_count"}]
    lines = report.platform_section(a_summary(metrics_files=[], missing_metrics=missing, platform=None), ())
    assert lines[0] == "## Google Cloud metrics"
    assert ("- Missing: request_count (run.googleapis.com/request_count): PermissionDenied 403 Permission "
            f"monitoring.timeSeries.list denied — leaves empty: {report.EMPTIED['request_count']}") in lines
    assert ("- Missing: dead_lettered (pubsub.googleapis.com/subscription/dead_letter_message_count): RetryError "
            "Deadline of 120.0s exceeded — leaves empty: dead-lettered visits") in lines
    assert not any(line.startswith("Series:") for line in lines)
    assert report.platform_section(a_summary(metrics_files=[], missing_metrics=[]), ()) == []


def test_the_report_says_how_many_visits_gave_up_next_to_refused_and_lost(iteration):
    acked = {"home": 30, "jobs": 40, "about": 20, "about_legals": 10, "about_offices": 20}
    results = make_results(iteration, acked=acked)
    (results / "ledger.json").write_text(json.dumps({
        "format": 4, "sent": {**acked, "home": 36}, "acknowledged": acked, "refused": {"home": 2},
        "gave_up": {"home": 4}, "retried": {"home": 7}}))
    summary = publish.publish(results)
    text = (results / "report.md").read_text()
    assert "| Page | sent | acknowledged (2xx) | refused (4xx, 429) | gave up (429 each try) | failed (5xx) |" in text
    assert "| home | 36 | 30 | 2 | 4 | 0 | 0 | 30 | 0 | 0 |" in text  # never published: none ambiguous
    assert "- Visits: 4 gave up (a 429 at each of their tries), 2 refused, 0 lost" in text
    spike = dataclasses.replace(summary, overload={"spike_users": 40, "spike_s": 20, "baseline_p95_ms": 80,
                                                   "spike_p95_ms": 1000, "recovery_s": 5, "refused_429": 30,
                                                   "other_errors": 0})
    assert ("(0 lost, 0 duplicated); 4 visits gave up (a 429 at each of their tries), 2 were refused"
            in "\n".join(report.overload_section(spike, {})))


def test_an_exact_audit_says_how_many_gave_up_and_a_report_before_them_renders_as_it_did(iteration):
    acked = {"home": 1, "jobs": 0, "about": 0, "about_legals": 0, "about_offices": 0}
    results = make_results(iteration, acked=acked)
    (results / "ledger.json").write_text(json.dumps({
        "format": 4, "sent": {"home": 3}, "acknowledged": {"home": 1}, "gave_up": {"home": 1}, "refused": {"home": 1},
        "retried": {"home": 2}, "visits": {"home": {"acknowledged": ["a1"], "gave_up": ["g1"], "refused": ["r1"]}}}))
    (results / "audit.json").write_text(json.dumps({"format": 1, "method": "exact", "why": "every visit id read",
                                                    "reads": 3, "read_cost_usd": None, "not_stored": ["g1", "r1"]}))
    summary = publish.publish(results)
    assert "Not acknowledged: 1 refused (4xx, the platform's 429 included), 1 gave up (a 429 at each of their " \
           "tries), 0 failed (5xx)" in (results / "report.md").read_text()
    # a summary.json written before gave_up (the docs render committed ones): the same sections, no error
    for row in summary.visits.values():
        del row["gave_up"]
    spike = dataclasses.replace(summary, overload={"spike_users": 40, "spike_s": 20, "baseline_p95_ms": 80,
                                                   "spike_p95_ms": 1000, "recovery_s": 5, "refused_429": 30,
                                                   "other_errors": 0})
    assert report.overload_section(spike, {})[5].endswith("(0 lost, 0 duplicated)")
    assert "0 gave up" in "\n".join(report.visits_section(summary, {}))
    by_totals = dataclasses.replace(summary, audit=None)
    assert "| home | 3 | 1 | 1 | 0 |" in "\n".join(report.visits_section(by_totals, {}))
    assert "gave up" not in "\n".join(report.headline_section(summary, {}))


def test_a_sampled_audit_reports_the_sample_across_the_load_and_the_loss_rate_it_rules_out(iteration):
    results = make_results(iteration)  # 120 visits acknowledged and stored over a load from 1000 s to ~1054 s
    ids = [f"s{n}" for n in range(12)]
    (results / "ledger.json").write_text(json.dumps({
        "format": 5, "sent": {"home": 30}, "acknowledged": {"home": 30}, "gave_up": {}, "unsampled": {"home": 18},
        "sample": {"fraction": 0.4, "planned_visits": 300}, "visits": {"home": {"acknowledged": ids}},
        "sent_at": {"home": {"acknowledged": [1000 + round(4.6 * n) for n in range(12)]}}}))
    (results / "audit.json").write_text(json.dumps({"format": 1, "method": "sample", "why": "a sample read",
                                                    "reads": 12, "read_cost_usd": None, "not_stored": []}))
    summary = publish.publish(results)
    sample = summary.audit["sample"]
    assert sample["loss_rate_bound"] == pytest.approx(1 - 0.05 ** (1 / 12))
    assert sum(part["sampled"] for part in sample["parts"]) == 12 and sample["parts"][-1]["sampled"] > 0
    assert json.loads((results / "summary.json").read_text())["audit"]["sample"]["loss_rate_bound"] == pytest.approx(
        sample["loss_rate_bound"])
    text = (results / "report.md").read_text()
    assert "### The sample of visit ids, across the load" in text and "1 in 2.5 visit ids" in text
    assert "rules out a loss rate above **22.1 %** (95%, one-sided" in text
    rows = [line for line in text.splitlines() if re.match(r"\| [\d.]+-[\d.]+ \|", line)]
    assert len(rows) == 10 and all(line.endswith("| 0 | 0 |") for line in rows)  # a row per tenth, none lost


def test_a_pull_stores_audit_says_the_fates_were_read_from_its_batch_documents():
    from types import SimpleNamespace

    assert report.id_record(SimpleNamespace(settings={"store_mode": "pull"})) == "its batch's document"
    assert report.id_record(SimpleNamespace(settings={"store_mode": "push"})) == "its marker"
    assert report.id_record(SimpleNamespace(settings=None)) == "its marker"  # a run recorded before store modes
    assert report.visits_extras({"stored_unacknowledged": 0, "failed": 0, "unanswered": 0, "refused_stored": 0},
                                True, "its batch's document") == "every fate read from its batch's document"


def test_a_pull_stores_chaos_section_counts_its_refusals_not_push_redeliveries():
    from types import SimpleNamespace

    chaos = {"plan": "every 10 s one of kill-instance", "events": [], "redeliveries": None,
             "deliveries_already_counted": 4,
             "visits": {"acknowledged": 10, "stored": 10, "lost": 0, "duplicated": 0, "dead_lettered": None}}
    pulled = SimpleNamespace(chaos=chaos, load={"start": 0}, settings={"store_mode": "pull"})
    pushed = SimpleNamespace(chaos=chaos, load={"start": 0}, settings={"store_mode": "push"})
    assert "- Messages the pull store refused, their visit already counted (and changed nothing): 4" in \
        report.chaos_section(pulled, ())
    assert not any("push delivery" in line for line in report.chaos_section(pulled, ()))
    assert any(line.startswith("- Redeliveries by the push delivery") for line in report.chaos_section(pushed, ()))

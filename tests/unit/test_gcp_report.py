"""A Google Cloud run's report, offline: the results folder gets its server samples and metrics/*.csv
from the saved Cloud Monitoring responses (tests/fixtures/monitoring, through the GCP target and a
fake client), its Locust files as a local run's; then the report, the plots and the comparison."""
import csv
import json

import pytest
from google.api_core import exceptions

from test_monitoring import DENIED, LOG_METRICS, MINUTE, SUBSCRIPTION, T0, FailingMetricClient, FakeMetricClient
from test_report import assert_plot, make_results
from visitkit.model import cost as visitkit_cost
from visitkit.results import summary as summaries
from visitkit.reports import compare, plots, publish, report
from visitkit.cloud import gcp, monitoring
from visitkit.results.folder import ResultsFolder
from visitkit.paths import ITERATIONS_DIR
from visitkit.settings import load_settings

ITERATION_1 = ITERATIONS_DIR / "iteration-1"

PNG = b"\x89PNG\r\n\x1a\n"
LOAD_OFFSET = T0 + 30 - 1000  # make_results' load runs from 1000 to 1054: move it to T0+30..T0+84


def shift_times(results, offset):
    """Moves make_results' Locust history and convergence polls by `offset` seconds."""
    path = results / "locust_stats_history.csv"
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    for row in rows[1:]:
        row[0] = str(int(row[0]) + offset)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    polls = [json.loads(line) for line in (results / "convergence.jsonl").read_text().splitlines()]
    (results / "convergence.jsonl").write_text(
        "".join(json.dumps({**poll, "time": poll["time"] + offset}) + "\n" for poll in polls))


def make_gcp_results(iteration_dir, name="breakpoint-20260105-000000", started="2026-01-05T00:00:00", client=None,
                     **settings_changes):
    results = make_results(iteration_dir, name, started=started)
    run = json.loads((results / "run.json").read_text())
    settings = json.loads((ITERATION_1 / "settings.tfvars.json").read_text())
    settings.update(settings_changes)
    (results / "run.json").write_text(json.dumps({**run, "target": "gcp", "settings": settings}))
    shift_times(results, LOAD_OFFSET)
    target = gcp.GcpTarget(load_settings(ITERATION_1), ITERATION_1, "visit-counter-test",
                           metrics_client=client or FakeMetricClient(), ingestion_delay=0)
    target.subscription = SUBSCRIPTION
    target.outputs = {monitoring.LOG_METRIC_OUTPUTS[key]: name for key, name in LOG_METRICS.items()}
    samples = target.window_samples(T0 + 25, T0 + 3 * MINUTE - 10, results, now=lambda: T0 + 10 * MINUTE,
                                    sleep=pytest.fail)
    (results / "server-samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return results


@pytest.fixture
def iteration(tmp_path):
    folder = tmp_path / "iterations" / "iteration-1"
    folder.mkdir(parents=True)
    return folder


def test_window_samples_start_with_zero_counters_at_the_window_start(iteration):
    samples = [json.loads(line) for line in
               (make_gcp_results(iteration) / "server-samples.jsonl").read_text().splitlines()]
    assert [s["time"] for s in samples] == [T0, T0 + MINUTE, T0 + 2 * MINUTE, T0 + 3 * MINUTE]
    assert samples[0]["functions"]["inc-counter"]["requests"] == 0
    assert samples[0]["store"]["backlog"] is None


def test_gcp_report_has_the_platform_metrics_and_their_plot(iteration):
    results = make_gcp_results(iteration)
    summary = publish.publish(results)
    text = (results / "report.md").read_text()
    assert text.startswith("# iteration-1: breakpoint test (gcp)")
    section = text.split("## Google Cloud metrics", 1)[1].split("\n## ", 1)[0]
    assert "![latency p50/p95, requests by code class, instances, backlog, Firestore writes](gcp-metrics.png)" in section
    # per function over the window: requests, 429s, 5xx, worst minute's p50 and p95, most instances
    assert "| inc-counter | 5,155 | 480 | 450 | 3 | 192 | 3,072 | 2 |" in section
    assert "1,610 counted, 18 already counted (redeliveries, changed nothing), 1 malformed, 2 failed (500: delivered again); 5 moved" in section
    assert "undelivered messages peak 3,035, oldest unacked message peak 212 s" in section
    assert "Firestore document writes: 3,270 (peak 1,120/min" in section
    for name in ("request_count", "request_latencies", "instance_count", "undelivered_messages",
                 "oldest_unacked_age", "firestore_writes"):
        assert f"`metrics/{name}.csv`" in section
    assert "Server figures: gcp-monitoring" in text
    assert summary.server["inc-counter"]["responses_429"] == 480
    # 5 visits went to the dead-letter topic: not lost, and said so
    assert summary.visits["total"]["dead_lettered"] == 5
    assert "5 dead-lettered" in text and "Dead-lettered: 5 visits" in text
    # the load (T0+30 to T0+84) holds one minute's end, T0+60: its rate needs the zero sample at T0
    assert summary.store["accepted_per_s"] == pytest.approx(1450 / 60)
    for name in ("load.png", "server.png", "gcp-metrics.png"):
        assert (results / name).read_bytes()[:8] == PNG
    assert_plot(results / "gcp-metrics.png", ["C0", "C1", "C2", "C3"])  # one colour per function


def test_gcp_report_has_resources_and_an_estimated_cost(iteration):
    results = make_gcp_results(iteration)
    summary = publish.publish(results)
    text = (results / "report.md").read_text()
    resources = text.split("## Resources", 1)[1].split("\n## ", 1)[0]
    # inc-counter billed 300 s at 0.167 vCPU, mean utilization 0.25, 0.5, 0.75 minute by minute
    assert summary.resources["inc-counter"]["cpu_seconds"] == pytest.approx(0.167 * (60 * .25 + 120 * .5 + 120 * .75))
    assert "| inc-counter | 27.6 |" in resources
    cost = text.split("## Estimated cost", 1)[1].split("\n## ", 1)[0]
    assert "An estimate, not a bill" in cost and visitkit_cost.load_prices()["as_of"] in cost
    # a run recorded before regions were: the infra's default region, São Paulo, Cloud Run Tier 2
    assert "in southamerica-east1 (Cloud Run Tier 2)" in cost and "Left out: network egress" in cost
    assert "| Firestore document writes | 3,270 |" in cost and "**Total**" in cost
    assert summary.cost["total"] > 0
    acknowledged = summary.visits["total"]["acknowledged"]
    assert (f"| **Per million visits** | {acknowledged:,} visits acknowledged | "
            f"**{summary.cost['total'] / acknowledged * 1e6:,.2f}** |") in cost


def test_local_report_has_no_google_cloud_section(iteration):
    results = make_results(iteration)
    summary = publish.publish(results)
    assert "## Google Cloud metrics" not in (results / "report.md").read_text()
    assert summary.platform is None and summary.cost is None
    assert not (results / "gcp-metrics.png").exists()


def test_gcp_metrics_plot_needs_metrics(tmp_path):
    assert plots.plot_gcp_metrics({}, tmp_path / "gcp-metrics.png", "t", None, None) is False
    assert not (tmp_path / "gcp-metrics.png").exists()


def test_compare_puts_a_gcp_run_beside_a_local_one(iteration):
    local = make_results(iteration)
    publish.publish(local)
    cloud = make_gcp_results(iteration)
    publish.publish(cloud)
    header, _, *rows = compare.compare_table([local, cloud]).splitlines()
    assert header == "| figure | iteration-1 (local) | iteration-1 (gcp) |"
    assert "| run | breakpoint 20260101-000000 | breakpoint 20260105-000000 |" in rows
    backlog = next(r for r in rows if r.startswith("| backlog peak"))
    assert backlog.endswith("| 3,035 |")
    # an iteration folder gives its latest run for the target asked for
    header, _, *rows = compare.compare_table([iteration], target="gcp").splitlines()
    assert "| run | breakpoint 20260105-000000 |" in rows


def test_the_cost_is_at_the_prices_of_the_region_the_run_recorded(iteration):
    results = make_gcp_results(iteration)
    run = json.loads((results / "run.json").read_text())
    (results / "run.json").write_text(json.dumps({**run, "region": "us-central1"}))
    iowa = publish.publish(results).cost
    (results / "run.json").write_text(json.dumps({**run, "region": "southamerica-east1"}))
    sao_paulo = publish.publish(results).cost
    assert (iowa["region"], iowa["tier"], sao_paulo["tier"]) == ("us-central1", "1", "2")
    assert sao_paulo["total"] > iowa["total"]
    assert "in southamerica-east1 (Cloud Run Tier 2)" in (results / "report.md").read_text()


def platform_text(results):
    return (results / "report.md").read_text().split("## Google Cloud metrics", 1)[1].split("\n## ", 1)[0]


def test_a_metric_that_could_not_be_read_is_named_in_the_report_and_its_figure_is_empty(iteration):
    client = FailingMetricClient({"dead_lettered": [exceptions.PermissionDenied(DENIED)]})
    results = make_gcp_results(iteration, client=client)
    summary = publish.publish(results)
    section = platform_text(results)
    assert ("- Missing: dead_lettered (pubsub.googleapis.com/subscription/dead_letter_message_count): "
            f"PermissionDenied 403 {DENIED} — leaves empty: dead-lettered visits") in section
    assert "`metrics/missing.json`" in section
    assert "n/a moved to the dead-letter topic" in section  # not "0 moved"
    # the other figures are all there
    assert "| inc-counter | 5,155 | 480 | 450 | 3 | 192 | 3,072 | 2 |" in section
    assert "undelivered messages peak 3,035" in section
    assert summary.visits["total"]["dead_lettered"] is None and summary.headline["visits.dead_lettered"] is None
    assert "dead-lettered" not in (results / "report.md").read_text().split("## Google Cloud metrics")[0]
    # rebuilt from the folder alone (visitkit report RESULTS_DIR): the same
    first = (results / "report.md").read_text()
    (results / "report.md").unlink()
    publish.publish(results)
    assert (results / "report.md").read_text() == first


@pytest.mark.parametrize("query", [q.name for q in monitoring.QUERIES])
def test_any_one_query_failing_still_gives_a_report_that_names_it(iteration, query):
    client = FailingMetricClient({query: [exceptions.Forbidden("no")]})
    results = make_gcp_results(iteration, client=client)
    assert (results / "metrics" / "missing.json").exists()
    summary = summaries.summarize(ResultsFolder(results).load())
    text = report.render(summary)
    assert f"- Missing: {query} (" in text and "Forbidden 403 no — leaves empty: " in text
    assert "## Estimated cost" in text
    if query in summaries.COST_QUERIES:
        assert f"{query}: its Cloud Monitoring metric could not be read, counted as 0" in text


def test_every_query_says_what_it_leaves_empty():
    assert set(report.EMPTIED) == {q.name for q in (*monitoring.QUERIES, *monitoring.PULL_QUERIES)}


def test_cpu_figures_are_empty_not_zero_without_the_utilizations(iteration):
    client = FailingMetricClient({"cpu_utilizations": [exceptions.PermissionDenied(DENIED)]})
    summary = publish.publish(make_gcp_results(iteration, client=client))
    assert summary.resources["inc-counter"]["cpu_seconds"] is None
    assert summary.resources["inc-counter"]["memory_peak_mb"] is not None
    assert summary.cpu_ms_per_request == {}


def test_without_a_dead_letter_topic_dead_lettered_is_not_applicable(iteration):
    results = make_gcp_results(iteration, dead_letter=False)
    summary = publish.publish(results)
    section = platform_text(results)
    assert ("- Deployed with `dead_letter: false`: no dead-letter topic: a delivery that always fails is retried "
            "until its message expires (message_retention_seconds, ") in section
    assert "and is not counted as dead-lettered; dead-lettered: n/a (not applicable)" in section
    assert "no dead-letter topic (dead-lettered: n/a)" in section and "moved to the dead-letter topic" not in section
    assert summary.visits["total"]["dead_lettered"] is None and summary.platform["dead_lettered"] is None
    assert "Dead-lettered:" not in (results / "report.md").read_text()


def test_with_a_dead_letter_topic_nothing_is_said_of_it(iteration):
    results = make_gcp_results(iteration, dead_letter=True)
    publish.publish(results)
    assert "dead_letter: false" not in platform_text(results)
    assert "5 moved to the dead-letter topic" in platform_text(results)

"""`visitkit docs`: the docs' figures written from the results they cite, and `--check` naming what drifted."""
import json
from pathlib import Path

import pytest

from visitkit.paths import ROOT
from visitkit.reports import docs, readme
from visitkit.cli import main
from visitkit.results.records import Summary

# A committed summary.json (the docs read each one through the record), with the figures the template cites
COMMITTED = json.loads((ROOT / "iterations/iteration-1/results/breakpoint-20261125-191233/summary.json").read_text())
SUMMARY = {**COMMITTED, "test": "breakpoint", "results_dir": "breakpoint-20260101-000000",
           "verdict": {"outcome": "supported"},
           "store": {"throughput_per_s": 26.10374},
           "headline": {"knee_users": 210, "knee_rps": 160.86, "first_failure_users": None, "first_failure_rps": None,
                        "rps_peak": 168.5, "p95_ceiling_ms": 6600.0, "slowest_function": "inc-counter",
                        "convergence_s": 121.0, "extra_min_per_min": 0.78, "visits.acknowledged": 7043,
                        "visits.stored": 7043, "visits.lost": 0, "visits.duplicated": 0}}
TEMPLATE = """# Iteration

<!-- figures
r: results/breakpoint-20260101-000000
---
| knee | {r.summary.headline.knee_users:,} users, {r.summary.headline.knee_rps:,.0f} RPS ([report]({r.report})) |
| drain | {r.summary.store.throughput_per_s:.1f} msg/s, {r.summary.store.throughput_per_s / 13.3:.2f}x |
| first failure | {r.summary.headline.first_failure_users} |
-->
<!-- /figures -->

Prose after the block stays as it is.
"""


@pytest.fixture
def iteration(tmp_path):
    folder = tmp_path / "results" / SUMMARY["results_dir"]
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(SUMMARY))
    (folder / "report.md").write_text("# report\n")
    (folder / "load.png").write_bytes(b"")
    doc = tmp_path / "README.md"
    doc.write_text(TEMPLATE)
    return doc


def test_write_fills_the_block_from_its_results_and_leaves_the_rest(iteration):
    assert docs.write([iteration]) == [iteration]
    text = iteration.read_text()
    assert ("| knee | 210 users, 161 RPS ([report](results/breakpoint-20260101-000000/report.md)) |\n"
            "| drain | 26.1 msg/s, 1.96x |\n| first failure | n/a |\n<!-- /figures -->") in text
    assert text.endswith("Prose after the block stays as it is.\n")
    assert docs.write([iteration]) == []  # written once, nothing left to write
    assert docs.check([iteration]) == ([], 1)


def test_check_names_a_figure_changed_by_hand(iteration):
    docs.write([iteration])
    iteration.write_text(iteration.read_text().replace("| drain | 26.1 msg/s", "| drain | 28.6 msg/s"))
    messages, _ = docs.check([iteration])
    assert len(messages) == 1
    assert "{r.summary.store.throughput_per_s:.1f} reads '28.6', its results give '26.1'" in messages[0]
    assert messages[0].startswith(f"{iteration}:11:")  # the doc's line of the figure


def test_check_fails_when_the_results_change_under_the_doc(iteration):
    docs.write([iteration])
    summary_path = iteration.parent / "results" / SUMMARY["results_dir"] / "summary.json"
    summary_path.write_text(json.dumps({**SUMMARY, "headline": {**SUMMARY["headline"], "knee_users": 1210}}))
    messages, _ = docs.check([iteration])
    assert messages == [f"{iteration}:10: {{r.summary.headline.knee_users:,}} reads '210', its results give '1,210'"]


def test_the_command_exits_non_zero_on_a_drifted_figure(iteration, capsys):
    docs.write([iteration])
    assert main(["docs", "--check", str(iteration)]) == 0
    iteration.write_text(iteration.read_text().replace("210 users", "211 users"))
    assert main(["docs", "--check", str(iteration)]) == 1
    assert "reads '211', its results give '210'" in capsys.readouterr().out


def test_a_missing_figure_or_source_is_named(iteration):
    iteration.write_text(TEMPLATE.replace("knee_users:,", "knee_user:,"))
    with pytest.raises(docs.DocsError, match=r"README.md:3: r.summary.headline has no 'knee_user'"):
        docs.write([iteration])
    iteration.write_text(TEMPLATE.replace("r: results/", "r: gone/"))
    messages, _ = docs.check([iteration])  # the check goes on past a block it cannot write, naming it
    assert len(messages) == 1 and messages[0].endswith("README.md:3: no results folder gone/breakpoint-20260101-000000")


@pytest.mark.parametrize("expression", ["__import__('os')", "r.summary.__class__", "open('x')", "[x for x in r]"])
def test_a_template_may_only_read_figures(iteration, expression):
    iteration.write_text(TEMPLATE.replace("{r.summary.headline.first_failure_users}", "{" + expression + "}"))
    with pytest.raises(docs.DocsError):
        docs.write([iteration])


def test_links_that_lead_nowhere_are_named_but_not_in_templates_or_code(iteration):
    docs.write([iteration])
    with iteration.open("a") as doc:
        doc.write("[fine](results/breakpoint-20260101-000000/report.md#report) [web](https://example.com)\n"
                  "[gone](results/breakpoint-20250101-000000/report.md)\n```\n[example](nowhere.md)\n```\n")
    messages, _ = docs.check([iteration])
    assert messages == [f"{iteration}:17: the link results/breakpoint-20250101-000000/report.md leads nowhere"]


def test_an_example_in_a_code_fence_is_not_a_block(tmp_path):
    doc = tmp_path / "guide.md"
    doc.write_text("~~~\n<!-- figures\nr: results/none\n---\n{r.summary.x}\n-->\n<!-- /figures -->\n~~~\n"
                   "Inline, `<!-- figures run: results/X -->` is prose.\n")
    assert docs.check([doc]) == ([], 0)


def test_the_runners_latest_run_block_is_what_docs_writes(iteration):
    docs.write([iteration])
    readme.update_readme(iteration, readme.latest_block(Summary.from_json(SUMMARY)))
    text = iteration.read_text()
    assert "## Latest local run\n\n<!-- figures run: results/breakpoint-20260101-000000 -->" in text
    assert docs.check([iteration]) == ([], 2)
    later = Summary.from_json({**SUMMARY, "results_dir": "breakpoint-20260102-000000"})
    readme.update_readme(iteration, readme.latest_block(later))
    assert iteration.read_text().count("<!-- figures run:") == 1


def test_a_link_to_a_heading_that_is_not_there_is_named(tmp_path):
    (tmp_path / "twin.md").write_text("# The twin\n\n## Where it stands: the model, the twin and the study\n")
    doc = tmp_path / "README.md"
    doc.write_text("[ok](twin.md#where-it-stands-the-model-the-twin-and-the-study) [here](#readme)\n"
                   "# Readme\n[gone](twin.md#where-it-stood)\n")
    assert docs.check([doc])[0] == [f"{doc}:3: the link twin.md#where-it-stood names no heading of twin.md"]


def test_a_cited_folder_git_does_not_track_is_named(iteration):
    docs.write([iteration])
    folder = iteration.parent / "results" / SUMMARY["results_dir"]
    tracked = {iteration, *folder.iterdir()}
    assert docs.check([iteration], tracked)[0] == []
    from visitkit import paths

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(docs, "ROOT", iteration.parent)
        patch.setattr(paths, "ROOT", iteration.parent)
        messages, _ = docs.check([iteration], {iteration})
    assert messages[0].endswith(f"cites {folder.relative_to(iteration.parent)}, which git does not track: "
                                "commit it, or cite a committed one")
    assert any("the link results/breakpoint-20260101-000000/report.md leads to a file git does not track" in message
               for message in messages)


@pytest.mark.parametrize("broken, error", [
    ("<!-- /figures -->\n", "a figures marker that opens or closes no block"),  # the end lost
    ("<!-- figures\nr: results/breakpoint-20260101-000000\n", "a figures marker that opens or closes no block"),
])
def test_a_marker_that_opens_or_closes_no_block_is_an_error(iteration, broken, error):
    iteration.write_text(TEMPLATE.replace("<!-- /figures -->\n", "") if broken.startswith("<!-- /")
                         else broken + TEMPLATE)
    with pytest.raises(docs.DocsError, match=error):
        docs.blocks(iteration)


@pytest.mark.parametrize("placeholder, message", [
    ("{round(r.summary.store.throughput_per_s, ndigits=1)}", "not allowed"),
    ("{r.summary.headline.knee_users / 0}", "ZeroDivisionError"),
    ("{r.report.x}", "AttributeError"),
])
def test_a_template_error_names_its_placeholder(iteration, placeholder, message):
    iteration.write_text(TEMPLATE.replace("{r.summary.headline.first_failure_users}", placeholder))
    messages, _ = docs.check([iteration])
    assert len(messages) == 1 and placeholder in messages[0] and message in messages[0]


def test_a_function_of_a_missing_figure_reads_n_a(iteration):
    iteration.write_text(TEMPLATE.replace("{r.summary.headline.first_failure_users}",
                                          "{max(r.summary.headline.first_failure_users, 1)}"))
    docs.write([iteration])
    assert "| first failure | n/a |" in iteration.read_text()


@pytest.mark.parametrize("sources, message", [("r results/x", "alias: folder"), ("r: .\nr: .", "each alias once"),
                                              ("1r: .", "alias: folder")])
def test_a_malformed_source_is_refused(iteration, sources, message):
    iteration.write_text(TEMPLATE.replace("r: results/breakpoint-20260101-000000", sources))
    with pytest.raises(docs.DocsError, match=message):
        docs.write([iteration])


def test_an_unknown_kind_is_named(iteration):
    iteration.write_text("<!-- figures benchmarks: results -->\n<!-- /figures -->\n")
    with pytest.raises(docs.DocsError, match="unknown kind 'benchmarks'"):
        docs.write([iteration])


def test_one_line_more_is_one_message_not_one_per_line_after_it(iteration):
    docs.write([iteration])
    iteration.write_text(iteration.read_text().replace("| drain |", "| extra |\n| drain |", 1)
                         .replace("| knee | 210 users", "| knee | 215 users"))
    messages, _ = docs.check([iteration])
    assert len(messages) == 2 and "reads '215', its results give '210'" in messages[0]
    assert "['| extra |']" in messages[1]


def test_the_latest_run_block_is_the_one_under_its_section(iteration):
    iteration.write_text("# It\n\n## On the twin\n\n<!-- figures run: results/breakpoint-20260101-000000 -->\n"
                         "<!-- /figures -->\n\n## Latest local run\n\nNone yet.\n")
    later = Summary.from_json({**SUMMARY, "results_dir": "breakpoint-20260102-000000"})
    readme.update_readme(iteration, readme.latest_block(later))
    text = iteration.read_text()
    assert text.count("## Latest local run") == 1 and text.count("<!-- figures run:") == 2
    assert text.index("breakpoint-20260101-000000") < text.index("## Latest local run") < text.index("20260102")


def test_links_with_titles_angle_brackets_and_repeated_headings_are_read_as_github_does(tmp_path):
    (tmp_path / "log.md").write_text("# Log\n## Notes\n## Notes\n")
    doc = tmp_path / "README.md"
    doc.write_text('[a](log.md#notes-1 "the second") [b](<log.md>) [c](log.md#notes-2) [d](gone.md "title")\n')
    assert docs.check([doc])[0] == [f"{doc}:1: the link log.md#notes-2 names no heading of log.md",
                                    f"{doc}:1: the link gone.md leads nowhere"]


def test_the_cost_table_shows_every_iteration_or_those_named():
    from visitkit.paths import ROOT

    every = docs.cost_table(ROOT / "iterations", None, "study").splitlines()
    named = docs.cost_table(ROOT / "iterations", None, "study iteration-3 iteration-6").splitlines()
    assert [row.split(" |")[0] for row in named[2:]] == ["| iteration-3", "| iteration-6"]
    assert named[:2] == every[:2] and set(named[2:]) <= set(every[2:])


class HandPrediction:
    """What capacity.predict gives, with figures chosen by hand so that what follows from them can be worked out
    on paper: as the object (cost_table) and as_dict (study_convergence_table)."""

    def __init__(self, **figures):
        self.figures = figures
        self.__dict__.update(figures)

    def as_dict(self):
        return dict(self.figures)


def test_the_study_convergence_table_applies_the_model_to_each_of_the_studys_breakpoints(tmp_path, monkeypatch):
    """The breakpoint ramps 1 user/s for 15 min. With a 4 s cycle a user asks for a page every 4 s, so t s in
    the visits published are min(t / 4, 100) a second (100 pages/s: the knee's 300 RPS over the 3 public
    functions) and the store drains 40 a second: nothing is left until t = 160, then (t - 160) / 4 more a second
    until t = 400 (1 + ... + 239 quarters: 7,170 visits), then 60 a second for the last 500 s (30,000): 37,170
    visits left at the end, drained in 37,170 / 40 = 929.25 s = 15.5 min, 929.25 / 900 = 1.03 extra minutes per
    minute of load, 74% less than the study's 4.00."""
    import shutil

    from visitkit.model import capacity
    from visitkit.paths import ROOT

    for name, study in (("iteration-1", {"breakpoint_minutes": 15, "extra_min_per_min": 4.0, "convergence": "an hour"}),
                        ("iteration-4", {"knee_users": 1})):  # no breakpoint minutes: no row
        (tmp_path / name).mkdir()
        shutil.copy(ROOT / "iterations" / name / "settings.tfvars.json", tmp_path / name)
        (tmp_path / name / "study.json").write_text(json.dumps(study))
    asked = []
    monkeypatch.setattr(capacity, "predict", lambda settings, profile: asked.append((settings.source, profile.name))
                        or HandPrediction(knee_rps=300.0, cycle_s=4.0, drain_per_s=40.0))
    rows = docs.study_convergence_table(tmp_path, None, "study").splitlines()
    assert rows[2:] == ["| iteration-1 | 15 min | an hour | 37,170 visits, 15.5 min | 4.00 / 1.03 (-74%) |"]
    assert [(Path(source).parent.name, profile) for source, profile in asked] == [("iteration-1", "study")]


def test_the_cost_table_has_a_logging_column_that_sums_with_the_rest():
    from visitkit.paths import ROOT

    header, _, row = docs.cost_table(ROOT / "iterations", None, "study iteration-4").splitlines()
    assert header.count("(Cloud Run / Firestore / Pub/Sub / Logging / Egress)") == 2
    for cell in row.split(" | ")[2:]:
        total, parts = cell.rstrip(" |").split(" (")
        parts = [float(part) for part in parts.rstrip(")").split(" / ")]
        assert len(parts) == 5 and float(total) == pytest.approx(sum(parts), abs=0.03)


# Prices chosen by hand for the cost table's figures (the shape of scripts/visitkit/cloud/prices.json): a Tier 1
# region and a Tier 2 one at twice Cloud Run's instance rates.
HAND_PRICES = {
    "as_of": "2026-01-01", "currency": "USD", "left_out": {},
    "cloud_run": {"per_million_requests": 0.5, "region_tiers": {"us-central1": "1", "southamerica-east1": "2"},
                  "tiers": {"1": {"per_vcpu_second": 1.2e-5, "per_gib_second": 0.4e-5, "idle_per_vcpu_second": 0,
                                  "idle_per_gib_second": 0},
                            "2": {"per_vcpu_second": 2.4e-5, "per_gib_second": 0.8e-5, "idle_per_vcpu_second": 0,
                                  "idle_per_gib_second": 0}}},
    "firestore": {"regions": {
        "us-central1": {"per_100k_reads": 0.03, "per_100k_writes": 0.09, "per_100k_deletes": 0.01,
                        "per_gib_month": 0.15},
        "southamerica-east1": {"per_100k_reads": 0.054, "per_100k_writes": 0.162, "per_100k_deletes": 0.018,
                               "per_gib_month": 0.27}}},
    "pubsub": {"per_tib": 40.0, "min_bytes_per_message": 1000},
    "cloud_logging": {"per_gib": 0.5, "free_gib_per_project_month": 50},
    "network_egress": {"per_gib": {"us-central1": 0.1, "southamerica-east1": 0.2}},
}


def test_the_cost_table_prices_a_million_visits_at_the_knee(tmp_path, monkeypatch):
    """One iteration of four functions, each 2 instances of 1 vCPU and 1 GiB, serving 400 requests/s
    (store-inc-counter 200), get-counter caching 10 s, at a knee of 1,234.4 visits/s: a million visits,
    worked out by hand from the prices above."""
    from visitkit.model import capacity, cost, response_bytes

    (tmp_path / "iteration-9").mkdir()
    (tmp_path / "iteration-9" / "settings.tfvars.json").write_text(json.dumps({
        "shards_per_page": 2, "cache_ttl_seconds": 10, "functions": {
            name: {"max_instances": 2, "concurrency": 10, "cpu": "1", "memory": "1Gi"}
            for name in ("serve-page", "get-counter", "inc-counter", "store-inc-counter")}}))
    rates = {"serve-page": 400.0, "get-counter": 400.0, "inc-counter": 400.0, "store-inc-counter": 200.0}
    # each request holds its slot 10 / 200 s (the store's 10 / 100): past what the instances serve at the knee's
    # rate, billed for serving them all
    monkeypatch.setattr(capacity, "predict", lambda settings, profile: HandPrediction(
        knee_visits_per_s=1234.4, reads_per_visit=1, capacity_rps=rates,
        busy_ms={name: 10 / (rate / 2) * 1000 for name, rate in rates.items()}))
    monkeypatch.setattr(cost, "load_prices", lambda *_: HAND_PRICES)

    def cell(region):
        run = HAND_PRICES["cloud_run"]["tiers"][HAND_PRICES["cloud_run"]["region_tiers"][region]]
        firestore = HAND_PRICES["firestore"]["regions"][region]
        # a million requests to each function, each instance busy 1 s per 200 (store: 100) of them
        instance_s = 3 * 1e6 / 200 + 1e6 / 100
        cloud_run = instance_s * (run["per_vcpu_second"] + run["per_gib_second"]) + 4 * 0.5
        # get-counter's cache: 2 instances x 5 pages / 10 s = 1 read a second at 1,234.4 visits a second
        reads = round(1e6 / 1234.4)
        marker_gib_months = 1e6 * cost.marker_bytes() / 2**30 * 7 / (365.25 / 12)  # kept 7 days
        firestore_usd = (reads * firestore["per_100k_reads"] + 2e6 * firestore["per_100k_writes"]
                         + 1e6 * firestore["per_100k_deletes"]) / 1e5 + marker_gib_months * firestore["per_gib_month"]
        pubsub = 2e6 * 1000 / 2**40 * 40.0  # one message published, one delivered, 1 KB each at least
        logging = (4e6 * cost.REQUEST_LOG_ENTRY_BYTES + 1e6 * cost.STORE_LINE_ENTRY_BYTES) / 2**30 * 0.5
        egress = 1e6 * response_bytes.per_visit(1) / 2**30 * HAND_PRICES["network_egress"]["per_gib"][region]
        parts = (cloud_run, firestore_usd, pubsub, logging, egress)
        return f"{sum(parts):.2f} ({' / '.join(f'{part:.2f}' for part in parts)})"

    # on paper: 25,000 instance-s x 16e-6 + 4 x 0.50; 810 reads, 2M writes, 1M deletes + 416 B markers 7 days;
    # 2 GB of messages; 6.1 GiB of log entries; a page, inc-counter's answer and get-counter's, 0.1 USD a GiB
    assert cell("us-central1").endswith(" (2.40 / 1.91 / 0.07 / 3.05 / 0.48)")
    rows = docs.cost_table(tmp_path, None, "study").splitlines()
    assert rows[2:] == [f"| iteration-9 | 1,234 | {cell('southamerica-east1')} | {cell('us-central1')} |"]


def test_what_iteration_5_holds_is_written_from_the_plan():
    from visitkit.model import capacity
    from visitkit.paths import ROOT
    from visitkit.settings import load_settings
    from visitkit.twin.profile import load_profile

    iteration = ROOT / "iterations" / "iteration-5"
    settings, profile = load_settings(iteration), load_profile("study")
    text = " ".join(docs.hold_text(iteration, None, "study 10000 60 us-central1").split())
    knee = capacity.predict(settings, profile, dwell_s=60).knee_visits_per_s
    needed = capacity.instances_to_hold(settings, profile, 10_000, 60)["get-counter"]
    assert f"these settings hold **{knee:,.0f} visits/s**, {knee / 10_000:.0%} of 10,000" in text
    assert f"get-counter needs **{needed} instances** (20 now)" in text
    assert "the largest item is Cloud Logging" in text
    assert max(len(line) for line in docs.hold_text(iteration, None, "study 10000").splitlines()) <= docs.PROSE_WIDTH


def test_a_judgement_about_the_cpu_target_follows_the_figures():
    from visitkit.paths import ROOT

    iteration = ROOT / "iterations" / "iteration-5"
    assert "all below Cloud Run's 60% CPU scaling target" in " ".join(docs.hold_text(iteration, None, "study 10000").split())
    # twice the rate: store-inc-counter's 40 instances at 1.9 ms a delivery are 95 % busy
    busier = " ".join(docs.hold_text(iteration, None, "study 20000").split())
    assert "95% (store-inc-counter)" in busier and "store-inc-counter at or above Cloud Run's 60%" in busier


def test_the_cost_items_are_ranked_as_they_are_priced():
    from visitkit.model import capacity, cost
    from visitkit.paths import ROOT
    from visitkit.settings import load_settings
    from visitkit.twin.profile import load_profile

    settings = load_settings(ROOT / "iterations" / "iteration-4")
    _, found = cost.cost_per_million(settings, capacity.predict(settings, load_profile("study")), cost.load_prices(),
                                        "us-central1")
    ranked = sorted(cost.by_service(found).items(), key=lambda pair: -pair[1])
    text = " ".join(docs.cost_items(ROOT / "iterations", None, "study iteration-4").split())
    assert f"in us-central1 {ranked[0][0]} {ranked[0][1]:,.2f}, {ranked[1][0]} {ranked[1][1]:,.2f}," in text


def test_the_p95_check_sets_the_latency_models_p95_beside_each_runs_and_states_the_band(tmp_path, monkeypatch):
    """inc-counter as 2 instances of 1 request at once, each request holding its slot 50 ms (40 requests/s in
    all); two open-model runs at 20 (paced) and 30 visits/s (at random) and a closed one whose users made 1,200
    inc-counter requests in 60 s (20/s). An M/M/2 queue waits with Erlang C's C = a^2 / (2 + a), a = rate x 50 ms, and a wait's
    q-quantile is ln(C / (1 - q)) / (40 - rate) s: worked out on paper below."""
    from visitkit.model import capacity

    iteration = tmp_path / "iteration-9"
    iteration.mkdir()
    (iteration / "settings.tfvars.json").write_text(json.dumps({
        "shards_per_page": 2, "cache_ttl_seconds": 10, "functions": {
            name: {"max_instances": 2, "concurrency": 1, "cpu": "1", "memory": "1Gi"}
            for name in ("serve-page", "get-counter", "inc-counter", "store-inc-counter")}}))
    monkeypatch.setattr(capacity, "predict", lambda settings, profile, dwell_s=0: HandPrediction(
        capacity_rps={"inc-counter": 40.0}, busy_ms={"inc-counter": 50.0}))
    for run, rate, p50, p95, cpu in (("load-1", 20.0, 50.0, 174.0, 41.6), ("load-2", 30.0, 80.0, 290.0, None),
                                     ("endurance-1", None, 60.0, 130.5, None)):
        (iteration / "results" / run).mkdir(parents=True)
        (iteration / "results" / run / "summary.json").write_text(json.dumps({
            "profile": {"name": "study"}, "machine": {"peak": {"cpu_percent": cpu, "cores": 2} if cpu else None},
            "load": {"seconds": 60.0, "arrival_rate": {"gaps": "random"} if run == "load-2" else None},
            "client": {"inc-counter": {"requests": 1200}},
            "server": {"inc-counter": {"service_ms": 48.04}} if cpu else {},
            "headline": {"arrival_rate.achieved": rate, "users_max": 80, "p50_ms.inc-counter": p50,
                         "p95_ms.inc-counter": p95}}))

    text = docs.p95_check_table(iteration, "it", "study inc-counter results/load-1 results/load-2 results/endurance-1")
    rows = text.splitlines()
    # 20/s: a = 1, C = 1/3 (below 1/2: no wait at the median); p95 wait ln(20 / 3) / 20 s = 94.9 ms
    assert rows[2] == ("| [load-1](it/results/load-1/report.md) | paced | 20.0 | 20.0 | 2 | 50.0 / 48.0 ms | 0.50 | "
                       "50 / 50 ms | 145 / 174 ms | 1.20x | 42 % of 200 % |")
    # 30/s: a = 1.5, C = 2.25 / 3.5 = 0.643; p50 wait ln(1.286) / 10 s = 25.1 ms, p95 wait ln(12.86) / 10 s = 255 ms
    assert rows[3] == ("| [load-2](it/results/load-2/report.md) | random | 30.0 | 30.0 | 2 | 50.0 / n/a ms | 0.75 | "
                       "75 / 80 ms | 305 / 290 ms | 0.95x | n/a |")
    # the closed run: 1,200 requests in 60 s, 20/s, as load-1; 130.5 / 144.86 = 0.90
    assert rows[4] == ("| [endurance-1](it/results/endurance-1/report.md) | 80 users | 20.0 | 20.0 | 2 | 50.0 / n/a ms | "
                       "0.50 | 50 / 60 ms | 145 / 130 ms | 0.90x | n/a |")
    assert " ".join(rows[6:]) == (
        "The band: with paced arrivals at a utilisation up to 0.67 (tune's headroom of 1.5x) (one run) the measured "
        "inc-counter p95 is 1.20x the model's: the model understates the p95 at every rate; with arrivals at random "
        "(Poisson) at a utilisation above 0.67 (tune's headroom of 1.5x) (one run) the measured inc-counter p95 is "
        "0.95x the model's: the model overstates the p95 at every rate; with users thinking at random at a "
        "utilisation up to 0.67 (tune's headroom of 1.5x) (one run) the measured inc-counter p95 is 0.90x the "
        "model's: the model overstates the p95 at every rate.")
    one = " ".join(docs.p95_check_table(iteration, "it", "study inc-counter results/load-1").splitlines()[4:])
    assert one.endswith("is 1.20x the model's: the model understates the p95 at every rate.")
    with pytest.raises(docs.DocsError, match="profile study, not none"):
        docs.p95_check_table(iteration, "it", "none inc-counter results/load-1")


def test_the_scale_out_tables_set_a_spikes_measured_lag_beside_the_models_with_the_band(tmp_path):
    """The same spike twice: autoscaled (serve-page and get-counter between 0 and 6 instances of 10 requests at once;
    inc-counter and store-inc-counter kept at 2), and with min_instances = max_instances. Each run's traffic is
    test_scaleout's first spike: 2 then 400 requests/s of 50 ms from the one instance up at the step, a start of
    0.44 s (the benchmark) on 2 cores, which the model meets at 1.5 s. serve-page measured 0.8 s (0.53x),
    get-counter 3.3 s (2.20x); at min = max the model's lag is 0 and so was each measured one. Given serve-page's
    own starts at the step, 900 ms, requests of 75 ms meanwhile, its summary's model gives 1.25 s (0.64x:
    test_scaleout works it by hand); get-counter started none at the step: its band is its quiet one's."""
    functions = {"serve-page": {"max_instances": 6, "concurrency": 10, "cpu": "1"},
                 "get-counter": {"max_instances": 6, "concurrency": 10, "cpu": "1"},
                 "inc-counter": {"max_instances": 2, "min_instances": 2, "concurrency": 1},
                 "store-inc-counter": {"max_instances": 2, "min_instances": 2, "concurrency": 1}}
    warm = {name: {**spec, "min_instances": spec["max_instances"]} for name, spec in functions.items()}
    traffic = {"rps_before": 2.0, "rps_spike": 400.0, "service_ms": 50.0, "instances_max": 6}

    def run(folder, settings, lags, instances, p95, cold_starts=None, starts=None):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "run.json").write_text(json.dumps({"machine": {"cores": 2}}))
        rows = {name: {**traffic, "lag_s": lag, "instances_at_start": instances[0], "instances_end": instances[1],
                       "p95_first_ms": p95[0], "p95_steady_ms": p95[1], **(starts or {}).get(name, {})}
                for name, lag in lags.items()}
        (tmp_path / folder / "summary.json").write_text(json.dumps({
            "test": "spike", "shape": "spike base_users=20", "profile": {"name": "none"},
            "settings": {"shards_per_page": 2, "cache_ttl_seconds": 10, "scaling": "auto", "functions": settings},
            "cold_starts": cold_starts, "scale_out": {"start": 61.0, "end": 93.0, "functions": rows}}))

    run("it-4/results/spike-1", functions, {"serve-page": 0.8, "get-counter": 3.3, "inc-counter": None}, (1, 5),
        (850.0, 120.0), {"serve-page": {"during_load": 3, "under_load_ms_median": 900.0, "under_load_ms_max": 1200.0},
                         "get-counter": {"during_load": 0, "under_load_ms_median": None, "under_load_ms_max": None}},
        {"serve-page": {"start_step_ms": 900.0, "service_starting_ms": 75.0, "model_lag_s": 1.25}})
    run("it-4-warm/results/spike-2", warm, {"serve-page": 0.0, "get-counter": 0.0, "inc-counter": None}, (6, 6),
        (130.0, 118.0))
    (tmp_path / "cold-start-1").mkdir()
    (tmp_path / "cold-start-1" / "benchmark.json").write_text(json.dumps({"functions": {
        "serve-page": {"first_2xx_ms": 440.0}, "get-counter": {"first_2xx_ms": 440.0}}}))

    text = docs.scale_out_tables(tmp_path, "runs", "it-4/results/spike-1 it-4-warm/results/spike-2 cold-start-1")
    page_head, page, _, counter, band = text.split("\n\n")
    assert page_head == ("**serve-page**: at most 6 instances of 10 requests at once; the model starts one in 440 ms "
                         "(cold-start-1, quiet)")
    assert page.splitlines() == [
        "| | [spike-1](runs/it-4/results/spike-1/report.md), from min_instances 0 | "
        "[spike-2](runs/it-4-warm/results/spike-2/report.md), min_instances = max_instances |", "|---|---:|---:|",
        "| instances at the spike's step / end / most | 1 / 5 / 6 | 6 / 6 / 6 |",
        "| cold starts in the load (under load) | 3 (median 900 ms, slowest 1,200 ms) | 0 |",
        "| p95 in its first 10 s / steady | 850 / 120 ms | 130 / 118 ms |",
        "| scale-out lag measured / model's, and their ratio | 0.8 s / 1.5 s: 0.53x | 0.0 s / 0.0 s |",
        "| the same, the model given the run's own starts and service time at the step | 0.8 s / 1.2 s (starts of "
        "900 ms, service 75 ms meanwhile): 0.64x | n/a |"]
    assert counter.splitlines()[-2] == "| scale-out lag measured / model's, and their ratio | 3.3 s / 1.5 s: 2.20x | " \
                                       "0.0 s / 0.0 s |"
    assert "| cold starts in the load (under load) | 0 | 0 |" in counter
    assert " ".join(band.split()) == (
        "The measured scale-out lag against the model's given the run's own starts and service time at the step "
        "(its quiet starts where none started), in the band of 0.5x to 2x (the autoscaled run): serve-page within "
        "(its starts at the step took 2.0x the quiet start, and a request held an instance 1.50x as long as steady "
        "while they started); get-counter outside (2.20x).")
    # the model starts from the instances the run had up at the step: 2 take the spike's 20 in flight at once
    from visitkit.model.scaleout import Limits
    row = {**traffic, "instances_at_start": 2}
    assert docs.predicted_lag(Limits(0, 6, 10, 1.0), row, 50.0, 440.0, 2) == 0.0
    with pytest.raises(docs.DocsError, match="does not keep serve-page, get-counter at min_instances = max_instances"):
        docs.scale_out_tables(tmp_path, "runs", "it-4/results/spike-1 it-4/results/spike-1 cold-start-1")

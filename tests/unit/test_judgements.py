"""The words a docs template renders from its figures (issue #40): each judgement follows the figures it is
about, on both sides of its threshold, and a real template's words change with its cited run."""
import json
import re
import shutil
from pathlib import Path

import pytest

from visitkit.reports import docs

REPO = Path(__file__).resolve().parents[2]


def test_times_is_the_first_figure_as_a_multiple_of_the_second():
    assert docs.times(3, 2) == "1.50x"
    assert docs.times(2, 3) == "0.67x"
    assert docs.times(6245, 220, 0) == "28x"


@pytest.mark.parametrize("ratio, words", [
    (2.3, "more than twice"), (2.11, "more than twice"),
    (2.09, "about twice"), (2.0, "about twice"), (1.91, "about twice"),
    (1.89, "less than twice"), (1.51, "less than twice"),
])
def test_compare_ratio_says_about_twice_within_five_percent_of_two(ratio, words):
    assert docs.compare_ratio(ratio) == words


@pytest.mark.parametrize("ours, study, tolerance, words", [
    ("supported", "supported", 0, "as in the study"),
    ("not supported", "supported", 0, "unlike the study"),
    (100, 100, 0, "as in the study"),
    (101, 100, 0, "unlike the study"),
    (109, 100, 0.1, "as in the study (within 10 %)"),
    (91, 100, 0.1, "as in the study (within 10 %)"),
    (111, 100, 0.1, "unlike the study (more than 10 % apart)"),
    (89, 100, 0.1, "unlike the study (more than 10 % apart)"),
])
def test_study_match_holds_within_the_tolerance_it_states(ours, study, tolerance, words):
    assert docs.study_match(ours, study, tolerance) == words


def test_as_in_names_whom_it_compares_with():
    assert docs.as_in("inc-counter", "inc-counter", 0, "iteration 4") == "as in iteration 4"
    assert docs.as_in("store-inc-counter", "inc-counter", 0, "iteration 4") == "unlike iteration 4"
    assert docs.as_in(37.4, 37, 0.05, "the model") == "as in the model (within 5 %)"
    assert docs.as_in(40, 37, 0.05, "the model") == "unlike the model (more than 5 % apart)"


@pytest.mark.parametrize("value, ceiling, words", [(1.0, 1.3, "reached"), (1.3, 1.3, "reached"), (1.31, 1.3, "not reached")])
def test_a_goal_is_a_ceiling(value, ceiling, words):
    assert docs.goal(value, ceiling) == words


@pytest.mark.parametrize("pairs, words", [
    ((1.06, 1.3, 1.14, 1.3, 1.88, 2, 2.77, 2.5), "the first three goals are reached, the last is not"),
    ((1.06, 1.3, 1.14, 1.3, 2.2, 2, 2.77, 2.5), "the first two goals are reached, the last two are not"),
    ((1.06, 1.3, 1.4, 1.3, 1.88, 2, 2.77, 2.5), "the first and third goals are reached, the second and fourth are not"),
    ((1.5, 1.3, 1.14, 1.3, 1.88, 2), "the last two goals are reached, the first is not"),
    ((1.06, 1.3, 1.14, 1.3, 1.88, 2, 2.4, 2.5), "every goal is reached"),
    ((1.5, 1.3, 2.1, 2), "no goal is reached"),
    ((1.2, 1.3), "the goal is reached"),
    ((1.4, 1.3), "the goal is not reached"),
])
def test_goals_say_which_are_reached(pairs, words):
    assert docs.goals(*pairs) == words


def test_goals_take_pairs():
    with pytest.raises(ValueError):
        docs.goals(1.0, 1.3, 2.0)


@pytest.mark.parametrize("a, b, words", [
    (0.315, 0.283, "within this machine's noise, ±17 %"),
    (0.25, 0.283, "within this machine's noise, ±17 %"),
    (0.34, 0.283, "beyond this machine's noise, ±17 %"),
    (0.22, 0.283, "beyond this machine's noise, ±17 %"),
])
def test_noise_is_a_band_either_side(a, b, words):
    assert docs.noise(a, b, 17) == words


@pytest.mark.parametrize("a, b, tolerance, words", [
    (1.10, 0.91, 0, "more than"), (0.80, 0.91, 0, "less than"), (0.91, 0.91, 0, "about as much as"),
    (193, 192, 0.05, "about as much as"), (183, 192, 0.05, "about as much as"),
    (210, 192, 0.05, "more than"), (150, 192, 0.05, "less than"),
])
def test_more_than_and_about_as_much_as(a, b, tolerance, words):
    assert docs.more_than(a, b, tolerance) == words


@pytest.mark.parametrize("value, words", [(0.51, "within"), (1, "within"), (2.6, "above")])
def test_at_most_picks_the_words_for_each_side(value, words):
    assert docs.at_most(value, 1, "within", "above") == words


@pytest.mark.parametrize("ours, theirs, words", [
    (197, 150, "31% later than"), (140, 150, "7% earlier than"), (150, 150, "as late as"),
])
def test_later_or_earlier(ours, theirs, words):
    assert docs.later_or_earlier(ours, theirs) == words


@pytest.mark.parametrize("low, high, words", [
    (13.33, 15, "13-15"), (15, 13.33, "13-15"), (5.79, 7.07, "6-7"), (7.76, 8.33, "8"), (1234.4, 1240.6, "1,234-1,241"),
])
def test_span_is_a_range_or_one_figure(low, high, words):
    assert docs.span(low, high) == words


@pytest.mark.parametrize("lost, duplicated, words", [
    (0, 0, "none was lost or counted twice"), (1, 0, "1 was lost and 0 counted twice"),
    (2, 0, "2 were lost and 0 counted twice"), (0, 3, "0 were lost and 3 counted twice"),
    (None, None, "whether any was lost or counted twice is not known (the store had not settled)"),
])
def test_lost_or_counted_twice(lost, duplicated, words):
    assert docs.lost_or_counted_twice(lost, duplicated) == words


def test_templates_may_call_every_word():
    assert docs.evaluate('study_match("supported", "supported")', {}) == "as in the study"
    assert docs.evaluate("goals(1, 2, 3, 2)", {}) == "the first goal is reached, the last is not"
    assert docs.evaluate("compare_ratio(3 / 2)", {}) == "less than twice"
    for word in ("times", "compare_ratio", "study_match", "as_in", "goal", "goals", "noise", "more_than", "at_most",
                 "later_or_earlier", "span", "lost_or_counted_twice", "cost_per_million"):
        assert word in docs.FUNCTIONS


def copy_block(tmp_path, doc, opening):
    """The block of `doc` (from the checkout's root) whose template starts with the line `opening`, alone in a copy
    of its doc under tmp_path, its cited folders' JSON files copied beside it: (the copy, its block)."""
    text = (REPO / doc).read_text()
    match = next(found for found in docs.BLOCK.finditer(text) if (found.group("spec") or "").split("---\n", 1)[-1]
                 .startswith(opening))
    copy = tmp_path / doc
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(match.group(0))
    for folder in docs.Block(REPO / doc, match).folders():
        target = tmp_path / folder.relative_to(REPO)
        target.mkdir(parents=True, exist_ok=True)
        for found in folder.glob("*.json"):
            shutil.copy(found, target / found.name)
    (block,) = docs.blocks(copy)
    return copy, block


def rewrite(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def words(block):
    return " ".join(block.render()[0].split())


def test_iteration_3s_verdict_follows_its_run(tmp_path):
    copy, block = copy_block(tmp_path, "iterations/iteration-3/README.md", "[{r.name}]({r.report}), after the runner's")
    today = words(block)
    assert "**supported, as in the study**" in today
    assert "about twice as fast" in today
    assert "none was lost or counted twice" in today

    def slower(summary):  # the store drains 1.6x iteration 2's: the check fails, and two visits are lost
        summary["store"]["throughput_per_s"] = 15.0
        summary["verdict"]["outcome"] = "not supported"
        summary["visits"]["total"]["lost"] = 2

    rewrite(tmp_path / "iterations/iteration-3/results/breakpoint-20261123-214227/summary.json", slower)
    changed = words(docs.blocks(copy)[0])
    assert "**not supported, unlike the study**" in changed
    assert "less than twice as fast" in changed and "about twice" not in changed
    assert "2 were lost and 0 counted twice" in changed


def test_the_hot_paths_goals_and_noise_follow_the_benchmark(tmp_path):
    copy, block = copy_block(tmp_path, "docs/performance.md", "What this says: against the no-op")
    today = words(block)
    assert "the first three goals are reached, the last is not" in today
    assert "within this machine's noise, ±17 %" in today

    def costlier(benchmark):  # inc-counter past 2x the no-op at its rate, the direct no-op 40 % dearer
        noop = benchmark["noop"]
        benchmark["stack"]["cpu_ms_per_request"]["inc-counter"] = 2.2 * noop["at_stack_rate"]["cpu_ms_per_request"]
        noop["direct"]["cpu_ms_per_request"] = 1.4 * noop["via_platform"]["cpu_ms_per_request"]

    rewrite(tmp_path / "benchmarks/hot-path-20261124-000650/benchmark.json", costlier)
    changed = words(docs.blocks(copy)[0])
    assert "the first two goals are reached, the last two are not" in changed
    assert "beyond this machine's noise, ±17 %" in changed


def test_iteration_0s_figures_typed_by_hand_are_read_from_its_run(tmp_path):
    copy, block = copy_block(tmp_path, "iterations/iteration-0/README.md", "[{r.name}]({r.report}), after the runner's")
    today = words(block)
    assert "with the same ~13-15 requests/s mean its requests had waited ~6-7 s" in today
    assert "The first failure comes 31% later than the study's" in today
    assert "holds one of its 2 slots 212 ms" in today and "The store falls behind here too" in today

    def faster(run):  # a run whose model gave get-counter 20/s and a store draining what the knee publishes
        prediction = run["prediction"]
        prediction["capacity_rps"]["get-counter"] = 20.0
        prediction["capacity_rps"]["store-inc-counter"] = prediction["drain_per_s"] = prediction["publish_per_s"] = 20.0

    rewrite(tmp_path / "iterations/iteration-0/results/breakpoint-20261123-213523/run.json", faster)
    rewrite(tmp_path / "iterations/iteration-0/results/breakpoint-20261123-213523/summary.json",
            lambda summary: summary["headline"].update(first_failure_users=140))
    changed = words(docs.blocks(copy)[0])
    # 150 users at 15 to 20 get-counter requests/s, a 4.21 s page cycle: 3.3 to 5.8 s in the queue
    assert "with the same ~15-20 requests/s mean its requests had waited ~3-6 s" in changed
    assert "The first failure comes 7% earlier than the study's" in changed
    assert "holds one of its 2 slots 100 ms" in changed and "The store keeps up here too" in changed


def test_no_template_types_a_judgement_the_vocabulary_renders():
    """The phrases issue #40 found typed in templates are rendered now: none is left in a template's own words."""
    typed = re.compile(r"more than twice|the first three goals are reached|not the 1\.5x aimed at|within this\s+"
                       r"machine's noise|~6-7 s|~212 ms|~13-15|~28 ms|~55 publishes|none was lost|, as in the study")
    for doc in docs.doc_files(REPO):
        for block in docs.blocks(doc):
            assert not typed.search(block.spec), f"{block.where()}: a judgement typed in the template"


def test_cost_per_million_is_the_cost_tables_figure():
    """The model's cost a template reads is the one the cost-per-million table shows, in total and per service."""
    sources = {name: docs.Source(name, REPO / "iterations" / folder, REPO / "iterations")
               for name, folder in (("six", "iteration-6"), ("three", "iteration-3"))}
    for name, folder in (("six", "iteration-6"), ("three", "iteration-3")):
        row = docs.cost_table(REPO / "iterations", None, f"study {folder}").splitlines()[2]
        cells = re.findall(r"([\d.]+) \(([\d.]+) / ([\d.]+) / ([\d.]+) / ([\d.]+)\)", row)
        for region, (total, cloud_run, firestore, pubsub, logging) in zip(("southamerica-east1", "us-central1"), cells):
            assert f"{docs.evaluate(f'cost_per_million({name}, {region!r})', sources):.2f}" == total
            for service, cell in (("Cloud Run", cloud_run), ("Firestore", firestore), ("Pub/Sub", pubsub),
                                  ("Cloud Logging", logging)):
                assert f"{docs.evaluate(f'cost_per_million({name}, {region!r}, {service!r})', sources):.2f}" == cell


def test_cost_per_million_takes_an_iteration_folder():
    results = docs.Source("r", REPO / "iterations/iteration-6/results/breakpoint-20261123-180632", REPO)
    for expression in ("cost_per_million(3, 'us-central1')", "cost_per_million(r, 'us-central1')",
                       "cost_per_million(six, 'nowhere')", "cost_per_million(six, 'us-central1', 'Nothing')"):
        with pytest.raises(docs.DocsError):
            docs.evaluate(expression, {"r": results, "six": docs.Source("six", REPO / "iterations/iteration-6", REPO)})


def test_iteration_6s_cost_verdict_follows_the_settings(tmp_path):
    copy, block = copy_block(tmp_path, "iterations/iteration-6/README.md", "- **On Google Cloud, by the model")
    today = words(block)
    assert "the cost is not lowered" in today and "within a cent of iteration 4's" in today
    assert "worth less than a cent per million visits" in today
    assert "\"lower than iteration 4's\" is not supported" in today

    def one_at_a_time(settings):  # iteration 4 serving one request at a time per instance: a dearer visit
        for spec in settings["functions"].values():
            spec["concurrency"] = 1

    rewrite(tmp_path / "iterations/iteration-4/settings.tfvars.json", one_at_a_time)
    changed = words(docs.blocks(copy)[0])
    assert "the cost is lowered" in changed and "more than a cent from iteration 4's" in changed
    assert "worth a cent or more per million visits" in changed
    assert "\"lower than iteration 4's\" is supported" in changed

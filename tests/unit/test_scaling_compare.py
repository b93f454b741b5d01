"""The docs' scaling-compare table: iterations run with fixed instances and autoscaled, side by side (issue #50)."""
import json

import pytest

from visitkit.paths import ROOT
from visitkit.reports import docs

# A committed run's records, the shape every synthetic run below keeps (the docs read summary.json through the record)
COMMITTED = ROOT / "iterations/iteration-1/results/breakpoint-20261125-191233"
RUN, SUMMARY = (json.loads((COMMITTED / name).read_text()) for name in ("run.json", "summary.json"))
READMES = {"iteration-0": "# Iteration 0\n\n**Check:** `slowest_function == get-counter`\n",
           "iteration-1": "# Iteration 1\n\n**Check:** `store.throughput_per_s >= 1.5 x iteration-0`\n"}


def make_run(tmp_path, iteration, name, scaling_in=None, **figures):
    """A results folder of `iteration`: run.json as committed but for its scaling (`scaling_in`: "record" writes
    run.json's own `scaling` auto, "settings" only its settings', None neither: a run from before the autoscaler),
    summary.json with these headline figures."""
    folder = tmp_path / iteration / "results" / name
    folder.mkdir(parents=True)
    (tmp_path / iteration / "README.md").write_text(READMES[iteration])
    run = {**RUN, "iteration": iteration, "settings": {**RUN["settings"]}}
    run["settings"].pop("scaling", None)
    if scaling_in == "record":
        run["scaling"] = "auto"
    elif scaling_in == "settings":
        run["settings"]["scaling"] = "auto"
    (folder / "run.json").write_text(json.dumps(run))
    headline = {**SUMMARY["headline"], "slowest_function": "get-counter", "first_failure_users": None,
                "first_failure_rps": None, "visits.lost": 0, "visits.duplicated": 0, **figures}
    (folder / "summary.json").write_text(json.dumps({**SUMMARY, "iteration": iteration, "results_dir": name,
                                                     "headline": headline}))


def test_the_table_sets_each_iterations_verdict_and_headline_fixed_beside_autoscaled(tmp_path):
    """Worked by hand. Iteration 0's check holds both ways (get-counter slowest in both runs). Iteration 1's check
    compares its store's drain with iteration 0's in the same column: fixed 14.0 against 1.5 x 10.0 = 15.0 fails,
    autoscaled 13.0 against 1.5 x 8.0 = 12.0 holds, so the verdict moved although the autoscaled store drained less
    (13.0 / 14.0 = 0.93x). Ratios autoscaled / fixed: knee 45 / 60 users and 30.0 / 40.0 RPS, 0.75x both; acked and
    stored 1,200 / 1,000 = 1.20x; over zero (lost, duplicated) or a missing figure (no failure), n/a."""
    from visitkit.reports.scaling_compare import spread
    assert spread([({"knee_users": 200, "first_failure_users": 700}, {"knee_users": 190, "first_failure_users": 770}),
                   ({"knee_users": 200}, {"knee_users": 190})]) == (
        " Autoscaled over fixed, in users: the knee 0.95x (2 of 2 iterations); the first failure 1.10x (1 of 2 "
        "iterations).")
    drain = "store.throughput_per_s"
    make_run(tmp_path, "iteration-0", "breakpoint-1", None, knee_users=60, knee_rps=40.0, first_failure_users=150,
             first_failure_rps=45.0, **{drain: 10.0, "visits.acknowledged": 1000, "visits.stored": 1000})
    make_run(tmp_path, "iteration-0", "breakpoint-2", "record", knee_users=45, knee_rps=30.0,
             **{drain: 8.0, "visits.acknowledged": 1200, "visits.stored": 1200})
    make_run(tmp_path, "iteration-1", "breakpoint-3", None, **{drain: 14.0})
    make_run(tmp_path, "iteration-1", "breakpoint-4", "settings", **{drain: 13.0})  # scaling in its settings only

    pairs = ("iteration-0/results/breakpoint-1 iteration-0/results/breakpoint-2 "
             "iteration-1/results/breakpoint-3 iteration-1/results/breakpoint-4")
    text = docs.scaling_compare_table(tmp_path, "its", pairs)
    table, said = text.split("\n\n")
    rows = table.splitlines()
    assert rows[:5] == [
        "| iteration | | fixed instances | autoscaled | autoscaled / fixed |", "|---|---|---:|---:|---:|",
        "| iteration-0 | run | [breakpoint-1](its/iteration-0/results/breakpoint-1/report.md) | "
        "[breakpoint-2](its/iteration-0/results/breakpoint-2/report.md) | |",
        "| | verdict | **supported**; slowest_function = get-counter, wanted == get-counter | **supported**; "
        "slowest_function = get-counter, wanted == get-counter | same |",
        "| | `slowest_function` (checked) | get-counter | get-counter | same |"]
    assert "| | knee (users / RPS) | 60 / 40.0 | 45 / 30.0 | 0.75x / 0.75x |" in rows
    assert "| | first failure (users / RPS) | 150 / 45.0 | n/a / n/a | n/a / n/a |" in rows
    assert ("| | acked / stored / lost / dup | 1,000 / 1,000 / 0 / 0 | 1,200 / 1,200 / 0 / 0 | "
            "1.20x / 1.20x / n/a / n/a |") in rows
    first = rows.index("| iteration-1 | run | [breakpoint-3](its/iteration-1/results/breakpoint-3/report.md) | "
                       "[breakpoint-4](its/iteration-1/results/breakpoint-4/report.md) | |")
    assert rows[first + 1:first + 3] == [
        "| | verdict | **not supported**; store.throughput_per_s = 14.0 vs 1.5 x 10.0 (iteration-0) = 15.0 | "
        "**supported**; store.throughput_per_s = 13.0 vs 1.5 x 8.0 (iteration-0) = 12.0 | moved |",
        "| | `store.throughput_per_s` (checked) | 14.0 | 13.0 | 0.93x |"]
    # the knees' range over both pairs (iteration 1's runs keep the committed knee both ways); no pair failed both ways
    assert " ".join(said.split()) == ("The verdict moved in iteration-1 (not supported with fixed instances, supported "
                                      "autoscaled). Autoscaled over fixed, in users: the knee 0.75x to 1.00x (2 of 2 "
                                      "iterations).")
    doc = tmp_path / "docs" / "scaling.md"  # the marker the docs hold, on one line
    doc.parent.mkdir()
    doc.write_text(f"<!-- figures scaling-compare: .. {pairs} -->\n<!-- /figures -->\n")
    docs.write([doc])
    assert doc.read_text() == (f"<!-- figures scaling-compare: .. {pairs} -->\n"
                               + text.replace("(its/", "(../") + "<!-- /figures -->\n")


@pytest.mark.parametrize("pairs, message", [
    ("iteration-0/results/breakpoint-2 iteration-0/results/breakpoint-1", "breakpoint-2 ran with scaling auto"),
    ("iteration-1/results/breakpoint-3 iteration-1/results/breakpoint-4", "compares its run with iteration-0's"),
    ("iteration-0/results/breakpoint-1 iteration-1/results/breakpoint-4", "runs of two iterations"),
    ("iteration-0/results/breakpoint-1", "name pairs")])
def test_a_pair_out_of_order_across_iterations_or_without_the_iteration_a_check_names_is_refused(
        tmp_path, pairs, message):
    make_run(tmp_path, "iteration-0", "breakpoint-1")
    make_run(tmp_path, "iteration-0", "breakpoint-2", "record")
    make_run(tmp_path, "iteration-1", "breakpoint-3")
    make_run(tmp_path, "iteration-1", "breakpoint-4", "record")
    with pytest.raises(docs.DocsError, match=message):
        docs.scaling_compare_table(tmp_path, "its", pairs)

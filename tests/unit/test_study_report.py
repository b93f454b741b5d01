"""One study report (visitkit.studies.report), rendered from committed results folders assembled as a study."""
import json

import pytest

from visitkit.errors import VisitkitError
from visitkit.paths import ITERATIONS_DIR
from visitkit.studies import report
from visitkit.studies.state import FORMAT, read_state, save_state

# Each iteration's latest breakpoint on the twin with the study profile (no chaos): what the study's own runs are.
LATEST = {"iteration-0": "breakpoint-20261123-213523", "iteration-1": "breakpoint-20261125-191233",
          "iteration-2": "breakpoint-20261123-215100", "iteration-3": "breakpoint-20261123-214227"}


def a_study(folder, runs, target="local", minutes=46.0):
    """A study folder whose finished runs are committed results folders: [(iteration, results folder name)]."""
    folder.mkdir(exist_ok=True)
    entries = [{"iteration": iteration, "test": "breakpoint", "status": "finished",
                "results": f"iterations/{iteration}/results/{name}", "seconds": 600.0, "predicted_minutes": 11.5,
                "predicted_usd": 0.1} for iteration, name in runs]
    save_state(folder, {
        "format": FORMAT, "started": 1000.0, "ended": 1000.0 + minutes * 60, "deployment": None, "runs": entries,
        "predicted": {"minutes": 46.2, "usd": 0.45, "region": "southamerica-east1", "destroy_minutes": 0},
        "options": {"target": target, "iterations": [iteration for iteration, _ in runs], "protocol": "fast",
                    "endurance": False, "profile": None, "project": None, "region": None, "access": None,
                    "workers": None, "keep": False}})
    return folder


def test_the_committed_runs_of_iterations_0_to_3_come_out_as_the_study_four_times_in_one_report(tmp_path):
    folder = a_study(tmp_path / "study", list(LATEST.items()))
    text = report.write(folder).read_text()
    assert "**verdicts 4 of 4 as the study**" in text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| iteration-")}
    assert "| **not supported** | not supported | as the study |" in rows["iteration-2"]
    assert "store.throughput_per_s = 9.4 vs 1.5 x 9.3 (iteration-1) = 13.9" in rows["iteration-2"]
    for iteration in ("iteration-0", "iteration-1", "iteration-3"):
        assert "| **supported** | supported | as the study |" in rows[iteration]
    # each row links the run's own report, and the link leads there from the study folder
    link = rows["iteration-1"].rsplit("](", 1)[1].rstrip(") |")
    assert link.startswith("../")  # relative: the study folder and the results are committed together
    assert (folder / link).resolve() == ITERATIONS_DIR / "iteration-1" / "results" / LATEST["iteration-1"] / "report.md"
    # the study's figures, the model's and this run's side by side (iteration 1's study.json: 670 users)
    assert "| first failures (users) | 670 | 760 | 783 |" in text
    assert "| store drain (visits/s) | 20.8 | 18.9 | 18.5 |" in text  # iteration 3
    assert "| first failures (users)" not in text.split("## iteration-2 breakpoint")[1].split("## ")[0]
    assert "46.0 minutes from start to end (46.2 predicted, target under 75)" in text
    assert (folder / report.PLOT).stat().st_size > 10_000 and f"]({report.PLOT})" in text
    outcome = read_state(folder)["outcome"]
    assert (outcome["as_study"], outcome["of"]) == (4, 4)
    assert outcome["verdicts"]["iteration-2 breakpoint"] == "not supported"


def test_a_check_on_another_iteration_compares_with_this_studys_run_of_it_not_its_latest(tmp_path):
    # iteration 1's chaos run (11.7 visits/s while backlogged) is this study's: iteration 2's check reads it,
    # where the run's own report (publish) compared with iteration 1's latest comparable run (9.3)
    folder = a_study(tmp_path / "study", [("iteration-1", "breakpoint-20261123-121732"),
                                          ("iteration-2", LATEST["iteration-2"])])
    text = report.write(folder).read_text()
    assert "store.throughput_per_s = 9.4 vs 1.5 x 11.7 (iteration-1) = 17.5" in text
    # iteration 1's own check (against iteration 0) finds no run of iteration 0 in this study
    assert "no p95_ms.get-counter from iteration-0" in text
    assert "**verdicts 1 of 2 as the study**" in text


def test_a_study_of_one_iteration_that_compares_with_another_is_undetermined(tmp_path):
    folder = a_study(tmp_path / "study", [("iteration-3", LATEST["iteration-3"])])
    text = report.write(folder).read_text()
    assert "| **undetermined** | supported | unlike the study |" in text
    assert "**verdicts 0 of 1 as the study**" in text


def test_a_study_with_a_run_not_finished_says_so_and_judges_the_others(tmp_path):
    folder = a_study(tmp_path / "study", list(LATEST.items())[:2])
    state = read_state(folder)
    state["runs"].append({"iteration": "iteration-2", "test": "breakpoint", "status": "failed",
                          "error": "RunError: the counters did not converge", "results": None})
    save_state(folder, state)
    text = report.write(folder).read_text()
    assert "**verdicts 2 of 2 as the study**" in text
    assert "- iteration-2 breakpoint: failed (RunError: the counters did not converge)" in text


def test_a_study_folder_of_another_format_is_refused(tmp_path):
    folder = a_study(tmp_path / "study", [("iteration-0", LATEST["iteration-0"])])
    state = json.loads((folder / "study.json").read_text())
    state["format"] = 99
    (folder / "study.json").write_text(json.dumps(state))
    with pytest.raises(VisitkitError, match="format 99"):
        report.write(folder)

"""The noise band (visitkit.benchmarks.noise): each headline figure's spread over repeats of one run, the folder
it writes, and how a change between two runs is judged by it. The runs are committed summaries, changed."""
import datetime
import json
import re
import shutil
import subprocess

import pytest

from visitkit.benchmarks import benchfolder, noise, registry
from visitkit.cli import main
from visitkit.errors import VisitkitError
from visitkit.paths import ITERATIONS_DIR, ROOT

COMMITTED = ITERATIONS_DIR / "iteration-1" / "results" / "breakpoint-20261125-191233"
STARTED = datetime.datetime(2026, 11, 26, 1, 0, 0)
BENCHMARK = noise.benchmark  # before any test stubs it
COMMAND = "iterations/iteration-1 --test breakpoint --profile study --duration 4m --shape-set spawn_rate=4"


def a_run(root, name, checkout=None, **headline):
    """A results folder in root/iterations/iteration-1/results/NAME: the committed run's, with these headline
    figures (keys with dots as summary.json has them: visits__lost is visits.lost)."""
    folder = root / "iterations" / "iteration-1" / "results" / name
    folder.mkdir(parents=True)
    summary = json.loads((COMMITTED / "summary.json").read_text())
    summary["results_dir"], summary["started"] = name, f"2026-11-25T{name[-6:-4]}:{name[-4:-2]}:{name[-2:]}"
    summary["headline"].update({key.replace("__", "."): value for key, value in headline.items()})
    (folder / "summary.json").write_text(json.dumps(summary, indent=2))
    run = (COMMITTED / "run.json").read_text()
    # as made in that checkout, its Locust command naming the checkout's paths (the committed one's are relative)
    made_in = str(checkout or root)
    (folder / "run.json").write_text(re.sub(r'"(\.venv/|locust/|iterations/)', lambda m: f'"{made_in}/{m[1]}', run))
    return folder


def repeats(root, knees=(210, 220, 230, 200, 240), **headline):
    return [a_run(root, f"breakpoint-20261125-23{i:02d}00", knee_users=knee, **headline)
            for i, knee in enumerate(knees)]


def test_the_band_is_the_range_of_the_repeats_over_their_median():
    band = noise.figure_band("knee_users", [210, 220, 230, 200, 240])
    assert band["unit"] == "relative" and band["band"] == pytest.approx(40 / 240) and band["n"] == 5
    assert (band["median"], band["min"], band["max"]) == (220, 200, 240)
    one_outlier = noise.figure_band("knee_users", [220, 220, 220, 220, 300])
    assert one_outlier["median"] == 220 and one_outlier["band"] == pytest.approx(80 / 300)  # seen, so allowed


def test_a_count_mostly_zero_keeps_its_band_in_its_own_unit_and_a_figure_missing_in_a_repeat_has_none():
    zero = noise.figure_band("responses_429.serve-page", [0, 0, 3, 0, 0])
    assert (zero["unit"], zero["band"]) == ("absolute", 3)
    missing = noise.figure_band("first_failure_users", [780, None, 790, 800, 770])
    assert missing["unit"] is None and missing["band"] is None and missing["why"] == "n/a in 1 of 5 repeats"
    assert missing["n"] == 4


def test_lost_and_duplicated_visits_are_exact_whatever_the_repeats_showed():
    lost = noise.figure_band("visits.lost", [0, 2, 0, 0, 0])
    assert (lost["unit"], lost["band"]) == ("exact", 0)
    assert noise.judgement(lost, 0, 1) == (True, "")
    assert noise.judgement(lost, 2, 2) == (False, "") and noise.judgement(lost, 2, 0) == (False, "")  # fewer: fine


def test_a_change_is_judged_against_the_band_scaled_to_the_baselines_value():
    band = noise.figure_band("knee_users", [90, 100, 110])  # 20 / 110: the ratio 110 / 90 either way
    assert noise.judgement(band, 200, 244) == (False, "") and noise.judgement(band, 200, 164) == (False, "")
    assert noise.judgement(band, 200, 245) == (True, "") and noise.judgement(band, 200, 163) == (True, "")
    assert noise.judgement(band, 90, 110) == (False, "") and noise.judgement(band, 110, 90) == (False, "")
    assert noise.judgement(band, 0, 0) == (False, "") and noise.judgement(band, 0, 1) == (True, "")
    absolute = noise.figure_band("failures.serve-page", [0, 2, 0])
    assert noise.judgement(absolute, 5, 7) == (False, "") and noise.judgement(absolute, 5, 8) == (True, "")
    assert noise.judgement(band, None, 200) == (None, "n/a in a run")
    assert noise.judgement(None, 1.0, 2.0) == (None, "no band")
    assert noise.judgement(None, "inc-counter", "serve-page") == (None, "not a number")
    missing = noise.figure_band("first_failure_users", [780, None, 790])
    assert noise.judgement(missing, 780, 2000) == (None, "n/a in 1 of 3 repeats")


def test_the_benchmark_reads_runs_back_copies_how_they_were_taken_and_renders_its_band(tmp_path):
    worktree = tmp_path / "elsewhere"  # the runs were made in another checkout of the project
    folders = repeats(worktree, visits__lost=0)
    folder, record = noise.benchmark(from_dirs=folders, run_arguments=COMMAND.split(), out_root=tmp_path / "out",
                                     now=lambda: STARTED)
    assert folder.name == "noise-20261126-010000" and noise.load(folder) == record
    assert record["command"] == "scripts/run-iteration " + COMMAND
    assert record["kind"]["iteration"] == "iteration-1" and record["kind"]["profile"] == "study"
    assert [r["results_dir"] for r in record["repeats"]] == [f.name for f in folders]
    assert record["figures"]["knee_users"]["band"] == pytest.approx(40 / 240)
    assert record["figures"]["knee_users"]["values"] == [210, 220, 230, 200, 240]
    assert "slowest_function" not in record["figures"]  # not a number: no band
    for repeat in record["repeats"]:
        copy = folder / repeat["copy"]
        assert json.loads((copy / "summary.json").read_text())["results_dir"] == repeat["results_dir"]
        run = (copy / "run.json").read_text()
        assert str(worktree) not in run and str(ROOT) not in run and '"locust/locustfile.py"' in run
    table = registry.render(folder)
    assert table[0] == "| figure | n | median | min - max | band |"
    assert "| knee_users | 5 | 220 | 200 - 240 | ±16.7 % |" in table
    assert "| visits.lost | 5 | 0 | 0 - 0 | exact: any rise |" in table
    summary = (folder / "summary.md").read_text()
    assert "\n" + "\n".join(table) + "\n" in summary and "not a Google Cloud run's band" in summary


def test_runs_that_are_not_repeats_of_one_run_or_too_few_are_refused(tmp_path):
    folders = repeats(tmp_path)
    other = json.loads((folders[-1] / "summary.json").read_text())
    other["shape"] = "breakpoint spawn_rate=8,duration_s=240"
    (folders[-1] / "summary.json").write_text(json.dumps(other))
    with pytest.raises(VisitkitError, match="is not a repeat of .*: its shape differ"):
        noise.benchmark(from_dirs=folders, out_root=tmp_path / "out")
    with pytest.raises(VisitkitError, match="at least 3 repeats of one run, not 2"):
        noise.benchmark(from_dirs=folders[:2], out_root=tmp_path / "out")
    with pytest.raises(VisitkitError, match="not how these runs were made: they are iteration-1's breakpoint"):
        noise.benchmark(from_dirs=folders[:3], run_arguments=["iterations/iteration-1", "--test", "load"],
                        out_root=tmp_path / "out")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_the_benchmark_runs_the_command_after_a_dry_run_and_reads_each_new_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = []

    def run(command, **options):
        calls.append(command)
        if command[-1] != "--dry-run":  # a run: a new results folder
            a_run(tmp_path, f"breakpoint-20261125-23{len(calls):02d}00", knee_users=200 + 10 * len(calls))
        # the second run's thresholds failed (exit 3): its figures stand all the same
        return subprocess.CompletedProcess(command, 3 if len(calls) == 3 else 0, "", "")

    arguments = COMMAND.split()
    folder, record = noise.benchmark(run_arguments=arguments, repeats=3, out_root=tmp_path / "out",
                                     now=lambda: STARTED, run=run)
    script = str(ROOT / "scripts" / "run-iteration")
    assert calls == [[script, *arguments, "--dry-run"]] + [[script, *arguments]] * 3
    assert [r["results_dir"] for r in record["repeats"]] == [f"breakpoint-20261125-23{n:02d}00" for n in (2, 3, 4)]
    assert record["figures"]["knee_users"]["values"] == [220, 230, 240]
    assert record["taken"] == "run by this benchmark, one after the other"


def test_a_run_that_fails_stops_the_repeats_and_names_those_that_finished(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def run(command, **options):
        if command[-1] == "--dry-run":
            return subprocess.CompletedProcess(command, 0, "", "")
        made = len(list((tmp_path / "iterations" / "iteration-1" / "results").glob("*/")))
        a_run(tmp_path, f"breakpoint-20261125-23{made:02d}00")  # the second too, but it exits 2: a kit's error
        return subprocess.CompletedProcess(command, 2 if made == 1 else 0, "", "")

    with pytest.raises(VisitkitError, match=r"repeat 2 failed \(exit 2\).*breakpoint-20261125-230000.*--from"):
        noise.benchmark(run_arguments=COMMAND.split(), repeats=3, out_root=tmp_path / "out", run=run)
    refused = lambda command, **_: subprocess.CompletedProcess(command, 2, "", "error: no such iteration")  # noqa: E731
    with pytest.raises(VisitkitError, match="--dry-run failed: error: no such iteration"):
        noise.benchmark(run_arguments=COMMAND.split(), out_root=tmp_path / "out", run=refused)
    with pytest.raises(VisitkitError, match="at least 3 repeats, not 2"):
        noise.benchmark(run_arguments=COMMAND.split(), repeats=2, out_root=tmp_path / "out")


def test_the_band_read_is_the_newest_folder_or_the_one_named(tmp_path):
    folders = repeats(tmp_path / "runs")
    older, _ = noise.benchmark(from_dirs=folders, out_root=tmp_path, now=lambda: STARTED)
    newer, _ = noise.benchmark(from_dirs=folders[:3], out_root=tmp_path,
                               now=lambda: STARTED + datetime.timedelta(days=1))
    assert noise.chosen(out_root=tmp_path)[0] == newer
    assert noise.chosen(older / "benchmark.json", out_root=tmp_path)[0] == older
    assert noise.chosen(older, out_root=tmp_path)[1]["repeats"][-1]["results_dir"] == folders[-1].name
    with pytest.raises(VisitkitError, match="no noise band in .*scripts/benchmark-noise"):
        noise.chosen(out_root=tmp_path / "empty")


def test_the_command_line_reads_runs_back_and_refuses_repeats_with_them(tmp_path, monkeypatch, capsys):
    folders = repeats(tmp_path / "runs")
    made = []

    def benchmark(**options):  # the benchmark itself, writing into tmp_path
        made.append(options)
        return BENCHMARK(**options, out_root=tmp_path, now=lambda: STARTED)

    monkeypatch.setattr(noise, "benchmark", benchmark)
    assert main(["bench", "noise", "--from", *map(str, folders), "--run", COMMAND]) == 0
    assert made == [{"from_dirs": folders, "run_arguments": COMMAND.split()}]
    assert "| knee_users | 5 | 220 | 200 - 240 | ±16.7 % |" in capsys.readouterr().out
    assert main(["bench", "noise", "--from", *map(str, folders), "--repeats", "5"]) == 2
    assert "give one of the two" in capsys.readouterr().err
    assert made[1:] == []


def test_the_wrapper_script_runs_the_benchmark():
    script = (ROOT / "scripts" / "benchmark-noise").read_text()
    assert 'exec "$(dirname "$0")/kit" bench noise "$@"' in script
    assert shutil.which(str(ROOT / "scripts" / "benchmark-noise"))  # executable
    assert noise.KIND in registry.BENCHMARKS and benchfolder.folder_name(noise.KIND, STARTED).startswith("noise-")


def test_no_two_of_the_committed_bands_own_repeats_are_flagged_against_each_other():
    folder, record = noise.chosen()
    repeated = [json.loads((folder / repeat["copy"] / "summary.json").read_text())["headline"]
                for repeat in record["repeats"]]
    assert len(repeated) >= 5
    flagged = {(name, i, j) for i, baseline in enumerate(repeated) for j, run in enumerate(repeated)
               for name, entry in record["figures"].items() if noise.judgement(entry, baseline[name], run[name])[0]}
    assert flagged == set()  # a band is what the repeats showed: each pair of them lies within it

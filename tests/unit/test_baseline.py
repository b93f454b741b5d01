"""A run against a baseline (visitkit.reports.compare.baseline_lines, `compare --baseline`): every headline
figure beside the baseline's with its noise band, flagged when it moved beyond it; exit 3 when one did."""
import json

import pytest
from test_noise import STARTED, a_run, repeats

from visitkit.benchmarks import noise
from visitkit.cli import main
from visitkit.errors import VisitkitError
from visitkit.reports.compare import baseline_lines, change


@pytest.fixture
def band(tmp_path):
    """A band from five repeats whose knee spreads 200-240 (±16.7 %: 40 / 240) and which 429 nothing on serve-page."""
    folder, _ = noise.benchmark(from_dirs=repeats(tmp_path / "band", **{"responses_429.serve-page": 0}),
                                out_root=tmp_path / "bands", now=lambda: STARTED)
    return folder


def row(lines, figure):
    return next(line for line in lines if line.startswith(f"| {figure} |"))


def compare(tmp_path, band, capsys, **run_figures):
    baseline = a_run(tmp_path / "runs", "breakpoint-20261126-000000", knee_users=220)
    run = a_run(tmp_path / "runs", "breakpoint-20261126-010000", **{"knee_users": 220, **run_figures})
    status = main(["compare", "--baseline", str(baseline), str(run), "--band", str(band)])
    return status, capsys.readouterr().out.splitlines()


def test_runs_within_their_band_exit_0_and_show_every_figure(tmp_path, band, capsys):
    status, lines = compare(tmp_path, band, capsys, knee_users=255)  # +35 of the larger 255: +13.7 %
    assert status == 0
    assert "| figure | baseline | run | change | band | flagged |" in lines
    assert row(lines, "knee_users") == "| knee_users | 220 | 255 | +13.7 % | ±16.7 % | no |"
    assert row(lines, "slowest_function") == ("| slowest_function | inc-counter | inc-counter | same | none "
                                              "| not judged: not a number |")
    assert row(lines, "knee_machine_busy") == "| knee_machine_busy | no | no | same | none | not judged: not a number |"
    assert row(lines, "failure_ratio").startswith("| failure_ratio | 1.5 % | 1.5 % |")
    assert "0 of 41 judged figures moved beyond their noise band" in lines


def test_a_figure_beyond_its_band_is_flagged_and_exits_3(tmp_path, band, capsys):
    status, lines = compare(tmp_path, band, capsys, knee_users=170)  # -50 of the larger 220: -22.7 %
    assert status == 3
    assert row(lines, "knee_users") == "| knee_users | 220 | 170 | -22.7 % | ±16.7 % | **yes** |"
    assert "1 of 41 judged figures moved beyond their noise band: knee_users" in lines


def test_one_lost_visit_more_is_a_regression_and_a_count_never_seen_in_the_repeats_too(tmp_path, band, capsys):
    status, lines = compare(tmp_path, band, capsys, **{"visits.lost": 1, "responses_429.serve-page": 1})
    assert status == 3
    assert row(lines, "visits.lost") == "| visits.lost | 0 | 1 | +1 | exact: any rise | **yes** |"
    assert row(lines, "responses_429.serve-page").endswith("| +1 | ±0 (median 0) | **yes** |")


def test_a_figure_without_a_band_is_shown_and_not_judged(tmp_path, band, capsys):
    record = json.loads((band / "benchmark.json").read_text())
    del record["figures"]["rps_peak"]
    (band / "benchmark.json").write_text(json.dumps(record))
    status, lines = compare(tmp_path, band, capsys, rps_peak=1.0)
    assert status == 0 and row(lines, "rps_peak").endswith("| none | not judged: no band |")
    assert "3 figures shown but not judged" in lines[-1]


def test_an_iteration_stands_for_its_latest_run_like_the_baseline(tmp_path, band):
    baseline = a_run(tmp_path / "runs", "breakpoint-20261126-000000", knee_users=220)
    a_run(tmp_path / "runs", "breakpoint-20261126-010000", knee_users=100)
    chaos = a_run(tmp_path / "runs", "breakpoint-20261126-020000")  # newer, with faults: not like the baseline
    summary = json.loads((chaos / "summary.json").read_text())
    (chaos / "summary.json").write_text(json.dumps({**summary, "chaos": {"events": []}}))
    lines, moved = baseline_lines(baseline, [baseline.parent.parent], band)
    assert lines[0].startswith("baseline iteration-1 breakpoint-20261126-000000, run iteration-1 "
                               "breakpoint-20261126-010000 (local); noise band noise-")
    assert moved == ["knee_users"]


def test_a_cloud_run_is_told_the_band_is_the_twins_and_unlike_runs_are_refused(tmp_path, band):
    baseline = a_run(tmp_path / "runs", "breakpoint-20261126-000000")
    run = a_run(tmp_path / "runs", "breakpoint-20261126-010000")
    for folder in (baseline, run):
        summary = json.loads((folder / "summary.json").read_text())
        (folder / "summary.json").write_text(json.dumps({**summary, "target": "gcp"}))
    lines, _ = baseline_lines(baseline, [run], band, target="gcp")
    assert any("a band measured on the twin is not a cloud run's band" in line for line in lines)
    other = a_run(tmp_path / "other", "breakpoint-20261126-020000")
    with pytest.raises(VisitkitError, match="not comparable with the baseline"):
        baseline_lines(baseline, [other], band)
    with pytest.raises(VisitkitError, match="give one results folder or iteration, not 2"):
        baseline_lines(baseline, [run, other], band)


def test_the_kits_own_errors_exit_2(tmp_path, band, capsys):
    baseline = a_run(tmp_path / "runs", "breakpoint-20261126-000000")
    assert main(["compare", "--baseline", str(tmp_path / "nothing"), str(baseline), "--band", str(band)]) == 2
    assert "no run to compare with" in capsys.readouterr().err
    assert main(["compare", "--baseline", str(baseline), str(baseline), "--band", str(tmp_path)]) == 2
    assert "no benchmark.json" in capsys.readouterr().err


def test_the_change_is_shown_in_the_measure_its_band_judges_it_by():
    relative, mostly_none = noise.figure_band("knee_users", [90, 110]), noise.figure_band("failures.x", [0, 0, 2])
    assert change(200, 250, relative) == "+20.0 %" and change(250, 200, relative) == "-20.0 %"  # of the larger
    assert change(2, 4, mostly_none) == "+2" and change(0, 1, noise.figure_band("visits.lost", [0, 0])) == "+1"
    assert change(4, 5, None) == "+20.0 %" and change(0, 5, None) == "+5"  # no band: from a baseline of 0, its unit
    assert change("inc-counter", "serve-page", None) == "changed"

"""Several iterations' latest reports side by side: one row per figure, one column per iteration; and a run
against a baseline run, each headline figure judged by its noise band (visitkit.benchmarks.noise)."""
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from visitkit.benchmarks import noise
from visitkit.catalogue import PUBLIC_PATHS, PUSH_FUNCTION
from visitkit.errors import VisitkitError
from visitkit.formatting import fmt, percent
from visitkit.model.capacity import figure_to_measure
from visitkit.results import folder as results
from visitkit.results.records import Summary

ROWS = [  # (headline key, label)
    ("verdict", "verdict"), ("results_dir", "run"), ("users_max", "users (max)"), ("knee_users", "RPS knee: users"),
    ("knee_rps", "RPS knee: RPS"), ("prediction.knee_users", "predicted knee: users"),
    ("prediction.knee_rps", "predicted knee: RPS"), ("knee_visits_per_s", "knee: visits/s offered (open model)"),
    ("prediction.knee_visits_per_s", "predicted knee: visits/s"), ("prediction.limited_by", "predicted limit"),
    ("first_failure_users", "first failure: users"), ("prediction.first_429_users", "predicted first 429: users"),
    ("first_failure_rps", "first failure: RPS"), ("rps_peak", "peak RPS"), ("p95_ceiling_ms", "p95 ceiling (ms)"),
    ("failure_ratio", "failure ratio"), ("slowest_function", "slowest function (client p95)"),
    *((f"p95_ms.{name}", f"{name} p95 (ms)") for name in PUBLIC_PATHS.values()),
    (f"service_ms.{PUSH_FUNCTION}", f"{PUSH_FUNCTION} service (ms)"),
    ("store.accepted_per_s", "accepted (202)/s (load)"), ("store.writes_per_s", "stored/s (load)"),
    ("store.throughput_per_s", "store throughput/s (backlogged)"), ("store.backlog_peak", "backlog peak"),
    ("convergence_s", "converged after load (s)"), ("extra_min_per_min", "extra min per min of load"),
    ("visits.acknowledged", "visits acknowledged"), ("visits.lost", "visits lost"),
    ("visits.duplicated", "visits duplicated"),
]


def find_summary(path: str | Path, target: str | None, test: str | None, like: Summary | None = None
                 ) -> Summary | None:
    """A results folder's summary, or an iteration's latest one for target and test (and of the same kind as
    the run `like`)."""
    exact = results.ResultsFolder(path).summary()
    return exact if exact is not None else results.latest_summary(path, target, test, like)


def cell(summary: Summary | None, key: str) -> str:
    if summary is None:
        return "—"
    if key == "verdict":
        return summary.verdict["outcome"] if summary.verdict else "n/a"
    if key == "results_dir":
        return f"{summary.test} {summary.results_dir.split('-', 1)[-1]}"
    if key.startswith("prediction."):  # the capacity model's figure, from the run's own prediction
        value = figure_to_measure(summary.prediction or {}, summary.target, key.split(".", 1)[1])
        return value if isinstance(value, str) else fmt(value, 0)
    value = summary.headline.get(key)
    if key == "failure_ratio":
        return percent(value)
    return fmt(value, 2 if key == "extra_min_per_min" else 1)


def column_name(path: str | Path, summary: Summary | None) -> str:
    """An iteration folder's name; for an exact run, its iteration and target, so a local and a
    Google Cloud run of one iteration can stand side by side."""
    folder = results.ResultsFolder(path)
    if summary is not None and folder.summary() is not None:  # find_summary found the folder's own
        return f"{folder.iteration_dir.name} ({summary.target})"
    return Path(path).name


def compare_table(paths: Iterable[str | Path], target: str = "local", test: str | None = None) -> str:
    found = [(path, find_summary(path, target, test)) for path in paths]
    summaries = [(column_name(path, summary), summary) for path, summary in found]
    lines = ["| figure | " + " | ".join(name for name, _ in summaries) + " |",
             "|---|" + "---:|" * len(summaries)]
    for key, label in ROWS:
        lines.append(f"| {label} | " + " | ".join(cell(s, key) for _, s in summaries) + " |")
    return "\n".join(lines)


# ---- a run against a baseline ----------------------------------------------------------------------------
def change(baseline: Any, run: Any, entry: Mapping[str, Any] | None) -> str:
    """The run's figure against the baseline's as its band measures it: a percentage of the larger of the two
    (noise.relative_change), or in the figure's own unit (a band of a count mostly 0, an exact count, no band
    from a baseline of 0)."""
    if not (noise.is_number(baseline) and noise.is_number(run)):
        return "same" if baseline == run else "changed"
    unit = entry["unit"] if entry else None
    if unit == "relative" or (unit is None and baseline):
        return f"{noise.relative_change(baseline, run) * 100:+.1f} %"
    return f"{run - baseline:+,g}"


def band_notes(record: Mapping[str, Any], base: Summary) -> list[str]:
    """What the band is, and where it does not fit these runs."""
    kind = record["kind"]
    notes = [f"band: {len(record['repeats'])} repeats of {kind['iteration']}'s {kind['test']} on the {kind['target']} "
             f"target (profile {kind['profile']}; {kind['shape']}); the {record['statistic']}"]
    ours = noise.kind(base)
    differing = [key for key in ("target", "iteration", "test", "profile", "shape") if ours[key] != kind[key]]
    if "target" in differing:
        notes.append(f"note: the band was measured on the {kind['target']} target and these runs are "
                     f"{base.target}'s: a band measured on the twin is not a cloud run's band (measure one there: "
                     "scripts/benchmark-noise)")
    elif differing:
        notes.append(f"note: these runs' {', '.join(differing)} differ from the band's: it is a guide to their "
                     "noise, not a measure of it")
    return notes


def baseline_lines(baseline: str | Path, paths: Sequence[str | Path], band: str | Path | None = None,
                   target: str | None = "local", test: str | None = None) -> tuple[list[str], list[str]]:
    """(the lines to print, the figures that moved beyond their band): every headline figure of the run in
    `paths` (one results folder, or an iteration: its latest run like the baseline) beside the baseline's."""
    if len(paths) != 1:
        raise VisitkitError(f"--baseline compares one run with it: give one results folder or iteration, not "
                            f"{len(paths)}")
    base = find_summary(baseline, target, test)
    if base is None:
        raise VisitkitError(f"{baseline}: no run to compare with (a results folder, or an iteration with a run)")
    run = find_summary(paths[0], target, test, like=base)
    if run is None:
        raise VisitkitError(f"{paths[0]}: no run like the baseline's ({', '.join(map(str, results.kind(base)))})")
    if results.kind(run) != results.kind(base):
        raise VisitkitError(f"{run.results_dir} is not comparable with the baseline {base.results_dir}: target, test, "
                            f"profile, faults, scaling: {results.kind(run)} against {results.kind(base)}")
    band_folder, record = noise.chosen(band)
    lines = [f"baseline {base.iteration} {base.results_dir}, run {run.iteration} {run.results_dir} ({run.target}); "
             f"noise band {band_folder.name}", *band_notes(record, base), "",
             "| figure | baseline | run | change | band | flagged |", "|---|---:|---:|---:|---:|---|"]
    moved, unjudged = [], []
    for key in dict.fromkeys([*base.headline, *run.headline]):
        was, now = base.headline.get(key), run.headline.get(key)
        entry = record["figures"].get(key)
        flagged, why = noise.judgement(entry, was, now)
        if flagged is None:
            unjudged.append(key)
        elif flagged:
            moved.append(key)
        verdict = "not judged: " + why if flagged is None else ("**yes**" if flagged else "no")
        cells = [key, noise.figure_text(key, was), noise.figure_text(key, now), change(was, now, entry),
                 noise.band_text(entry), verdict]
        lines.append("| " + " | ".join(cells) + " |")
    judged = len(base.headline.keys() | run.headline.keys()) - len(unjudged)
    lines += ["", "change: run - baseline, as a percentage of the larger of the two (as the band is measured), "
              "or in the figure's own unit where the band is",
              f"{len(moved)} of {judged} judged figures moved beyond their noise band"
              + (f": {', '.join(moved)}" if moved else ""),
              f"{len(unjudged)} figures shown but not judged (no band: not a number, not in the band's repeats, "
              "or n/a in a repeat or a run)"]
    return lines, moved

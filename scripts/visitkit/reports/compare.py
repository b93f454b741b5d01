"""Several iterations' latest reports side by side: one row per figure, one column per iteration."""
from collections.abc import Iterable
from pathlib import Path

from visitkit.catalogue import PUBLIC_PATHS, PUSH_FUNCTION
from visitkit.formatting import fmt, percent
from visitkit.model.capacity import figure_to_measure
from visitkit.results import folder as results
from visitkit.results.records import Summary

ROWS = [  # (headline key, label)
    ("verdict", "verdict"), ("results_dir", "run"), ("users_max", "users (max)"), ("knee_users", "RPS knee: users"),
    ("knee_rps", "RPS knee: RPS"), ("prediction.knee_users", "predicted knee: users"),
    ("prediction.knee_rps", "predicted knee: RPS"), ("prediction.limited_by", "predicted limit"),
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


def find_summary(path: str | Path, target: str | None, test: str | None) -> Summary | None:
    """A results folder's summary, or an iteration's latest one for target and test."""
    exact = results.ResultsFolder(path).summary()
    return exact if exact is not None else results.latest_summary(path, target, test)


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

"""Several iterations' latest reports side by side: one row per figure, one column per iteration."""
from pathlib import Path

from visitkit.catalogue import PUBLIC_PATHS, PUSH_FUNCTION
from visitkit.formatting import fmt, percent
from visitkit.model.capacity import figure_to_measure
from visitkit.results import folder as results

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
    ("visits.acknowledged", "visits acknowledged"), ("visits.lost", "visits lost"), ("visits.duplicated", "visits duplicated"),
]


def find_summary(path, target, test):
    """A results folder's summary, or an iteration's latest one for target and test."""
    exact = results.ResultsFolder(path).summary()
    return exact if exact is not None else results.latest_summary(path, target, test)


def cell(summary, key):
    if summary is None:
        return "—"
    if key == "verdict":
        return (summary.get("verdict") or {}).get("outcome", "n/a")
    if key == "results_dir":
        return f"{summary['test']} {summary['results_dir'].split('-', 1)[-1]}"
    if key.startswith("prediction."):  # the capacity model's figure, from the run's own prediction
        value = figure_to_measure(summary.get("prediction") or {}, summary.get("target"), key.split(".", 1)[1])
        return value if isinstance(value, str) else fmt(value, 0)
    value = summary["headline"].get(key)
    if key == "failure_ratio":
        return percent(value)
    return fmt(value, 2 if key == "extra_min_per_min" else 1)


def column_name(path, summary):
    """An iteration folder's name; for an exact run, its iteration and target, so a local and a
    Google Cloud run of one iteration can stand side by side."""
    folder = results.ResultsFolder(path)
    if folder.summary() is not None:
        return f"{folder.iteration_dir.name} ({summary['target']})"
    return Path(path).name


def compare_table(paths, target="local", test=None):
    found = [(path, find_summary(path, target, test)) for path in paths]
    summaries = [(column_name(path, summary), summary) for path, summary in found]
    lines = ["| figure | " + " | ".join(name for name, _ in summaries) + " |",
             "|---|" + "---:|" * len(summaries)]
    for key, label in ROWS:
        lines.append(f"| {label} | " + " | ".join(cell(s, key) for _, s in summaries) + " |")
    return "\n".join(lines)

"""A results folder, iterations/iteration-N/results/<test>-<timestamp>/: what one run leaves.

The one place that knows its files. `ResultsFolder` saves what a run records (run.json, the
samples, the polls) and loads it all back as `RunData`; summary, verdict, report, plots, compare
and the README block all read from that, so `visitkit report DIR` rebuilds a report from the
folder alone. FORMAT_VERSION is written into run.json and summary.json; older folders are read
through `_upgrade`. summary.json is read and written as its record (results/records.py, Summary).
"""
import csv
import datetime
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from visitkit.cloud import monitoring
from visitkit.errors import RunError, SettingsError
from visitkit.results import analysis
from visitkit.results.arrivals import ArrivalRow
from visitkit.results.arrivals import rows as arrival_rows
from visitkit.results.records import FORMAT_VERSION as FORMAT_VERSION  # written into run.json and summary.json
from visitkit.results.records import Failure, Summary, SummaryError
from visitkit.samples import Sample
from visitkit.settings import DEFAULT_SCALING, Settings, parse_settings
from visitkit.suite import OUTPUTS
from visitkit.suite import RUN_CONF as RUN_CONF  # the results folder names it too (results.RUN_CONF)
from visitkit.twin import autoscaler

RUN, AUDIT, SUMMARY, REPORT = "run.json", "audit.json", "summary.json", "report.md"
# What Locust writes, named where the fleet's master names them too (locust/node.py).
LOCUST_PREFIX, LOCUST_HTML, LOCUST_LOG = OUTPUTS["--csv"], OUTPUTS["--html"], OUTPUTS["--logfile"]
LEDGER, HEALTH, PER_SECOND = OUTPUTS["--ledger-file"], OUTPUTS["--health-file"], OUTPUTS["--per-second-file"]
ARRIVALS = OUTPUTS["--arrivals-file"]  # an open-model run's arrivals per second (locust/arrivals.py)
STATS, HISTORY, FAILURES = (f"{LOCUST_PREFIX}_{kind}.csv" for kind in ("stats", "stats_history", "failures"))
SAMPLES, POLLS, METRICS = "server-samples.jsonl", "convergence.jsonl", "metrics"
STACK = "stack"  # the local stack's state folder: its logs and HAProxy configuration
# The plots beside the report, by what they show (gcp: the platform's metrics, a Google Cloud run's only).
PLOTS = {"load": "load.png", "server": "server.png", "gcp": "gcp-metrics.png", "resources": "resources.png"}


@dataclass
class RunData:
    """Everything a results folder holds, parsed."""
    name: str
    run: dict[str, Any]
    settings: Settings | None  # the run's settings, parsed from run.json; None if they do not parse
    ledger: dict[str, Any]
    stats: list[dict[str, Any]]  # Locust's per-endpoint rows, as analysis.percentile_table makes them
    history: list[dict[str, Any]]  # Locust's per-second Aggregated history
    failures: list[Failure]  # [(endpoint, error, occurrences)]
    samples: list[Sample]  # the platform's samples, one per second locally, per minute on Google Cloud
    polls: list[tuple[float, dict[str, int]]]  # [(time, {page: stored})] after the load
    metrics: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # Cloud Monitoring rows by metric name
    # Cloud Monitoring queries that failed (metrics/missing.json)
    missing_metrics: list[dict[str, Any]] = field(default_factory=list)
    # the audit of every visit (visitkit.results.audit), None for a run before audits
    audit: dict[str, Any] | None = None
    health: list[dict[str, Any]] = field(default_factory=list)  # each Locust process's CPU and loop lag per second
    per_second: dict[int, int] = field(default_factory=dict)  # {unix second: requests}, exact (older runs: empty)
    # an open-model run's arrivals per second, as results.arrivals.rows reads them (closed-model runs: empty)
    arrivals: list[ArrivalRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what loading had to say (an older format)
    # the twin's autoscaler's events (stack/scaling.jsonl, twin/autoscaler.py); empty with fixed instances
    scaling_events: list[dict[str, Any]] = field(default_factory=list)


def read_csv(path: str | Path) -> list[dict[str, str]]:
    path = Path(path)
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_jsonl(path: str | Path) -> list[Any]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _read_json(path: str | Path, default: Any = None) -> Any:
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else default


def read_summary(path: str | Path) -> Summary:
    """A summary.json as its record; a RunError names the file it cannot read."""
    try:
        return Summary.from_json(json.loads(Path(path).read_text()))
    except SummaryError as error:
        raise RunError(f"{path}: {error}") from None


def _upgrade(run: dict[str, Any], samples: list[dict[str, Any]]) -> list[str]:
    """Format 1 (no version) counted inc-counter's 2xx as `published`; it is `accepted` now."""
    if run.get("format_version", 1) >= FORMAT_VERSION:
        return []
    for sample in samples:
        store = sample.get("store") or {}
        if "published" in store:
            store["accepted"] = store.pop("published")
    return ["An older results folder (format 1): its `accepted` figure counts every 2xx of inc-counter, "
            "CORS preflights included, not only its 202s."]


class ResultsFolder:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def new(cls, iteration_dir: str | Path, test: str, now: Callable[[], datetime.datetime] = datetime.datetime.now,
            prefix: str = "") -> "ResultsFolder":
        """A new folder's path; `prefix` "rehearsal-" for a rehearsal's (never committed: .gitignore)."""
        return cls(Path(iteration_dir) / "results" / f"{prefix}{test}-{now().strftime('%Y%m%d-%H%M%S')}")

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def iteration_dir(self) -> Path:
        return self.path.parent.parent

    def create(self) -> None:
        self.path.mkdir(parents=True)

    def save_run(self, run: dict[str, Any]) -> None:
        (self / RUN).write_text(json.dumps({**run, "format_version": FORMAT_VERSION}, indent=2))

    def run(self) -> dict[str, Any]:
        found: dict[str, Any] | None = _read_json(self / RUN)
        if found is None:
            raise RunError(f"{self.path} is not a results folder: it has no {RUN}")
        return found

    def load(self) -> RunData:
        run = self.run()
        samples = read_jsonl(self / SAMPLES)
        metrics_dir = self / METRICS
        notes = _upgrade(run, samples)
        try:
            settings = parse_settings(run.get("settings") or {}, f"{RUN}'s settings")
        except SettingsError as error:
            settings = None
            notes.append(f"Settings and cost not shown: {error}")
        return RunData(
            name=self.name, run=run, settings=settings, ledger=_read_json(self / LEDGER, {}),
            stats=analysis.percentile_table(read_csv(self / STATS)),
            history=analysis.aggregated_history(read_csv(self / HISTORY)),
            failures=analysis.first_failures(read_csv(self / FAILURES)),
            samples=samples,
            polls=[(poll["time"], poll["totals"]) for poll in read_jsonl(self / POLLS)],
            metrics={path.stem: read_csv(path) for path in sorted(metrics_dir.glob("*.csv"))},
            missing_metrics=monitoring.read_missing(metrics_dir),
            audit=_read_json(self / AUDIT),
            health=analysis.health_rows(read_csv(self / HEALTH)),
            per_second={int(row["time"]): int(row["requests"]) for row in read_csv(self / PER_SECOND)},
            arrivals=arrival_rows(read_csv(self / ARRIVALS)),
            notes=notes, scaling_events=read_jsonl(self / STACK / autoscaler.EVENTS_FILE))

    def save_audit(self, audit: dict[str, Any]) -> None:
        (self / AUDIT).write_text(json.dumps(audit, indent=1))

    def save_summary(self, summary: Summary) -> None:
        (self / SUMMARY).write_text(json.dumps({**summary.to_json(), "format_version": FORMAT_VERSION}, indent=2,
                                               default=str))

    def summary(self) -> Summary | None:
        """The folder's summary.json as its record, None before it is written."""
        path = self / SUMMARY
        return read_summary(path) if path.exists() else None


def kind(summary: Summary) -> tuple[str, str, str | None, bool, str]:
    """What makes two runs comparable: target, test, latency profile, whether faults were injected, and how the
    twin ran the instances (a run recorded before scaling existed ran them fixed)."""
    scaling = (summary.settings or {}).get("scaling") or DEFAULT_SCALING
    return (summary.target, summary.test, summary.profile["name"] if summary.profile else None, bool(summary.chaos),
            scaling)


def summaries(iteration_dir: str | Path, target: str | None = None, test: str | None = None,
              like: Summary | None = None) -> list[tuple[str, "ResultsFolder", Summary]]:
    """[(started, folder, summary)] of an iteration's runs, oldest first, optionally one target's
    and one test's, or only runs of the same kind as the summary `like`."""
    found = []
    for path in Path(iteration_dir).glob(f"results/*/{SUMMARY}"):
        summary = read_summary(path)
        if like is not None and kind(summary) != kind(like):
            continue
        if (target is None or summary.target == target) and (test is None or summary.test == test):
            found.append((summary.started or "", ResultsFolder(path.parent), summary))
    return sorted(found, key=lambda item: (item[0], item[1].name))


def latest_summary(iteration_dir: str | Path, target: str | None = None, test: str | None = None,
                   like: Summary | None = None) -> Summary | None:
    """The newest summary of an iteration (for a target and test, or like another run), or None."""
    found = summaries(iteration_dir, target, test, like)
    return found[-1][2] if found else None


TEXT_SUFFIXES = {".json", ".jsonl", ".cfg", ".log", ".md", ".csv", ".html", ".txt", ".http"}


def without_machine_paths(folder: str | Path) -> None:
    """Rewrites the folder's text files so no path of this machine stays in them (results are
    committed): a path in the checkout becomes relative to it (the checkout itself `.`), one in the
    home folder starts with `~`. Only the paths themselves: not /srv/root, not a sibling /work/main2.
    For a stack that is down only: a running one reads its state and configuration by absolute path."""
    from visitkit.paths import ROOT

    def whole(path: Path) -> re.Pattern[str]:  # the path, then "/" or its end; not inside a longer path
        return re.compile(rf"(?<![\w./-]){re.escape(str(path))}(/|(?![\w.-]))")

    checkout, home = whole(ROOT), whole(Path.home())
    for path in Path(folder).rglob("*"):
        if path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        text = path.read_text(errors="surrogateescape")
        cleaned = checkout.sub(lambda m: "" if m.group(1) else ".", text)
        cleaned = home.sub(lambda m: "~" + m.group(1), cleaned)
        if cleaned != text:
            path.write_text(cleaned, errors="surrogateescape")

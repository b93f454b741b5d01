"""One study report, studies/<name>-<time>/report.md (with study.png), from the folder's study.json and the results
folders of its runs: per iteration the reference study's figures (iterations/iteration-N/study.json), this run's
and the model's side by side; each verdict judged again against this study's own runs (a check that compares with
another iteration, "1.5 x iteration-1", compares with this study's run of it, never another run of that iteration)
and set beside the study's; one plot across the iterations; the total time and cost; and a summary line,
`verdicts N of M as the study`, which study.json keeps as `outcome` for the docs to cite."""
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from visitkit.formatting import fmt  # noqa: E402
from visitkit.model import cost  # noqa: E402
from visitkit.model.capacity import figure_to_measure  # noqa: E402
from visitkit.reports import study, verdict  # noqa: E402
from visitkit.results import folder as results  # noqa: E402
from visitkit.results.records import Summary, Verdict  # noqa: E402
from visitkit.settings import parse_settings  # noqa: E402
from visitkit.studies import plan as plans  # noqa: E402
from visitkit.studies.state import read_state, resolved, save_state  # noqa: E402

REPORT, PLOT = "report.md", "study.png"
Figure = Callable[["StudyRun"], Any]


@dataclass(frozen=True)
class Row:
    """One figure the study gave (its key in study.json), beside the model's and this run's."""
    key: str
    label: str
    model: Figure
    run: Figure
    digits: int = 0
    study: Callable[[Any], Any] = lambda value: value


def headline(name: str) -> Figure:
    return lambda run: run.summary.headline.get(name)


def model_of(run: "StudyRun") -> dict[str, Any]:
    """The model's figures the run recorded before its load ({}: none)."""
    return dict(run.summary.prediction or {})


def predicted(name: str) -> Figure:
    return lambda run: figure_to_measure(model_of(run), run.summary.target, name)


def response_ms(function: str) -> Figure:
    return lambda run: (model_of(run).get("response_ms") or {}).get(function)


def nothing(run: "StudyRun") -> None:
    return None


def model_load(name: str) -> Figure:
    return lambda run: dict(run.summary.model_load or {}).get(name)


# The figures a study.json may give, in the report's order; a breakpoint shows those of its iteration's study.json
# but the endurance ones, an endurance those.
ROWS = (
    Row("knee_users", "RPS knee (users)", predicted("knee_users"), headline("knee_users")),
    Row("first_failure_users", "first failures (users)", predicted("first_429_users"), headline("first_failure_users")),
    Row("first_failure_rps", "first failures (RPS)", nothing, headline("first_failure_rps")),
    Row("slowest_function", "slowest function", predicted("limited_by"), headline("slowest_function")),
    Row("get_counter_ms", "get-counter per request (ms)", response_ms("get-counter"),
        headline("service_ms.get-counter")),
    Row("get_counter_p50_s", "get-counter p50 (s)", nothing,
        lambda run: None if (p50 := run.summary.headline.get("p50_ms.get-counter")) is None else p50 / 1000, 1),
    Row("inc_counter_executions_per_s", "inc-counter per request (ms)", response_ms("inc-counter"),
        headline("service_ms.inc-counter"), 0, lambda per_s: 1000 / per_s),
    Row("drain_per_s", "store drain (visits/s)", predicted("drain_per_s"), headline("store.throughput_per_s"), 1),
    Row("extra_min_per_min", "extra minutes per minute of load", model_load("extra_min_per_min"),
        headline("extra_min_per_min"), 2),
    Row("backlog_peak", "backlog peak (visits)", model_load("backlog_at_end"), headline("store.backlog_peak")),
    Row("endurance_rps_held", "RPS held past the knee", predicted("knee_rps"), headline("rps_peak")),
    Row("endurance_publish_per_s", "publish rate (visits/s)", predicted("publish_per_s"),
        headline("store.accepted_per_s"), 1),
    Row("endurance_extra_min_per_min", "extra minutes per minute of load", model_load("extra_min_per_min"),
        headline("extra_min_per_min"), 2),
)


@dataclass(frozen=True)
class StudyRun:
    """A finished run of the study, with its iteration's study.json and README."""
    entry: dict[str, Any]  # its study.json entry
    folder: results.ResultsFolder
    summary: Summary
    figures: dict[str, Any]  # the reference study's, iterations/iteration-N/study.json ({}: none)
    readme: str

    @property
    def iteration(self) -> str:
        return str(self.entry["iteration"])

    @property
    def test(self) -> str:
        return str(self.entry["test"])


def load_runs(state: Mapping[str, Any]) -> list[StudyRun]:
    found = []
    for entry in state["runs"]:
        if entry["status"] != "finished":
            continue
        folder = results.ResultsFolder(resolved(entry["results"]))
        summary = folder.summary()
        if summary is None:
            continue
        iteration_dir = folder.iteration_dir
        readme = iteration_dir / "README.md"
        found.append(StudyRun(entry, folder, summary, study.load(iteration_dir) or {},
                              readme.read_text() if readme.exists() else ""))
    return found


def judged(run: StudyRun, runs: list[StudyRun]) -> Verdict:
    """The run's verdict, a check naming another iteration compared with this study's run of it (the same test)."""
    def other_figures(name: str) -> dict[str, Any] | None:
        same = [other for other in runs if other.iteration == name and other.test == run.test]
        return same[-1].summary.headline if same else None

    return verdict.judge(run.summary.headline, run.readme, other_figures)


def study_verdict(run: StudyRun) -> str | None:
    """The reference study's verdict on the run's hypothesis (its iteration's study.json), for a breakpoint: the
    study judged each hypothesis by its breakpoint; None for another test or an iteration the study did not judge."""
    return run.figures.get("verdict") if run.test == "breakpoint" else None


def rows_of(run: StudyRun) -> list[Row]:
    endurance = run.test == "endurance"
    return [row for row in ROWS if row.key in run.figures and row.key.startswith("endurance_") == endurance]


def shown(value: Any, digits: int) -> str:
    if isinstance(value, float):
        return fmt(value, digits) if digits else f"{value:,.0f}"
    return fmt(value)


def link(folder: Path, target: Path) -> str:
    return Path(os.path.relpath(target, folder)).as_posix()


def run_cost(run: StudyRun, region: str, prices: Mapping[str, Any]) -> dict[str, Any] | None:
    """The model's price of what the run measured: its acknowledged visits, its load and the store's drain after it."""
    if not run.summary.settings:
        return None
    visits = run.summary.visits["total"]["acknowledged"]
    return plans.run_cost(parse_settings(run.summary.settings), visits, run.summary.load["seconds"] or 0,
                          run.summary.headline.get("convergence_s") or 0, prices, region)


def outcome(state: Mapping[str, Any], runs: list[StudyRun], verdicts: Mapping[int, Verdict],
            prices: Mapping[str, Any]) -> dict[str, Any]:
    """What the report found, as study.json keeps it: verdicts as the study's, minutes, US dollars."""
    judged_runs = [(run, verdicts[i]) for i, run in enumerate(runs) if study_verdict(run)]
    region = state.get("predicted", {}).get("region") or cost.DEFAULT_REGION
    modelled = [found for run in runs if (found := run_cost(run, region, prices)) is not None]
    billed = [run.summary.cost["total"] for run in runs if run.summary.cost]
    ended = state.get("ended") or max((run.entry.get("ended") or 0 for run in runs), default=0)
    return {
        "as_study": sum(found["outcome"] == study_verdict(run) for run, found in judged_runs),
        "of": len(judged_runs),
        "verdicts": {f"{run.iteration} {run.test}": verdicts[i]["outcome"] for i, run in enumerate(runs)},
        "minutes": (ended - state["started"]) / 60 if ended and state.get("started") else None,
        "run_minutes": sum(run.entry.get("seconds") or 0 for run in runs) / 60,
        "usd_modelled": sum(found["total"] for found in modelled),
        "usd_billed": sum(billed) if billed and len(billed) == len(runs) else None,
        "region": region}


def summary_line(found: Mapping[str, Any]) -> str:
    return f"verdicts {found['as_study']} of {found['of']} as the study"


def verdict_table(runs: list[StudyRun], verdicts: Mapping[int, Verdict], folder: Path) -> list[str]:
    lines = ["| iteration | test | check | this study | the study | | its report |", "|---|---|---|---|---|---|---|"]
    for i, run in enumerate(runs):
        found = verdicts[i]
        theirs = study_verdict(run)
        checks = "; ".join(f"`{check['check']}`: {check['detail']}" for check in found["checks"]) or "-"
        same = "-" if theirs is None else "as the study" if found["outcome"] == theirs else "unlike the study"
        lines.append(f"| {run.iteration} | {run.test} | {checks} | **{found['outcome']}** | {theirs or '-'} | {same} | "
                     f"[{run.folder.name}]({link(folder, run.folder / results.REPORT)}) |")
    return lines


def figure_lines(run: StudyRun) -> list[str]:
    rows = rows_of(run)
    if not rows:
        return [f"The study gave no figures for {run.iteration}'s {run.test}."]
    lines = ["| | the study | the model | this run |", "|---|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row.label} | {shown(row.study(run.figures[row.key]), row.digits)} | "
                     f"{shown(row.model(run), row.digits)} | {shown(row.run(run), row.digits)} |")
    return lines


def time_and_cost_lines(state: Mapping[str, Any], runs: list[StudyRun], found: Mapping[str, Any]) -> list[str]:
    predicted = state.get("predicted") or {}
    gcp = state["options"]["target"] == "gcp"
    lines = ["| run | predicted minutes | measured minutes | predicted US$ | the model's US$ with what it measured |"
             + (" billed, from Monitoring (US$) |" if gcp else ""),
             "|---|---:|---:|---:|---:|" + ("---:|" if gcp else "")]
    region = found["region"]
    prices = cost.load_prices()
    for run in runs:
        modelled = run_cost(run, region, prices)
        billed = run.summary.cost["total"] if run.summary.cost else None
        lines.append(f"| {run.iteration} {run.test} | {fmt(run.entry.get('predicted_minutes'))} | "
                     f"{fmt((run.entry.get('seconds') or 0) / 60)} | {fmt(run.entry.get('predicted_usd'), 2)} | "
                     f"{fmt(modelled['total'] if modelled else None, 2)} |" + (f" {fmt(billed, 2)} |" if gcp else ""))
    where = "on Google Cloud" if gcp else "on the twin (priced as on Google Cloud)"
    target = plans.TARGET_MINUTES[state["options"]["target"]]
    lines += ["", f"The whole study {where}: {fmt(found['minutes'])} minutes from start to end "
                  f"({fmt(predicted.get('minutes'))} predicted, target under {target:g}); "
                  f"US${found['usd_modelled']:.2f} by the model with the runs' own visits and durations in {region}"
                  + (f", US${found['usd_billed']:.2f} from what Monitoring reports they used"
                     if found["usd_billed"] is not None else "")
                  + f" (US${predicted.get('usd', 0):.2f} predicted, with the deploy's Cloud Build minutes)."]
    if gcp and (state.get("deployment") or {}).get("destroy_seconds") is not None:
        lines.append(f"The destroy took {state['deployment']['destroy_seconds'] / 60:.1f} minutes.")
    return lines


def study_figure(key: str) -> Figure:
    return lambda run: run.figures.get(key)


def plot(runs: list[StudyRun], path: Path, title: str) -> bool:
    """Across the iterations' breakpoints: the knee and first failures, and the store's drain, for this run, the
    study and the model. False when there is no breakpoint to plot."""
    points = [run for run in runs if run.test == "breakpoint"]
    if not points:
        return False
    x = list(range(len(points)))
    fig, axes = plt.subplots(2, 1, figsize=(12, 7), sharex=True)
    series = (("knee_users", "knee", "tab:orange", 0), ("first_failure_users", "first failures", "tab:red", 0),
              ("drain_per_s", "store drain", "tab:brown", 1))
    for key, label, colour, panel in series:
        row = next(row for row in ROWS if row.key == key)
        sources: tuple[tuple[str, str, str, Figure], ...] = (
            ("this run", "o", "-", row.run), ("the study", "s", "none", study_figure(key)),
            ("the model", "x", ":", row.model))
        measured = [row.run(run) is not None or row.key in run.figures for run in points]
        for source, marker, style, value in sources:
            # the model only where this run or the study measured the figure (no first 429 the ramp never reached)
            ys = [value(run) if shown else None for run, shown in zip(points, measured)]
            ys = [float(y) if isinstance(y, (int, float)) else float("nan") for y in ys]
            axes[panel].plot(x, ys, marker=marker, linestyle=style, color=colour, label=f"{label}: {source}",
                             markerfacecolor="none" if source == "the study" else colour)
    axes[0].set_ylabel("users")
    axes[1].set_ylabel("visits/s stored\nwhile backlogged")
    axes[1].set_xticks(x, [run.iteration for run in points])
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def render(folder: Path, state: Mapping[str, Any], runs: list[StudyRun], verdicts: Mapping[int, Verdict],
           found: Mapping[str, Any], plotted: bool) -> str:
    options = state["options"]
    scaling = f", scaling {options['scaling']}" if options.get("scaling") else ""  # each settings file's when none
    lines = [f"# A study: {', '.join(options['iterations'])} on {options['target']}, protocol {options['protocol']}"
             + scaling,
             "", f"**{summary_line(found)}**", "",
             "Each verdict is judged again here against this study's own runs (a check naming another iteration "
             "compares with this study's run of it), and set beside the study's own.", "",
             *verdict_table(runs, verdicts, folder), ""]
    if plotted:
        lines += [f"![the knee, the first failures and the store's drain across the iterations]({PLOT})", ""]
    for run in runs:
        lines += [f"## {run.iteration} {run.test}", "",
                  f"[{run.folder.name}]({link(folder, run.folder / results.REPORT)}): `{run.summary.shape}`, "
                  f"to {run.summary.load['max_users']:,} users; the model: {run.summary.prediction['profile']} profile"
                  if run.summary.prediction else f"[{run.folder.name}]({link(folder, run.folder / results.REPORT)})",
                  "", *figure_lines(run), ""]
    lines += ["## Time and cost", "", *time_and_cost_lines(state, runs, found), ""]
    left = [entry for entry in state["runs"] if entry["status"] != "finished"]
    if left:
        lines += ["## Not finished", ""]
        lines += [f"- {entry['iteration']} {entry['test']}: {entry['status']}"
                  + (f" ({entry['error']})" if entry.get("error") else "") for entry in left]
        lines.append("")
    return "\n".join(lines)


def write(folder: Path) -> Path:
    """report.md and study.png in the study folder, and study.json's `outcome`; returns the report's path."""
    folder = Path(folder)
    state = read_state(folder)
    runs = load_runs(state)
    verdicts = {i: judged(run, runs) for i, run in enumerate(runs)}
    found = outcome(state, runs, verdicts, cost.load_prices())
    title = f"{', '.join(state['options']['iterations'])} on {state['options']['target']}: {summary_line(found)}"
    plotted = plot(runs, folder / PLOT, title)
    (folder / REPORT).write_text(render(folder, state, runs, verdicts, found, plotted))
    save_state(folder, {**state, "outcome": found})
    return folder / REPORT

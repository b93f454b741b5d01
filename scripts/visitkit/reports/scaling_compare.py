"""The same iterations run on the twin with fixed instances and autoscaled, side by side (issue #50): per iteration
each run's verdict on the hypothesis, the figures its checks read, and its headline, with the ratio autoscaled /
fixed. The docs render it from `<!-- figures scaling-compare: FOLDER FIXED AUTO [FIXED AUTO ...] -->`
(reports/docs.py): pairs of results folders relative to FOLDER, the run with fixed instances first."""
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from visitkit.formatting import fmt
from visitkit.reports import verdict
from visitkit.reports.figure_text import DocsError, prose, read_json
from visitkit.results import folder as results
from visitkit.results.records import Summary, SummaryError, Verdict
from visitkit.results.summary import headline_cells
from visitkit.results.thresholds import Threshold
from visitkit.settings import SCALING_MODES

# A run recorded before the twin had an autoscaler says nothing of its scaling: every instance ran all the time.
BEFORE_THE_AUTOSCALER = "fixed"
HEADER = ["| iteration | | fixed instances | autoscaled | autoscaled / fixed |", "|---|---|---:|---:|---:|"]


@dataclass(frozen=True)
class Run:
    """One results folder of the table, as the marker names it."""
    named: str  # relative to the marker's folder
    iteration: Path  # its iteration folder: the README its verdict is judged by, the name a check's "x NAME" gives
    scaling: str  # one of SCALING_MODES
    summary: Summary


def run_scaling(record: Mapping[str, Any], named: str) -> str:
    """How the twin ran a run's instances, from its run.json: its `scaling`, else its settings' (--scaling writes
    them), else fixed (a run from before the autoscaler)."""
    found = record.get("scaling") or (record.get("settings") or {}).get("scaling") or BEFORE_THE_AUTOSCALER
    if found not in SCALING_MODES:
        raise DocsError(f"{named}: run.json's scaling {found!r} is none of {', '.join(SCALING_MODES)}")
    return str(found)


def read_run(folder: Path, named: str) -> Run:
    path = folder / named
    try:
        summary = Summary.from_json(read_json(path, "summary"))
    except SummaryError as error:
        raise DocsError(f"{named}: summary.json: {error}") from None
    return Run(named, results.ResultsFolder(path).iteration_dir.resolve(), run_scaling(read_json(path, "run"), named),
               summary)


def judged(run: Run, column: Mapping[str, Run]) -> Verdict:
    """The run's verdict by its iteration's README (reports/verdict.py), a check naming another iteration compared
    with that iteration's run in the same column: fixed with fixed, autoscaled with autoscaled."""
    def other_figures(name: str) -> Mapping[str, Any]:
        if name not in column:
            raise DocsError(f"{run.iteration.name}'s check compares its run with {name}'s: name {name}'s pair too")
        return column[name].summary.headline

    readme = run.iteration / "README.md"
    return verdict.judge(run.summary.headline, readme.read_text() if readme.is_file() else "", other_figures)


def ratio(fixed: Any, auto: Any) -> str:
    """Autoscaled / fixed for two numbers ('n/a' over a zero or a missing one); for words, 'same' or 'differs'."""
    if fixed is None or auto is None:
        return "n/a"
    if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (fixed, auto)):
        return f"{auto / fixed:.2f}x" if fixed else "n/a"
    return "same" if fixed == auto else "differs"


def ratios(fixed: Sequence[Any], auto: Sequence[Any]) -> str:
    return " / ".join(ratio(f, a) for f, a in zip(fixed, auto))


def checked_figures(readme: Path) -> list[str]:
    """The headline figures the README's checks read, in order, each once."""
    found = [Threshold.read(check) for check in verdict.hypothesis_checks(readme.read_text() if readme.is_file()
                                                                          else "")]
    return list(dict.fromkeys(check.figure for check in found if check is not None))


def comparison(folder: Path, link: str, arguments: str) -> str:
    """The table, then which verdicts moved, in words. `link`: FOLDER relative to the doc."""
    named = arguments.split()
    if not named or len(named) % 2:
        raise DocsError(f"scaling-compare {folder.name}: name pairs of results folders relative to it, each the run "
                        "with fixed instances then the same run autoscaled")
    pairs = [(read_run(folder, fixed), read_run(folder, auto)) for fixed, auto in zip(named[::2], named[1::2])]
    columns: dict[str, dict[str, Run]] = {"fixed": {}, "auto": {}}
    for pair in pairs:
        for run, scaling in zip(pair, columns):
            if run.scaling != scaling:
                raise DocsError(f"{run.named} ran with scaling {run.scaling}: each pair names the run with fixed "
                                "instances first, then the autoscaled one")
            if run.iteration.name in columns[scaling]:
                raise DocsError(f"{run.named}: {run.iteration.name} has a pair already")
            columns[scaling][run.iteration.name] = run
        fixed, auto = pair
        if fixed.iteration != auto.iteration:
            raise DocsError(f"{fixed.named} and {auto.named} are runs of two iterations")
        kinds = [(*results.kind(run.summary)[:-1], run.summary.shape) for run in pair]  # all but the scaling
        if kinds[0] != kinds[1]:
            raise DocsError(f"{fixed.named} and {auto.named} are not the same run but for the scaling: "
                            f"{kinds[0]} and {kinds[1]}")
    rows, moved = list(HEADER), []
    for fixed, auto in pairs:
        verdicts = [judged(run, columns[run.scaling]) for run in (fixed, auto)]
        outcomes = [found["outcome"] for found in verdicts]
        if outcomes[0] != outcomes[1]:
            moved.append(f"{fixed.iteration.name} ({outcomes[0]} with fixed instances, {outcomes[1]} autoscaled)")
        reports = [f"[{run.summary.results_dir}]({link}/{run.named}/{results.REPORT})" for run in (fixed, auto)]
        rows.append(f"| {fixed.iteration.name} | run | {' | '.join(reports)} | |")
        details = ["**" + found["outcome"] + "**" + "".join(f"; {check['detail']}" for check in found["checks"])
                   for found in verdicts]
        rows.append(f"| | verdict | {' | '.join(details)} | {'same' if outcomes[0] == outcomes[1] else 'moved'} |")
        for figure in checked_figures(fixed.iteration / "README.md"):
            values = [run.summary.headline.get(figure) for run in (fixed, auto)]
            rows.append(f"| | `{figure}` (checked) | {fmt(values[0])} | {fmt(values[1])} | {ratio(*values)} |")
        for cells in zip(headline_cells(fixed.summary.headline), headline_cells(auto.summary.headline)):
            rows.append(f"| | {cells[0].heading} | {cells[0].text} | {cells[1].text} | "
                        f"{ratios(cells[0].figures, cells[1].figures)} |")
    said = (f"The verdict moved in {', '.join(moved[:-1])}{' and ' if len(moved) > 1 else ''}{moved[-1]}." if moved
            else "The verdict is the same both ways in " + ("every iteration." if len(pairs) > 1 else "this one."))
    return "\n".join(rows) + "\n\n" + prose(said + spread([(f.summary.headline, a.summary.headline) for f, a in pairs]))


def spread(headlines: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> str:
    """The range of autoscaled / fixed over the pairs of the knee and of the first failure, in users (" Autoscaled
    over fixed: ..."), each over the pairs where both runs have it; "" where none has either."""
    parts = []
    for figure, words in (("knee_users", "the knee"), ("first_failure_users", "the first failure")):
        found = [auto[figure] / fixed[figure] for fixed, auto in headlines if fixed.get(figure) and auto.get(figure)]
        if found:
            low, high = min(found), max(found)
            parts.append(f"{words} {low:.2f}x" + (f" to {high:.2f}x" if f"{high:.2f}" != f"{low:.2f}" else "")
                         + f" ({len(found)} of {len(headlines)} iterations)")
    return f" Autoscaled over fixed, in users: {'; '.join(parts)}." if parts else ""

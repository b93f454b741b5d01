"""How far a run's headline figures move when nothing changed: the noise band `compare --baseline` judges by.

The same run is repeated (`--repeats N`: this benchmark runs the iteration's command N times, one after the
other), or N runs already made with one command are read back (`--from DIR ...`). For each numeric headline
figure (summary.json's `headline`) the band is the RANGE the repeats show, max - min: the largest difference
seen between two runs of the same code, as a fraction of the larger (in the figure's own unit when the median
is 0: a count that is mostly none). A baseline comparison puts two single runs side by side, so the spread it
must allow for is that of a difference between two runs, which the range is, not that of one run around a
mean; and a change is measured the same way, |run - baseline| over the larger of the two (relative_change),
so that every pair of the repeats themselves lies within the band.

Why the range and not a standard deviation: with five repeats a standard deviation is itself uncertain by
about a third either way (its 95 % interval runs from 0.6 to 2.9 times the true one), and k x SD assumes a
normal spread these figures do not have (a knee moves in the ramp's steps, a convergence time is skewed by
the backlog). The range needs no such assumption and is what was seen; the record states n beside it.
It is not a guarantee: two unchanged runs can now and then differ by more than any pair of the repeats did.

Visits lost and duplicated are exact: no noise excuses one more (EXACT), whatever the repeats show.

`benchmark(...)` writes a results folder under benchmarks/ (visitkit.benchmarks.benchfolder): benchmark.json
(FORMAT: the command, each repeat, each figure's values and band), summary.md, and repeats/<run>/ with each
repeat's summary.json and run.json.
"""
import datetime
import re
import shlex
import statistics
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from visitkit.benchmarks import benchfolder
from visitkit.errors import VisitkitError
from visitkit.formatting import fmt, percent
from visitkit.paths import ROOT
from visitkit.results import folder as results
from visitkit.results.records import Summary

FORMAT = 2  # 2: the band over the larger value, (max - min) / max, as a change is measured (1: over the median)
KIND = "noise"
DEFAULT_REPEATS = 5
MIN_REPEATS = 3  # fewer show no spread worth the name
EXACT = ("visits.lost", "visits.duplicated")  # exact counts: any rise is a regression, noise or not
STATISTIC = ("range: the largest difference between two of the n repeats, (max - min) / max, a change being "
             "|run - baseline| over the larger of the two; in the figure's own unit where the median is 0")
RUN_SCRIPT = "scripts/run-iteration"
REPEATS_DIR = "repeats"
COPIED = (results.SUMMARY, "run.json")  # what a reader needs of each repeat: its figures and how it was run
# run-iteration's exits after a whole run: 0, and 3 (cli.GATES_FAILED: a --threshold or --expect failed;
# the figures stand)
RUN_FINISHED = (0, 3)


class FigureBand(TypedDict):
    """One headline figure across the repeats. unit: "relative" (band is a fraction: see relative_change),
    "absolute" (the figure's own unit: its median was 0), "exact" (any rise flags) or None (no band: `why`)."""
    n: int
    values: list[Any]  # each repeat's, None where it had none
    median: float | None
    min: float | None
    max: float | None
    band: float | None
    unit: str | None
    why: str | None


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def figure_band(name: str, values: Sequence[Any]) -> FigureBand:
    """The band of one figure from its value in each repeat."""
    numbers = [value for value in values if is_number(value)]
    low, high = (min(numbers), max(numbers)) if numbers else (None, None)
    median = statistics.median(numbers) if numbers else None
    entry = FigureBand(n=len(numbers), values=list(values), median=median, min=low, max=high, band=None, unit=None,
                       why=None)
    if name in EXACT:
        entry["band"], entry["unit"] = 0, "exact"
    elif len(numbers) < len(values):
        entry["why"] = f"n/a in {len(values) - len(numbers)} of {len(values)} repeats"
    elif median and low is not None and high is not None:
        entry["band"], entry["unit"] = relative_change(low, high), "relative"
    elif low is not None and high is not None:  # a median of 0 (a count that is mostly none): its own unit
        entry["band"], entry["unit"] = high - low, "absolute"
    return entry


def bands(summaries: Sequence[Summary]) -> dict[str, FigureBand]:
    """Every headline figure that is a number in at least one repeat, in the headline's order."""
    names = list(dict.fromkeys(name for summary in summaries for name in summary.headline))
    found = {name: [summary.headline.get(name) for summary in summaries] for name in names}
    return {name: figure_band(name, values) for name, values in found.items() if any(map(is_number, values))}


def judgement(entry: Mapping[str, Any] | None, baseline: Any, run: Any) -> tuple[bool | None, str]:
    """(True when the run's figure moved beyond its band from the baseline's, False when within it, None when
    not judged; why not)."""
    if not (is_number(baseline) or is_number(run)):
        return None, "not a number"
    if entry is None or entry["unit"] is None:
        return None, entry["why"] if entry and entry["why"] else "no band"
    if not (is_number(baseline) and is_number(run)):
        return None, "n/a in a run"
    if entry["unit"] == "exact":
        return run > baseline, ""
    moved = abs(relative_change(baseline, run)) if entry["unit"] == "relative" else abs(run - baseline)
    return moved > entry["band"], ""


def relative_change(baseline: float, run: float) -> float:
    """run - baseline as a fraction of the larger of the two (0 when both are 0): the measure of a change and of
    the band alike, so that the pair of repeats that set the band is within it whichever is the baseline."""
    larger = max(abs(baseline), abs(run))
    return (run - baseline) / larger if larger else 0.0


def figure_text(name: str, value: Any) -> str:
    """A headline figure as the band's table and the baseline's show it."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return percent(value) if name == "failure_ratio" and is_number(value) else fmt(value, 2)


def band_text(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return "none"
    if entry["unit"] == "exact":
        return "exact: any rise"
    if entry["unit"] == "relative":
        return f"±{entry['band'] * 100:.1f} %"
    if entry["unit"] == "absolute":
        return f"±{fmt(entry['band'])} (median 0)"
    return f"none ({entry['why']})"


# ---- the repeats ----------------------------------------------------------------------------------------
def kind(summary: Summary) -> dict[str, Any]:
    """What every repeat must share to be a repeat of one run."""
    return {"iteration": summary.iteration, "test": summary.test, "target": summary.target,
            "profile": summary.profile["name"] if summary.profile else None, "shape": summary.shape,
            "chaos": bool(summary.chaos), "settings": summary.settings}


def common_kind(summaries: Sequence[tuple[Path, Summary]]) -> dict[str, Any]:
    """The repeats' shared kind; refused when two differ (they would not be repeats of one run)."""
    first_path, first = summaries[0]
    wanted = kind(first)
    for path, summary in summaries[1:]:
        differing = [key for key, value in kind(summary).items() if value != wanted[key]]
        if differing:
            raise VisitkitError(f"{path} is not a repeat of {first_path}: its {', '.join(differing)} differ")
    return wanted


def read_repeats(folders: Iterable[str | Path]) -> list[tuple[Path, Summary]]:
    found = []
    for folder in map(Path, folders):
        summary = results.ResultsFolder(folder).summary()
        if summary is None:
            raise VisitkitError(f"{folder}: no {results.SUMMARY} (not a finished run's results folder)")
        found.append((folder, summary))
    if len(found) < MIN_REPEATS:
        raise VisitkitError(f"a noise band needs at least {MIN_REPEATS} repeats of one run, not {len(found)}")
    return found


def stated_command_fits(arguments: Sequence[str], wanted: Mapping[str, Any]) -> None:
    """A command stated for folders run earlier must at least name their iteration and test."""
    tokens = list(arguments)
    test = next((tokens[i + 1] for i, token in enumerate(tokens[:-1]) if token == "--test"),
                next((token.split("=", 1)[1] for token in tokens if token.startswith("--test=")), None))
    if not tokens or Path(tokens[0]).name != wanted["iteration"] or test != wanted["test"]:
        raise VisitkitError(f"the command {shlex.join(tokens)!r} is not how these runs were made: they are "
                            f"{wanted['iteration']}'s {wanted['test']} runs")


def run_repeats(arguments: Sequence[str], repeats: int,
                run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run) -> list[Path]:
    """Runs `scripts/run-iteration ARGUMENTS` `repeats` times, one after the other; each run's results folder.
    The arguments are tried with --dry-run first, so a typo fails now, not after the first run."""
    if not arguments:
        raise VisitkitError("give the run to repeat: --run \"ITERATION --test T ...\"")
    command = [str(ROOT / RUN_SCRIPT), *arguments]
    tried = run([*command, "--dry-run"], capture_output=True, text=True)
    if tried.returncode != 0:
        raise VisitkitError(f"{shlex.join([RUN_SCRIPT, *arguments])} --dry-run failed: "
                            f"{(tried.stderr or tried.stdout).strip()}")
    results_dir = Path(arguments[0]) / "results"
    folders: list[Path] = []
    for repeat in range(1, repeats + 1):
        before = set(results_dir.glob("*/"))
        print(f"repeat {repeat} of {repeats}: {shlex.join([RUN_SCRIPT, *arguments])}", flush=True)
        finished = run(command)
        new = [path for path in set(results_dir.glob("*/")) - before if (path / results.SUMMARY).exists()]
        if finished.returncode not in RUN_FINISHED or len(new) != 1:
            done = ", ".join(str(folder) for folder in folders) or "none"
            raise VisitkitError(f"repeat {repeat} failed (exit {finished.returncode}); the repeats that finished "
                                f"({done}) can be read back with --from")
        folders.extend(new)
    return folders


def without_checkout_paths(text: str, checkout: Path) -> str:
    """The repeat's checkout (another worktree, perhaps) written as this one's, so the copies name no path of
    the machine they ran on once results.without_machine_paths has run over them."""
    return re.sub(rf"(?<![\w./-]){re.escape(str(checkout))}(?=/|(?![\w.-]))", str(ROOT), text)


def copy_repeat(source: Path, folder: Path) -> str:
    """Copies the repeat's COPIED files into folder/repeats/<its name>/; the copy's path in the folder."""
    target = folder / REPEATS_DIR / source.name
    target.mkdir(parents=True)
    checkout = source.resolve().parents[3]  # <checkout>/iterations/<iteration>/results/<run>
    for name in COPIED:
        if (source / name).exists():
            (target / name).write_text(without_checkout_paths((source / name).read_text(), checkout))
    results.without_machine_paths(target)
    return target.relative_to(folder).as_posix()


def benchmark(from_dirs: Sequence[str | Path] = (), run_arguments: Sequence[str] = (),
              repeats: int = DEFAULT_REPEATS, out_root: str | Path = benchfolder.BENCHMARKS_DIR,
              now: Callable[[], datetime.datetime] = datetime.datetime.now,
              run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run) -> tuple[Path, dict[str, Any]]:
    """The band of every headline figure, from the runs in `from_dirs` (made with `run_arguments`, when stated)
    or from `repeats` runs of `scripts/run-iteration RUN_ARGUMENTS` made now; returns (results folder, record)."""
    if not from_dirs and repeats < MIN_REPEATS:
        raise VisitkitError(f"a noise band needs at least {MIN_REPEATS} repeats, not {repeats}")
    started = now()  # the folder's name and the record's "when"
    if from_dirs:
        taken = "read back from runs made earlier"
        repeat_folders = list(map(Path, from_dirs))
    else:
        taken = "run by this benchmark, one after the other"
        repeat_folders = run_repeats(run_arguments, repeats, run)
    found = read_repeats(repeat_folders)
    shared = common_kind(found)
    if from_dirs and run_arguments:
        stated_command_fits(run_arguments, shared)
    found.sort(key=lambda item: item[1].started or "")
    with benchfolder.new_folder(KIND, out_root, started) as folder:
        copies = [copy_repeat(path, folder) for path, _ in found]
        record = {"format": FORMAT, "benchmark": KIND, "when": started.isoformat(timespec="seconds"),
                  "machine": benchfolder.machine(),
                  "command": shlex.join([RUN_SCRIPT, *run_arguments]) if run_arguments else None, "taken": taken,
                  "kind": shared, "statistic": STATISTIC, "exact": list(EXACT),
                  "repeats": [{"results_dir": summary.results_dir, "started": summary.started, "copy": copy}
                              for (_, summary), copy in zip(found, copies)],
                  "figures": bands([summary for _, summary in found])}
        benchfolder.write(folder, record, summary_lines(record, folder.name))
    return folder, record


# ---- reading a band back --------------------------------------------------------------------------------
def load(folder: str | Path) -> dict[str, Any]:
    return benchfolder.load(folder, KIND, FORMAT)


def chosen(path: str | Path | None = None, out_root: str | Path = benchfolder.BENCHMARKS_DIR
           ) -> tuple[Path, dict[str, Any]]:
    """A noise band, (folder, record): `path` (a noise folder or its benchmark.json), by default the newest in
    out_root (the committed one, unless one was measured here since)."""
    if path is not None:
        folder = Path(path).parent if Path(path).name == benchfolder.RECORD else Path(path)
        return folder, load(folder)
    folders = sorted(Path(out_root).glob(f"{KIND}-*/{benchfolder.RECORD}"))
    if not folders:
        raise VisitkitError(f"no noise band in {out_root}: measure one (scripts/benchmark-noise) or give --band FILE")
    return folders[-1].parent, load(folders[-1].parent)


def render(record: Mapping[str, Any]) -> list[str]:
    """The Markdown table of a record: each figure's median, range and band over the n repeats."""
    lines = ["| figure | n | median | min - max | band |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {name} | {entry['n']} | {figure_text(name, entry['median'])} | {figure_text(name, entry['min'])} - "
              f"{figure_text(name, entry['max'])} | {band_text(entry)} |" for name, entry in record["figures"].items()]
    return lines


def summary_lines(record: Mapping[str, Any], name: str) -> list[str]:
    machine, shape = record["machine"], record["kind"]
    command = f"`{record['command']}`" if record["command"] else "a command not stated"
    return [f"# Noise band ({name})", "",
            f"{len(record['repeats'])} repeats of {shape['iteration']}'s {shape['test']} on the {shape['target']} "
            f"target (latency profile {shape['profile']}; {shape['shape']}), {command}, {record['taken']} "
            f"({machine['processor']}, {machine['cores']} cores): "
            + ", ".join(repeat["results_dir"] for repeat in record["repeats"]) + f" (copies in {REPEATS_DIR}/).", "",
            f"band: the {record['statistic']}. `scripts/compare-iterations --baseline RUN RUN2` flags a figure whose "
            f"change from RUN to RUN2 is larger. {' and '.join(record['exact'])} are exact: any rise flags.", "",
            *render(record), "",
            "A band measured on the twin is this machine's and this twin's: it is not a Google Cloud run's band."]

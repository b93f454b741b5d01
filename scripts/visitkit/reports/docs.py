"""The docs' measured figures, written from the results folders they cite (`visitkit docs [--check]`).

A doc marks each block of figures with an HTML comment that names its sources and holds its template;
the lines after the comment, up to `<!-- /figures -->`, are what `visitkit docs` writes there:

    <!-- figures
    a: results/breakpoint-20261122-192339
    b: ../iteration-2/results/breakpoint-20261122-191213
    ---
    | store drain | {a.summary.store.throughput_per_s:.1f} vs {b.summary.store.throughput_per_s:.1f} msg/s |
    -->
    | store drain | 26.1 vs 13.3 msg/s |
    <!-- /figures -->

A source is a results folder, relative to the doc: `a.summary` is its summary.json (any JSON file by its
stem: `a.run`, `a.benchmark`), `a.name` its name, `a.report` the link to its report.md, `a.dir` the link
to the folder (`--check` names a cited folder git does not track). A placeholder is `{expression}` or
`{expression:format}`, the expression made of sources, attributes, `[keys]`, numbers, arithmetic and the
functions in FUNCTIONS; a value of null reads "n/a". A judgement (a comparison, a verdict, a goal reached, "as in
the study") is not typed but rendered from the figures it is about by FUNCTIONS' words, each threshold in its
docstring: `{study_match(r.summary.verdict.outcome, "supported")}`, `{goals(a, 1.3, b, 2)}`, `{compare_ratio(x / y)}`,
`{noise(a, b, 17)}`, `{more_than(a, b)}`, `{at_most(x, 1, "within", "above")}`, `{span(a, b)}` (for "~6-7 s"); the
model's cost figures, which no results folder holds, are `{cost_per_million(six, "us-central1")}` for a source
naming an iteration folder.
Short forms name a whole table (WHOLE_TABLES): `<!-- figures run: results/X -->` (a run's headline),
`<!-- figures report-section: results/X Chaos -->` (a section of its report),
`<!-- figures benchmark: ../benchmarks/X -->` (a benchmark's summary table) and
`<!-- figures predict: . --profile study -->` (what `scripts/predict` prints for an iteration folder),
`<!-- figures fleet: ../benchmarks/X 10000 [REGION] -->` (the Locust fleet predict --fleet sizes from it) and
`<!-- figures cost-per-million: ../iterations study [iteration-3 ...] -->` (a million visits' cost in each
iteration, or in those named), `<!-- figures cost-items: ../iterations study iteration-4 -->` (one iteration's,
item by item, in words), `<!-- figures hold: . study 10000 [60 [us-central1]] -->` (what an iteration's settings
hold and what 10,000 visits/s take, with readers who stay 60 s), `<!-- figures cost-month: . study 10000
us-central1 -->` (the largest items of a month at 10,000 visits/s) and `<!-- figures study-convergence:
../iterations study -->` (the model's convergence after each of the study's own breakpoints, beside the study's) and
`<!-- figures p95-check: ../iterations/iteration-3 study inc-counter results/load-X ... -->` (the latency model's
p50/p95 at the rate each run held, beside the run's, and the band of measured / model p95) and
`<!-- figures scale-out: ../iterations iteration-4/results/spike-X iteration-4-warm/results/spike-Y
../benchmarks/cold-start-Z -->` on one line (the same spike autoscaled and at min_instances = max_instances: per
autoscaled function its instances, cold starts, early and steady p95, and the scale-out lag beside the model's) and
`<!-- figures scaling-compare: ../iterations iteration-0/results/FIXED iteration-0/results/AUTO ... -->` on one line
(pairs of the same run with fixed instances and autoscaled: each one's verdict, checked figures and headline, and
the ratio autoscaled / fixed).
"""
import ast
import difflib
import json
import math
import operator
import os
import re
import subprocess
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from visitkit.errors import VisitkitError
from visitkit.paths import ROOT
from visitkit.reports.figure_text import PROSE_WIDTH as PROSE_WIDTH
from visitkit.reports.figure_text import DocsError as DocsError
from visitkit.reports.figure_text import prose, read_json
from visitkit.results.records import Summary, SummaryError
from visitkit.suite import locust_module

if TYPE_CHECKING:
    from visitkit.model.scaleout import Limits

ARRIVALS = locust_module("arrivals")  # the open model's sizing of its users

END = "<!-- /figures -->"
# Either `<!-- figures KIND: FOLDER [TITLE] -->` on one line, or `<!-- figures` alone, then sources and template.
BLOCK = re.compile(r"^<!-- figures(?: (?P<head>[^\n]*?) -->|[ \t]*\n(?P<spec>.*?)-->)[ \t]*\n"
                   r"(?P<body>(?:(?!<!-- figures).)*?)^" + re.escape(END), re.S | re.M)
MARKER = re.compile(r"^<!-- /?figures", re.M)  # at a line's start: one in a sentence is prose
PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
COMMENT = re.compile(r"<!--.*?-->", re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")  # [text](target "title")
# Where the docs are: every Markdown file of the checkout but the ones runs and benchmarks write.
SKIPPED_DIRS = {"results", "build", "node_modules"}


class Data:
    """JSON read by attribute or key; a missing one names its whole path."""

    def __init__(self, value: Any, path: str) -> None:
        self.value, self.path = value, path

    def get(self, key: str | int) -> Any:
        try:
            value = self.value[key]
        except (KeyError, IndexError, TypeError):
            raise DocsError(f"{self.path} has no {key!r}") from None
        return Data(value, f"{self.path}.{key}") if isinstance(value, (dict, list)) else value


class Source:
    """One results folder a block cites."""

    def __init__(self, alias: str, folder: Path, doc_dir: Path) -> None:
        self.alias, self.folder, self.doc_dir = alias, folder, doc_dir
        self.read: dict[str, Data] = {}  # each JSON file read once, however many placeholders cite it

    def get(self, name: str) -> str | Data:
        if name in ("report", "dir"):
            target = self.folder / "report.md" if name == "report" else self.folder
            return Path(os.path.relpath(target, self.doc_dir)).as_posix()
        if name == "name":
            return self.folder.name
        if name not in self.read:
            path = self.folder / f"{name}.json"
            if not path.is_file():
                raise DocsError(f"{self.alias} ({self.folder.name}) has no {name}.json")
            found = json.loads(path.read_text())
            if name == "summary":  # as the record reads it: a summary.json it cannot read fails here too
                try:
                    found = Summary.from_json(found).to_json()
                except SummaryError as error:
                    raise DocsError(f"{self.alias} ({self.folder.name}): {path.name}: {error}") from None
            self.read[name] = Data(found, f"{self.alias}.{name}")
        return self.read[name]


def shown(path: Path) -> Path:
    """A doc's path as messages name it: from the checkout's root when it is in the checkout."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


# The words a template renders from its figures (issue #40): a verdict or comparison is computed from the
# figures it is about, never typed, so that a cited run's new figure changes the words with it.
ABOUT = 0.05  # compare_ratio: a ratio within 5 % of 2 is "about twice"
COUNT_WORDS = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"]


def times(a: float, b: float, digits: int = 2) -> str:
    """'1.51x': a as a multiple of b."""
    return f"{a / b:.{int(digits)}f}x"


def compare_ratio(ratio: float) -> str:
    """'more than twice', 'about twice' (within ABOUT of 2, either side) or 'less than twice'."""
    if abs(ratio / 2 - 1) <= ABOUT:
        return "about twice"
    return "more than twice" if ratio > 2 else "less than twice"


def alike(ours: Any, theirs: Any, tolerance: float = 0) -> bool:
    """Two numbers within `tolerance` (a fraction of theirs) of each other; anything else, equal."""
    if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (ours, theirs)):
        return abs(ours - theirs) <= tolerance * abs(theirs)
    return ours == theirs


def as_in(ours: Any, theirs: Any, tolerance: float, whom: str) -> str:
    """'as in WHOM' when ours is theirs (numbers: within `tolerance`, a fraction, which the words then state),
    else 'unlike WHOM'."""
    if not tolerance:
        return f"as in {whom}" if alike(ours, theirs) else f"unlike {whom}"
    band = f"{tolerance * 100:g} %"
    if alike(ours, theirs, tolerance):
        return f"as in {whom} (within {band})"
    return f"unlike {whom} (more than {band} apart)"


def study_match(ours: Any, study: Any, tolerance: float = 0) -> str:
    """'as in the study' or 'unlike the study': as_in, with the study."""
    return as_in(ours, study, tolerance, "the study")


def goal(value: float, ceiling: float) -> str:
    """'reached' when the value is at most the goal's ceiling (every goal the docs set is a most), else
    'not reached'."""
    return "reached" if value <= ceiling else "not reached"


def _positions(indices: list[int], count: int) -> str:
    """'the first three', 'the last', 'the second and fourth': where `indices` stand among `count`."""
    k = len(indices)
    number = "" if k == 1 else f" {COUNT_WORDS[k] if k < len(COUNT_WORDS) else k}"
    if indices == list(range(k)):
        return f"the first{number}"
    if indices == list(range(count - k, count)):
        return f"the last{number}"
    named = [ORDINALS[i] if i < len(ORDINALS) else f"#{i + 1}" for i in indices]
    return "the " + (named[0] if k == 1 else f"{', '.join(named[:-1])} and {named[-1]}")


def goals(*values_and_ceilings: float) -> str:
    """goals(value, ceiling, value, ceiling, ...): which goals are reached, in order, in words: 'the first three
    goals are reached, the last is not', 'every goal is reached', 'no goal is reached'."""
    if not values_and_ceilings or len(values_and_ceilings) % 2:
        raise ValueError("goals() takes pairs: value, ceiling, value, ceiling, ...")
    pairs = list(zip(values_and_ceilings[::2], values_and_ceilings[1::2]))
    reached = [i for i, (value, ceiling) in enumerate(pairs) if goal(value, ceiling) == "reached"]
    missed = [i for i in range(len(pairs)) if i not in reached]
    if not missed:
        return "the goal is reached" if len(pairs) == 1 else "every goal is reached"
    if not reached:
        return "the goal is not reached" if len(pairs) == 1 else "no goal is reached"
    plural = {True: ("goals", "are"), False: ("goal", "is")}
    noun, verb = plural[len(reached) > 1]
    return (f"{_positions(reached, len(pairs))} {noun} {verb} reached, "
            f"{_positions(missed, len(pairs))} {plural[len(missed) > 1][1]} not")


def noise(a: float, b: float, pct: float) -> str:
    """'within this machine's noise, ±PCT %' when a is within PCT % of b, else 'beyond this machine's noise, ±PCT %'."""
    return f"{'within' if alike(a, b, pct / 100) else 'beyond'} this machine's noise, ±{pct:g} %"


def more_than(a: float, b: float, tolerance: float = 0) -> str:
    """'more than', 'less than', or 'about as much as' when a is within `tolerance` (a fraction) of b."""
    if alike(a, b, tolerance):
        return "about as much as"
    return "more than" if a > b else "less than"


def at_most(value: float, limit: float, yes: str, no: str) -> str:
    """`yes` when the value is at most the limit, else `no`: at_most(writes, 1, "within", "above")."""
    return yes if value <= limit else no


def later_or_earlier(ours: float, theirs: float) -> str:
    """'31% later than', '5% earlier than' or 'as late as' (within half a percent): ours against theirs, users
    or seconds into a ramp."""
    change = ours / theirs - 1
    if abs(change) < 0.005:
        return "as late as"
    return f"{change:.0%} later than" if change > 0 else f"{-change:.0%} earlier than"


def span(low: float, high: float) -> str:
    """'6-7', or '8' when both round to the same whole number: a range of two figures, for '~6-7 s'."""
    low, high = sorted((low, high))
    low_text, high_text = f"{low:,.0f}", f"{high:,.0f}"
    return low_text if low_text == high_text else f"{low_text}-{high_text}"


def lost_or_counted_twice(lost: int | None, duplicated: int | None) -> str:
    """'none was lost or counted twice', else '2 were lost and 0 counted twice'; None (a store that had not
    settled when the audit read it): not known."""
    if lost is None or duplicated is None:
        return "whether any was lost or counted twice is not known (the store had not settled)"
    if not lost and not duplicated:
        return "none was lost or counted twice"
    return f"{lost:,} {'was' if lost == 1 else 'were'} lost and {duplicated:,} counted twice"


def cost_per_million(iteration: Source, region: str, service: str = "total") -> float:
    """USD a million visits cost at an iteration's knee on Google Cloud in `region` by the capacity model with the
    `study` profile, the figure the cost-per-million table shows; with `service` (cost.SERVICES: "Cloud Run",
    "Firestore", "Pub/Sub", "Cloud Logging") that service's part. `iteration` is a source naming an iteration
    folder: `six: .` then `{cost_per_million(six, "us-central1")}`, to judge costs with the words above."""
    from visitkit.model import capacity, cost
    from visitkit.settings import load_settings
    from visitkit.twin.profile import load_profile

    if not isinstance(iteration, Source):
        raise DocsError(f"cost_per_million() takes a source naming an iteration folder, not {iteration!r}")
    try:
        settings = load_settings(iteration.folder)
        _, found = cost.cost_per_million(settings, capacity.predict(settings, load_profile("study")),
                                             cost.load_prices(), region)
        return found["total"] if service == "total" else cost.by_service(found)[service]
    except (VisitkitError, KeyError) as error:
        raise DocsError(f"cost_per_million({iteration.alias}, {region!r}, {service!r}): {error}") from None


def _priced(iteration: Source, caller: str) -> Any:
    """An iteration source as the cost curve prices it (model/curve.py), with the study profile."""
    from visitkit.model import capacity, curve
    from visitkit.settings import load_settings
    from visitkit.twin.profile import load_profile

    if not isinstance(iteration, Source):
        raise DocsError(f"{caller}() takes sources naming iteration folders, not {iteration!r}")
    settings = load_settings(iteration.folder)
    return curve.Priced(iteration.folder.name, settings, capacity.predict(settings, load_profile("study")))


def cheaper_above(iteration: Source, other: Source, region: str) -> float:
    """The steady visits/s above which `iteration`'s bill a month is below `other`'s in `region` (curve.crossings,
    list prices, the study profile): `{cheaper_above(seven, three, "us-central1"):,.1f}`."""
    from visitkit.model import cost, curve

    try:
        a, b = _priced(iteration, "cheaper_above"), _priced(other, "cheaper_above")
        found = [c for c in curve.crossings(a, b, cost.load_prices(), region) if c.cheaper_above == a.name]
    except VisitkitError as error:
        raise DocsError(f"cheaper_above({iteration.alias}, {other.alias}, {region!r}): {error}") from None
    if not found:
        raise DocsError(f"cheaper_above({iteration.alias}, {other.alias}, {region!r}): the bills do not cross with "
                        f"{iteration.alias} cheaper above, below the lower knee")
    return found[-1].visits_per_s


def share_from(iteration: Source, other: Source, share: float, region: str) -> str:
    """Where `iteration`'s bill a month is at most `share` x `other`'s at the same steady rate (curve.ratio_from):
    "above N visits/s", or "at no rate up to the lower knee (N visits/s)"."""
    from visitkit.model import cost, curve

    try:
        a, b = _priced(iteration, "share_from"), _priced(other, "share_from")
        found = curve.ratio_from(a, b, share, cost.load_prices(), region)
    except VisitkitError as error:
        raise DocsError(f"share_from({iteration.alias}, {other.alias}, {share}, {region!r}): {error}") from None
    if found is None:
        return f"at no rate up to the lower knee ({min(a.knee, b.knee):,.0f} visits/s)"
    return f"above {found:,.0f} visits/s"


FUNCTIONS = {"min": min, "max": max, "abs": abs, "round": round, "len": len, "sum": sum,
             **{word.__name__: word for word in (times, compare_ratio, study_match, as_in, goal, goals, noise,
                                                 more_than, at_most, later_or_earlier, span, lost_or_counted_twice,
                                                 cost_per_million, cheaper_above, share_from)}}
OPERATORS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.USub: operator.neg, ast.UAdd: operator.pos}


def evaluate(expression: str, sources: Mapping[str, Source]) -> Any:
    """A placeholder's value: only names of sources, attributes, keys, literals, arithmetic and FUNCTIONS."""
    def value(node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in sources:
                raise DocsError(f"{{{expression}}}: no source named {node.id!r}")
            return sources[node.id]
        if isinstance(node, ast.Attribute):
            return value(node.value).get(node.attr)
        if isinstance(node, ast.Subscript):
            return value(node.value).get(value(node.slice))
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            left, right = value(node.left), value(node.right)
            return None if left is None or right is None else OPERATORS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
            operand = value(node.operand)
            return None if operand is None else OPERATORS[type(node.op)](operand)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
                and not node.keywords):
            args = [value(arg) for arg in node.args]
            args = [arg.value if isinstance(arg, Data) else arg for arg in args]
            return None if None in args else FUNCTIONS[node.func.id](*args)
        raise DocsError(f"{{{expression}}}: not allowed in a template: {ast.dump(node)[:60]}")

    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise DocsError(f"{{{expression}}} is not an expression") from None
    try:
        return value(tree.body)
    except (ArithmeticError, TypeError, ValueError, AttributeError) as error:
        raise DocsError(f"{{{expression}}}: {type(error).__name__}: {error}") from None


def split_spec(placeholder: str) -> tuple[str, str]:
    """'expr:spec' -> (expr, spec), the spec after the first colon outside brackets and quotes (Python's rule)."""
    depth, quote = 0, None
    for i, char in enumerate(placeholder):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif char == ":" and depth == 0:
            return placeholder[:i], placeholder[i + 1:]
    return placeholder, ""


def fill(line: str, sources: Mapping[str, Source]) -> tuple[str, list[tuple[str, str]]]:
    """The template line with its placeholders' values, and the list of (placeholder, value)."""
    figures = []

    def one(match: re.Match[str]) -> str:
        expression, spec = split_spec(match.group(1))
        value = evaluate(expression, sources)
        if isinstance(value, (Data, Source)):
            raise DocsError(f"{{{match.group(1)}}} names a whole {type(value).__name__.lower()}, not a figure")
        try:
            text = "n/a" if value is None else format(value, spec)
        except (ValueError, TypeError) as error:
            raise DocsError(f"{{{match.group(1)}}}: {error}") from None
        figures.append((match.group(1), text))
        return text

    return PLACEHOLDER.sub(one, line), figures


class Block:
    """One marked block of a doc: its sources, its template and the text the doc holds now."""

    def __init__(self, doc: Path, match: re.Match[str]) -> None:
        self.doc, self.match = doc, match
        text = match.string
        self.line, self.body_line = (text.count("\n", 0, match.start(group)) + 1 for group in (0, "body"))
        self.head, self.spec, self.body = ((match.group("head") or "").strip(), match.group("spec") or "",
                                           match.group("body"))

    def where(self) -> str:
        return f"{shown(self.doc)}:{self.line}"

    def folder(self, relative: str) -> Path:
        folder = (self.doc.parent / relative.strip()).resolve()
        if not folder.is_dir():
            raise DocsError(f"{self.where()}: no results folder {relative.strip()}")
        return folder

    def template_and_sources(self) -> tuple[str, dict[str, Source]] | tuple[None, tuple[str, Path, str]]:
        if self.head:
            kind, _, argument = self.head.partition(":")
            if kind not in WHOLE_TABLES:
                raise DocsError(f"{self.where()}: unknown kind {kind!r} (known: {', '.join(WHOLE_TABLES)})")
            relative, _, title = argument.strip().partition(" ")
            return None, (kind, self.folder(relative), title)
        lines = self.spec.split("\n")
        if "---" not in lines:
            raise DocsError(f"{self.where()}: a figures block needs its sources, a line '---', then its template")
        cut = lines.index("---")
        sources = {}
        for declaration in filter(str.strip, lines[:cut]):
            alias, colon, relative = (part.strip() for part in declaration.partition(":"))
            if not (colon and relative and alias.isidentifier()) or alias in sources:
                raise DocsError(f"{self.where()}: a source reads 'alias: folder', each alias once: {declaration!r}")
            sources[alias] = Source(alias, self.folder(relative), self.doc.parent)
        return "\n".join(lines[cut + 1:]).rstrip("\n") + "\n", sources

    def folders(self) -> list[Path]:
        """The results folders (or iteration folders) the block reads."""
        found = self.template_and_sources()
        return [found[1][1]] if found[0] is None else [source.folder for source in found[1].values()]

    def render(self) -> tuple[str, list[tuple[str, list[tuple[str, str]]]]]:
        """(the block's text from its results, [(template line, [(placeholder, value)])])."""
        found = self.template_and_sources()
        if found[0] is None:  # a whole table: (kind, folder, title)
            kind, folder, title = found[1]
            try:
                return WHOLE_TABLES[kind](folder, Path(os.path.relpath(folder, self.doc.parent)).as_posix(), title), []
            except DocsError as error:
                raise DocsError(f"{self.where()}: {error}") from None
        template, sources = found
        rendered, lines = [], []
        try:
            for line in template.split("\n"):
                text, figures = fill(line, sources)
                rendered.append(text)
                lines.append((line, figures))
        except DocsError as error:
            raise DocsError(f"{self.where()}: {error}") from None
        return "\n".join(rendered), lines


def run_table(summary: Summary, link: str) -> str:
    """A run's headline as Markdown, its links relative to the doc that shows it (`link`: the results folder)."""
    from visitkit.results import folder as results
    from visitkit.results.summary import headline_table

    return "\n".join([
        f"[{summary.test} {summary.results_dir}]({link}/{results.REPORT}) — verdict: "
        f"**{summary.verdict['outcome'] if summary.verdict else 'n/a'}**", "",
        *headline_table(summary.headline), "",
        f"![load]({link}/{results.PLOTS['load']})"])


def run_headline(folder: Path, link: str, _title: str) -> str:
    return run_table(Summary.from_json(read_json(folder, "summary")), link) + "\n"


def report_section(folder: Path, _link: str, title: str) -> str:
    """One section of the run's report, as report.py renders it from summary.json, without its title."""
    from visitkit.reports import report

    text = report.render(Summary.from_json(read_json(folder, "summary")))
    for section in text.split("\n## ")[1:]:
        heading, _, body = section.partition("\n")
        if heading.strip() == title:
            return body.strip("\n") + "\n"
    raise DocsError(f"the report of {folder.name} has no section {title!r}")


def benchmark_table(folder: Path, _link: str, _title: str) -> str:
    from visitkit.benchmarks import registry

    return "\n".join(registry.render(folder)) + "\n"


def predict_output(iteration: Path, _link: str, arguments: str) -> str:
    """What `scripts/predict ITERATION ARGUMENTS` prints (visitkit.model.command, the function the command
    line prints), from the committed settings, profiles, prices and benchmarks alone, shown as a code block."""
    import argparse
    import contextlib
    import io
    import shlex

    from visitkit.benchmarks import loadgen
    from visitkit.model import command
    from visitkit.twin.profile import load_profile

    parser = argparse.ArgumentParser(prog="visitkit predict")
    command.add_arguments(parser)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as errors:
            options = parser.parse_args([str(iteration), *shlex.split(arguments)])
    except SystemExit:  # argparse refused the arguments
        raise DocsError(f"scripts/predict {iteration.name} {arguments}: {errors.getvalue().strip()}") from None
    try:
        printed = command.lines(options, load_profile(options.profile), loadgen.chosen)
        output = "".join(f"{text}\n" for text in printed)
    except VisitkitError as error:
        raise DocsError(f"scripts/predict {iteration.name} {arguments}: error: {error}") from None
    return "```\n" + output + "```\n"


def fleet_output(folder: Path, _link: str, arguments: str) -> str:
    """What `scripts/predict ITERATION --fleet VISITS [--region REGION] --loadgen FOLDER` prints of the Locust
    fleet (model/fleet.py), from the load-generator benchmark's record alone: arguments: VISITS [REGION]."""
    from visitkit.model.fleet import fleet_lines, fleet_plan, load_benchmark

    visits_text, *rest = arguments.split()
    try:
        path, record = load_benchmark(folder)
        output = "\n".join(fleet_lines(fleet_plan(float(visits_text), region=rest[0] if rest else None,
                                                   record=record), path))
    except VisitkitError as error:
        raise DocsError(f"fleet {folder.name} {arguments}: {error}") from None
    return "```\n" + output + "\n```\n"


def cost_table(iterations_dir: Path, _link: str, arguments: str) -> str:
    """What a million visits cost in each iteration at its knee on Google Cloud (capacity.cost_per_million), in
    each of cost.PER_MILLION_REGIONS; arguments: the profile whose service times apply, then the iterations
    to show (default: all of them)."""
    from visitkit.model import capacity, cost
    from visitkit.settings import load_settings
    from visitkit.twin.profile import load_profile

    profile, *chosen = (arguments or "study").split()
    prices, rows = cost.load_prices(), []
    header = ["| iteration | knee (visits/s) |", "|---|---:|"]
    for region in cost.PER_MILLION_REGIONS:
        header[0] += f" {region}: USD per million visits (Cloud Run / Firestore / Pub/Sub / Logging / Egress) |"
        header[1] += "---:|"
    for iteration in sorted(path.parent for path in iterations_dir.glob("iteration-*/settings.tfvars.json")):
        if chosen and iteration.name not in chosen:
            continue
        settings = load_settings(iteration)
        prediction = capacity.predict(settings, load_profile(profile))
        cells = []
        for region in cost.PER_MILLION_REGIONS:
            knee_visits, found = cost.cost_per_million(settings, prediction, prices, region)
            split = cost.by_service(found)
            services = " / ".join(f"{split.get(service, 0.0):,.2f}" for service in cost.SERVICES)
            cells.append(f"{found['total']:,.2f} ({services})")
        rows.append(f"| {iteration.name} | {knee_visits:,.0f} | " + " | ".join(cells) + " |")
    return "\n".join(header + rows) + "\n"


def largest_first(split: Mapping[str, float], currency: str = "USD") -> str:
    """'A 1.00, B 0.50 and C 0.10 USD' from {item: USD}, the largest first."""
    ranked = [f"{item} {usd:,.2f}" for item, usd in sorted(split.items(), key=lambda pair: -pair[1])]
    return f"{', '.join(ranked[:-1])} and {ranked[-1]} {currency}" if len(ranked) > 1 else f"{ranked[0]} {currency}"


def visit_logging_text(requests: int, prices: dict[str, Any]) -> str:
    """What one visit's requests and its push delivery leave in Cloud Logging, and what a million visits' cost."""
    from visitkit.model import cost

    logged = cost.log_entries(requests, 1)
    return (f"a request log entry for each of its {requests} requests ({cost.REQUEST_LOG_ENTRY_BYTES:,} "
            f"bytes each, measured on a recorded entry) and store-inc-counter's line "
            f"({cost.STORE_LINE_ENTRY_BYTES:,} bytes): {logged['bytes']:,} bytes a visit, "
            f"{logged['bytes'] * cost.MILLION / cost.GIB * prices['cloud_logging']['per_gib']:,.2f} "
            f"USD per million visits at {prices['cloud_logging']['per_gib']:.2f} USD/GiB")


def cost_items(iterations_dir: Path, _link: str, arguments: str) -> str:
    """One iteration's cost per million visits at its knee (capacity.cost_per_million) item by item, largest first, in
    each of cost.PER_MILLION_REGIONS, and what a visit costs whatever the settings; arguments: PROFILE ITERATION."""
    from visitkit.model import capacity, cost
    from visitkit.settings import load_settings
    from visitkit.twin.profile import load_profile

    profile, name = arguments.split()
    settings = load_settings(iterations_dir / name)
    prediction, prices = capacity.predict(settings, load_profile(profile)), cost.load_prices()
    regions = []
    for region in cost.PER_MILLION_REGIONS:
        _, found = cost.cost_per_million(settings, prediction, prices, region)
        regions.append(f"in {region} {largest_first(cost.by_service(found))}")
    _, found = cost.cost_per_million(settings, prediction, prices, cost.PER_MILLION_REGIONS[-1])
    requests = sum(capacity.requests_per_visit(settings).values()) + 1  # and the push delivery
    storage = next(usd for item, _, usd in found["lines"] if item == "Firestore marker storage")
    return prose(f"In {name} a million visits at the knee cost, the largest first, {'; '.join(regions)}. Whatever the "
            f"settings, a visit pays Cloud Run's fee for its {requests} requests (the page, the two API calls, "
            f"the push delivery): {requests * prices['cloud_run']['per_million_requests']:,.2f} USD per million "
            "visits in every region, which sharing an instance does not lower as it lowers instance time; "
            f"Cloud Logging, {visit_logging_text(requests, prices)}; and Firestore's 2 writes and TTL delete, "
            f"and the marker's {cost.marker_bytes()} bytes stored {settings.marker_ttl_days} days "
            f"({storage:,.3f} USD per million visits "
            f"in {cost.PER_MILLION_REGIONS[-1]}).")


CPU_SCALING_TARGET = 0.6  # Cloud Run adds instances to keep their CPU near 60 % (docs: "Instance autoscaling")


def hold_text(iteration: Path, _link: str, arguments: str) -> str:
    """What an iteration's settings hold and what VISITS visits/s take (capacity.hold_plan), in words: arguments:
    PROFILE VISITS [DWELL [REGION]]. Without a dwell, the study's visitor: each function's capacity against the
    VISITS requests/s it gets, what bounds it and how busy its CPU is then; with one, the knee the settings give,
    the instances VISITS visits/s need, the cost then (per million visits, and an hour at VISITS in REGION)."""
    from visitkit.model import capacity, cost
    from visitkit.settings import load_settings
    from visitkit.twin.profile import load_profile

    profile_name, visits_text, *rest = arguments.split()
    visits, dwell = float(visits_text), float(rest[0]) if rest else 0.0
    region = rest[1] if len(rest) > 1 else cost.DEFAULT_REGION
    settings, profile, prices = load_settings(iteration), load_profile(profile_name), cost.load_prices()
    now = capacity.predict(settings, profile, dwell_s=dwell)
    per_visit = {**capacity.requests_per_visit(settings, dwell), capacity.PUSH_FUNCTION: 1}
    if not dwell:
        parts, busy = [], []
        visit_s = sum(now.response_ms.values()) / 1000  # an open-model visit: its three responses, no wait
        open_users = ARRIVALS.users_wanted(0, visits, visit_s, ceiling=math.inf)
        cpu_ms = profile.cpu_ms or {}
        for name, spec in settings.functions.items():
            per_instance = now.capacity_rps[name] / spec.max_instances
            cpu_bound = math.isclose(per_instance, capacity.cpu_rate(spec, cpu_ms.get(name)))
            bound = (f"its vCPUs at {cpu_ms[name]:g} ms of CPU a request" if cpu_bound
                     else f"its {spec.concurrency} requests at once per instance, each holding its slot "
                          f"{1000 * spec.concurrency / per_instance:.0f} ms")
            parts.append(f"{name} {now.capacity_rps[name]:,.0f} "
                         f"({now.capacity_rps[name] / (visits * per_visit[name]):.2f}x), bound by {bound}")
            if profile.cpu_ms and name in profile.cpu_ms:
                busy.append((name, visits * per_visit[name] / spec.max_instances * profile.cpu_ms[name] / 1000
                             / float(spec.effective_cpu)))
        ratios = [now.capacity_rps[name] / (visits * per_visit[name]) for name in settings.functions]
        below = [name for name, share in busy if share < CPU_SCALING_TARGET]
        target = ("all below" if len(below) == len(busy) else
                  f"{', '.join(name for name, _ in busy if name not in below)} at or above") + \
            f" Cloud Run's {CPU_SCALING_TARGET:.0%} CPU scaling target"
        return prose(f"At {visits:,.0f} visits/s each function gets {visits:,.0f} requests/s "
                f"(store-inc-counter as push deliveries). These settings serve, a second: {'; '.join(parts)}; "
                f"{min(ratios):.2f}x to "
                f"{max(ratios):.2f}x of it. Their instances' CPU is then busy "
                f"{', '.join(f'{share:.0%} ({name})' for name, share in busy)}: {target}. The study's visitor asks "
                f"{now.rps_per_user:.3f} requests/s per user, so {visits:,.0f} visits/s is about "
                f"**{visits * now.cycle_s:,.0f} concurrent users** with its 3-5 s think time. Offered as arrivals at "
                f"{visits:,.0f} visits/s (the open model) the visits need no think time: at the model's "
                f"{1000 * visit_s:.0f} ms of responses a visit, {visits * visit_s:,.0f} are under way at once "
                f"(Little's law), for which Locust runs **{open_users:,} users** (locust/arrivals.py, users_wanted: "
                f"room for {ARRIVALS.HEADROOM:g}x as many and a second's arrivals more).")
    plan = capacity.hold_plan(settings, profile, visits, dwell)
    held, after = plan["settings"], plan["prediction"]
    holds = {name: now.capacity_rps[name] / per_visit[name] for name in capacity.PUBLIC}
    others = [f"{name} {holds[name]:,.0f}" for name in capacity.PUBLIC if name != now.limited_by]
    grown = ", ".join(f"{name} needs **{new} instances** ({old} now) at {held.functions[name].concurrency} requests "
                      "each" for name, (old, new) in plan["raised"].items())
    kept = [name for name in settings.functions if name not in plan["raised"]]
    study = capacity.predict(held, profile)
    costs, study_costs = {}, {}
    for where in cost.PER_MILLION_REGIONS:
        costs[where] = cost.cost_per_million(held, after, prices, where)[1]
        study_costs[where] = cost.cost_per_million(held, study, prices, where)[1]
    first = cost.PER_MILLION_REGIONS[0]
    split = cost.by_service(costs[first])
    largest = max(split, key=split.__getitem__)
    hour = cost.hourly_at(held, after, visits, prices, region)
    requests = sum(per_visit.values())
    return prose(f"With a {dwell:g} s dwell a visit makes at most {now.reads_per_visit} get-counter requests "
            f"(the first, then one every {capacity.reread_interval(settings):g} s), {requests} requests in all "
            f"with the push delivery, so "
            f"these settings hold **{now.knee_visits_per_s:,.0f} visits/s**, {now.knee_visits_per_s / visits:.0%} of "
            f"{visits:,.0f}: {now.limited_by} sets it ({now.capacity_rps[now.limited_by]:,.0f} requests/s for "
            f"{per_visit[now.limited_by]} a visit), where the other public functions would hold {', '.join(others)} "
            f"visits/s and store-inc-counter drains {now.drain_per_s:,.0f} a second. The cache spares Firestore's "
            f"reads, not get-counter's requests. To hold {visits:,.0f} visits/s "
            f"{grown or 'no function needs more instances'}, "
            f"with the same {settings.cache_ttl_seconds:g} s cache"
            + (f", and {', '.join(kept)} hold it as set" if kept and plan["raised"] else "")
            + f"; the knee is then {after.knee_visits_per_s:,.0f} "
            f"visits/s, limited by {after.limited_by}, with {sum(f.max_instances for f in held.functions.values())} "
            f"instances ({sum(f.max_instances * float(f.effective_cpu) for f in held.functions.values()):g} vCPU "
            f"of the region's quota). A million such visits cost "
            + " and ".join(f"{costs[where]['total']:,.2f} USD in {where}" for where in cost.PER_MILLION_REGIONS)
            + f" ({costs[first]['total'] / study_costs[first]['total']:.2f}x the study visitor's "
            f"{study_costs[first]['total']:,.2f} in {first}); the largest item is {largest}, "
            f"{split[largest]:,.2f} USD in {first}"
            + (f": {visit_logging_text(requests, prices)}" if largest == "Cloud Logging" else "")
            + f". An hour at {visits:,.0f} visits/s costs "
            f"{hour['total']:,.2f} USD in {region}, each instance billed while it serves "
            f"({largest_first(cost.by_service(hour))}).")


def cost_month_text(iteration: Path, _link: str, arguments: str) -> str:
    """The largest items of a month at VISITS visits/s (cost.monthly_at, as `scripts/predict --cost-at` prints it),
    with their share: arguments: PROFILE VISITS REGION [COUNT]."""
    from visitkit.model import capacity, cost
    from visitkit.settings import load_settings
    from visitkit.twin.profile import load_profile

    profile, visits_text, region, *count_text = arguments.split()
    visits, count = float(visits_text), int(count_text[0]) if count_text else 3
    settings, prices = load_settings(iteration), cost.load_prices()
    prediction = capacity.predict(settings, load_profile(profile))
    month = cost.monthly_at(settings, prediction, visits, prices, region)
    requests = sum(rate for rate in cost.function_rates(settings, prediction, visits).values()) * cost.MONTH_S
    fee = requests * prices["cloud_run"]["per_million_requests"] / 1e6
    items = {item: usd for item, _, usd in month["lines"] if not item.startswith("Cloud Run")}
    items["Cloud Run's per-request fee"] = fee
    items["Cloud Run's instance time"] = sum(usd for item, _, usd in month["lines"]
                                             if item.startswith("Cloud Run")) - fee
    ranked = sorted(items.items(), key=lambda pair: -pair[1])[:count]
    return prose("The largest items of that month: " + "; ".join(f"{item} {usd:,.2f} USD ({usd / month['total']:.0%})"
                                                                 for item, usd in ranked)
                 + f". Cloud Run's fee is {prices['cloud_run']['per_million_requests']:.2f} USD a million requests, "
                 f"{requests:,.0f} a month.")


def study_convergence_table(iterations_dir: Path, _link: str, arguments: str) -> str:
    """For each iteration whose study.json gives its breakpoint's minutes: the model (with the profile named in
    `arguments`) applied to that breakpoint's own ramp, +1 user/s (capacity.breakpoint_convergence), beside
    how long the study's counters took to converge."""
    from visitkit.model import capacity
    from visitkit.reports import study
    from visitkit.settings import load_settings
    from visitkit.twin.profile import load_profile

    profile = load_profile((arguments or "study").strip())
    rows = ["| iteration | the study's breakpoint (+1 user/s) | the study | the model: left at the end, stored after | "
            "extra min per min: the study / the model |", "|---|---|---|---|---:|"]
    for iteration in sorted(path.parent for path in iterations_dir.glob("iteration-*/settings.tfvars.json")):
        figures = study.load(iteration) or {}
        if "breakpoint_minutes" not in figures:
            continue
        prediction = capacity.predict(load_settings(iteration), profile).as_dict()
        ramp = capacity.breakpoint_convergence(prediction, 1, figures["breakpoint_minutes"])
        rows.append(f"| {iteration.name} | {figures['breakpoint_minutes']} min | {figures['convergence']} | "
                    f"{ramp['backlog_at_end']:,.0f} visits, {ramp['seconds_after_load'] / 60:.1f} min | "
                    f"{figures['extra_min_per_min']:.2f} / {ramp['extra_min_per_min']:.2f} "
                    f"({ramp['extra_min_per_min'] / figures['extra_min_per_min'] - 1:+.0%}) |")
    return "\n".join(rows) + "\n"


def p95_check_table(iteration: Path, link: str, arguments: str) -> str:
    """The latency model (model/latency.py) against the twin: for each run of the iteration, the rate it held,
    FUNCTION's p50 and p95 as the model predicts them at that rate and as Locust measured them, and the measured
    p95 as a multiple of the model's; then the band (the least and the most of those multiples) for each kind of
    arrivals, apart within tune's headroom (the model's utilisation up to 1 / headroom) and beyond it when runs fall
    on both sides: an open-model run's are paced (evenly spaced) or at random (arrival_gaps=random: Poisson), its rate
    arrival_rate.achieved; a closed-model run's users think at random (its rate FUNCTION's requests over the load's
    seconds).
    arguments: PROFILE FUNCTION RUN... (each RUN a results folder, relative to the iteration folder)."""
    from visitkit.model import capacity, latency, tune
    from visitkit.settings import load_settings
    from visitkit.twin.profile import load_profile

    profile_name, function, *runs = arguments.split()
    if not runs:
        raise DocsError(f"p95-check {iteration.name}: name the runs after the profile and the function")
    settings, profile = load_settings(iteration), load_profile(profile_name)
    per_visit = capacity.requests_per_visit(settings, 0)[function]
    rows = [f"| run | arrivals | visits/s held | {function} requests/s | servers (model) | "
            "service: model / HAProxy's mean | "
            "utilisation (model) | p50 model / measured | p95 model / measured | measured / model p95 | "
            "this machine's CPU at the peak |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    ratios: dict[tuple[str, bool], list[float]] = {}  # (kind of arrivals, within tune's headroom) -> ratios
    for run in runs:
        summary = read_json(iteration / run, "summary")
        if (summary.get("profile") or {}).get("name") != profile_name:
            raise DocsError(f"{run} ran with profile {(summary.get('profile') or {}).get('name')}, not {profile_name}")
        headline = summary["headline"]
        if headline.get("arrival_rate.achieved") is not None:
            at_random = ((summary.get("load") or {}).get("arrival_rate") or {}).get("gaps") == "random"
            kind, arrivals = ("arrivals at random (Poisson)", "random") if at_random else ("paced arrivals", "paced")
            visits = headline["arrival_rate.achieved"]
        else:
            kind, arrivals = "users thinking at random", f"{headline['users_max']:,} users"
            visits = summary["client"][function]["requests"] / per_visit / summary["load"]["seconds"]
        rate = visits * per_visit
        model = latency.one_function(settings, profile, function, rate)
        measured_p50, measured_p95 = headline[f"p50_ms.{function}"], headline[f"p95_ms.{function}"]
        within = model.utilisation <= 1 / tune.Goals.headroom + 1e-9
        ratios.setdefault((kind, within), []).append(measured_p95 / model.p95_ms)
        served = ((summary.get("server") or {}).get(function) or {}).get("service_ms")
        peak = (summary.get("machine") or {}).get("peak")
        machine = f"{peak['cpu_percent']:.0f} % of {100 * peak['cores']} %" if peak else "n/a"
        rows.append(f"| [{Path(run).name}]({link}/{run}/report.md) | {arrivals} | {visits:.1f} | {rate:.1f} | "
                    f"{model.servers} | {model.service_ms:.1f} / {'n/a' if served is None else f'{served:.1f}'} ms | "
                    f"{model.utilisation:.2f} | "
                    f"{model.p50_ms:,.0f} / {measured_p50:,.0f} ms | {model.p95_ms:,.0f} / {measured_p95:,.0f} ms | "
                    f"{measured_p95 / model.p95_ms:.2f}x | {machine} |")
    bands = []
    split = len({within for _, within in ratios}) > 1
    for (kind, within), found in ratios.items():
        band = f"{min(found):.2f}x to {max(found):.2f}x" if len(found) > 1 else f"{found[0]:.2f}x"
        verdict = ("the model overstates the p95 at every rate" if max(found) < 1 else
                   "the model understates the p95 at every rate" if min(found) > 1 else
                   "the model is above the measured p95 at some rates, below it at others")
        runs_named = "one run" if len(found) == 1 else f"{COUNT_WORDS[len(found)]} runs"
        where = (f" at a utilisation {'up to' if within else 'above'} {1 / tune.Goals.headroom:.2f} (tune's headroom "
                 f"of {tune.Goals.headroom:g}x)" if split else "")
        bands.append(f"with {kind}{where} ({runs_named}) the measured {function} p95 is {band} the model's: {verdict}")
    return "\n".join(rows) + "\n\n" + prose(f"The band: {'; '.join(bands)}.")


SCALE_OUT_BAND = (0.5, 2.0)  # scale-out: the measured lag within 0.5x to 2x of the model's holds the model


def scale_out_tables(folder: Path, link: str, arguments: str) -> str:
    """The same spike on the twin (results/scaleout.py) twice: AUTO with scaling auto from its min_instances (0),
    OTHER with min_instances = max_instances; for each function AUTO autoscales, a small table of both runs: its
    instances at the spike's step, end and most, its cold starts in the load, its p95 in the spike's first seconds
    and steady, and the measured scale-out lag beside the model's (model/scaleout.py, spike) and their ratio; then
    whether each ratio is within SCALE_OUT_BAND. The model is given each run's own traffic (its requests/s before
    and during the spike, HAProxy's service time, its instances up at the step), its settings and profile
    (limits_of), the machine's cores, and each function's quiet start from a cold-start benchmark (its first 2xx:
    what the model's start_s is): Google's case, an instance starting on its own vCPU. A second row gives the
    model the run's own starts at the step instead: how long its instances took to start there and what a request
    held an instance meanwhile (Little's law), the share of the machine's cores the starts took included; the band
    judges that row (the rules given the twin's own starts), the first shows how far the twin's 2 shared cores are
    from Google's case.
    arguments: AUTO OTHER BENCHMARK, folders relative to FOLDER (results folders; benchmarks/cold-start-*)."""
    from visitkit.formatting import fmt, ms
    from visitkit.model.scaleout import limits_of
    from visitkit.results.scaleout import EARLY_S
    from visitkit.settings import parse_settings
    from visitkit.twin.profile import load_profile

    runs = arguments.split()
    if len(runs) != 3:
        raise DocsError(f"scale-out {folder.name}: name the autoscaled run, the one at min_instances = max_instances "
                        "and a cold-start benchmark, each relative to the folder")
    starts = read_json(folder / runs[2], "benchmark")
    summaries, settings, cores = [], [], []
    for run in runs[:2]:
        summary = read_json(folder / run, "summary")
        if summary.get("test") != "spike" or not summary.get("scale_out"):
            raise DocsError(f"{run} has no scale_out figures: a spike test on the twin with scaling auto has them "
                            "(scripts/run-iteration ... --test spike --scaling auto)")
        summaries.append(summary)
        settings.append(parse_settings(summary["settings"], f"{run}'s settings"))
        cores.append((read_json(folder / run, "run").get("machine") or {}).get("cores"))
    auto, other = summaries
    if auto["shape"] != other["shape"]:
        raise DocsError(f"{runs[0]} and {runs[1]} are not the same spike: {auto['shape']!r} and {other['shape']!r}")
    functions = [name for name in auto["scale_out"]["functions"] if settings[0].autoscaled(name)]
    if not functions:
        raise DocsError(f"{runs[0]} autoscales no function: its min_instances are its max_instances")
    warm = {name: settings[1].functions[name] for name in functions}
    moving = [name for name, spec in warm.items()
              if not spec.min_instances == spec.max_instances == settings[0].functions[name].max_instances]
    if moving:
        raise DocsError(f"{runs[1]} does not keep {', '.join(moving)} at min_instances = max_instances = "
                        f"{runs[0]}'s max_instances")
    low, high = SCALE_OUT_BAND
    blocks, verdicts = [], []
    for name in functions:
        spec = settings[0].functions[name]
        start_ms = ((starts.get("functions") or {}).get(name) or {}).get("first_2xx_ms")
        rows = [f"**{name}**: at most {spec.max_instances} instances of {spec.concurrency} requests at once; the model "
                f"starts one in {ms(start_ms)} ms ({Path(runs[2]).name}, quiet)", "",
                f"| | [{Path(runs[0]).name}]({link}/{runs[0]}/report.md), from min_instances "
                f"{spec.min_instances} | [{Path(runs[1]).name}]({link}/{runs[1]}/report.md), min_instances = "
                f"max_instances |", "|---|---:|---:|"]
        cells: dict[str, list[str]] = {"instances": [], "cold": [], "p95": [], "lag": [], "loaded": []}
        ratio = loaded_ratio = None
        for number, summary in enumerate(summaries):
            row = summary["scale_out"]["functions"][name]
            cold = (summary.get("cold_starts") or {}).get(name)
            cpu_ms = (load_profile((summary.get("profile") or {}).get("name") or "none").cpu_ms or {}).get(name)
            limits = limits_of(settings[number].functions[name], cpu_ms)
            machine = cores[number]
            model = predicted_lag(limits, row, row["service_ms"], start_ms, machine) if machine else None
            cells["instances"].append(f"{fmt(row['instances_at_start'])} / {fmt(row['instances_end'])} "
                                      f"/ {fmt(row['instances_max'])}")
            cells["cold"].append(f"{cold['during_load']:,} (median {ms(cold['under_load_ms_median'])} ms, slowest "
                                 f"{ms(cold['under_load_ms_max'])} ms)" if cold and cold["during_load"] else "0")
            cells["p95"].append(f"{ms(row['p95_first_ms'])} / {ms(row['p95_steady_ms'])} ms")
            measured = row["lag_s"]
            cells["lag"].append(f"{lag_text(measured)} / {lag_text(model)}")
            # the same rules given the run's own starts at the step, and the service time while they started
            loaded_ms, starting_ms = row.get("start_step_ms"), row.get("service_starting_ms")
            loaded = row.get("model_lag_s")
            cells["loaded"].append("n/a" if loaded_ms is None else
                                   f"{lag_text(measured)} / {lag_text(loaded)} (starts of {ms(loaded_ms)} ms, "
                                   f"service {ms(starting_ms)} ms meanwhile)")
            if number == 0:
                ratio, loaded_ratio = lag_ratio(measured, model), lag_ratio(measured, loaded)
                cells["lag"][-1] += "" if ratio is None or math.isinf(ratio) else f": {ratio:.2f}x"
                cells["loaded"][-1] += ("" if loaded_ms is None or loaded_ratio is None or math.isinf(loaded_ratio)
                                        else f": {loaded_ratio:.2f}x")
        rows += [f"| instances at the spike's step / end / most | {' | '.join(cells['instances'])} |",
                 f"| cold starts in the load (under load) | {' | '.join(cells['cold'])} |",
                 f"| p95 in its first {EARLY_S} s / steady | {' | '.join(cells['p95'])} |",
                 f"| scale-out lag measured / model's, and their ratio | {' | '.join(cells['lag'])} |",
                 f"| the same, the model given the run's own starts and service time at the step | "
                 f"{' | '.join(cells['loaded'])} |"]
        blocks.append("\n".join(rows))
        verdicts.append(f"{name} {in_band(loaded_ratio if cells['loaded'][0] != 'n/a' else ratio)}"
                        + own_inputs(summaries[0]["scale_out"]["functions"][name], start_ms))
    return "\n\n".join(blocks) + "\n\n" + prose(
        f"The measured scale-out lag against the model's given the run's own starts and service time at the step "
        f"(its quiet starts where none started), in the band of {low:g}x to {high:g}x (the autoscaled run): "
        f"{'; '.join(verdicts)}.")


def own_inputs(row: Mapping[str, Any], quiet_ms: float | None) -> str:
    """How far a run's own starts at the step and service time meanwhile were from the quiet start and the steady
    service time, as a verdict's aside ("" when it started none there)."""
    start_ms, starting_ms = row.get("start_step_ms"), row.get("service_starting_ms")
    if start_ms is None or not quiet_ms or starting_ms is None or not row.get("service_ms"):
        return ""
    return (f" (its starts at the step took {start_ms / quiet_ms:.1f}x the quiet start, and a request held an "
            f"instance {starting_ms / row['service_ms']:.2f}x as long as steady while they started)")


def lag_ratio(measured: float | None, model: float | None) -> float | None:
    """measured / model, None when either is missing; a model of 0 holds a measured 0 (1.0), else infinitely off."""
    if measured is None or model is None:
        return None
    return measured / model if model > 0 else (1.0 if measured == 0 else math.inf)


def in_band(ratio: float | None) -> str:
    low, high = SCALE_OUT_BAND
    if ratio is None:
        return "n/a (a lag not reached, or an input missing)"
    return "within" if low <= ratio <= high else "outside" + ("" if math.isinf(ratio) else f" ({ratio:.2f}x)")


def predicted_lag(limits: "Limits", row: Mapping[str, Any], busy_ms: float | None, start_ms: float | None,
                  cores: int) -> float | None:
    """The model's scale-out lag (model/scaleout.py, spike) for a run's measured traffic (a scale_out row), each
    request holding an instance busy_ms, each start start_ms on `cores` cores (Google's case, given a quiet start);
    None when an input is missing, or when the model sees no end to the wait. The lag given the run's own starts
    is in its summary (results/scaleout.py, model_lag)."""
    from visitkit.model.scaleout import spike

    before, during = row["rps_before"], row["rps_spike"]
    if busy_ms is None or before is None or during is None or start_ms is None:
        return None
    return spike(limits, busy_ms / 1000, before, during, start_ms / 1000, cores,
                 running=row.get("instances_at_start")).lag_s


def lag_text(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.1f} s"


def scaling_compare_table(folder: Path, link: str, arguments: str) -> str:
    """Iterations run on the twin with fixed instances and autoscaled, side by side: each run's verdict, the
    figures its checks read and its headline, with the ratio autoscaled / fixed (reports/scaling_compare.py);
    arguments: pairs FIXED AUTO of results folders relative to the folder."""
    from visitkit.reports.scaling_compare import comparison

    return comparison(folder, link, arguments)


# `<!-- figures KIND: FOLDER [TITLE] -->`: a whole table, rendered as the kit renders it elsewhere.
WHOLE_TABLES = {"run": run_headline, "report-section": report_section, "benchmark": benchmark_table,
                "predict": predict_output, "fleet": fleet_output, "cost-per-million": cost_table,
                "cost-items": cost_items, "hold": hold_text, "cost-month": cost_month_text,
                "study-convergence": study_convergence_table, "p95-check": p95_check_table,
                "scale-out": scale_out_tables, "scaling-compare": scaling_compare_table}


def differences(block: Block, rendered: str, lines: list[tuple[str, list[tuple[str, str]]]]) -> list[str]:
    """What differs between a block's text and its results, one message per figure (or per stretch of lines
    added or lost), the lines aligned first so that one line more does not make all the rest differ."""
    have, want = block.body.split("\n"), rendered.split("\n")
    messages = []
    opcodes = difflib.SequenceMatcher(a=have, b=want, autojunk=False).get_opcodes()
    for change, start, end, want_start, want_end in opcodes:
        where = f"{shown(block.doc)}:{block.body_line + start}"
        if change == "equal":
            continue
        paired = min(end - start, want_end - want_start) if change == "replace" else 0
        for offset in range(paired):  # a line changed in place: name its figures
            messages += line_differences(f"{shown(block.doc)}:{block.body_line + start + offset}",
                                         have[start + offset], want[want_start + offset],
                                         lines[want_start + offset] if want_start + offset < len(lines) else None)
        if end - start > paired:
            messages.append(f"{shown(block.doc)}:{block.body_line + start + paired}: the doc has line(s) "
                            f"{have[start + paired:end]!r} that its results do not give")
        if want_end - want_start > paired:
            messages.append(f"{where}: its results give line(s) {want[want_start + paired:want_end]!r} "
                            "that the doc does not have")
    return messages


def line_differences(where: str, old: str, new: str,
                     template_line: tuple[str, list[tuple[str, str]]] | None) -> list[str]:
    """One message per figure that differs on a line, or one for the line when its words differ too."""
    template, figures = template_line or (None, [])
    read = read_figures(template, old) if template is not None else None
    named = [f"{where}: {{{placeholder}}} reads {doc!r}, its results give {value!r}"
             for (placeholder, value), doc in zip(figures, read or []) if doc != value]
    return named or [f"{where}: the doc has {old!r}, its results give {new!r}"]


def read_figures(template: str, line: str) -> list[str] | None:
    """The figures a doc line shows where its template has placeholders (None if the words differ)."""
    pattern = "".join(f"({'.*?'})" if i % 2 else re.escape(part)
                      for i, part in enumerate(PLACEHOLDER.split(template)))
    match = re.fullmatch(pattern, line)
    return list(match.groups()) if match else None


def doc_files(root: Path = ROOT) -> Iterator[Path]:
    for path in sorted(root.rglob("*.md")):
        parts = path.relative_to(root).parts
        if any(part.startswith(".") or part in SKIPPED_DIRS or part.endswith(".egg-info") for part in parts):
            continue
        if parts[0] == "benchmarks" and len(parts) > 2:  # a benchmark's own summary.md
            continue
        yield path


# A fenced code block: ``` or ~~~ (three or more), indented up to 3 spaces, closed by the same fence.
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1", re.S | re.M)


def blank(pattern: re.Pattern[str], text: str) -> str:
    """`text` with what `pattern` matches blanked, its lines kept so that line numbers still hold."""
    return pattern.sub(lambda found: "\n" * found.group().count("\n"), text)


def blocks(doc: Path) -> list[Block]:
    """The doc's blocks of figures; one shown in a code fence is an example, not a block. A marker that
    opens or closes no block (a missing end, a malformed start) is an error, not text to skip."""
    text = doc.read_text()
    fenced = [found.span() for found in FENCE.finditer(text)]

    def in_fence(at: int) -> bool:
        return any(start <= at < end for start, end in fenced)

    found = [Block(doc, match) for match in BLOCK.finditer(text) if not in_fence(match.start())]
    paired = {at for block in found for at in (block.match.start(), block.match.end() - len(END))}
    for marker in MARKER.finditer(text):
        if marker.start() not in paired and not in_fence(marker.start()):
            line = text.count("\n", 0, marker.start()) + 1
            raise DocsError(f"{shown(doc)}:{line}: a figures marker that opens or closes no block "
                            f"(each block is '<!-- figures ...' then '{END}')")
    return found


def broken_links(doc: Path, tracked: Collection[Path] | None = None) -> Iterator[str]:
    # A template's links are checked once written, and a code fence holds no links.
    text = blank(FENCE, blank(COMMENT, doc.read_text()))
    for number, line in enumerate(text.split("\n"), 1):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            found = (doc.parent / path) if path else doc
            if not found.exists():
                yield f"{shown(doc)}:{number}: the link {target} leads nowhere"
            elif not is_tracked(found, tracked):
                yield f"{shown(doc)}:{number}: the link {target} leads to a file git does not track"
            elif anchor and found.suffix == ".md" and anchor not in anchors(found):
                yield f"{shown(doc)}:{number}: the link {target} names no heading of {found.name}"


def anchors(doc: Path) -> set[str]:
    """The anchors GitHub gives a doc's headings: lower case, punctuation dropped, spaces as hyphens, and a
    repeated heading's -1, -2, ..."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#+ (.+)$", blank(FENCE, doc.read_text()), re.M):
        anchor = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(anchor if anchor not in seen else f"{anchor}-{seen[anchor]}")  # a repeat: -1, -2, ...
        seen[anchor] = seen.get(anchor, 0) + 1
    return found


def write(docs: Iterable[Path]) -> list[Path]:
    """Writes every block from its results; returns the docs that changed."""
    changed = []
    for doc in docs:
        text = doc.read_text()
        for block in reversed(blocks(doc)):
            rendered, _ = block.render()
            start, end = block.match.span("body")
            text = text[:start] + rendered + text[end:]
        if text != doc.read_text():
            doc.write_text(text)
            changed.append(doc)
    return changed


def check(docs: Iterable[Path], tracked: Collection[Path] | None = None) -> tuple[list[str], int]:
    """Every figure that differs from its results, every link that leads nowhere and, in a git checkout,
    every cited folder or file git does not track (a clone would not have it), as messages."""
    tracked = tracked_files() if tracked is None else tracked
    messages, count = [], 0
    for doc in docs:
        for block in blocks(doc):
            count += 1
            try:
                rendered, lines = block.render()
            except DocsError as error:
                messages.append(str(error))
                continue
            if rendered != block.body:
                messages += differences(block, rendered, lines)
            messages += [f"{block.where()}: cites {shown(folder)}, which git does not track: commit it, or cite a "
                         "committed one" for folder in block.folders() if not is_tracked(folder, tracked)]
        messages += broken_links(doc, tracked)
    return messages, count


def tracked_files(root: Path = ROOT) -> set[Path] | None:
    """The checkout's tracked files, as absolute paths, or None outside a git checkout."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {root / name for name in listed.decode().split("\0") if name}


def is_tracked(path: Path, tracked: Collection[Path] | None) -> bool:
    """True outside a git checkout or outside ROOT (nothing to tell), else whether git tracks the file, or
    any file in the folder."""
    if tracked is None or not path.resolve().is_relative_to(ROOT):
        return True
    path = path.resolve()
    return path in tracked or any(name.is_relative_to(path) for name in tracked if path.is_dir())

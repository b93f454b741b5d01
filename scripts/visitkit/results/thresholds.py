"""Thresholds on a run's headline figures (`visits.lost == 0`, `p95_ms.inc-counter < 100`): the one syntax of
the hypotheses' `**Check:**` lines (reports/verdict.py) and of --threshold, the comparison of one figure with
its bound, which thresholds can be judged while the load runs (--abort-on-fail), and the gates a run is judged
by for CI: its thresholds and the verdict it was expected to reach (--expect)."""
import operator
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from visitkit.errors import GATES_FAILED, RunError
from visitkit.formatting import fmt
from visitkit.results.records import Expectation, Gates, StoppedEarly, ThresholdOutcome

# FIGURE OP BOUND, where BOUND may be "N x ITERATION": N times that iteration's latest figure.
SYNTAX = re.compile(r"\s*([\w.\-]+)\s*(<=|>=|==|!=|<|>)\s*([\w.\-]+)(?:\s*x\s*([\w\-]+))?\s*")
OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt}
# --expect's words -> the verdict's outcomes (reports/verdict.py, judge)
EXPECTATIONS = {"supported": "supported", "not-supported": "not supported", "undetermined": "undetermined"}

# What is known while the load runs (runs/load.py, live_figures), and by which statistic: counts only grow,
# so one above its bound has failed for good; the failure ratio is the run's so far, as at the end; a
# percentile is Locust's over its last ~10 s (its history's current percentiles), not the whole run's.
LIVE_COUNTS = ("failures.", "responses_429.")
LIVE_LEVELS = {"failure_ratio": "over the {requests} requests so far",
               "p50_ms.": "over Locust's last ~10 s", "p95_ms.": "over Locust's last ~10 s"}
LIVE_MIN_REQUESTS = 50  # a ratio or a percentile over fewer requests is noise: one failure in 20 is 5 %
UPPER_BOUNDS = ("<", "<=", "==")  # only a figure above what is allowed stops the load
# What an audit of a store that had not settled leaves unknown (results/audit.py, exact_accounting), and the
# headline's figure that is there only then.
UNSETTLED, NOT_STORED_YET = ("visits.lost", "visits.duplicated"), "visits.not_stored_yet"


def number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class Threshold:
    """FIGURE OP BOUND on a headline figure; `baseline`: BOUND is a factor of that iteration's latest figure."""
    figure: str
    op: str
    bound: str  # as written: a number, or a word (`slowest_function == get-counter`)
    baseline: str | None = None

    @classmethod
    def read(cls, text: str) -> Self | None:
        """'visits.lost == 0', 'store.throughput_per_s >= 1.8 x iteration-2' -> a Threshold; None if unreadable."""
        match = SYNTAX.fullmatch(text)
        return cls(*match.groups()) if match else None

    def __str__(self) -> str:
        return f"{self.figure} {self.op} {self.bound}" + (f" x {self.baseline}" if self.baseline else "")

    def judge(self, figures: Mapping[str, Any],
              other_figures: Callable[[str], Mapping[str, Any] | None] = lambda name: None) -> tuple[bool | None, str]:
        """(whether it holds, None: it cannot be judged; the figures that say so). other_figures(name): another
        iteration's latest headline figures (or None), for a bound relative to them."""
        value = figures.get(self.figure)
        if value is None and self.figure in UNSETTLED and NOT_STORED_YET in figures:
            return None, (f"{self.figure} is not known: the store had not settled when the audit read it "
                          f"({fmt(figures[NOT_STORED_YET])} acknowledged not stored yet, "
                          f"{fmt(figures.get('visits.stored_while_moving'))} stored while it still moved)")
        if value is None:
            return None, f"{self.figure} was not measured"
        if self.baseline:
            baseline, factor = (other_figures(self.baseline) or {}).get(self.figure), number(self.bound)
            if factor is None:
                return None, f"{self.bound} x {self.baseline}: the factor is not a number"
            if baseline is None:
                return None, f"no {self.figure} from {self.baseline} to compare with (run it first)"
            bound = factor * baseline
            return (self.compare(value, bound), f"{self.figure} = {fmt(value)} vs {self.bound} x {fmt(baseline)} "
                                                f"({self.baseline}) = {fmt(bound)}")
        bound = number(self.bound)
        holds = self.compare(value, self.bound if bound is None else bound)
        if holds is None:
            return None, f"{self.figure} = {fmt(value)} cannot be compared with {self.bound}"
        return holds, f"{self.figure} = {fmt(value, self.shown_digits(value))}, wanted {self.op} {self.bound}"

    def compare(self, value: Any, bound: Any) -> bool | None:
        try:
            return bool(OPERATORS[self.op](value, bound))
        except TypeError:  # a word against a number
            return None

    @property
    def digits(self) -> int:
        """The figure shown with the bound's decimals (at least one): `failure_ratio = 0.004, wanted < 0.001`."""
        return max(1, len(self.bound.partition(".")[2]))

    def shown_digits(self, value: Any) -> int:
        """The bound's decimals, or more where fewer would show a figure that differs from the bound as equal
        to it (`failure_ratio = 0.03, wanted == 0`, not `0.0`)."""
        bound, digits = number(self.bound), self.digits
        if not isinstance(value, (int, float)) or bound is None:
            return digits
        while digits < 6 and value != bound and round(value, digits) == round(bound, digits):
            digits += 1
        return digits

    @property
    def live(self) -> bool:
        """Whether it can stop the load (--abort-on-fail): an upper bound on a figure known during the load."""
        return (self.baseline is None and self.op in UPPER_BOUNDS and number(self.bound) is not None
                and self.figure.startswith((*LIVE_COUNTS, *LIVE_LEVELS)))


def parse_thresholds(texts: Iterable[str], names: Collection[str]) -> tuple[Threshold, ...]:
    """--threshold's texts, each checked before the run: readable, and on a figure the headline has (`names`)."""
    thresholds = []
    for text in texts:
        threshold = Threshold.read(text)
        if threshold is None:
            raise RunError(f"--threshold {text!r}: write FIGURE OP VALUE, e.g. 'visits.lost==0' or "
                           "'p95_ms.inc-counter<100' (OP: < <= == != >= >)")
        if threshold.figure not in names:
            raise RunError(f"--threshold {text!r}: no headline figure is named {threshold.figure!r}; the figures "
                           f"are {', '.join(names)}")
        thresholds.append(threshold)
    return tuple(thresholds)


def expected_outcome(expect: str | None) -> str | None:
    """--expect's word -> the verdict's outcome it asks for (RunError for another word)."""
    if expect is None:
        return None
    if expect not in EXPECTATIONS:
        raise RunError(f"--expect must be one of {', '.join(EXPECTATIONS)}, not {expect!r}")
    return EXPECTATIONS[expect]


def failing_live(thresholds: Iterable[Threshold], live: Mapping[str, Any]) -> tuple[Threshold, str] | None:
    """The first threshold that the figures known during the load (`live`: runs/load.py, live_figures) show
    failing, with the figure and its statistic; None while all hold or cannot be judged yet. A figure above
    its upper bound fails it: a count for good, a ratio or a percentile now (once LIVE_MIN_REQUESTS requests
    make it more than noise)."""
    requests = live.get("requests") or 0
    for threshold in thresholds:
        value, bound = live.get(threshold.figure), number(threshold.bound)
        if not threshold.live or value is None or bound is None:
            continue
        level = next((words for prefix, words in LIVE_LEVELS.items() if threshold.figure.startswith(prefix)), None)
        if level is not None and requests < LIVE_MIN_REQUESTS:
            continue
        if value >= bound and not OPERATORS[threshold.op](value, bound):
            statistic = (level or "so far").format(requests=f"{requests:,.0f}")
            return threshold, (f"{threshold.figure} = {fmt(value, threshold.digits)} {statistic}, wanted "
                               f"{threshold.op} {threshold.bound}")
    return None


def judge_gates(run: Mapping[str, Any], headline: Mapping[str, Any], outcome: str | None,
                other_figures: Callable[[str], Mapping[str, Any] | None] = lambda name: None) -> Gates | None:
    """The gates run.json records (runner: "gates", load.py: "stopped_early") judged on the run's headline and
    its verdict's `outcome`; None for a run given none. A threshold whose figure was not measured fails, and
    so does the one that stopped the load, whatever the whole run's figure says."""
    asked = run.get("gates")
    if not asked:
        return None
    stopped: StoppedEarly | None = run.get("stopped_early")
    outcomes: list[ThresholdOutcome] = []
    for text in asked.get("thresholds") or []:
        threshold = Threshold.read(text)
        holds, detail = threshold.judge(headline, other_figures) if threshold else (None, f"cannot read `{text}`")
        if holds is None:
            detail += ": a threshold that cannot be judged fails"
        if stopped and stopped["threshold"] == text:
            holds, detail = False, f"it stopped the load ({stopped['detail']}); over the whole run {detail}"
        outcomes.append({"threshold": text, "value": headline.get(threshold.figure) if threshold else None,
                         "holds": holds is True, "detail": detail})
    expectation: Expectation | None = None
    if asked.get("expect"):
        expectation = {"expected": asked["expect"], "outcome": outcome, "holds": outcome == asked["expect"]}
    return {"passed": all(o["holds"] for o in outcomes) and (expectation is None or expectation["holds"]),
            "thresholds": outcomes, "expectation": expectation, "abort_on_fail": bool(asked.get("abort_on_fail")),
            "stopped_early": stopped}


def gate_lines(gates: Gates) -> list[str]:
    """Each threshold with its figure, the expected verdict, and when the load stopped early: Markdown list
    items, which the report and the terminal both show."""
    words = {True: "holds", False: "**fails**"}
    lines = [f"- `{o['threshold']}`: {words[o['holds']]} ({o['detail']})" for o in gates["thresholds"]]
    if expectation := gates["expectation"]:
        lines.append(f"- verdict expected {expectation['expected']}: {words[expectation['holds']]} (the verdict is "
                     f"{expectation['outcome'] or 'not given'})")
    if stopped := gates["stopped_early"]:
        lines.append(f"- **The load was stopped early**, {stopped['at_s']:.0f} s after Locust started, by "
                     f"`{stopped['threshold']}` (--abort-on-fail): {stopped['detail']}")
    return lines


def plan_lines(thresholds: Sequence[Threshold], expected: str | None) -> list[str]:
    """What a dry run says of the gates, in the report step."""
    gates = [f"`{threshold}`" for threshold in thresholds]
    gates += [f"the verdict (expected: {expected})"] if expected else []
    return [f"judge {', '.join(gates)}: the run exits {GATES_FAILED} if one fails"] if gates else []

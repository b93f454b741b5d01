"""The verdict on an iteration's hypothesis: its README's machine-checkable `**Check:**` lines
evaluated against a run's headline figures (and another iteration's latest ones). A check is a threshold,
read and compared as --threshold is (results/thresholds.py)."""
import re
from collections.abc import Callable, Mapping
from typing import Any

from visitkit.formatting import fmt
from visitkit.results.records import Verdict
from visitkit.results.thresholds import Threshold

CHECK_PATTERN = re.compile(r"\*\*Check:\*\*\s*`([^`]+)`")
MACHINE_SET = ("knee_users", "knee_rps", "knee_visits_per_s")  # set by a busy local machine, not the system


def hypothesis_checks(readme_text: str | None) -> list[str]:
    return CHECK_PATTERN.findall(readme_text or "")


def hypothesis_text(readme_text: str | None) -> str | None:
    """The README's '## Hypothesis' section, first paragraph."""
    match = re.search(r"^## Hypothesis\s*\n+(.+?)(?:\n\s*\n|\Z)", readme_text or "", re.S | re.M)
    return " ".join(match.group(1).split()) if match else None


def evaluate_check(expression: str, figures: Mapping[str, Any],
                   other_figures: Callable[[str], Mapping[str, Any] | None]) -> tuple[bool | None, str]:
    """'store.throughput_per_s >= 1.8 x iteration-2' -> (True/False/None, explanation).

    other_figures(name) gives another iteration's latest headline figures (or None). A knee this machine's
    CPU set, or one after the load generator warned, says nothing of the system, so it leaves a hypothesis
    undetermined."""
    check = Threshold.read(expression)
    if check is None:
        return None, f"cannot read check `{expression}`"
    value = figures.get(check.figure)
    if value is not None and check.figure in MACHINE_SET and figures.get("knee_machine_busy"):
        return None, (f"{check.figure} = {fmt(value)} was set by this machine's CPU (busy at the knee), not by "
                      "the system")
    if value is not None and check.figure in MACHINE_SET and figures.get("knee_generator_warned"):
        return None, (f"{check.figure} = {fmt(value)} came after the load generator warned (see Load generator): "
                      "the knee is Locust's, not the system's")
    return check.judge(figures, other_figures)


def judge(headline: Mapping[str, Any], readme_text: str | None,
          other_figures: Callable[[str], Mapping[str, Any] | None]) -> Verdict:
    """{"outcome": supported | not supported | undetermined | no check stated, "checks": [...],
    "hypothesis": the README's hypothesis}: supported when every check holds, not supported when one fails,
    undetermined when none fails but one cannot be judged."""
    checks = [(expr, *evaluate_check(expr, headline, other_figures)) for expr in hypothesis_checks(readme_text)]
    # Every check must hold: one that fails settles it whatever the others say; one not judged leaves it open.
    if not checks:
        outcome = "no check stated"
    elif any(ok is False for _, ok, _ in checks):
        outcome = "not supported"
    elif any(ok is None for _, ok, _ in checks):
        outcome = "undetermined"
    else:
        outcome = "supported"
    return {"outcome": outcome, "hypothesis": hypothesis_text(readme_text),
            "checks": [{"check": e, "holds": ok, "detail": d} for e, ok, d in checks]}

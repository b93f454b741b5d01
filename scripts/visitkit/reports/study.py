"""What the reference study measured on Google Cloud for an iteration (`iterations/iteration-N/study.json`),
beside a run's own figures. Its "verdict" is the study's own on the iteration's hypothesis, by its breakpoint (in
short in ../shared/reference/study-summary.md): iteration 0's baseline saw get-counter fail first, iteration 1's
cache was confirmed, iteration 2's shards were "false", iteration 3's instances drained "2x faster, hypothesis true".
"""
import json
from pathlib import Path
from typing import Any

from visitkit.formatting import fmt
from visitkit.results.records import Summary

STUDY_FILE = "study.json"


def load(iteration_dir: Path) -> dict[str, Any] | None:
    """The study's figures for the iteration, or None for an iteration the study did not run."""
    path = iteration_dir / STUDY_FILE
    return json.loads(path.read_text()) if path.exists() else None


def comparison_line(study: dict[str, Any], summary: Summary) -> str:
    """One line: the study's knee and first failures on Google Cloud against this run's."""
    h = summary.headline
    theirs = [f"knee ~{study['knee_users']} users"]
    ours = [f"knee {fmt(h['knee_users'], 0)} users"]
    if "first_failure_users" in study:
        theirs.append(f"first failures ~{study['first_failure_users']} users")
        ours.append("no failure" if h["first_failure_users"] is None else
                    f"first failures {fmt(h['first_failure_users'], 0)} users")
    profile = summary.profile["name"] if summary.profile else "none"
    caveat = "" if profile == "study" or summary.target != "local" else (
        f" (profile {profile}: this machine's figures, not comparable; --profile study is)")
    return f"  the study on Google Cloud: {', '.join(theirs)}; this run: {', '.join(ours)}{caveat}"

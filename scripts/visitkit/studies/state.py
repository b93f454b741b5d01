"""A study folder, studies/<name>-<time>/: its study.json holds the options, the plan's runs (each pending,
running, failed or finished, with its results folder and timings), the deployment on Google Cloud and, once
written, what the report found (`outcome`, which a doc may cite through `visitkit docs`)."""
import json
from pathlib import Path
from typing import Any

from visitkit.errors import VisitkitError
from visitkit.paths import ROOT

STUDIES_DIR = ROOT / "studies"
STATE_FILE = "study.json"
FORMAT = 1  # of study.json


def read_state(folder: Path) -> dict[str, Any]:
    path = Path(folder) / STATE_FILE
    if not path.is_file():
        raise VisitkitError(f"{folder} is not a study folder: it has no {STATE_FILE}")
    state: dict[str, Any] = json.loads(path.read_text())
    if state.get("format") != FORMAT:
        raise VisitkitError(f"{path}: format {state.get('format')!r}; this kit reads format {FORMAT}")
    return state


def save_state(folder: Path, state: dict[str, Any]) -> None:
    (Path(folder) / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")


def resolved(kept: str) -> Path:
    """A path study.json keeps, back on this machine."""
    path = Path(kept)
    return path if path.is_absolute() else ROOT / path

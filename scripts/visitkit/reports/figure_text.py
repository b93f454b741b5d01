"""What every kind of the docs' figures shares (reports/docs.py and the kinds kept in modules of their own): the
error a block that cannot be written raises, prose wrapped as the docs' own, and a results file read."""
import json
import textwrap
from pathlib import Path
from typing import Any

from visitkit.errors import VisitkitError

PROSE_WIDTH = 110  # the docs' line length, to which prose blocks are wrapped


class DocsError(VisitkitError):
    """A block of figures that cannot be written: a missing source, figure or malformed template."""


def prose(text: str) -> str:
    """A paragraph the kit writes, wrapped as the docs' own prose is, ending in a newline."""
    return textwrap.fill(text, PROSE_WIDTH, break_long_words=False, break_on_hyphens=False) + "\n"


def read_json(folder: Path, stem: str) -> dict[str, Any]:
    path = folder / f"{stem}.json"
    if not path.is_file():
        raise DocsError(f"{folder.name} has no {path.name}")
    return json.loads(path.read_text())

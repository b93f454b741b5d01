"""The results folders the kit's benchmarks write: benchmarks/<benchmark>-<YYYYmmdd-HHMMSS>/ holding
its record (benchmark.json, whose `format` every reader checks), summary.md, and the raw files its
figures come from.

The hot-path, store-path, emulator-scan, loadgen and cold-start benchmarks write theirs with these helpers; each
keeps its own FORMAT, KIND, `render(record)` (its Markdown table) and `load(folder)`. This module imports
none of them: registry.py knows them all and renders any committed folder's table from its record alone.
"""
import contextlib
import datetime
import json
import os
import platform
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from visitkit.errors import VisitkitError
from visitkit.paths import BENCHMARKS_DIR as BENCHMARKS_DIR  # re-exported: the benchmarks' home

RECORD = "benchmark.json"
SUMMARY = "summary.md"


def folder_name(kind: str, started: datetime.datetime) -> str:
    return f"{kind}-{started.strftime('%Y%m%d-%H%M%S')}"


@contextlib.contextmanager
def new_folder(kind: str, out_root: str | Path, started: datetime.datetime) -> Iterator[Path]:
    """The run's folder, removed again if the run fails or is interrupted: a folder in benchmarks/
    is always a whole run."""
    folder = Path(out_root) / folder_name(kind, started)
    folder.mkdir(parents=True)
    try:
        yield folder
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def write(folder: Path, record: Mapping[str, Any], summary_lines: Iterable[str]) -> None:
    (folder / RECORD).write_text(json.dumps(record, indent=2) + "\n")
    (folder / SUMMARY).write_text("\n".join(summary_lines) + "\n")


def read(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / RECORD
    if not path.exists():
        raise VisitkitError(f"{folder}: no {RECORD} (not a benchmark's results folder, or a run that failed)")
    return json.loads(path.read_text())


def load(folder: str | Path, kind: str, fmt: int) -> dict[str, Any]:
    """A folder's record, refused unless it is `kind`'s and in the format this kit reads."""
    record, path = read(folder), Path(folder) / RECORD
    if record.get("benchmark") != kind:
        raise VisitkitError(f"{path}: a {record.get('benchmark')} benchmark, not {kind}")
    if record.get("format") != fmt:
        raise VisitkitError(f"{path}: format {record.get('format')}, this kit reads {fmt}")
    return record


def machine() -> dict[str, Any]:
    return {"cores": os.cpu_count(), "processor": processor(), "python": platform.python_version()}


def processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"

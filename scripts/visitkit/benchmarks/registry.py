"""Every benchmark of the kit by its kind (its record's `benchmark`), and the table of any of their
results folders from its benchmark.json alone, as `visitkit docs` writes it into a doc.

Each benchmark module keeps its own FORMAT, KIND, `render(record)` (its Markdown table) and
`load(folder)`, and writes its folders with benchfolder's helpers; this module is the one that
knows them all.
"""
from pathlib import Path

from visitkit.benchmarks import (
    benchfolder,
    coldstart,
    emulatorscan,
    hotpath,
    loadgen,
    noise,
    pullermemory,
    responsebytes,
    storepath,
)
from visitkit.errors import VisitkitError

BENCHMARKS = {module.KIND: module for module in (hotpath, storepath, emulatorscan, loadgen, coldstart, noise,
                                                  responsebytes, pullermemory)}


def render(folder: str | Path) -> list[str]:
    """The table of a results folder of any benchmark, from its benchmark.json alone."""
    folder = Path(folder)
    kind = benchfolder.read(folder).get("benchmark")
    module = BENCHMARKS.get(kind)
    if module is None:
        raise VisitkitError(f"{folder / benchfolder.RECORD}: a benchmark this kit does not know ({kind})")
    return module.render(module.load(folder))

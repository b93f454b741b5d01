"""Which runs are comparable (results/folder.py, kind): an autoscaled twin run is not a fixed one's baseline."""
import dataclasses

from visitkit.paths import ITERATIONS_DIR
from visitkit.results import folder as results

FIXED = ITERATIONS_DIR / "iteration-3" / "results" / "breakpoint-20261123-214227" / "summary.json"


def test_a_run_before_scaling_is_fixed_and_an_autoscaled_one_is_another_kind():
    fixed = results.read_summary(FIXED)
    assert "scaling" not in (fixed.settings or {}) and results.kind(fixed)[-1] == "fixed"
    autoscaled = dataclasses.replace(fixed, settings={**(fixed.settings or {}), "scaling": "auto"})
    assert results.kind(autoscaled) != results.kind(fixed)
    stated = dataclasses.replace(fixed, settings={**(fixed.settings or {}), "scaling": "fixed"})
    assert results.kind(stated) == results.kind(fixed)

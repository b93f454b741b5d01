"""Iteration settings: the files in iterations/ load, and nonsense is refused."""
import json
from pathlib import Path

import pytest

from visitkit.settings import FUNCTIONS, SettingsError, load_settings, parse_settings

ITERATIONS = sorted(Path("iterations").glob("iteration-*/settings.tfvars.json"))
STUDY = {  # iteration: (shards, cache TTL, store-inc-counter instances), as in the study
    "iteration-0": (2, 0, 2), "iteration-1": (2, 10, 2), "iteration-2": (20, 10, 2), "iteration-3": (20, 10, 4)}


def test_there_is_a_settings_file_per_study_iteration():
    assert [p.parent.name for p in ITERATIONS] == list(STUDY)


@pytest.mark.parametrize("path", ITERATIONS, ids=lambda p: p.parent.name)
def test_iteration_settings_match_the_study(path):
    settings = load_settings(path)
    shards, ttl, store_instances = STUDY[path.parent.name]
    assert (settings.shards_per_page, settings.cache_ttl_seconds) == (shards, ttl)
    assert settings.functions["store-inc-counter"].max_instances == store_instances
    for name in FUNCTIONS:
        assert settings.functions[name].concurrency == 1
        if name != "store-inc-counter":
            assert settings.functions[name].max_instances == 2


def good():
    return json.loads(ITERATIONS[0].read_text())


@pytest.mark.parametrize("change", [
    lambda s: s.update(shards_per_page=0),
    lambda s: s.update(shards_per_page="2"),
    lambda s: s.update(cache_ttl_seconds=-1),
    lambda s: s["functions"]["get-counter"].update(max_instances=0),
    lambda s: s["functions"]["inc-counter"].update(concurrency=1.5),
    lambda s: s["functions"].update(unknown={"max_instances": 1}),
])
def test_nonsense_is_refused(change):
    raw = good()
    change(raw)
    with pytest.raises(SettingsError):
        parse_settings(raw)

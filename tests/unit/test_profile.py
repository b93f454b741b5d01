"""Latency profiles: the built-in ones load, bad files are refused, a cloud run writes one."""
import json
import shutil
from pathlib import Path

import pytest

from visitkit.errors import SettingsError
from visitkit.twin.profile import (PROFILES_DIR, Profile, load_profile, measured_service_ms, parse_profile, profile_from_measurements,
                              write_profile)
from visitkit.twin.toxiproxy import latency_toxics

FIXTURE = Path(__file__).parents[1] / "fixtures" / "profile" / "request_latencies.csv"
TIMES = {"serve-page": 1, "get-counter": 10, "inc-counter": 20, "store-inc-counter": 25}


def test_builtin_profiles_load():
    none, study = load_profile("none"), load_profile("study")
    assert not none.needs_proxy
    assert study.needs_proxy and study.latency_ms["firestore"] > study.latency_ms["pubsub"] > 0
    assert study.derivation  # the file says where its numbers come from
    assert study.push_overhead_ms > 0 and none.push_overhead_ms == 0
    written = json.loads((PROFILES_DIR / "study.json").read_text())
    assert study.record() == {"name": "study", "source": "study.json", "latency_ms": written["latency_ms"]}


def test_a_profile_file_by_path(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"name": "mine", "latency_ms": {"firestore": 50}, "service_ms": TIMES}))
    assert load_profile(path).latency_ms == {"firestore": 50}


@pytest.mark.parametrize("raw, message", [
    ({"latency_ms": {}, "service_ms": TIMES}, '"name"'),
    ({"name": "x", "latency_ms": {"redis": 5}, "service_ms": TIMES}, "latency_ms may only name"),
    ({"name": "x", "latency_ms": {"firestore": -1}, "service_ms": TIMES}, ">= 0"),
    ({"name": "x", "service_ms": {"get-counter": 10}}, "service_ms must give"),
    ({"name": "x", "service_ms": TIMES, "host": {"cores": 2}}, "host, when given"),
    ({"name": "x", "service_ms": TIMES, "host": {"cores": 2, "cpu_ms_per_page": 0}}, "host, when given"),
    ({"name": "x", "service_ms": TIMES, "host": {"cores": 2, "cpu_ms_per_page": 8, "cpu_ms_per_counter_read": 0}},
     "host, when given"),
    ({"name": "x", "service_ms": TIMES, "host": {"cores": 2, "cpu_ms_per_page": 8, "ram_gb": 24}}, "host, when given"),
])
def test_bad_profiles_are_refused(raw, message):
    with pytest.raises(SettingsError, match=message):
        parse_profile(raw, "test")


def test_unknown_profile_names_the_builtins():
    with pytest.raises(SettingsError, match="none, study"):
        load_profile("nowhere")


def test_latency_is_split_between_the_two_directions():
    toxics = latency_toxics(125)
    assert [t["stream"] for t in toxics] == ["upstream", "downstream"]
    assert sum(t["attributes"]["latency"] for t in toxics) in (124, 126)  # 62.5 rounds either way


def test_measured_service_times_are_request_weighted():
    import csv

    rows = list(csv.DictReader(open(FIXTURE)))
    # (100 x 140 + 300 x 160) / 400 = 155; (300 x 36 + 100 x 40) / 400 = 37; (200 x 130 + 200 x 150) / 400 = 140
    assert measured_service_ms(rows) == {"serve-page": 20, "get-counter": 155, "inc-counter": 37,
                                         "store-inc-counter": 140}


def test_a_cloud_run_writes_a_profile_the_twin_loads(tmp_path):
    local = Profile("none", {}, TIMES)
    written = profile_from_measurements({"serve-page": 20, "get-counter": 155, "inc-counter": 37,
                                         "store-inc-counter": 140}, local, "cloud")
    # Firestore: store-inc-counter 140 - 25 locally; Pub/Sub: inc-counter 37 - 20
    assert written["latency_ms"] == {"firestore": 115, "pubsub": 17, "frontend": 0}
    assert parse_profile(written, "cloud").service_ms["get-counter"] == 155

    results = tmp_path / "breakpoint-20261122-100000"
    (results / "metrics").mkdir(parents=True)
    shutil.copy(FIXTURE, results / "metrics" / "request_latencies.csv")
    path = write_profile(results)
    profile = load_profile(path)
    none = load_profile("none")
    assert profile.name == "cloud-breakpoint-20261122-100000"
    assert profile.latency_ms["firestore"] == pytest.approx(140 - none.service_ms["store-inc-counter"])


def test_a_run_without_cloud_metrics_cannot_write_one(tmp_path):
    with pytest.raises(SettingsError, match="request_latencies.csv not found"):
        write_profile(tmp_path)

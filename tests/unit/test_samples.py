"""The server-sample schema (scripts/visitkit/samples.py) against real samples: the rows local runs
committed and the samples the Cloud Monitoring path makes from its fixtures carry exactly the keys it
declares, in each section every required key and no key it does not name. mypy holds the producers'
literal keys to the schema; this holds what they write, keys named at run time included."""
import json

import pytest
from google.cloud import monitoring_v3  # parses fixtures only; no client is built

from visitkit.catalogue import FUNCTIONS
from visitkit.cloud import monitoring
from visitkit.paths import ITERATIONS_DIR, ROOT
from visitkit.samples import FunctionFigures, PushFigures, ResourceFigures, Sample, StoreFigures
from visitkit.twin import push

MONITORING_FIXTURES = ROOT / "tests" / "fixtures" / "monitoring"
# A local run from before the push relay counted its own faults (`errors`) and one from after; both
# before it reported `settled`.
COMMITTED = [ITERATIONS_DIR / "iteration-0" / "results" / "breakpoint-20261122-170520" / "server-samples.jsonl",
             ITERATIONS_DIR / "iteration-1" / "results" / "breakpoint-20261125-191233" / "server-samples.jsonl"]


def against(schema, figures, where):
    """What `figures` says against a TypedDict: each required key it lacks, each key the schema does not name."""
    keys = set(figures)
    return ([f"{where}: no {key!r}" for key in sorted(schema.__required_keys__ - keys)]
            + [f"{where}: {key!r} is not in the schema"
               for key in sorted(keys - schema.__required_keys__ - schema.__optional_keys__)])


def problems(sample):
    found = against(Sample, sample, "sample")
    for name, figures in sample.get("functions", {}).items():
        found += against(FunctionFigures, figures, f"functions[{name!r}]")
    found += against(StoreFigures, sample.get("store", {}), "store")
    if sample.get("push") is not None:
        found += against(PushFigures, sample["push"], "push")
    for component, figures in (sample.get("resources") or {}).items():
        found += against(ResourceFigures, figures, f"resources[{component!r}]")
    return found


def test_the_check_names_a_missing_and_an_unknown_key():
    sample = {"time": 1.0, "source": "local-haproxy", "functions": {}, "store": {"accepted": 0, "delivered": 0,
                                                                                  "stored": 0, "backlog": None}}
    assert problems(sample) == []
    sample["store"]["published"] = sample["store"].pop("accepted")  # format 1's name
    assert problems(sample) == ["store: no 'accepted'", "store: 'published' is not in the schema"]


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.parent.name)
def test_a_committed_local_runs_rows_carry_the_schemas_keys(path):
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert rows
    for row in rows:
        assert row["source"] == "local-haproxy"
        assert set(row["functions"]) == set(FUNCTIONS)
        assert problems(row) == [], f"{path.relative_to(ROOT)}, the row at {row['time']}"
    last = rows[-1]  # the local twin's own keys are there: restarts, the relay's figures, the resources
    assert all("restarts" in figures for figures in last["functions"].values())
    assert last["push"] and last["resources"]


@pytest.fixture
def monitoring_rows():
    """{query: rows} as the Monitoring path reads them from its saved responses."""
    def rows(name):
        response = monitoring_v3.ListTimeSeriesResponse.from_json((MONITORING_FIXTURES / f"{name}.json").read_text())
        return monitoring.rows_from_time_series(response.time_series)

    return {query.name: rows(query.name) for query in monitoring.QUERIES}


@pytest.mark.parametrize("missing", [(), ("request_count", "store_deliveries")], ids=["all read", "two failed"])
def test_the_monitoring_paths_samples_carry_the_schemas_keys(monitoring_rows, missing):
    read = {name: rows for name, rows in monitoring_rows.items() if name not in missing}
    samples = [monitoring.window_start_sample(0, missing), *monitoring.samples_from_rows(read, missing=missing)]
    assert len(samples) > 1
    for sample in samples:
        assert sample["source"] == "gcp-monitoring"
        assert problems(sample) == [], f"the sample at {sample['time']}"
        # every figure only Google Cloud has is there, and none only the local twin has
        for figures in sample["functions"].values():
            assert FunctionFigures.__optional_keys__ - set(figures) == {"restarts"}
        assert set(sample["store"]) == StoreFigures.__required_keys__ | StoreFigures.__optional_keys__
        assert "push" not in sample and "resources" not in sample


def test_the_push_relays_figures_are_the_schemas():
    config = push.RelayConfig(pubsub_host="-", project="p", subscription="s", dead_letter_topic="dl",
                              push_url="http://-/", ack_deadline_seconds=60, minimum_backoff_seconds=10,
                              maximum_backoff_seconds=600, max_delivery_attempts=4, port=0)
    relay = push.Relay(config, subscriber=_Subscriber(), publisher=_Publisher())
    try:
        assert set(relay.stats()) == PushFigures.__required_keys__ | PushFigures.__optional_keys__
        assert set(push.COUNTERS) <= PushFigures.__required_keys__ | PushFigures.__optional_keys__
    finally:
        relay.acker.stop()
        relay.workers.shutdown()


class _Subscriber:
    def subscription_path(self, project, name):
        return f"projects/{project}/subscriptions/{name}"

    def acknowledge(self, request):
        pass


class _Publisher:
    def topic_path(self, project, name):
        return f"projects/{project}/topics/{name}"

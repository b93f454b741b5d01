"""Fixtures shared by the tests: a local stack on free ports, with its own state folder."""
import json
import os

import pytest

# Importing locust (the shapes' tests do) would patch this whole test process with gevent: skip that
# here, but do not hand the setting down to the Locust runs the tests start, which need gevent.
os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"
import locust  # noqa: E402,F401

del os.environ["LOCUST_SKIP_MONKEY_PATCH"]

from visitkit.stack import LocalStack  # noqa: E402

ITERATION_0 = "iterations/iteration-0/settings.tfvars.json"


def write_settings(path, *, shards=2, ttl=0, instances=2, concurrency=1):
    path.write_text(json.dumps({
        "shards_per_page": shards, "cache_ttl_seconds": ttl,
        "functions": {name: {"max_instances": instances, "concurrency": concurrency}
                      for name in ("serve-page", "get-counter", "inc-counter", "store-inc-counter")},
    }))
    return path


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    """The local stack with iteration 0's settings, shared by the tests that only read deltas."""
    local = LocalStack(tmp_path_factory.mktemp("stack"))
    local.up(ITERATION_0, port=0)
    yield local
    local.down()

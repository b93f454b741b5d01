"""Fixtures shared by the tests: a local stack on free ports, with its own state folder, and HAProxy's
configuration as the stack renders it; and the unit tests' timeout. The layout: README.md here."""
import contextlib
import json
import os

import pytest

# Importing locust (the shapes' tests do) would patch this whole test process with gevent: skip that
# here, but do not hand the setting down to the Locust runs the tests start, which need gevent.
os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"
import locust  # noqa: E402,F401

del os.environ["LOCUST_SKIP_MONKEY_PATCH"]

from visitkit.twin import haproxy  # noqa: E402
from visitkit.catalogue import FUNCTIONS  # noqa: E402
from visitkit.paths import ITERATIONS_DIR, SETTINGS_FILE  # noqa: E402
from visitkit.settings import load_settings  # noqa: E402
from visitkit.twin.stack import LocalStack  # noqa: E402

ITERATION_0 = ITERATIONS_DIR / "iteration-0" / SETTINGS_FILE
ITERATION_3 = ITERATIONS_DIR / "iteration-3" / SETTINGS_FILE
UNIT_TIMEOUT = 60  # seconds: a unit test is pure logic, done in a second or two; one still running is hung


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.parent.name == "unit" and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT))


def write_settings(path, *, shards=2, ttl=0, instances=2, concurrency=1):
    path.write_text(json.dumps({
        "shards_per_page": shards, "cache_ttl_seconds": ttl,
        "functions": {name: {"max_instances": instances, "concurrency": concurrency}
                      for name in FUNCTIONS},
    }))
    return path


@contextlib.contextmanager
def running_stack(state_dir, settings=ITERATION_0, **options):
    """A local stack on free ports, stopped again whatever the tests did to it."""
    local = LocalStack(state_dir)
    local.up(load_settings(settings), port=0, **options)
    try:
        yield local
    finally:
        local.down()


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    """The local stack with iteration 0's settings, shared by the tests that only read deltas."""
    with running_stack(tmp_path_factory.mktemp("stack")) as local:
        yield local


@pytest.fixture
def haproxy_config(tmp_path):
    """HAProxy's configuration for iteration 3's settings (four store instances of concurrency 1), as
    the stack renders it: haproxy_config(queue_timeout=...) -> its text; the 429 page is tmp_path's."""
    settings = load_settings(ITERATION_3)

    def render(queue_timeout=10.0):
        instances = {f: [20000 + 10 * n + i for i in range(settings.functions[f].max_instances)]
                     for n, f in enumerate(FUNCTIONS)}
        return haproxy.render_config(public_port=18080, push_port=18081, stats_address="127.0.0.1:18082",
                                     errorfile_path=tmp_path / "429.http", instances=instances,
                                     settings=settings, queue_timeout=queue_timeout)
    return render

"""Each instance imports only its own function: functions/main.py looks an entry point up lazily (PEP 562),
so a cold start pays for one function's imports, and serve-page for no Google client at all."""
import json
import os
import subprocess
import sys

import pytest

from visitkit.paths import FUNCTIONS_DIR

pytestmark = pytest.mark.timeout(60)
FUNCTION_MODULES = ("serve_page", "get_counter", "inc_counter", "store_inc_counter")
CLIENTS = ("google.cloud.firestore", "google.pubsub_v1", "google.cloud.pubsub_v1", "grpc")


def loaded_after_looking_up(entry_point, **env):
    """The modules of ours and the Google clients a fresh interpreter holds once main.ENTRY_POINT is looked up,
    as functions-framework does, in the environment given."""
    script = (f"import json, sys, main; main.{entry_point}; "
              f"print(json.dumps([m for m in sys.modules if m in {FUNCTION_MODULES + CLIENTS!r}]))")
    result = subprocess.run([sys.executable, "-c", script], cwd=FUNCTIONS_DIR, capture_output=True, text=True,
                            check=True, env={**os.environ, **env})
    # the list is the line that is not a log line (an instance logs its start and its end)
    return set(json.loads(next(line for line in result.stdout.splitlines() if line.startswith("["))))


# Each function's own client library is imported as the instance starts (before it serves), not by its first
# request, and no other function's.
@pytest.mark.parametrize("entry_point, clients", [("serve_page", set()),
                                                  ("get_counter", {"google.cloud.firestore", "grpc"}),
                                                  ("inc_counter", {"google.pubsub_v1", "grpc"}),
                                                  ("store_inc_counter", {"google.cloud.firestore", "grpc"})])
def test_an_instance_imports_its_own_function_only(entry_point, clients):
    loaded = loaded_after_looking_up(entry_point)
    assert loaded & set(FUNCTION_MODULES) == {entry_point}
    assert loaded & set(CLIENTS) == clients


def test_serve_page_loads_the_firestore_client_only_when_it_embeds_the_count():
    assert loaded_after_looking_up("serve_page", PAGE_EMBEDS_COUNT="0") & set(CLIENTS) == set()
    assert loaded_after_looking_up("serve_page", PAGE_EMBEDS_COUNT="1") & set(CLIENTS) == {
        "google.cloud.firestore", "grpc"}


def test_a_name_that_is_no_entry_point_is_refused():
    result = subprocess.run([sys.executable, "-c", "import main; main.common"], cwd=FUNCTIONS_DIR,
                            capture_output=True, text=True)
    assert result.returncode == 1 and "module 'main' has no attribute 'common'" in result.stderr

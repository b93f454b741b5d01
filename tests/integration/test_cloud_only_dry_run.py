"""A Google Cloud run, dry, in a venv that `make setup-cloud` made: the kit's command runs with the
local stack's packages unimportable, and never needs them."""
import os
import subprocess
import sys

import pytest

from visitkit.paths import ROOT

pytestmark = pytest.mark.timeout(120)  # seconds: two dry runs, ~1 s each

LOCAL_ONLY = ("functions_framework", "google.cloud.pubsub", "google.cloud.pubsub_v1", "selenium", "schemathesis")

# Runs the kit's command with the local stack's packages made unimportable, as in a cloud-only venv.
BLOCKED_RUN = """
import sys
blocked = {blocked!r}

class Block:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in blocked):
            raise ImportError(f"{{name}} is not installed by make setup-cloud")

sys.meta_path.insert(0, Block())
from visitkit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_google_cloud_dry_run_needs_none_of_the_local_stacks_packages(tmp_path):
    env = {**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "none.json")}
    for access in ("public", "authenticated"):
        result = subprocess.run(
            [sys.executable, "-c", BLOCKED_RUN.format(blocked=LOCAL_ONLY), "run", "iterations/iteration-1", "--test",
             "breakpoint", "--target", "gcp", "--project", "visitkit-cloud", "--access", access, "--dry-run"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "preflight" in result.stdout

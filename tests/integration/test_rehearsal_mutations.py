"""Each committed one-line patch in tests/rehearsal_mutations/ breaks one seam between the kit and our own
code that the cloud tests once hid behind stand-ins; the rehearsal must fail at the step the patch names.
Each runs on a copy of this checkout with the patch applied (the kit, the functions and Terraform's config
all taken from the copy), so the checkout itself is never changed."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from visitkit.paths import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

PATCHES = sorted((ROOT / "tests" / "rehearsal_mutations").glob("*.patch"))
SKIPPED = {".git", ".venv", "build", ".local", "__pycache__", ".pytest_cache"}


def skipped(folder, names):
    """What the copy leaves out: the environment, builds, caches and the iterations' committed runs."""
    return [name for name in names if name in SKIPPED or (name == "results" and Path(folder).parent.name == "iterations")]


def header(patch):
    """(the iteration, the rehearsal's scenario or None, the step it must fail at), from the patch's header."""
    fields = dict(line.split(": ", 1) for line in patch.read_text().split("\n\n", 1)[0].splitlines() if ": " in line)
    iteration, *scenario = fields["rehearse"].split()
    return iteration, (scenario or [None])[0], fields["fails at"]


def patched_copy(patch, folder):
    copy = folder / "checkout"
    shutil.copytree(ROOT, copy, ignore=skipped, symlinks=True)
    (copy / "build").symlink_to(ROOT / "build")  # the stand-in provider, built once
    subprocess.run(["git", "apply", str(patch)], cwd=copy, check=True, capture_output=True)
    return copy


@pytest.mark.parametrize("patch", PATCHES, ids=[patch.stem for patch in PATCHES])
def test_the_rehearsal_fails_at_the_step_the_patch_breaks(patch, tmp_path):
    iteration, scenario, step = header(patch)
    copy = patched_copy(patch, tmp_path)
    env = {key: value for key, value in os.environ.items()
           if key not in ("GOOGLE_APPLICATION_CREDENTIALS", "FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST")}
    env["PYTHONPATH"] = os.pathsep.join([str(copy / "scripts"), env.get("PYTHONPATH", "")])
    env.setdefault("SHARED_DIR", str(ROOT.parent / "shared"))  # the provider schema, beside this checkout
    result = subprocess.run(
        [sys.executable, "-m", "visitkit", "run", f"iterations/{iteration}", "--test", "breakpoint", "--target", "gcp",
         "--project", "visitkit-rehearsal", "--region", "southamerica-east1", "--duration", "20s", "--shape-set",
         "spawn_rate=2", "--destroy", "--rehearse", *([scenario] if scenario else [])],
        cwd=copy, env=env, capture_output=True, text=True, timeout=400)
    assert result.returncode != 0, f"{patch.name}: the rehearsal passed with the patch applied"
    folders = sorted(Path(copy, "iterations", iteration, "results").glob("rehearsal-*"))
    run = json.loads((folders[-1] / "run.json").read_text())
    assert run.get("failed_step") == step, (run.get("failed_step"), result.stdout[-3000:], result.stderr[-2000:])

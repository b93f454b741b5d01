"""Shared code of the kit's scripts: settings, the local stack, load runs and reports."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def use_project_venv():
    """Re-runs the calling script under the project's virtualenv (made by `make`), which has its
    packages, when it was started with another Python (e.g. through its #!/usr/bin/env line)."""
    venv = ROOT / ".venv"
    if (venv / "bin" / "python").exists() and Path(sys.prefix).resolve() != venv.resolve():
        os.execv(str(venv / "bin" / "python"), [str(venv / "bin" / "python"), *sys.argv])

"""Where the project's parts live, found from this package's place in the checkout."""
import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = ROOT / "functions"
CATALOGUE_FILE = FUNCTIONS_DIR / "catalogue.json"
INFRA_DIR = ROOT / "infra"
BENCHMARKS_DIR = ROOT / "benchmarks"
ITERATIONS_DIR = ROOT / "iterations"
LOCUST_DIR = ROOT / "locust"
LOCAL_STATE_DIR = ROOT / ".local"
SETTINGS_FILE = "settings.tfvars.json"


def flat_module(path: Path, prefix: str) -> ModuleType:
    """A flat module of the checkout (functions/NAME.py, locust/NAME.py) loaded from its file under the name
    PREFIX_NAME, so that what it defines lives once there and the kit reads it as deployed."""
    spec = importlib.util.spec_from_file_location(f"{prefix}_{path.stem}", path)
    if spec is None or spec.loader is None:  # never for a .py path: its loader is a SourceFileLoader
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def from_root(path: str | Path) -> str:
    """A path as the kit records and shows it: from the checkout's root when it is in the checkout (elsewhere, as
    it is), so that a committed record names no machine's folders."""
    resolved = Path(path).resolve()
    return resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else str(path)


def recorded_command(command: Iterable[str]) -> list[str]:
    """A command line as a results folder keeps it: this Python as `python`, the checkout's paths from its root."""
    return ["python" if part == sys.executable else from_root(part) if Path(part).is_absolute() else part
            for part in command]

"""Where the project's parts live, found from this package's place in the checkout."""
import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = ROOT / "functions"
CATALOGUE_FILE = FUNCTIONS_DIR / "catalogue.json"
INFRA_DIR = ROOT / "infra"
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

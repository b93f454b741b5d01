"""Where the project's parts live, found from this package's place in the checkout."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = ROOT / "functions"
CATALOGUE_FILE = FUNCTIONS_DIR / "catalogue.json"
INFRA_DIR = ROOT / "infra"
ITERATIONS_DIR = ROOT / "iterations"
LOCUST_DIR = ROOT / "locust"
LOCAL_STATE_DIR = ROOT / ".local"
SETTINGS_FILE = "settings.tfvars.json"

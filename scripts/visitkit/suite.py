"""The Locust suite (locust/) as the kit drives it: how a distributed run's nodes start
(locust/node.py, the same start the fleet's VMs make) and the names of the files its master
writes, loaded from the checkout so that they live once."""
import importlib.util
from types import ModuleType

from visitkit.paths import LOCUST_DIR

LOCUSTFILE = LOCUST_DIR / "locustfile.py"


def locust_module(name: str) -> ModuleType:
    """locust/NAME.py, a flat module of the Locust suite, loaded from the checkout (it imports nothing
    of Locust's), so that what it defines lives once."""
    path = LOCUST_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"visitkit_locust_{name}", path)
    if spec is None or spec.loader is None:  # never for a .py path: its loader is a SourceFileLoader
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


node = locust_module("node")
OUTPUTS = node.OUTPUTS  # Locust option -> the file's name in a results folder
OUTPUT_FLAGS = node.OUTPUT_FLAGS
RUN_CONF = "run.conf"  # a distributed run's Locust options, as its master and workers read them

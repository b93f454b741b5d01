"""The Locust suite (locust/) as the kit drives it: how a distributed run's nodes start
(locust/node.py, the same start the fleet's VMs make) and the names of the files its master
writes, loaded from the checkout so that they live once."""
import importlib.util

from visitkit.paths import LOCUST_DIR

LOCUSTFILE = LOCUST_DIR / "locustfile.py"


def _load_node():
    spec = importlib.util.spec_from_file_location("visitkit_locust_node", LOCUST_DIR / "node.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


node = _load_node()
OUTPUTS = node.OUTPUTS  # Locust option -> the file's name in a results folder
OUTPUT_FLAGS = node.OUTPUT_FLAGS

"""The Locust suite (locust/) as the kit drives it: how a distributed run's nodes start
(locust/node.py, the same start the fleet's VMs make) and the names of the files its master
writes, loaded from the checkout so that they live once."""
from types import ModuleType

from visitkit.paths import LOCUST_DIR, flat_module

LOCUSTFILE = LOCUST_DIR / "locustfile.py"


def locust_module(name: str) -> ModuleType:
    """locust/NAME.py, a flat module of the Locust suite, loaded from the checkout (it imports nothing
    of Locust's), so that what it defines lives once."""
    return flat_module(LOCUST_DIR / f"{name}.py", "visitkit_locust")


node = locust_module("node")
OUTPUTS = node.OUTPUTS  # Locust option -> the file's name in a results folder
OUTPUT_FLAGS = node.OUTPUT_FLAGS
RUN_CONF = "run.conf"  # a distributed run's Locust options, as its master and workers read them

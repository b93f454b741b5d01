"""The four Cloud Functions of the visit counter; each is deployed with its own entry point.

Each entry point lives in the module of the same name, and an instance imports only its own:
functions-framework looks the entry point up on this module by name, and `__getattr__` (PEP 562)
imports that one module then, so serve-page never loads the Firestore or Pub/Sub clients, and
no instance pays at start for the other three functions' imports.

With STORE_MODE=pull, store-inc-counter is the batch puller of store_batch.py instead of the push
handler of store_inc_counter.py (same entry point, name and service).
"""
import importlib
import os

from common import CATALOGUE, log_instance_start

__all__ = sorted(function["entry_point"] for function in CATALOGUE["functions"].values())
# entry point -> the module defining it, where that is not the module of the same name
MODULES = {"store_inc_counter": "store_batch"} if os.environ.get("STORE_MODE") == "pull" else {}


def __getattr__(name):
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(MODULES.get(name, name)), name)


log_instance_start()

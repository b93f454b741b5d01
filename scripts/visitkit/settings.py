"""An iteration's settings: the same `.tfvars.json` file Terraform reads.

Only the knobs the local stack needs are interpreted here; Terraform-only keys
(memory, cpu, timeout) are kept as they are.
"""
import json
from dataclasses import dataclass, field
from pathlib import Path

PAGES = ("home", "jobs", "about", "about_legals", "about_offices")
FUNCTIONS = ("serve-page", "get-counter", "inc-counter", "store-inc-counter")
DEFAULT_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class FunctionSettings:
    max_instances: int = 2
    concurrency: int = 1
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    shards_per_page: int
    cache_ttl_seconds: int
    functions: dict  # name -> FunctionSettings
    source: str = ""


class SettingsError(ValueError):
    pass


def _positive_int(value, what):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SettingsError(f"{what} must be a whole number >= 1, got {value!r}")
    return value


def parse_settings(raw, source=""):
    shards = _positive_int(raw.get("shards_per_page"), "shards_per_page")
    ttl = raw.get("cache_ttl_seconds")
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        raise SettingsError(f"cache_ttl_seconds must be a whole number >= 0, got {ttl!r}")
    given = raw.get("functions") or {}
    unknown = set(given) - set(FUNCTIONS)
    if unknown:
        raise SettingsError(f"unknown functions in settings: {sorted(unknown)}")
    functions = {}
    for name in FUNCTIONS:
        spec = dict(given.get(name) or {})
        max_instances = _positive_int(spec.pop("max_instances", 2), f"{name}.max_instances")
        concurrency = _positive_int(spec.pop("concurrency", 1), f"{name}.concurrency")
        timeout = _positive_int(spec.pop("timeout_seconds", DEFAULT_TIMEOUT_SECONDS), f"{name}.timeout_seconds")
        functions[name] = FunctionSettings(max_instances, concurrency, timeout, spec)
    return Settings(shards, ttl, functions, source)


def load_settings(path):
    path = Path(path)
    if path.is_dir():
        path = path / "settings.tfvars.json"
    with open(path) as f:
        return parse_settings(json.load(f), str(path))

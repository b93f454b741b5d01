"""Latency profiles: how far the local twin's backends are from its function instances.

A profile says, per backend, how many milliseconds one request/response round trip gains on its way
(Toxiproxy adds half on the way in and half on the way out), and the service time each function then
has (what the capacity model in model/capacity.py works from). `push` is the platform's own: what a push
delivery holds a store-inc-counter slot beyond the function's execution (the delivery's round trip
and its acknowledgement), put between HAProxy and each store instance. `none` adds nothing; `study` is calibrated on
the reference study; a Google Cloud run writes a profile of its own with `profile_from_results`.

A profile file (JSON):
  {"name": "...", "latency_ms": {"firestore": 120, "pubsub": 20, "frontend": 0, "push": 0},
   "service_ms": {"serve-page": .., "get-counter": .., "inc-counter": .., "store-inc-counter": ..},
   "cache_hit_ms": 2, "derivation": ["why these numbers", ...],
   optional: "cpu_ms": {function: ms},
   "host": {"cores": 2, "cpu_ms_per_page": ms, optional "cpu_ms_per_counter_read": ms}}
"""
import csv
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from visitkit.catalogue import CATALOGUE, FUNCTIONS, PUBLISHER_FUNCTION, PUSH_FUNCTION, READER_FUNCTION
from visitkit.errors import SettingsError

PROFILES_DIR = Path(__file__).with_name("profiles")
BACKENDS = ("firestore", "pubsub", "frontend", "push")  # frontend: the client (Locust) to HAProxy
DEFAULT = "none"
# Which backend each function waits on once per request (get-counter: one aggregation query on a
# cache miss; inc-counter: one publish; store-inc-counter: one batch commit); serve-page waits on none.
BACKEND_OF = {READER_FUNCTION: "firestore", PUBLISHER_FUNCTION: "pubsub", PUSH_FUNCTION: "firestore"}


@dataclass(frozen=True)
class Profile:
    name: str
    latency_ms: dict[str, float]  # backend -> added round trip, ms
    service_ms: dict[str, float]  # function -> its service time with this profile, ms
    cache_hit_ms: float = 2.0  # get-counter answering from its cache
    derivation: tuple[str, ...] = ()
    source: str = ""
    cpu_ms: dict[str, float] | None = None  # function -> CPU time per request on one vCPU, ms (None: no CPU bound)
    # the machine the twin runs on: cores, cpu_ms_per_page[, cpu_ms_per_counter_read] (None: unbounded)
    host: dict[str, float] | None = None
    # a pull store's batch commit: {"per_batch": ms, "per_message": ms} (None: the profile gives none)
    pull_batch_ms: dict[str, float] | None = None

    @property
    def push_overhead_ms(self) -> float:
        """What a push delivery holds a store slot beyond the function's service time."""
        return self.latency_ms.get("push", 0)

    @property
    def needs_proxy(self) -> bool:
        return any(self.latency_ms.get(backend, 0) > 0 for backend in BACKENDS)

    def record(self) -> dict[str, Any]:
        """What run.json and the report keep of it."""
        return {"name": self.name, "source": self.source,
                "latency_ms": {b: self.latency_ms.get(b, 0) for b in BACKENDS}}

    def describe(self) -> str:
        latencies = ", ".join(f"{b} +{self.latency_ms.get(b, 0):g} ms" for b in BACKENDS)
        return f"{self.name} ({latencies} per round trip)"


def parse_profile(raw: object, source: str | Path) -> Profile:
    """A Profile from a profile file's JSON; SettingsError names the first problem."""
    def fail(message: str) -> NoReturn:
        raise SettingsError(f"{source}: {message}")

    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        fail('a profile is a JSON object with a "name".')
    latency = raw.get("latency_ms", {})
    if not isinstance(latency, dict) or set(latency) - set(BACKENDS):
        fail(f"latency_ms may only name {', '.join(BACKENDS)}.")
    if any(not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 for v in latency.values()):
        fail("each latency_ms value must be a number of milliseconds >= 0.")
    service = raw.get("service_ms")
    if not isinstance(service, dict) or set(service) != set(FUNCTIONS):
        fail(f"service_ms must give a time for each of {', '.join(FUNCTIONS)}.")
    if any(not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0 for v in service.values()):
        fail("each service_ms value must be a number of milliseconds > 0.")
    cache_hit = raw.get("cache_hit_ms", Profile.cache_hit_ms)
    if not isinstance(cache_hit, (int, float)) or cache_hit <= 0:
        fail("cache_hit_ms must be a number of milliseconds > 0.")
    cpu = raw.get("cpu_ms")
    if cpu is not None and (not isinstance(cpu, dict) or set(cpu) != set(FUNCTIONS)
                            or any(not isinstance(v, (int, float)) or v <= 0 for v in cpu.values())):
        fail(f"cpu_ms, when given, must give a time > 0 for each of {', '.join(FUNCTIONS)}.")
    host = raw.get("host")
    if host is not None and (not isinstance(host, dict) or not {"cores", "cpu_ms_per_page"} <= set(host)
                             or set(host) - {"cores", "cpu_ms_per_page", "cpu_ms_per_counter_read"}
                             or any(not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0
                                    for v in host.values())):
        fail('host, when given, must be {"cores": n > 0, "cpu_ms_per_page": ms > 0} and may add '
             '"cpu_ms_per_counter_read": ms > 0.')
    pull = raw.get("pull_batch_ms")
    if pull is not None and (not isinstance(pull, dict) or set(pull) != {"per_batch", "per_message"}
                             or any(not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0
                                    for v in pull.values())):
        fail('pull_batch_ms, when given, must be {"per_batch": ms >= 0, "per_message": ms >= 0}.')
    return Profile(raw["name"], dict(latency), dict(service), float(cache_hit),
                   tuple(raw.get("derivation", ())), str(source), dict(cpu) if cpu else None,
                   dict(host) if host else None, dict(pull) if pull else None)


def builtin_names() -> list[str]:
    return sorted(path.stem for path in PROFILES_DIR.glob("*.json"))


def load_profile(name_or_file: str | Path | None = DEFAULT) -> Profile:
    """A built-in profile by name (`none`, `study`) or a profile file by path."""
    name_or_file = str(name_or_file or DEFAULT)
    path = PROFILES_DIR / f"{name_or_file}.json"
    if not path.exists():
        path = Path(name_or_file)
        if not path.exists():
            raise SettingsError(f"no profile {name_or_file!r}: give one of {', '.join(builtin_names())} "
                                "or a profile file")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise SettingsError(f"{path} is not valid JSON: {error}") from None
    source = path.name if path.parent == PROFILES_DIR else str(path)
    return parse_profile(raw, source)


# ---- a profile from a Google Cloud run --------------------------------------------------------------
def measured_service_ms(rows: Iterable[Mapping[str, str]]) -> dict[str, float]:
    """{function: ms} from request_latencies.csv rows (time, service_name, count, p50, ...): each
    function's per-minute p50s weighted by their request counts."""
    by_service = {f.service: name for name, f in CATALOGUE.items()}
    weighted: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        name = by_service.get(row.get("service_name", ""))
        count, p50 = _number(row.get("count")), _number(row.get("p50"))
        if name and count and p50 is not None:
            weighted.setdefault(name, []).append((p50, count))
    return {name: sum(p * c for p, c in pairs) / sum(c for _, c in pairs) for name, pairs in weighted.items()}


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def profile_from_measurements(measured: Mapping[str, float], local: Profile, name: str = "measured",
                              source: str = "") -> dict[str, Any]:
    """A profile whose backend latencies make the local functions as slow as measured ones.

    measured: {function: ms} on Google Cloud; local: the `none` profile (this machine's service
    times without added latency). A backend's latency is the measured service time of the function
    that waits on it once per request minus that function's local time; Firestore's comes from
    store-inc-counter (get-counter hides behind its cache in most iterations).
    """
    missing = sorted(set(FUNCTIONS) - set(measured))
    if missing:
        raise SettingsError(f"{source or 'the run'} has no request latencies for {', '.join(missing)}")

    def added(function: str) -> float:
        return round(max(0.0, measured[function] - local.service_ms[function]), 1)

    latency = {"firestore": added(PUSH_FUNCTION), "pubsub": added(PUBLISHER_FUNCTION), "frontend": 0}
    derivation = [f"Written from {source or 'a Google Cloud run'}: each function's request_latencies p50, "
                  "weighted by requests per minute."]
    derivation += [f"{f}: {measured[f]:.0f} ms measured, {local.service_ms[f]:g} ms locally without latency"
                   for f in FUNCTIONS]
    derivation += [f"firestore +{latency['firestore']:g} ms = {PUSH_FUNCTION} measured - local (one batch commit "
                   "per request)",
                   f"pubsub +{latency['pubsub']:g} ms = {PUBLISHER_FUNCTION} measured - local (one publish)"]
    return {"name": name, "latency_ms": latency,
            "service_ms": {f: round(measured[f], 1) for f in FUNCTIONS},
            "cache_hit_ms": local.cache_hit_ms, "derivation": derivation}


def profile_from_results(results_dir: str | Path, name: str | None = None) -> dict[str, Any]:
    """The profile (as JSON-ready dict) a Google Cloud run's metrics/request_latencies.csv gives."""
    path = Path(results_dir) / "metrics" / "request_latencies.csv"
    if not path.exists():
        raise SettingsError(f"{path} not found: only a Google Cloud run (--target gcp) has it")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return profile_from_measurements(measured_service_ms(rows), load_profile(DEFAULT),
                                     name or f"cloud-{Path(results_dir).name}", source=str(results_dir))


def write_profile(results_dir: str | Path, out: str | Path | None = None) -> Path:
    """Writes the run's profile to `out` (default: RESULTS_DIR/profile.json); returns the path."""
    profile = profile_from_results(results_dir)
    out = Path(out) if out else Path(results_dir) / "profile.json"
    out.write_text(json.dumps(profile, indent=2) + "\n")
    return out

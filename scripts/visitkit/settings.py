"""An iteration's settings: the `settings.tfvars.json` file Terraform reads with -var-file.

Parsed and validated once, with the rules and messages of infra/variables.tf (a test holds the
two together), into a `Settings` value that flows through a run. A file that loads here deploys.
"""
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from visitkit.catalogue import CATALOGUE, FUNCTIONS, PUBLISHER_FUNCTION, PUSH_FUNCTION, READER_FUNCTION
from visitkit.errors import SettingsError
from visitkit.paths import SETTINGS_FILE

MEMORY = re.compile(r"^[1-9][0-9]*(M|Mi|G|Gi)$")
MEMORY_BYTES = {"M": 10**6, "Mi": 2**20, "G": 10**9, "Gi": 2**30}
MIB_512, GIB_1 = 512 * 2**20, 2**30

# infra/variables.tf's error messages, word for word.
MESSAGES = {
    "shards_per_page": "shards_per_page must be a whole number >= 1.",
    "cache_ttl_seconds": "cache_ttl_seconds must be a whole number >= 0.",
    "marker_ttl_days": "marker_ttl_days must be a whole number >= 1.",
    "functions": "functions must have exactly the keys serve-page, get-counter, inc-counter and store-inc-counter.",
    "max_instances": "Each function's max_instances must be a whole number from 1 to 1000.",
    "concurrency": "Each function's concurrency must be a whole number from 1 to 1000.",
    "timeout_seconds": "Each function's timeout_seconds must be a whole number from 1 to 3600.",
    "min_instances": "Each function's min_instances must be a whole number from 0 to 1000, not above its "
                     "max_instances.",
    "memory": "Each function's memory must look like \"256M\", \"512Mi\" or \"1G\".",
    "cpu": "Each function's cpu must be a number of vCPUs from above 0 to 8, written as a string such as "
           "\"0.167\" or \"1\".",
    "cpu_for_concurrency": "A function with concurrency above 1 needs cpu of at least \"1\" (a 2nd gen function "
                           "with less than 1 vCPU serves one request at a time).",
    "cpu_for_512mib": "A function with memory above 512 MiB needs cpu of at least \"0.5\" (Cloud Run's rule).",
    "cpu_for_1gib": "A function with memory above 1 GiB needs cpu of at least \"1\" (Cloud Run's rule).",
    "cpu_whole": "A function's cpu above \"1\" must be a whole number of vCPUs, such as \"2\" or \"4\" "
                 "(Cloud Run's rule).",
    "ack_deadline_seconds": "subscription.ack_deadline_seconds must be a whole number from 10 to 600.",
    "backoff": "subscription.minimum_backoff_seconds and subscription.maximum_backoff_seconds must be whole "
               "numbers from 0 to 600, the minimum not above the maximum.",
    "max_delivery_attempts": "subscription.max_delivery_attempts must be a whole number from 5 to 100.",
    "message_retention_seconds": "subscription.message_retention_seconds must be a whole number from 600 "
                                 "(10 minutes) to 604800 (7 days).",
    "access": "access must be \"auto\" (the kit chooses public or authenticated from the organization policy; "
              "Terraform alone treats auto as public), \"public\" (anyone may call the three HTTP functions) or "
              "\"authenticated\" (only the accounts in invokers, with a Google-signed ID token).",
    "invokers": "Each of invokers must be an IAM principal such as \"user:me@example.com\" or "
                "\"serviceAccount:loadgen@my-project.iam.gserviceaccount.com\".",
    "store_mode": "store_mode must be \"push\" (Pub/Sub pushes each visit to store-inc-counter) or \"pull\" "
                  "(store-inc-counter pulls visits in batches).",
    "pull": "pull.batch_size must be a whole number from 1 to 1000, pull.flush_ms from 10 to 10000 and "
            "pull.dedup_window_minutes from 10 to 1440.",
    "pull_instances": "With store_mode \"pull\", store-inc-counter must have max_instances 1 and min_instances 1 "
                      "(one writer, running without requests).",
    "page_embeds_count": "page_embeds_count must be true or false.",
    "scaling": "scaling must be \"fixed\" (every instance up all the time) or \"auto\" (the twin's autoscaler starts "
               "and stops them).",
}
# "push": Pub/Sub pushes each visit to store-inc-counter (iterations 0-6); "pull": it pulls them in batches.
STORE_MODES = ("push", "pull")
# "auto": the kit's preflight reads the organization policy and deploys "public" where it lets allUsers
# invoke, "authenticated" where it refuses them; Terraform is only ever given the two others.
ACCESS_MODES = ("auto", "public", "authenticated")
DEPLOYED_ACCESS_MODES = ACCESS_MODES[1:]
INVOKER = re.compile(r"^(user|serviceAccount|group|domain|principal|principalSet):\S+$")
# How the local twin runs a function's instances: "fixed", all max_instances of them up and warm from the first
# request to the last (every committed twin run before issue #50); "auto", as Cloud Run's autoscaler starts and
# stops them between min_instances and max_instances (twin/autoscaler.py). The twin's alone: infra/variables.tf declares
# it (a settings file that sets it plans) and nothing in Terraform reads it, since Cloud Run always autoscales.
SCALING_MODES = ("fixed", "auto")
DEFAULT_SCALING = "fixed"  # until autoscaling's runs are made and compared (docs/local-twin.md, Autoscaling)
# Variables infra/ declares that a settings file may also set; the kit passes these itself.
TERRAFORM_ONLY = {"project_id", "region", "topic_name", "invokers", "cors_allowed_origins", "alerts",
                  "alert_notification_channels", "edge_protection", "build_grants_wait_seconds",
                  "page_idle_seconds", "log_exclusions"}


# The puller's vCPUs when its settings leave cpu out: instance-based billing needs at least 1 (infra/pull.tf's
# puller_cpu), so the quota preflight, the cost and the twin count what runs.
PULLER_DEFAULT_CPU = "1"


@dataclass(frozen=True)
class FunctionSettings:
    max_instances: int
    concurrency: int
    memory: str = "256M"
    cpu: str | None = None  # None: Terraform's default, see effective_cpu
    timeout_seconds: int = 60
    min_instances: int = 0  # instances kept warm (and billed) even without requests

    @property
    def effective_cpu(self) -> str:
        """The vCPUs Terraform deploys: the cpu given, else 1 for concurrency above 1, else 1/6."""
        return self.cpu if self.cpu is not None else ("1" if self.concurrency > 1 else "0.167")

    @property
    def slots(self) -> int:
        """Requests the function serves at once at most: instances x concurrency."""
        return self.max_instances * self.concurrency


@dataclass(frozen=True)
class SubscriptionSettings:
    """The push subscription to store-inc-counter (Terraform deploys it; the local twin follows it)."""
    ack_deadline_seconds: int = 60  # also the push request's timeout
    minimum_backoff_seconds: int = 10
    maximum_backoff_seconds: int = 600
    max_delivery_attempts: int = 20  # then the dead-letter topic
    message_retention_seconds: int = 86400


@dataclass(frozen=True)
class PullSettings:
    """store_mode "pull": how store-inc-counter pulls and commits visits (ignored in push mode)."""
    batch_size: int = 500  # messages per pull and per Firestore commit at most
    flush_ms: int = 500  # a partial batch is committed after this long
    dedup_window_minutes: int = 60  # a repeat published within this many minutes of its first copy is refused


@dataclass(frozen=True)
class Settings:
    shards_per_page: int
    cache_ttl_seconds: int
    functions: dict[str, FunctionSettings]  # name -> FunctionSettings, in catalogue order
    subscription: SubscriptionSettings = SubscriptionSettings()
    marker_ttl_days: int = 7
    access: str = "auto"  # "public", "authenticated" (no allUsers, every request carries an ID token), or auto
    dead_letter: bool = True  # False: no dead-letter topic, and no grant names Pub/Sub's service agent
    store_mode: str = "push"  # one of STORE_MODES
    pull: PullSettings = PullSettings()
    page_embeds_count: bool = False  # True: serve-page embeds the cached count, the page skips its first read
    scaling: str = DEFAULT_SCALING  # one of SCALING_MODES
    raw: dict[str, Any] = field(default_factory=dict, compare=False)  # the file's own content
    source: str = ""  # where it was read from

    @property
    def largest_slots(self) -> int:
        return max(f.slots for f in self.functions.values())

    def autoscaled(self, function: str) -> bool:
        """Whether the twin's autoscaler starts and stops this function's instances: with scaling "auto", when
        its min_instances is below its max_instances (otherwise every instance runs all the time anyway)."""
        spec = self.functions[function]
        return self.scaling == "auto" and spec.min_instances < spec.max_instances

    def with_scaling(self, scaling: str) -> "Settings":
        """These settings with the twin's instances run as `scaling` says (--scaling, over the settings file's), the
        file's content (`raw`, which run.json records) saying so too: a run records the scaling it used."""
        _require(scaling in SCALING_MODES, "scaling", "--scaling", scaling)
        return replace(self, scaling=scaling, raw={**self.raw, "scaling": scaling})

    @property
    def pulls(self) -> bool:
        """store-inc-counter pulls visits in batches (no push subscription, no request per visit)."""
        return self.store_mode == "pull"


def _whole(value: object, low: int, high: int | None = None) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool) and value >= low
            and (high is None or value <= high))


def _cpu_number(text: Any) -> float | None:  # any JSON value
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(text, str) and 0 < value <= 8 else None


def _require(ok: object, key: str, where: str | Path, value: object) -> None:
    if not ok:
        raise SettingsError(f"{where}: {MESSAGES[key]} Got {value!r}.")


def _function(name: str, spec: object, where: str | Path) -> FunctionSettings:
    where = f"{where} functions.{name}"
    if not isinstance(spec, dict):
        raise SettingsError(f"{where}: must be an object with max_instances and concurrency.")
    unknown = set(spec) - set(FunctionSettings.__dataclass_fields__)
    if unknown:
        raise SettingsError(f"{where}: unknown keys {sorted(unknown)}.")
    for key in ("max_instances", "concurrency"):
        if key not in spec:
            raise SettingsError(f"{where}: {key} is required.")
    result = FunctionSettings(**spec)
    _require(_whole(result.max_instances, 1, 1000), "max_instances", where, result.max_instances)
    _require(_whole(result.concurrency, 1, 1000), "concurrency", where, result.concurrency)
    _require(_whole(result.timeout_seconds, 1, 3600), "timeout_seconds", where, result.timeout_seconds)
    _require(_whole(result.min_instances, 0, 1000) and result.min_instances <= result.max_instances,
             "min_instances", where, result.min_instances)
    memory = MEMORY.match(result.memory) if isinstance(result.memory, str) else None
    _require(memory, "memory", where, result.memory)
    assert memory is not None  # _require raised otherwise
    _require(result.cpu is None or _cpu_number(result.cpu) is not None, "cpu", where, result.cpu)
    cpu, memory_bytes = float(result.effective_cpu), int(result.memory[:memory.start(1)]) * MEMORY_BYTES[memory[1]]
    _require(result.concurrency == 1 or result.cpu is None or cpu >= 1, "cpu_for_concurrency", where, result.cpu)
    _require(memory_bytes <= MIB_512 or cpu >= 0.5, "cpu_for_512mib", where, result.effective_cpu)
    _require(memory_bytes <= GIB_1 or cpu >= 1, "cpu_for_1gib", where, result.effective_cpu)
    _require(cpu <= 1 or cpu == int(cpu), "cpu_whole", where, result.effective_cpu)
    return result


def _subscription(spec: object, where: str | Path) -> SubscriptionSettings:
    where = f"{where} subscription"
    if not isinstance(spec, dict):
        raise SettingsError(f"{where}: must be an object.")
    unknown = set(spec) - set(SubscriptionSettings.__dataclass_fields__)
    if unknown:
        raise SettingsError(f"{where}: unknown keys {sorted(unknown)}.")
    result = SubscriptionSettings(**spec)
    _require(_whole(result.ack_deadline_seconds, 10, 600), "ack_deadline_seconds", where, result.ack_deadline_seconds)
    low, high = result.minimum_backoff_seconds, result.maximum_backoff_seconds
    _require(_whole(low, 0, 600) and _whole(high, 0, 600) and low <= high, "backoff", where, (low, high))
    _require(_whole(result.max_delivery_attempts, 5, 100), "max_delivery_attempts", where,
             result.max_delivery_attempts)
    _require(_whole(result.message_retention_seconds, 600, 604800), "message_retention_seconds", where,
             result.message_retention_seconds)
    return result


def _pull(spec: object, where: str | Path) -> PullSettings:
    where = f"{where} pull"
    if not isinstance(spec, dict):
        raise SettingsError(f"{where}: must be an object.")
    unknown = set(spec) - set(PullSettings.__dataclass_fields__)
    if unknown:
        raise SettingsError(f"{where}: unknown keys {sorted(unknown)}.")
    result = PullSettings(**spec)
    _require(_whole(result.batch_size, 1, 1000) and _whole(result.flush_ms, 10, 10000)
             and _whole(result.dedup_window_minutes, 10, 1440), "pull", where,
             (result.batch_size, result.flush_ms, result.dedup_window_minutes))
    return result


def parse_settings(raw: object, source: str | Path = "settings") -> Settings:
    """A Settings value from a settings file's parsed JSON; SettingsError names the first problem."""
    if not isinstance(raw, dict):
        raise SettingsError(f"{source}: a settings file holds one JSON object.")
    known = set(Settings.__dataclass_fields__) - {"raw", "source"} | TERRAFORM_ONLY
    unknown = set(raw) - known
    if unknown:
        raise SettingsError(f"{source}: unknown settings {sorted(unknown)}; infra/variables.tf declares "
                            f"{', '.join(sorted(known))}.")
    for key in ("shards_per_page", "cache_ttl_seconds", "functions"):
        if key not in raw:
            raise SettingsError(f"{source}: {key} is required.")
    _require(_whole(raw["shards_per_page"], 1), "shards_per_page", source, raw["shards_per_page"])
    _require(_whole(raw["cache_ttl_seconds"], 0), "cache_ttl_seconds", source, raw["cache_ttl_seconds"])
    marker_ttl_days = raw.get("marker_ttl_days", 7)
    _require(_whole(marker_ttl_days, 1), "marker_ttl_days", source, marker_ttl_days)
    access = raw.get("access", "auto")
    _require(access in ACCESS_MODES, "access", source, access)
    dead_letter = raw.get("dead_letter", True)
    if not isinstance(dead_letter, bool):
        raise SettingsError(f"{source}: dead_letter must be true or false. Got {dead_letter!r}.")
    store_mode = raw.get("store_mode", "push")
    _require(store_mode in STORE_MODES, "store_mode", source, store_mode)
    scaling = raw.get("scaling", DEFAULT_SCALING)
    _require(scaling in SCALING_MODES, "scaling", source, scaling)
    page_embeds_count = raw.get("page_embeds_count", False)
    _require(isinstance(page_embeds_count, bool), "page_embeds_count", source, page_embeds_count)
    given = raw["functions"]
    _require(isinstance(given, dict) and set(given) == set(FUNCTIONS), "functions", source,
             sorted(given) if isinstance(given, dict) else given)
    functions = {name: _function(name, given[name], source) for name in FUNCTIONS}
    store = functions[PUSH_FUNCTION]
    # One writer: the lease fences a second instance off; and it runs without requests, so one always runs.
    _require(store_mode == "push" or (store.max_instances, store.min_instances) == (1, 1), "pull_instances",
             f"{source} functions.{PUSH_FUNCTION}", (store.max_instances, store.min_instances))
    if store_mode == "pull" and store.cpu is None:  # what infra/pull.tf deploys: coalesce(cpu, "1")
        functions[PUSH_FUNCTION] = replace(store, cpu=PULLER_DEFAULT_CPU)
    return Settings(
        shards_per_page=raw["shards_per_page"], cache_ttl_seconds=raw["cache_ttl_seconds"],
        functions=functions, subscription=_subscription(raw.get("subscription", {}), source),
        marker_ttl_days=marker_ttl_days, access=access, dead_letter=dead_letter, store_mode=store_mode,
        pull=_pull(raw.get("pull", {}), source), page_embeds_count=page_embeds_count, scaling=scaling, raw=raw,
        source=str(source))


def check_invokers(invokers: Sequence[str], where: str = "--invoker") -> tuple[str, ...]:
    """The principals an authenticated deployment grants run.invoker, as variables.tf checks them."""
    for member in invokers:
        _require(isinstance(member, str) and INVOKER.match(member), "invokers", where, member)
    return tuple(invokers)


def load_settings(path: str | Path) -> Settings:
    """An iteration folder's settings file, or the file at `path`."""
    path = Path(path)
    if path.is_dir():
        path = path / SETTINGS_FILE
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise SettingsError(f"no settings file at {path}") from None
    except json.JSONDecodeError as error:
        raise SettingsError(f"{path} is not valid JSON: {error}") from None
    return parse_settings(raw, path)


def function_environment(settings: Settings, function: str, *, project: str, topic: str,
                         base_url: str = "", pull_subscription: str | None = None) -> dict[str, str]:
    """A function's environment, as infra/main.tf sets it (a test checks the two agree): what all
    four share, and THREADS = the function's concurrency, so that functions-framework's gunicorn
    serves exactly as many requests at once as the platform sends it (its default is
    cpu_count x 4 threads). base_url: where the public functions live; "" keeps serve-page's calls
    relative (one host). The public functions also get CORS_ALLOWED_ORIGINS, which a settings file may
    set (cors_allowed_origins, as Terraform's variable), and serve-page PAGE_IDLE_SECONDS (page_idle_seconds:
    how long an untouched page keeps re-reading its count, 0 for ever); its page also reads CACHE_TTL_SECONDS.
    Every function gets STORE_MODE and PAGE_EMBEDS_COUNT; in pull mode store-inc-counter also gets its pull
    subscription's short name (pull_subscription; None: Terraform's, f"{topic}-store-inc-counter") and the pull
    settings."""
    public = {"CORS_ALLOWED_ORIGINS": ",".join(settings.raw.get("cors_allowed_origins") or [])} \
        if CATALOGUE[function].public else {}
    idle = settings.raw.get("page_idle_seconds")
    page = {"PAGE_IDLE_SECONDS": str(600 if idle is None else idle)} \
        if CATALOGUE[function].role == "page" else {}  # 600: variables.tf's default (null is the default there too)
    return {
        **public,
        **page,
        "THREADS": str(settings.functions[function].concurrency),
        "GOOGLE_CLOUD_PROJECT": project,
        "PUBSUB_TOPIC": topic,
        "SHARDS_PER_PAGE": str(settings.shards_per_page),
        "CACHE_TTL_SECONDS": str(settings.cache_ttl_seconds),
        "MARKER_TTL_DAYS": str(settings.marker_ttl_days),
        "INC_COUNTER_URL": f"{base_url}{CATALOGUE[PUBLISHER_FUNCTION].path}",
        "GET_COUNTER_URL": f"{base_url}{CATALOGUE[READER_FUNCTION].path}",
        "STORE_MODE": settings.store_mode,
        "PAGE_EMBEDS_COUNT": "1" if settings.page_embeds_count else "0",
        **(_pull_environment(settings, pull_subscription or f"{topic}-{PUSH_FUNCTION}")
           if settings.pulls and function == PUSH_FUNCTION else {}),
    }


def _pull_environment(settings: Settings, subscription: str) -> dict[str, str]:
    """What the puller reads: where it pulls from, its batches and its dedup horizon."""
    return {"PULL_SUBSCRIPTION": subscription, "PULL_BATCH_SIZE": str(settings.pull.batch_size),
            "PULL_FLUSH_MS": str(settings.pull.flush_ms),
            "DEDUP_WINDOW_MINUTES": str(settings.pull.dedup_window_minutes)}


def summary_line(settings: Settings) -> str:
    """One line for plans and reports: shards, cache and each function's instances x concurrency."""
    instances = ", ".join(f"{name} {f.max_instances}x{f.concurrency}" for name, f in settings.functions.items())
    pull = (f"; {PUSH_FUNCTION} pulls batches of {settings.pull.batch_size}" if settings.pulls else "") \
        + ("; the page embeds its count" if settings.page_embeds_count else "")
    return (f"{settings.shards_per_page} shards/page, {READER_FUNCTION} cache {settings.cache_ttl_seconds} s; "
            f"instances x concurrency: {instances}{pull}")

"""The system's catalogue: its functions and pages and where Firestore keeps the counts.

Read from functions/catalogue.json, the one file the functions, Terraform (infra/main.tf) and
this kit all read, so that adding a page or a function is one edit.
"""
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from visitkit.paths import CATALOGUE_FILE, FUNCTIONS_DIR, flat_module

if TYPE_CHECKING:
    from google.cloud.firestore import Client as FirestoreClient
    from google.cloud.firestore import CollectionReference

_DATA: dict[str, Any] = json.loads(CATALOGUE_FILE.read_text())


@dataclass(frozen=True)
class Function:
    name: str  # the logical name, the key in settings files
    entry_point: str  # defined in functions/<entry_point>.py, which functions/main.py imports lazily
    service: str  # the deployed Cloud Run service, also its URL path under the base URL
    public: bool  # reached by browsers; otherwise only by the Pub/Sub push subscription
    role: str  # one of ROLE_NAMES

    @property
    def path(self) -> str:
        return f"/{self.service}"


# What only one function does: serve the page, read the counts through a cache, publish visits
# (its 202s are the accepted ones), store them (only Pub/Sub's push reaches it, so it is not public).
ROLE_NAMES = ("page", "reader", "publisher", "store")
# How long a request waits for a free instance before its 429. Cloud Run documents it for a service
# at its maximum instances ("About instance autoscaling": queued for up to 10 seconds, then 429); HAProxy
# keeps one queue per function, first in first out, and the documentation gives no order.
QUEUE_TIMEOUT_S = 10.0


def roles(functions: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """{role: function name} of a catalogue's functions (catalogue.json's "functions"), or
    ValueError unless each role is exactly one function and only the store is not public."""
    named = {role: [name for name, spec in functions.items() if spec["role"] == role] for role in ROLE_NAMES}
    problems = [f"{name}'s role {spec['role']!r} is not one of them" for name, spec in functions.items()
                if spec["role"] not in ROLE_NAMES]
    problems += [f"{len(names)} functions have role {role}" for role, names in named.items() if len(names) != 1]
    problems += [f"{names[0]} ({role}) is {'' if role == 'store' else 'not '}public" for role, names in named.items()
                 if len(names) == 1 and functions[names[0]]["public"] == (role == "store")]
    if problems:
        raise ValueError(f"{CATALOGUE_FILE}: each of the roles {', '.join(ROLE_NAMES)} needs exactly one function, "
                         f"and only the store's is not public: {'; '.join(problems)}")
    return {role: names[0] for role, names in named.items()}


def _functions_module(name: str) -> ModuleType:
    """A dependency-free module of functions/, loaded from the checkout as deployed."""
    return flat_module(FUNCTIONS_DIR / f"{name}.py", "visitkit_functions")


visits = _functions_module("visits")  # the visit id's form and its marker's name, as the functions know them
PAGES: tuple[str, ...] = tuple(_DATA["pages"])
CATALOGUE = {name: Function(name, **spec) for name, spec in _DATA["functions"].items()}
FUNCTIONS = tuple(CATALOGUE)
PUBLIC_PATHS = {f.path: f.name for f in CATALOGUE.values() if f.public}  # URL path -> function
ROLES = roles(_DATA["functions"])  # checked at import: every role's function, by role
PAGE_FUNCTION, READER_FUNCTION, PUBLISHER_FUNCTION, PUSH_FUNCTION = (ROLES[role] for role in ROLE_NAMES)
FIRESTORE: dict[str, str] = _DATA["firestore"]


def function_of_path(path: str) -> str | None:
    """The public function serving a URL path (query string allowed), or None."""
    return PUBLIC_PATHS.get(path.split("?")[0])


def function_of_service(service: str) -> str | None:
    return next((f.name for f in CATALOGUE.values() if f.service == service), None)


def shards(client: "FirestoreClient", page: str) -> "CollectionReference":
    """The page's shard documents, with a Firestore client (the emulator's or Google Cloud's)."""
    return client.collection(FIRESTORE["counters"]).document(page).collection(FIRESTORE["shards"])


def stored_totals(client: "FirestoreClient", timeout: float = 30) -> dict[str, int]:
    """{page: stored visits}, the sum of every shard of each page, in one aggregation query per page."""
    totals: dict[str, int] = {}
    for page in PAGES:
        result = shards(client, page).sum(FIRESTORE["count_field"], alias="total").get(timeout=timeout)
        totals[page] = int(result[0][0].value or 0) if result else 0
    return totals


def stored_visits(client: "FirestoreClient", visit_ids: Iterable[str], batch: int = 500,
                  timeout: float = 60) -> set[str]:
    """The visit ids whose marker exists (counted by store-inc-counter), read in batches of
    document reads (one billed read each on Google Cloud)."""
    markers = client.collection(FIRESTORE["markers"])
    stored: set[str] = set()
    visit_ids = list(visit_ids)
    for start in range(0, len(visit_ids), batch):
        by_marker = {visits.marker_id(visit_id): visit_id for visit_id in visit_ids[start:start + batch]}
        for snapshot in client.get_all([markers.document(marker) for marker in by_marker], field_paths=["visit_type"],
                                       timeout=timeout):
            if snapshot.exists:
                stored.add(by_marker[snapshot.id])
    return stored


def counted_in_batches(client: "FirestoreClient", visit_ids: Iterable[str], timeout: float = 300) -> dict[str, int]:
    """{visit id: the batch documents holding it} of the ids given that a pull store counted, from one
    pass over its batch documents (their `ids` alone)."""
    wanted, found = set(visit_ids), Counter[str]()
    for batch in client.collection(FIRESTORE["batches"]).select(["ids"]).stream(timeout=timeout):
        found.update(visit_id for visit_id in batch.get("ids") or () if visit_id in wanted)
    return dict(found)

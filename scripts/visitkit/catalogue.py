"""The system's catalogue: its functions and pages and where Firestore keeps the counts.

Read from functions/catalogue.json, the one file the functions, Terraform (infra/main.tf) and
this kit all read, so that adding a page or a function is one edit.
"""
import json
from dataclasses import dataclass

from visitkit.paths import CATALOGUE_FILE

_DATA = json.loads(CATALOGUE_FILE.read_text())


@dataclass(frozen=True)
class Function:
    name: str  # the logical name, the key in settings files
    entry_point: str  # in functions/main.py
    service: str  # the deployed Cloud Run service, also its URL path under the base URL
    public: bool  # reached by browsers; otherwise only by the Pub/Sub push subscription

    @property
    def path(self):
        return f"/{self.service}"


PAGES = tuple(_DATA["pages"])
CATALOGUE = {name: Function(name, **spec) for name, spec in _DATA["functions"].items()}
FUNCTIONS = tuple(CATALOGUE)
PUBLIC_PATHS = {f.path: f.name for f in CATALOGUE.values() if f.public}  # URL path -> function
PUSH_FUNCTION = next(f.name for f in CATALOGUE.values() if not f.public)
FIRESTORE = _DATA["firestore"]


def function_of_path(path):
    """The public function serving a URL path (query string allowed), or None."""
    return PUBLIC_PATHS.get(path.split("?")[0])


def function_of_service(service):
    return next((f.name for f in CATALOGUE.values() if f.service == service), None)


def shards(client, page):
    """The page's shard documents, with a Firestore client (the emulator's or Google Cloud's)."""
    return client.collection(FIRESTORE["counters"]).document(page).collection(FIRESTORE["shards"])


def stored_totals(client, timeout=30):
    """{page: stored visits}, the sum of every shard of each page, in one aggregation query per page."""
    totals = {}
    for page in PAGES:
        result = shards(client, page).sum(FIRESTORE["count_field"], alias="total").get(timeout=timeout)
        totals[page] = int(result[0][0].value or 0) if result else 0
    return totals

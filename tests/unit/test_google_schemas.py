"""Every fake Google answer the tests use, checked against the schema of the method it stands for in
Google's discovery documents (google-api-python-client's copies, version pinned in
requirements-dev.txt; the validator: tests/google_schemas.py): the saved answers under
scripts/visitkit/rehearsal/recorded/ and tests/fixtures/monitoring/, and what the fake server of
tests/integration/fake_google.py answers inline, served over its HTTP in each of its scenarios.
An error answer is checked against Google's JSON error format (google.rpc.Status). Cloud Quotas'
answers, whose discovery document that package does not ship, are parsed strictly as the client
library's own message (google-cloud-quotas, pinned in requirements-cloud.txt): a field it does not
define, or a value of the wrong type, fails."""
import importlib
import json
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path += [str(TESTS), str(TESTS / "integration")]  # the validator and the fake, when run alone
import google_schemas  # noqa: E402
from fake_google import GOOGLE_ROUTES, PROTO_ROUTES, FakeGoogle, Scenario, google_route, proto_route  # noqa: E402

# Where each folder of saved answers lives: Google's recorded answers are the rehearsal's own (the kit's).
FOLDERS = {"google": TESTS.parent / "scripts" / "visitkit" / "rehearsal" / "recorded",
           "monitoring": TESTS / "fixtures" / "monitoring"}


def saved_path(name):
    """A saved answer's file from its name, "FOLDER/FILE.json"."""
    folder, file = name.split("/", 1)
    return FOLDERS[folder] / file
RESPONSE, ERROR = "response", "error"
ORGPOLICY = ("orgpolicy.v2", "orgpolicy.projects.policies.getEffectivePolicy")
TIME_SERIES = ("monitoring.v3", "monitoring.projects.timeSeries.list")
PROJECTS_GET = ("cloudresourcemanager.v3", "cloudresourcemanager.projects.get")
BATCH_GET = ("serviceusage.v1", "serviceusage.services.batchGet")
BATCH_ENABLE = ("serviceusage.v1", "serviceusage.services.batchEnable")
REGIONS_GET = ("compute.v1", "compute.regions.get")
COMPUTE_PROJECT_GET = ("compute.v1", "compute.projects.get")
QUOTA_INFO = ("google.cloud.cloudquotas_v1", "QuotaInfo")  # no discovery document: the library's message

# Each saved answer (path under tests/fixtures/) -> what it is: a method's response, or an error
# answer of the method (its API's document gives google.rpc.Status). A new fixture file must be named here.
SAVED = {
    "google/policy-none.json": (RESPONSE, *ORGPOLICY),
    "google/policy-domains-restricted.json": (RESPONSE, *ORGPOLICY),
    "google/policy-allow-all.json": (RESPONSE, *ORGPOLICY),
    "google/policy-managed-enforced.json": (RESPONSE, *ORGPOLICY),
    "google/policy-managed-allows-all-users.json": (RESPONSE, *ORGPOLICY),
    "google/error-crm-disabled.json": (ERROR, *PROJECTS_GET),
    "google/error-project-missing.json": (ERROR, *PROJECTS_GET),
    "google/error-project-denied.json": (ERROR, *BATCH_GET),
    "google/error-enable-denied.json": (ERROR, *BATCH_ENABLE),
    "google/error-policy-denied.json": (ERROR, *ORGPOLICY),
    "google/error-unknown-constraint.json": (ERROR, *ORGPOLICY),
    "google/region-southamerica-east1.json": (RESPONSE, *REGIONS_GET),
    "google/error-compute-disabled.json": (ERROR, *REGIONS_GET),
    "google/quota-compute-cpus.json": (RESPONSE, *QUOTA_INFO),
    "google/compute-project.json": (RESPONSE, *COMPUTE_PROJECT_GET),
    "google/quota-compute-cpus-all-regions.json": (RESPONSE, *QUOTA_INFO),
    "google/quota-run-cpu.json": (RESPONSE, *QUOTA_INFO),
    "google/quota-run-memory.json": (RESPONSE, *QUOTA_INFO),
    "google/error-quotas-denied.json": (ERROR, *QUOTA_INFO),
    **{f"monitoring/{name}.json": (RESPONSE, *TIME_SERIES) for name in (
        "billable_instance_time", "cpu_utilizations", "dead_lettered", "firestore_deletes", "firestore_reads",
        "firestore_writes", "instance_count", "memory_utilizations", "oldest_unacked_age", "request_count",
        "request_latencies", "requests_429_logged", "store_deliveries", "undelivered_messages")},
}
SAVED_FOLDERS = ("google", "monitoring")


def saved_files():
    return sorted(f"{folder}/{path.name}" for folder in SAVED_FOLDERS for path in FOLDERS[folder].glob("*.json"))


def proto_problems(kind, module, message, answer, http_status=None):
    """An API without a discovery document: its answer parsed strictly as the client library's message."""
    if kind == ERROR:
        return google_schemas.error_problems(answer, google_schemas.STATUS_DOCUMENT, http_status)
    try:
        getattr(importlib.import_module(module), message).from_json(json.dumps(answer), ignore_unknown_fields=False)
    except Exception as error:  # protobuf's ParseError: an unknown field, a wrong type
        return [f"$: not a {module}.{message}: {error}"]
    return []


def problems(kind, doc, method_id, answer, http_status=None):
    if doc.startswith("google.cloud."):
        return proto_problems(kind, doc, method_id, answer, http_status)
    if kind == RESPONSE:
        return google_schemas.response_problems(answer, doc, method_id)
    google_schemas.method(doc, method_id)  # the method exists in the document
    return google_schemas.error_problems(answer, doc, http_status)


@pytest.mark.parametrize("name", saved_files())
def test_a_saved_answer_fits_its_methods_schema(name):
    assert name in SAVED, f"tests/fixtures/{name} stands for no Google method: map it in SAVED ({__file__})"
    kind, doc, method_id = SAVED[name]
    answer = json.loads(saved_path(name).read_text())
    assert problems(kind, doc, method_id, answer) == [], (
        f"{name} against {method_id} of {google_schemas.label(doc)}")


def test_every_mapped_fixture_exists():
    assert sorted(SAVED) == saved_files()


# --- the fake server's own answers -------------------------------------------------------------

PROJECT = "visitkit-fake"
CONSTRAINTS = ("iam.allowedPolicyMemberDomains", "iam.managed.allowedPolicyMembers")
SERVICES = ("cloudresourcemanager.googleapis.com", "cloudbilling.googleapis.com", "orgpolicy.googleapis.com",
            "iamcredentials.googleapis.com", "pubsub.googleapis.com")
# the requests the kit's preflight makes (Google's REST clients), each once per scenario
REQUESTS = [
    ("GET", f"/v1/projects/{PROJECT}/services:batchGet?parent=projects%2F{PROJECT}&"
            + "&".join(f"names=projects%2F{PROJECT}%2Fservices%2F{service}" for service in SERVICES), None),
    ("POST", f"/v1/projects/{PROJECT}/services:batchEnable", {"serviceIds": ["pubsub.googleapis.com"]}),
    ("GET", f"/v3/projects/{PROJECT}", None),
    ("GET", f"/v1/projects/{PROJECT}/billingInfo", None),
    *[("GET", f"/v2/projects/{PROJECT}/policies/{constraint}:getEffectivePolicy", None) for constraint in CONSTRAINTS],
    ("POST", f"/v1beta1/projects/{PROJECT}/services/pubsub.googleapis.com:generateServiceIdentity", {}),
    ("GET", f"/compute/v1/projects/{PROJECT}/regions/southamerica-east1", None),
    ("GET", f"/compute/v1/projects/{PROJECT}", None),
    *[("GET", f"/v1/projects/{PROJECT}/locations/global/services/{service}/quotaInfos/{quota}", None)
      for service, quota in (("compute.googleapis.com", "CPUS-per-project-region"),
                             ("compute.googleapis.com", "CPUS-ALL-REGIONS-per-project"),
                             ("run.googleapis.com", "CpuAllocPerProjectRegion"),
                             ("run.googleapis.com", "MemAllocPerProjectRegion"))],
    ("GET", f"/v1/projects/{PROJECT}/services:batchEnable", None),  # a verb the path does not take: 404
    # the push account's token, as Pub/Sub mints it in a rehearsal (the push relay asks for it)
    ("POST", f"/v1/projects/-/serviceAccounts/visitkit-push@{PROJECT}.iam.gserviceaccount.com:generateIdToken",
     {"audience": "https://store-inc-counter-123456789012.southamerica-east1.run.app", "includeEmail": True}),
]
POLICIES = ["policy-none", "policy-domains-restricted", "policy-allow-all", "policy-managed-enforced",
            "policy-managed-allows-all-users"]
SCENARIOS = {
    "ready": {},
    "apis-off": {"enabled": ()},
    "no-billing-being-deleted": {"billing": False, "state": "DELETE_REQUESTED"},
    "may-not-enable": {"may_enable": False},
    "compute-off-quotas-denied": {"enabled": ("cloudquotas.googleapis.com",),
                                  "errors": {"cloudquotas": "error-quotas-denied"}},
    "denied-everywhere": {"errors": {"serviceusage": "error-project-denied",
                                     "cloudresourcemanager": "error-project-missing",
                                     "orgpolicy": "error-policy-denied"}},
    **{f"{policy}-and-unknown-constraint": {"policies": {CONSTRAINTS[0]: policy}} for policy in POLICIES},
    **{f"managed-{policy}": {"policies": {CONSTRAINTS[0]: "policy-none", CONSTRAINTS[1]: policy}}
       for policy in POLICIES},
}


def serve(fake, scenario):
    """What the fake answers the kit's requests in a scenario: [(method, path, HTTP status, JSON)]."""
    fake.scenario, fake.answers = Scenario(**scenario), []
    for method, path, body in REQUESTS:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(fake.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                json.load(reply)
        except urllib.error.HTTPError as error:
            json.load(error)
    return list(fake.answers)


@pytest.fixture(scope="module")
def served():
    with FakeGoogle(Scenario()) as fake:
        return {name: serve(fake, scenario) for name, scenario in SCENARIOS.items()}


def answer_problems(method, path, status, answer):
    found = google_route(method, path.split("?", 1)[0]) or proto_route(method, path.split("?", 1)[0])
    if found is None:  # the fake's own "no such method": still Google's error format
        return google_schemas.error_problems(answer, google_schemas.STATUS_DOCUMENT, status)
    (_verb, _pattern, doc, method_id, _handler), _match = found
    return problems(RESPONSE if 200 <= status < 300 else ERROR, doc, method_id, answer, status)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_fake_servers_answers_fit_their_methods_schemas(served, scenario):
    answers = served[scenario]
    assert len(answers) == len(REQUESTS)
    found = {f"{method} {path} -> {status}": answer_problems(method, path, status, answer)
             for method, path, status, answer in answers}
    assert {request: p for request, p in found.items() if p} == {}


def test_every_method_the_fake_serves_answers_and_every_saved_error_is_served(served):
    answers = [answer for scenario in served.values() for answer in scenario]
    answered = {found[0][3] for method, path, status, _ in answers
                if 200 <= status < 300 and (found := google_route(method, path.split("?", 1)[0]))}
    assert answered == {route[3] for route in GOOGLE_ROUTES}
    errors = [answer for _, _, status, answer in answers if status >= 400]
    saved = [json.loads(saved_path(name).read_text()) for name, (kind, *_) in SAVED.items() if kind == ERROR]
    assert [answer for answer in saved if answer not in errors] == []


@pytest.mark.parametrize("route", GOOGLE_ROUTES, ids=[route[3] for route in GOOGLE_ROUTES])
def test_each_route_of_the_fake_is_its_methods_verb_and_path(route):
    verb, pattern, doc, method_id, _handler = route
    described = google_schemas.method(doc, method_id)
    flat_path = google_schemas.document(doc).get("servicePath", "") + described["flatPath"]  # compute/v1/...
    template = re.sub(r"\{[^}]+\}", "[^/]+", re.escape(flat_path).replace(r"\{", "{").replace(r"\}", "}"))
    requested = [path.split("?", 1)[0] for method, path, _ in REQUESTS if method == verb and re.fullmatch(
        pattern, path.split("?", 1)[0])]
    assert described["httpMethod"] == verb and requested
    assert all(re.fullmatch("/" + template, path) for path in requested), (described["flatPath"], requested)


@pytest.mark.parametrize("route", PROTO_ROUTES, ids=[route[3] for route in PROTO_ROUTES])
def test_each_proto_route_of_the_fake_is_the_verb_and_path_its_client_library_calls(route):
    """Without a discovery document, the client library's REST transport says where the method is."""
    from google.cloud.cloudquotas_v1.services.cloud_quotas.transports import rest_base

    verb, pattern, _module, message, _handler = route
    transport = rest_base._BaseCloudQuotasRestTransport
    options = {"QuotaInfo": transport._BaseGetQuotaInfo}[message]._get_http_options()[0]
    template = re.sub(r"\{name=([^}]+)\}", lambda m: m[1].replace("*", "[^/]+"), options["uri"])
    requested = [path for method, path, _ in REQUESTS if method == verb and re.fullmatch(pattern, path)]
    assert options["method"].upper() == verb and requested
    assert all(re.fullmatch(template, path) for path in requested), (options["uri"], requested)


def test_a_quota_info_google_does_not_send_is_refused():
    """The library's strict parse is a real check: a field QuotaInfo lacks, a value of the wrong type."""
    answer = json.loads(saved_path("google/quota-run-cpu.json").read_text())
    assert problems(RESPONSE, *QUOTA_INFO, {**answer, "quotaValue": 20}) != []
    assert problems(RESPONSE, *QUOTA_INFO, {**answer, "dimensionsInfos": [{"dimensions": ["region"]}]}) != []
    assert problems(RESPONSE, *QUOTA_INFO, answer) == []


def test_the_validator_refuses_what_google_does_not_send():
    """The checks are real: a field the schema lacks, a number for an int64, a wrong enum, an Any of
    an unknown type, an error without its status."""
    series = json.loads(saved_path("monitoring/request_count.json").read_text())
    series["timeSeries"][0]["points"][0]["value"]["int64Value"] = 5
    series["timeSeries"][0]["metricKind"] = "DELTAS"
    series["timeSeries"][0]["resource"]["zone"] = "us-central1-a"
    found = google_schemas.response_problems(series, *TIME_SERIES)
    assert len(found) == 3 and any("int64 is a JSON string" in problem for problem in found), found
    operation = {"name": "operations/x", "done": True, "response": {"@type": "type.googleapis.com/x.Y"}}
    assert "no schema for @type" in google_schemas.response_problems(operation, *BATCH_ENABLE)[0]
    assert google_schemas.error_problems({"error": {"code": 403, "message": "m"}}, "serviceusage.v1") == [
        "$.error: no status"]
    assert "not the HTTP status" in google_schemas.error_problems(
        {"error": {"code": 400, "message": "m", "status": "PERMISSION_DENIED"}}, "serviceusage.v1")[0]

"""A local fake of the Google APIs the kit calls before and around a deployment, answering the JSON
recorded in scripts/visitkit/rehearsal/recorded/ (shapes and texts from Google's API references and error pages):
Service Usage, Cloud Resource Manager, Cloud Billing, Organization Policy, Compute Engine's
regions.get (GOOGLE_ROUTES: each with the discovery method it stands for, whose response schema its
answers are checked against by tests/unit/test_google_schemas.py), Cloud Quotas' getQuotaInfo
(PROTO_ROUTES: no discovery document of it is shipped, so its answers are checked against the
client library's own message instead), and the OAuth token endpoint of a service account key and of a
user login. Google's own client libraries talk to it over HTTP (REST transport); it records every request
and every answer.

Behind Cloud Run's invoker check (invoker_check.py), OurFunctions answers the kit's own requests as
serve-page, get-counter and inc-counter answer them; tests/integration/test_contract.py replays those
requests against the real functions on the twin and holds its answers to theirs.
"""
import base64
import collections
import json
import re
import threading
import urllib.parse
import uuid
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from visitkit.catalogue import PAGES

FIXTURES = Path(__file__).resolve().parents[2] / "scripts" / "visitkit" / "rehearsal" / "recorded"
NUMBER = "123456789012"
REGION = "southamerica-east1"


def run_app_url(path):
    """The run.app URL of a function's Cloud Run service, in Cloud Run's deterministic form
    https://SERVICE-PROJECT_NUMBER.REGION.run.app: the audience its ID tokens must name."""
    return f"https://{path.strip('/')}-{NUMBER}.{REGION}.run.app"


def fixture(name):
    return json.loads((FIXTURES / f"{name}.json").read_text())


def unverified_claims(jwt_text):
    payload = jwt_text.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def unsigned_jwt(claims):
    def part(value):
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.{part('not-signed')}"


class Scenario:
    """What the fake answers: APIs on, the project's state, billing, each constraint's effective
    policy (a fixture name, or None for an unknown constraint), errors by API, each quota's
    QuotaInfo and each Compute Engine region (fixture names; Compute answers only where it is on)."""

    def __init__(self, project="visitkit-fake", enabled=("cloudresourcemanager.googleapis.com",
                                                         "cloudbilling.googleapis.com", "orgpolicy.googleapis.com",
                                                         "iamcredentials.googleapis.com", "cloudquotas.googleapis.com",
                                                         "compute.googleapis.com"),
                 state="ACTIVE", billing=True, policies=None, errors=None, may_enable=True, functions=None,
                 quota_infos=None, regions=None, cors_allowed_origins=()):
        self.project, self.enabled, self.state, self.billing = project, set(enabled), state, billing
        self.policies = policies or {"iam.allowedPolicyMemberDomains": "policy-none",
                                     "iam.managed.allowedPolicyMembers": "policy-none"}
        self.errors = errors or {}  # api name -> fixture name of an error answer
        self.errors_left = {}  # api name -> how many times the error is given (default: always)
        self.may_enable = may_enable
        self.quota_infos = quota_infos or {"CPUS-per-project-region": "quota-compute-cpus",
                                           "CPUS-ALL-REGIONS-per-project": "quota-compute-cpus-all-regions",
                                           "CpuAllocPerProjectRegion": "quota-run-cpu",
                                           "MemAllocPerProjectRegion": "quota-run-memory"}
        self.regions = regions or {"southamerica-east1": "region-southamerica-east1"}
        self.functions = functions or {}  # path -> principal allowed to invoke (authenticated functions)
        self.audiences = {path: run_app_url(path) for path in self.functions}  # path -> what Cloud Run accepts
        self.cors_allowed_origins = frozenset(cors_allowed_origins)  # the functions' CORS_ALLOWED_ORIGINS
        # what `gcloud auth application-default login` grants a user, and whose login it is
        self.user_scopes = ["openid", "https://www.googleapis.com/auth/userinfo.email",
                            "https://www.googleapis.com/auth/cloud-platform"]
        self.user_email = "tester@example.com"


class FakeGoogle(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, scenario):
        super().__init__(("127.0.0.1", 0), Handler)
        self.scenario = scenario
        self.requests = []  # (method, path, headers)
        self.answers = []  # (method, path, HTTP status, JSON answer), in the order given
        self.lock = threading.Lock()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()

    def paths(self, method=None):
        return [path for m, path, _ in self.requests if method is None or m == method]

    @property
    def mutations(self):
        """The calls that change the project: turning APIs on, creating a service agent."""
        return [path.split("?", 1)[0] for method, path, _ in self.requests if method == "POST" and re.search(
            r":(batchEnable|generateServiceIdentity)$", path.split("?", 1)[0])]


class Handler(BaseHTTPRequestHandler):
    server: FakeGoogle

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.answer("GET")

    def do_POST(self):
        self.answer("POST")

    def do_PUT(self):  # the kit's readiness probe
        self.answer("PUT")

    def do_OPTIONS(self):  # a CORS preflight
        self.answer("OPTIONS")

    def answer(self, method):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        with self.server.lock:
            self.server.requests.append((method, self.path, dict(self.headers)))
        status, payload, *more = self.route(method, path, body)  # (status, JSON) or (status, JSON, headers, body)
        with self.server.lock:
            self.server.answers.append((method, self.path, status, payload))
        headers, data = more if more else ({"Content-Type": "application/json"}, json.dumps(payload).encode())
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if status != 204:  # no body, and no length, as werkzeug sends a 204
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if status != 204:
            self.wfile.write(data)

    def error(self, api):
        scenario = self.server.scenario
        name = scenario.errors.get(api)
        if name is None or scenario.errors_left.get(api, 1) <= 0:
            return None
        if api in scenario.errors_left:
            scenario.errors_left[api] -= 1
        answer = fixture(name)
        return answer["error"]["code"], answer

    def route(self, method, path, body):
        s = self.server.scenario
        if path == "/token":
            form = dict(part.split("=", 1) for part in body.decode().split("&"))
            now = int(time.time())
            if form.get("grant_type") == "refresh_token":  # a user login: an ID token only with the openid scope,
                granted = s.user_scopes if "scope" not in form else urllib.parse.unquote_plus(form["scope"]).split()
                id_token = ({"id_token": unsigned_jwt({"aud": form["client_id"], "email": s.user_email, "exp": now + 3600})}
                            if "openid" in granted else {})
                return 200, {"access_token": "user-access-token", "expires_in": 3600, "scope": " ".join(granted),
                             **id_token}
            # a service account key's token_uri: an ID token for the asked audience
            claims = unverified_claims(form["assertion"])
            return 200, {"id_token": unsigned_jwt({"aud": claims["target_audience"], "email": claims["iss"],
                                                   "iat": now, "exp": now + 3600})}
        if found := google_route(method, path) or proto_route(method, path):
            route, m = found
            return getattr(self, route[-1])(m, body)
        return 404, {"error": {"code": 404, "message": f"the fake has no {method} {path}", "status": "NOT_FOUND"}}

    # --- the Google API methods of GOOGLE_ROUTES: (HTTP status, JSON answer) -----------------------

    def batch_get(self, m, body):
        s = self.server.scenario
        if err := self.error("serviceusage"):
            return err
        services = []
        for name in re.findall(r"names=([^&]+)", self.path):
            service = urllib.parse.unquote(name).rsplit("/", 1)[-1]
            services.append({"name": f"projects/{NUMBER}/services/{service}", "parent": f"projects/{NUMBER}",
                             "config": {"name": service},
                             "state": "ENABLED" if service in s.enabled else "DISABLED"})
        return 200, {"services": services}

    def batch_enable(self, m, body):
        s = self.server.scenario
        if not s.may_enable:
            return fixture("error-enable-denied")["error"]["code"], fixture("error-enable-denied")
        service_ids = json.loads(body)["serviceIds"]
        s.enabled |= set(service_ids)
        return 200, {"name": "operations/acf.p2-enable", "done": True, "response": {
            "@type": "type.googleapis.com/google.api.serviceusage.v1.BatchEnableServicesResponse",
            "services": [{"name": f"projects/{NUMBER}/services/{service}", "parent": f"projects/{NUMBER}",
                          "config": {"name": service}, "state": "ENABLED"} for service in service_ids]}}

    def get_project(self, m, body):
        s = self.server.scenario
        if err := self.error("cloudresourcemanager"):
            return err
        if "cloudresourcemanager.googleapis.com" not in s.enabled:
            return 403, fixture("error-crm-disabled")
        return 200, {"name": f"projects/{NUMBER}", "projectId": s.project, "state": s.state,
                     "displayName": s.project, "parent": "organizations/987654321"}

    def get_billing_info(self, m, body):
        s = self.server.scenario
        if err := self.error("cloudbilling"):
            return err
        return 200, {"name": f"projects/{s.project}/billingInfo", "projectId": s.project,
                     "billingAccountName": "billingAccounts/000000-AAAAAA-BBBBBB" if s.billing else "",
                     "billingEnabled": s.billing}

    def get_effective_policy(self, m, body):
        s = self.server.scenario
        if err := self.error("orgpolicy"):
            return err
        name = s.policies.get(m[2])
        if name is None:
            return 400, fixture("error-unknown-constraint")
        policy = fixture(name)
        policy["name"] = f"projects/{NUMBER}/policies/{m[2]}"
        return 200, policy

    def get_region(self, m, body):
        s = self.server.scenario
        if err := self.error("compute"):
            return err
        if "compute.googleapis.com" not in s.enabled:
            return 403, fixture("error-compute-disabled")
        if m[2] not in s.regions:
            return 404, {"error": {"code": 404, "message": f"The resource 'projects/{m[1]}/regions/{m[2]}' was not "
                                   "found", "status": "NOT_FOUND"}}
        return 200, fixture(s.regions[m[2]])

    def get_compute_project(self, m, body):
        s = self.server.scenario
        if err := self.error("compute"):
            return err
        if "compute.googleapis.com" not in s.enabled:
            return 403, fixture("error-compute-disabled")
        return 200, fixture("compute-project")

    def get_quota_info(self, m, body):
        s = self.server.scenario
        if err := self.error("cloudquotas"):
            return err
        if m[3] not in s.quota_infos:
            return 404, {"error": {"code": 404, "message": f"QuotaInfo {m[3]} of {m[2]} not found",
                                   "status": "NOT_FOUND"}}
        return 200, fixture(s.quota_infos[m[3]])

    def generate_service_identity(self, m, body):
        return 200, {"name": "operations/finished.DONE_OPERATION", "done": True, "response": {
            "@type": "type.googleapis.com/google.api.serviceusage.v1beta1.ServiceIdentity",
            "email": f"service-{NUMBER}@gcp-sa-{m[2].split('.')[0]}.iam.gserviceaccount.com", "uniqueId": "1234567890"}}


def google_route(method, path, routes=None):
    """The GOOGLE_ROUTES entry serving `method` `path` (no query), with its path's match; None if none."""
    for route in GOOGLE_ROUTES if routes is None else routes:
        if (m := re.fullmatch(route[1], path)) and route[0] == method:
            return route, m
    return None


# The Google API methods the fake serves: HTTP method, path, the method's discovery document and id (its
# answers are checked against that method's response schema: tests/unit/test_google_schemas.py), and
# the Handler method that answers it.
GOOGLE_ROUTES = [
    ("GET", r"/v1/projects/([^/]+)/services:batchGet", "serviceusage.v1", "serviceusage.services.batchGet",
     "batch_get"),
    ("POST", r"/v1/projects/([^/]+)/services:batchEnable", "serviceusage.v1", "serviceusage.services.batchEnable",
     "batch_enable"),
    ("GET", r"/v3/projects/([^/]+)", "cloudresourcemanager.v3", "cloudresourcemanager.projects.get", "get_project"),
    ("GET", r"/v1/projects/([^/]+)/billingInfo", "cloudbilling.v1", "cloudbilling.projects.getBillingInfo",
     "get_billing_info"),
    ("GET", r"/v2/projects/([^/]+)/policies/([^/:]+):getEffectivePolicy", "orgpolicy.v2",
     "orgpolicy.projects.policies.getEffectivePolicy", "get_effective_policy"),
    ("POST", r"/v1beta1/projects/([^/]+)/services/(pubsub\.googleapis\.com):generateServiceIdentity",
     "serviceusage.v1beta1", "serviceusage.services.generateServiceIdentity", "generate_service_identity"),
    ("GET", r"/compute/v1/projects/([^/]+)/regions/([^/]+)", "compute.v1", "compute.regions.get", "get_region"),
    ("GET", r"/compute/v1/projects/([^/]+)", "compute.v1", "compute.projects.get", "get_compute_project"),
]

# Methods of APIs whose discovery document google-api-python-client does not ship (Cloud Quotas): HTTP
# method, path, the client library module and the message its answers are parsed as, strictly
# (tests/unit/test_google_schemas.py), and the Handler method that answers it.
PROTO_ROUTES = [
    ("GET", r"/v1/projects/([^/]+)/locations/global/services/([^/]+)/quotaInfos/([^/]+)",
     "google.cloud.cloudquotas_v1", "QuotaInfo", "get_quota_info"),
]


def proto_route(method, path):
    """The PROTO_ROUTES entry serving `method` `path`, with its path's match; None if none."""
    return google_route(method, path, PROTO_ROUTES)


# --- our functions, as the kit meets them ------------------------------------------------------------

# As functions/common.py's check_request and json_reply make them.
JSON_SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff",
                         "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'"}
METHODS = {"/app": ("GET", "HEAD"), "/get-counter": ("GET", "HEAD"), "/inc-counter": ("POST",)}
PAGE_PARAMETER = {"/app": "view", "/get-counter": "visit_type", "/inc-counter": "visit_type"}


class OurFunctions:
    """serve-page, get-counter and inc-counter, as far as the kit's own requests go: the readiness probe
    (a method they do not serve), a CORS preflight with and without an allowed origin, the first visit
    and the warm-up's visit (the page, the visit, its count). A visit id counts once. test_contract.py
    holds these answers to the real functions'; any other request is answered 501, so that a test
    sending it fails instead of trusting an answer nobody checked."""

    def __init__(self, cors_allowed_origins=()):
        self.cors_allowed_origins = frozenset(cors_allowed_origins)
        self.visits = {}  # visit id -> page
        self.lock = threading.Lock()

    def totals(self):
        with self.lock:
            return collections.Counter(self.visits.values())

    def answer(self, method, url, headers=None):
        """(status, headers, body bytes) of one request; `url`: its path and query."""
        path, _, query = url.partition("?")
        origin = (headers or {}).get("Origin")
        cors = {"Access-Control-Allow-Origin": origin, "Vary": "Origin"} if origin in self.cors_allowed_origins else {}

        def json_reply(status, payload, more=None):
            return status, {"Content-Type": "application/json", "Cache-Control": "no-store", **JSON_SECURITY_HEADERS,
                            **cors, **(more or {})}, b"" if status == 204 else json.dumps(payload).encode()

        if path not in METHODS:
            return 404, {"Content-Type": "text/html"}, b"<html><body>404 Page not found</body></html>"
        methods = METHODS[path]
        if method == "OPTIONS":
            if origin not in self.cors_allowed_origins:
                return json_reply(403, {"error": "cross-site requests are not allowed (CORS_ALLOWED_ORIGINS)"})
            return json_reply(204, {}, {"Access-Control-Allow-Methods": ", ".join(methods),
                                        "Access-Control-Max-Age": "3600"})
        if method not in methods:
            return json_reply(405, {"error": f"method {method} not allowed; use {' or '.join(methods)}"},
                              {"Allow": ", ".join(methods)})
        arguments = urllib.parse.parse_qs(query)
        pages, visit_ids = arguments.get(PAGE_PARAMETER[path], []), arguments.get("visit_id", [])
        if method == "HEAD" or len(pages) != 1 or pages[0] not in PAGES or len(visit_ids) > 1:
            return 501, {"Content-Type": "text/plain"}, b"the stand-in does not answer this request"
        page = pages[0]
        if path == "/inc-counter":
            visit_id = visit_ids[0] if visit_ids else str(uuid.uuid4())
            with self.lock:
                self.visits.setdefault(visit_id, page)
                message_id = str(len(self.visits))
            return json_reply(202, {"visit_type": page, "visit_id": visit_id, "message_id": message_id})
        if path == "/get-counter":
            return json_reply(200, {"visit_type": page, "count": self.totals()[page]})
        return 200, {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-cache"}, (
            f"<!doctype html><title>{page}</title><h1>{page}</h1>".encode())

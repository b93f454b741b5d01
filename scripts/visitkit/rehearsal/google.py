"""Google's control plane, stood in for on this machine: the APIs the kit calls before and around a
deployment, answering what recorded/ holds (shapes and texts from Google's API references and
error pages, each checked against its method's schema by tests/unit/test_google_schemas.py).

- Service Usage, Cloud Resource Manager, Cloud Billing, Organization Policy, Compute Engine's
  regions.get and projects.get (GOOGLE_ROUTES, each with the discovery method it stands for), and
  Cloud Quotas' getQuotaInfo (PROTO_ROUTES, checked against the client library's message);
- OAuth 2.0's token endpoint of a service account key: the key's JWT assertion is taken only when its
  signature verifies against a key this stand-in issued (service_account_key), as Google's does;
  it answers an access token, or, for a `target_audience`, an ID token it signs with a key of its
  own standing for Google's (public_key_file: what the twin's Cloud Run front verifies tokens with);
- IAM Credentials' generateIdToken: an ID token of a service account for an audience (how Pub/Sub
  signs its pushes as the push account, and how the kit impersonates one).
Google's client libraries talk to it over HTTP (REST transport); it records every request and answer.
"""
from __future__ import annotations

import base64
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).resolve().parent / "recorded"
NUMBER = "123456789012"  # the project's number in every answer
ISSUER = "https://accounts.google.com"
# The audience of a service account's assertion, whatever the key's token URI: Google's token endpoint.
ASSERTION_AUDIENCE = "https://oauth2.googleapis.com/token"
GOOGLE_KEY_ID = "rehearsal-google-1"
ID_TOKEN_LIFETIME_S = 3600
Answer = tuple[Any, ...]  # (HTTP status, JSON answer), or (status, what to record, headers, body bytes)


def recorded(name: str) -> Any:
    return json.loads((RECORDED / f"{name}.json").read_text())


@dataclass
class Scenario:
    """What the stand-in answers: APIs on, the project's state, billing, each constraint's effective
    policy (a recorded answer's name; None: a constraint the API does not know), errors by API (a recorded
    answer's name, given errors_left[api] times, default always), each quota's QuotaInfo and each Compute
    Engine region (recorded names; Compute answers only where it is on)."""
    project: str = "visitkit-fake"
    enabled: set[str] = field(default_factory=lambda: {
        "cloudresourcemanager.googleapis.com", "cloudbilling.googleapis.com", "orgpolicy.googleapis.com",
        "iamcredentials.googleapis.com", "cloudquotas.googleapis.com", "compute.googleapis.com"})
    state: str = "ACTIVE"
    billing: bool = True
    policies: dict[str, str | None] = field(default_factory=lambda: {
        "iam.allowedPolicyMemberDomains": "policy-none", "iam.managed.allowedPolicyMembers": "policy-none"})
    errors: dict[str, str] = field(default_factory=dict)
    errors_left: dict[str, int] = field(default_factory=dict)
    may_enable: bool = True
    quota_infos: dict[str, str] = field(default_factory=lambda: {
        "CPUS-per-project-region": "quota-compute-cpus",
        "CPUS-ALL-REGIONS-per-project": "quota-compute-cpus-all-regions",
        "CpuAllocPerProjectRegion": "quota-run-cpu", "MemAllocPerProjectRegion": "quota-run-memory"})
    regions: dict[str, str] = field(default_factory=lambda: {"southamerica-east1": "region-southamerica-east1"})


class ControlPlane(ThreadingHTTPServer):
    """The stand-in, on a free loopback port: `with ControlPlane(scenario) as google: ... google.url`."""
    daemon_threads = True

    def __init__(self, scenario: Scenario):
        from cryptography.hazmat.primitives.asymmetric import rsa
        from google.auth import crypt

        super().__init__(("127.0.0.1", 0), Handler)
        self.scenario = scenario
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # (method, path, headers)
        self.answers: list[tuple[str, str, int, Any]] = []  # (method, path, HTTP status, JSON answer)
        self.lock = threading.Lock()
        self.google_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.signer = crypt.RSASigner.from_string(private_pem(self.google_key), key_id=GOOGLE_KEY_ID)
        self.account_certs: dict[str, str] = {}  # key id -> certificate of a service account key it issued
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> ControlPlane:
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.thread is not None:
            self.shutdown()
            self.thread = None
        self.server_close()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- keys and tokens ---
    def service_account_key(self, email: str, path: Path) -> Path:
        """A service account key file for `email`, whose token URI is this stand-in's: what
        `gcloud iam service-accounts keys create` writes, the key known here only."""
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        key_id = f"rehearsal-key-{len(self.account_certs) + 1}"
        self.account_certs[key_id] = certificate(key, key_id)
        path.write_text(json.dumps({
            "type": "service_account", "project_id": self.scenario.project, "private_key_id": key_id,
            "private_key": private_pem(key), "client_email": email, "client_id": "1",
            "token_uri": f"{self.url}/token"}))
        path.chmod(0o600)
        return path

    def public_key_file(self, folder: Path) -> Path:
        """The public key Google's ID tokens are signed with, PEM, for the twin's front to verify them."""
        from cryptography.hazmat.primitives import serialization

        path = folder / "google-id-token-key.pem"
        path.write_bytes(self.google_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        return path

    def id_token(self, email: str, audience: str) -> str:
        """An ID token of `email` for `audience`, signed as Google signs them."""
        from google.auth import jwt

        now = int(time.time())
        return jwt.encode(self.signer, {"iss": ISSUER, "aud": audience, "azp": email, "email": email,
                                        "email_verified": True, "sub": "1", "iat": now,
                                        "exp": now + ID_TOKEN_LIFETIME_S}).decode()


class Handler(BaseHTTPRequestHandler):
    server: ControlPlane

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.answer("GET")

    def do_POST(self) -> None:
        self.answer("POST")

    def answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        with self.server.lock:
            self.server.requests.append((method, self.path, dict(self.headers)))
        # (status, JSON) or, for an answer that is not JSON, (status, what to record, headers, body)
        status, payload, *raw = self.route(method, path, body)
        with self.server.lock:
            self.server.answers.append((method, self.path, status, payload))
        headers, data = raw if raw else ({"Content-Type": "application/json"}, json.dumps(payload).encode())
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if status != 204:  # a 204 has no body, and no length
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if status != 204:
            self.wfile.write(data)

    def error(self, api: str) -> Answer | None:
        scenario = self.server.scenario
        name = scenario.errors.get(api)
        if name is None or scenario.errors_left.get(api, 1) <= 0:
            return None
        if api in scenario.errors_left:
            scenario.errors_left[api] -= 1
        answer = recorded(name)
        return answer["error"]["code"], answer

    def route(self, method: str, path: str, body: bytes) -> Answer:
        if path == "/token":
            return self.token(body)
        if found := google_route(method, path) or google_route(method, path, PROTO_ROUTES):
            route, match = found
            handler: Callable[[re.Match[str], bytes], Answer] = getattr(self, route[-1])
            return handler(match, body)
        return 404, {"error": {"code": 404, "message": f"the stand-in has no {method} {path}", "status": "NOT_FOUND"}}

    # --- OAuth 2.0 and IAM Credentials ---
    def token(self, body: bytes) -> Answer:
        """A service account key's JWT-bearer grant: an ID token for a target_audience, else an access token."""
        from google.auth import exceptions, jwt

        form = dict(urllib.parse.parse_qsl(body.decode()))
        try:
            claims = jwt.decode(form.get("assertion", ""), certs=self.server.account_certs,
                                audience=ASSERTION_AUDIENCE)
        except (ValueError, exceptions.GoogleAuthError) as error:
            return 400, {"error": "invalid_grant", "error_description": f"Invalid JWT Signature. ({error})"}
        if "target_audience" in claims:
            return 200, {"id_token": self.server.id_token(claims["iss"], claims["target_audience"])}
        return 200, {"access_token": f"rehearsal-access-{claims['iss']}", "expires_in": 3600, "token_type": "Bearer"}

    def generate_id_token(self, match: re.Match[str], body: bytes) -> Answer:
        audience = json.loads(body or b"{}").get("audience")
        if not audience:
            return 400, {"error": {"code": 400, "message": "audience is required", "status": "INVALID_ARGUMENT"}}
        return 200, {"token": self.server.id_token(urllib.parse.unquote(match[1]), audience)}

    # --- the Google API methods of GOOGLE_ROUTES: (HTTP status, JSON answer) -----------------------
    def batch_get(self, match: re.Match[str], body: bytes) -> Answer:
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

    def batch_enable(self, match: re.Match[str], body: bytes) -> Answer:
        s = self.server.scenario
        if not s.may_enable:
            return recorded("error-enable-denied")["error"]["code"], recorded("error-enable-denied")
        service_ids = json.loads(body)["serviceIds"]
        s.enabled |= set(service_ids)
        return 200, {"name": "operations/acf.p2-enable", "done": True, "response": {
            "@type": "type.googleapis.com/google.api.serviceusage.v1.BatchEnableServicesResponse",
            "services": [{"name": f"projects/{NUMBER}/services/{service}", "parent": f"projects/{NUMBER}",
                          "config": {"name": service}, "state": "ENABLED"} for service in service_ids]}}

    def get_project(self, match: re.Match[str], body: bytes) -> Answer:
        s = self.server.scenario
        if err := self.error("cloudresourcemanager"):
            return err
        if "cloudresourcemanager.googleapis.com" not in s.enabled:
            return 403, recorded("error-crm-disabled")
        return 200, {"name": f"projects/{NUMBER}", "projectId": s.project, "state": s.state,
                     "displayName": s.project, "parent": "organizations/987654321"}

    def get_billing_info(self, match: re.Match[str], body: bytes) -> Answer:
        s = self.server.scenario
        if err := self.error("cloudbilling"):
            return err
        return 200, {"name": f"projects/{s.project}/billingInfo", "projectId": s.project,
                     "billingAccountName": "billingAccounts/000000-AAAAAA-BBBBBB" if s.billing else "",
                     "billingEnabled": s.billing}

    def get_effective_policy(self, match: re.Match[str], body: bytes) -> Answer:
        s = self.server.scenario
        if err := self.error("orgpolicy"):
            return err
        name = s.policies.get(match[2])
        if name is None:
            return 400, recorded("error-unknown-constraint")
        policy = recorded(name)
        policy["name"] = f"projects/{NUMBER}/policies/{match[2]}"
        return 200, policy

    def get_region(self, match: re.Match[str], body: bytes) -> Answer:
        s = self.server.scenario
        if err := self.error("compute"):
            return err
        if "compute.googleapis.com" not in s.enabled:
            return 403, recorded("error-compute-disabled")
        if match[2] not in s.regions:
            return 404, {"error": {"code": 404, "message": f"The resource 'projects/{match[1]}/regions/{match[2]}' "
                                   "was not found", "status": "NOT_FOUND"}}
        return 200, recorded(s.regions[match[2]])

    def get_compute_project(self, match: re.Match[str], body: bytes) -> Answer:
        s = self.server.scenario
        if err := self.error("compute"):
            return err
        if "compute.googleapis.com" not in s.enabled:
            return 403, recorded("error-compute-disabled")
        return 200, recorded("compute-project")

    def get_quota_info(self, match: re.Match[str], body: bytes) -> Answer:
        s = self.server.scenario
        if err := self.error("cloudquotas"):
            return err
        if match[3] not in s.quota_infos:
            return 404, {"error": {"code": 404, "message": f"QuotaInfo {match[3]} of {match[2]} not found",
                                   "status": "NOT_FOUND"}}
        return 200, recorded(s.quota_infos[match[3]])

    def generate_service_identity(self, match: re.Match[str], body: bytes) -> Answer:
        return 200, {"name": "operations/finished.DONE_OPERATION", "done": True, "response": {
            "@type": "type.googleapis.com/google.api.serviceusage.v1beta1.ServiceIdentity",
            "email": f"service-{NUMBER}@gcp-sa-{match[2].split('.')[0]}.iam.gserviceaccount.com",
            "uniqueId": "1234567890"}}


Route = tuple[str, ...]


def google_route(method: str, path: str, routes: list[Route] | None = None) -> tuple[Route, re.Match[str]] | None:
    """The route serving `method` `path` (no query), with its path's match; None if none."""
    for route in GOOGLE_ROUTES if routes is None else routes:
        if (match := re.fullmatch(route[1], path)) and route[0] == method:
            return route, match
    return None


# The Google API methods it serves: HTTP method, path, the method's discovery document and id (its
# answers are checked against that method's response schema: tests/unit/test_google_schemas.py), and
# the Handler method that answers it.
GOOGLE_ROUTES: list[Route] = [
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
    ("POST", r"/v1/projects/-/serviceAccounts/([^/:]+):generateIdToken", "iamcredentials.v1",
     "iamcredentials.projects.serviceAccounts.generateIdToken", "generate_id_token"),
]

# Methods of APIs whose discovery document google-api-python-client does not ship (Cloud Quotas): HTTP
# method, path, the client library module and the message its answers are parsed as, strictly
# (tests/unit/test_google_schemas.py), and the Handler method that answers it.
PROTO_ROUTES: list[Route] = [
    ("GET", r"/v1/projects/([^/]+)/locations/global/services/([^/]+)/quotaInfos/([^/]+)",
     "google.cloud.cloudquotas_v1", "QuotaInfo", "get_quota_info"),
]


def private_pem(key: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def certificate(key: Any, name: str) -> str:
    """A self-signed X.509 certificate of the key, PEM, as Google serves its keys' certificates."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def unverified_claims(jwt_text: str) -> Mapping[str, Any]:
    payload = jwt_text.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))

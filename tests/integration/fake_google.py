"""Google's control plane as the tests meet it: the rehearsal's own stand-in (visitkit.rehearsal.google:
the preflight's APIs answering Google's recorded answers, each checked against its method's schema by
tests/unit/test_google_schemas.py, and the OAuth token endpoint of a service account key), with what the
tests need beside it: a user login's token endpoint (its ID token unsigned: the kit only reads its
email), and the requests the kit sends to the functions (PUT, OPTIONS) routed.

Behind Cloud Run's invoker check (invoker_check.py), OurFunctions answers the kit's own requests as
serve-page, get-counter and inc-counter answer them; tests/integration/test_contract.py replays those
requests against the real functions on the twin and holds its answers to theirs.
"""
import base64
import collections
import json
import re
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field

from visitkit.catalogue import PAGES
from visitkit.rehearsal import google
from visitkit.rehearsal.google import GOOGLE_ROUTES, NUMBER, PROTO_ROUTES, google_route, unverified_claims  # noqa: F401

REGION = "southamerica-east1"
fixture = google.recorded


def run_app_url(path):
    """The run.app URL of a function's Cloud Run service, in Cloud Run's deterministic form
    https://SERVICE-PROJECT_NUMBER.REGION.run.app: the audience its ID tokens must name."""
    return f"https://{path.strip('/')}-{NUMBER}.{REGION}.run.app"


def unsigned_jwt(claims):
    def part(value):
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.{part('not-signed')}"


def proto_route(method, path):
    """The PROTO_ROUTES entry serving `method` `path`, with its path's match; None if none."""
    return google_route(method, path, PROTO_ROUTES)


@dataclass
class Scenario(google.Scenario):
    """The control plane's scenario, and: the functions behind Cloud Run's invoker check (path -> the
    principal allowed to invoke), their CORS_ALLOWED_ORIGINS, and whose user login it is."""
    functions: dict = field(default_factory=dict)
    cors_allowed_origins: frozenset = frozenset()
    # what `gcloud auth application-default login` grants a user, and whose login it is
    user_scopes: list = field(default_factory=lambda: ["openid", "https://www.googleapis.com/auth/userinfo.email",
                                                       "https://www.googleapis.com/auth/cloud-platform"])
    user_email: str = "tester@example.com"

    def __post_init__(self):
        self.enabled = set(self.enabled)
        self.cors_allowed_origins = frozenset(self.cors_allowed_origins)
        self.audiences = {path: run_app_url(path) for path in self.functions}  # path -> what Cloud Run accepts


class FakeGoogle(google.ControlPlane):
    def __init__(self, scenario):
        super().__init__(scenario)
        self.RequestHandlerClass = Handler

    def paths(self, method=None):
        return [path for m, path, _ in self.requests if method is None or m == method]

    @property
    def mutations(self):
        """The calls that change the project: turning APIs on, creating a service agent."""
        return [path.split("?", 1)[0] for method, path, _ in self.requests if method == "POST" and re.search(
            r":(batchEnable|generateServiceIdentity)$", path.split("?", 1)[0])]


class Handler(google.Handler):
    server: FakeGoogle

    def do_PUT(self):  # the kit's readiness probe
        self.answer("PUT")

    def do_OPTIONS(self):  # a CORS preflight
        self.answer("OPTIONS")

    def route(self, method, path, body):
        form = dict(urllib.parse.parse_qsl(body.decode())) if path == "/token" else {}
        if form.get("grant_type") == "refresh_token":  # a user login: an ID token only with the openid scope
            s, now = self.server.scenario, int(time.time())
            granted = s.user_scopes if "scope" not in form else form["scope"].split()
            id_token = ({"id_token": unsigned_jwt({"aud": form["client_id"], "email": s.user_email, "exp": now + 3600})}
                        if "openid" in granted else {})
            return 200, {"access_token": "user-access-token", "expires_in": 3600, "scope": " ".join(granted),
                         **id_token}
        return super().route(method, path, body)


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

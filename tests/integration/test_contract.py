"""The contract between our functions and what stands in for them in the cloud tests.

The cloud tests meet our functions through one stand-in, fake_google.OurFunctions: behind
invoker_check's token check over HTTP (test_id_tokens.py), and in-process in test_gcp.py's
StoringSite. Here the kit's own code (visitkit.cloud.gcp: the readiness wait, the first visit, the
warm-up's visit of every page) sends its own requests, and a CORS preflight is sent with and without
an allowed origin, to the real functions on the twin and to each stand-in. Every answer is held to the
real functions': the same status to the same request, the probe's answer taken as ours
(gcp.is_our_refusal) on every side, and each answer valid against functions/openapi.yaml. And the kit's
readiness wait, as a run calls it, passes against the real functions.
"""
import json
import sys
import urllib.parse

import pytest
import requests
import schemathesis
from conftest import ITERATION_0, running_stack
from fake_google import Scenario
from invoker_check import InvokerCheck, new_key
from schemathesis.core.transport import Response
from test_id_tokens import AUDIENCES, FUNCTIONS, key_file

from visitkit.catalogue import PAGES, PUBLIC_PATHS
from visitkit.cloud import credentials as google_credentials
from visitkit.cloud import gcp, idtoken
from visitkit.paths import FUNCTIONS_DIR, ROOT

sys.path.append(str(ROOT / "tests" / "unit"))  # test_gcp.py's StoringSite
from test_gcp import FakeFirestore, StoringSite  # noqa: E402

pytestmark = pytest.mark.timeout(180)

PARTNER = "https://partner.example"  # another site allowed to call (CORS_ALLOWED_ORIGINS) on every side
SCHEMA = schemathesis.openapi.from_path(FUNCTIONS_DIR / "openapi.yaml")
KEY = new_key()


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """The twin with iteration 0's settings and PARTNER allowed: the real functions."""
    folder = tmp_path_factory.mktemp("contract")
    settings = folder / "settings.tfvars.json"
    settings.write_text(json.dumps({**json.loads(ITERATION_0.read_text()), "cors_allowed_origins": [PARTNER]}))
    with running_stack(folder / "state", settings) as stack:
        yield stack


class Side:
    """One side of the contract: where the kit's requests go (`send(url, method, headers)` -> Answer),
    the stored totals the first visit waits on, and what each request got."""

    def __init__(self, base_url, send, totals):
        self.base_url, self.send, self.totals = base_url, send, totals
        self.seen = []  # (method, url, Answer)

    def answer(self, url, method, headers=None):
        answer = self.send(url, method, headers)
        self.seen.append((method, url, answer))
        return answer

    def status(self, url, method):
        answer = self.answer(url, method)
        return answer.status if answer else None


def the_kits_requests(side):
    """The kit's own code against one side, then the preflights a browser of another site sends."""
    gcp.wait_until_answering(side.base_url, side.answer, timeout=30, interval=1)
    gcp.first_visit_stored(side.base_url, side.status, side.totals, timeout=60, interval=0.5, log=lambda *_: None)
    for page in PAGES:
        assert gcp.visit(side.base_url, page, side.status)
    for path in PUBLIC_PATHS:
        side.answer(side.base_url + path, "OPTIONS")
        side.answer(side.base_url + path, "OPTIONS", {"Origin": PARTNER, "Access-Control-Request-Method": "POST"})
    return side.seen


def request_of(method, url):
    """A request as the contract compares it: its method, path and query names (visit ids differ)."""
    parts = urllib.parse.urlsplit(url)
    return method, parts.path, sorted(urllib.parse.parse_qs(parts.query))


def documented(method, url, answer):
    """Where functions/openapi.yaml documents the answer, a problem with it, else None; the probe's
    method is no operation of the document: its 405 is checked as the path's served one's."""
    path = urllib.parse.urlsplit(url).path
    documented_methods = [name.upper() for name in SCHEMA.raw_schema["paths"][path]]
    operation = SCHEMA[path][method if method in documented_methods else documented_methods[0]]
    response = Response(answer.status, {name: [value] for name, value in answer.headers.items()}, answer.body,
                        requests.Request(method, url).prepare(), elapsed=0, verify=True)
    try:
        operation.validate_response(response)
    except Exception as problem:  # schemathesis raises its checks' failures
        return f"{method} {url}: {problem}"
    return None


def held_to(real, stand_in):
    """Problems of the stand-in's answers against the real functions' to the same requests."""
    problems = [f"{request_of(m, u)}: the functions answered {a.status}, the stand-in {b.status if b else None}"
                for (m, u, a), (_, _, b) in zip(real, stand_in) if b is None or a.status != b.status]
    if [request_of(m, u) for m, u, _ in real] != [request_of(m, u) for m, u, _ in stand_in]:
        problems.append("the kit sent other requests to the stand-in")
    problems += [f"{request_of(m, u)} is not taken for our function's answer"
                 for m, u, a in stand_in if m == gcp.READY_METHOD and not gcp.is_our_refusal(a)]
    problems += [problem for m, u, a in stand_in if a and (problem := documented(m, u, a))]
    return problems


@pytest.fixture(scope="module")
def real(twin):
    """The real functions' answers to the kit's requests, each checked against the document."""
    seen = the_kits_requests(Side(twin.base_url, gcp.answer_of, twin.totals))
    assert [problem for m, u, a in seen if (problem := documented(m, u, a))] == []
    assert {a.status for m, u, a in seen if m == gcp.READY_METHOD} == {405}
    assert {a.status for m, u, a in seen if m == "OPTIONS"} == {204, 403}
    return seen


def test_the_kits_readiness_wait_passes_against_the_real_functions(twin):
    """As GcpTarget calls it, with its own HTTP client; before issue 47 it waited for a 204 to a bare
    OPTIONS, which the functions refuse (403): it timed out on every deployment."""
    gcp.wait_until_answering(twin.base_url, timeout=10, interval=1)


def test_a_bare_preflight_is_still_refused(twin):
    assert gcp.status_of(f"{twin.base_url}/inc-counter?visit_type=home", "OPTIONS") == 403


def test_the_invoker_checks_functions_answer_as_ours_do(real, tmp_path, monkeypatch):
    """OurFunctions behind invoker_check, over HTTP, each request with a real ID token for its function."""
    with InvokerCheck(Scenario(functions=FUNCTIONS, cors_allowed_origins=[PARTNER]), accounts={"k1": KEY}) as fake:
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file(tmp_path, fake.url + "/token", KEY)))
        tokens = idtoken.IdTokens(idtoken.minter(google_credentials.default_credentials("visitkit-fake")),
                                  audiences=AUDIENCES)

        def send(url, method, headers):
            return gcp.answer_of(url, method, {**(headers or {}), **tokens.headers(url)})

        stand_in = the_kits_requests(Side(fake.url, send, fake.functions.totals))
    assert held_to(real, stand_in) == []


def test_the_unit_tests_site_answers_as_our_functions_do(real):
    """test_gcp.py's StoringSite, called in-process as GcpTarget calls its HTTP seam."""
    site = StoringSite(FakeFirestore({}), cors_allowed_origins=[PARTNER])
    stand_in = the_kits_requests(Side("https://us-central1-p1.cloudfunctions.net", site,
                                      lambda: {page: sum(site.firestore.shards.get(page, [])) for page in PAGES}))
    assert held_to(real, stand_in) == []


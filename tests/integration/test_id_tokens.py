"""ID tokens for an authenticated deployment, minted by google-auth from a service account key whose
token endpoint is a local stand-in (invoker_check.py, on fake_google.py) that verifies the key's signed
assertion and signs the ID token it returns, and checked by stand-in functions the way Cloud Run checks
them: google-auth's verify_token (signature, expiry, audience = the run.app URL of the function's Cloud
Run service, never the host the request went to), then the invoker's email. The kit's IdTokens with the
audiences Terraform outputs, the caller it grants run.invoker, the kit's own readiness wait and visit
through GcpTarget, a real headless Locust run with --auth id-token --audiences, and what is refused: no
token, another function's, one for the request's own URL, a forged or expired one, another principal's,
and a mint from a key the token endpoint does not know. What the stand-in functions answer is held to
the real functions by test_contract.py."""
import csv
import json
import os
import subprocess
import sys
import time

import pytest
from fake_google import FakeGoogle, Scenario, unsigned_jwt, unverified_claims
from google.auth import crypt
from invoker_check import GOOGLE_KEY_ID, InvokerCheck, new_key, private_pem

from visitkit.catalogue import PUBLIC_PATHS
from visitkit.cloud import credentials as google_credentials
from visitkit.cloud import gcp, idtoken
from visitkit.errors import GcpError
from visitkit.net import http_status
from visitkit.paths import INFRA_DIR, ITERATIONS_DIR, LOCUST_DIR, ROOT
from visitkit.settings import load_settings

EMAIL = "loadgen@visitkit-fake.iam.gserviceaccount.com"
FUNCTIONS = {"/app": EMAIL, "/inc-counter": EMAIL, "/get-counter": EMAIL}
# What Terraform's function_audiences output gives: each function's run.app URL, by function name
AUDIENCES = {name: Scenario(functions=FUNCTIONS).audiences[path] for path, name in PUBLIC_PATHS.items()}


KEY = new_key()  # the service account's, whose public key the token endpoint knows (as Google knows it)


def key_file(folder, token_uri, key=KEY, name="key.json"):
    """A service account key, as Google issues them, whose token URI is the stand-in's."""
    path = folder / name
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "visitkit-fake", "private_key_id": "k1",
        "private_key": private_pem(key), "client_email": EMAIL, "client_id": "1", "token_uri": token_uri,
        "auth_uri": "https://accounts.google.com/o/oauth2/auth"}))
    return path


@pytest.fixture()
def fake(tmp_path, monkeypatch):
    with InvokerCheck(Scenario(functions=FUNCTIONS), accounts={"k1": KEY}) as server:
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file(tmp_path, server.url + "/token")))
        yield server


def test_a_service_account_key_mints_one_token_per_function_for_its_run_app_url(fake):
    creds = google_credentials.default_credentials("visitkit-fake")
    assert google_credentials.caller_member(creds) == f"serviceAccount:{EMAIL}"
    tokens = idtoken.IdTokens(idtoken.minter(creds), audiences=AUDIENCES)
    header = tokens.headers(f"{fake.url}/inc-counter?visit_type=home")["Authorization"]
    claims = unverified_claims(header.removeprefix("Bearer "))
    assert claims["aud"] == AUDIENCES["inc-counter"] and claims["email"] == EMAIL
    assert http_status(f"{fake.url}/inc-counter?visit_type=home", "POST", headers={"Authorization": header}) == 202
    tokens.headers(f"{fake.url}/inc-counter?visit_type=jobs")
    tokens.headers(f"{fake.url}/get-counter?visit_type=home")
    assert fake.paths("POST").count("/token") == 2  # one per function, kept until near its expiry


class Terraform:
    """The kit's terraform commands, answered as an apply that made `outputs` (named as infra/outputs.tf
    names them) would answer them: init and apply print nothing, output -json the outputs."""

    def __init__(self, outputs):
        self.outputs = outputs

    def __call__(self, argv, check=False, text=True, capture_output=False, echo=True, env=None):
        stdout = json.dumps({name: {"value": value, "type": "string", "sensitive": False}
                             for name, value in self.outputs.items()}) if argv[2] == "output" else ""
        return subprocess.CompletedProcess(argv, 0, stdout, "")


def test_the_kit_mints_for_the_audiences_terraform_outputs_whatever_host_it_calls(fake):
    """GcpTarget on an authenticated deployment whose base URL is another host than the functions' own
    (a load balancer's, with edge_protection): its preflight mint, its readiness wait and a visit, each
    request with a real token the invoker check verifies against the function's run.app URL."""
    outputs = {"base_url": fake.url + "/", "function_audiences": AUDIENCES,
               "subscription_name": "visits-store-inc-counter"}
    iteration = ITERATIONS_DIR / "iteration-1"
    deployed = gcp.GcpTarget(load_settings(iteration), iteration, "visitkit-fake", access="authenticated",
                             infra_dir=INFRA_DIR, run=Terraform(outputs), log=lambda *_: None, ready_timeout=5,
                             preflight=lambda project, access, credentials, before_creating, needs:
                             before_creating(access),
                             credentials=google_credentials.default_credentials("visitkit-fake"))
    deployed._check()  # the preflight's mint: can these credentials mint at all
    deployed._deploy()
    deployed._wait_ready()  # the kit's own probe, through the invoker check, answered as the functions do
    assert gcp.visit(deployed.base_url, "home", deployed._status)
    presented = {unverified_claims(headers["Authorization"].removeprefix("Bearer "))["aud"]
                 for method, path, headers in fake.requests if path.split("?")[0] in FUNCTIONS}
    assert presented == set(AUDIENCES.values())
    assert deployed.locust_args[deployed.locust_args.index("--audiences") + 1] == json.dumps(AUDIENCES, sort_keys=True)


def test_locust_sends_a_valid_token_on_every_request(fake, tmp_path):
    env = {**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": os.environ["GOOGLE_APPLICATION_CREDENTIALS"]}
    result = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(LOCUST_DIR / "locustfile.py"), "--headless", "--host", fake.url,
         "-u", "4", "-r", "4", "--run-time", "4s", "--think-time", "0", "--auth", "id-token",
         "--audiences", json.dumps(AUDIENCES), "--only-summary",
         "--csv", str(tmp_path / "locust"), "--stop-timeout", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    with open(tmp_path / "locust_stats.csv", newline="") as f:
        total = next(row for row in csv.DictReader(f) if row["Name"] == "Aggregated")
    assert int(total["Request Count"]) > 20, result.stderr[-2000:]
    assert int(total["Failure Count"]) == 0, (tmp_path / "locust_failures.csv").read_text()
    assert 3 <= fake.paths("POST").count("/token") <= 3 * 4  # a few mints, not one per request


def test_what_cloud_run_refuses_is_refused(fake):
    """Each refusal comes from a real check: google-auth's verification of the token, the invoker's email,
    the token endpoint's verification of the assertion the kit's key signed."""
    app, inc = f"{fake.url}/app?view=home", f"{fake.url}/inc-counter?visit_type=home"
    creds = google_credentials.default_credentials("visitkit-fake")
    tokens = idtoken.IdTokens(idtoken.minter(creds), audiences=AUDIENCES)
    assert http_status(app, headers=tokens.headers(app)) == 200  # the kit's own token, for its function
    # minted for the URL the request goes to (a load balancer's, here the stand-in's): not the service's
    assert http_status(app, headers=idtoken.IdTokens(idtoken.minter(creds)).headers(app)) == 401

    def bearer(token):
        return {"Authorization": f"Bearer {token}"}

    assert http_status(app) == 401  # no token
    # the kit's valid token for /app, presented to /inc-counter: another audience
    assert http_status(inc, "POST", headers={"Authorization": tokens.headers(app)["Authorization"]}) == 401
    right = {"aud": AUDIENCES["serve-page"], "email": EMAIL, "email_verified": True}
    assert http_status(app, headers=bearer(fake.signed_token(right))) == 200  # the stand-in's signature is Google's
    forger = crypt.RSASigner.from_string(private_pem(new_key()), key_id=GOOGLE_KEY_ID)  # Google's key id, not its key
    for forged in (unsigned_jwt({**right, "iat": int(time.time()), "exp": int(time.time()) + 3600}),  # not signed
                   fake.signed_token(right, signer=forger),  # signed by another key
                   fake.signed_token({**right, "exp": int(time.time()) - 600})):  # signed, but expired
        assert http_status(app, headers=bearer(forged)) == 401, unverified_claims(forged)
    # a valid token of a principal not allowed to invoke
    assert http_status(app, headers=bearer(fake.signed_token({**right, "email": "x@else.example"}))) == 403


def test_a_key_the_token_endpoint_does_not_know_mints_nothing(fake, tmp_path, monkeypatch):
    """The same account's email and key id, another private key: the token endpoint refuses the assertion,
    and the kit says it could not mint a token rather than sending none."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file(tmp_path, fake.url + "/token", new_key(),
                                                                      "stolen.json")))
    tokens = idtoken.IdTokens(idtoken.minter(google_credentials.default_credentials("visitkit-fake")))
    with pytest.raises(GcpError, match=f"Could not mint an ID token for {fake.url}/app: .*Invalid JWT Signature"):
        tokens.headers(f"{fake.url}/app?view=home")


def test_a_user_logins_account_is_read_from_the_id_token_of_a_refresh_with_every_scope():
    from google.auth.transport.requests import Request
    from google.oauth2.credentials import Credentials

    with FakeGoogle(Scenario()) as server:
        # as google.auth.default() loads a user login for the kit: scoped to cloud-platform alone, whose
        # refresh brings no ID token (google-auth fixes a login file's token URI to Google's: set here)
        creds = Credentials(None, refresh_token="r", token_uri=server.url + "/token", client_id="764086051850-adc",
                            client_secret="s", scopes=google_credentials.SCOPES)
        assert idtoken.kind_of(creds) == "user"
        assert google_credentials.caller_member(creds) == "user:tester@example.com"
        creds.refresh(Request())
        assert creds.id_token is None  # what reading the scoped refresh alone would have left to go on

"""ID tokens for an authenticated deployment, minted by google-auth from a service account key whose
token endpoint is the local fake (fake_google.py), and checked by fake functions the way Cloud Run
checks them (audience = the function's URL, the invoker's email): the kit's IdTokens, the caller it
grants run.invoker, and a real headless Locust run with --auth id-token."""
import csv
import json
import os
import subprocess
import sys

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fake_google import FakeGoogle, Scenario, unsigned_jwt, unverified_claims

from visitkit.cloud import credentials as google_credentials
from visitkit.cloud import idtoken
from visitkit.paths import LOCUST_DIR, ROOT

EMAIL = "loadgen@visitkit-fake.iam.gserviceaccount.com"
FUNCTIONS = {"/app": EMAIL, "/inc-counter": EMAIL, "/get-counter": EMAIL}


def key_file(folder, token_uri):
    """A service account key, as Google issues them, whose token URI is the fake's."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path = folder / "key.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "visitkit-fake", "private_key_id": "k1", "private_key": pem,
        "client_email": EMAIL, "client_id": "1", "token_uri": token_uri,
        "auth_uri": "https://accounts.google.com/o/oauth2/auth"}))
    return path


@pytest.fixture()
def fake(tmp_path, monkeypatch):
    with FakeGoogle(Scenario(functions=FUNCTIONS)) as server:
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file(tmp_path, server.url + "/token")))
        yield server


def test_a_service_account_key_mints_one_token_per_function_for_its_url(fake):
    creds = google_credentials.default_credentials("visitkit-fake")
    assert google_credentials.caller_member(creds) == f"serviceAccount:{EMAIL}"
    tokens = idtoken.IdTokens(idtoken.minter(creds))
    header = tokens.headers(f"{fake.url}/inc-counter?visit_type=home")["Authorization"]
    claims = unverified_claims(header.removeprefix("Bearer "))
    assert claims["aud"] == f"{fake.url}/inc-counter" and claims["email"] == EMAIL
    tokens.headers(f"{fake.url}/inc-counter?visit_type=jobs")
    tokens.headers(f"{fake.url}/get-counter?visit_type=home")
    assert fake.paths("POST").count("/token") == 2  # one per function, kept until near its expiry


def test_locust_sends_a_valid_token_on_every_request(fake, tmp_path):
    env = {**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": os.environ["GOOGLE_APPLICATION_CREDENTIALS"]}
    result = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(LOCUST_DIR / "locustfile.py"), "--headless", "--host", fake.url,
         "-u", "4", "-r", "4", "--run-time", "4s", "--think-time", "0", "--auth", "id-token", "--only-summary",
         "--csv", str(tmp_path / "locust"), "--stop-timeout", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    with open(tmp_path / "locust_stats.csv", newline="") as f:
        total = next(row for row in csv.DictReader(f) if row["Name"] == "Aggregated")
    assert int(total["Request Count"]) > 20, result.stderr[-2000:]
    assert int(total["Failure Count"]) == 0, (tmp_path / "locust_failures.csv").read_text()
    assert 3 <= fake.paths("POST").count("/token") <= 3 * 4  # a few mints, not one per request


def test_without_a_token_the_fake_refuses_as_cloud_run_does(fake):
    from visitkit.net import http_status

    assert http_status(f"{fake.url}/app?view=home") == 401
    someone_else = idtoken.IdTokens(lambda audience: (unsigned_jwt({"aud": audience, "email": "x@else.example"}), 4e9))
    assert http_status(f"{fake.url}/app?view=home", headers=someone_else.headers(f"{fake.url}/app")) == 403


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

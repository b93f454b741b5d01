"""Cloud Run's invoker check for the ID-token tests, built on fake_google.FakeGoogle (which answers
everything else as it does): its token endpoint takes a service account's JWT assertion only when
google-auth verifies it against that account's public key (as Google's does), and answers with an ID
token it signs with a key of its own standing for Google's; its functions let a request through only
when google-auth's verify_token (the check Google documents for ID tokens: the signature against the
certificates served at /certs, expiry, the audience = the run.app URL of the function's Cloud Run
service, whatever host the request came to) passes, then only for the principal allowed to invoke. 401
for a token missing or failing the check, 403 for another principal, as Cloud Run answers. What passes
is answered by fake_google.OurFunctions, which tests/integration/test_contract.py holds to the real
functions."""
import datetime
import time
import urllib.parse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from fake_google import FakeGoogle, Handler, OurFunctions
from google.auth import crypt, jwt
from google.auth import exceptions as auth_errors
from google.auth.transport.requests import Request
from google.oauth2 import id_token

GOOGLE_KEY_ID = "fake-google-1"
# The audience of a service account's assertion for an ID token, whatever the key's token URI: Google's endpoint.
ASSERTION_AUDIENCE = "https://oauth2.googleapis.com/token"


def new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def private_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def certificate(key, name):
    """A self-signed X.509 certificate of the key, PEM, as Google serves its keys' certificates."""
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


class InvokerCheck(FakeGoogle):
    """FakeGoogle with signed ID tokens and functions behind a real verification. `accounts`: {key id: the
    service account key (a private key) whose assertions the token endpoint takes}."""

    def __init__(self, scenario, accounts):
        super().__init__(scenario)
        self.RequestHandlerClass = CheckingHandler
        self.google_key = new_key()
        self.signer = crypt.RSASigner.from_string(private_pem(self.google_key), key_id=GOOGLE_KEY_ID)
        self.certs = {GOOGLE_KEY_ID: certificate(self.google_key, "fake-google")}
        self.account_certs = {key_id: certificate(key, key_id) for key_id, key in accounts.items()}
        self.functions = OurFunctions(scenario.cors_allowed_origins)

    def id_token(self, claims, signer=None):
        """An ID token with `claims`, signed by `signer` (default: this stand-in for Google)."""
        now = int(time.time())
        payload = {"iss": "https://accounts.google.com", "iat": now, "exp": now + 3600, **claims}
        return jwt.encode(signer or self.signer, payload).decode()

    def verified_claims(self, token, audience):
        """The token's claims once google-auth verified it for `audience`; ValueError when it does not verify."""
        return id_token.verify_token(token, Request(), audience=audience, certs_url=self.url + "/certs")


class CheckingHandler(Handler):
    server: InvokerCheck

    def route(self, method, path, body):
        server, functions = self.server, self.server.scenario.functions
        if path == "/certs":
            return 200, server.certs
        if path == "/token":
            form = {key: urllib.parse.unquote_plus(value) for key, value in
                    (part.split("=", 1) for part in body.decode().split("&"))}
            if "assertion" not in form:  # a user login's refresh: as FakeGoogle answers it
                return super().route(method, path, body)
            try:
                claims = jwt.decode(form["assertion"], certs=server.account_certs, audience=ASSERTION_AUDIENCE)
            except (ValueError, auth_errors.GoogleAuthError) as error:
                return 400, {"error": "invalid_grant", "error_description": f"Invalid JWT Signature. ({error})"}
            return 200, {"id_token": server.id_token({"aud": claims["target_audience"], "azp": claims["iss"],
                                                      "email": claims["iss"], "email_verified": True, "sub": "1"})}
        if path in functions:
            token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            if not token:
                return 401, {"error": "no token"}
            try:
                claims = server.verified_claims(token, server.scenario.audiences[path])
            except (ValueError, auth_errors.GoogleAuthError) as error:
                return 401, {"error": f"The request was not authenticated: {error}"}
            if claims.get("email") != functions[path]:
                return 403, {"error": "Your client does not have permission to get URL from this server."}
            status, headers, data = server.functions.answer(method, self.path, self.headers)
            return status, None, headers, data
        return super().route(method, path, body)

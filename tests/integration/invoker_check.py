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
import time

from cryptography.hazmat.primitives.asymmetric import rsa
from fake_google import FakeGoogle, Handler, OurFunctions
from google.auth import exceptions as auth_errors
from google.auth import jwt
from google.auth.transport.requests import Request
from google.oauth2 import id_token

from visitkit.rehearsal.google import GOOGLE_KEY_ID, certificate, private_pem  # noqa: F401


def new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class InvokerCheck(FakeGoogle):
    """FakeGoogle (the rehearsal's control plane: its token endpoint takes a key's assertion only when it
    verifies, and signs ID tokens with its own key) with that key's certificate served at /certs and
    functions behind a real verification. `accounts`: {key id: the service account key (a private key)
    whose assertions the token endpoint takes}."""

    def __init__(self, scenario, accounts):
        super().__init__(scenario)
        self.RequestHandlerClass = CheckingHandler
        self.certs = {GOOGLE_KEY_ID: certificate(self.google_key, "fake-google")}
        self.account_certs = {key_id: certificate(key, key_id) for key_id, key in accounts.items()}
        self.functions = OurFunctions(scenario.cors_allowed_origins)

    def signed_token(self, claims, signer=None):
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

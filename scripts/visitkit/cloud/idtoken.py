"""Google-signed ID tokens for the functions of an `"access": "authenticated"` deployment.

Cloud Run lets a request through to a private service when it carries, as `Authorization: Bearer`,
an ID token of a principal holding roles/run.invoker whose audience the service accepts. The kit's
probes, warm-up and every Locust user take their tokens from one `IdTokens`: one token per function,
minted from the application-default credentials and minted again REFRESH_MARGIN_S before it expires
(Google's ID tokens live one hour).

The audience is the run.app URL of the function's Cloud Run service, whatever URL the request goes to.
Cloud Run documents that one as always accepted: a caller "must provide a valid ID token that includes
an audience claim matching the receiving service's *.run.app URL", and "the Google-generated default URL
always remains an accepted audience value" beside any custom audience
(https://cloud.google.com/run/docs/configuring/custom-audiences). Google's page on invoking a function
made with the Cloud Functions v2 API sends its callers to Cloud Run's guides
(https://cloud.google.com/functions/docs/securing/authenticating); the function-to-function sample of
its 1st gen page mints for the function's https://REGION-PROJECT.cloudfunctions.net/NAME URL
(https://cloud.google.com/functions/1stgendocs/securing/authenticating), which Cloud Run's pages do not
name as an audience of the service. Nor is the request's URL one: with edge_protection it is the load
balancer's host, which the service knows nothing of (custom audiences names that case). So Terraform
outputs each function's run.app URL (function_audiences: service_config[0].uri of its
google_cloudfunctions2_function), and `IdTokens(audiences=...)` mints a request's token for its
function's, found by the request URL's path (visitkit.catalogue).

What each kind of application-default credentials can mint (google-auth):
- a service account key (GOOGLE_APPLICATION_CREDENTIALS): its own ID tokens, signed locally and
  exchanged at the key's token URI (service_account.IDTokenCredentials);
- `gcloud auth application-default login --impersonate-service-account SA`, or `--impersonate SA`
  here on top of a user login: SA's ID tokens through the IAM Credentials API
  (impersonated_credentials.IDTokenCredentials; the user needs roles/iam.serviceAccountTokenCreator
  on SA);
- the metadata server of a VM or Cloud Run: the attached service account's tokens
  (compute_engine.IDTokenCredentials); Cloud Shell's metadata server speaks for the user, who is
  then taken as a user login (credentials.speaks_for_user);
- a plain user login (`gcloud auth application-default login`): none for another audience, so the
  kit acts as the deployment's visitkit-loadgen account instead (gcp.py), or as --impersonate SA;
- workload identity federation (external_account): none here; --impersonate SA is the way out.
"""
from __future__ import annotations

import datetime
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

from visitkit.catalogue import function_of_path
from visitkit.errors import GcpError

if TYPE_CHECKING:  # google-auth is imported when tokens are minted, not with this module
    from google.auth.credentials import Credentials
    from google.auth.transport import Request
    from google.oauth2 import service_account

# mint(audience) -> (the ID token, its expiry in unix seconds)
Mint = Callable[[str], tuple[str, float]]

REFRESH_MARGIN_S = 300
IMPERSONATE_HINT = ("run again with --impersonate SERVICE_ACCOUNT_EMAIL (a service account you may mint tokens for: "
                    "roles/iam.serviceAccountTokenCreator on it), or log in with "
                    "`gcloud auth application-default login --impersonate-service-account SERVICE_ACCOUNT_EMAIL`")


def audience_of(url: str) -> str:
    """The URL of the function a request URL calls: scheme, host and the function's path, without the
    query. The audience only where that URL is the service's own (IdTokens without audiences)."""
    parts = urllib.parse.urlsplit(url)
    first = parts.path.strip("/").split("/", 1)[0]
    return f"{parts.scheme}://{parts.netloc}/{first}" if first else f"{parts.scheme}://{parts.netloc}"


class IdTokens:
    """Bearer headers for function URLs; `mint(audience)` -> (token, expiry as unix seconds). `audiences`:
    {function name: the audience of its tokens} (Terraform's function_audiences), settable once the
    deployment's outputs are read; without it, a request's own function URL (audience_of)."""

    def __init__(self, mint: Mint, now: Callable[[], float] = time.time, margin: float = REFRESH_MARGIN_S,
                 audiences: Mapping[str, str] | None = None):
        self._mint, self._now, self._margin = mint, now, margin
        self.audiences = audiences
        self._tokens: dict[str, tuple[str, float]] = {}  # audience -> (token, expiry)
        self._lock = threading.Lock()  # one mint per audience at a time, however many users ask

    def token(self, audience: str) -> str:
        with self._lock:
            token, expiry = self._tokens.get(audience, (None, 0.0))
            if token is None or self._now() >= expiry - self._margin:
                token, expiry = self._mint(audience)
                self._tokens[audience] = (token, expiry)
            return token

    def audience(self, url: str) -> str:
        """The audience of a request's token: its function's (by the URL's path), or the URL's own."""
        if self.audiences is None:
            return audience_of(url)
        function = function_of_path(urllib.parse.urlsplit(url).path)
        if function is None or function not in self.audiences:
            raise GcpError(f"no ID token audience is known for {url}: function_audiences names "
                           f"{', '.join(sorted(self.audiences)) or 'no function'}")
        return self.audiences[function]

    def headers(self, url: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(self.audience(url))}"}


def kind_of(credentials: object) -> str:
    module = type(credentials).__module__
    if module == "google.oauth2.service_account":
        return "service_account"
    if module == "google.auth.impersonated_credentials":
        return "impersonated"
    if module == "google.auth.compute_engine.credentials":
        return "metadata"
    if module == "google.oauth2.credentials":
        return "user"
    return type(credentials).__name__


def id_token_credentials(credentials: Credentials, audience: str, request: Request | None) -> Credentials:
    """ID-token credentials for `audience` from application-default `credentials`, or GcpError
    with the way out for a kind that cannot mint them."""
    kind = kind_of(credentials)
    if kind == "service_account":
        from google.oauth2 import service_account

        key = cast("service_account.Credentials", credentials)  # kind_of told its class, by its module's name
        return service_account.IDTokenCredentials(key.signer, key.service_account_email, key._token_uri, audience)
    if kind == "impersonated":
        from google.auth import impersonated_credentials

        return impersonated_credentials.IDTokenCredentials(credentials, target_audience=audience, include_email=True)
    if kind == "metadata":
        from google.auth import compute_engine

        return compute_engine.IDTokenCredentials(request, audience, use_metadata_identity_endpoint=True)
    if kind == "user":
        raise GcpError("Your application-default credentials are a user login, which cannot mint the ID tokens an "
                       f"authenticated deployment needs: {IMPERSONATE_HINT}.")
    raise GcpError(f"Application-default credentials of type {kind} cannot mint ID tokens here: {IMPERSONATE_HINT}.")


def minter(credentials: Credentials, request: Request | None = None) -> Mint:
    """mint(audience) -> (token, expiry unix seconds) for IdTokens, from `credentials`."""
    import google.auth.transport.requests

    request = request or google.auth.transport.requests.Request()

    def mint(audience: str) -> tuple[str, float]:
        target = id_token_credentials(credentials, audience, request)
        try:
            target.refresh(request)
        except Exception as error:  # RefreshError: no token creator role, key disabled, ...
            raise GcpError(f"Could not mint an ID token for {audience}: {error}") from error
        # google-auth keeps expiry as a naive UTC datetime
        expiry = target.expiry.replace(tzinfo=datetime.UTC).timestamp() if target.expiry else time.time()
        return target.token, expiry

    return mint

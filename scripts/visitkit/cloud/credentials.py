"""The user's Google credentials, as every Google client the kit creates uses them.

Application-default credentials (google-auth), with the target project as their quota project:
Google bills each call to, and checks each API's state in, that project, so an error names the
project the user deploys to and no other (without it, user credentials bill the project named in
the ADC file, or none).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from visitkit.cloud.idtoken import kind_of
from visitkit.errors import GcpError

if TYPE_CHECKING:  # google-auth is imported when credentials are made, not with this module
    from google.auth import compute_engine, impersonated_credentials
    from google.auth.credentials import Credentials
    from google.auth.transport import Request
    from google.oauth2 import credentials as user_credentials
    from google.oauth2 import service_account

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def default_credentials(project: str | None = None) -> Credentials:
    """The application-default credentials, their calls billed to `project` where it is given."""
    import google.auth

    try:
        credentials, _ = google.auth.default(scopes=SCOPES, quota_project_id=project)
    except Exception as error:  # DefaultCredentialsError
        raise GcpError("No application-default credentials were found: run "
                       "`gcloud auth application-default login`.") from error
    return credentials


def billed_to(credentials: Credentials, project: str) -> Credentials:
    """The same credentials with `project` as their quota project (clients given credentials
    ignore client_options' quota_project_id)."""
    return credentials.with_quota_project(project) if hasattr(credentials, "with_quota_project") else credentials


def impersonating(credentials: Credentials, service_account: str) -> Credentials:
    """`credentials` acting as `service_account` (the IAM Credentials API signs for it)."""
    from google.auth import impersonated_credentials

    return impersonated_credentials.Credentials(source_credentials=credentials, target_principal=service_account,
                                                target_scopes=SCOPES)


def on_cloud_shell(environ: Mapping[str, str] = os.environ) -> bool:
    """Cloud Shell, whose metadata server speaks for the logged-in user, not a service account
    (Cloud Shell sets CLOUD_SHELL=true in its sessions)."""
    return environ.get("CLOUD_SHELL") == "true"


def speaks_for_user(credentials: Credentials, environ: Mapping[str, str] = os.environ) -> bool:
    """True when the credentials are a person's: a user login, or Cloud Shell's metadata server.
    A person cannot mint an ID token for a function, so the kit then acts as the deployment's
    load-generator account (gcp.py)."""
    kind = kind_of(credentials)
    return kind == "user" or (kind == "metadata" and on_cloud_shell(environ))


def caller_member(credentials: Credentials, request: Request | None = None) -> str | None:
    """The IAM principal the credentials act as ("user:..." or "serviceAccount:..."), which an
    authenticated deployment grants run.invoker to; None when it cannot be told."""
    # kind_of tells the credentials' class by its module's name (a test's stand-in passes too), which
    # mypy cannot follow: each branch casts to the class it found.
    kind = kind_of(credentials)
    if kind in ("impersonated", "service_account"):
        signing = cast("impersonated_credentials.Credentials | service_account.Credentials", credentials)
        return f"serviceAccount:{signing.service_account_email}"
    if kind == "metadata":
        import google.auth.transport.requests

        metadata = cast("compute_engine.Credentials", credentials)
        metadata.refresh(request or google.auth.transport.requests.Request())  # learns its email
        email = metadata.service_account_email
        # A VM's or Cloud Run's metadata server names a service account; Cloud Shell's, the user.
        return f"{'serviceAccount' if email.endswith('.gserviceaccount.com') else 'user'}:{email}"
    if kind == "user":
        import google.auth.transport.requests
        from google.auth import jwt
        from google.oauth2.credentials import Credentials

        login = cast("user_credentials.Credentials", credentials)
        id_token = login.id_token
        if not id_token:
            # A refresh asking for no scope gets back every scope of the login, openid and email
            # among them (gcloud's), so its ID token names the user; asking for cloud-platform
            # alone, as the kit's clients do, would not.
            unscoped = Credentials(None, refresh_token=login.refresh_token, token_uri=login.token_uri,
                                   client_id=login.client_id, client_secret=login.client_secret)
            unscoped.refresh(request or google.auth.transport.requests.Request())
            id_token = unscoped.id_token
        claims = jwt.decode(id_token, verify=False) if id_token else {}
        return f"user:{claims['email']}" if claims.get("email") else None
    return None

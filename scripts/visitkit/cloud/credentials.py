"""The user's Google credentials, as every Google client the kit creates uses them.

Application-default credentials (google-auth), with the target project as their quota project:
Google bills each call to, and checks each API's state in, that project, so an error names the
project the user deploys to and no other (without it, user credentials bill the project named in
the ADC file, or none).
"""
import os

from visitkit.cloud.idtoken import kind_of
from visitkit.errors import GcpError

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def default_credentials(project=None):
    """The application-default credentials, their calls billed to `project` where it is given."""
    import google.auth

    try:
        credentials, _ = google.auth.default(scopes=SCOPES, quota_project_id=project)
    except Exception as error:  # DefaultCredentialsError
        raise GcpError("No application-default credentials were found: run "
                       "`gcloud auth application-default login`.") from error
    return credentials


def billed_to(credentials, project):
    """The same credentials with `project` as their quota project (clients given credentials
    ignore client_options' quota_project_id)."""
    return credentials.with_quota_project(project) if hasattr(credentials, "with_quota_project") else credentials


def impersonating(credentials, service_account):
    """`credentials` acting as `service_account` (the IAM Credentials API signs for it)."""
    from google.auth import impersonated_credentials

    return impersonated_credentials.Credentials(source_credentials=credentials, target_principal=service_account,
                                                target_scopes=SCOPES)


def on_cloud_shell(environ=os.environ):
    """Cloud Shell, whose metadata server speaks for the logged-in user, not a service account
    (Cloud Shell sets CLOUD_SHELL=true in its sessions)."""
    return environ.get("CLOUD_SHELL") == "true"


def speaks_for_user(credentials, environ=os.environ):
    """True when the credentials are a person's: a user login, or Cloud Shell's metadata server.
    A person cannot mint an ID token for a function, so the kit then acts as the deployment's
    load-generator account (gcp.py)."""
    kind = kind_of(credentials)
    return kind == "user" or (kind == "metadata" and on_cloud_shell(environ))


def caller_member(credentials, request=None):
    """The IAM principal the credentials act as ("user:..." or "serviceAccount:..."), which an
    authenticated deployment grants run.invoker to; None when it cannot be told."""
    kind = kind_of(credentials)
    if kind in ("impersonated", "service_account"):
        return f"serviceAccount:{credentials.service_account_email}"
    if kind == "metadata":
        import google.auth.transport.requests

        credentials.refresh(request or google.auth.transport.requests.Request())  # learns its email
        email = credentials.service_account_email
        # A VM's or Cloud Run's metadata server names a service account; Cloud Shell's, the user.
        return f"{'serviceAccount' if email.endswith('.gserviceaccount.com') else 'user'}:{email}"
    if kind == "user":
        import google.auth.transport.requests
        from google.auth import jwt
        from google.oauth2.credentials import Credentials

        id_token = credentials.id_token
        if not id_token:
            # A refresh asking for no scope gets back every scope of the login, openid and email
            # among them (gcloud's), so its ID token names the user; asking for cloud-platform
            # alone, as the kit's clients do, would not.
            unscoped = Credentials(None, refresh_token=credentials.refresh_token, token_uri=credentials.token_uri,
                                   client_id=credentials.client_id, client_secret=credentials.client_secret)
            unscoped.refresh(request or google.auth.transport.requests.Request())
            id_token = unscoped.id_token
        claims = jwt.decode(id_token, verify=False) if id_token else {}
        return f"user:{claims['email']}" if claims.get("email") else None
    return None

"""Who the credentials speak for: a VM's metadata server names a service account, Cloud Shell's the
logged-in user. google-auth's own compute_engine.Credentials, against a recorded fake of the
metadata server's answers (no machine here has one)."""
import json

import pytest
from google.auth import compute_engine

from visitkit.cloud import credentials as google_credentials


class MetadataServer:
    """google.auth.transport.Request stand-in answering as a metadata server whose default account
    is `email` (Cloud Shell answers with the user's address)."""

    def __init__(self, email):
        self.email, self.paths = email, []

    def __call__(self, url, method="GET", body=None, headers=None, timeout=None, **_):
        path = url.split("/computeMetadata/v1/", 1)[-1]
        self.paths.append(path)
        if path.startswith("instance/service-accounts/default/?"):
            answer = {"aliases": ["default"], "email": self.email,
                      "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}
        elif path.startswith(("instance/service-accounts/default/token", f"instance/service-accounts/{self.email}/token")):
            answer = {"access_token": "ya29.fake", "expires_in": 3599, "token_type": "Bearer"}
        else:
            return Response(404, "")
        return Response(200, json.dumps(answer))


class Response:
    def __init__(self, status, data):
        self.status, self.data = status, data.encode()
        self.headers = {"content-type": "application/json", "metadata-flavor": "Google"}


@pytest.mark.parametrize("email, member", [
    ("tester@example.com", "user:tester@example.com"),  # Cloud Shell
    ("123-compute@developer.gserviceaccount.com", "serviceAccount:123-compute@developer.gserviceaccount.com"),
    ("vm@p1.iam.gserviceaccount.com", "serviceAccount:vm@p1.iam.gserviceaccount.com"),
])
def test_a_metadata_servers_account_is_granted_as_the_principal_it_is(email, member):
    server = MetadataServer(email)
    assert google_credentials.caller_member(compute_engine.Credentials(), request=server) == member
    assert any(path.startswith("instance/service-accounts/default/") for path in server.paths)


def test_cloud_shell_speaks_for_a_user_a_vm_for_its_service_account():
    metadata = compute_engine.Credentials()
    assert google_credentials.speaks_for_user(metadata, {"CLOUD_SHELL": "true"})
    assert not google_credentials.speaks_for_user(metadata, {})

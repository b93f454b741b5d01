"""Cloud Run's front in the twin's HAProxy (visitkit/twin/cloudrun.py), in front of the real functions:
a deployment's access rules answer as Cloud Run documents (403 without a token or for a principal
without run.invoker, 401 for a token whose signature, expiry or audience does not check, 404 where no
function is deployed), and a good token reaches the function itself."""
import time

import pytest
from conftest import ITERATION_0, running_stack
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import crypt, jwt
from helpers import call

from visitkit.catalogue import CATALOGUE, PUSH_FUNCTION
from visitkit.settings import function_environment, load_settings
from visitkit.twin import cloudrun
from visitkit.twin.stack import PROJECT, SUBSCRIPTION, TOPIC

pytestmark = pytest.mark.timeout(180)

INVOKER = "loadgen@visitkit-fake.iam.gserviceaccount.com"


def signer(key):
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return crypt.RSASigner.from_string(pem, key_id="google-1")


def service(name, settings, invokers):
    spec = settings.functions[name]
    return cloudrun.Service(spec.max_instances, spec.concurrency, spec.timeout_seconds,
                            function_environment(settings, name, project=PROJECT, topic=TOPIC),
                            url=f"https://region-visitkit-fake.cloudfunctions.net/{CATALOGUE[name].service}",
                            uri=f"https://{CATALOGUE[name].service}-abcdefghij-rj.a.run.app", invokers=invokers)


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    folder = tmp_path_factory.mktemp("front")
    google_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_key = folder / "google.pem"
    public_key.write_bytes(google_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                                serialization.PublicFormat.SubjectPublicKeyInfo))
    settings = load_settings(ITERATION_0)
    services = {"serve-page": service("serve-page", settings, ("allUsers",)),
                "get-counter": service("get-counter", settings, (f"serviceAccount:{INVOKER}",)),
                PUSH_FUNCTION: service(PUSH_FUNCTION, settings, ("serviceAccount:push@visitkit-fake.iam",))}
    deployment = cloudrun.Deployment(PROJECT, TOPIC, SUBSCRIPTION, None,
                                     {**services, "inc-counter": service("inc-counter", settings, ("allUsers",))},
                                     public_key)
    with running_stack(folder / "stack", deployment=deployment) as stack:
        yield stack.base_url, signer(google_key), services["get-counter"].uri


def token(sign, audience, email=INVOKER, expires_in=3600):
    now = int(time.time())
    return jwt.encode(sign, {"iss": "https://accounts.google.com", "aud": audience, "email": email,
                             "iat": now, "exp": now + expires_in}).decode()


def status(url, bearer=None):
    return call(url, headers={"Authorization": f"Bearer {bearer}"} if bearer else {})[0]


def test_a_public_function_answers_anyone(front):
    base, _, _ = front
    assert status(f"{base}/app?view=home") == 200


def test_an_authenticated_function_answers_a_good_token_of_an_invoker_only(front):
    base, sign, audience = front
    url = f"{base}/get-counter?visit_type=home"
    assert status(url, token(sign, audience)) == 200
    assert status(url) == 403  # no token
    assert status(url, token(sign, audience, email="someone@example.com")) == 403  # not an invoker
    assert status(url, token(sign, "https://region-visitkit-fake.cloudfunctions.net/get-counter")) == 401  # audience
    assert status(url, token(sign, audience, expires_in=-60)) == 401  # expired
    forger = signer(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    assert status(url, token(forger, audience)) == 401  # not signed by Google's key
    assert status(url, "not.a.token") == 401


def test_a_path_no_function_is_deployed_on_is_404(tmp_path):
    settings = load_settings(ITERATION_0)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_key = tmp_path / "google.pem"
    public_key.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
    deployed = {name: service(name, settings, ("allUsers",)) for name in CATALOGUE if name != "get-counter"}
    deployment = cloudrun.Deployment(PROJECT, TOPIC, SUBSCRIPTION, None, deployed, public_key)
    with running_stack(tmp_path / "stack", deployment=deployment) as stack:
        assert status(f"{stack.base_url}/get-counter?visit_type=home") == 404
        assert status(f"{stack.base_url}/app?view=home") == 200


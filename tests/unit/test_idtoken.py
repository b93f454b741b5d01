"""IdTokens: one token per function URL, minted again only near its expiry; audiences as Cloud Run
accepts them; and which kinds of credentials can mint them."""
import pytest

from visitkit.cloud import idtoken
from visitkit.errors import GcpError


class Clock:
    t = 1000.0

    def __call__(self):
        return self.t


def test_audience_is_the_functions_url_without_query_or_trailing_slash():
    base = "https://southamerica-east1-p1.cloudfunctions.net"
    assert idtoken.audience_of(f"{base}/inc-counter?visit_type=home") == f"{base}/inc-counter"
    assert idtoken.audience_of(f"{base}/app/") == f"{base}/app"
    assert idtoken.audience_of(f"{base}/get-counter") == f"{base}/get-counter"


def test_a_token_is_kept_until_the_margin_before_it_expires_then_minted_again():
    clock, minted = Clock(), []

    def mint(audience):
        minted.append(audience)
        return f"token-{len(minted)}", clock.t + 3600

    tokens = idtoken.IdTokens(mint, now=clock, margin=300)
    a, b = "https://h/app", "https://h/inc-counter"
    assert tokens.token(a) == "token-1" and tokens.token(b) == "token-2"
    clock.t += 3600 - 301
    assert tokens.token(a) == "token-1"  # still more than the margin left
    clock.t += 2
    assert tokens.token(a) == "token-3" and minted == [a, b, a]
    assert tokens.headers("https://h/app?view=home") == {"Authorization": "Bearer token-3"}


@pytest.mark.parametrize("module, says", [
    ("google.oauth2.credentials", "user login"),
    ("google.auth.external_account", "cannot mint ID tokens"),
])
def test_credentials_that_cannot_mint_say_how_to_impersonate(module, says):
    creds = type("Creds", (), {"__module__": module})()
    with pytest.raises(GcpError, match=f"{says}.*--impersonate SERVICE_ACCOUNT_EMAIL.*serviceAccountTokenCreator"):
        idtoken.id_token_credentials(creds, "https://h/app", request=None)

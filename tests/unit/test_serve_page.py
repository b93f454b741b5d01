"""serve-page's headers: the page may run its own inline script and style only, fetch only its own
origin and the APIs', and never be framed (pure logic; tests/integration/test_browser.py runs the
page under this policy in Chromium)."""
import base64
import hashlib
import re

import pytest

import serve_page


def sha256(text):
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@pytest.mark.parametrize("view", ["home", "about_legals"])
def test_the_policy_allows_the_pages_own_script_and_style_by_hash_and_nothing_else(view):
    page, headers = serve_page.render(view), serve_page.page_headers(view)
    policy = dict(part.strip().split(" ", 1) for part in headers["Content-Security-Policy"].split(";"))
    [script] = re.findall(r"<script>(.*?)</script>", page, re.S)
    [style] = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert policy["script-src"] == sha256(script) and policy["style-src"] == sha256(style)
    assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    assert policy["connect-src"] == "'self'"  # the APIs are on the page's own origin by default
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_apis_on_another_origin_may_be_fetched(monkeypatch):
    monkeypatch.setattr(serve_page, "INC_COUNTER_URL", "https://api.example/inc-counter")
    monkeypatch.setattr(serve_page, "GET_COUNTER_URL", "/get-counter")
    policy = serve_page.content_security_policy("<script>x</script><style>y</style>")
    assert "connect-src 'self' https://api.example;" in policy

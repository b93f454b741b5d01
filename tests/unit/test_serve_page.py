"""serve-page's headers: the page may run its own inline script and style only, fetch only its own
origin and the APIs', and never be framed (pure logic; tests/integration/test_browser.py runs the
page under this policy in Chromium)."""
import base64
import hashlib
import importlib
import json
import os
import re
from unittest import mock

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


def config_with(**env):
    """The page's config (the JSON its script starts from) as serve-page renders it in that environment."""
    with mock.patch.dict(os.environ, env):
        page = importlib.reload(serve_page).render("home")
    importlib.reload(serve_page)  # back to the test process's own environment
    return json.loads(re.search(r"const config = (\{.*?\});\n", page)[1].replace("<\\/", "</"))


@pytest.mark.parametrize("refresh, ttl, every_ms", [
    ("5", "10", 10000),  # iteration 1's cache: no sooner than get-counter's total can change
    ("5", "0", 5000),  # no cache: the refresh setting
    ("30", "10", 30000),  # a longer refresh setting stands
])
def test_the_page_reads_no_faster_than_get_counters_cache_lets_the_count_change(refresh, ttl, every_ms):
    config = config_with(COUNTER_REFRESH_SECONDS=refresh, CACHE_TTL_SECONDS=ttl)
    assert config["refreshMs"] == every_ms
    assert config["refreshMaxMs"] >= every_ms


def test_the_idle_pause_and_the_visit_tries_are_settings():
    assert (config_with()["idleMs"], config_with()["visitTries"]) == (600000, 4)  # 10 minutes, 4 posts
    config = config_with(PAGE_IDLE_SECONDS="2.5", VISIT_TRIES="6")
    assert (config["idleMs"], config["visitTries"]) == (2500, 6)
    assert config_with(PAGE_IDLE_SECONDS="0")["idleMs"] == 0  # never stops (infra/variables.tf's 0)

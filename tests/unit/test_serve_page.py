"""serve-page's headers: the page may run its own inline script and style only, fetch only its own
origin and the APIs', and never be framed (pure logic; tests/integration/test_browser.py runs the
page under this policy in Chromium); and the page goes gzipped to a client that takes gzip only."""
import base64
import gzip
import hashlib
import importlib
import json
import os
import re
from unittest import mock

import flask
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


# ---- PAGE_EMBEDS_COUNT=1: the page comes with its count -------------------------------------------
@pytest.fixture
def embedding(monkeypatch):
    """serve-page as loaded with PAGE_EMBEDS_COUNT=1; loaded again as the test process has it afterwards."""
    monkeypatch.setenv("PAGE_EMBEDS_COUNT", "1")
    module = importlib.reload(serve_page)
    yield module
    monkeypatch.delenv("PAGE_EMBEDS_COUNT")
    del serve_page.totals  # a reload keeps the module's names: as a fresh default instance has it
    importlib.reload(serve_page)


def served(module, view="home"):
    """(status, the page's config, its headers, the page) of GET /app?view=VIEW."""
    app = flask.Flask(__name__)
    with app.test_request_context(f"/app?view={view}"):
        reply = flask.make_response(module.serve_page(flask.request))
    page = reply.get_data(as_text=True)
    config = json.loads(re.search(r"const config = (\{.*?\});\n", page)[1].replace("<\\/", "</"))
    return reply.status_code, config, reply.headers, page


def test_by_default_the_page_carries_no_count_and_serve_page_reads_none():
    assert not serve_page.PAGE_EMBEDS_COUNT and not hasattr(serve_page, "totals")
    status, config, headers, page = served(serve_page)
    assert status == 200 and "count" not in config
    assert page == serve_page.render("home") and dict(headers) | serve_page.page_headers("home") == dict(headers)


def test_the_page_embeds_its_total_read_as_get_counter_reads_it(embedding, monkeypatch):
    totals = embedding.totals
    monkeypatch.setattr(totals, "cached_total", lambda page: {"home": (41, None, 7.5)}[page])
    status, config, headers, page = served(embedding)
    assert status == 200 and config["count"] == 41
    # its own script, with the count in it: the policy allows that script by its hash
    [script] = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert f"script-src {sha256(script)};" in headers["Content-Security-Policy"]
    assert headers["Content-Security-Policy"] != serve_page.page_headers("home")["Content-Security-Policy"]


def test_the_page_shares_get_counters_cache_rules(embedding, monkeypatch):
    """One implementation (totals.py): with a cache, pages served within its lifetime read Firestore once."""
    totals, reads = embedding.totals, []
    monkeypatch.setattr(totals, "_cache", {})
    monkeypatch.setattr(totals, "CACHE_TTL_SECONDS", 10)
    monkeypatch.setattr(totals, "read_total", lambda page: reads.append(page) or 40 + len(reads))
    assert [served(embedding)[1]["count"] for _ in range(3)] == [41, 41, 41]
    assert reads == ["home"]


@pytest.mark.parametrize("failure, severity", [("unavailable", "WARNING"), (RuntimeError("no credentials"), "ERROR")])
def test_a_total_that_cannot_be_read_leaves_the_page_as_it_is_by_default(embedding, monkeypatch, capsys, failure,
                                                                          severity):
    totals = embedding.totals
    error = totals.Unavailable("503 down", 2) if failure == "unavailable" else failure

    def cached_total(page):
        raise error

    monkeypatch.setattr(totals, "cached_total", cached_total)
    status, config, headers, page = served(embedding)
    assert status == 200 and "count" not in config  # the page reads its count from get-counter itself
    assert page == embedding.render("home") and headers["Content-Security-Policy"] == embedding.page_headers(
        "home")["Content-Security-Policy"]
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert line["severity"] == severity and line["answered"] == "page without count"


def test_a_stale_total_is_embedded_as_get_counter_answers_it_and_logged(embedding, monkeypatch, capsys):
    monkeypatch.setattr(embedding.totals, "cached_total", lambda page: (41, "504 Deadline Exceeded", 0))
    assert served(embedding)[1]["count"] == 41
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert line["severity"] == "WARNING" and line["answered"] == "stale"



@pytest.mark.parametrize("view", ["home", "about_offices"])
@pytest.mark.parametrize("count", [0, 7, 1234567, 10**12])
def test_the_page_with_its_count_is_made_from_parts_exactly_as_rendered_whole(view, count):
    assert serve_page.with_count(view, count) == (serve_page.render_with(view, count),
                                                  serve_page.headers_of(serve_page.render_with(view, count)))


# ---- compression: the page goes gzipped to a client that takes gzip, as it is to any other ----------
def answered(accept_encoding=None, module=serve_page, view="home"):
    """(headers, body) of GET /app?view=VIEW sent with that Accept-Encoding (None: without the header)."""
    headers = {} if accept_encoding is None else {"Accept-Encoding": accept_encoding}
    with flask.Flask(__name__).test_request_context(f"/app?view={view}", headers=headers):
        reply = flask.make_response(module.serve_page(flask.request))
    return reply.headers, reply.get_data()


@pytest.mark.parametrize("view", ["home", "about_offices"])
def test_a_client_that_takes_gzip_gets_the_page_gzipped(view):
    headers, body = answered("gzip, deflate, br, zstd", view=view)  # as Chromium sends it
    assert headers["Content-Encoding"] == "gzip" and headers["Vary"] == "Accept-Encoding"
    assert gzip.decompress(body).decode() == serve_page.render(view)
    assert int(headers["Content-Length"]) == len(body) < len(serve_page.render(view).encode()) / 2


@pytest.mark.parametrize("accept_encoding", [None, "", "identity", "br, deflate", "gzip;q=0", "GZIP; Q=0.000, br",
                                             "*;q=0", "gzip;q=0, *", "identity;q=1, gzip;q=0.5", "gzip;q=2"])
def test_a_client_that_does_not_take_gzip_gets_the_page_as_it_is(accept_encoding):
    headers, body = answered(accept_encoding)
    assert "Content-Encoding" not in headers and body.decode() == serve_page.render("home")
    assert headers["Vary"] == "Accept-Encoding"  # a shared cache must not hand this one to a gzip client either


@pytest.mark.parametrize("accept_encoding", ["gzip", "x-gzip", "*", "gzip;q=0.001", "br;q=1, gzip;q=0.5",
                                             "identity;q=0.5, gzip", "gzip;q=1.0, identity;q=1"])
def test_gzip_goes_whenever_the_client_weighs_it_above_0_and_no_lower_than_identity(accept_encoding):
    assert answered(accept_encoding)[0]["Content-Encoding"] == "gzip"


def test_each_page_is_compressed_once_and_served_from_memory(monkeypatch):
    answered("gzip", view="jobs")
    compressions = []
    monkeypatch.setattr(serve_page.gzip, "compress", lambda *args, **kwargs: compressions.append(args))
    assert gzip.decompress(answered("gzip", view="jobs")[1]).decode() == serve_page.render("jobs")
    assert compressions == []  # compressing a page costs about as much CPU as the rest of its request


def test_the_page_with_its_count_goes_gzipped_with_that_count(embedding, monkeypatch):
    monkeypatch.setattr(embedding.totals, "cached_total", lambda page: (41, None, 7.5))
    headers, body = answered("gzip", module=embedding)
    page, page_headers = embedding.with_count("home", 41)
    assert headers["Content-Encoding"] == "gzip" and gzip.decompress(body).decode() == page
    assert headers["Content-Security-Policy"] == page_headers["Content-Security-Policy"]

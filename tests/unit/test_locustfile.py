"""The Locust visitor's POST of a visit (pure logic: a fake client answers in turn; no wait)."""
from types import SimpleNamespace

import pytest

import locustfile


class Client:
    def __init__(self, *statuses):
        self.statuses, self.posts = list(statuses), []

    def post(self, url, name, headers):
        self.posts.append(url)
        return SimpleNamespace(status_code=self.statuses.pop(0))


@pytest.fixture
def ledger(monkeypatch):
    fresh = locustfile.VisitLedger()
    monkeypatch.setattr(locustfile, "ledger", fresh)
    monkeypatch.setattr(locustfile.gevent, "sleep", lambda seconds: None)
    return fresh


@pytest.mark.parametrize("statuses, retries, posts, outcome", [
    ((503, 0, 202), 3, 3, "acknowledged"),  # a 5xx and no answer are posted again, with the same id
    ((503, 503, 503), 2, 3, "failed"),  # up to `retries` more times
    ((503, 202), 0, 1, "failed"),  # the study's visitor: never
    ((429,), 3, 1, "refused"),  # a 4xx was not published: not retried
    ((503, 429), 3, 2, "failed"),  # nor after an earlier 5xx: this answer decides, the visit stays ambiguous
])
def test_a_visit_is_posted_again_only_after_a_5xx_or_no_answer(ledger, statuses, retries, posts, outcome):
    user = SimpleNamespace(client=Client(*statuses), host="http://x")
    locustfile.post_visit(user, "jobs", retries)
    assert len(user.client.posts) == posts and len(set(user.client.posts)) == 1  # one visit id throughout
    written = ledger.as_dict()
    assert written[outcome] == {"jobs": 1} and written["sent"] == {"jobs": 1}


def test_the_visitor_sends_the_headers_of_the_studys_client_python_requests():
    headers = locustfile.Visitor.default_headers
    assert headers["User-Agent"].startswith("python-requests/") and headers["Accept"] == "*/*"
    assert "gzip" in headers["Accept-Encoding"] and "br" not in headers["Accept-Encoding"].split(", ")

"""The load-generator benchmark's HAProxy (visitkit.benchmarks.noopfront), for real: it answers as the no-op
function over HTTP and TLS, and Locust's own client keeps one connection on a kept-alive frontend but opens
one per request where HAProxy closes them (the benchmark's new-connection scenario)."""
import shutil

import pytest
from locust.contrib.fasthttp import FastHttpSession
from locust.env import Environment

from visitkit.benchmarks import noopfront

pytestmark = [pytest.mark.timeout(60), pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy is not installed")]
REQUESTS = 6


def test_a_kept_alive_frontend_takes_one_connection_and_a_closing_one_a_connection_per_request():
    frontends = {"plain": ("http", "kept-alive"), "tls": ("https", "kept-alive"), "fresh": ("https", "per-request")}
    with noopfront.running(frontends) as front:
        assert front.tls.startswith("TLSv1.3")
        before = front.counts()
        for name in frontends:
            session = FastHttpSession(front.urls[name], Environment().events.request, None, insecure=True)
            answers = [session.get("/app?view=home") if i % 2 else session.post("/inc-counter?visit_type=home")
                       for i in range(REQUESTS)]
            assert [answer.status_code for answer in answers] == [202, 200] * (REQUESTS // 2)
            assert answers[1].text == noopfront.BODY
        taken = {name: tuple(after - then for after, then in zip(front.counts()[name], before[name]))
                 for name in frontends}
    assert taken == {"plain": (1, REQUESTS), "tls": (1, REQUESTS), "fresh": (REQUESTS, REQUESTS)}

"""The platform's limits (instances x concurrency, queue, 429), the cache TTL, and `down`.

One stack with every function at 1 instance of concurrency 1, a 15 s cache and a 1 s queue.
"""
import contextlib
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import running_stack, write_settings
from helpers import call, platform_figures

from visitkit.net import port_is_open, wait_until
from visitkit.twin.stack import group_alive

QUEUE_TIMEOUT = 1.0
# Long enough that storing a visit and reading the counter again fit inside it on a slow machine.
CACHE_TTL = 15


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    folder = tmp_path_factory.mktemp("limited")
    settings = write_settings(folder / "settings.json", ttl=CACHE_TTL, instances=1)
    with running_stack(folder / "state", settings, queue_timeout=QUEUE_TIMEOUT) as local:
        yield local


def inc_figures(stack):
    # HAProxy's figures alone: quick enough to poll within the 1 s queue timeout
    return platform_figures(stack)["inc-counter"]


@contextlib.contextmanager
def held_instance(stack, path="/inc-counter?visit_type=home"):
    """A request whose body arrives slowly: the instance's only thread waits on it. Yields a
    release() that sends the body and returns the status it then gets; the connection is closed
    on the way out whatever happens, so a failed test leaves the instance free for the next."""
    host, port = stack.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:  # bounds every recv below
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Length: 2\r\n\r\n".encode())
        assert wait_until(lambda: inc_figures(stack)["in_flight"] == 1, timeout=10, interval=0.1), "not held"

        def release():
            sock.sendall(b"{}")
            return int(sock.recv(100).split()[1])

        yield release


def timed_visit(stack, page="home"):
    started = time.monotonic()
    status, reply = call(f"{stack.base_url}/inc-counter?visit_type={page}", "POST")
    return status, reply, time.monotonic() - started


def test_requests_beyond_the_instance_limit_wait_the_queue_timeout_then_get_429(limited):
    before = inc_figures(limited)
    with held_instance(limited) as release, ThreadPoolExecutor(max_workers=3) as pool:
        answers = list(pool.map(lambda _: timed_visit(limited), range(3)))
        assert release() == 202  # the held request completes normally once its body arrives
    for status, reply, waited in answers:
        assert status == 429
        assert "too many requests" in reply["error"]
        # queued for the whole queue timeout, not refused at once, and not kept much longer
        assert QUEUE_TIMEOUT <= waited < QUEUE_TIMEOUT + 1.0, waited
    after = inc_figures(limited)
    assert after["responses_429"] - before["responses_429"] == 3
    assert after["responses_2xx"] - before["responses_2xx"] == 1


def test_a_queued_request_is_served_once_the_instance_frees_in_time(limited):
    before = inc_figures(limited)
    with held_instance(limited) as release, ThreadPoolExecutor(max_workers=1) as pool:
        queued = pool.submit(timed_visit, limited)
        assert wait_until(lambda: inc_figures(limited)["queued"] == 1, timeout=QUEUE_TIMEOUT / 2, interval=0.05)
        assert release() == 202  # the slot frees inside the queue timeout
        status, _, waited = queued.result()
    assert status == 202 and waited < QUEUE_TIMEOUT
    after = inc_figures(limited)
    assert after["responses_2xx"] - before["responses_2xx"] == 2 and after["responses_429"] == before["responses_429"]


def test_get_counter_serves_from_its_cache_until_the_ttl_ends(limited):
    url = f"{limited.base_url}/get-counter?visit_type=jobs"
    asked = time.monotonic()
    first = call(url)[1]["count"]  # cached by the instance at some moment after `asked`
    assert call(f"{limited.base_url}/inc-counter?visit_type=jobs", "POST")[0] == 202
    assert wait_until(lambda: limited.totals()["jobs"] == first + 1, timeout=CACHE_TTL / 3, interval=0.1)
    assert call(url)[1]["count"] == first  # stored, but the cached total is served until the TTL ends
    assert wait_until(lambda: call(url)[1]["count"] == first + 1, timeout=CACHE_TTL + 5, interval=0.2)
    assert time.monotonic() - asked >= CACHE_TTL  # not refreshed before its TTL


def test_down_stops_every_process_and_frees_every_port(tmp_path):
    with running_stack(tmp_path / "state") as local:  # its own stack: no other test depends on this one
        processes = local.state()["processes"]
        names = {p["name"] for p in processes}
        assert {"firestore-emulator", "pubsub-emulator", "haproxy", "inc-counter-0", "store-inc-counter-0"} <= names
        local.down()
        for process in processes:
            assert not group_alive(process["pid"]), process["name"]  # zombies left to init don't run
            assert not port_is_open(process["port"]), process["name"]
        assert local.state() is None


def test_each_instance_logs_once_at_start_the_requests_it_serves_at_once(limited):
    for name in ("serve-page-0", "get-counter-0", "inc-counter-0", "store-inc-counter-0"):
        lines = (limited.logs / f"{name}.log").read_text().splitlines()
        started = [json.loads(line) for line in lines if '"instance started"' in line]
        assert len(started) == 1, name
        assert started[0]["threads"] == 1 and started[0]["service"] == name.rsplit("-", 1)[0].replace(
            "serve-page", "app")

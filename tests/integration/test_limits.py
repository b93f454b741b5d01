"""The platform's limits (instances x concurrency, queue, 429), the cache TTL, and `down`.

One stack with every function at 1 instance of concurrency 1, a 5 s cache and a 1 s queue.
"""
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import running_stack, write_settings
from helpers import call, wait_for

from visitkit.net import port_is_open
from visitkit.stack import group_alive

QUEUE_TIMEOUT = 1.0
CACHE_TTL = 5


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    folder = tmp_path_factory.mktemp("limited")
    settings = write_settings(folder / "settings.json", ttl=CACHE_TTL, instances=1)
    with running_stack(folder / "state", settings, queue_timeout=QUEUE_TIMEOUT) as local:
        yield local


def hold_instance(base_url, path):
    """Opens a request whose body arrives slowly: the instance's only thread waits on it."""
    host, port = base_url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Length: 2\r\n\r\n".encode())
    return sock


def test_requests_beyond_the_instance_limit_wait_then_get_429(limited):
    before = limited.sample()["functions"]["inc-counter"]
    held = hold_instance(limited.base_url, "/inc-counter?visit_type=home")
    wait_for(lambda: limited.sample()["functions"]["inc-counter"]["in_flight"] == 1, timeout=10, interval=0.1)

    def visit(_):
        started = time.monotonic()
        status, reply = call(f"{limited.base_url}/inc-counter?visit_type=home", "POST")
        return status, reply, time.monotonic() - started

    with ThreadPoolExecutor(max_workers=3) as pool:
        answers = list(pool.map(visit, range(3)))
    for status, reply, waited in answers:
        assert status == 429
        assert "too many requests" in reply["error"]
        assert waited >= QUEUE_TIMEOUT * 0.9  # it was queued first, not refused at once

    held.sendall(b"{}")  # the held request completes normally once its body arrives
    assert held.recv(100).startswith(b"HTTP/1.1 202")
    held.close()
    after = limited.sample()["functions"]["inc-counter"]
    assert after["responses_429"] - before["responses_429"] == 3
    assert after["responses_2xx"] - before["responses_2xx"] == 1


def test_get_counter_serves_from_its_cache_until_the_ttl_ends(limited):
    url = f"{limited.base_url}/get-counter?visit_type=jobs"
    first = call(url)[1]["count"]
    cached_at = time.monotonic()
    assert call(f"{limited.base_url}/inc-counter?visit_type=jobs", "POST")[0] == 202
    assert wait_for(lambda: limited.totals()["jobs"] == first + 1, timeout=CACHE_TTL - 1, interval=0.1)
    if time.monotonic() - cached_at < CACHE_TTL - 0.5:  # still inside the TTL: the stale total
        assert call(url)[1]["count"] == first
    time.sleep(max(0.0, cached_at + CACHE_TTL + 0.2 - time.monotonic()))
    assert call(url)[1]["count"] == first + 1


def test_down_stops_every_process_and_frees_every_port(limited):
    processes = limited.state()["processes"]
    assert len(processes) == 7  # 2 emulators, 4 function instances, HAProxy
    limited.down()
    for process in processes:
        assert not group_alive(process["pid"]), process["name"]  # zombies left to init don't run
        assert not port_is_open(process["port"])
    assert limited.state() is None

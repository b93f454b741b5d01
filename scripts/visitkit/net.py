"""Small network helpers shared by the local stack, the runner and the Google Cloud target."""
import http.client
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

_given: set[int] = set()
_given_lock = threading.Lock()
T = TypeVar("T")


def free_port() -> int:
    """A port free now and never handed out before by this process: a port given to a server that
    has not bound it yet (an emulator's JVM takes seconds) is still free to the kernel, which may
    offer it again, and two parts of a stack would then share it."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        with _given_lock:
            if port not in _given:
                _given.add(port)
                return port


def port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: its status, its headers (names in lower case) and the start of its body."""
    status: int
    headers: Mapping[str, str]
    body: bytes


def http_answer(url: str, method: str = "GET", timeout: float = 2.0, headers: Mapping[str, str] | None = None,
                limit: int = 65536) -> Answer | None:
    """One request's answer, error statuses included (its body read up to `limit` bytes), or None
    when nothing answered."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None,
                                     headers=dict(headers or {}))
    try:
        try:
            reply = urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as error:
            reply = error
        with reply:
            return Answer(reply.status, {name.lower(): value for name, value in reply.headers.items()},
                          reply.read(limit))
    except (OSError, urllib.error.URLError, http.client.HTTPException):  # nothing, or no HTTP/1 server, answered
        return None


def http_status(url: str, method: str = "GET", timeout: float = 2.0,
                headers: Mapping[str, str] | None = None) -> int | None:
    """The status of one request, error statuses included, or None when nothing answered."""
    answer = http_answer(url, method, timeout, headers, limit=0)
    return answer.status if answer else None


def wait_until(condition: Callable[[], T], timeout: float, interval: float = 0.2,
               now: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep) -> T:
    """Calls condition() until it returns something truthy or `timeout` seconds pass; returns
    its last value."""
    deadline = now() + timeout
    while True:
        value = condition()
        if value or now() >= deadline:
            return value
        sleep(interval)

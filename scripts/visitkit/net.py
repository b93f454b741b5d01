"""Small network helpers shared by the local stack, the runner and the Google Cloud target."""
import http.client
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
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


def http_status(url: str, method: str = "GET", timeout: float = 2.0,
                headers: Mapping[str, str] | None = None) -> int | None:
    """The status of one request, error statuses included, or None when nothing answered."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None,
                                     headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status
    except urllib.error.HTTPError as error:
        return error.code
    except (OSError, urllib.error.URLError, http.client.HTTPException):  # nothing, or no HTTP/1 server, answered
        return None


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

"""Toxiproxy, the TCP proxy that puts a profile's network latency between the function instances
and the emulators (these machines have no `tc netem`).

scripts/setup-system builds it from its Go module into build/toxiproxy/bin/server; the local stack
starts it, then creates one proxy per backend through its HTTP API with a latency toxic on each
direction (half the profile's round trip each way).
"""
import json
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from visitkit.errors import StackError
from visitkit.paths import ROOT

BINARY = ROOT / "build" / "toxiproxy" / "bin" / "server"  # where scripts/setup-system builds it
MISSING = (f"Toxiproxy was not found at {BINARY.relative_to(ROOT)}: a latency profile needs it. Build it with "
           "`make setup` (scripts/setup-system builds it from its Go module; Go must be installed).")


def binary() -> str:
    """The Toxiproxy server to run: TOXIPROXY_SERVER, else the one setup built."""
    found = os.environ.get("TOXIPROXY_SERVER") or (str(BINARY) if BINARY.exists() else shutil.which("toxiproxy-server"))
    if not found:
        raise StackError(MISSING)
    return found


def server_command(port: int) -> list[str]:
    return [binary(), "-host", "127.0.0.1", "-port", str(port)]


def latency_toxics(round_trip_ms: float) -> list[dict[str, Any]]:
    """The two toxics that add `round_trip_ms` to one request and its answer."""
    half = round_trip_ms / 2
    return [{"name": f"latency_{stream}", "type": "latency", "stream": stream, "toxicity": 1.0,
             "attributes": {"latency": int(round(half)), "jitter": 0}} for stream in ("upstream", "downstream")]


class Toxiproxy:
    """The HTTP API of a running Toxiproxy server at "host:port"."""

    def __init__(self, address: str):
        self.url = f"http://{address}"

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                text = reply.read()
        except urllib.error.HTTPError as error:
            raise StackError(f"Toxiproxy refused {method} {path}: {error.code} {error.read().decode()}") from None
        return json.loads(text) if text.strip() else None

    def proxy(self, name: str, listen: str, upstream: str, round_trip_ms: float) -> None:
        """A proxy from `listen` to `upstream` adding `round_trip_ms` per request and answer."""
        self._call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})
        for toxic in latency_toxics(round_trip_ms):
            self._call("POST", f"/proxies/{name}/toxics", toxic)

    def toxic(self, proxy: str, toxic: Mapping[str, Any]) -> None:
        """Adds a toxic (Toxiproxy's JSON: name, type, stream, attributes) to a proxy's connections,
        the open ones included; a test's fault."""
        self._call("POST", f"/proxies/{proxy}/toxics", {"toxicity": 1.0, **toxic})

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def proxies(self) -> dict[str, Any]:
        return self._call("GET", "/proxies")

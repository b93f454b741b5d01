"""The local platform front end: an HAProxy configuration that limits each function as Cloud
Functions does (max instances x concurrency requests in flight, a queue, then 429), and the
reading of its statistics into server-side samples.
"""
import csv
import io
import re
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path

from visitkit.catalogue import PUBLIC_PATHS, PUBLISHER_FUNCTION, PUSH_FUNCTION
from visitkit.samples import FunctionFigures
from visitkit.settings import Settings
from visitkit.twin import cloudrun

# HAProxy sends this (as its 503 error file) when a request waited the whole queue timeout:
# Cloud Functions answers 429 when no instance could take a request in time.
TOO_MANY_REQUESTS = (
    "HTTP/1.1 429 Too Many Requests\r\n"
    "Content-Type: application/json\r\n"
    "Cache-Control: no-store\r\n"
    "Connection: close\r\n"
    "\r\n"
    '{"error": "too many requests: every instance of this function is busy, try again later"}\n'
)

# inc-counter answers 202 once Pub/Sub accepted a visit; HAProxy's own figures only count status
# classes (a CORS preflight's 204 is a 2xx too), so a one-entry stick table counts the 202s.
ACCEPTED_TABLE = PUBLISHER_FUNCTION  # the table of its backend
ACCEPTED_RULES = ["    stick-table type integer size 1 store gpc0",
                  "    http-request track-sc0 int(1)",
                  "    http-response sc-inc-gpc0(0) if { status 202 }"]

# An autoscaled backend's requests wait here for an instance while none is UP (autoscaler.py starts one).
AWAIT_INSTANCE_LUA = Path(__file__).with_name("await_instance.lua")

# With request_log, one JSON line per request on HAProxy's stdout (the stack's haproxy.log): when HAProxy
# accepted it (unix s; it ended total_ms later), the backend (a function, or the front end that answered
# itself), its status (a 429 of the queue is logged as the 503 of its error file), its whole time, the part
# it queued and the instance's (-1: no instance answered), its method and path.
REQUEST_LOG_FORMAT = ('{"time":%Ts.%ms,"backend":"%b","status":%ST,"total_ms":%Ta,"queue_ms":%Tw,'
                      '"response_ms":%Tr,"method":"%HM","path":"%HPO"}')


def render_config(*, public_port: int, push_port: int, stats_address: str, errorfile_path: str | Path,
                  instances: Mapping[str, list[int]], settings: Settings, queue_timeout: float,
                  deployment: cloudrun.Deployment | None = None, request_log: bool = False,
                  started: Mapping[str, int] | None = None) -> str:
    """instances: function -> [port of each functions-framework process]. deployment: Cloud Run's access
    rules of an applied deployment in front of each function (cloudrun.py); None lets every request in.
    started: the autoscaled functions (autoscaler.py) -> how many of their instances run at first; their
    other servers start in maintenance, and their requests wait for an instance (AWAIT_INSTANCE_LUA)."""
    started = started or {}
    lines = [
        "global",
        # On TCP rather than a unix socket, whose path length is limited (state folders can be deep).
        # admin: the autoscaler sets servers ready, drain or maint.
        f"    stats socket ipv4@{stats_address} level admin",
        "    maxconn 4000",
        *([f"    lua-load {AWAIT_INSTANCE_LUA}"] if started else []),
        *(["    log stdout format raw local0 info"] if request_log else []),
        "",
        "defaults",
        "    mode http",
        *(["    log global", "    log-format " + _quoted(REQUEST_LOG_FORMAT)] if request_log else []),
        "    timeout connect 5s",
        "    timeout client 5m",
        f"    timeout queue {int(queue_timeout * 1000)}ms",
        # One connection per request to an instance: its concurrency counts requests, not idle sockets.
        "    option http-server-close",
        # A crashed instance refuses connections: try another one, as the platform would.
        "    retries 3",
        "    option redispatch 1",
        f"    errorfile 503 {errorfile_path}",
        "",
        "frontend public",
        f"    bind 127.0.0.1:{public_port}",
    ]
    # A path no function is deployed on: 404, as Google's front answers it.
    deployed = {path: function for path, function in PUBLIC_PATHS.items()
                if deployment is None or function in deployment.services}
    known = " ".join(f"!{{ path {path} }}" for path in deployed)
    lines.append("    http-request return status 404 content-type application/json "
                 f"string '{{\"error\": \"no function at this path\"}}' if {known}")
    tokens = cloudrun.token_rules(deployment.public_key) if deployment else []
    lines += tokens
    lines += [f"    use_backend {function} if {{ path {path} }}" for path, function in deployed.items()]
    lines += [
        "",
        "# Only push delivery (the push relay, playing Pub/Sub) reaches store-inc-counter, as on Google Cloud.",
        "frontend pubsub-push",
        f"    bind 127.0.0.1:{push_port}",
        *tokens,
        f"    default_backend {PUSH_FUNCTION}",
    ]
    for function, ports in instances.items():
        spec = settings.functions[function]
        lines += ["", f"backend {function}", f"    timeout server {spec.timeout_seconds}s"]
        if deployment is not None and function in deployment.services:
            lines += cloudrun.access_rules(deployment.services[function], Path(errorfile_path).parent)
        if function == ACCEPTED_TABLE:
            lines += ACCEPTED_RULES
        if function in started:
            lines.append(f"    http-request lua.await_instance {int(queue_timeout * 1000)}")
        # observe layer4: the first refused connection marks a crashed instance down at once,
        # so retried requests go to a live one instead of waiting for the next health check.
        lines += [f"    server {server_name(i)} 127.0.0.1:{port} maxconn {spec.concurrency} "
                  "check inter 1s observe layer4 error-limit 1 on-error mark-down"
                  + (" disabled" if i >= started.get(function, len(ports)) else "")
                  for i, port in enumerate(ports)]
    return "\n".join(lines) + "\n"


def server_name(index: int) -> str:
    """HAProxy's name of a function's index-th instance."""
    return f"instance-{index}"


def _quoted(text: str) -> str:
    """A string argument of HAProxy's configuration, in double quotes."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ask(stats_address: str, command: str) -> str:
    """One command on HAProxy's stats socket at "host:port"; its whole answer."""
    host, port = stats_address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.settimeout(5)
        sock.sendall(command.encode() + b"\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def show_stat(stats_address: str) -> list[dict[str, str]]:
    """HAProxy's `show stat` CSV as a list of dicts."""
    return list(csv.DictReader(io.StringIO(ask(stats_address, "show stat").lstrip("# "))))


def accepted_count(stats_address: str) -> int:
    """How many 202s inc-counter has answered (its stick table's one counter)."""
    return parse_accepted(ask(stats_address, f"show table {ACCEPTED_TABLE}"))


def parse_accepted(table_text: str) -> int:
    found = re.search(r"\bgpc0=(\d+)", table_text)
    return int(found[1]) if found else 0


def _int(value: str | None) -> int:
    return int(value) if value not in (None, "") else 0


def is_server(row: Mapping[str, str]) -> bool:
    """A `show stat` row of one server (an instance), not a proxy's FRONTEND or BACKEND summary."""
    return row["svname"] not in ("BACKEND", "FRONTEND")


def servers_not_up(rows: Iterable[Mapping[str, str]]) -> list[str]:
    """"backend/server" of every server `show stat` rows do not report UP. A server HAProxy checked
    before its instance listened is DOWN until two checks pass (1 s apart), and meanwhile HAProxy
    refuses its requests (its 503 error file: a 429) if the function has no other server UP.
    A server in maintenance is an autoscaled instance not started (or drained): not waited for."""
    return [f"{r['pxname']}/{r['svname']}" for r in rows
            if is_server(r) and not r["status"].startswith(("UP", "MAINT", "DRAIN"))]


def function_figures(rows: list[dict[str, str]], functions: Iterable[str]) -> dict[str, FunctionFigures]:
    """Per function: in flight, queued and cumulative response counts, from `show stat` rows.

    HAProxy counts the 429s it sends as 503s (they are its 503 error file) under hrsp_5xx; the
    functions themselves never answer 429, so every queue timeout is one `dcon`-free 503 that was
    never sent to a server: cumulative 429s = responses HAProxy made itself (hrsp_5xx minus the
    5xx the instances sent).
    """
    figures: dict[str, FunctionFigures] = {}
    for function in functions:
        backend = next((r for r in rows if r["pxname"] == function and r["svname"] == "BACKEND"), None)
        servers = [r for r in rows if r["pxname"] == function and is_server(r)]
        if backend is None:
            continue
        server_5xx = sum(_int(s["hrsp_5xx"]) for s in servers)
        figures[function] = {
            # an autoscaled function's drained instance is up, idle (autoscaler.py); one in maintenance is not up
            "instances": sum(1 for s in servers if s["status"].startswith(("UP", "DRAIN"))),
            "in_flight": sum(_int(s["scur"]) for s in servers),
            "queued": _int(backend["qcur"]),
            "requests": _int(backend["req_tot"]),
            "responses_2xx": _int(backend["hrsp_2xx"]),
            "responses_4xx": _int(backend["hrsp_4xx"]),
            "responses_429": _int(backend["hrsp_5xx"]) - server_5xx,
            "responses_5xx": server_5xx,
            "service_ms": float(_int(backend["rtime"])),
            "service_ms_p95": None,
            "queue_ms": float(_int(backend["qtime"])),
        }
    return figures

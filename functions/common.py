"""What the four functions share: pages, settings, request checks, JSON replies, structured logs."""
import atexit
import json
import os
import re
import sys
import threading
import time
import traceback
from pathlib import Path

import flask

import clients

# The one list of pages and Firestore names, shared with Terraform and the kit (deployed beside this file).
CATALOGUE = json.loads((Path(__file__).parent / "catalogue.json").read_text())
PAGES = tuple(CATALOGUE["pages"])
FIRESTORE = CATALOGUE["firestore"]
PAGE_NAME = re.compile(r"^[a-z_]{1,32}$")
# None of the endpoints takes a body; anything larger than this is a mistake or abuse.
MAX_BODY_BYTES = 1024
# The page and the APIs share one origin, which needs no CORS; another site may call the APIs only
# when its origin is listed here (Terraform's cors_allowed_origins).
CORS_ALLOWED_ORIGINS = frozenset(filter(None, os.environ.get("CORS_ALLOWED_ORIGINS", "").split(",")))
# Every JSON reply: never sniffed as another type, never framed.
JSON_SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff",
                         "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'"}
# What Error Reporting reads a structured log line as an error event by.
REPORTED_ERROR_EVENT = "type.googleapis.com/google.devtools.clouderrorreporting.v1beta1.ReportedErrorEvent"
TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
CLOUD_TRACE_CONTEXT = re.compile(r"^([0-9a-fA-F]{32})(?:/([0-9]{1,20}))?(?:;o=[01])?$")
TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
# print() writes a line and its newline in two calls, between which another thread's line can slip:
# each line is written whole, one at a time.
_log_lock = threading.Lock()


def env_int(name, default):
    return int(os.environ.get(name, default))


def shards_of(page):
    """The collection of a page's counter shards."""
    return clients.firestore().collection(FIRESTORE["counters"]).document(page).collection(FIRESTORE["shards"])


def trace_of(request):
    """(trace id, span id) of a request, from W3C traceparent or Cloud Run's X-Cloud-Trace-Context
    ("TRACE_ID/SPAN_ID;o=1", the span in decimal); (None, None) without a well-formed one."""
    found = TRACEPARENT.match(request.headers.get("traceparent", "").strip())
    if found:
        return found[1], found[2]
    found = CLOUD_TRACE_CONTEXT.match(request.headers.get("X-Cloud-Trace-Context", "").strip())
    if found:
        return found[1].lower(), format(int(found[2]), "016x") if found[2] and int(found[2]) < 2**64 else None
    return None, None


def log(severity, message, trace=(None, None), exception=None, **fields):
    """One structured line on stdout: Cloud Logging reads severity and fields from it, nests it under
    its request's trace in Logs Explorer, and Error Reporting takes an ERROR line (with its stack
    trace when there is an exception) as an error event."""
    entry = {"severity": severity, "message": message, **fields}
    trace_id, span_id = trace
    if trace_id and clients.project_id():
        entry["logging.googleapis.com/trace"] = f"projects/{clients.project_id()}/traces/{trace_id}"
        if span_id:
            entry["logging.googleapis.com/spanId"] = span_id
    if severity == "ERROR":
        entry["@type"] = REPORTED_ERROR_EVENT
        entry["serviceContext"] = {"service": os.environ.get("K_SERVICE") or "visitkit"}
        if exception is not None:
            entry["stack_trace"] = "".join(traceback.format_exception(exception))
    line = json.dumps(entry) + "\n"
    with _log_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def log_instance_start():
    """One line per instance at start: the requests it serves at once (THREADS, which the platform's
    concurrency setting should match), so a live run's logs show what it tested. And one as each of
    its processes ends: Cloud Run sends SIGTERM 10 s before it stops an instance, gunicorn traps it and
    lets the requests in flight finish, and then the processes exit."""
    started = time.monotonic()
    service, revision = os.environ.get("K_SERVICE"), os.environ.get("K_REVISION")
    log("INFO", "instance started", service=service, revision=revision, threads=env_int("THREADS", 0) or None)
    atexit.register(lambda: log("INFO", "instance stopping", service=service, revision=revision, pid=os.getpid(),
                                uptime_s=round(time.monotonic() - started, 1)))


def cors_headers():
    """Access-Control-Allow-Origin for a request from an allowed other site, else none."""
    origin = flask.request.headers.get("Origin") if flask.has_request_context() else None
    return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"} if origin in CORS_ALLOWED_ORIGINS else {}


def json_reply(payload, status=200, headers=None):
    response = flask.make_response(json.dumps(payload), status)
    response.headers["Content-Type"] = "application/json"
    response.headers["Cache-Control"] = "no-store"
    response.headers.update(JSON_SECURITY_HEADERS)
    response.headers.update(cors_headers())
    response.headers.update(headers or {})
    return response


def error_reply(status, message, headers=None):
    return json_reply({"error": message}, status, headers)


def check_request(request, methods):
    """A 4xx reply for a request no endpoint should serve, or None when it may go on."""
    if request.method == "OPTIONS":  # CORS preflight: only another site's page sends one
        if request.headers.get("Origin") not in CORS_ALLOWED_ORIGINS:
            return error_reply(403, "cross-site requests are not allowed (CORS_ALLOWED_ORIGINS)")
        return json_reply({}, 204, {"Access-Control-Allow-Methods": ", ".join(methods),
                                    "Access-Control-Max-Age": "3600"})
    if request.method not in methods:  # also the kit's readiness probe, which knows our code by this answer
        return error_reply(405, f"method {request.method} not allowed; use {' or '.join(methods)}",
                           {"Allow": ", ".join(methods)})
    if request.content_length is not None:
        if request.content_length > MAX_BODY_BYTES:
            return error_reply(413, f"request body too large (limit {MAX_BODY_BYTES} bytes)")
    elif len(request.stream.read(MAX_BODY_BYTES + 1)) > MAX_BODY_BYTES:  # chunked, no length given
        return error_reply(413, f"request body too large (limit {MAX_BODY_BYTES} bytes)")
    return None


def from_another_site(request):
    """True when a browser says the request comes from a page of another site not allowed to call: its
    Sec-Fetch-Site (set by the browser; a page cannot forge it) or, from a browser that sends none, its
    Origin against the host it was sent to. A client that sends neither (curl, Locust) is not refused."""
    origin = request.headers.get("Origin")
    if origin in CORS_ALLOWED_ORIGINS:
        return False
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site:
        return fetch_site not in ("same-origin", "none")
    if not origin or origin == "null":
        return origin == "null"  # a sandboxed or file: page
    host = origin.split("://", 1)[-1]
    return host not in {request.host, request.headers.get("X-Forwarded-Host")}


def page_from(request, parameter):
    """(page, None) for a known page named by the query parameter, else (None, a 4xx reply)."""
    values = request.args.getlist(parameter)
    if not values or values == [""]:
        return None, error_reply(400, f"missing query parameter '{parameter}'; one of: {', '.join(PAGES)}")
    if len(values) > 1:
        return None, error_reply(400, f"query parameter '{parameter}' given more than once")
    page = values[0]
    if not PAGE_NAME.match(page):
        return None, error_reply(400, f"invalid {parameter}: a page name is lowercase letters and '_'")
    if page not in PAGES:
        return None, error_reply(404, f"unknown {parameter} '{page}'; one of: {', '.join(PAGES)}")
    return page, None

"""What the four functions share: pages, settings, clients, request checks, JSON replies."""
import json
import os
import re
import sys
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
CORS_HEADERS = {"Access-Control-Allow-Origin": "*"}


def env_int(name, default):
    return int(os.environ.get(name, default))


def shards_of(page):
    """The collection of a page's counter shards."""
    return clients.firestore().collection(FIRESTORE["counters"]).document(page).collection(FIRESTORE["shards"])


def log(severity, message, **fields):
    """One structured line on stdout: Cloud Logging reads severity and fields from it."""
    print(json.dumps({"severity": severity, "message": message, **fields}), file=sys.stdout, flush=True)


def log_instance_start():
    """One line per instance at start: the requests it serves at once (THREADS, which the platform's
    concurrency setting should match), so a live run's logs show what it tested."""
    log("INFO", "instance started", service=os.environ.get("K_SERVICE"), revision=os.environ.get("K_REVISION"),
        threads=env_int("THREADS", 0) or None)


def json_reply(payload, status=200, headers=None):
    response = flask.make_response(json.dumps(payload), status)
    response.headers["Content-Type"] = "application/json"
    response.headers["Cache-Control"] = "no-store"
    response.headers.update(CORS_HEADERS)
    response.headers.update(headers or {})
    return response


def error_reply(status, message, headers=None):
    return json_reply({"error": message}, status, headers)


def check_request(request, methods):
    """A 4xx reply for a request no endpoint should serve, or None when it may go on."""
    if request.method == "OPTIONS":  # CORS preflight from a page served on another host
        return json_reply({}, 204, {"Access-Control-Allow-Methods": ", ".join(methods),
                                    "Access-Control-Max-Age": "3600"})
    if request.method not in methods:
        return error_reply(405, f"method {request.method} not allowed; use {' or '.join(methods)}",
                           {"Allow": ", ".join(methods)})
    if request.content_length is not None:
        if request.content_length > MAX_BODY_BYTES:
            return error_reply(413, f"request body too large (limit {MAX_BODY_BYTES} bytes)")
    elif len(request.stream.read(MAX_BODY_BYTES + 1)) > MAX_BODY_BYTES:  # chunked, no length given
        return error_reply(413, f"request body too large (limit {MAX_BODY_BYTES} bytes)")
    return None


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

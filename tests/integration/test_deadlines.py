"""Every Google call ends at its deadline, retries included (functions/clients.py), and a 503 says
when to come back (Retry-After); get-counter does not pile up behind a frozen Firestore, answers a
cached page at once while it is frozen (stale past a bound), and backs off its reads of it; a
failed write is an error event in the logs, an
instance stopped mid-call answers the call inside Cloud Run's grace, and a site the deployment
allows may call the API: real emulators, each behind a
Toxiproxy proxy that the tests make hold every byte sent through it, and real functions-framework
servers.

The servers get CALL_DEADLINE_SECONDS=3 (8 s deployed) to keep the tests short.
"""
import contextlib
import json
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
from get_counter import STALE_HEADER
from totals import FAILURE_MEMORY_SECONDS
from common import REPORTED_ERROR_EVENT
from helpers import call, function_process, function_server, push_body

from visitkit.catalogue import FIRESTORE
from visitkit.net import free_port, http_status, wait_until
from visitkit.twin import toxiproxy
from visitkit.twin.stack import PROJECT, LocalStack, emulator_commands

pytestmark = pytest.mark.timeout(120)

DEADLINE = 3.0
# What an answer may take beyond the deadline: Flask, the client library's last steps, a busy machine.
SLACK = 2.0
# An answer sooner than this before the deadline was not ended by it: a refused connection is
# answered within about a second here (retried until the retry's own deadline, 1.5 s, has passed).
EARLY = 0.5
CACHE_TTL_SECONDS = 1  # get-counter's, in the concurrent tests: a cached total expires quickly
CONCURRENT = 16
GRACE_S = 10  # from SIGTERM to the end of an instance, on Cloud Run
DEPLOYED_DEADLINE = 8.0  # functions/clients.py's CALL_DEADLINE_SECONDS when the environment sets none
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def backends():
    """The Firestore and Pub/Sub emulators, each behind a Toxiproxy proxy. `route`: the address a
    function is given for each; `direct`: the emulator's own; `proxies`: Toxiproxy's API."""
    firestore, pubsub, api = free_port(), free_port(), free_port()
    firestore_command, pubsub_command = emulator_commands(firestore, pubsub)
    with tempfile.TemporaryDirectory(prefix="deadlines-") as state_dir:
        processes = LocalStack(state_dir)  # for its way of starting and stopping process groups
        state = {"processes": []}
        try:
            processes._start(state, "firestore-emulator", firestore_command, port=firestore)
            processes._start(state, "pubsub-emulator", pubsub_command, port=pubsub)
            processes._start(state, "toxiproxy", toxiproxy.server_command(api), port=api)
            assert wait_until(lambda: all(http_status(f"http://127.0.0.1:{port}/", timeout=1) is not None
                                          for port in (firestore, pubsub, api)), timeout=90, interval=0.2)
            proxies = toxiproxy.Toxiproxy(f"127.0.0.1:{api}")
            direct = {"firestore": f"127.0.0.1:{firestore}", "pubsub": f"127.0.0.1:{pubsub}"}
            route = {name: f"127.0.0.1:{free_port()}" for name in direct}
            for name in direct:
                proxies.proxy(name, route[name], direct[name], round_trip_ms=0)
            # The topic inc-counter publishes to (its default name).
            assert call(f"http://{direct['pubsub']}/v1/projects/{PROJECT}/topics/visits", "PUT", b"{}", JSON)[0] == 200
            yield SimpleNamespace(route=route, direct=direct, proxies=proxies)
        finally:
            processes.down()


@contextlib.contextmanager
def held(backends, name):
    """Toxiproxy holds every byte sent to the emulator, on open connections and new ones alike, until
    the block ends: the emulator is there but never answers, so only a deadline ends a call."""
    backends.proxies.toxic(name, {"name": "hold", "type": "timeout", "stream": "upstream",
                                  "attributes": {"timeout": 0}})
    try:
        yield
    finally:
        backends.proxies.remove_toxic(name, "hold")


def server(function, backends, **env):
    return function_server(function, FIRESTORE_EMULATOR_HOST=backends.route["firestore"],
                           PUBSUB_EMULATOR_HOST=backends.route["pubsub"], CALL_DEADLINE_SECONDS=str(DEADLINE), **env)


def timed(request, *args, **kwargs):
    """(what request(...) answered, seconds it took)."""
    started = time.monotonic()
    answer = request(*args, **kwargs)
    return answer, time.monotonic() - started


# ---- (a) each Google call past its deadline ------------------------------------------------------
def exchange(url, method="GET", body=None, headers=None):
    """(status, parsed JSON or text, headers) of one request."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            status, raw, answered = reply.status, reply.read(), reply.headers
    except urllib.error.HTTPError as error:
        status, raw, answered = error.code, error.read(), error.headers
    return status, json.loads(raw) if "json" in answered.get("Content-Type", "") else raw.decode(), answered


CALLS = {  # function: (the emulator its call goes to, a request making that call, the failure's status,
    #                   its Retry-After)
    "get-counter": ("firestore", lambda url: exchange(f"{url}/?visit_type=jobs"), 503, "1"),  # a read, no cache
    "inc-counter": ("pubsub", lambda url: exchange(f"{url}/?visit_type=home", "POST"), 503, "1"),  # a publish
    "store-inc-counter": ("firestore", lambda url: exchange(url, "POST", push_body("home", str(uuid.uuid4())), JSON),
                          500, None),  # a commit; the 500 makes Pub/Sub deliver the message again
}


@pytest.mark.parametrize("function", CALLS)
def test_a_call_that_gets_no_answer_ends_at_its_deadline(backends, function):
    backend, request, failed, retry_after = CALLS[function]
    with server(function, backends) as url:
        assert request(url)[0] < 300  # the same call through the same proxy works: the hold is the fault
        with held(backends, backend):
            (status, reply, headers), took = timed(request, url)
    assert status == failed, reply
    assert DEADLINE - EARLY < took < DEADLINE + SLACK, f"answered {status} after {took:.2f} s"
    assert headers.get("Retry-After") == retry_after  # the page waits at least this before it tries again


# ---- (b) get-counter's concurrent reads while Firestore is frozen ------------------------------
@pytest.fixture(scope="module")
def counter(backends):
    """get-counter with a cache, serving CONCURRENT requests at once (one thread each)."""
    with server("get-counter", backends, THREADS=str(CONCURRENT), CACHE_TTL_SECONDS=str(CACHE_TTL_SECONDS)) as url:
        yield url


def read_at_once(url, page):
    """[((status, reply, headers), seconds)] of CONCURRENT GETs of the page sent together."""
    start = threading.Barrier(CONCURRENT)

    def one(_):
        start.wait(timeout=10)
        started = time.monotonic()
        try:  # time enough to tell one deadline from several, not to sit through a queue of 16
            return timed(get, url, page, timeout=3 * DEADLINE)
        except TimeoutError:
            return (None, "no answer", {}), time.monotonic() - started

    with ThreadPoolExecutor(max_workers=CONCURRENT) as pool:
        return list(pool.map(one, range(CONCURRENT)))


def get(url, page, timeout=30):
    """(status, parsed JSON, headers) of one GET of get-counter."""
    try:
        with urllib.request.urlopen(f"{url}/?visit_type={page}", timeout=timeout) as reply:
            return reply.status, json.load(reply), reply.headers
    except urllib.error.HTTPError as error:
        return error.code, json.load(error), error.headers


def seed(backends, page, count):
    """One shard document holding `count` visits, written straight to the emulator."""
    document = (f"http://{backends.direct['firestore']}/v1/projects/{PROJECT}/databases/(default)/documents/"
                f"{FIRESTORE['counters']}/{page}/{FIRESTORE['shards']}/0")
    status, _ = call(document, "PATCH", json.dumps({"fields": {FIRESTORE["count_field"]: {
        "integerValue": str(count)}}}).encode(), JSON)
    assert status == 200


def test_concurrent_reads_of_a_page_never_read_answer_503_within_one_deadline(backends, counter):
    """No total known: the requests queued behind the page's one read answer 503 when it fails, not
    each after a read of its own (the k-th after k deadlines), and say when to come back."""
    with held(backends, "firestore"):
        answers = read_at_once(counter, "about_offices")
        (status, reply, headers), took = timed(get, counter, "about_offices")  # one more, meanwhile
    timings = sorted(round(seconds, 2) for _, seconds in answers)
    assert [status for (status, *_), _ in answers] == [503] * CONCURRENT
    assert max(timings) < DEADLINE + SLACK, timings
    assert min(timings) > DEADLINE - EARLY, timings  # they did wait for the read, which the deadline ended
    # The failure memory's 2 s, or 1 s from a request that gave up waiting just as the read ended.
    retry_afters = [answered["Retry-After"] for (_, _, answered), _ in answers]
    assert "2" in retry_afters and set(retry_afters) <= {"1", "2"}, retry_afters
    assert status == 503 and took < 1.0  # the failure is remembered: no new read, no wait
    assert headers["Retry-After"] in ("1", "2")  # what is left of the memory, rounded up
    time.sleep(FAILURE_MEMORY_SECONDS)  # forgotten; Firestore is back
    assert get(counter, "about_offices")[:2] == (200, {"visit_type": "about_offices", "count": 0})


def test_a_cached_page_answers_at_once_while_firestore_is_frozen_marked_stale_past_the_bound(backends, counter):
    """A total read once, then expired: while Firestore is frozen, every request answers it at once
    (one background read meanwhile waits through its deadline), unmarked while the total is younger
    than its TTL plus the read deadline, marked stale (and never to be kept by a browser) after;
    once Firestore is back, a later read brings the fresh total."""
    seed(backends, "about", 5)
    assert get(counter, "about")[:2] == (200, {"visit_type": "about", "count": 5})
    read_at = time.monotonic()
    seed(backends, "about", 6)
    bound = CACHE_TTL_SECONDS + DEADLINE  # get_counter.STALE_AFTER_SECONDS as this server has it
    time.sleep(CACHE_TTL_SECONDS + 0.2)  # expired
    with held(backends, "firestore"):
        burst = read_at_once(counter, "about")
        answers = []  # (the total's age as the test sees it, (status, reply, headers), seconds taken)
        while (age := time.monotonic() - read_at) < bound + 2 * DEADLINE:  # two failed reads, and on
            answers.append((age, *timed(get, counter, "about")))
            time.sleep(0.25)
    timings = sorted(round(seconds, 2) for _, seconds in burst) + sorted(round(took, 2) for *_, took in answers)
    assert max(timings) < 1.0, timings  # at once: well under the 3 s read deadline
    for (status, reply, headers), _ in burst:
        assert (status, reply) == (200, {"visit_type": "about", "count": 5}) and STALE_HEADER not in headers
    for age, (status, reply, headers), _ in answers:
        assert status == 200 and reply["count"] == 5, (age, reply)
        if age < bound - 0.5:
            assert "stale" not in reply and STALE_HEADER not in headers, (age, reply)
        elif age > bound + 0.5:
            assert reply["stale"] is True and headers[STALE_HEADER] == "true", (age, reply)
            assert headers["Cache-Control"] == "no-store"
    assert wait_until(lambda: get(counter, "about")[:2] == (200, {"visit_type": "about", "count": 6}),
                      timeout=4 * FAILURE_MEMORY_SECONDS + 2 * DEADLINE, interval=0.25)
    assert STALE_HEADER not in get(counter, "about")[2]


@pytest.mark.slow
def test_reads_that_keep_failing_are_tried_less_and_less_often(backends, counter):
    """No total known and Firestore frozen: a request waits for the page's read, which its deadline
    ends, and the failure is remembered, 2 s, then 4 s, then 8 s as reads keep failing; meanwhile
    requests answer 503 at once, Retry-After saying what is left of it."""
    with held(backends, "firestore"):
        for memory in (2, 4, 8):
            (status, _, headers), took = timed(get, counter, "about_legals")
            assert status == 503 and DEADLINE - EARLY < took < DEADLINE + SLACK, took  # a read, to its deadline
            assert headers["Retry-After"] == str(memory)
            failed = time.monotonic()
            time.sleep(memory / 2)
            (status, _, headers), took = timed(get, counter, "about_legals")
            assert status == 503 and took < 1.0, took  # remembered: no read
            assert int(headers["Retry-After"]) in (memory // 2, memory // 2 + 1)
            time.sleep(max(0.0, failed + memory + 0.2 - time.monotonic()))  # forgotten: the next request reads


# ---- (c) what a failure leaves: its answer, its log line, and the end of an instance ------------
def logged_server(function, backends, **env):
    """A server of the function whose stdout (its log lines) is kept: (url, process)."""
    return function_process(function, stdout=subprocess.PIPE, THREADS="4",
                            FIRESTORE_EMULATOR_HOST=backends.route["firestore"],
                            PUBSUB_EMULATOR_HOST=backends.route["pubsub"], **env)


def log_lines(output):
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def post_push(url, message_id):
    """(status, content type) of one push delivery of a visit to store-inc-counter."""
    request = urllib.request.Request(url, push_body("home", message_id), JSON, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=3 * DEADLINE) as reply:
            return reply.status, reply.headers.get_content_type()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get_content_type()


def test_a_write_that_fails_answers_the_frameworks_500_and_logs_an_error_event_with_its_visit(backends):
    """store-inc-counter raises on a failed commit so that Pub/Sub delivers the visit again: the answer
    is functions-framework's own 500 (an HTML page, as openapi.yaml's Failed says), and the line it
    logs is one Error Reporting takes (ERROR, its type, the stack trace) with outcome "failed", which
    the deliveries metric counts, and the message it failed."""
    message_id = str(uuid.uuid4())
    with logged_server("store-inc-counter", backends, CALL_DEADLINE_SECONDS=str(DEADLINE)) as (url, process):
        with held(backends, "firestore"):
            answer = post_push(url, message_id)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=GRACE_S)
    assert answer == (500, "text/html")
    [line] = [line for line in log_lines(output) if line.get("message_id") == message_id]
    assert (line["severity"], line["outcome"], line["@type"]) == ("ERROR", "failed", REPORTED_ERROR_EVENT)
    assert line["stack_trace"].startswith("Traceback") and "DeadlineExceeded" in line["stack_trace"]


def test_an_instance_stopped_while_a_call_hangs_answers_it_within_the_grace(backends):
    """Cloud Run sends SIGTERM and ends the instance 10 s later. A visit whose publish hangs when it
    comes still gets its answer (503: post it again) at the deployed 8 s deadline, not at the SIGTERM:
    the request in flight runs on to its deadline, and the instance ends after answering it, inside
    the grace, having logged that it stops."""
    with logged_server("inc-counter", backends) as (url, process):  # the deployed deadline
        assert call(f"{url}/?visit_type=home", "POST")[0] == 202
        with held(backends, "pubsub"), ThreadPoolExecutor(1) as pool:
            sent = time.monotonic()
            visit = pool.submit(timed, call, f"{url}/?visit_type=home", "POST")
            time.sleep(0.5)  # the request is in flight
            stopped = time.monotonic()
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=GRACE_S)
            ended = time.monotonic() - stopped
            (status, reply), took = visit.result(timeout=GRACE_S)
    answered = sent + took - stopped  # after the SIGTERM
    assert status == 503 and "visit_id" in reply
    assert DEPLOYED_DEADLINE - EARLY < took < DEPLOYED_DEADLINE + SLACK, (
        f"answered {took:.2f} s after it was sent ({answered:.2f} s after SIGTERM): not at the publish's deadline")
    assert answered < GRACE_S, f"answered {answered:.2f} s after SIGTERM, past the grace"
    assert answered - 0.2 < ended < GRACE_S and process.returncode == 0, (
        f"ended {ended:.1f} s after SIGTERM, the visit answered after {answered:.1f} s")
    assert "instance stopping" in [line["message"] for line in log_lines(output)]


# ---- (d) a site the deployment allows to call the API -------------------------------------------
def test_an_origin_the_deployment_allows_may_post_visits_and_others_still_may_not(backends):
    """CORS_ALLOWED_ORIGINS (Terraform's cors_allowed_origins) as a real instance reads it: the listed
    site's preflight and POST get its CORS headers and the visit is published; another site is still
    refused 403 (that a refusal publishes nothing, test_request_trail shows through the stack)."""
    partner, stranger = "https://partner.example", "https://elsewhere.example"
    with logged_server("inc-counter", backends, CORS_ALLOWED_ORIGINS=f"{partner},https://other.example") as (url, _):
        preflight = urllib.request.Request(f"{url}/?visit_type=home", method="OPTIONS", headers={
            "Origin": partner, "Access-Control-Request-Method": "POST", "Sec-Fetch-Site": "cross-site"})
        with urllib.request.urlopen(preflight, timeout=10) as reply:
            assert reply.status == 204 and reply.headers["Access-Control-Allow-Origin"] == partner
            assert "POST" in reply.headers["Access-Control-Allow-Methods"]
        visit = urllib.request.Request(f"{url}/?visit_type=home", method="POST",
                                       headers={"Origin": partner, "Sec-Fetch-Site": "cross-site"})
        with urllib.request.urlopen(visit, timeout=10) as reply:
            assert reply.status == 202 and reply.headers["Access-Control-Allow-Origin"] == partner
            assert json.load(reply)["message_id"]  # Pub/Sub took it
        status, reply = call(f"{url}/?visit_type=home", "POST",
                             headers={"Origin": stranger, "Sec-Fetch-Site": "cross-site"})
        assert status == 403 and "message_id" not in reply

"""The study's visitor: picks a page (home 3 : jobs 4 : about 2 : about_offices 2 : about_legals 1),
loads its HTML, counts the visit and reads the page's counter (unless the page came with its count, as
serve-page serves it with PAGE_EMBEDS_COUNT=1: then it reads none); waits 3 to 5 s between pages.
With --dwell S > 0 the users are Readers instead: the same visit, then the page kept open S seconds,
re-reading its counter as the page does, then the next page. A shape given in visits/s (the open model:
arrival_rate, arrival_ramp, stages in visits/s) runs Arrivals instead: the same visit, started when the
process's arrival clock says (arrivals.py), without think time.

Custom options (see locust/README.md):
  --shape breakpoint|endurance|load|spike   the load shape (default: none, plain -u/-r)
  --shape-set k=v,k=v                       change the shape's settings (its class attributes)
  --stages FILE|users:hold_s,...            endurance stages
  --ledger-file PATH                        write the ledger of every visit (ledger.py) there every
                                            minute and at exit
  --ledger-ids N                            keep at most N visit ids, shared among the workers (default
                                            2,000,000): a uniform sample of them when the shape plans
                                            more visits (ledger.py), else the first N; the rest are
                                            only counted
  --health-file PATH                        write each Locust process's CPU and event-loop lag per second,
                                            and the master's view of its workers (health.py) there as they
                                            come, and in time order at exit
  --per-second-file PATH                    write the exact requests and failures per second there at exit
  --arrivals-file PATH                      open model: write the arrivals per second (target, started, not
                                            started; arrivals.py) there at exit
  --retry-visits N                          post a visit that got a 429, a 5xx or no answer again, with the
                                            same visit id, up to N more times, after what Retry-After asks
                                            or a backoff with jitter (default 0: the study's visitor)
  --dwell S                                 readers who keep each page open S seconds (default 0: the
                                            study's visitor)
  --counter-ttl S                           with --dwell: get-counter's cache TTL (the iteration's
                                            cache_ttl_seconds), which the page's re-reads wait at least
  --think-time MIN-MAX|0                    seconds between pages (default 3-5, the study's; 0: flat out)
  --auth none|id-token                      id-token: every request carries a Google-signed ID token for
                                            its function (an "authenticated" deployment on Google Cloud)
  --audiences JSON                          with --auth id-token: {function name: the audience of its
                                            tokens}, each function's run.app URL (Terraform's
                                            function_audiences); without it, the request's own URL
"""
import functools
import json
import logging
import math
import random
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any

import gevent
import locust.argument_parser
import locust.stats
import requests.utils
from locust import FastHttpUser, between, constant, events, task
from locust.env import Environment
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

import arrivals
import health
import shapes
import tls
from ledger import VisitLedger, outcome_of, sample_fraction

# The study's percentile columns (50/60/70/80/90/95 %), plus the tail.
locust.stats.PERCENTILES_TO_REPORT = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0]
# A Locust 2.47 worker builds the whole option parser once per option of every spawn message
# (runners.py: `k not in argument_parser.default_args_dict()`), ~0.2 s of CPU per message: built
# once here, a worker can follow one-second steps.
locust.argument_parser.default_args_dict = functools.cache(locust.argument_parser.default_args_dict)

LEDGER_KEY, COUNTS_KEY, HEALTH_KEY, ARRIVALS_KEY = "visit_ledger", "visit_counts", "health", "arrivals"
FINAL_REQUEST, FINAL_REPLY = "visit_ledger_request", "visit_ledger_final"
ARRIVALS_END = "arrivals_end"  # the master's (or the only process's) shape: the load is over, stop the clocks
DEFAULT_LEDGER_IDS = 2_000_000  # ~200 bytes each in memory: a master holds them all
# The master writes its merged ledger this often during the run: a crash loses at most this much
# (a fleet's master copies its files to the bucket as often).
LEDGER_WRITE_S = 60.0
ledger = VisitLedger()
probes: list[health.Probe] = []  # the master's or the only process's (a worker ships its own probe's samples)
health_samples: list[Sequence[Any]] = []  # the master's: every worker's samples (rows in HEALTH_COLUMNS' order)
asked: set[str] = set()  # the master's: the client ids of the workers asked for their final ledger
ledger_writer: list[gevent.Greenlet] = []  # the master's or the only process's: writes the ledger every minute
locust_environment: list[Environment] = []  # set at init: the `quit` event does not pass it
id_tokens: list[Any] = []  # set at init with --auth id-token: one visitkit.cloud.idtoken.IdTokens per process
arrival_clock: list[arrivals.ArrivalClock] = []  # open model: this process's, set at test_start (not the master's)
arrival_table: dict[int, list[float]] = {}  # open model, the master's: every worker's arrivals per second
RETRIED_OUTCOMES = ("failed", "unanswered")  # and a 429, refused for now
TOO_MANY_REQUESTS = 429
RETRY_WAIT_MAX_S = 30.0  # the longest wait before a visit is posted again, whatever Retry-After asks
# A page served with its count carries it in its config (functions/serve_page.py), as json.dumps writes it:
# read from the bytes without parsing the page.
EMBEDDED_COUNT = re.compile(rb'"count": (\d+)[,}]')
EMBEDS_KEY = "page_embeds_count"  # a worker's report: it met a page that came with its count
pages_with_count: list[bool] = []  # [True] once this process met one


def study_headers():
    """The headers of the study's client, Python's `requests`: its User-Agent, Accept and
    Accept-Encoding (without br or zstd, which it sent only with extra packages installed)."""
    headers = requests.utils.default_headers()
    encodings = [e.strip() for e in headers["Accept-Encoding"].split(",") if e.strip() not in ("br", "zstd")]
    return {"User-Agent": headers["User-Agent"], "Accept": headers["Accept"], "Accept-Encoding": ", ".join(encodings)}


STUDY_HEADERS = study_headers()


def request_headers(user, path):
    """A request's own headers: Accept-Encoding (FastHttpUser would add br to each request that
    lacks it) and, on an authenticated deployment, the ID token for the path's function (--audiences)."""
    headers = {"Accept-Encoding": STUDY_HEADERS["Accept-Encoding"]}
    if id_tokens:
        headers.update(id_tokens[0].headers(f"{user.host}{path}"))
    return headers


def retry_after(response):
    """The seconds a Retry-After header asks (0 without one, or for an HTTP date)."""
    try:
        return max(0.0, float((response.headers or {}).get("Retry-After") or 0))
    except (AttributeError, TypeError, ValueError):
        return 0.0


def retry_wait(attempt, asked=0.0):
    """The wait before the visit's attempt `attempt` (1: its first retry): 1, 2, 4 ... s, each within
    +-25 % so that visits refused together do not all come back together, or what Retry-After asked
    when longer; at most RETRY_WAIT_MAX_S."""
    return min(max(2 ** (attempt - 1) * random.uniform(0.75, 1.25), asked), RETRY_WAIT_MAX_S)


def post_visit(user, page, retries):
    """Counts one visit under one id, as a careful client does: a 429 (refused for now), a 5xx or no
    answer (its fate unknown) is posted again with the same id (retry_wait), which is safe since a
    visit id counts once, up to `retries` more times; a visit refused (429) every time gave up. Another
    4xx was never published and would not be by retrying. With no retries (the study's visitor) every
    visit is posted once."""
    visit_id, status = str(uuid.uuid4()), None
    response = None  # the previous attempt's answer, whose Retry-After a retry waits for
    try:
        for attempt in range(retries + 1):
            if attempt:
                gevent.sleep(retry_wait(attempt, retry_after(response)))
            headers = request_headers(user, "/inc-counter")  # an ID token that cannot be minted sends nothing
            ledger.record_sent(page, visit_id)
            response = user.client.post(f"/inc-counter?visit_type={page}&visit_id={visit_id}",
                                        name=f"/inc-counter?visit_type={page}", headers=headers)
            status = response.status_code or 0
            ledger.record_answer(visit_id, status)
            if outcome_of(status) not in RETRIED_OUTCOMES and status != TOO_MANY_REQUESTS:  # this answer's
                return
        if status == TOO_MANY_REQUESTS and retries:
            ledger.record_gave_up(visit_id)
    finally:
        ledger.record_done(visit_id)


def embedded_count(response):
    """The count a served page came with, or None (a page without one, or no page)."""
    found = EMBEDDED_COUNT.search(response.content or b"") if 200 <= (response.status_code or 0) < 300 else None
    return int(found[1]) if found else None


def met_a_page_with_its_count(environment):
    """From the first page that came with its count on, a visit is one request fewer: the open model's
    shape sizes its users from the visit's duration, the requests of a visit times their mean time."""
    if pages_with_count:
        return
    pages_with_count.append(True)
    shape = environment.shape_class
    if shape is not None:  # the master's, or the only process's (a worker says so in its reports)
        shape.visit_duration.requests_per_visit = arrivals.requests_per_visit(True)


def visit(user, page):
    """The page, its visit and the count's first read; the response the page's count came in."""
    served = user.client.get(f"/app?view={page}", name=f"/app?view={page}", headers=request_headers(user, "/app"))
    # Read at each visit: a worker's options are the master's once the test starts (Locust issue #2206).
    post_visit(user, page, max(0, user.environment.parsed_options.retry_visits))
    if embedded_count(served) is not None:  # the page shows it: no first read, as the page makes none
        met_a_page_with_its_count(user.environment)
        return served
    return read_count(user, page)


def read_count(user, page):
    return user.client.get(f"/get-counter?visit_type={page}", name=f"/get-counter?visit_type={page}",
                           headers=request_headers(user, "/get-counter"))


class StudyUser(FastHttpUser):
    """What every user of the suite shares: the study's headers, one TLS context per process."""
    abstract = True
    default_headers = STUDY_HEADERS
    ssl_context_factory = staticmethod(tls.shared_context)


class Visitor(StudyUser):
    wait_time = between(3, 5)

    @task(3)
    def home(self):
        visit(self, "home")

    @task(4)
    def jobs(self):
        visit(self, "jobs")

    @task(2)
    def about(self):
        visit(self, "about")

    @task(2)
    def about_offices(self):
        visit(self, "about_offices")

    @task(1)
    def about_legals(self):
        visit(self, "about_legals")


class Reader(StudyUser):
    """A person who keeps the page open (--dwell S > 0): a page picked as the Visitor picks one, its
    visit and first read as the Visitor makes them, then the page stays open `dwell_s` seconds and
    re-reads the count as functions/templates/page.html does: once the previous read has ended, after
    max(its refresh, get-counter's cache TTL) plus up to a fifth as jitter; after an error twice as
    long each time (at least what Retry-After asks, at most backoff_max_s), with jitter. Then the next
    page, at once: the dwell is its time on the page. (The page also stops reading once its reader has
    been idle 10 minutes: a reader is taken as active throughout its dwell.)"""
    dwell_s = 0.0  # --dwell
    ttl_s = 0.0  # --counter-ttl: get-counter's cache TTL (the iteration's cache_ttl_seconds)
    refresh_s = 5.0  # the page's own refresh (serve-page's COUNTER_REFRESH_SECONDS)
    jitter = 0.2  # up to a fifth more
    backoff_max_s = 60.0  # the page's longest wait after errors (COUNTER_BACKOFF_MAX_SECONDS)
    pause_s = 0.0  # what the current wait() sleeps: nothing between pages

    def wait_time(self):
        return self.pause_s

    def pause(self, seconds):
        """Sleeps as Locust does between tasks: a ramp-down stops a reader at once, mid-dwell."""
        self.pause_s = seconds
        try:
            self.wait()
        finally:
            self.pause_s = 0.0

    @task
    def read_a_page(self):
        page = random.choice(Visitor.tasks).__name__  # the study's pages, at the Visitor's weights
        response = visit(self, page)  # the page, its visit and its first read
        interval = max(self.refresh_s, self.ttl_s)
        longest = max(self.backoff_max_s, interval)
        ends, error_wait = time.monotonic() + self.dwell_s, interval
        while True:
            if 200 <= (response.status_code or 0) < 300:
                error_wait, wait = interval, interval * (1 + random.random() * self.jitter)
            else:
                error_wait = min(2 * error_wait, longest)
                wait = min(max(error_wait * random.uniform(0.75, 1), retry_after(response)), longest)
            if time.monotonic() + wait > ends:
                break
            self.pause(wait)
            response = read_count(self, page)
        self.pause(max(0.0, ends - time.monotonic()))


class Arrival(StudyUser):
    """The open model's visitor (a shape in visits/s): takes its process's next arrival (arrivals.py),
    waits until it is due, makes the study's visit to a page picked at the Visitor's weights, without think
    time, and takes the next. Users are many enough that one is free when an arrival is due (the shape
    sizes them); an arrival none took in time is not started. Its waits are Locust's own (User.wait): at the
    end of the load a user waiting for an arrival stops at once."""
    idle_s = 1.0  # with no arrival left to take (the load is over): looks again after this
    pause_s = 0.0  # what the current wait() sleeps: nothing between visits
    wait_time = Reader.wait_time
    pause = Reader.pause

    @task
    def arrive(self):
        clock = arrival_clock[0] if arrival_clock else None
        due = clock.take(clock.elapsed()) if clock else None
        if due is None:
            self.pause(self.idle_s)
            return
        self.pause(max(0.0, due - clock.elapsed()))
        clock.started(due)
        visit(self, random.choice(Visitor.tasks).__name__)


def make_id_tokens(impersonate=None, quota_project=None, audiences=None):
    """The process's IdTokens; `audiences`: --audiences' JSON text, or None."""
    from visitkit.cloud import credentials as google_credentials  # the kit, installed with the suite
    from visitkit.cloud import idtoken

    credentials = google_credentials.default_credentials(quota_project)
    if impersonate:
        credentials = google_credentials.impersonating(credentials, impersonate)
    return idtoken.IdTokens(idtoken.minter(credentials), audiences=json.loads(audiences) if audiences else None)


def think_time(text):
    """'3-5' -> between(3, 5); '0' -> no wait at all."""
    low, _, high = str(text).partition("-")
    return constant(0) if float(low) == 0 and not high else between(float(low), float(high or low))


@events.init_command_line_parser.add_listener
def add_options(parser):
    parser.add_argument("--shape", choices=["none", *shapes.SHAPES], default="none",
                        help="Load shape of the test (default none: plain --users/--spawn-rate)")
    parser.add_argument("--shape-set", default="", help="Shape settings to change, e.g. max_users=300,duration_s=60")
    parser.add_argument("--stages", default=None, help="Endurance stages: a CSV file (users,hold_s) or 300:180,650:120")
    parser.add_argument("--ledger-file", default=None,
                        help="Where to write the ledger of every visit (JSON), every minute and at exit")
    parser.add_argument("--ledger-ids", type=int, default=DEFAULT_LEDGER_IDS,
                        help="Keep at most N visit ids, shared among the workers: a uniform sample when the shape "
                             "plans more visits, else the first N; the rest are only counted")
    parser.add_argument("--health-file", default=None,
                        help="Where to write each Locust process's CPU and event-loop lag per second, and the "
                             "master's view of its workers' heartbeats (CSV), as they come and at exit")
    parser.add_argument("--per-second-file", default=None,
                        help="Where to write the exact requests and failures per second (CSV) at exit")
    parser.add_argument("--arrivals-file", default=None,
                        help="Open model: where to write the arrivals per second (target, started, not started; CSV) "
                             "at exit")
    parser.add_argument("--retry-visits", type=int, default=0,
                        help="Post a visit that got a 429, a 5xx or no answer again, with the same visit id, up to N "
                             "more times (after what Retry-After asks, or 1, 2, 4 ... s with jitter)")
    parser.add_argument("--dwell", type=float, default=0.0,
                        help="Readers who keep each page open this many seconds, re-reading its counter as the page "
                             "does (default 0: the study's visitor)")
    parser.add_argument("--counter-ttl", type=float, default=0.0,
                        help="With --dwell: get-counter's cache TTL in seconds (the iteration's cache_ttl_seconds); "
                             "the page re-reads every max(its 5 s refresh, the TTL)")
    parser.add_argument("--think-time", default="3-5",
                        help="Seconds between pages: MIN-MAX, or 0 for none (benchmarks)")
    parser.add_argument("--auth", choices=["none", "id-token"], default="none",
                        help="id-token: send a Google-signed ID token per function, minted from the "
                             "application-default credentials (or --impersonate), for an authenticated deployment")
    parser.add_argument("--impersonate", default=None,
                        help="With --auth id-token: mint the tokens as this service account")
    parser.add_argument("--quota-project", default=None,
                        help="With --auth id-token: the project Google bills the token calls to (the deployment's)")
    parser.add_argument("--audiences", default=None,
                        help="With --auth id-token: JSON {function name: the audience of its tokens}, each "
                             "function's run.app URL (Terraform's function_audiences); default: the request's URL")


@events.init.add_listener
def on_init(environment, runner, **_kwargs):
    options = environment.parsed_options
    locust_environment.append(environment)
    Visitor.wait_time = think_time(options.think_time)
    set_reader(options)
    if options.auth == "id-token" and not isinstance(runner, MasterRunner):  # the master sends no requests
        id_tokens.append(make_id_tokens(options.impersonate, options.quota_project, options.audiences))
    # every process: a master's shape sends it to the workers, a single process's (LocalRunner) to itself
    runner.register_message(ARRIVALS_END, end_arrivals)
    if isinstance(runner, WorkerRunner):  # a worker spawns whichever class its master dispatches
        serve_as_worker(runner)
        return
    environment.user_classes[:] = [Reader if options.dwell > 0 else Visitor]
    master = isinstance(runner, MasterRunner)
    log = health.HealthLog(options.health_file) if options.health_file else None  # rows appended as they come
    view = health.WorkerView(runner, options.expect_workers) if master else None
    probes.append(health.Probe(runner, "master" if master else "local", view, log))
    probes[0].start()
    if options.ledger_file:
        ledger_writer.append(gevent.spawn(keep_writing_ledger, options.ledger_file))
    if isinstance(runner, MasterRunner):
        collect_as_master(runner)
    if options.shape != "none":
        # Chosen here rather than by class discovery: Locust would run the first shape class it finds.
        shape = shapes.make_shape(options.shape, shapes.parse_assignments(options.shape_set), options.stages)
        shape.runner = runner
        if isinstance(runner, MasterRunner):
            shape.quit_gate = functools.partial(final_ledgers_in, runner)
        if shape.open_model:
            environment.user_classes[:] = [Arrival]
            shape.on_load_end = functools.partial(runner.send_message, ARRIVALS_END)
            shape.arrivals_missed = arrivals_not_started
        environment.shape_class = shape
        logging.info("shape %s, planned %s s", type(shape).__name__, shape.planned_seconds())


@events.test_start.add_listener
def on_test_start(environment, **_kwargs):
    # A worker's own options are its command line's until the first spawn message brings the
    # master's, just before test_start (Locust issue #2206): they are read again here.
    options = environment.parsed_options
    Visitor.wait_time = think_time(options.think_time)
    set_reader(options)
    workers = getattr(options, "expect_workers", 1) if isinstance(environment.runner, WorkerRunner) else 1
    ledger.id_limit = max(1, options.ledger_ids // max(1, workers or 1))
    # Every process alike, from the same options: the sample is one rule, not a share per worker.
    ledger.planned_visits = planned_visits(options)
    ledger.fraction = sample_fraction(options.ledger_ids, ledger.planned_visits)
    if not isinstance(environment.runner, MasterRunner) and options.shape != "none":
        start_arrivals(options, environment.runner, max(1, workers or 1))


def planned_visits(options):
    """The run's planned visits, which the ledger's sample is sized from (shapes.py, planned_visits):
    None without a shape, or for users without think time (nothing bounds their visits)."""
    if options.shape == "none":
        return None
    shape = shapes.make_shape(options.shape, shapes.parse_assignments(options.shape_set), options.stages)
    shortest_think = float(str(options.think_time).partition("-")[0])
    found = shape.planned_visits(options.dwell if options.dwell > 0 else shortest_think)
    return None if found is None else math.ceil(found)


def keep_writing_ledger(path, interval_s=LEDGER_WRITE_S):
    """The merged ledger written every interval_s while the run goes on (ledger.write: whole or not at
    all), so that a copy of the results taken meanwhile holds it."""
    while True:
        gevent.sleep(interval_s)
        try:
            ledger.write(path)
        except OSError as error:  # a full disk must not end the run: the last write stays
            logging.warning("could not write the visit ledger to %s: %s", path, error)


def start_arrivals(options, runner, workers):
    """Open model: this process's arrival clock, from the shape's settings (a worker's come from its master
    with the first spawn message): its share of the rate is 1/workers, and worker i's arrivals come i/workers
    of an arrival after worker 0's, so that together they are evenly spaced."""
    shape = shapes.make_shape(options.shape, shapes.parse_assignments(options.shape_set), options.stages)
    if not shape.open_model:
        return
    index = max(0, getattr(runner, "worker_index", 0)) % workers
    arrival_clock[:] = [arrivals.ArrivalClock(shape.rate_at, 1 / workers, index / workers,
                                              origin_wall=time.time(), origin=time.monotonic(),
                                              gaps=shape.arrival_gaps)]
    logging.info("arrival clock: %d of %d, first arrival at %s s", index, workers, arrival_clock[0].due)


def end_arrivals(environment=None, msg=None, **_kwargs):
    """The load is over (the shape's ARRIVALS_END, or the test's stop): no arrival is started after it."""
    if arrival_clock:
        arrival_clock[0].end(arrival_clock[0].elapsed())


def arrivals_not_started():
    """The shape's count of arrivals not started so far: this process's, or on a master every worker's
    as last reported."""
    if arrival_clock:
        arrival_clock[0].settle(arrival_clock[0].elapsed())
        return arrival_clock[0].not_started
    return int(sum(row[2] for row in arrival_table.values()))


events.test_stop.add_listener(end_arrivals)


def set_reader(options):
    Reader.dwell_s, Reader.ttl_s = max(0.0, options.dwell), max(0.0, options.counter_ttl)


def serve_as_worker(runner):
    probe = health.Probe(runner, runner.client_id)
    probe.start()

    # Each stats report: the visits recorded or changed since the last one, running counts, health.
    @events.report_to_master.add_listener
    def ship_ledger(client_id, data):
        data[LEDGER_KEY], data[COUNTS_KEY], data[HEALTH_KEY] = ledger.take(), ledger.counts(), probe.take()
        data[EMBEDS_KEY] = bool(pages_with_count)
        if arrival_clock:
            data[ARRIVALS_KEY] = arrival_clock[0].take_rows(arrival_clock[0].elapsed())

    def send_final_ledger(environment, msg):
        runner.send_message(FINAL_REPLY, {LEDGER_KEY: ledger.everything(), COUNTS_KEY: ledger.counts()})

    runner.register_message(FINAL_REQUEST, send_final_ledger)


def collect_as_master(runner):
    @events.worker_report.add_listener
    def collect_ledger(client_id, data):
        ledger.report(client_id, data.get(COUNTS_KEY), data.get(LEDGER_KEY))
        health_samples.extend(data.get(HEALTH_KEY, ()))
        if probes and probes[0].log:  # the kit watches them while the load runs
            probes[0].log.append(data.get(HEALTH_KEY, ()))
        arrivals.merge(arrival_table, data.get(ARRIVALS_KEY, ()))
        if data.get(EMBEDS_KEY):
            met_a_page_with_its_count(runner.environment)

    def receive_final_ledger(environment, msg):
        ledger.report(msg.node_id, msg.data[COUNTS_KEY], msg.data[LEDGER_KEY], final=True)

    runner.register_message(FINAL_REPLY, receive_final_ledger)


def final_ledgers_in(runner):
    """The shape's quit gate: asks each connected worker once for its whole ledger, then True once
    every worker asked has replied."""
    if not asked:
        asked.update(client.id for client in runner.clients.values() if client.state != STATE_MISSING)
        for worker in asked:
            runner.send_message(FINAL_REQUEST, None, client_id=worker)
        logging.info("asked %d workers for their final visit ledger", len(asked))
    return all(ledger.workers.get(worker, {}).get("final") for worker in asked)


@events.quit.add_listener
def write_files(**_kwargs):
    # `quit` is the very last event, after the workers' final reports (`quitting` can come before).
    environment = locust_environment[0] if locust_environment else None
    if environment is None or isinstance(environment.runner, WorkerRunner):
        return
    options = environment.parsed_options
    for writer in ledger_writer:
        writer.kill()
    if options.ledger_file:
        ledger.write(options.ledger_file)
    if options.health_file:
        health.write_health(options.health_file, health_samples + (probes[0].samples if probes else []))
    if options.per_second_file:
        health.write_per_second(options.per_second_file, environment.runner.stats.total)
    end_arrivals()
    table = arrival_clock[0].rows if arrival_clock else arrival_table
    if options.arrivals_file and table:  # open model only
        arrivals.write_arrivals(options.arrivals_file, table)

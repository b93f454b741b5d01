"""The study's visitor: picks a page (home 3 : jobs 4 : about 2 : about_offices 2 : about_legals 1),
loads its HTML, counts the visit and reads the page's counter; waits 3 to 5 s between pages.

Custom options (see locust/README.md):
  --shape breakpoint|endurance|load|spike   the load shape (default: none, plain -u/-r)
  --shape-set k=v,k=v                       change the shape's settings (its class attributes)
  --stages FILE|users:hold_s,...            endurance stages
  --ledger-file PATH                        write the ledger of every visit (ledger.py) there at exit
  --retry-visits N                          post a visit that got a 5xx or no answer again, with the same
                                            visit id, up to N more times (default 0: the study's visitor)
  --think-time MIN-MAX|0                    seconds between pages (default 3-5, the study's; 0: flat out)
  --auth none|id-token                      id-token: every request carries a Google-signed ID token for
                                            its function (an "authenticated" deployment on Google Cloud)
"""
import logging
import uuid

import gevent
import locust.stats
from locust import FastHttpUser, between, constant, events, task
from locust.runners import MasterRunner, WorkerRunner

import shapes
from ledger import VisitLedger, outcome_of

# The study's percentile columns (50/60/70/80/90/95 %), plus the tail.
locust.stats.PERCENTILES_TO_REPORT = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0]

LEDGER_KEY = "visit_ledger"
DISTRIBUTED_STEP_S = 10  # see shapes.StudyShape: fewer, larger steps when workers are involved
ledger = VisitLedger()
locust_environment = []  # set at init: the `quit` event does not pass it
id_tokens = []  # set at init with --auth id-token: one visitkit.idtoken.IdTokens per process
RETRIED_OUTCOMES = ("failed", "unanswered")


def auth_headers(user, path):
    """The Authorization header for one function's URL, or none on a public deployment."""
    return id_tokens[0].headers(f"{user.host}{path}") if id_tokens else None


def post_visit(user, page, retries):
    """Counts one visit under one id, as a careful client does: a 5xx or no answer (its fate unknown)
    is posted again with the same id after a backoff of 1, 2, 4 ... s, which is safe since a visit id
    counts once. A 4xx, the platform's 429 included, was never published: it is not retried."""
    visit_id = str(uuid.uuid4())
    for attempt in range(retries + 1):
        if attempt:
            gevent.sleep(2 ** (attempt - 1))
        ledger.record_sent(page, visit_id)
        response = user.client.post(f"/inc-counter?visit_type={page}&visit_id={visit_id}",
                                    name=f"/inc-counter?visit_type={page}", headers=auth_headers(user, "/inc-counter"))
        ledger.record_answer(visit_id, response.status_code or 0)
        if outcome_of(response.status_code or 0) not in RETRIED_OUTCOMES:  # this answer's, not the visit's
            return


def visit(user, page):
    user.client.get(f"/app?view={page}", name=f"/app?view={page}", headers=auth_headers(user, "/app"))
    # Read at each visit: a worker's options are the master's once the test starts (Locust issue #2206).
    post_visit(user, page, max(0, user.environment.parsed_options.retry_visits))
    user.client.get(f"/get-counter?visit_type={page}", name=f"/get-counter?visit_type={page}",
                    headers=auth_headers(user, "/get-counter"))


class Visitor(FastHttpUser):
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


def make_id_tokens(impersonate=None, quota_project=None):
    from visitkit import credentials as google_credentials, idtoken  # the kit, installed with the suite

    credentials = google_credentials.default_credentials(quota_project)
    if impersonate:
        credentials = google_credentials.impersonating(credentials, impersonate)
    return idtoken.IdTokens(idtoken.minter(credentials))


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
    parser.add_argument("--ledger-file", default=None, help="Where to write the ledger of every visit (JSON) at exit")
    parser.add_argument("--retry-visits", type=int, default=0,
                        help="Post a visit that got a 5xx or no answer again, with the same visit id, up to N more times")
    parser.add_argument("--think-time", default="3-5", help="Seconds between pages: MIN-MAX, or 0 for none (benchmarks)")
    parser.add_argument("--auth", choices=["none", "id-token"], default="none",
                        help="id-token: send a Google-signed ID token per function, minted from the application-default "
                             "credentials (or --impersonate), for an authenticated deployment")
    parser.add_argument("--impersonate", default=None,
                        help="With --auth id-token: mint the tokens as this service account")
    parser.add_argument("--quota-project", default=None,
                        help="With --auth id-token: the project Google bills the token calls to (the deployment's)")


@events.init.add_listener
def on_init(environment, runner, **_kwargs):
    options = environment.parsed_options
    locust_environment.append(environment)
    Visitor.wait_time = think_time(options.think_time)
    if options.auth == "id-token" and not isinstance(runner, MasterRunner):  # the master sends no requests
        id_tokens.append(make_id_tokens(options.impersonate, options.quota_project))
    if isinstance(runner, WorkerRunner):
        # Each stats report carries the visits counted since the previous one.
        @events.report_to_master.add_listener
        def ship_ledger(client_id, data):
            data[LEDGER_KEY] = ledger.take()
        return

    if isinstance(runner, MasterRunner):
        @events.worker_report.add_listener
        def collect_ledger(client_id, data):
            ledger.add(data.get(LEDGER_KEY, {}))

    if options.shape != "none":
        # Chosen here rather than by class discovery: Locust would run the first shape class it finds.
        settings = shapes.parse_assignments(options.shape_set)
        if isinstance(runner, MasterRunner):
            settings.setdefault("step_s", str(DISTRIBUTED_STEP_S))
        shape = shapes.make_shape(options.shape, settings, options.stages)
        shape.runner = runner
        environment.shape_class = shape
        logging.info("shape %s, planned %s s", type(shape).__name__, shape.planned_seconds())


@events.quit.add_listener
def write_ledger(**_kwargs):
    # `quit` is the very last event, after the workers' final reports (`quitting` can come before).
    environment = locust_environment[0] if locust_environment else None
    if environment is None or isinstance(environment.runner, WorkerRunner):
        return
    if environment.parsed_options.ledger_file:
        ledger.write(environment.parsed_options.ledger_file)

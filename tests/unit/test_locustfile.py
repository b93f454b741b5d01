"""The Locust visitor's POST of a visit and the reader's dwell (pure logic: a fake client answers in
turn, a fake clock stands in for the waits), and the options the runner passes them."""
import json
from types import SimpleNamespace

import pytest

import locustfile

PAGE = b'<script>\n  const config = {"view": "jobs", "visitRetryMs": 1000};\n'  # as serve-page serves it by default


class Client:
    def __init__(self, *statuses, headers=None, page=PAGE):
        self.statuses, self.headers, self.posts, self.gets = list(statuses), headers or {}, [], []
        self.page = page  # what a page's GET answers

    def answer(self):
        return SimpleNamespace(status_code=self.statuses.pop(0), headers=self.headers)

    def post(self, url, name, headers):
        self.posts.append(url)
        return self.answer()

    def get(self, url, name, headers):
        self.gets.append(url)
        if url.startswith("/get-counter") and self.statuses:
            return self.answer()
        return SimpleNamespace(status_code=200, headers={}, content=self.page if url.startswith("/app") else b"")


@pytest.fixture
def slept(monkeypatch):
    """The waits between a visit's posts, in seconds (none is slept)."""
    waits = []
    monkeypatch.setattr(locustfile.gevent, "sleep", waits.append)
    return waits


@pytest.fixture
def ledger(monkeypatch, slept):
    fresh = locustfile.VisitLedger()
    monkeypatch.setattr(locustfile, "ledger", fresh)
    return fresh


@pytest.mark.parametrize("statuses, retries, posts, outcome", [
    ((503, 0, 202), 3, 3, "acknowledged"),  # a 5xx and no answer are posted again, with the same id
    ((503, 503, 503), 2, 3, "failed"),  # up to `retries` more times
    ((503, 202), 0, 1, "failed"),  # the study's visitor: never
    ((429,), 0, 1, "refused"),  # nor after a 429: the study's runs keep the study's behaviour
    ((429, 429, 202), 3, 3, "acknowledged"),  # with retries a 429 (refused for now) is posted again
    ((429, 429, 429), 2, 3, "gave_up"),  # refused at each of its tries: it gave up
    ((400,), 3, 1, "refused"),  # another 4xx was not published and would not be: not retried
    ((429, 404), 3, 2, "refused"),
    ((503, 429, 429), 2, 3, "failed"),  # a 429 after a 5xx: the visit stays ambiguous, it did not give up
])
def test_a_visit_is_posted_again_after_a_429_a_5xx_or_no_answer_when_asked(ledger, statuses, retries, posts, outcome):
    user = SimpleNamespace(client=Client(*statuses), host="http://x")
    locustfile.post_visit(user, "jobs", retries)
    assert len(user.client.posts) == posts and len(set(user.client.posts)) == 1  # one visit id throughout
    written = ledger.as_dict()
    assert written[outcome] == {"jobs": 1} and written["sent"] == {"jobs": 1}
    assert written["retried"] == ({"jobs": 1} if posts > 1 else {})


def test_a_retry_waits_what_retry_after_asks_within_a_cap_else_a_backoff_with_jitter(ledger, slept, monkeypatch):
    user = SimpleNamespace(client=Client(429, 429, 202, headers={"Retry-After": "7"}), host="http://x")
    locustfile.post_visit(user, "home", 3)
    assert slept == [7.0, 7.0]  # longer than the backoff's 1 and 2 s
    user.client = Client(503, 429, 202, headers={"Retry-After": "3600"})
    slept.clear()
    locustfile.post_visit(user, "home", 3)
    assert slept == [locustfile.RETRY_WAIT_MAX_S] * 2
    monkeypatch.setattr(locustfile.random, "uniform", lambda low, high: high)
    user.client = Client(429, 0, 503, 202, headers={"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"})  # a date: ignored
    slept.clear()
    locustfile.post_visit(user, "home", 3)
    assert slept == [1.25, 2.5, 5.0]  # 1, 2, 4 s, each up to a quarter longer or shorter
    monkeypatch.setattr(locustfile.random, "uniform", lambda low, high: low)
    assert [locustfile.retry_wait(n) for n in (1, 2, 3)] == [0.75, 1.5, 3.0]


class Clock:
    def __init__(self):
        self.t = 0.0

    def monotonic(self):
        return self.t


def reader(monkeypatch, *statuses, dwell=60, ttl=10, jitter=0.0):
    """A Reader without Locust: its client answers get-counter's re-reads with `statuses` (then 200), and
    its pauses (Locust's interruptible wait) move a fake clock."""
    clock = Clock()
    monkeypatch.setattr(locustfile.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(locustfile.random, "random", lambda: jitter)
    monkeypatch.setattr(locustfile.random, "uniform", lambda low, high: low)
    user = object.__new__(locustfile.Reader)
    user.client, user.host, user.dwell_s, user.ttl_s = Client(*statuses), "http://x", dwell, ttl
    user.environment = SimpleNamespace(parsed_options=SimpleNamespace(retry_visits=0))
    user.client.statuses.insert(0, 202)  # the visit's own POST
    user.pauses = []

    def pause(seconds):
        user.pauses.append(seconds)
        clock.t += seconds

    user.pause = pause
    return user, clock


@pytest.mark.parametrize("ttl, jitter, reads", [
    (10, 0.0, 7),  # the first read, then every max(5 s refresh, 10 s TTL) for 60 s: predict's "at most"
    (10, 0.99, 6),  # the page's jitter (up to a fifth more) only spaces them out: at ~12, 24 ... 60 s
    (0, 0.0, 13),  # no cache: the page's own 5 s refresh
    (30, 0.0, 3),
])
def test_a_reader_rereads_the_count_as_the_page_does_while_it_stays(monkeypatch, ledger, ttl, jitter, reads):
    user, clock = reader(monkeypatch, ttl=ttl, jitter=jitter)
    user.read_a_page()
    page = user.client.gets[0].removeprefix("/app?view=")
    assert page in {task.__name__ for task in locustfile.Visitor.tasks}
    assert user.client.gets[1:] == [f"/get-counter?visit_type={page}"] * reads  # one page throughout
    assert len(user.client.posts) == 1 and clock.t == 60  # one visit; the page open its whole dwell, then the next
    assert all(wait == pytest.approx(max(5, ttl) * (1 + jitter / 5)) for wait in user.pauses[:reads - 1])


def test_a_reader_picks_its_pages_at_the_study_visitors_weights(monkeypatch, ledger):
    monkeypatch.setattr(locustfile.time, "monotonic", Clock().monotonic)
    user = object.__new__(locustfile.Reader)
    user.client, user.host, user.dwell_s = Client(*[202] * 4800), "http://x", 0
    user.environment = SimpleNamespace(parsed_options=SimpleNamespace(retry_visits=0))
    user.pause = lambda seconds: None
    locustfile.random.seed(36)
    for _ in range(2400):
        user.read_a_page()
    pages = [url.removeprefix("/app?view=") for url in user.client.gets if url.startswith("/app")]
    weights = {"home": 3, "jobs": 4, "about": 2, "about_offices": 2, "about_legals": 1}
    assert {page: round(pages.count(page) / len(pages) * 12) for page in weights} == weights


@pytest.mark.parametrize("retry_after, pauses", [
    (None, [15, 30, 10, 15, 10]),  # after each error twice as long (jitter at its least: 3/4); a success: 10 s
    ("40", [40, 40, 10, 40, 10]),  # at least what Retry-After asks ...
    ("3600", [60, 60, 10, 60, 10]),  # ... within the page's longest wait
])
def test_a_reader_backs_off_after_errors_as_the_page_does(monkeypatch, ledger, retry_after, pauses):
    user, _ = reader(monkeypatch, 503, 503, 200, 429, dwell=300)  # the first read's answer counts too
    user.client.headers = {"Retry-After": retry_after} if retry_after else {}
    user.read_a_page()
    assert user.pauses[:5] == pauses


def test_the_study_visitor_keeps_its_think_time_and_reads_once_per_page():
    assert locustfile.Visitor.wait_time is not None and locustfile.Reader.dwell_s == 0
    assert [task.__name__ for task in locustfile.Reader.tasks] == ["read_a_page"]


def test_the_visitor_sends_the_headers_of_the_studys_client_python_requests():
    headers = locustfile.Visitor.default_headers
    assert headers["User-Agent"].startswith("python-requests/") and headers["Accept"] == "*/*"
    assert "gzip" in headers["Accept-Encoding"] and "br" not in headers["Accept-Encoding"].split(", ")
    assert locustfile.Reader.default_headers == headers


def test_the_runner_passes_no_retry_and_no_dwell_to_the_studys_runs_and_the_ttl_with_a_dwell():
    from visitkit.errors import RunError
    from visitkit.paths import ITERATIONS_DIR
    from visitkit.runs.config import LoadPlan, RunConfig

    def options(**given):
        config = RunConfig.build(ITERATIONS_DIR / "iteration-1", "spike", duration="60s", **given)
        return dict(config.load.options("http://x")), config.load.describe()

    study, described = options()
    assert not {"--retry-visits", "--dwell", "--counter-ttl"} & set(study) and "readers" not in described
    dwell, described = options(dwell=60, retry_visits=3)
    assert (dwell["--dwell"], dwell["--counter-ttl"], dwell["--retry-visits"]) == ("60", "10", 3)  # iteration 1: 10 s
    assert "readers keep each page open 60 s, re-reading its count every 10 s" in described
    with pytest.raises(RunError, match="--dwell"):
        LoadPlan.build("spike", dwell=-1)


def test_a_dwell_runs_prediction_counts_the_readers_re_reads_and_its_warm_up_the_visitors():
    from visitkit.paths import ITERATIONS_DIR
    from visitkit.runs.config import RunConfig

    study = RunConfig.build(ITERATIONS_DIR / "iteration-1", "spike", duration="60s")
    dwell = RunConfig.build(ITERATIONS_DIR / "iteration-1", "spike", duration="60s", dwell=60)
    assert (study.prediction.reads_per_visit, dwell.prediction.reads_per_visit) == (1, 7)  # 1 + 60 / 10
    assert dwell.warm_up.users == study.warm_up.users  # the warm-up runs the study's visitors


def arrival_user(monkeypatch, clock):
    """An Arrival without Locust: its pauses (Locust's interruptible wait) move the fake clock."""
    monkeypatch.setattr(locustfile.time, "monotonic", clock.monotonic)
    user = object.__new__(locustfile.Arrival)
    user.client, user.host = Client(*[202] * 100), "http://x"
    user.environment = SimpleNamespace(parsed_options=SimpleNamespace(retry_visits=0))
    user.pauses = []

    def pause(seconds):
        user.pauses.append(seconds)
        clock.t += seconds

    user.pause = pause
    return user


def test_an_arrival_waits_until_it_is_due_then_makes_the_studys_visit_without_think_time(monkeypatch, ledger):
    clock = Clock()
    user = arrival_user(monkeypatch, clock)
    monkeypatch.setattr(locustfile, "arrival_clock", [
        locustfile.arrivals.ArrivalClock(lambda t: 4.0 if t < 1 else None, origin=0.0)])
    clock.t = 0.3  # free at 0.3 s: the arrival due at 0.25 s is within the tolerance, the one at 0 s is not
    user.arrive()
    assert user.pauses == [0.0] and len(user.client.posts) == 1
    page = user.client.gets[0].removeprefix("/app?view=")
    assert user.client.gets == [f"/app?view={page}", f"/get-counter?visit_type={page}"]
    user.arrive()  # the next one: due at 0.5 s, it waits for it
    assert user.pauses[-1] == pytest.approx(0.2) and len(user.client.posts) == 2
    rows = locustfile.arrival_clock[0].rows
    assert sum(row[1] for row in rows.values()) == 2 and sum(row[2] for row in rows.values()) == 1
    locustfile.end_arrivals()  # the load is over at 0.5 s: none is taken after it, none was due before it
    user.arrive()
    assert user.pauses[-1] == locustfile.Arrival.idle_s and len(user.client.posts) == 2


def test_each_worker_process_makes_its_share_of_the_rate_its_arrivals_between_the_others(monkeypatch):
    options = SimpleNamespace(shape="load", shape_set="arrival_rate=15,duration_s=60", stages=None)
    monkeypatch.setattr(locustfile, "arrival_clock", [])
    firsts = []
    for index in range(3):
        locustfile.start_arrivals(options, SimpleNamespace(worker_index=index), 3)
        clock = locustfile.arrival_clock[0]
        firsts.append(clock.due)
        assert clock.rate_at(10.0) == pytest.approx(5.0)
    assert firsts == pytest.approx([0, 1 / 15, 2 / 15])
    locustfile.arrival_clock.clear()
    locustfile.start_arrivals(SimpleNamespace(shape="load", shape_set="", stages=None), SimpleNamespace(), 1)
    assert locustfile.arrival_clock == []  # a closed-model shape starts no clock


def test_every_process_sizes_the_ledgers_sample_from_the_shapes_plan_and_the_think_time():
    def options(**given):
        return SimpleNamespace(**{"shape": "load", "shape_set": "warmup_users=10,warmup_s=60,rampup_s=0,plateau_s=0,"
                                  "cleanup_s=0", "stages": None, "think_time": "3-5", "dwell": 0.0, **given})

    assert locustfile.planned_visits(options()) == 10 * 60 / 3 + 10
    assert locustfile.planned_visits(options(dwell=30.0)) == 10 * 60 / 30 + 10  # a reader's visit lasts its dwell
    assert locustfile.planned_visits(options(think_time="0")) is None
    assert locustfile.planned_visits(options(shape="none")) is None
    assert locustfile.planned_visits(options(shape_set="arrival_rate=40,duration_s=30")) == 1200


def test_the_runner_passes_the_id_limit_only_when_asked_to_every_locust_process():
    from visitkit.errors import RunError
    from visitkit.runs.config import LoadPlan

    assert "--ledger-ids" not in dict(LoadPlan.build("load").options("http://x"))  # Locust's own 2,000,000
    low = LoadPlan.build("load", ledger_ids=200, workers=2)
    assert dict(low.options("http://x"))["--ledger-ids"] == 200 and "ledger-ids = 200" in low.run_conf("http://x")
    with pytest.raises(RunError, match="--ledger-ids"):
        LoadPlan.build("load", ledger_ids=0)


def test_the_ledger_is_written_every_interval_while_the_run_goes_on_and_a_failed_write_is_not_the_end(
        monkeypatch, tmp_path, ledger):
    path, written, sleeps = tmp_path / "ledger.json", [], []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 2:
            monkeypatch.setattr(ledger, "write", lambda _path: (_ for _ in ()).throw(OSError("disk full")))
        if len(sleeps) == 4:
            raise SystemExit  # the run is over (the greenlet is killed)
        written.append(json.loads(path.read_text())["sent"] if path.exists() else None)

    monkeypatch.setattr(locustfile.gevent, "sleep", sleep)
    locustfile.post_visit(SimpleNamespace(client=Client(202), host="http://x"), "home", 0)
    with pytest.raises(SystemExit):
        locustfile.keep_writing_ledger(path, 60)
    assert sleeps == [60] * 4 and written == [None, {"home": 1}, {"home": 1}]  # the last good write stays


def test_every_user_of_a_process_shares_one_tls_context_and_loads_no_ca_bundle_into_it():
    # geventhttpclient's own setup of a user's HTTPS pool, as FastHttpUser's session calls it: with Locust's
    # factory each call built a context and loaded the CA bundle (~22 ms of CPU per user), to verify nothing
    from geventhttpclient.connectionpool import _CA_CERTS, init_ssl_context

    users = [locustfile.Visitor, locustfile.Reader, locustfile.Arrival]
    contexts = [init_ssl_context(user.ssl_context_factory, _CA_CERTS, check_hostname=False) for user in users * 2]
    assert all(context is contexts[0] for context in contexts)
    assert contexts[0].cert_store_stats()["x509_ca"] == 0
    assert contexts[0].verify_mode == 0  # ssl.CERT_NONE: unverified, as Locust's insecure default


# ---- a page that comes with its count (serve-page's PAGE_EMBEDS_COUNT=1) ---------------------------------
COUNTED_PAGE = b'<script>\n  const config = {"view": "jobs", "visitRetryMs": 1000, "count": 41};\n'


@pytest.fixture
def no_page_with_count_yet(monkeypatch):
    monkeypatch.setattr(locustfile, "pages_with_count", [])


def test_the_count_a_page_came_with_is_read_from_its_config():
    def page(body, status=200):
        return SimpleNamespace(status_code=status, content=body)

    assert locustfile.embedded_count(page(COUNTED_PAGE)) == 41
    assert locustfile.embedded_count(page(COUNTED_PAGE.replace(b"41}", b"0}"))) == 0
    assert locustfile.embedded_count(page(PAGE)) is None
    assert locustfile.embedded_count(page(COUNTED_PAGE, status=500)) is None
    assert locustfile.embedded_count(page(None, status=0)) is None  # no answer at all


def test_the_visitor_reads_the_count_from_the_page_serve_page_renders():
    import serve_page

    def page(body):
        return SimpleNamespace(status_code=200, content=body.encode())

    assert locustfile.embedded_count(page(serve_page.render_with("about_offices", 1234567))) == 1234567
    assert locustfile.embedded_count(page(serve_page.render("about_offices"))) is None


def test_a_visit_of_a_page_with_its_count_lasts_its_two_requests():
    duration = locustfile.arrivals.VisitDuration()
    duration.update(0.0, 0, 0.0)
    assert duration.update(1.0, 10, 1000.0) == 0.3  # 100 ms a request, three requests
    duration.requests_per_visit = locustfile.arrivals.requests_per_visit(True)
    assert duration.update(2.0, 20, 2000.0) == 0.2


def test_the_visitor_makes_no_first_read_when_the_page_came_with_its_count(monkeypatch, ledger, no_page_with_count_yet):
    shape = SimpleNamespace(visit_duration=locustfile.arrivals.VisitDuration())
    environment = SimpleNamespace(parsed_options=SimpleNamespace(retry_visits=0), shape_class=shape)
    user = SimpleNamespace(client=Client(202, page=COUNTED_PAGE), host="http://x", environment=environment)
    assert locustfile.visit(user, "jobs").content == COUNTED_PAGE  # the page's count is its first answer
    assert user.client.gets == ["/app?view=jobs"] and len(user.client.posts) == 1
    # the open model sizes its users from a visit of two requests now
    assert shape.visit_duration.requests_per_visit == 2
    user.client = Client(202)  # a page without its count (Firestore was down): read as by default
    locustfile.visit(user, "jobs")
    assert user.client.gets == ["/app?view=jobs", "/get-counter?visit_type=jobs"]


def test_a_reader_whose_page_came_with_its_count_rereads_it_after_an_interval(monkeypatch, ledger,
                                                                              no_page_with_count_yet):
    user, clock = reader(monkeypatch, ttl=10)
    user.client.page = COUNTED_PAGE
    user.environment.shape_class = None
    user.read_a_page()
    page = user.client.gets[0].removeprefix("/app?view=")
    assert user.client.gets[1:] == [f"/get-counter?visit_type={page}"] * 6  # at 10, 20 ... 60 s: none at 0 s
    assert user.pauses[0] == 10


def test_a_worker_that_met_a_page_with_its_count_tells_the_masters_shape(monkeypatch, no_page_with_count_yet):
    handlers = {}
    monkeypatch.setattr(locustfile.events.report_to_master, "add_listener", lambda f: handlers.setdefault("ship", f))
    monkeypatch.setattr(locustfile.events.worker_report, "add_listener", lambda f: handlers.setdefault("take", f))
    monkeypatch.setattr(locustfile.health, "Probe", lambda *a: SimpleNamespace(start=lambda: None, take=lambda: []))
    shape = SimpleNamespace(visit_duration=locustfile.arrivals.VisitDuration())
    runner = SimpleNamespace(client_id="w1", register_message=lambda *a: None,
                             environment=SimpleNamespace(shape_class=shape))
    locustfile.serve_as_worker(runner)
    locustfile.collect_as_master(runner)
    report = {}
    handlers["ship"]("w1", report)
    assert report[locustfile.EMBEDS_KEY] is False
    locustfile.pages_with_count.append(True)  # this worker met one
    handlers["ship"]("w1", report)
    locustfile.pages_with_count.clear()  # the master's process never met one itself
    monkeypatch.setattr(locustfile.ledger, "report", lambda *a, **k: None)
    handlers["take"]("w1", report)
    assert shape.visit_duration.requests_per_visit == 2

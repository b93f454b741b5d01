"""The cost estimate at each region's list prices, checked against figures worked out by hand."""
import json
import math

import pytest

from visitkit.model import capacity, cost
from visitkit.errors import VisitkitError
from visitkit.paths import FUNCTIONS_DIR, ROOT
from visitkit.settings import parse_settings
from visitkit.twin.profile import Profile

ROOT_SETTINGS = {"shards_per_page": 20, "cache_ttl_seconds": 10, "functions": {
    "serve-page": {"max_instances": 2, "concurrency": 1},
    "get-counter": {"max_instances": 2, "concurrency": 1},
    "inc-counter": {"max_instances": 2, "concurrency": 1},
    "store-inc-counter": {"max_instances": 4, "concurrency": 1, "min_instances": 1}}}
GIB_256M = 256e6 / 2**30  # 0.2384 GiB
# Service times, ms: with ROOT_SETTINGS' 2 instances of concurrency 1, serve-page serves 100 requests/s, get-counter
# (its cache answering in 2 ms) 1,000, inc-counter 2 / 0.04 = 50: the knee, 50 visits/s; store-inc-counter's 4
# serve 4 / (0.13 + 0.07) = 20 push deliveries a second.
HAND = Profile("hand", {"push": 70}, {"serve-page": 20, "get-counter": 150, "inc-counter": 40,
                                      "store-inc-counter": 130}, cache_hit_ms=2)


@pytest.fixture()
def settings():
    return parse_settings(json.loads(json.dumps(ROOT_SETTINGS)))


@pytest.fixture()
def prices():
    return cost.load_prices()


def usage():
    return {"functions": {"inc-counter": {"billable_instance_s": 1000, "requests": 2_000_000},
                          "get-counter": {"billable_instance_s": 0, "requests": 0}},
            "firestore_reads": 300_000, "firestore_writes": 200_000, "firestore_deletes": 0,
            "pubsub_messages": 2**30 // 1000 * 1024}  # 1 TiB at 1,000 bytes each, near enough


def test_sao_paulo_by_hand(settings, prices):
    estimate = cost.estimate(usage(), settings, prices, "southamerica-east1")
    items = {item: usd for item, _, usd in estimate["lines"]}
    # Tier 2: 1000 s x (0.167 vCPU x $0.0000336 + 0.2384 GiB x $0.0000035) + 2 M requests x $0.40 / M
    assert items["Cloud Run: inc-counter"] == pytest.approx(1000 * (0.167 * 0.0000336 + GIB_256M * 0.0000035) + 0.80)
    assert items["Cloud Run: inc-counter"] == pytest.approx(0.806446, abs=1e-6)
    # Firestore in southamerica-east1: $0.054 per 100k reads, $0.162 per 100k writes
    assert items["Firestore document reads"] == pytest.approx(3 * 0.054)
    assert items["Firestore document writes"] == pytest.approx(2 * 0.162)
    assert items["Pub/Sub throughput"] == pytest.approx(40.0 * (2**30 // 1000 * 1024 * 1000) / 2**40)
    assert estimate["total"] == pytest.approx(sum(items.values()))
    assert (estimate["region"], estimate["tier"]) == ("southamerica-east1", "2")


def test_the_same_run_costs_less_in_iowa_tier_1(settings, prices):
    iowa = cost.estimate(usage(), settings, prices, "us-central1")
    items = {item: usd for item, _, usd in iowa["lines"]}
    assert items["Cloud Run: inc-counter"] == pytest.approx(1000 * (0.167 * 0.000024 + GIB_256M * 0.0000025) + 0.80)
    assert iowa["tier"] == "1" and iowa["total"] < cost.estimate(usage(), settings, prices, "southamerica-east1")["total"]


def test_what_is_left_out_is_named_with_an_order_of_magnitude(settings, prices):
    left_out = cost.estimate(usage(), settings, prices)["left_out"]
    assert {line.split(":")[0] for line in left_out} == {"network egress", "Cloud Build", "Cloud Logging",
                                                         "Artifact Registry"}
    assert all("$" in line for line in left_out)


def test_a_region_without_prices_is_refused_rather_than_priced_as_another(settings, prices):
    with pytest.raises(VisitkitError, match="no prices for region asia-east1"):
        cost.estimate(usage(), settings, prices, "asia-east1")


def test_min_instances_cost_their_idle_rate_all_hour(settings, prices):
    lines, total = cost.idle_hourly(settings, prices, "southamerica-east1")
    # store-inc-counter: 1 instance x 3600 s x (0.167 vCPU + 0.2384 GiB) x $0.0000035
    assert lines == [("store-inc-counter", 1, pytest.approx(3600 * (0.167 + GIB_256M) * 0.0000035))]
    assert total == pytest.approx(0.005108, abs=1e-6)


def test_every_region_has_a_tier_and_firestore_prices_and_the_file_is_dated_and_sourced(prices):
    assert prices["as_of"] and all(url.startswith("https://cloud.google.com/") for url in prices["sources"].values())
    assert set(prices["cloud_run"]["region_tiers"]) == set(prices["firestore"]["regions"])
    assert set(prices["cloud_run"]["region_tiers"].values()) <= set(prices["cloud_run"]["tiers"])
    assert cost.DEFAULT_REGION in prices["cloud_run"]["region_tiers"]


@pytest.mark.parametrize("shards, billed", [(2, 1), (1000, 1), (1001, 2), (5000, 5)])
def test_an_aggregation_read_is_billed_per_thousand_shards_it_sums(prices, shards, billed):
    settings = parse_settings({**json.loads(json.dumps(ROOT_SETTINGS)), "shards_per_page": shards})
    estimate = cost.hourly_at(settings, capacity.predict(settings, HAND), 10, prices)
    reads = next(line for line in estimate["lines"] if line[0] == "Firestore document reads")
    # 10 get-counter requests/s on 1 instance in use (1,000/s an instance, scaled out at 600): its cache reads each
    # of the 5 pages once per 10 s TTL, 0.5 reads/s
    assert reads[1] == f"{0.5 * billed * 3600:,.0f}"


def test_at_the_knee_the_bottlenecks_instances_are_billed_all_the_time(settings, prices):
    found = cost.per_million_visits(settings, capacity.predict(settings, HAND), prices, "us-central1")
    lines = {item: text for item, text, _ in found["lines"]}
    # a million visits at the knee's 50 a second take 20,000 s, inc-counter's 2 instances full all of it
    assert lines["Cloud Run: inc-counter"].startswith("40,000 instance-s")
    assert "1,000,000 requests" in lines["Cloud Run: serve-page"]
    assert lines["Firestore document writes"] == "2,000,000" and lines["Firestore document deletes"] == "1,000,000"
    split = cost.by_service(found)
    assert set(split) == {"Cloud Run", "Firestore", "Pub/Sub", "Cloud Logging", "Network egress"}
    assert sum(split.values()) == pytest.approx(found["total"])


FIXTURE = ROOT / "tests" / "fixtures" / "logging" / "cloud-run-request-log.json"
MILLION = 1_000_000


def compact(entry):
    return len(json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode())


def test_a_request_log_entry_weighs_what_the_recorded_one_does():
    """The recorded entry is Cloud Run's request log (its log, resource and httpRequest) and its JSON, without
    whitespace, is the size the model bills for every request."""
    entry = json.loads(FIXTURE.read_text())
    assert entry["logName"].endswith("/logs/run.googleapis.com%2Frequests")
    assert entry["resource"]["type"] == "cloud_run_revision" and entry["httpRequest"]["requestMethod"]
    assert compact(entry) == cost.REQUEST_LOG_ENTRY_BYTES


def store_line_fields():
    """The keyword fields of store-inc-counter's INFO line per delivery, as its source passes them to log()."""
    import ast

    tree = ast.parse((FUNCTIONS_DIR / "store_inc_counter.py").read_text())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "log"
             and isinstance(node.args[0], ast.Constant) and node.args[0].value == "INFO"]
    assert len(calls) == 1
    return {keyword.arg for keyword in calls[0].keywords}


def test_store_inc_counters_line_weighs_what_common_log_writes_in_cloud_runs_envelope(monkeypatch, capsys):
    """common.log's line for a delivery (a Pub/Sub message id as Pub/Sub writes them, a visit id, the longest page,
    a trace in the recorded entry's project) becomes a LogEntry as Cloud Run's structured logging makes it:
    severity and logging.googleapis.com/trace lifted into the entry, the rest its jsonPayload, in the envelope of
    the recorded entry (the same revision's resource, labels and timestamps), logged to run.googleapis.com/stdout."""
    import common
    from visitkit.catalogue import PAGES

    assert store_line_fields() == {"trace", "outcome", "message_id", "visit_id", "visit_type"}
    request = json.loads(FIXTURE.read_text())
    project = request["logName"].split("/")[1]
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", project)
    common.log("INFO", "visit message", trace=(request["trace"].rsplit("/", 1)[1], None), outcome="counted",
               message_id="2070443601311540", visit_id="1b4e28ba-2fa1-11d2-883f-0016d3cca427",
               visit_type=max(PAGES, key=len))
    fields = json.loads(capsys.readouterr().out)
    entry = {key: value for key, value in request.items()
             if key not in ("httpRequest", "severity", "trace", "spanId", "traceSampled")}
    entry["logName"] = entry["logName"].replace("%2Frequests", "%2Fstdout")
    entry["severity"] = fields.pop("severity")
    entry["trace"] = fields.pop("logging.googleapis.com/trace")
    entry["jsonPayload"] = fields
    assert entry["trace"] == request["trace"]
    assert compact(entry) == cost.STORE_LINE_ENTRY_BYTES


def test_a_million_visits_pay_cloud_logging_for_every_request_and_delivery(settings, prices):
    """The study's visitor: 4 requests a visit (3 public, 1 push delivery), each a request log entry, and the
    delivery's line; readers who stay make get-counter requests more, each one entry more. No free 50 GiB."""
    one = cost.per_million_visits(settings, capacity.predict(settings, HAND), prices, "us-central1")
    # a 60 s dwell re-reads the count every 10 s (the cache TTL): 7 get-counter requests a visit
    seven = cost.per_million_visits(settings, capacity.predict(settings, HAND, dwell_s=60), prices, "us-central1")
    for found, requests in ((one, 4), (seven, 10)):
        usd = next(usd for item, _, usd in found["lines"] if item == "Cloud Logging")
        assert usd == pytest.approx((requests * 1350 + 1155) * MILLION / 2**30 * 0.50)
        assert cost.by_service(found)["Cloud Logging"] == usd
        assert not any(line.startswith("Cloud Logging") for line in found["left_out"])
    lines = {item: text for item, text, _ in seven["lines"]}
    assert "7,000,000 requests" in lines["Cloud Run: get-counter"]
    assert "1,000,000 requests" in lines["Cloud Run: serve-page"]
    assert list(cost.by_service(one)) == ["Cloud Run", "Firestore", "Pub/Sub", "Cloud Logging", "Network egress"]


def test_a_runs_own_estimate_names_cloud_logging_as_left_out(settings, prices):
    found = cost.estimate(usage(), settings, prices)
    assert not any(item == "Cloud Logging" for item, _, _ in found["lines"])
    assert any(line.startswith("Cloud Logging: $0.50/GiB") for line in found["left_out"])


def test_a_marker_is_its_document_and_its_name_index_entry_by_firestores_size_rules():
    """processed_messages/<64 hex digits>: name 19 + 65 + 16 = 100 bytes; fields visit_type (11) = the longest page,
    about_offices (14), and expire_at (10), a timestamp (8): 43; the document 100 + 43 + 32 = 175. Its one index
    entry, the built-in one on its name: 100 + no parent document + __name__ (9) + the name as a reference (100)
    + 32 = 241."""
    assert cost.marker_bytes() == 175 + 241


def test_a_million_markers_are_stored_for_their_ttl_at_the_regions_price(settings, prices):
    for region, per_gib_month in (("us-central1", 0.15), ("southamerica-east1", 0.27)):
        found = cost.per_million_visits(settings, capacity.predict(settings, HAND), prices, region)
        usd = next(usd for item, _, usd in found["lines"] if item == "Firestore marker storage")
        # 416 bytes x a million, 7 days of a 365.25 / 12-day month
        assert usd == pytest.approx(416 * MILLION / 2**30 * 7 / (365.25 / 12) * per_gib_month)
    longer = parse_settings({**json.loads(json.dumps(ROOT_SETTINGS)), "marker_ttl_days": 14})
    twice = cost.per_million_visits(longer, capacity.predict(longer, HAND), prices, "us-central1")
    assert next(usd for item, _, usd in twice["lines"] if item == "Firestore marker storage") == pytest.approx(
        416 * MILLION / 2**30 * 14 / (365.25 / 12) * 0.15)


def test_an_hour_of_readers_who_stay_bills_their_re_reads(settings, prices):
    hour = cost.hourly_at(settings, capacity.predict(settings, HAND, dwell_s=60), 100, prices, "us-central1")
    lines = {item: text for item, text, _ in hour["lines"]}
    assert "2,520,000 requests" in lines["Cloud Run: get-counter"] and "360,000 requests" in lines["Cloud Run: inc-counter"]
    usd = next(usd for item, _, usd in hour["lines"] if item == "Cloud Logging")
    assert usd == pytest.approx(360_000 * (10 * 1350 + 1155) / 2**30 * 0.50)


def mm1_billed_per_s(rate, busy_s):
    """One instance of concurrency 1 (M/M/1) at `rate` requests/s of `busy_s`: empty 1 - rho of the time, its busy
    periods start rate (1 - rho) times a second and last busy_s / (1 - rho) on average, each billed
    0.1 / (1 - exp(-0.1 / that)) s (rounded up to 100 ms, taken as exponential)."""
    rho = rate * busy_s
    mean = busy_s / (1 - rho)
    return rate * (1 - rho) * 0.1 / (1 - math.exp(-0.1 / mean))


def test_a_month_at_a_tenth_of_a_visit_a_second_by_hand(settings, prices):
    """ROOT_SETTINGS and HAND at 0.1 visits/s for a month in us-central1, list prices: each function one instance of
    concurrency 1 (0.167 vCPU, 256 MB) billed while a request is in flight, rounded up to 100 ms; store-inc-counter's
    minimum instance idle the rest of the time."""
    from visitkit.model import response_bytes

    month = 365.25 / 12 * 86400
    visits = 0.1 * month
    active, idle = 0.167 * 0.000024 + GIB_256M * 0.0000025, 0.167 * 0.0000025 + GIB_256M * 0.0000025
    fee = visits * 0.40 / 1e6
    push = mm1_billed_per_s(0.1, 0.200) * month  # a push holds its slot its 130 ms and Pub/Sub's 70 ms
    expected = {
        "Cloud Run: serve-page": mm1_billed_per_s(0.1, 0.020) * month * active + fee,
        "Cloud Run: get-counter": mm1_billed_per_s(0.1, 0.002) * month * active + fee,  # answered from its cache
        "Cloud Run: inc-counter": mm1_billed_per_s(0.1, 0.040) * month * active + fee,
        "Cloud Run: store-inc-counter": push * active + (month - push) * idle + fee,
        # a page read a second at most per instance and page, cached 10 s: each of the 0.1 pages/s reads
        "Firestore document reads": visits * 0.03 / 1e5,
        "Firestore document writes": 2 * visits * 0.09 / 1e5,  # a shard and a marker
        "Firestore document deletes": visits * 0.01 / 1e5,  # the marker's TTL
        "Firestore marker storage": visits * 416 / 2**30 * 7 / (365.25 / 12) * 0.15,
        "Pub/Sub throughput": 2 * visits * 1000 / 2**40 * 40,  # a publish and a push a visit, 1,000 bytes each
        "Cloud Logging": visits * (4 * 1350 + 1155) / 2**30 * 0.50,
        "Network egress": visits * response_bytes.per_visit(1) / 2**30 * 0.12,
    }
    found = cost.monthly_at(settings, capacity.predict(settings, HAND), 0.1, prices, "us-central1")
    assert {item: usd for item, _, usd in found["lines"]} == pytest.approx(expected)
    assert found["total"] == pytest.approx(sum(expected.values()))
    # about a tenth of a second billed per request, five times the 20 ms served
    assert mm1_billed_per_s(0.1, 0.020) == pytest.approx(0.01, rel=0.01)


def test_the_free_tiers_leave_a_small_sites_ttl_deletes_and_egress_past_a_gib(settings, prices):
    """At 0.1 visits/s: Cloud Run's free units cover its bill; Firestore's 8,640 reads and 17,280 writes a day are
    under its 50,000 and 20,000; its 0.0002 GiB of markers under 1 GiB; Pub/Sub's 0.49 GiB under 10; Cloud
    Logging's 1.7 GiB under 50. Left: the TTL deletes (never free) and the egress beyond 1 GiB a month."""
    from visitkit.model import response_bytes

    month = 365.25 / 12 * 86400
    visits = 0.1 * month
    found = cost.monthly_at(settings, capacity.predict(settings, HAND), 0.1, prices, "us-central1", free_tier=True)
    egress_gib = visits * response_bytes.per_visit(1) / 2**30
    assert found["total"] == pytest.approx(visits * 0.01 / 1e5 + (egress_gib - 1) * 0.12)
    assert found["free_tier"]
    # in São Paulo no egress is free (North America only)
    south = cost.monthly_at(settings, capacity.predict(settings, HAND), 0.1, prices, "southamerica-east1",
                            free_tier=True)
    assert south["total"] == pytest.approx(visits * 0.018 / 1e5 + egress_gib * 0.12)


def test_a_pubsub_pull_bills_its_messages_bytes_once_it_carries_a_kilobyte(settings, prices):
    from visitkit.settings import parse_settings as parse

    pulled = parse({**json.loads(json.dumps(ROOT_SETTINGS)), "store_mode": "pull",
                    "functions": {**ROOT_SETTINGS["functions"],
                                  "store-inc-counter": {"max_instances": 1, "min_instances": 1, "concurrency": 1,
                                                        "cpu": "1", "memory": "512Mi"}}})
    message = cost.visit_message_bytes()
    # one message a pull at 1 visit/s (50 ms bring 0.05): a kilobyte each; at 1,000/s 50 a pull, their own bytes
    slow = cost.pubsub_usage(pulled, 1000, 1, 1000)
    assert slow["billed_bytes"] == pytest.approx(1000 * 1000 + 1000 * 1000 + 100 * 1000 * math.exp(-10))
    fast = cost.pubsub_usage(pulled, 1000, 1000, 1)
    assert fast["requests"] == pytest.approx(1000 + 20)
    assert fast["billed_bytes"] == pytest.approx(1000 * 1000 + 20 * 50 * message)
    assert 100 < message < 1000  # a visit's message: its page, id and trace

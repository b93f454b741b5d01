"""The cost estimate at each region's list prices, checked against figures worked out by hand."""
import json

import pytest

from visitkit.model import cost
from visitkit.errors import VisitkitError
from visitkit.paths import FUNCTIONS_DIR, ROOT
from visitkit.settings import parse_settings

ROOT_SETTINGS = {"shards_per_page": 20, "cache_ttl_seconds": 10, "functions": {
    "serve-page": {"max_instances": 2, "concurrency": 1},
    "get-counter": {"max_instances": 2, "concurrency": 1},
    "inc-counter": {"max_instances": 2, "concurrency": 1},
    "store-inc-counter": {"max_instances": 4, "concurrency": 1, "min_instances": 1}}}
GIB_256M = 256e6 / 2**30  # 0.2384 GiB


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
    estimate = cost.hourly_at(settings, 100, prices, get_counter_reads_per_s=10)
    reads = next(line for line in estimate["lines"] if line[0] == "Firestore document reads")
    assert reads[1].startswith(f"{10 * billed * 3600:,}")


def test_a_million_visits_bill_each_functions_instance_time_packed_to_its_concurrency(settings, prices):
    capacity = {"serve-page": 100.0, "get-counter": 20.0, "inc-counter": 50.0, "store-inc-counter": 40.0}
    found = cost.per_million_visits(settings, capacity, 0.5, prices, "us-central1")
    lines = {item: text for item, text, _ in found["lines"]}
    # an instance serves capacity / max_instances requests a second: inc-counter's 2 serve 25/s each
    assert lines["Cloud Run: inc-counter"].startswith("40,000 instance-s")  # 1e6 x 2 / 50
    assert lines["Cloud Run: store-inc-counter"].startswith("100,000 instance-s")  # 1e6 x 4 / 40
    assert "1,000,000 requests" in lines["Cloud Run: serve-page"]
    assert lines["Firestore document writes"] == "2,000,000" and lines["Firestore document deletes"] == "1,000,000"
    assert lines["Firestore document reads"] == "500,000"  # half the visits read, 20 shards: one billed read each
    split = cost.by_service(found)
    assert set(split) == {"Cloud Run", "Firestore", "Pub/Sub", "Cloud Logging"} and sum(split.values()) == pytest.approx(found["total"])


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
    capacity = {"serve-page": 100.0, "get-counter": 20.0, "inc-counter": 50.0, "store-inc-counter": 40.0}
    one = cost.per_million_visits(settings, capacity, 0.5, prices, "us-central1")
    seven = cost.per_million_visits(settings, capacity, 0.5, prices, "us-central1", get_counter_requests_per_visit=7)
    for found, requests in ((one, 4), (seven, 10)):
        usd = next(usd for item, _, usd in found["lines"] if item == "Cloud Logging")
        assert usd == pytest.approx((requests * 1350 + 1155) * MILLION / 2**30 * 0.50)
        assert cost.by_service(found)["Cloud Logging"] == usd
        assert not any(line.startswith("Cloud Logging") for line in found["left_out"])
    lines = {item: text for item, text, _ in seven["lines"]}
    assert "7,000,000 requests" in lines["Cloud Run: get-counter"]
    assert lines["Cloud Run: get-counter"].startswith("700,000 instance-s")  # 7e6 requests x 2 / 20 per second
    assert "1,000,000 requests" in lines["Cloud Run: serve-page"]
    assert list(cost.by_service(one)) == ["Cloud Run", "Firestore", "Pub/Sub", "Cloud Logging"]


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
    capacity = {"serve-page": 100.0, "get-counter": 20.0, "inc-counter": 50.0, "store-inc-counter": 40.0}
    for region, per_gib_month in (("us-central1", 0.15), ("southamerica-east1", 0.27)):
        found = cost.per_million_visits(settings, capacity, 0.5, prices, region)
        usd = next(usd for item, _, usd in found["lines"] if item == "Firestore marker storage")
        # 416 bytes x a million, 7 days of a 365.25 / 12-day month
        assert usd == pytest.approx(416 * MILLION / 2**30 * 7 / (365.25 / 12) * per_gib_month)
    longer = parse_settings({**json.loads(json.dumps(ROOT_SETTINGS)), "marker_ttl_days": 14})
    twice = cost.per_million_visits(longer, capacity, 0.5, prices, "us-central1")
    assert next(usd for item, _, usd in twice["lines"] if item == "Firestore marker storage") == pytest.approx(
        416 * MILLION / 2**30 * 14 / (365.25 / 12) * 0.15)


def test_an_hour_of_readers_who_stay_bills_their_re_reads(settings, prices):
    hour = cost.hourly_at(settings, 100, prices, "us-central1", get_counter_reads_per_s=1, get_counter_requests_per_visit=7)
    lines = {item: text for item, text, _ in hour["lines"]}
    assert "2,520,000 requests" in lines["Cloud Run: get-counter"] and "360,000 requests" in lines["Cloud Run: inc-counter"]
    usd = next(usd for item, _, usd in hour["lines"] if item == "Cloud Logging")
    assert usd == pytest.approx(360_000 * (10 * 1350 + 1155) / 2**30 * 0.50)

"""The cost estimate at each region's list prices, checked against figures worked out by hand."""
import json

import pytest

from visitkit.cloud import cost
from visitkit.errors import VisitkitError
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
    assert set(split) == {"Cloud Run", "Firestore", "Pub/Sub"} and sum(split.values()) == pytest.approx(found["total"])

"""Iteration 7's levers in the capacity and cost model, against figures worked out by hand: a pull store
(store_mode "pull": one instance committing batches, billed instance-based) and a page that embeds its count
(page_embeds_count: no first get-counter read)."""
import json

import pytest

from visitkit.catalogue import PAGES
from visitkit.errors import VisitkitError
from visitkit.model import capacity, cost
from visitkit.paths import ROOT
from visitkit.settings import load_settings, parse_settings
from visitkit.twin.profile import PROFILES_DIR, Profile, load_profile

TIMES = {"serve-page": 20, "get-counter": 150, "inc-counter": 37, "store-inc-counter": 130}
PULL_BATCH = {"per_batch": 400, "per_message": 0.2}  # a batch of 500: 400 + 100 = 500 ms a commit


class WithPull:
    """A profile carrying pull_batch_ms (what twin/profile.py's Profile gains with the pull store)."""

    def __init__(self, profile, pull_batch_ms):
        self._profile, self.pull_batch_ms = profile, pull_batch_ms

    def __getattr__(self, name):
        return getattr(self._profile, name)


HAND = WithPull(Profile("hand", {"push": 62}, TIMES, cache_hit_ms=2), PULL_BATCH)


def study():
    """The study profile with the pull_batch_ms its file gives."""
    raw = json.loads((PROFILES_DIR / "study.json").read_text())
    return WithPull(load_profile("study"), raw["pull_batch_ms"])


def raw_settings(pull=True, embeds=True, batch_size=500):
    functions = {name: {"max_instances": 2, "concurrency": 80} for name in TIMES}
    functions["store-inc-counter"] = {"max_instances": 1, "min_instances": 1, "concurrency": 1, "cpu": "1",
                                      "memory": "512Mi"}
    return {"shards_per_page": 200, "cache_ttl_seconds": 10, "functions": functions,
            "store_mode": "pull" if pull else "push", "pull": {"batch_size": batch_size},
            "page_embeds_count": embeds}


def settings(**changes):
    return parse_settings(raw_settings(**changes))


# ---- capacity --------------------------------------------------------------------------------------
def test_a_pull_store_drains_its_batch_per_commit_time_on_one_instance():
    p = capacity.predict(settings(), HAND)
    assert capacity.pull_commit_ms(settings(), HAND) == pytest.approx(500)  # 400 + 500 x 0.2
    assert p.drain_per_s == pytest.approx(1000)  # 500 visits / 0.5 s, not the push's 130 ms + 62 ms slots
    assert p.capacity_rps["store-inc-counter"] == pytest.approx(1000)
    assert capacity.predict(settings(batch_size=100), HAND).drain_per_s == pytest.approx(100 / 0.42)
    assert capacity.predict(settings(pull=False), HAND).drain_per_s == pytest.approx(1 / 0.192)  # push: 1 x 1 slot


def test_a_page_that_embeds_its_count_makes_no_first_read():
    assert capacity.reads_per_visit(settings(), 0) == 0
    assert capacity.reads_per_visit(settings(embeds=False), 0) == 1
    assert capacity.reads_per_visit(settings(), 30) == 3  # its re-reads every 10 s (the cache TTL) as before
    assert capacity.requests_per_visit(settings()) == {"serve-page": 1, "get-counter": 0, "inc-counter": 1}


def test_with_the_count_embedded_a_visitor_asks_two_functions_and_the_knee_is_theirs():
    p = capacity.predict(settings(), HAND)
    # inc-counter 2 x 80 / 37 ms = 4,324 requests/s, serve-page 2 x 80 / 20 ms = 8,000: inc-counter binds
    assert p.limited_by == "inc-counter"
    assert p.knee_visits_per_s == pytest.approx(160 / 0.037)
    assert p.knee_rps == pytest.approx(2 * 160 / 0.037)  # two requests a visit
    assert p.cycle_s == pytest.approx(4 + (20 + 37) / 1000)  # no get-counter response in the cycle
    assert p.reads_per_visit == 0 and p.page_embeds_count
    lines = capacity.report_lines(p, settings())
    assert any(line.startswith("demand per user: 2 requests per page") for line in lines)
    assert any("the page embeds its count" in line for line in lines)


def test_the_report_says_the_pull_store_is_one_instance_in_batches():
    lines = capacity.report_lines(capacity.predict(settings(), HAND), settings())
    assert ("  store-inc-counter  pull store: one instance, batches of 500: 500 / 500 ms a commit = 1000.0 visits/s"
            in lines)
    assert any(line.startswith("store: ") and line.endswith("(pull store: one instance, batches of 500)")
               for line in lines)


def test_a_profile_without_a_batch_commit_time_cannot_predict_a_pull_store():
    with pytest.raises(VisitkitError, match="pull_batch_ms"):
        capacity.predict(settings(), Profile("hand", {}, TIMES))
    capacity.predict(settings(pull=False), Profile("hand", {}, TIMES))  # push mode does not need it


def test_a_pull_store_never_needs_more_instances():
    needed = capacity.instances_to_hold(settings(), HAND, 20_000)
    assert needed["store-inc-counter"] == 1 and needed["inc-counter"] > 2


def test_a_closed_loop_with_the_count_embedded_publishes_a_visit_per_two_requests():
    p = capacity.predict(settings(), HAND).as_dict()
    found = capacity.convergence_for_load(p, [(0, 1e9), (60, 1e9)], target="gcp")  # far past the knee for 60 s
    assert found["backlog_at_end"] == pytest.approx((160 / 0.037 - 1000) * 60)


# ---- cost ------------------------------------------------------------------------------------------
@pytest.fixture()
def prices():
    return cost.load_prices()


def million(settings_, prices, region, visits_per_s=1000.0):
    return cost.per_million_visits(settings_, capacity.predict(settings_, HAND), prices, region,
                                   visits_per_s=visits_per_s)


def items(estimate):
    return {item: (text, usd) for item, text, usd in estimate["lines"]}


def test_the_pull_store_is_billed_instance_based_for_the_million_visits_time(prices):
    found = items(million(settings(), prices, "southamerica-east1", visits_per_s=1000))
    # 1,000 s at Tier 2's instance-based 1 vCPU x $0.0000252 + 0.5 GiB x $0.0000028, no request fee
    text, usd = found["Cloud Run: store-inc-counter"]
    assert usd == pytest.approx(1000 * (0.0000252 + 0.5 * 0.0000028))
    assert "instance-based" in text
    iowa = items(million(settings(), prices, "us-central1", visits_per_s=500))
    assert iowa["Cloud Run: store-inc-counter"][1] == pytest.approx(2000 * (0.000018 + 0.5 * 0.000002))


def test_a_pull_store_writes_a_batch_not_a_visit(prices):
    found = million(settings(), prices, "southamerica-east1", visits_per_s=1000)
    quantities = items(found)
    # 2,000 batches of 500: 5 pages + 1 batch document each; the lease renewed every 10 s of 1,000 s
    assert quantities["Firestore document writes"][0] == f"{2000 * 6 + 100:,}"
    assert quantities["Firestore document deletes"][0] == "2,000"  # the batch documents' TTL
    # the lease: a commit's, 2 a renewal; serve-page's cache of the counts: its 1 instance in use (4,000 pages/s an
    # instance, scaled out at 2,400) reads each of the 5 pages once per 10 s TTL
    assert quantities["Firestore document reads"][0] == f"{2000 + 2 * 100 + 1000 * 5 // 10:,}"
    # a Publish request a visit, at least 1,000 bytes each; pulls of 50 (what 50 ms bring at 1,000 a second), billed
    # their messages' bytes
    pulled = 1e6 * cost.visit_message_bytes()
    assert quantities["Pub/Sub throughput"][1] == pytest.approx((1e6 * 1000 + pulled) / 2**40 * 40)
    # a request log entry for each of the page's and inc-counter's 2 M requests, a line per batch
    assert quantities["Cloud Logging"][1] == pytest.approx(
        (2e6 * cost.REQUEST_LOG_ENTRY_BYTES + 2000 * cost.STORE_LINE_ENTRY_BYTES) / 2**30 * 0.5)


def test_a_batch_smaller_than_the_pages_touches_only_its_own_pages(prices):
    quantities = items(million(settings(batch_size=2), prices, "us-central1"))
    assert quantities["Firestore document writes"][0] == f"{500_000 * 3 + 100:,}"  # 2 pages + its document


def test_a_batch_document_is_sized_by_firestores_rules():
    name = len("visit_batches") + 1 + 32 + 1 + 16  # collection + document ID string sizes + 16
    pages = sum(len(page) + 1 + 8 for page in PAGES)  # a map: its keys' string sizes and integer values
    fields = (4 + 500 * 37 + 6 + pages + (15 + 8) + (13 + 8) + (10 + 8) + (7 + 8))  # ids, pages, 3 times, writer
    entries = (name + 9 + name + 32) + (name + 13 + 8 + 32)  # __name__'s and published_to's index entries
    assert cost.batch_bytes(500) == name + fields + 32 + entries
    assert cost.batch_bytes(500) / 500 < cost.marker_bytes() / 5  # a visit's id stores far less than its marker


def test_batch_documents_are_stored_for_the_marker_ttl(prices):
    found = items(million(settings(), prices, "southamerica-east1"))
    gib_months = 2000 * cost.batch_bytes(500) / 2**30 * 7 / (365.25 / 12)
    assert found["Firestore batch storage"][1] == pytest.approx(gib_months * 0.27)
    assert "Firestore marker storage" not in found


def test_a_million_pulled_visits_at_no_given_rate_arrive_at_the_knees(prices):
    knee = capacity.predict(settings(), HAND).knee_visits_per_s
    assert items(million(settings(), prices, "us-central1", None)) == items(million(settings(), prices, "us-central1",
                                                                                    knee))


def test_an_hour_of_a_pull_store_bills_its_instance_all_hour_and_no_push(prices):
    hour = cost.hourly_at(settings(), capacity.predict(settings(), HAND), 1000, prices, "us-central1")
    found = items(hour)
    assert found["Cloud Run: store-inc-counter"][1] == pytest.approx(3600 * (0.000018 + 0.5 * 0.000002))
    assert found["Firestore document writes"][0] == f"{7200 * 6 + 360:,}"  # 3.6 M visits in batches of 500
    assert "instance-based" in found["Cloud Run: store-inc-counter"][0]
    # the page's and inc-counter's request log entries, and a line per batch: no push request to log
    assert found["Cloud Logging"][0].endswith(f"in {2 * 3_600_000 + 7200:,} entries")
    idle, total = cost.idle_hourly(settings(), prices, "us-central1")
    assert idle == [("store-inc-counter", 1, pytest.approx(3600 * (0.000018 + 0.5 * 0.000002)))]


def test_instance_based_prices_are_in_every_tier_and_sourced(prices):
    run = prices["cloud_run"]
    for tier in run["tiers"].values():
        assert tier["instance_based_per_vcpu_second"] < tier["per_vcpu_second"]  # cheaper than while serving
        assert tier["instance_based_per_gib_second"] < tier["per_gib_second"]
    assert "$0.00001800 / vCPU-second" in run["instance_based"]["quote"]
    assert run["tiers"]["1"]["instance_based_per_vcpu_second"] == 0.000018


# ---- iteration 7 against iteration 3 and 4 ---------------------------------------------------------
def test_iteration_7_is_cheapest_at_the_knees_and_dearest_for_a_small_site(prices):
    """At its knee (iteration 4's) a visit costs less than in iterations 3 and 6 at theirs, in both regions; at a
    tenth of a visit a second its always-on puller makes its month the dearest."""
    iterations = {n: load_settings(ROOT / "iterations" / f"iteration-{n}") for n in (3, 4, 6, 7)}
    predicted = {n: capacity.predict(s, study()) for n, s in iterations.items()}
    assert predicted[7].knee_visits_per_s >= predicted[4].knee_visits_per_s
    for region in cost.PER_MILLION_REGIONS:
        knees = {n: cost.cost_per_million(iterations[n], predicted[n], prices, region)[1]["total"] for n in (3, 6, 7)}
        assert knees[7] < min(knees[3], knees[6]), region
        small = {n: cost.monthly_at(iterations[n], predicted[n], 0.1, prices, region)["total"] for n in (3, 6, 7)}
        assert small[7] > max(small[3], small[6]), region


def test_iteration_7_is_a_pull_store_whose_page_embeds_its_count():
    s = load_settings(ROOT / "iterations" / "iteration-7")
    assert (s.store_mode, s.page_embeds_count) == ("pull", True)
    store = s.functions["store-inc-counter"]
    assert (store.max_instances, store.min_instances) == (1, 1)
    predicted = capacity.predict(s, study())
    assert predicted.drain_per_s >= predicted.publish_per_s  # the one puller keeps up with the knee: no backlog
    four = load_settings(ROOT / "iterations" / "iteration-4")
    assert {name: (f.max_instances, f.concurrency) for name, f in s.functions.items() if name != "store-inc-counter"} \
        == {name: (f.max_instances, f.concurrency) for name, f in four.functions.items() if name != "store-inc-counter"}
    assert (s.shards_per_page, s.cache_ttl_seconds) == (four.shards_per_page, four.cache_ttl_seconds)


def test_the_study_profiles_batch_commit_is_three_round_trips_and_an_ack():
    raw = json.loads((PROFILES_DIR / "study.json").read_text())
    assert raw["pull_batch_ms"]["per_batch"] == 3 * raw["service_ms"]["store-inc-counter"] + \
        raw["service_ms"]["inc-counter"]
    assert any(line.startswith("pull_batch_ms") and "ASSUMED" in line for line in raw["derivation"])


def test_predict_compares_the_cost_with_another_iteration_on_the_same_terms():
    import argparse

    from visitkit.model import command

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    seven, three = ROOT / "iterations" / "iteration-7", ROOT / "iterations" / "iteration-3"
    options = parser.parse_args([str(seven), "--cost-per-million", "--compare", str(three)])
    printed = "\n".join(command.lines(options, study(), lambda folder: (None, {})))
    for region in cost.PER_MILLION_REGIONS:
        theirs = cost.cost_per_million(load_settings(three), capacity.predict(load_settings(three), study()),
                                           cost.load_prices(), region)[1]["total"]
        ours = cost.cost_per_million(load_settings(seven), capacity.predict(load_settings(seven), study()),
                                         cost.load_prices(), region)[1]["total"]
        assert f"beside {three}: {theirs:,.2f} USD" in printed and f"this costs {ours / theirs:.2f} x that" in printed


def test_a_page_that_embeds_its_count_reads_it_through_serve_pages_own_cache():
    """serve-page reads the totals as get-counter does (one read per page and TTL per instance): 2 instances x 5
    pages / 10 s = 1 read/s at most, however many pages it serves; none without the count embedded."""
    assert capacity.embedded_reads_per_s(settings(), 1000) == pytest.approx(2 * len(PAGES) / 10)
    assert capacity.embedded_reads_per_s(settings(), 0.5) == pytest.approx(0.5)
    assert capacity.embedded_reads_per_s(settings(embeds=False), 1000) == 0
    # get-counter's re-reads (3 a visit at a 30 s dwell) add theirs: 2 instances x 5 pages / 10 s
    assert capacity.count_reads_per_s(settings(), 1000, 3) == pytest.approx(1 + 1)
    assert capacity.count_reads_per_s(settings(), 1000, 0) == pytest.approx(1)

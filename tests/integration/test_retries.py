"""A careful client at twice the knee, through the real local stack: with --retry-visits a visit refused
for now (429) is posted again with the same visit id, every acknowledged visit is stored exactly once
(the exact audit, id by id), and the visits refused at each of their tries are counted as given up and
reported so.

A knee that is small and reached at once: inc-counter has 1 instance of concurrency 1 and each of its
publishes waits 250 ms more for Pub/Sub (Toxiproxy), so it serves about 4 visits a second, and a request
queued 1 s gets its 429; the other functions have room. The spike goes to twice the users the capacity
model puts at that knee.
"""
import dataclasses
import json
import subprocess

import pytest
from conftest import running_stack
from helpers import settle

from visitkit.catalogue import stored_visits
from visitkit.model.capacity import predict
from visitkit.paths import ROOT
from visitkit.results import analysis, audit, folder as results
from visitkit.reports import report
from visitkit.results.summary import audit_figures, visit_accounting
from visitkit.runs.config import LoadPlan
from visitkit.settings import load_settings
from visitkit.twin.profile import load_profile

pytestmark = pytest.mark.timeout(240)

QUEUE_TIMEOUT = 1.0
PUBLISH_MS = 250
RETRIES = 2  # three tries in all: 1 + 2 s of backoff (HAProxy's 429 asks no Retry-After)


@pytest.fixture(scope="module")
def knee(tmp_path_factory):
    """(the stack, the users at its knee per the capacity model)."""
    folder = tmp_path_factory.mktemp("knee")
    settings_file = folder / "settings.json"
    roomy = {"max_instances": 1, "concurrency": 4}
    settings_file.write_text(json.dumps({
        "shards_per_page": 2, "cache_ttl_seconds": 0,
        "functions": {"serve-page": roomy, "get-counter": roomy, "store-inc-counter": roomy,
                      "inc-counter": {"max_instances": 1, "concurrency": 1}}}))
    none = load_profile("none")
    profile = dataclasses.replace(none, name="slow-publish", latency_ms={**none.latency_ms, "pubsub": PUBLISH_MS},
                                  service_ms={**none.service_ms, "inc-counter": none.service_ms["inc-counter"] + PUBLISH_MS})
    settings = load_settings(settings_file)
    prediction = predict(settings, profile, QUEUE_TIMEOUT)
    assert prediction.limited_by == "inc-counter"
    with running_stack(folder / "state", settings_file, queue_timeout=QUEUE_TIMEOUT, profile=profile) as stack:
        yield stack, prediction.knee_users


@pytest.mark.slow
def test_at_twice_the_knee_visits_refused_for_now_are_posted_again_and_stored_once(knee, tmp_path):
    stack, knee_users = knee
    spike = round(2 * knee_users)
    before = stack.totals()
    load = LoadPlan.build("spike", shape_set=f"base_users=4,base_s=2,spike_users={spike},spike_rate=20,"
                                             f"spike_s=14,recover_s=4,settle_s=2", retry_visits=RETRIES)
    assert ("--retry-visits", RETRIES) in load.options(stack.base_url)
    subprocess.run(load.locust_command(stack.base_url, tmp_path), check=True, timeout=120,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ledger = json.loads((tmp_path / results.LEDGER).read_text())
    total = {key: sum(ledger.get(key, {}).values()) for key in ("sent", *audit.OUTCOMES, "retried")}

    # Some visits got a 429 and were posted again, with their id: every visit that gave up was
    # refused at each of its three tries, and inc-counter answered more posts than there were visits.
    inc_429 = sum(count for name, error, count in analysis.first_failures(results.read_csv(tmp_path / "locust_failures.csv"))
                  if name.startswith("/inc-counter") and "429" in error)
    posts = sum(row["requests"] for row in analysis.percentile_table(results.read_csv(tmp_path / "locust_stats.csv"))
                if row["name"].startswith("/inc-counter"))
    assert inc_429 > 0 and total["retried"] > 0 and total["gave_up"] > 0, (inc_429, total)
    assert posts > total["sent"] and total["acknowledged"] > 0 and ledger["complete"]

    # Every acknowledged visit stored, id by id, exactly once; nothing refused or given up was stored.
    ambiguous = {page: ledger["failed"].get(page, 0) + ledger["unanswered"].get(page, 0) for page in before}
    acked = ledger["acknowledged"]
    after = settle(stack, {page: before[page] + acked.get(page, 0) for page in before},
                   {page: before[page] + acked.get(page, 0) + ambiguous[page] for page in before})
    record = audit.run(ledger, "exact", lambda ids: stored_visits(stack.firestore(), ids), totals=stack.totals)
    rows = visit_accounting(ledger, record, before, after)
    assert rows["total"]["acknowledged_stored"] == total["acknowledged"]
    assert rows["total"]["lost"] == 0 and rows["total"]["duplicated"] == 0 and rows["total"]["refused_stored"] == 0
    assert rows["total"]["retried"] == total["retried"] and rows["total"]["gave_up"] == total["gave_up"]

    # The report says how many gave up, next to refused.
    committed = results.read_summary(ROOT / "iterations/iteration-1/results/breakpoint-20261125-191233/summary.json")
    summary = dataclasses.replace(committed, audit=audit_figures(ledger, record), visits=rows)
    words = "\n".join(report.visits_section(summary, {}))
    assert f"{total['refused']:,} refused (4xx, the platform's 429 included), {total['gave_up']:,} gave up" in words

"""tune (model/tune.py): its cheapest pick against a brute-force search, its direction as goals tighten, a target
nothing holds, and the quota it searches within with where each figure came from."""
import argparse
import itertools
import json
import math
from dataclasses import replace

import pytest

from visitkit.catalogue import FUNCTIONS, PUSH_FUNCTION, READER_FUNCTION
from visitkit.model import capacity, cost, latency, tune
from visitkit.paths import ITERATIONS_DIR
from visitkit.reports import verdict
from visitkit.settings import load_settings, parse_settings
from visitkit.twin.profile import load_profile

PROFILE = load_profile("study")
PRICES = cost.load_prices()
REGION = "us-central1"
SMALL = tune.Space(concurrencies=(1, 80), cache_ttls=(0, 10), batch_sizes=(1000,), single_cpus=("1",),
                   shared_cpus=("1", "2"))


def brute_force(goals: tune.Goals, space: tune.Space, quota: tune.Quota) -> float:
    """The least monthly bill over every combination of every global choice, each searched function's every shape
    at 1 to 4 instances (the fixed parts as tune fixes them) that serves its share of the rate x headroom on its
    own (a combination of others cannot change that), judged on the whole: knee and drain, each visitor's request's
    p95, freshness, quota."""
    rate, best = goals.visits_per_s, math.inf
    stores = [("push", 0)] * (space.stores in ("any", "push"))
    stores += [("pull", size) for size in space.batch_sizes] * (space.stores in ("any", "pull"))
    for ttl, (mode, batch), embeds in itertools.product(space.cache_ttls, stores, space.embeds):  # not tune's own
        reference = parse_settings(tune.base_raw(goals, ttl, mode, batch, embeds), "brute")
        per_visit = {**capacity.requests_per_visit(reference, 0), PUSH_FUNCTION: 0 if mode == "pull" else 1}
        if not per_visit[READER_FUNCTION]:
            reference = tune.with_function(reference, READER_FUNCTION, tune.IDLE_READER)
        searched = [name for name in FUNCTIONS if per_visit[name]]
        choices = [[spec for shape in tune.shapes(space) for n in range(1, 5)
                    for spec in [replace(shape, max_instances=n)] if holds(reference, name, spec, goals)]
                   for name in searched]
        for chosen in itertools.product(*choices):
            settings = reference
            for name, spec in zip(searched, chosen):
                settings = tune.with_function(settings, name, spec)
            prediction = capacity.predict(settings, PROFILE)
            if min(prediction.knee_visits_per_s, prediction.drain_per_s) < goals.headroom * rate - 1e-9:
                continue
            if sum(s.max_instances * float(s.effective_cpu) for s in settings.functions.values()) > quota.vcpu:
                continue
            found = latency.predict_latency(settings, PROFILE, rate)
            if any(found[name].p95_ms > goals.p95_ms for name in capacity.PUBLIC if name in found):
                continue
            if latency.freshness_s(settings, PROFILE, rate, found) > goals.freshness_s:
                continue
            best = min(best, cost.monthly_at(settings, prediction, rate, PRICES, REGION)["total"])
    return best


def holds(reference, name, spec, goals) -> bool:
    """Whether `name` alone serves its share of the rate x headroom with `spec`."""
    settings = tune.with_function(reference, name, spec)
    share = {**capacity.requests_per_visit(settings, 0), PUSH_FUNCTION: 1}[name]
    return capacity.predict(settings, PROFILE).capacity_rps[name] >= goals.headroom * goals.visits_per_s * share - 1e-9


def test_the_cheapest_pick_is_the_brute_forces():
    goals, quota = tune.Goals(visits_per_s=40, p95_ms=100, freshness_s=30), tune.Quota(vcpu=12)
    found = tune.search(goals, PROFILE, PRICES, REGION, quota, SMALL)
    cheapest = tune.picks(found.candidates).cheapest
    exact = cost.monthly_at(cheapest.settings, cheapest.prediction, 40, PRICES, REGION)["total"]
    assert cheapest.monthly_usd == pytest.approx(exact)
    assert exact == pytest.approx(brute_force(goals, SMALL, quota))
    assert cheapest.headroom >= goals.headroom and cheapest.p95_ms <= goals.p95_ms


CONCURRENCY_ONE = tune.Space(concurrencies=(1,), cache_ttls=(10,), stores="push", embeds=(False,),
                             single_cpus=("0.167", "1"))


def cheapest(rate: float, p95_ms: float) -> tune.Candidate:
    found = tune.search(tune.Goals(rate, p95_ms), PROFILE, PRICES, REGION, tune.Quota(vcpu=100), CONCURRENCY_ONE)
    return tune.picks(found.candidates).cheapest


def instances(candidate: tune.Candidate, name: str = "inc-counter") -> int:
    return candidate.settings.functions[name].max_instances


def test_a_tighter_p95_goal_needs_more_instances_and_none_hold_one_below_the_service_time():
    # inc-counter 1 at a time, 37 ms, 30 requests/s: 2 instances hold 1.5 x the rate (27/s each) with a queue that
    # reaches the p95 (Erlang C), 3 keep its p95 under 100 ms, 4 leave no wait at the p95; the pick holds the goal
    settings = load_settings(ITERATIONS_DIR / "iteration-3")
    shape = tune.FunctionSettings(max_instances=1, concurrency=1)
    counts = {p95: tune.instance_counts(settings, PROFILE, "inc-counter", shape, 30, tune.Goals(30, p95))
              for p95 in (1000, 100, 40)}
    assert counts == {1000: ([2, 4], None), 100: ([3, 4], None), 40: ([4], None)}
    assert tune.instance_counts(settings, PROFILE, "inc-counter", shape, 30, tune.Goals(30, 36)) == ([], "too slow")
    loose, tight = cheapest(30, 1000), cheapest(30, 40)
    assert tight.p95_ms <= 40 and tight.monthly_usd >= loose.monthly_usd


def test_a_higher_rate_buys_more_instances_and_costs_more():
    low, high = cheapest(30, 300), cheapest(60, 300)
    assert instances(high) > instances(low)
    assert high.monthly_usd > low.monthly_usd


def test_a_quota_too_small_stops_the_search_and_says_what_lifts_it():
    found = tune.search(tune.Goals(40, 100), PROFILE, PRICES, REGION, tune.Quota(vcpu=2, vcpu_from=tune.GIVEN), SMALL)
    assert not found.candidates and found.rejected["quota"]
    stop = found.stops["quota"]
    assert "CpuAllocPerProjectRegion" in stop and "--dimensions=region=us-central1" in stop
    assert "2 vCPUs (given) and 40 GiB (ASSUMED)" in stop and "read the project's own with --project P" in stop
    assert "MemAllocPerProjectRegion" not in stop  # the memory fits: only the CPU is asked for
    # memory short and CPU plenty: the ask names the memory quota alone, in bytes (its unit)
    stop = tune.search(tune.Goals(40, 100), PROFILE, PRICES, REGION, tune.Quota(vcpu=500, memory_gib=0.1), SMALL).stops
    assert "--quota-id=MemAllocPerProjectRegion --preferred-value=" in stop["quota"]
    assert "CpuAllocPerProjectRegion" not in stop["quota"]
    assert tune.quota_asks(2.5, 3.2, tune.Quota(vcpu=2, memory_gib=1)) == [
        ("CpuAllocPerProjectRegion", 3000), ("MemAllocPerProjectRegion", 4 * 2 ** 30)]


def options(**given: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    tune.add_arguments(parser)
    return parser.parse_args([f"--{key.replace('_', '-')}={value}" for key, value in given.items()])


def test_beyond_the_pull_stores_ceiling_with_push_refused_exits_non_zero_naming_it(tmp_path):
    status, lines = tune.run(options(visits_per_s=2000, store="pull", out=tmp_path / "it"), PROFILE, "tune")
    assert status == tune.UNREACHABLE != 0
    stop = next(line for line in lines if "backlog:" in line)
    assert "pull store's one instance drains at most 1,704 visits/s with batches of 1000" in stop
    assert "allow the push store (--store any)" in stop
    assert not (tmp_path / "it").exists()


def test_300_visits_per_s_writes_an_iteration_that_loads_and_carries_several_checks(tmp_path):
    folder = tmp_path / "tuned"
    status, lines = tune.run(options(visits_per_s=300, p95_ms=300, region=REGION, out=folder), PROFILE, "tune")
    assert status == 0 and [line.split(":")[0] for line in lines if line[:1] != " "][1:4] == list(tune.PICKS)
    settings = load_settings(folder)
    assert capacity.predict(settings, PROFILE).knee_visits_per_s >= 1.5 * 300
    readme = (folder / "README.md").read_text()
    assert len(verdict.hypothesis_checks(readme)) >= 2
    assert (folder / "tune.png").stat().st_size > 0


def test_the_pull_stores_drain_must_hold_the_headroom_too(tmp_path):
    # 1,200 visits/s: the pull store's 1,704 visits/s are above the rate but below 1.5 x it
    status, lines = tune.run(options(visits_per_s=1200, store="pull", out=tmp_path / "it"), PROFILE, "tune")
    assert status == tune.UNREACHABLE
    assert any("1,704 visits/s with batches of 1000" in line and "below 1.5 x 1,200" in line for line in lines)
    pull = replace(SMALL, stores="pull", embeds=(True,), cache_ttls=(10,))
    assert tune.search(tune.Goals(1200, headroom=1.4), PROFILE, PRICES, REGION, tune.Quota(vcpu=100), pull).candidates



READ = tune.Quota(200, 400, tune.read_from("p1"), tune.read_from("p1"))  # as cloud/preflight.py's tune_quota reads it
ONE_SHAPE = tune.Space(concurrencies=(1,), cache_ttls=(10,), stores="push", embeds=(True,), single_cpus=("1",),
                       shared_cpus=())


def test_each_quota_figure_given_wins_over_the_projects_and_says_where_it_came_from():
    assert tune.quota_for(options(visits_per_s=1)) == tune.Quota()
    assert tune.Quota().shown() == "20 vCPUs and 40 GiB (ASSUMED)"
    assert tune.quota_for(options(visits_per_s=1), READ) == READ
    mixed = tune.quota_for(options(visits_per_s=1, quota_vcpu=50), READ)
    assert (mixed.vcpu, mixed.memory_gib, mixed.assumed) == (50, 400, False)
    assert mixed.shown() == "50 vCPUs (given) and 400 GiB (read from project p1)"
    assert tune.quota_for(options(visits_per_s=1, quota_memory_gib=8)).shown() == "20 vCPUs (ASSUMED) and 8 GiB (given)"
    assert tune.Quota(math.inf, 400, "read from project p1", "read from project p1").shown() == \
        "unlimited vCPUs and 400 GiB (read from project p1)"


def test_the_header_the_readme_and_tune_json_say_where_the_quota_came_from(tmp_path, monkeypatch):
    monkeypatch.setattr(tune, "plot", lambda *_: None)  # not what is tested here, and slow
    folder = tmp_path / "it"
    status, lines = tune.run(options(visits_per_s=1, out=folder), PROFILE, "tune", READ, ["a note"], ONE_SHAPE)
    assert status == 0
    assert lines[0].endswith("(profile study; quota 200 vCPUs and 400 GiB (read from project p1); a model)")
    assert lines[1] == "note: a note"
    assert "within the quota searched: 200 vCPUs and 400 GiB (read from project p1)." in \
        (folder / "README.md").read_text()
    record = json.loads((folder / "tune.json").read_text())["quota"]
    assert record == {"vcpu": 200, "vcpu_from": "read from project p1", "memory_gib": 400,
                      "memory_from": "read from project p1"}
    _, lines = tune.run(options(visits_per_s=1, out=folder), PROFILE, "tune", space=ONE_SHAPE)
    assert "quota 20 vCPUs and 40 GiB (ASSUMED)" in lines[0]
    assert "within the quota searched: 20 vCPUs and 40 GiB (ASSUMED)." in (folder / "README.md").read_text()


def test_a_quota_read_from_the_project_is_the_one_searched_within(tmp_path):
    small = replace(READ, vcpu=0.5)  # one instance of 1 vCPU does not fit
    status, lines = tune.run(options(visits_per_s=1, out=tmp_path / "it"), PROFILE, "tune", small, space=ONE_SHAPE)
    assert status == tune.UNREACHABLE
    stop = next(line for line in lines if line.startswith("  quota:"))
    assert "beyond its quota of 0.5 vCPUs and 400 GiB (read from project p1)" in stop
    assert "--project P" not in stop  # read already: only asking Google for more lifts it

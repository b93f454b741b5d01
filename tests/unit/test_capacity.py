"""The capacity model against numbers worked out by hand (docs/local-twin.md shows the same sums)."""
import pytest

from visitkit.paths import ROOT
from visitkit.model.capacity import breakpoint_convergence, convergence_for_load, counter_reads_per_s, instance_rate, predict, report_lines
from visitkit.model.capacity import figure_to_measure, first_429_visits_per_s
from visitkit.twin.profile import Profile
from visitkit.settings import parse_settings


STUDY_TIMES = Profile("hand", {}, {"serve-page": 20, "get-counter": 150, "inc-counter": 37,
                                   "store-inc-counter": 130}, cache_hit_ms=2)


def settings(ttl=0, store_instances=2):
    functions = {name: {"max_instances": 2, "concurrency": 1}
                 for name in ("serve-page", "get-counter", "inc-counter", "store-inc-counter")}
    functions["store-inc-counter"]["max_instances"] = store_instances
    return parse_settings({"shards_per_page": 2, "cache_ttl_seconds": ttl, "functions": functions})


def test_iteration_0_is_limited_by_get_counter():
    p = predict(settings(), STUDY_TIMES)
    # get-counter: 2 instances x 1 / 0.150 s = 13.33 requests/s, the least of the public functions
    assert p.limited_by == "get-counter"
    assert p.capacity_rps["get-counter"] == pytest.approx(13.333, abs=1e-3)
    # a page every 4 s (mean of 3-5 s) + 20 + 150 + 37 ms = 4.207 s
    assert p.cycle_s == pytest.approx(4.207)
    assert p.knee_users == pytest.approx(56.09, abs=0.01)  # 13.333 x 4.207
    assert p.knee_rps == pytest.approx(40.0)  # 3 x 13.333
    assert p.first_429_users == pytest.approx(189.43, abs=0.01)  # 13.333 x (4.207 + 10)
    # the store drains 2 / 0.130 = 15.38/s, more than the 13.33/s that can be published: no backlog
    assert p.drain_per_s == pytest.approx(15.385, abs=1e-3)
    assert p.backlog_per_min == 0 and p.convergence_min == 0


def test_iteration_3_is_limited_by_inc_counter_and_builds_a_backlog():
    p = predict(settings(ttl=10, store_instances=4), STUDY_TIMES)
    # cached get-counter: every request a hit at 2 ms (its reads refresh the cache outside the requests):
    # 1 / 0.002 = 500 requests/s per instance
    assert p.capacity_rps["get-counter"] == pytest.approx(1000.0)
    assert p.limited_by == "inc-counter"
    assert p.capacity_rps["inc-counter"] == pytest.approx(54.054, abs=1e-3)  # 2 / 0.037
    # get-counter at the knee: a hit, 2 ms
    assert p.response_ms["get-counter"] == pytest.approx(2.0)
    assert p.cycle_s == pytest.approx(4.059, abs=1e-4)
    assert p.knee_users == pytest.approx(54.054 * 4.059, abs=0.01)
    assert p.knee_rps == pytest.approx(162.16, abs=0.01)
    assert p.first_429_users == pytest.approx(54.054 * 14.059, abs=0.1)
    # published 54.05/s, drained 4 / 0.130 = 30.77/s: 23.29/s pile up
    assert p.drain_per_s == pytest.approx(30.769, abs=1e-3)
    assert p.backlog_per_min == pytest.approx(1397.1, abs=0.1)
    assert p.extra_min_per_min == pytest.approx(0.7568, abs=1e-4)
    assert p.convergence_min == pytest.approx(11.35, abs=0.01)  # after 15 minutes past the knee


def test_a_push_overhead_holds_each_store_slot_longer_than_its_execution():
    """The profile's push overhead is part of a delivery's slot time: the store drains slower, the
    backlog grows faster; nothing the visitor calls changes."""
    overhead = Profile("hand", {"push": 62}, STUDY_TIMES.service_ms, cache_hit_ms=2)
    plain, held = predict(settings(), STUDY_TIMES), predict(settings(), overhead)
    # 2 slots / (0.130 + 0.062) s = 10.42/s, now below the 13.33/s published at get-counter's knee
    assert held.drain_per_s == pytest.approx(10.417, abs=1e-3)
    assert held.backlog_per_min == pytest.approx((13.333 - 10.417) * 60, abs=0.1)
    assert plain.backlog_per_min == 0
    assert (held.knee_users, held.first_429_users, held.cycle_s) == (plain.knee_users, plain.first_429_users,
                                                                      plain.cycle_s)


def test_with_a_cache_every_request_is_a_hit_since_reads_hold_no_requests_slot():
    # get-counter answers an expired total at once while one read refreshes it: even a short cache
    assert instance_rate(1, 150, ttl_s=0.5, hit_ms=2) == pytest.approx(500)
    assert instance_rate(4, 100) == pytest.approx(40)  # no cache: concurrency 4 / 0.1 s


def test_the_printout_has_a_knee_line():
    lines = report_lines(predict(settings(), STUDY_TIMES), settings())
    assert "knee: 56 users, 40 RPS, limited by get-counter" in lines
    assert any(line.startswith("first 429: 189 users") for line in lines)


def test_an_instance_serves_no_more_than_its_vcpus_allow():
    """Iteration 4 by hand: 80 requests at once on 1 vCPU. inc-counter's wait allows 80 / 37 ms = 2,162
    requests/s per instance, its CPU (1.3 ms each) only 1,000 / 1.3 = 769: the CPU binds."""
    from visitkit.model.capacity import predict
    from visitkit.twin.profile import load_profile
    from visitkit.settings import load_settings

    found = predict(load_settings(ROOT / "iterations" / "iteration-4"), load_profile("study"))
    assert found.capacity_rps["inc-counter"] == pytest.approx(2 * 1000 / 1.3)
    assert found.limited_by == "inc-counter"
    assert found.knee_rps == pytest.approx(3 * 2 * 1000 / 1.3)
    # iteration 3 (concurrency 1, 1/6 vCPU): 1,000 / 1.3 x 0.167 = 128/s > 1 / 37 ms = 27/s: the wait binds
    three = predict(load_settings(ROOT / "iterations" / "iteration-3"), load_profile("study"))
    assert three.capacity_rps["inc-counter"] == pytest.approx(2 / 0.037)
    assert found.knee_users >= 10 * three.knee_users


def test_the_twins_machine_caps_the_knee_when_its_cpu_runs_out_first():
    # 80 requests at once per instance: inc-counter 2 x 80 / 0.037 = 4,324/s, far beyond what 2 cores
    # at 10 ms of CPU per page serve: 2 x 1000 / 10 = 200 pages/s
    functions = {name: {"max_instances": 2, "concurrency": 80}
                 for name in ("serve-page", "get-counter", "inc-counter", "store-inc-counter")}
    many = parse_settings({"shards_per_page": 20, "cache_ttl_seconds": 10, "functions": functions})
    on_a_machine = Profile("hand", {}, STUDY_TIMES.service_ms, cache_hit_ms=2,
                           host={"cores": 2, "cpu_ms_per_page": 10})
    p = predict(many, on_a_machine)
    assert p.limited_by == "inc-counter" and p.knee_rps == pytest.approx(3 * 160 / 0.037)  # the platform's
    assert p.machine_pages_per_s == pytest.approx(200)
    assert p.machine_limited_by == "this machine's CPU"
    assert p.machine_knee_rps == pytest.approx(600)  # 3 requests per page
    assert p.machine_knee_users == pytest.approx(200 * p.cycle_s)
    assert p.machine_first_429_users == pytest.approx(200 * (p.cycle_s + 10))
    assert any(line.startswith("knee on this machine: ") for line in report_lines(p, many))


NONE_LIKE = Profile("hand", {}, {"serve-page": 4, "get-counter": 9, "inc-counter": 6, "store-inc-counter": 7},
                    cache_hit_ms=1.5, host={"cores": 2, "cpu_ms_per_page": 7.7, "cpu_ms_per_counter_read": 2.4})


def test_without_a_cache_every_page_pays_a_counter_read_on_the_machine():
    p = predict(settings(), NONE_LIKE)
    # get-counter 2 x 1 / 0.009 = 222.2/s; but every page reads Firestore: 2 x 1000 / (7.7 + 2.4) = 198.0 pages/s
    assert p.limited_by == "get-counter" and p.capacity_rps["get-counter"] == pytest.approx(222.22, abs=0.01)
    assert p.machine_pages_per_s == pytest.approx(198.02, abs=0.01)
    assert p.machine_limited_by == "this machine's CPU"
    # cycle 4 + (4 + 9 + 6) / 1000 = 4.019 s
    assert p.machine_knee_users == pytest.approx(198.02 * 4.019, abs=0.1)


def test_with_a_cache_a_page_pays_only_its_share_of_counter_reads():
    p = predict(settings(ttl=10), NONE_LIKE)
    # at the platform's bottleneck (inc-counter, 2 / 0.006 = 333.3/s) each get-counter instance serves
    # 166.7 requests/s of which 5 pages / 10 s = 0.5 miss: 0.003 reads per page, so the machine serves
    # just under 2 x 1000 / 7.7 = 259.7 pages/s
    reads = 0.5 / (p.publish_per_s / 2)
    assert p.machine_pages_per_s == pytest.approx(2000 / (7.7 + 2.4 * reads))
    assert 259 < p.machine_pages_per_s < 259.75


def test_a_machine_with_cpu_to_spare_leaves_the_knee_where_it_was():
    p = predict(settings(), Profile("hand", {}, STUDY_TIMES.service_ms, cache_hit_ms=2,
                                    host={"cores": 2, "cpu_ms_per_page": 10}))
    assert p.machine_limited_by == "get-counter"
    assert p.machine_knee_users == pytest.approx(p.knee_users)
    assert not any(line.startswith("knee on this machine") for line in report_lines(p, settings()))


def test_get_counter_reads_firestore_per_request_or_once_per_page_and_ttl_per_instance():
    assert counter_reads_per_s(settings(), 100) == 100  # no cache: every request
    # 2 instances x 5 pages / 10 s = 1 read/s at most, however many requests
    assert counter_reads_per_s(settings(ttl=10), 100) == pytest.approx(1.0)
    assert counter_reads_per_s(settings(ttl=10), 0.4) == pytest.approx(0.4)  # fewer requests than that: each one


def test_convergence_for_a_runs_own_load_counts_only_what_outran_the_store():
    """10 pages/s at the knee, 5 drained: 10 s at 40 users (past the knee) leave 50 visits, 10 s at 20
    users (5 pages/s, what the store drains) leave them there, 10 s at 8 users (2 pages/s) drain 30."""
    prediction = {"cycle_s": 4.0, "knee_rps": 30.0, "drain_per_s": 5.0}
    series = [(0, 40), (10, 20), (20, 8), (30, 0)]
    model = convergence_for_load(prediction, series)
    assert model["backlog_at_end"] == pytest.approx(20.0)
    assert model["seconds_after_load"] == pytest.approx(4.0)
    assert model["extra_min_per_min"] == pytest.approx(4.0 / 30)
    # below the knee all along, the store keeps up: nothing left
    assert convergence_for_load(prediction, [(0, 8), (60, 8)])["seconds_after_load"] == 0
    # on the twin a machine knee below the platform's caps what can be published
    capped = {**prediction, "machine_knee_rps": 15.0}
    assert convergence_for_load(capped, [(0, 40), (10, 0)], "local")["backlog_at_end"] == 0
    assert convergence_for_load(capped, [(0, 40), (10, 0)], "gcp")["backlog_at_end"] == pytest.approx(50.0)


def test_a_breakpoints_ramp_publishes_what_its_users_ask_until_the_knee():
    """One user more each second, a page per user per second, 10 pages/s at the knee, 5 drained: nothing
    left for the first 5 s, then 1, 2, 3, 4 more a second, then 5 a second from 10 users on."""
    prediction = {"cycle_s": 1.0, "knee_rps": 30.0, "drain_per_s": 5.0}
    model = breakpoint_convergence(prediction, 1, 1)
    assert model["backlog_at_end"] == pytest.approx(1 + 2 + 3 + 4 + 50 * 5)
    assert model["seconds_after_load"] == pytest.approx(52.0)
    assert model["extra_min_per_min"] == pytest.approx(52 / 60)


def test_a_run_waits_for_its_counters_at_least_twice_what_the_model_says_its_load_left():
    from types import SimpleNamespace

    from visitkit.runs.convergence import MIN_CONVERGENCE_WAIT_S, convergence_wait

    local = SimpleNamespace(min_convergence_wait=0)
    default = SimpleNamespace(convergence_timeout=None)
    assert convergence_wait(default, local, 150) == 450  # 3 x the load
    assert convergence_wait(default, local, 150, model_seconds=480) == 960  # the model's backlog needs longer
    assert convergence_wait(default, local, 10) == MIN_CONVERGENCE_WAIT_S
    assert convergence_wait(SimpleNamespace(convergence_timeout=60), local, 150, model_seconds=480) == 60


def test_a_visit_reads_the_count_once_then_once_each_refresh_or_ttl_while_it_stays_open():
    from visitkit.model.capacity import PAGE_REFRESH_SECONDS, reads_per_visit

    assert PAGE_REFRESH_SECONDS == 5
    assert reads_per_visit(settings(), 0) == 1  # the study's visitor
    assert reads_per_visit(settings(), 4.9) == 1 and reads_per_visit(settings(), 5) == 2
    assert reads_per_visit(settings(), 60) == 13  # no cache: every 5 s, 12 re-reads
    assert reads_per_visit(settings(ttl=10), 60) == 7  # a 10 s cache: every 10 s, 6 re-reads
    assert reads_per_visit(settings(ttl=3), 60) == 13  # a cache shorter than the refresh: the refresh's


def test_the_interval_the_model_assumes_is_the_pages(monkeypatch):
    """serve-page gives the page its refresh interval: COUNTER_REFRESH_SECONDS (5 s by default), or the cache TTL
    Terraform passes it (CACHE_TTL_SECONDS) when longer; the model's reread_interval is the same."""
    import importlib

    import serve_page
    from visitkit.model.capacity import reread_interval

    try:
        for ttl in (0, 3, 10):
            monkeypatch.setenv("CACHE_TTL_SECONDS", str(ttl))
            monkeypatch.delenv("COUNTER_REFRESH_SECONDS", raising=False)
            assert importlib.reload(serve_page).REFRESH_SECONDS == reread_interval(settings(ttl=ttl))
    finally:
        monkeypatch.undo()
        importlib.reload(serve_page)


def test_at_dwell_zero_every_figure_is_the_study_visitors():
    for cached in (settings(), settings(ttl=10, store_instances=4)):
        assert predict(cached, STUDY_TIMES, dwell_s=0) == predict(cached, STUDY_TIMES)
        assert not any(line.startswith("reads per visit") for line in report_lines(predict(cached, STUDY_TIMES), cached))


def test_a_long_dwell_moves_the_knee_to_get_counter_in_visits_and_requests():
    """Iteration 3 by hand: inc-counter binds the study's visitor at 54.05 visits/s; get-counter (cached,
    2 x 1 / 2 ms = 1000 requests/s) serves 1000 visits/s of them. Readers who stay 200 s make 1 + 200 / 10 = 21
    reads a visit: get-counter now holds 1000 / 21 = 47.62 visits/s, below inc-counter's 54.05, and binds."""
    dwell = predict(settings(ttl=10, store_instances=4), STUDY_TIMES, dwell_s=200)
    assert dwell.reads_per_visit == 21
    assert dwell.limited_by == "get-counter"
    assert dwell.knee_visits_per_s == pytest.approx(1000 / 21)
    assert dwell.knee_rps == pytest.approx(1000 / 21 * 23)  # 21 reads, a page and an inc-counter call a visit
    assert dwell.publish_per_s == pytest.approx(1000 / 21) and dwell.backlog_per_min == pytest.approx(
        (1000 / 21 - 30.769) * 60, abs=0.1)  # the store drains 4 / 0.130 = 30.77/s
    # a reader stays 200 s on the page (the re-reads run meanwhile) plus the first three responses, get-counter's
    # a hit (its reads are off the requests' path)
    assert dwell.cycle_s == pytest.approx(200 + (20 + 2 + 37) / 1000)
    assert dwell.knee_users == pytest.approx(1000 / 21 * dwell.cycle_s)
    lines = report_lines(dwell, settings(ttl=10, store_instances=4))
    assert any(line.startswith("reads per visit: 21 get-counter requests") for line in lines)
    assert "knee: 48 visits/s, 1095 RPS, 9527 readers on a page, limited by get-counter" in lines
    assert predict(settings(ttl=10, store_instances=4), STUDY_TIMES).limited_by == "inc-counter"


def test_the_instances_a_rate_needs_are_its_requests_over_one_instances_rate():
    """100 visits/s of readers who stay 200 s (21 reads a visit), iteration 3's functions by hand: get-counter
    2,100 requests/s at 463 per instance -> 5; serve-page 100 at 50 -> 2 (as set); inc-counter 100 at 27.03 -> 4;
    store-inc-counter 100 deliveries at 1 / 0.130 = 7.69 -> 13 (100 x 0.130 exactly, no 14th for rounding)."""
    from visitkit.model.capacity import hold_plan, instances_to_hold

    iteration_3 = settings(ttl=10, store_instances=4)
    assert instances_to_hold(iteration_3, STUDY_TIMES, 100, 200) == {
        "serve-page": 2, "get-counter": 5, "inc-counter": 4, "store-inc-counter": 13}
    assert instances_to_hold(iteration_3, STUDY_TIMES, 1, 0) == {name: spec.max_instances
                                                                for name, spec in iteration_3.functions.items()}
    plan = hold_plan(iteration_3, STUDY_TIMES, 100, 200)
    assert plan["raised"] == {"get-counter": (2, 5), "inc-counter": (2, 4), "store-inc-counter": (4, 13)}
    assert plan["prediction"].knee_visits_per_s >= 100 and plan["prediction"].drain_per_s == pytest.approx(100)
    assert plan["settings"].functions["get-counter"].concurrency == 1 and plan["settings"].cache_ttl_seconds == 10


def test_iteration_5_needs_53_get_counter_instances_for_10000_visits_of_a_minute():
    """7 reads a visit (every 10 s for 60 s): 70,000 requests/s at 1,000 / 0.75 ms = 1,333 per instance on 1 vCPU
    -> 52.5, so 53; the other functions hold 10,000 visits/s as set."""
    from visitkit.model.capacity import hold_plan
    from visitkit.settings import load_settings
    from visitkit.twin.profile import load_profile

    plan = hold_plan(load_settings(ROOT / "iterations" / "iteration-5"), load_profile("study"), 10_000, 60)
    assert plan["raised"] == {"get-counter": (20, 53)}
    assert plan["prediction"].knee_visits_per_s == pytest.approx(53 * 1000 / 0.75 / 7)


def test_an_open_models_knee_is_in_visits_per_s_and_on_the_twin_the_machines_when_its_cpu_runs_out_first():
    functions = {name: {"max_instances": 2, "concurrency": 80}
                 for name in ("serve-page", "get-counter", "inc-counter", "store-inc-counter")}
    many = parse_settings({"shards_per_page": 20, "cache_ttl_seconds": 10, "functions": functions})
    p = predict(many, Profile("hand", {}, STUDY_TIMES.service_ms, cache_hit_ms=2,
                              host={"cores": 2, "cpu_ms_per_page": 10})).as_dict()
    assert p["knee_visits_per_s"] == pytest.approx(160 / 0.037)  # inc-counter's capacity, a request a visit
    assert p["machine_knee_visits_per_s"] == pytest.approx(200)  # 2 cores x 1000 / 10 ms a page
    assert figure_to_measure(p, "local", "knee_visits_per_s") == pytest.approx(200)
    assert figure_to_measure(p, "gcp", "knee_visits_per_s") == pytest.approx(160 / 0.037)


def first_refusal_by_queueing(capacity, ramp, timeout=10.0, step=0.001):
    """The visits/s offered when a FIFO queue fed by a ramp from `capacity` visits/s (+ramp each second) and
    served at `capacity` answers its first request that waited `timeout`: stepped, not from the formula."""
    t, queued = 0.0, 0.0
    while queued / capacity <= timeout:  # what arrives now waits for the queue ahead of it
        queued += ramp * t * step
        t += step
    return capacity + ramp * (t + timeout)  # answered (refused) timeout later


@pytest.mark.parametrize("knee, ramp", [(13.33, 2.0), (54.05, 2.0), (200.0, 10.0), (40.0, 0.5)])
def test_an_open_models_first_429_on_a_ramp_comes_when_its_queue_holds_a_request_the_queue_timeout(knee, ramp):
    assert first_429_visits_per_s(knee, ramp) == pytest.approx(first_refusal_by_queueing(knee, ramp), rel=1e-3)


def test_a_rate_held_above_the_knee_meets_its_first_429_there_and_one_at_or_below_it_none():
    assert first_429_visits_per_s(40.0, held_per_s=50.0) == 50.0
    assert first_429_visits_per_s(40.0, held_per_s=40.0) is None
    assert first_429_visits_per_s(40.0) is None


def test_an_open_model_publishes_the_visits_it_started_up_to_what_the_functions_before_the_publish_serve():
    """get-counter, last in a visit, serves 10 a second (the knee); serve-page and inc-counter, before the publish,
    12: 10 s at 20 visits/s started leave 12 - 5 = 7 a second (70), 10 s at 3 visits/s drain 20 of them: 50
    left, drained in 10 s. Users wait on get-counter; arrivals do not."""
    prediction = {"cycle_s": 4.0, "knee_rps": 30.0, "drain_per_s": 5.0,
                  "capacity_rps": {"serve-page": 50.0, "get-counter": 10.0, "inc-counter": 12.0}}
    series = [(0, 20), (10, 3), (20, 0)]
    model = convergence_for_load(prediction, series, "gcp", open_model=True)
    assert model["backlog_at_end"] == pytest.approx(50.0)
    assert model["seconds_after_load"] == pytest.approx(10.0)
    # on the twin this machine serves 8 pages a second: 30 left, then 10
    on_the_twin = convergence_for_load({**prediction, "machine_pages_per_s": 8.0}, series, "local", open_model=True)
    assert on_the_twin["backlog_at_end"] == pytest.approx(10.0)

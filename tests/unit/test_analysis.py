"""Breakpoint detection, convergence and visit accounting on synthetic data."""
import random

import pytest

from visitkit.results import analysis


def history(users_rps, start=1000.0, failing_from=None):
    """Aggregated history rows for [(users, rps)], one per second."""
    rows, requests, failures = [], 0, 0
    for i, (users, rps) in enumerate(users_rps):
        requests += int(rps)
        if failing_from is not None and i >= failing_from:
            failures += 1
        rows.append({"time": start + i, "users": users, "rps": rps, "failures_per_s": 0.0,
                     "p50_ms": 20.0, "p95_ms": 50.0 + 100 * max(0, users - 100), "requests": requests,
                     "failures": failures})
    return rows


def ramp_that_saturates(saturate_at=100, per_user=0.7, seconds=200):
    """+1 user/s; RPS follows users until saturate_at users, then stays flat."""
    return [(u, per_user * min(u, saturate_at)) for u in range(1, seconds + 1)]


def test_knee_is_where_rps_stops_following_users():
    result = analysis.find_breakpoint(history(ramp_that_saturates(saturate_at=100)))
    # flat at 70 RPS from 100 users (the shortfall only shows at ~133 users; dated back)
    assert 98 <= result["knee"]["users"] <= 106
    assert result["knee"]["rps"] == pytest.approx(70, rel=0.05)
    assert result["healthy_rps_per_user"] == pytest.approx(0.7, rel=0.05)


def test_no_knee_while_rps_keeps_up():
    result = analysis.find_breakpoint(history(ramp_that_saturates(saturate_at=10_000)))
    assert result["knee"] is None
    assert result["peak_rps"]["users"] == 200


def test_slow_start_is_not_a_knee():
    # Locust's RPS lags the first users: zero for a few seconds, then it keeps up.
    rows = [(u, 0.0 if u < 15 else 0.7 * u) for u in range(1, 100)]
    assert analysis.find_breakpoint(history(rows))["knee"] is None


def test_first_failure_and_p95_ceiling():
    rows = history(ramp_that_saturates(), failing_from=150)
    result = analysis.find_breakpoint(rows)
    assert result["first_failure"]["users"] == 151
    assert result["p95_ceiling"]["p95_ms"] == 50 + 100 * 100
    assert result["p95_ceiling"]["users"] >= 195  # p95 grows until the end here


def test_history_parsing_keeps_aggregated_rows_and_reads_na():
    rows = [{"Timestamp": "10", "User Count": "3", "Name": "Aggregated", "Requests/s": "2.5", "Failures/s": "0",
             "50%": "N/A", "95%": "40", "Total Request Count": "7", "Total Failure Count": "1"},
            {"Timestamp": "10", "User Count": "3", "Name": "/app?view=home", "Requests/s": "1", "Failures/s": "0",
             "50%": "1", "95%": "2", "Total Request Count": "3", "Total Failure Count": "0"},
            {"Timestamp": "10", "User Count": "3", "Name": "/app?view=jobs", "Requests/s": "1", "Failures/s": "0",
             "50%": "1", "95%": "5", "Total Request Count": "0", "Total Failure Count": "0"},
            {"Timestamp": "10", "User Count": "3", "Name": "/get-counter?visit_type=home", "Requests/s": "0",
             "Failures/s": "0", "50%": "N/A", "95%": "N/A", "Total Request Count": "0", "Total Failure Count": "0"}]
    [row] = analysis.aggregated_history(rows)
    assert row == {"time": 10.0, "users": 3, "rps": 2.5, "failures_per_s": 0.0, "p50_ms": None, "p95_ms": 40.0,
                   "requests": 7, "failures": 1,
                   "answered": {"serve-page": 3, "get-counter": 0, "inc-counter": 0},  # the endpoints' rows, by function
                   # each function's worst page's p95 that second; none reported: None
                   "p95_ms_by_function": {"serve-page": 5.0, "get-counter": None, "inc-counter": None}}


def test_convergence_time_and_extra_minutes_per_minute():
    before = {"home": 10, "jobs": 0}
    acked = {"home": 5, "jobs": 3}
    polls = [(200.0, {"home": 12, "jobs": 1}), (230.0, {"home": 15, "jobs": 2}), (260.0, {"home": 15, "jobs": 3}),
             (270.0, {"home": 15, "jobs": 3})]
    result = analysis.convergence(polls, before, acked, load_start=80.0, load_end=200.0)
    assert result["converged"] and result["converged_at"] == 260.0
    assert result["seconds_after_load"] == 60.0
    assert result["extra_minutes_per_minute"] == pytest.approx(0.5)  # 1 extra minute after 2 of load


def test_no_convergence_when_visits_are_missing():
    result = analysis.convergence([(300.0, {"home": 14})], {"home": 10}, {"home": 5}, 0.0, 200.0)
    assert not result["converged"] and result["seconds_after_load"] is None
    assert result["waited_seconds"] == 100.0


def test_visit_accounting_separates_lost_unanswered_and_duplicated():
    ledger = {"sent": {"home": 10, "jobs": 10}, "acknowledged": {"home": 8, "jobs": 10},
              "refused": {"home": 1}, "failed": {}}
    before = {"home": 100, "jobs": 0}
    after = {"home": 108, "jobs": 12}  # home: the unanswered one was not stored; jobs: 2 stored twice
    rows = analysis.visit_accounting(ledger, before, after)
    assert rows["home"] == {"sent": 10, "acknowledged": 8, "refused": 1, "failed": 0, "rejected": 1,
                            "unanswered": 1, "stored": 8, "lost": 0, "stored_unacknowledged": 0, "duplicated": 0}
    assert rows["jobs"]["duplicated"] == 2 and rows["jobs"]["lost"] == 0
    assert rows["total"]["acknowledged"] == 18 and rows["total"]["stored"] == 20


def test_visit_accounting_reports_lost_visits():
    rows = analysis.visit_accounting({"sent": {"home": 5}, "acknowledged": {"home": 5}}, {}, {"home": 3})
    assert rows["home"]["lost"] == 2


def test_a_stored_5xx_visit_is_ambiguous_not_duplicated():
    # A 502 from an instance that died after publishing, a 503 whose publish landed late: stored.
    ledger = {"sent": {"home": 10}, "acknowledged": {"home": 7}, "refused": {"home": 1}, "failed": {"home": 2}}
    rows = analysis.visit_accounting(ledger, {"home": 0}, {"home": 9})
    assert rows["home"]["duplicated"] == 0 and rows["home"]["lost"] == 0
    assert rows["home"]["stored_unacknowledged"] == 2
    assert (rows["home"]["refused"], rows["home"]["failed"], rows["home"]["unanswered"]) == (1, 2, 0)


def test_a_stored_refused_visit_is_duplicated():
    # A 4xx (the platform's 429 included) was never published: storing it means a count went wrong.
    ledger = {"sent": {"jobs": 10}, "acknowledged": {"jobs": 7}, "refused": {"jobs": 3}, "failed": {}}
    rows = analysis.visit_accounting(ledger, {}, {"jobs": 9})
    assert rows["jobs"]["duplicated"] == 2 and rows["jobs"]["stored_unacknowledged"] == 0


def test_mixed_pages_moving_in_opposite_directions_do_not_cancel_out():
    ledger = {"sent": {"home": 20, "jobs": 20, "about": 20},
              "acknowledged": {"home": 15, "jobs": 15, "about": 15},
              "refused": {"home": 2, "jobs": 2, "about": 2}, "failed": {"home": 2, "jobs": 2, "about": 2}}
    before = {"home": 50, "jobs": 50, "about": 50}
    # home lost 3 acknowledged visits; jobs stored 3 beyond acknowledged + ambiguous (1 unanswered
    # + 2 failed); about stored 2 of its 3 ambiguous ones. The totals alone would look exact.
    after = {"home": 62, "jobs": 71, "about": 67}
    rows = analysis.visit_accounting(ledger, before, after)
    assert (rows["home"]["lost"], rows["home"]["duplicated"]) == (3, 0)
    assert (rows["jobs"]["lost"], rows["jobs"]["duplicated"], rows["jobs"]["stored_unacknowledged"]) == (0, 3, 3)
    assert (rows["about"]["lost"], rows["about"]["duplicated"], rows["about"]["stored_unacknowledged"]) == (0, 0, 2)
    total = rows["total"]
    assert total["stored"] == 50 and total["acknowledged"] == 45
    assert total["lost"] == 3 and total["duplicated"] == 3 and total["stored_unacknowledged"] == 5


def test_an_older_ledger_with_only_rejected_is_still_read():
    # Before 4xx and 5xx were told apart: every error answer is read as ambiguous.
    ledger = {"sent": {"home": 10}, "acknowledged": {"home": 6}, "rejected": {"home": 3}}
    rows = analysis.visit_accounting(ledger, {}, {"home": 9})
    assert rows["home"]["rejected"] == 3 and rows["home"]["unanswered"] == 1
    assert rows["home"]["duplicated"] == 0 and rows["home"]["stored_unacknowledged"] == 3
    assert analysis.visit_accounting(ledger, {}, {"home": 11})["home"]["duplicated"] == 1


def noisy(users_rps, seed, level=0.05):
    """The same series with each second's RPS off by up to `level`, reproducibly."""
    rng = random.Random(seed)
    return [(users, rps * (1 + rng.uniform(-level, level))) for users, rps in users_rps]


def ramp_that_declines(saturate_at=100, per_user=0.7, decline=0.5, seconds=220):
    """+1 user/s; RPS follows users until saturate_at, then falls (the system thrashes)."""
    return [(u, per_user * u if u <= saturate_at else per_user * saturate_at - decline * (u - saturate_at))
            for u in range(1, seconds + 1)]


def test_knee_of_a_declining_rps_is_where_it_peaked():
    # Dated back to the level RPS was at when the shortfall showed, this knee would be ~87 users.
    result = analysis.find_breakpoint(history(ramp_that_declines()))
    assert 96 <= result["knee"]["users"] <= 104
    assert result["knee"]["rps"] == pytest.approx(70, rel=0.05)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("series", [ramp_that_saturates, ramp_that_declines])
def test_knee_of_a_noisy_series_stays_near_the_true_knee(series, seed):
    result = analysis.find_breakpoint(history(noisy(series(), seed)))
    assert 92 <= result["knee"]["users"] <= 108, result["knee"]
    assert result["knee"]["rps"] == pytest.approx(70, rel=0.08)


@pytest.mark.parametrize("seed", range(5))
def test_no_knee_in_a_noisy_series_that_keeps_up(seed):
    assert analysis.find_breakpoint(history(noisy(ramp_that_saturates(saturate_at=10_000), seed)))["knee"] is None


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("series", [ramp_that_saturates, ramp_that_declines])
def test_first_failure_in_a_noisy_series_is_the_first_failing_second(series, seed):
    result = analysis.find_breakpoint(history(noisy(series(), seed), failing_from=140))
    assert result["first_failure"]["users"] == 141 and result["first_failure"]["time"] == 1140.0
    assert analysis.find_breakpoint(history(noisy(series(), seed)))["first_failure"] is None


def sample(t, accepted, stored, r429=0, service=10.0, requests=1):
    fn = {"instances": 2, "in_flight": 1, "queued": 2, "requests": requests, "responses_2xx": 0,
          "responses_4xx": 0, "responses_429": r429, "responses_5xx": 0, "service_ms": service,
          "service_ms_p95": None, "queue_ms": 5.0}
    return {"time": t, "source": "local-haproxy",
            "functions": {"inc-counter": fn, "get-counter": dict(fn), "serve-page": dict(fn),
                          "store-inc-counter": dict(fn)},
            "store": {"accepted": accepted, "stored": stored, "backlog": accepted - stored}}


def test_store_rates_backlog_and_drain():
    # 10 s of load publishing 20/s while storing 10/s, then the backlog of 100 drains at 10/s
    samples = [sample(t, 20 * min(t, 10), 10 * t) for t in range(0, 21)]
    figures = analysis.store_figures(samples, load_start=0, load_end=10)
    assert figures["accepted_per_s"] == pytest.approx(20)
    assert figures["writes_per_s"] == pytest.approx(10)
    assert figures["backlog_peak"] == 100 and figures["backlog_peak_time"] == 10
    assert figures["drain_per_s"] == pytest.approx(10)
    assert figures["throughput_per_s"] == pytest.approx(10)


def test_server_figures_diff_cumulative_counters_and_tolerate_missing_fields():
    samples = [sample(0, 0, 0, r429=50), sample(1, 0, 0, r429=53), sample(2, 0, 0, r429=60)]
    del samples[1]["functions"]["serve-page"]["service_ms"]
    samples[2]["functions"]["get-counter"] = {}
    figures = analysis.server_by_function(samples, 0, 2)
    assert figures["inc-counter"]["responses_429"] == 10  # since the run's first sample, not stack start
    assert figures["serve-page"]["service_ms"] == pytest.approx(10.0)
    assert figures["get-counter"]["responses_429"] is None
    series = analysis.server_series(samples)
    assert series["functions"]["inc-counter"]["r429_per_s"] == [(1, 3.0), (2, 7.0)]


def test_gcp_samples_without_store_figures():
    samples = [{"time": 0.0, "source": "gcp-monitoring", "functions": {}, "store": {"accepted": None,
                "stored": None, "backlog": None}}] * 2
    figures = analysis.store_figures(samples, 0, 1)
    assert figures["backlog_peak"] is None and figures["writes_per_s"] is None


def test_percentile_table_orders_endpoints_and_puts_aggregated_last():
    def row(kind, name, count):
        return {"Type": kind, "Name": name, "Request Count": str(count), "Failure Count": "0",
                "Average Response Time": "10", "50%": "9", "60%": "9", "70%": "10", "80%": "11", "90%": "12", "95%": "20"}
    table = analysis.percentile_table([row("POST", "/inc-counter?visit_type=home", 3), row("", "Aggregated", 9),
                                       row("GET", "/app?view=jobs", 3), row("GET", "/app?view=about", 3)])
    assert [r["name"] for r in table] == ["/app?view=about", "/app?view=jobs", "/inc-counter?visit_type=home", "Aggregated"]
    by_function = analysis.client_by_function(table)
    assert by_function["serve-page"]["requests"] == 6 and by_function["inc-counter"]["p95_ms"] == 20


def test_the_final_stop_is_not_part_of_the_load():
    # 150 users, then they leave in 10 s; while they leave, p95 jumps (requests cut short)
    rows = history([(u, 0.7 * u) for u in range(1, 151)] + [(150 - 15 * i, 10.0) for i in range(1, 10)])
    for row in rows[150:]:
        row["p95_ms"] = 99_999.0
    result = analysis.find_breakpoint(rows)
    assert result["p95_ceiling"]["p95_ms"] == 50.0 + 100 * (150 - 100)
    assert result["peak_rps"]["users"] == 150


def trailing_mean(values, seconds=10, skip=2):
    """Locust's Requests/s: the mean over the seconds [t-12, t-2], so it trails the load."""
    return [sum(values[max(0, i - seconds - skip):max(1, i - skip)]) / seconds for i in range(len(values))]


def test_knee_is_not_dated_late_by_locusts_trailing_rps():
    # +2 users/s, RPS follows users until 100, then flat; Locust's own RPS column trails by ~7 s
    # (14 users): read from it, the knee would be ~114 users.
    true = [0.7 * min(2 * i, 100) for i in range(1, 121)]
    rows = history([(2 * i, rps) for i, rps in enumerate(trailing_mean(true), start=1)])
    total = 0.0
    for row, rps in zip(rows, true):
        total += rps
        row["requests"] = int(total)
    result = analysis.find_breakpoint(rows)
    knee = result["knee"]
    assert 96 <= knee["users"] <= 104, knee
    assert knee["rps"] == pytest.approx(70, rel=0.05)


def test_a_knee_where_rps_drops_is_not_dated_back_to_where_the_lines_cross():
    # RPS follows users to 100, then drops to 45 and stays: the fitted lines cross at ~64 users,
    # but RPS followed users until 100.
    rows = history([(u, 0.7 * u if u <= 100 else 45.0) for u in range(1, 201)])
    assert 96 <= analysis.find_breakpoint(rows)["knee"]["users"] <= 104


def test_the_peak_is_read_without_locusts_lag_too():
    # RPS follows +2 users/s to the end: Locust's trailing RPS ends ~7 s (10 RPS) short of the last second's.
    true = [0.7 * 2 * i for i in range(1, 121)]
    rows = history([(2 * i, rps) for i, rps in enumerate(trailing_mean(true), start=1)])
    total = 0.0
    for row, rps in zip(rows, true):
        total += rps
        row["requests"] = int(total)
    assert analysis.find_breakpoint(rows)["peak_rps"]["rps"] == pytest.approx(true[-1], rel=0.03)


def test_the_knees_rps_is_the_rate_observed_there_not_the_fitted_lines():
    # Issue #40: +4 users/s; completions follow users to 72 users (43.2/s), fall away in 6 s and
    # trickle in at 3/s for 8 s (requests hang), then 60/s. The knee is dated into the trickle,
    # where the fitted line through the rise and the fall reads about -4 RPS; 3/s was observed.
    true = [0.6 * 4 * i if i <= 18 else max(3.0, 43.2 * (1 - (i - 18) / 6)) if i <= 32 else 60.0
            for i in range(1, 41)]
    rows = history([(4 * i, rps) for i, rps in enumerate(trailing_mean(true), start=1)])
    total = 0.0
    for row, rps in zip(rows, true):
        total += rps
        row["requests"] = int(total)
    knee = analysis.find_breakpoint(rows)["knee"]
    assert knee["rps"] == pytest.approx(3.0), knee


def test_dead_letters_do_not_let_one_pages_duplicates_hide_anothers_lost_visits():
    from visitkit.results.summary import with_dead_letters

    ledger = {"sent": {"home": 10, "jobs": 10}, "acknowledged": {"home": 10, "jobs": 10}, "refused": {}, "failed": {}}
    # home lost 4, jobs counted 3 twice, and 1 visit went to the dead-letter topic.
    rows = with_dead_letters(analysis.visit_accounting(ledger, {}, {"home": 6, "jobs": 13}), 1)
    assert rows["home"]["lost"] == 4 and rows["jobs"]["duplicated"] == 3
    # The dead-lettered visit is one of home's 4: 3 are lost, whatever jobs did.
    assert rows["total"]["lost"] == 3 and rows["total"]["duplicated"] == 3 and rows["total"]["dead_lettered"] == 1


# ---- the open model: a knee and first failures in visits/s --------------------------------------
def open_run(capacity=40.0, start=5.0, ramp=2.0, seconds=62, fail_from=None, started=None, report_s=1, t0=1000):
    """(arrivals.csv's rows, the aggregated history) of an open-model ramp: the target `ramp` visits/s more each
    second from `start`, started(target) of its arrivals started (all by default), the system answering
    min(started, capacity) visits a second (3 requests each, within the second: in the totals of Locust's row of
    the next), one failed request a second from second fail_from on; Locust's running totals move every
    report_s seconds (a distributed run's workers report every 3 s)."""
    arrivals, rows, answered, failures = [], [], 0, 0
    offered_before = 0.0
    for i in range(seconds):
        target = start + ramp * i
        begun = started(target) if started else target
        arrivals.append({"time": t0 + i, "target_per_s": target, "started": begun, "not_started": target - begun})
        served = 3 * min(offered_before, capacity)
        answered, offered_before = answered + served, begun
        if fail_from is not None and i >= fail_from:
            answered, failures = answered + 1, failures + 1
        shown = rows[-1] if rows and i % report_s else {"requests": answered, "failures": failures}
        rows.append({"time": float(t0 + i), "users": 10 + i, "rps": served, "failures_per_s": 0.0, "p50_ms": 20.0,
                     "p95_ms": 50.0 if begun < capacity else 9000.0, "requests": shown["requests"],
                     "failures": shown["failures"]})
    return arrivals, rows


def test_an_open_models_knee_is_the_offered_rate_where_the_served_one_stops_following_it():
    knee = analysis.find_rate_breakpoint(*open_run(capacity=40))["knee"]
    # served = offered up to 40 visits/s (120 requests/s), flat from there: the shortfall shows at ~53 visits/s
    assert knee["offered"] == pytest.approx(40, abs=0.5)
    assert knee["served"] == pytest.approx(40, abs=2)
    assert knee["time"] == pytest.approx(1000 + (knee["offered"] - 5) / 2, abs=1)  # the second it was offered
    assert knee["p95_ms"] == 9000.0  # the queue that holds what is not served is the latency's break too


def test_no_open_model_knee_while_every_visit_offered_is_served():
    found = analysis.find_rate_breakpoint(*open_run(capacity=10_000))
    assert found["knee"] is None
    assert found["peak_served"]["served"] == pytest.approx(5 + 2 * 59, abs=2)  # the last full seconds'


def test_arrivals_the_generator_could_not_start_were_never_offered():
    # the target goes on rising but the generator starts at most 30 visits/s: the system serves all of them
    arrivals, rows = open_run(capacity=10_000, started=lambda target: min(target, 30))
    found = analysis.find_rate_breakpoint(arrivals, rows)
    assert found["knee"] is None and arrivals[-2]["target_per_s"] > 100
    assert found["peak_served"]["served"] == pytest.approx(30)


def test_the_first_failure_is_read_at_the_rate_offered_in_its_second():
    failure = analysis.find_rate_breakpoint(*open_run(capacity=40, fail_from=30))["first_failure"]
    assert failure["time"] == 1030 and failure["offered"] == pytest.approx(5 + 2 * 30)
    assert failure["served"] == pytest.approx(40, abs=1)


def test_a_first_failure_after_the_last_full_second_is_read_at_that_seconds_rate():
    arrivals, rows = open_run(capacity=40)
    later = {**rows[-1], "time": rows[-1]["time"] + 3, "requests": rows[-1]["requests"] + 1, "failures": 1}
    failure = analysis.find_rate_breakpoint(arrivals, [*rows, later])["first_failure"]
    assert failure["time"] == 1064 and failure["offered"] == pytest.approx(5 + 2 * 60)  # the last full second's


def test_the_workers_three_second_reports_move_the_knee_no_more_than_their_lag():
    knee = analysis.find_rate_breakpoint(*open_run(capacity=40, report_s=3))["knee"]
    # on average half a report's 3 s late: at 2 visits/s more each second
    assert 40 <= knee["offered"] <= 40 + 2 * 1.5


def test_the_rates_of_a_ramp_are_read_at_their_own_second_to_its_ends():
    arrivals, rows = open_run(capacity=10_000, ramp=3)
    points = analysis.rate_series(arrivals, rows)
    assert [p["time"] for p in points] == [float(row["time"]) for row in arrivals[1:-1]]  # partial seconds out
    assert [p["offered"] for p in points] == pytest.approx([row["started"] for row in arrivals[1:-1]])
    assert points[-1]["served"] == pytest.approx(arrivals[-2]["started"])  # answered in their second


def test_an_open_model_breakpoint_dates_its_knee_at_the_rates_moment():
    arrivals, rows = open_run(capacity=40, fail_from=30)
    closed = analysis.find_breakpoint(rows)
    rate = analysis.find_rate_breakpoint(arrivals, rows)
    found = analysis.with_rate_breakpoint(closed, rate)
    assert closed["healthy_rps_per_user"] is not None  # its users' ratio, which an open-model load does not have
    assert found["arrivals"] == rate and found["healthy_rps_per_user"] is None
    assert found["knee"] == {"time": rate["knee"]["time"], "users": rate["knee"]["users"],
                             "rps": 3 * rate["knee"]["served"]}
    assert found["first_failure"]["time"] == rate["first_failure"]["time"] == closed["first_failure"]["time"]


def test_a_held_rate_that_stops_being_served_has_its_knee_at_that_rate_where_the_shortfall_began():
    arrivals, rows = open_run(capacity=10_000, start=30, ramp=0, seconds=60)
    answered = rows[20]["requests"]
    for row in rows[21:]:  # half the system lost: 15 visits answered a second from second 21
        answered += 45
        row["requests"] = answered
    knee = analysis.find_rate_breakpoint(arrivals, rows)["knee"]
    assert knee["offered"] == pytest.approx(30, abs=0.5)
    assert 1017 <= knee["time"] <= 1025  # not the end of the 10 s the shortfall held for


def full_history(arrivals, capacity):
    """Locust's full history rows (as read from its CSV: an Aggregated row and one per endpoint each second) of
    the arrivals' visits, get-counter answering at most `capacity` a second, serve-page and inc-counter every
    one; each second's visits in the totals of the next second's rows."""
    rows, totals = [], {"/app?view=home": 0, "/inc-counter?visit_type=home": 0, "/get-counter?visit_type=home": 0}
    for before, row in zip([None, *arrivals], arrivals):
        for name in totals:
            offered = before["started"] if before else 0
            totals[name] += min(offered, capacity) if name.startswith("/get-counter") else offered
        stamp = {"Timestamp": str(row["time"]), "User Count": "50", "Requests/s": "0", "Failures/s": "0",
                 "50%": "20", "95%": "50", "Total Failure Count": "0"}
        rows += [{**stamp, "Name": name, "Total Request Count": str(total)} for name, total in totals.items()]
        rows.append({**stamp, "Name": "Aggregated", "Total Request Count": str(sum(totals.values()))})
    return analysis.aggregated_history(rows)


def test_a_visit_is_served_at_its_slowest_functions_pace():
    # get-counter, last in the visit, serves 40 a second; the page and inc-counter serve every visit offered, so
    # the requests answered go on growing past the knee, at two thirds of the pace
    arrivals, _ = open_run(capacity=10_000)
    history = full_history(arrivals, capacity=40)
    # the row of second 10: the visits of the ten before, 5 + 7 + ... + 23, answered by each function
    assert history[10]["answered"] == {"serve-page": 140, "get-counter": 140, "inc-counter": 140}
    found = analysis.find_rate_breakpoint(arrivals, history)
    assert found["knee"]["offered"] == pytest.approx(40, abs=0.5)
    assert found["peak_served"]["served"] == pytest.approx(40)


def test_a_page_that_comes_with_its_count_is_served_without_a_get_counter_request():
    arrivals, rows = open_run(capacity=10_000, ramp=3)
    for row in rows:  # each visit answered by serve-page and inc-counter; get-counter never asked
        visits = (row["requests"] - row["failures"]) // 3
        row["answered"] = {"serve-page": visits, "inc-counter": visits, "get-counter": 0}
    points = analysis.rate_series(arrivals, rows)
    assert points[-1]["served"] == pytest.approx(arrivals[-2]["started"])

"""Overload and recovery for a spike test (visitkit.results.overload): the spike found in Locust's history,
and the time until latency came back."""
from visitkit.results import overload


def spike_history():
    """20 users for 10 s (p95 100 ms), 200 users for 10 s (p95 9 s, failing), back to 20: p95 falls
    back under 150 ms 4 s after the spike and stays there."""
    rows = []
    for t in range(30):
        users = 200 if 10 <= t < 20 else 20
        p95 = 100.0 if t < 10 else 9000.0 if t < 20 else (3000.0 if t < 24 else 120.0)
        rows.append({"time": 1000.0 + t, "users": users, "p95_ms": p95, "failures_per_s": 5.0 if 12 <= t < 22 else 0.0})
    return rows


def test_a_spike_is_found_and_the_recovery_timed():
    failures = [("/inc-counter?visit_type=home", "HTTPError('429 Client Error: Too Many Requests')", 40),
                ("/get-counter?visit_type=home", "ConnectionTimeoutError", 3)]
    found = overload.figures(spike_history(), failures)
    assert found["spike_users"] == 200 and found["spike_s"] == 9
    assert found["baseline_p95_ms"] == 100 and found["spike_p95_ms"] == 9000
    assert found["recovery_s"] == 5  # calm from t=24; the spike's last second is t=19
    assert (found["refused_429"], found["other_errors"]) == (40, 3)


def test_no_recovery_when_latency_stays_high():
    rows = [{**row, "p95_ms": 9000.0 if row["time"] >= 1010 else 100.0} for row in spike_history()]
    assert overload.figures(rows, [])["recovery_s"] is None

"""The chaos schedule and its figures: plans are read and checked, and the report's figures are worked
out from the series (its actions on real processes: integration/test_chaos_processes.py)."""
import pytest

from visitkit.twin import chaos
from visitkit.errors import RunError


def test_the_default_plan_and_a_written_one():
    assert chaos.ChaosPlan.parse("") == chaos.ChaosPlan.parse("default") == chaos.ChaosPlan()
    plan = chaos.ChaosPlan.parse("every=5,seed=3,actions=kill-instance+pause-instance,stall=2-4")
    assert (plan.every_s, plan.seed, plan.actions, plan.stall_s) == (5.0, 3, ("kill-instance", "pause-instance"), (2.0, 4.0))


@pytest.mark.parametrize("text", ["every=0", "actions=explode", "stall=5", "stall=9-3", "often=1", "every=soon"])
def test_nonsense_plans_are_refused(text):
    with pytest.raises(RunError):
        chaos.ChaosPlan.parse(text)


def history(failing_seconds):
    return [{"time": float(t), "users": 10, "failures_per_s": 1.0 if t in failing_seconds else 0.0}
            for t in range(100, 130)]


def test_recovery_is_the_time_to_five_calm_seconds():
    assert chaos.recovery_seconds(history({105, 106, 107, 109}), after=104) == 6  # calm from 110 on
    assert chaos.recovery_seconds(history(set()), after=104) == 0
    assert chaos.recovery_seconds(history(set(range(100, 130))), after=104) is None


def test_server_errors_around_an_event_per_function():
    samples = [{"time": t, "functions": {"inc-counter": {"responses_5xx": 2 * max(0, t - 10)}}} for t in range(0, 30)]
    errors = chaos.server_errors_around(samples, 12, 20)
    assert errors["inc-counter"] == 16 and errors["get-counter"] == 0


def test_figures_put_events_and_visits_together():
    record = {"plan": "every 20 s", "events": [{"time": 105.0, "action": "freeze-firestore", "target": "x", "seconds": 2}]}
    visits = {"total": {"acknowledged": 10, "stored": 10, "lost": 0, "duplicated": 0, "dead_lettered": None}}
    samples = [{"time": 100.0, "store": {"delivered": 12, "stored": 10}, "push": {"retries": 3}}]
    found = chaos.figures(record, history({107, 108}), samples, visits)
    assert found["events"][0]["recovery_s"] == 2 and found["visits"]["lost"] == 0
    assert found["redeliveries"] == 3 and found["deliveries_already_counted"] == 2


def settings_of(store_mode):
    from visitkit.settings import Settings

    return Settings(shards_per_page=1, cache_ttl_seconds=0, functions={}, store_mode=store_mode)


def test_a_pull_store_has_no_push_relay_to_kill():
    pull, push = settings_of("pull"), settings_of("push")
    assert "kill-push" not in chaos.ChaosPlan().for_settings(pull).actions  # the default plan leaves it out
    assert chaos.ChaosPlan().for_settings(pull).actions == tuple(a for a in chaos.ACTIONS if a != "kill-push")
    assert chaos.ChaosPlan().for_settings(push) == chaos.ChaosPlan()  # push mode: unchanged
    named = chaos.ChaosPlan.parse("actions=kill-instance+kill-push")
    assert named.for_settings(push) == named
    with pytest.raises(RunError, match="kill-push kills the push relay"):
        named.for_settings(pull)

"""Chaos during the load: the local platform misbehaving on a schedule while Locust saturates it,
to test the promise that matters when things fail at once: an acknowledged visit is stored exactly
once. By default, every 20 s, one of:

  kill-instance     SIGKILL a random instance of a random function (its supervisor restarts it)
  freeze-firestore  SIGSTOP the Firestore emulator for 5-15 s (writes and reads hang, then resume)
  freeze-pubsub     SIGSTOP the Pub/Sub emulator for 5-15 s (publishes time out into 503s, some of which
                    land once it resumes: the visits whose fate only their id can tell)
  kill-push         SIGKILL the push delivery (its supervisor restarts it; unacked messages come back);
                    with store_mode "pull" there is none (`for_settings`): the default plan leaves it out,
                    a plan that names it is refused
  pause-instance    SIGSTOP one instance for 5-15 s (requests on it stall; HAProxy's timeouts apply)

Every event is recorded with its time; `figures` turns them and the run's series into the report's
Chaos section. A plan is text: `every=20,seed=7,actions=kill-instance+freeze-firestore`.
"""
from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Self

from visitkit.catalogue import FUNCTIONS
from visitkit.errors import RunError
from visitkit.samples import Sample

if TYPE_CHECKING:
    from visitkit.settings import Settings
    from visitkit.twin.stack import LocalStack

ACTIONS = ("kill-instance", "freeze-firestore", "freeze-pubsub", "kill-push", "pause-instance")
PUSH_RELAY = "push-relay"
FIRESTORE, PUBSUB = "firestore-emulator", "pubsub-emulator"
RECOVERED_AFTER_S = 5  # this many seconds in a row without a client failure: recovered


@dataclass(frozen=True)
class ChaosPlan:
    every_s: float = 20.0
    actions: tuple[str, ...] = ACTIONS
    seed: int = 1
    stall_s: tuple[float, ...] = (5.0, 15.0)  # how long a freeze or a pause lasts: uniform in this range

    @classmethod
    def parse(cls, text: str | None) -> Self:
        """'' or 'default' -> the default plan; else 'every=20,seed=7,actions=a+b,stall=5-15'."""
        values: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in (text or "").split(","))):
            key, sep, value = item.partition("=")
            if not sep and key == "default":
                continue
            if not sep:
                raise RunError(f"cannot read chaos setting {item!r} (e.g. every=20,seed=7,actions=kill-instance)")
            values[key.strip()] = value.strip()
        unknown = set(values) - {"every", "seed", "actions", "stall"}
        if unknown:
            raise RunError(f"unknown chaos settings {sorted(unknown)}: every, seed, actions, stall")
        try:
            plan = cls(every_s=float(values.get("every", cls.every_s)), seed=int(values.get("seed", cls.seed)),
                       actions=tuple(values["actions"].split("+")) if "actions" in values else ACTIONS,
                       stall_s=(tuple(float(v) for v in values["stall"].split("-")) if "stall" in values
                                else cls.stall_s))
        except ValueError as error:
            raise RunError(f"cannot read the chaos plan {text!r}: {error}") from None
        wrong = set(plan.actions) - set(ACTIONS)
        if wrong or not plan.actions:
            raise RunError(f"unknown chaos actions {sorted(wrong)}: choose from {', '.join(ACTIONS)}")
        if plan.every_s < 1 or len(plan.stall_s) != 2 or not 0 < plan.stall_s[0] <= plan.stall_s[1]:
            raise RunError("chaos: every must be >= 1 s and stall a range like 5-15 (seconds)")
        return plan

    def for_settings(self, settings: Settings) -> Self:
        """The plan for an iteration: in pull mode (Settings.pulls) there is no push relay to kill, so the
        default plan leaves kill-push out, and a plan that names it is refused (RunError)."""
        if not settings.pulls or "kill-push" not in self.actions:
            return self
        if self.actions != ACTIONS:
            raise RunError('chaos: kill-push kills the push relay, which a store_mode "pull" iteration does not '
                           "run (store-inc-counter pulls its visits itself: kill-instance and pause-instance "
                           "hit it); leave kill-push out of actions")
        return replace(self, actions=tuple(action for action in ACTIONS if action != "kill-push"))

    def describe(self) -> str:
        return (f"every {self.every_s:g} s one of {', '.join(self.actions)} (seed {self.seed}; freezes and pauses "
                f"last {self.stall_s[0]:g}-{self.stall_s[1]:g} s)")


class Chaos(threading.Thread):
    """Runs a plan against a LocalStack (its instances by their settings) until stopped; `events`
    is what it did, in order."""

    def __init__(self, plan: ChaosPlan, stack: LocalStack, settings: Settings):
        super().__init__(daemon=True)
        self.plan, self.stack, self.settings = plan.for_settings(settings), stack, settings
        self.events: list[dict[str, Any]] = []
        self.random = random.Random(self.plan.seed)
        self.stopping = threading.Event()
        # (resume time, what resumes it, event) still stopped
        self._stalled: list[tuple[float, Callable[[], None], dict[str, Any]]] = []

    def run(self) -> None:
        while not self.stopping.wait(self._next_wait()):
            action = self.random.choice(self.plan.actions)
            try:
                self.events.append(getattr(self, "_" + action.replace("-", "_"))())
            except (OSError, ValueError, KeyError) as error:  # a process gone in between: say so, go on
                self.events.append({"time": time.time(), "action": action, "target": None, "error": str(error)})
        self._resume_all()

    def _next_wait(self) -> float:
        """Until the next event, resuming stalled processes on time on the way."""
        deadline = time.monotonic() + self.plan.every_s
        while self._stalled:
            soonest = min(resume for resume, *_ in self._stalled)
            if soonest >= deadline:
                break
            if self.stopping.wait(max(0.0, soonest - time.monotonic())):
                return 0
            self._resume_due()
        return max(0.0, deadline - time.monotonic())

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)
        self._resume_all()

    # ---- the actions ----
    def _instance(self) -> str:
        """A running instance at random (with scaling "auto", one the autoscaler runs now)."""
        running = {function: self.stack.running_instances(function, self.settings) for function in FUNCTIONS}
        function = self.random.choice([function for function in FUNCTIONS if running[function]])
        return running[function][self.random.randrange(len(running[function]))]

    def _event(self, action: str, target: str, seconds: float | None = None) -> dict[str, Any]:
        return {"time": time.time(), "action": action, "target": target, "seconds": seconds}

    def _kill_instance(self):
        name = self._instance()
        os.kill(self.stack.instance_pid(name), signal.SIGKILL)
        return self._event("kill-instance", name)

    def _kill_push(self):
        os.kill(self.stack.instance_pid(PUSH_RELAY), signal.SIGKILL)
        return self._event("kill-push", PUSH_RELAY)

    def _stall(self, action: str, target: str, stop: Callable[[], None], resume: Callable[[], None]) -> dict[str, Any]:
        seconds = round(self.random.uniform(*self.plan.stall_s), 1)
        stop()
        event = self._event(action, target, seconds)
        self._stalled.append((time.monotonic() + seconds, resume, event))
        return event

    def _freeze_emulator(self, action, name):
        pgid = next(p["pid"] for p in self.stack.state()["processes"] if p["name"] == name)
        return self._stall(action, name, lambda: os.killpg(pgid, signal.SIGSTOP),
                           lambda: os.killpg(pgid, signal.SIGCONT))

    def _freeze_firestore(self):
        return self._freeze_emulator("freeze-firestore", FIRESTORE)

    def _freeze_pubsub(self):
        return self._freeze_emulator("freeze-pubsub", PUBSUB)

    def _pause_instance(self):
        name = self._instance()
        pid = self.stack.instance_pid(name)
        return self._stall("pause-instance", name, lambda: os.kill(pid, signal.SIGSTOP),
                           lambda: os.kill(pid, signal.SIGCONT))

    def _resume_due(self, everything=False):
        now, still = time.monotonic(), []
        for item in self._stalled:
            if everything or item[0] <= now:
                try:
                    item[1]()
                except OSError:
                    pass  # it was killed meanwhile
            else:
                still.append(item)
        self._stalled = still

    def _resume_all(self):
        self._resume_due(everything=True)


# ---- the report's figures ------------------------------------------------------------------------
def recovery_seconds(history: Sequence[Mapping[str, Any]], after: float) -> float | None:
    """Seconds from `after` until the client saw no failure for RECOVERED_AFTER_S seconds in a row
    (0 when it never failed), or None when it had not recovered by the end of the load."""
    calm_since = None
    for sample in (s for s in history if s["time"] >= after and s["users"] > 0):
        if sample["failures_per_s"] > 0:
            calm_since = None
        elif calm_since is None:
            calm_since = sample["time"]
        if calm_since is not None and sample["time"] - calm_since >= RECOVERED_AFTER_S - 1:
            return max(0.0, calm_since - after)
    return None


def server_errors_around(samples: Sequence[Sample], start: float, end: float) -> dict[str, int]:
    """{function: 5xx answered in [start, end]}, from the platform's cumulative counters."""
    window = [s for s in samples if start <= s["time"] <= end]
    errors = {}
    for name in FUNCTIONS:
        found = [figures.get("responses_5xx") for s in window if (figures := (s.get("functions") or {}).get(name))]
        values = [v for v in found if v is not None]
        errors[name] = values[-1] - values[0] if len(values) > 1 else 0
    return errors


def figures(chaos_record: Mapping[str, Any], history: Sequence[Mapping[str, Any]], samples: Sequence[Sample],
            visits: Mapping[str, Any]) -> dict[str, Any]:
    """The Chaos section's figures: per event its 5xx by function and recovery time; the visits."""
    events = []
    for event in chaos_record.get("events", []):
        ends = event["time"] + (event.get("seconds") or 0)
        events.append({**event, "server_errors": server_errors_around(samples, event["time"] - 1, ends + 10),
                       "recovery_s": recovery_seconds(history, ends)})
    total = visits["total"]
    last_push: Mapping[str, Any] = next((found for s in reversed(samples) if (found := s.get("push"))), {}) or {}
    last_store: Mapping[str, Any] = next((s["store"] for s in reversed(samples) if s.get("store")), {}) or {}
    delivered, stored = last_store.get("delivered"), last_store.get("stored")
    return {"plan": chaos_record.get("plan"), "events": events,
            "visits": {key: total.get(key)
                       for key in ("acknowledged", "stored", "lost", "duplicated", "dead_lettered")},
            "redeliveries": last_push.get("retries"),
            "deliveries_already_counted": (delivered - stored) if delivered is not None and stored is not None
            and delivered >= stored else None}

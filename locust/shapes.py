"""The study's load shapes, one small LoadTestShape per test type.

A shape's class attributes are its settings; `make_shape(name, overrides)` builds one with some
of them changed (from the command line: `--shape-set max_users=300,duration_s=120`).
Every shape stops by itself (tick() -> None): in headless mode Locust never applies --run-time
to a shape test, so use duration_s.
"""
import csv
from pathlib import Path

from locust import LoadTestShape

STOP_RATE = 1000  # users/s when stopping everyone: at once (or faster, with more users than that)
REACH_RESOLUTION_S = 0.1  # how finely a step's curve is read for its pace (step_s > 1)


class StudyShape(LoadTestShape):
    """Shapes give users_at(elapsed); tick() turns it into small steps, one per tick.

    With step_s = 1, each step is spawned at twice its own size per second, so it completes within
    the tick: Locust blocks in a tick while it spawns, and would otherwise miss the shape's next
    stages and stop rules. With step_s > 1 the target changes only every step_s seconds: each step
    aims at the users due at its end and spawns them at the curve's steepest pace within it (a
    ramp's own rate), so the users follow the curve rather than lag it by a step.
    After the load, users go to 0 (at least as fast as there are users) and stay there settle_s
    seconds, so that in distributed mode every worker's last report reaches the master; then, if
    quit_gate is set (the master's visit ledger), until it says the run may end or quit_wait_s pass.
    """
    abstract = True  # not a runnable shape: Locust must not pick it up by itself
    duration_s = None  # optional cap on the load, seconds
    settle_s = 4.0  # > Locust's worker report interval (3 s)
    step_s = 1.0
    quit_wait_s = 30.0  # at most this long past settle_s for quit_gate

    def __init__(self):
        super().__init__()
        self.last_users = 0
        self.last_tick = None
        self.ended = False
        self.drained_at = None
        self.stop_tick = None
        self.quit_gate = None  # () -> bool: True once the run may end; set by the locustfile

    def tick(self):
        return self.tick_at(self.get_run_time())

    def tick_at(self, elapsed):
        if not self.ended:
            over = (self.duration_s is not None and elapsed >= self.duration_s) or self.stops_early(elapsed)
            target = None if over else self.step_target(elapsed)
            if target is not None:
                users, rate = target
                if self.last_tick is None or users != self.last_tick[0]:
                    # a new tuple makes Locust send a new spawn message to every worker
                    self.last_tick = (users, rate)
                    self.last_users = users
                return self.last_tick
            self.ended = True
        return self.drain(elapsed)

    def step_target(self, elapsed):
        """(users, spawn rate) for the step under way at `elapsed`, or None when the load is over."""
        if self.step_s <= 1:
            users = self.users_at(elapsed)
            if users is None:
                return None
            users = max(0, round(users))
            return users, max(1.0, 2.0 * abs(users - self.last_users))
        start = elapsed - elapsed % self.step_s
        if self.users_at(start) is None:
            return None
        end = min(start + self.step_s, self.duration_s if self.duration_s is not None else float("inf"))
        wanted = self.users_at(end)
        if wanted is None:  # the shape ends within this step: its last users, until it does
            wanted, end = self.users_at(start), start
        users = max(0, round(wanted))
        slope = self.steepest(start, end)
        # a curve flat over the step jumped before it: spawn the jump within half a second
        return users, max(1.0, slope if slope else 2.0 * abs(users - self.last_users))

    def steepest(self, start, end):
        """The curve's steepest pace (users/s) between start and end: a ramp's own rate."""
        points = [self.users_at(start + k * REACH_RESOLUTION_S)
                  for k in range(round((end - start) / REACH_RESOLUTION_S) + 1)]
        points = [p for p in points if p is not None]
        return round(max((abs(b - a) / REACH_RESOLUTION_S for a, b in zip(points, points[1:])), default=0.0), 3)

    def drain(self, elapsed):
        if self.runner is not None and self.runner.user_count > 0:
            if self.stop_tick is None:  # one rate for the whole stop: a new tuple would resend it
                self.stop_tick = (0, float(max(STOP_RATE, self.runner.user_count)))
            return self.stop_tick
        if self.drained_at is None:
            self.drained_at = elapsed
        waited = elapsed - self.drained_at
        if waited < self.settle_s:
            return self.stop_tick or (0, STOP_RATE)
        if self.quit_gate is not None and waited < self.settle_s + self.quit_wait_s and not self.quit_gate():
            return self.stop_tick or (0, STOP_RATE)
        return None

    def users_at(self, elapsed):
        """Users wanted `elapsed` seconds into the test (a float is fine), or None when done; a pure
        function of time (a step reads it ahead)."""
        raise NotImplementedError

    def stops_early(self, elapsed):
        """True once a stop rule ends the load (asked once per tick)."""
        return False

    def planned_seconds(self):
        """How long the load lasts if nothing stops it early (None: until duration_s)."""
        own = self.own_seconds()
        if own is None:
            return self.duration_s
        return own if self.duration_s is None else min(own, self.duration_s)

    def own_seconds(self):
        return None


def ramp(start_users, end_users, rate, seconds_in):
    """Users after `seconds_in` seconds of going from start to end at `rate` users/s."""
    step = rate * seconds_in
    if end_users >= start_users:
        return min(end_users, start_users + step)
    return max(end_users, start_users - step)


class BreakpointShape(StudyShape):
    """+spawn_rate users/s up to max_users, as the study (+1/s to 30,000: "infinite").

    Optional stop rule: stop once the failure ratio of the last stop_window_s seconds is above
    stop_failure_ratio, i.e. the system is past its breaking point for good.
    """
    max_users = 30000
    spawn_rate = 1.0
    stop_failure_ratio = None  # e.g. 0.5
    stop_window_s = 30.0

    def __init__(self):
        super().__init__()
        self.seen = []  # (elapsed, total requests, total failures), one per tick

    def users_at(self, elapsed):
        return max(1.0, ramp(0, self.max_users, self.spawn_rate, elapsed))

    def stops_early(self, elapsed):
        if self.stop_failure_ratio is None or self.runner is None:
            return False
        total = self.runner.stats.total
        return self.failing_for_good(elapsed, total.num_requests, total.num_failures)

    def failing_for_good(self, elapsed, requests, failures):
        self.seen.append((elapsed, requests, failures))
        window_start = elapsed - self.stop_window_s
        if self.seen[0][0] > window_start:
            return False  # not a full window of history yet
        while len(self.seen) > 1 and self.seen[1][0] <= window_start:
            self.seen.pop(0)
        _, requests_then, failures_then = self.seen[0]
        requests_in_window = requests - requests_then
        if requests_in_window <= 0:
            return False
        return (failures - failures_then) / requests_in_window > self.stop_failure_ratio


class EnduranceShape(StudyShape):
    """Stepped stages: go to each stage's users at +/-spawn_rate users/s, then hold it.

    stages: [(users, hold_s), ...]; users_scale shrinks them for a small machine (e.g. 0.1).
    """
    stages = ()
    spawn_rate = 2.0
    users_scale = 1.0

    def schedule(self):
        """[(start s, ramp end s, stage end s, users before, users)], one per stage."""
        plan, now, before = [], 0.0, 0
        for users, hold in self.stages:
            users = max(0, round(users * self.users_scale))
            ramp_end = now + abs(users - before) / self.spawn_rate
            plan.append((now, ramp_end, ramp_end + hold, before, users))
            now, before = ramp_end + hold, users
        return plan

    def users_at(self, elapsed):
        for start, _ramp_end, end, before, users in self.schedule():
            if elapsed < end:
                return ramp(before, users, self.spawn_rate, elapsed - start)
        return None

    def own_seconds(self):
        plan = self.schedule()
        return plan[-1][2] if plan else 0.0


class LoadShape(StudyShape):
    """Warm-up, ramp-up, plateau, cleanup (the other reports' load test, in users not RPS:
    one visitor makes ~0.75 requests/s, so 7 users ~ 5 RPS and 40 users ~ 30 RPS)."""
    warmup_users = 7
    warmup_s = 30.0
    rampup_s = 30.0
    plateau_users = 40
    plateau_s = 120.0
    cleanup_s = 15.0  # idle: queued work drains

    def users_at(self, elapsed):
        ramp_end = self.warmup_s + self.rampup_s
        plateau_end = ramp_end + self.plateau_s
        if elapsed < self.warmup_s:
            return self.warmup_users
        if elapsed < ramp_end:
            rate = (self.plateau_users - self.warmup_users) / self.rampup_s
            return self.warmup_users + rate * (elapsed - self.warmup_s)
        if elapsed < plateau_end:
            return self.plateau_users
        if elapsed < plateau_end + self.cleanup_s:
            return 0
        return None

    def own_seconds(self):
        return self.warmup_s + self.rampup_s + self.plateau_s + self.cleanup_s


class SpikeShape(StudyShape):
    """A steady base load, a sudden spike for a short time, then the base load again."""
    base_users = 20
    base_s = 60.0
    spike_users = 200
    spike_rate = 50.0  # users/s: "sudden"
    spike_s = 60.0
    recover_s = 120.0

    def users_at(self, elapsed):
        spike_end = self.base_s + self.spike_s
        if elapsed < self.base_s:
            return self.base_users
        if elapsed < spike_end:
            return ramp(self.base_users, self.spike_users, self.spike_rate, elapsed - self.base_s)
        if elapsed < self.own_seconds():
            # down from the users the spike reached, which may be fewer than spike_users
            reached = ramp(self.base_users, self.spike_users, self.spike_rate, self.spike_s)
            return ramp(reached, self.base_users, self.spike_rate, elapsed - spike_end)
        return None

    def own_seconds(self):
        return self.base_s + self.spike_s + self.recover_s


SHAPES = {"breakpoint": BreakpointShape, "endurance": EnduranceShape, "load": LoadShape,
          "spike": SpikeShape}


def parse_assignments(text):
    """'a=1,b=2.5' -> {'a': '1', 'b': '2.5'} (values still strings)."""
    pairs = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"expected key=value, got {item!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def parse_stages(spec):
    """Stages from a CSV file (columns users,hold_s) or inline '300:180,650:120'."""
    if Path(spec).is_file():
        with open(spec, newline="") as f:
            rows = [row for row in csv.DictReader(line for line in f if not line.startswith("#"))]
        return [(int(row["users"]), float(row["hold_s"])) for row in rows]
    stages = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        users, sep, hold = item.partition(":")
        if not sep:
            raise ValueError(f"expected users:hold_s, got {item!r}")
        stages.append((int(users), float(hold)))
    return stages


def _convert(cls, key, text):
    if not hasattr(cls, key) or key.startswith("_") or callable(getattr(cls, key)):
        raise ValueError(f"{cls.__name__} has no setting {key!r}")
    default = getattr(cls, key)
    if text.lower() in ("none", ""):
        return None
    if isinstance(default, bool):
        return text.lower() in ("1", "true", "yes")
    if isinstance(default, int):
        return int(text)
    return float(text)  # None-default settings are numbers too (durations, ratios)


def make_shape(name, overrides=None, stages=None):
    """A shape instance of kind `name` with some settings overridden (strings are converted)."""
    if name not in SHAPES:
        raise ValueError(f"unknown shape {name!r}; known: {', '.join(SHAPES)}")
    cls = SHAPES[name]
    shape = cls()
    for key, value in (overrides or {}).items():
        setattr(shape, key, _convert(cls, key, value) if isinstance(value, str) else value)
    if stages is not None:
        if not isinstance(shape, EnduranceShape):
            raise ValueError("--stages only applies to the endurance shape")
        shape.stages = parse_stages(stages) if isinstance(stages, str) else list(stages)
    return shape

"""The study's load shapes, one small LoadTestShape per test type.

A shape's class attributes are its settings; `make_shape(name, overrides)` builds one with some
of them changed (from the command line: `--shape-set max_users=300,duration_s=120`).
Every shape stops by itself (tick() -> None): in headless mode Locust never applies --run-time
to a shape test, so use duration_s.
The load, breakpoint and endurance shapes also come in the open model (arrivals.py): given a rate in
visits/s (arrival_rate, arrival_ramp, stages in visits/s) they size users to it instead of asking for users.
"""
import logging
import math

from locust import LoadTestShape

import arrivals

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
    arrival_users_max = arrivals.USERS_MAX  # open model: the ceiling on users
    arrival_headroom = arrivals.HEADROOM  # open model: users for this many times the visits under way
    arrival_gaps = arrivals.EVEN  # open model: arrivals evenly spaced, or "random" (Poisson)

    def __init__(self):
        super().__init__()
        self.last_users = 0
        self.last_tick = None
        self.ended = False
        self.drained_at = None
        self.stop_tick = None
        self.quit_gate = None  # () -> bool: True once the run may end; set by the locustfile
        self.on_load_end = None  # () -> None, called once when the load ends; set by the locustfile
        self.arrivals_missed = None  # () -> int: the open model's arrivals not started so far; set by the locustfile
        self.missed_seen = 0
        self.visit_duration = arrivals.VisitDuration()
        self.warned_ceiling = False

    def tick(self):
        return self.tick_at(self.get_run_time())

    def tick_at(self, elapsed):
        if not self.ended:
            over = (self.duration_s is not None and elapsed >= self.duration_s) or self.stops_early(elapsed)
            target = None if over else (self.arrival_target(elapsed) if self.open_model else
                                        self.step_target(elapsed))
            if target is not None:
                users, rate = target
                if self.last_tick is None or users != self.last_tick[0]:
                    # a new tuple makes Locust send a new spawn message to every worker
                    self.last_tick = (users, rate)
                    self.last_users = users
                return self.last_tick
            self.ended = True
            if self.on_load_end is not None:
                self.on_load_end()
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

    @property
    def open_model(self):
        """True when the shape states a rate of visits (rate_at) rather than users."""
        return False

    def rate_at(self, elapsed):
        """Open model: the visits/s wanted `elapsed` seconds into the test, or None once the load is over
        (or in the closed model); a pure function of time and the settings, which every Locust process
        computes alike."""
        end = self.planned_seconds()
        if not self.open_model or elapsed < 0 or (end is not None and elapsed >= end):
            return None
        return self.rate_curve(elapsed)

    def rate_curve(self, elapsed):
        """The shape's own rate (visits/s) within its planned time."""
        raise NotImplementedError

    def arrival_target(self, elapsed):
        """Open model: (users, spawn rate) for the next second, sized by arrivals.users_wanted from the
        highest rate of the next LOOK_AHEAD_S, the visit's current duration and the arrivals not started
        since the last tick; never fewer users than before during the load. Always one-second steps."""
        ahead = [self.rate_at(elapsed + k * arrivals.LOOK_AHEAD_S / 4) for k in range(5)]
        if ahead[0] is None:
            return None
        if self.runner is not None:
            total = self.runner.stats.total
            self.visit_duration.update(elapsed, total.num_requests, total.total_response_time)
        missed = self.arrivals_missed() if self.arrivals_missed is not None else 0
        short, self.missed_seen = max(0, missed - self.missed_seen), missed
        users = arrivals.users_wanted(self.last_users, max(r for r in ahead if r is not None),
                                      self.visit_duration.seconds, short, self.arrival_headroom,
                                      self.arrival_users_max)
        if users >= self.arrival_users_max and not self.warned_ceiling:
            self.warned_ceiling = True
            logging.warning("the open model reached its ceiling of %d users (arrival_users_max): arrivals no "
                            "user is free for are not started", self.arrival_users_max)
        return users, max(1.0, 2.0 * (users - self.last_users))  # the step within half a second

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

    def planned_visits(self, visit_s_min=None):
        """The most visits the load makes if nothing stops it early (the visit ledger's plan), or None
        without an end or a bound: the open model's arrivals (its rate over its planned time), or the
        closed model's users each making a visit at once and then at most one per `visit_s_min`
        seconds (the shortest think time; latency only makes them fewer). Summed second by second."""
        end = self.planned_seconds()
        if end is None or not (self.open_model or visit_s_min):
            return None
        seconds = [t + 0.5 for t in range(math.ceil(end))]
        if self.open_model:
            return sum(self.rate_at(t) or 0.0 for t in seconds)
        users = [self.users_at(t) or 0.0 for t in seconds]
        return sum(users) / visit_s_min + max(users, default=0.0)


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
    arrival_ramp = None  # open model: + this many visits/s each second ...
    arrival_start = arrivals.RAMP_START  # ... from this many visits/s

    def __init__(self):
        super().__init__()
        self.seen = []  # (elapsed, total requests, total failures), one per tick

    def users_at(self, elapsed):
        return max(1.0, ramp(0, self.max_users, self.spawn_rate, elapsed))

    @property
    def open_model(self):
        return self.arrival_ramp is not None

    def rate_curve(self, elapsed):
        return self.arrival_start + self.arrival_ramp * elapsed

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
    Stages in visits/s (a visits_per_s column, or `15/s:120`: arrivals.parse_stages) are the open model:
    each stage's rate, reached at +/-arrival_ramp visits/s each second (None: at once), then held.
    """
    stages = ()
    spawn_rate = 2.0
    users_scale = 1.0
    arrival_ramp = None  # open model: the rate's change between stages, visits/s each second; None: a step
    _stages_in_visits = False  # the stages' unit (make_shape reads it from them): not a setting
    _plan = (None, None)  # (the settings schedule() read, its plan): rate_at reads it for every arrival

    def schedule(self):
        """[(start s, ramp end s, stage end s, level before, level)], one per stage: users, or visits/s."""
        key = (tuple(self.stages), self.users_scale, self.spawn_rate, self.arrival_ramp, self._stages_in_visits)
        if self._plan[0] == key:
            return self._plan[1]
        plan, now, before = [], 0.0, 0
        for level, hold in self.stages:
            level = float(level) if self._stages_in_visits else max(0, round(level * self.users_scale))
            pace = self.arrival_ramp if self._stages_in_visits else self.spawn_rate
            ramp_end = now + (abs(level - before) / pace if pace else 0.0)
            plan.append((now, ramp_end, ramp_end + hold, before, level))
            now, before = ramp_end + hold, level
        self._plan = (key, plan)
        return plan

    def level_at(self, elapsed, pace):
        for start, _ramp_end, end, before, level in self.schedule():
            if elapsed < end:
                return ramp(before, level, pace, elapsed - start) if pace else level
        return None

    def users_at(self, elapsed):
        return self.level_at(elapsed, self.spawn_rate)

    @property
    def open_model(self):
        return self._stages_in_visits

    def rate_curve(self, elapsed):
        return self.level_at(elapsed, self.arrival_ramp)

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
    arrival_rate = None  # open model: visits/s held throughout (duration_s; else warm-up, ramp-up and plateau)

    @property
    def open_model(self):
        return self.arrival_rate is not None

    def rate_curve(self, elapsed):
        return self.arrival_rate

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
        if self.open_model:  # the time the users' load test loads, without its idle cleanup
            return self.warmup_s + self.rampup_s + self.plateau_s
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
    """Stages from a CSV file (columns users,hold_s or visits_per_s,hold_s) or inline '300:180,650:120'
    (users) or '15/s:120,30/s:60' (visits/s): arrivals.parse_stages, without the unit."""
    return arrivals.parse_stages(spec)[1]


def _convert(cls, key, text):
    if not hasattr(cls, key) or key.startswith("_") or callable(getattr(cls, key)):
        raise ValueError(f"{cls.__name__} has no setting {key!r}")
    default = getattr(cls, key)
    if text.lower() in ("none", ""):
        return None
    if isinstance(default, bool):
        return text.lower() in ("1", "true", "yes")
    if isinstance(default, str):
        return text
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
        if isinstance(stages, str):
            shape._stages_in_visits, shape.stages = arrivals.parse_stages(stages)
        else:
            shape.stages = list(stages)
    return shape

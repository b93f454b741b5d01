"""Open-model load: visits that arrive at a rate whatever the latency (locust/README.md, "Arrival rate").

A shape states the rate (visits/s) as a pure function of the test's elapsed time. In each Locust process
an `ArrivalClock` turns its share of that rate into paced arrivals: evenly spaced (gaps "even"), arrival k due
when the rate integrated from the start reaches k (plus the process's phase, so that the processes' arrivals
interleave); or at random (gaps "random"): a Poisson process of that rate, each gap's integrated rate an
exponential draw of mean 1, as the queueing models assume (visitkit/model/latency.py). A free user takes
the next arrival, sleeps until it is due and makes the visit. An arrival that no user took within LATE_S of
its time is not started: the generator's own limit (k6 calls these
dropped iterations), counted, never made up later. The shape adds users as the rate and the visit's
duration ask (`users_wanted`), never removes any during the load, and stops at a ceiling.

Each process counts, per second (unix), the target (its rate integrated over the second), the arrivals
started and those not started; workers ship the counts with their stats reports, and the master or the
only process writes them all as arrivals.csv (COLUMNS). Standard library only: the kit loads this
module for the column names, the stages' unit and the defaults (visitkit.suite.locust_module).
"""
import collections
import csv
import math
import random
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

COLUMNS = ("time", "target_per_s", "started", "not_started")
LATE_S = 0.2  # an arrival no user took within this long after its time is not started (> a busy loop's lag)
USERS_MAX = 5000  # the default ceiling on an open-model shape's users (shape setting arrival_users_max)
RAMP_START = 1.0  # visits/s: where a breakpoint's ramp starts by default (shape setting arrival_start)
HEADROOM = 2.0  # users for twice the visits Little's law says are under way at once (slower visits, bursts)
SPARE_S = 1.0  # and a second's arrivals more: the visit's measured duration lags by a worker's report (3 s)
LOOK_AHEAD_S = 2.0  # users are sized for the highest rate of the next seconds (a ramp's)
VISIT_GUESS_S = 1.0  # a visit's duration until requests have been measured
VISIT_WINDOW_S = 10.0  # the visit's duration is measured over the requests of the last seconds
IDLE_STEP_S = 0.1  # while the rate is 0, the clock looks again this much later
INTEGRAL_STEP_S = 0.002  # the target is integrated in steps this short: a rate's jump (its end) is off by half
END_EPSILON_S = 1e-6  # no arrival is due closer than this to the schedule's end
MIDPOINT_ROUNDS = 4  # next_due's refinements: exact for a linear rate after the first
VISITS_COLUMN = "visits_per_s"  # an endurance stages file in visits/s has this column instead of `users`
VISITS_SUFFIX = "/s"  # and an inline stage `15/s:120` (15 visits/s held 120 s)
EVEN, RANDOM = "even", "random"  # the gaps between arrivals (shape setting arrival_gaps): paced, or Poisson
GAPS = (EVEN, RANDOM)


def requests_per_visit(page_embeds_count: bool) -> int:
    """The requests of one visit: the page, inc-counter and, unless the page comes with its count (serve-page's
    PAGE_EMBEDS_COUNT, the settings' page_embeds_count), get-counter's first read."""
    return 2 if page_embeds_count else 3


REQUESTS_PER_VISIT = requests_per_visit(False)  # by default, and in iterations 0-6

RateAt = Callable[[float], float | None]  # elapsed seconds -> visits/s, None once the schedule is over


def next_due(rate_at: RateAt, after: float, amount: float = 1.0) -> float | None:
    """When the arrivals the rate asks from `after` on add up to `amount` (1: the next arrival's time);
    None when the schedule ends first. A rate of 0 is waited out."""
    start = after
    while True:
        rate = rate_at(start)
        if rate is None:
            return None
        if rate > 0:
            break
        start += IDLE_STEP_S
    step = amount / rate
    for _ in range(MIDPOINT_ROUNDS):  # a rate linear over the step gives its midpoint's rate times the step
        middle = rate_at(start + step / 2)
        if middle is None or middle <= 0:
            break
        step = amount / middle
    due = start + step
    # an arrival a hair before the end is the float sum's (900 steps of 1/15 s come to 59.99999999999 s)
    return None if rate_at(due + END_EPSILON_S) is None else due


def integral(rate_at: RateAt, start: float, end: float) -> float:
    """The arrivals the rate asks between start and end (0 where the schedule is over)."""
    if end <= start:
        return 0.0
    steps = max(1, math.ceil((end - start) / INTEGRAL_STEP_S))
    width = (end - start) / steps
    return sum(rate_at(start + (i + 0.5) * width) or 0.0 for i in range(steps)) * width


class ArrivalClock:
    """One Locust process's arrivals. `rate_at`: the whole test's rate; this process makes `share` of it,
    its first arrival `phase` of an arrival in (process i of n: share 1/n, phase i/n). Times are seconds
    since the clock started (its test_start): `origin` is that moment on time.monotonic (elapsed()),
    `origin_wall` its unix time, which names the seconds counted. `gaps` RANDOM: each gap an exponential draw
    from `rng` (independent processes' Poisson arrivals add up to one of the whole rate: no phase)."""

    def __init__(self, rate_at: RateAt, share: float = 1.0, phase: float = 0.0, late_s: float = LATE_S,
                 origin_wall: float = 0.0, origin: float = 0.0, gaps: str = EVEN,
                 rng: random.Random | None = None) -> None:
        if gaps not in GAPS:
            raise ValueError(f"arrival gaps {gaps!r}: one of {', '.join(GAPS)}")
        self.rate_at: RateAt = lambda elapsed: None if (rate := rate_at(elapsed)) is None else rate * share
        self.late_s, self.origin_wall, self.origin = late_s, origin_wall, origin
        self.rng = (rng or random.Random()) if gaps == RANDOM else None
        # phase 0: the first moment the rate is above 0
        self.due = next_due(self.rate_at, 0.0, phase if self.rng is None else self.gap())
        self.accounted = 0.0  # the target is counted up to this time
        self.ended_at: float | None = None
        self.rows: dict[int, list[float]] = collections.defaultdict(lambda: [0.0, 0, 0])  # COLUMNS[1:] by second
        self.unshipped: dict[int, list[float]] = collections.defaultdict(lambda: [0.0, 0, 0])

    def elapsed(self) -> float:
        return time.monotonic() - self.origin

    def gap(self) -> float:
        """The arrivals' worth of rate to the next arrival: 1 when paced, an exponential draw of mean 1 at random."""
        return 1.0 if self.rng is None else self.rng.expovariate(1.0)

    def second(self, elapsed: float) -> int:
        return math.floor(self.origin_wall + elapsed)

    def _add(self, second: int, column: int, amount: float) -> None:
        self.rows[second][column] += amount
        self.unshipped[second][column] += amount

    def take(self, now: float) -> float | None:
        """The due time of the next arrival for a free user to start, or None once the schedule is over
        or the load has ended. Arrivals more than late_s overdue are not started (settle)."""
        self.settle(now)
        if self.due is None or self.ended_at is not None:
            return None
        due, self.due = self.due, next_due(self.rate_at, self.due, self.gap())
        return due

    def started(self, due: float) -> None:
        """A user started the arrival due at `due`."""
        self._add(self.second(due), 1, 1)

    def settle(self, now: float) -> None:
        """Counts the target up to now, and as not started every arrival no user took within late_s of its
        time (after the end: every one due before it)."""
        limit = now if self.ended_at is None else min(now, self.ended_at)
        overdue = limit - self.late_s if self.ended_at is None else self.ended_at
        while self.due is not None and self.due < overdue:
            self._add(self.second(self.due), 2, 1)
            self.due = next_due(self.rate_at, self.due, self.gap())
        self._account(limit)

    def _account(self, until: float) -> None:
        while self.accounted < until:
            second = self.second(self.accounted)
            end = second + 1 - self.origin_wall
            if end <= self.accounted:  # the float sum landed on the boundary: the next second starts here
                second, end = second + 1, second + 2 - self.origin_wall
            end = min(until, end)
            self._add(second, 0, integral(self.rate_at, self.accounted, end))
            self.accounted = end

    def end(self, now: float) -> None:
        """The load is over: no arrival is taken after now, those due before it and not taken were not
        started."""
        if self.ended_at is None:
            self.ended_at = now
            self.settle(now)

    @property
    def not_started(self) -> int:
        return int(sum(row[2] for row in self.rows.values()))

    def take_rows(self, now: float) -> list[list[float]]:
        """The counts since the last call ([second, target, started, not started] rows: a worker's report)."""
        self.settle(now)
        taken = [[second, *row] for second, row in sorted(self.unshipped.items())]
        self.unshipped.clear()
        return taken


def merge(table: dict[int, list[float]], rows: Iterable[Sequence[float]]) -> None:
    """Adds a process's rows ([second, target, started, not started]) to the master's table."""
    for second, *counts in rows:
        row = table.setdefault(int(second), [0.0, 0, 0])
        for i, count in enumerate(counts):
            row[i] += count


def write_arrivals(path: str | Path, table: dict[int, list[float]]) -> None:
    """arrivals.csv: per second, the target (visits/s the rate asked in it, all processes together) and the
    arrivals started and not started."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(COLUMNS)
        out.writerows((second, round(target, 3), int(started), int(not_started))
                      for second, (target, started, not_started) in sorted(table.items()))


def users_wanted(users: int, rate: float, visit_s: float, short: int = 0, headroom: float = HEADROOM,
                 ceiling: int = USERS_MAX) -> int:
    """The users an open-model shape runs next: enough for `rate` visits/s of `visit_s` each (Little's law:
    rate x visit_s under way at once) times the headroom, plus SPARE_S of arrivals; at least the `users`
    it runs (a user stopped mid-visit would cut the visit short) plus one per arrival not started since
    the last step (`short`, as k6 adds a user for each dropped iteration); at most the ceiling."""
    sized = math.ceil(rate * (visit_s * headroom + SPARE_S))
    return max(1, min(ceiling, max(sized, users + short)))


class VisitDuration:
    """A visit's current duration, from Locust's running totals of requests and their response times:
    their mean over the last VISIT_WINDOW_S, times the requests of a visit (requests_per_visit: the
    locustfile sets it once the visitors meet pages that come with their count)."""

    def __init__(self) -> None:
        self.seen: collections.deque[tuple[float, int, float]] = collections.deque()
        self.seconds = VISIT_GUESS_S
        self.requests_per_visit = REQUESTS_PER_VISIT

    def update(self, elapsed: float, requests: int, total_ms: float) -> float:
        self.seen.append((elapsed, requests, total_ms))
        while len(self.seen) > 2 and self.seen[1][0] <= elapsed - VISIT_WINDOW_S:
            self.seen.popleft()
        _, requests_then, ms_then = self.seen[0]
        if requests > requests_then:  # else nothing answered lately: the last figure stands
            self.seconds = self.requests_per_visit * (total_ms - ms_then) / (requests - requests_then) / 1000
        return self.seconds


def parse_stages(spec: str) -> tuple[bool, list[tuple[float, float]]]:
    """Endurance stages, (in visits/s?, [(users or visits/s, hold_s)]), from a CSV file (columns users,hold_s
    or visits_per_s,hold_s; lines starting with # are comments) or inline: '300:180,650:120' in users,
    '15/s:120,30/s:60' in visits/s. All stages in one unit."""
    if Path(spec).is_file():
        with open(spec, newline="") as f:
            rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
        in_visits = bool(rows) and VISITS_COLUMN in rows[0]
        column = VISITS_COLUMN if in_visits else "users"
        return in_visits, [(float(row[column]) if in_visits else int(row[column]), float(row["hold_s"]))
                           for row in rows]
    stages, units = [], set()
    for item in filter(None, (part.strip() for part in spec.split(","))):
        level, sep, hold = item.partition(":")
        if not sep:
            raise ValueError(f"expected users:hold_s or visits/s:hold_s, got {item!r}")
        in_visits = level.strip().endswith(VISITS_SUFFIX)
        units.add(in_visits)
        stages.append((float(level.strip()[:-len(VISITS_SUFFIX)]) if in_visits else int(level), float(hold)))
    if len(units) > 1:
        raise ValueError(f"stages {spec!r} mix users and visits/s: give them all in one unit")
    return units == {True}, stages

"""Figures of one run, from Locust's CSVs, the server samples and the convergence polls.

Pure functions on plain rows/dicts, so they are tested on synthetic data.
Times are unix seconds; durations seconds; latencies milliseconds.
"""
import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from visitkit.catalogue import FUNCTIONS, PAGES, PUBLIC_PATHS, function_of_path
from visitkit.results.records import (
    Breakpoint,
    ClientFigures,
    Convergence,
    Failure,
    Percentile,
    Point,
    RateBreakpoint,
    RatePoint,
    ServerFigures,
    Store,
)
from visitkit.suite import locust_module

# A server sample as these figures read it, by key (fn_field, store_field): a samples.Sample, or a row shaped
# like one.
SampleRow = Mapping[str, Any]
S = TypeVar("S", bound=SampleRow)
STUDY_PERCENTILES: tuple[Percentile, ...] = ("50%", "60%", "70%", "80%", "90%", "95%")


def number(text: Any) -> float | None:
    """Locust writes 'N/A' or '' for no data."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


# ---- client side: Locust ------------------------------------------------------------------------
def percentile_table(stats_rows: Iterable[Mapping[str, str]]) -> list[dict[str, Any]]:
    """The study's table: one row per endpoint and page, Aggregated last."""
    table: list[dict[str, Any]] = []
    for row in stats_rows:
        table.append({
            "method": row["Type"], "name": row["Name"],
            "requests": int(row["Request Count"]), "failures": int(row["Failure Count"]),
            "mean_ms": number(row["Average Response Time"]),
            **{p: number(row.get(p)) for p in STUDY_PERCENTILES},
        })
    endpoints = sorted((r for r in table if r["name"] != "Aggregated"),
                       key=lambda r: (r["name"].split("?")[0], r["name"]))
    return endpoints + [r for r in table if r["name"] == "Aggregated"]


def client_by_function(table: Sequence[Mapping[str, Any]]) -> dict[str, ClientFigures]:
    """Per function: requests, failures, request-weighted mean, worst page's p50 and p95."""
    result: dict[str, ClientFigures] = {}
    for name in PUBLIC_PATHS.values():
        rows = [r for r in table if function_of_path(r["name"]) == name and r["requests"]]
        if not rows:
            continue
        requests = sum(r["requests"] for r in rows)
        result[name] = {
            "requests": requests, "failures": sum(r["failures"] for r in rows),
            "mean_ms": sum(r["mean_ms"] * r["requests"] for r in rows if r["mean_ms"] is not None) / requests,
            "p50_ms": max((r["50%"] for r in rows if r["50%"] is not None), default=None),
            "p95_ms": max((r["95%"] for r in rows if r["95%"] is not None), default=None),
        }
    return result


def aggregated_history(history_rows: Iterable[Mapping[str, str]]) -> list[dict[str, Any]]:
    """Locust's per-second history, Aggregated rows only, as dicts; where its full history (--csv-full-history)
    has the endpoints' rows of that second too, `answered`: per public function, its requests answered without
    failure so far (an open-model run's visits are served at its slowest function's pace: rate_series), and
    `p95_ms_by_function`: per public function, its worst page's p95 that second (Locust's, over its last ~10 s;
    None where none was reported)."""
    series: list[dict[str, Any]] = []
    answered: dict[float, dict[str, int]] = {}
    p95: dict[float, dict[str, float | None]] = {}
    for row in history_rows:
        if row["Name"] != "Aggregated":
            name = function_of_path(row["Name"])
            if name is not None:
                when = float(row["Timestamp"])
                second = answered.setdefault(when, dict.fromkeys(PUBLIC_PATHS.values(), 0))
                second[name] += int(float(row["Total Request Count"])) - int(float(row["Total Failure Count"]))
                worst = p95.setdefault(when, dict.fromkeys(PUBLIC_PATHS.values()))
                page = number(row["95%"])
                so_far = worst[name]
                if page is not None:
                    worst[name] = page if so_far is None else max(so_far, page)
            continue
        series.append({
            "time": float(row["Timestamp"]), "users": int(float(row["User Count"])),
            "rps": number(row["Requests/s"]) or 0.0, "failures_per_s": number(row["Failures/s"]) or 0.0,
            "p50_ms": number(row["50%"]), "p95_ms": number(row["95%"]),
            "requests": int(float(row["Total Request Count"])), "failures": int(float(row["Total Failure Count"])),
        })
    for sample in series:
        if sample["time"] in answered:
            sample["answered"] = answered[sample["time"]]
            sample["p95_ms_by_function"] = p95[sample["time"]]
    return series


HEALTH_WORKER_COLUMNS = {"workers_expected": int, "workers_connected": int, "workers_missing": int,
                         "heartbeat_late_s": float, "rebalances": int}  # the master's view (locust/health.py)


def health_rows(rows: Iterable[Mapping[str, str]]) -> list[dict[str, Any]]:
    """The load generator's health.csv (locust/health.py) as dicts. The master's view of its workers is on
    its own rows only: None on the others, and on every row of a file from before it was recorded (unknown)."""
    return [{"time": float(row["time"]), "process": row["process"], "cpu_percent": number(row["cpu_percent"]),
             "loop_lag_ms": number(row["loop_lag_ms"]), "users": int(float(row["users"] or 0)),
             **{column: kind(float(row[column])) if row.get(column) else None
                for column, kind in HEALTH_WORKER_COLUMNS.items()}} for row in rows]


def load_window(series: Iterable[Mapping[str, Any]]) -> tuple[float, float] | tuple[None, None]:
    """(first second with users, last second with users), or (None, None)."""
    loaded = [s["time"] for s in series if s["users"] > 0]
    return (loaded[0], loaded[-1]) if loaded else (None, None)


def rolling_mean(values: Sequence[float], window: int) -> list[float]:
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1):i + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def without_final_stop(loaded: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """The samples before users start leaving for good at the end of the test: while they stop,
    the figures describe the stopping (requests cut short), not the load."""
    end = len(loaded)
    while end > 1 and loaded[end - 1]["users"] < loaded[end - 2]["users"]:
        end -= 1
    return loaded[:end]


def find_breakpoint(series: Iterable[Mapping[str, Any]], min_users: int = 5, shortfall: float = 0.25,
                    hold_s: int = 10, smooth_s: int = 5, per_second: Mapping[int, int] | None = None) -> Breakpoint:
    """Where the system stops keeping up, from the aggregated history.

    knee: RPS (smoothed) falls `shortfall` below users x the healthy requests per user (the 90th
    percentile of RPS/users once min_users are on) and stays below for hold_s samples; the knee is
    then dated back to where RPS stopped growing with users: the split of two straight lines
    fitted to RPS against users that fits best (see knee_index), so that a noisy plateau or a
    declining RPS does not move it; its RPS is the one observed there (see observed_rps), not the
    fitted line's. first_failure: first second with a failed request.
    p95 ceiling: the highest p95, and when p95 first got within 5 % of it.
    per_second: {unix second: requests}, Locust's exact counts; RPS is read from them where given.
    """
    loaded = without_final_stop([s for s in series if s["users"] > 0])
    result: Breakpoint = {"knee": None, "first_failure": None, "peak_rps": None, "p95_ceiling": None,
                          "healthy_rps_per_user": None}
    if not loaded:
        return result
    smooth = rolling_mean([s["rps"] for s in loaded], smooth_s)
    counted = counted_rps(loaded, per_second=per_second)  # without Locust's lag: what a knee is read against
    ratios = sorted(r / s["users"] for r, s in zip(smooth, loaded) if s["users"] >= min_users and r > 0)
    if ratios:
        healthy = ratios[int(0.9 * (len(ratios) - 1))]
        result["healthy_rps_per_user"] = healthy
        short = [s["users"] >= min_users and r < (1 - shortfall) * healthy * s["users"]
                 for r, s in zip(smooth, loaded)]
        # Only after RPS has kept up once: at the start Locust's RPS lags the users it just spawned.
        kept_up = next((i for i, (r, s) in enumerate(zip(smooth, loaded))
                        if s["users"] >= min_users and not short[i]), len(loaded))
        for i in range(kept_up, len(loaded)):
            if all(short[i:i + hold_s]) and len(short[i:i + hold_s]) == hold_s:
                # RPS had stopped following users before the shortfall showed: date it back, on the
                # raw RPS (smoothing lags), over what was seen up to the end of the hold.
                window = range(kept_up, i + hold_s)
                users, _ = knee_index([loaded[j]["users"] for j in window], [counted[j] for j in window])
                assert users is not None  # the window holds hold_s seconds
                reached = next(j for j in window if loaded[j]["users"] >= users)
                result["knee"] = {"time": loaded[reached]["time"], "users": round(users),
                                  "rps": observed_rps(loaded, counted, window, round(users), reached)}
                break
    peak = max(range(len(loaded)), key=lambda i: counted[i])
    result["peak_rps"] = point(loaded[peak], counted[peak])
    failing = next((i for i, s in enumerate(loaded) if s["failures"] > 0), None)
    if failing is not None:
        result["first_failure"] = point(loaded[failing], counted[failing])
    p95s = [s["p95_ms"] for s in loaded if s["p95_ms"] is not None]
    if p95s:
        ceiling = max(p95s)
        at_ceiling = next(s for s in loaded if s["p95_ms"] is not None and s["p95_ms"] >= 0.95 * ceiling)
        result["p95_ceiling"] = {**point(at_ceiling, None), "p95_ms": ceiling}
    return result


def line_fit(n: float, sx: float, sy: float, sxx: float, sxy: float, syy: float) -> tuple[float, float, float]:
    """(squared error, slope, intercept) of the least-squares line through n points, from their sums;
    a flat line when every x is the same (users held constant for a while)."""
    var_x = sxx - sx * sx / n
    slope = (sxy - sx * sy / n) / var_x if var_x > 1e-9 else 0.0
    intercept = (sy - slope * sx) / n
    error = syy - sy * sy / n - slope * (sxy - sx * sy / n)
    return error, slope, intercept


def counted_rps(loaded: Sequence[Mapping[str, Any]], half_window: int = 3,
                per_second: Mapping[int, int] | None = None) -> list[float]:
    """Requests per second centred on each second, from Locust's exact per-second counts where
    given, else from its running total. Locust's own Requests/s is the mean of the last ~10 s, so on
    a ramp it trails the users it is read against by ~7 s (14 users at +2/s) and would date a knee
    late; and in distributed mode the running total moves in the workers' 3 s batches."""
    if per_second:
        width = 2 * half_window + 1
        return [sum(per_second.get(int(s["time"]) + k, 0) for k in range(-half_window, half_window + 1)) / width
                for s in loaded]
    out = []
    for i in range(len(loaded)):
        first, last = loaded[max(0, i - half_window)], loaded[min(len(loaded) - 1, i + half_window)]
        seconds = last["time"] - first["time"]
        out.append((last["requests"] - first["requests"]) / seconds if seconds > 0 else loaded[i]["rps"])
    return out


def knee_index(users: Sequence[float], rps: Sequence[float],
               min_points: int = 3) -> tuple[float, float] | tuple[None, None]:
    """(users, rps) at the knee: the series is split into two straight lines of RPS against users,
    one while RPS followed users and one after (flat, declining or still rising slower), where the
    split leaves the least squared error; the knee is where the two lines cross between the split's
    two points (else the first line's last point). Least squares over every point, so one
    noisy second neither moves the knee nor sets its level."""
    found = knee_split(users, rps, min_points)
    return (found[1], found[2]) if found else (None, None)


def knee_split(users: Sequence[float], rps: Sequence[float], min_points: int = 3) -> tuple[int, float, float] | None:
    """knee_index's knee with where the series was split: (the second line's first point, users, rps), or None
    without points (fewer than two lines' worth: all of it one line, its last point the knee)."""
    n = len(users)
    if n < 2 * min_points:
        return (n, users[-1], rps[-1]) if rps else None
    sums = [(0, 0.0, 0.0, 0.0, 0.0, 0.0)]  # prefix sums of 1, x, y, x², xy, y²
    for x, y in zip(users, rps):
        c, sx, sy, sxx, sxy, syy = sums[-1]
        sums.append((c + 1, sx + x, sy + y, sxx + x * x, sxy + x * y, syy + y * y))
    total = sums[-1]
    best: tuple[float, int, float, float, float, float] | None = None
    for split in range(min_points, n - min_points + 1):  # first line: points [0, split)
        before = sums[split]
        after = tuple(t - b for t, b in zip(total, before))
        error_before, slope, intercept = line_fit(*before)
        error_after, slope_after, intercept_after = line_fit(*after)
        if best is None or error_before + error_after < best[0]:
            best = (error_before + error_after, split, slope, intercept, slope_after, intercept_after)
    assert best is not None  # n >= 2 * min_points: one split at least
    _, split, slope, intercept, slope_after, intercept_after = best
    knee = users[split - 1]
    if slope != slope_after:
        crossing = (intercept_after - intercept) / (slope - slope_after)
        if users[split - 1] <= crossing <= users[split]:  # a crossing farther off is no knee (a drop)
            knee = crossing
    return split, knee, intercept + slope * knee


def observed_rps(loaded: Sequence[Mapping[str, Any]], counted: Sequence[float], window: Iterable[int], users: int,
                 reached: int) -> float:
    """The RPS observed at the knee, not the fitted line's value there (which a collapse past the
    knee can pull to ~0 or below): the mean of counted_rps (requests completed per second, centred
    on each second) over the seconds of the window whose user count is the knee's; where the ramp
    steps over that count, at the second the knee is dated to (the first with at least its users)."""
    held = [counted[j] for j in window if loaded[j]["users"] == users]
    return sum(held) / len(held) if held else counted[reached]


def point(sample: Mapping[str, Any], rps: float | None) -> Point:
    return {"time": sample["time"], "users": sample["users"], "rps": rps if rps is not None else sample["rps"]}


# ---- client side, the open model: visits offered at a rate --------------------------------------
REQUESTS_PER_VISIT = locust_module("arrivals").REQUESTS_PER_VISIT  # the page, inc-counter, get-counter
# Rates are read over 2 x RATE_HALF_WINDOW_S + 1 = 9 s: a multiple of the 3 s in which a distributed run's workers
# report, so that every window holds as many reports of each worker (Locust's running totals move in them).
RATE_HALF_WINDOW_S = 4


def centred_mean(values: Sequence[float], half_window: int) -> list[float]:
    """Each value's mean with up to half_window neighbours either side, as many on each side (fewer at the
    ends), so that a ramp is read at its own second, not pulled towards the inside of the series."""
    out = []
    for i in range(len(values)):
        half = min(half_window, i, len(values) - 1 - i)
        chunk = values[i - half:i + half + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def rate_series(arrival_rows: Sequence[Mapping[str, Any]], series: Iterable[Mapping[str, Any]],
                half_window: int = RATE_HALF_WINDOW_S, requests_per_visit: int = REQUESTS_PER_VISIT) -> list[RatePoint]:
    """An open-model run's full seconds (arrivals.csv's rows, results/arrivals.py's, but the first and the
    last: partial), each with the visits/s offered (the arrivals started) and served, both centred_mean over
    half_window seconds either side, the target's visits/s in that second, and the users and p95 Locust's
    history had then. series: aggregated_history's rows. A visit asks each public function once, so the
    visits served so far are the requests answered without failure by the function that answered fewest
    (Locust's running totals per function; without its full history, all requests over the requests of a
    visit, which past the knee counts the functions that still keep up as well). A visit is served as its
    requests are answered, so the served rate trails the offered one by up to its duration and the part of a
    second Locust writes its history rows in (on a ramp, by the ramp times that; more in distributed mode, by
    the workers' reports)."""
    full = list(arrival_rows)[1:-1]
    history = sorted(series, key=lambda s: s["time"])
    seconds = [int(s["time"]) for s in history]

    def at(second: int) -> Mapping[str, Any] | None:  # the history's last row written by the end of that second
        i = bisect.bisect_right(seconds, second) - 1
        return history[i] if i >= 0 else None

    # The functions a visit goes through: a page that comes with its count makes no get-counter request.
    reached = {name for row in history for name, count in row.get("answered", {}).items() if count}

    def served_by(second: int) -> float:  # visits served by the end of that second
        row = at(second)
        if row is None:
            return 0
        if "answered" in row:
            return min((count for name, count in row["answered"].items() if name in reached), default=0)
        return (row["requests"] - row["failures"]) / requests_per_visit

    offered = centred_mean([row["started"] for row in full], half_window)
    # an arrivals row counts the arrivals due in its second; Locust writes its history row stamped t during second
    # t, with its totals by then: what was answered in second t is what the rows stamped t and t + 1 differ by
    served = centred_mean([served_by(row["time"] + 1) - served_by(row["time"]) for row in full], half_window)
    points: list[RatePoint] = []
    for row, offered_then, served_then in zip(full, offered, served):
        then = at(row["time"])
        points.append({"time": float(row["time"]), "offered": offered_then, "target": row["target_per_s"],
                       "served": served_then, "users": then["users"] if then else 0,
                       "p95_ms": then["p95_ms"] if then else None})
    return points


def find_rate_breakpoint(arrival_rows: Sequence[Mapping[str, Any]], series: Sequence[Mapping[str, Any]],
                         min_rate: float = 1.0, shortfall: float = 0.25, hold_s: int = 10) -> RateBreakpoint:
    """Where an open-model run stops keeping up, in visits/s, from rate_series.

    Visits arrive whatever the latency, so up to the knee every visit offered is served: served = offered,
    where the closed model's RPS per user has to be measured first. knee: the served rate falls `shortfall`
    below the offered one and stays below for hold_s seconds (once it had kept up: the first seconds' visits
    are still under way); the knee is then dated back as find_breakpoint dates it, to where the two straight
    lines of served against offered cross (knee_index), and its rate is that crossing's offered visits/s, the
    rest of its point observed at the first second offered as much from the first line's last point on (a held
    rate's: that point, the last second it was still served). Past the knee the queue that holds the
    visits the system cannot serve is what breaks the latency too: a saturated system's p95 rises from the
    same rate (the point's p95_ms). first_failure: the first second with a failed request, as
    find_breakpoint's (the load's seconds, users on and not stopping for good), read at that second's rates,
    or the last full second's when it came after it (of visits offered up to then). peak_served: the highest
    served rate."""
    points = rate_series(arrival_rows, series)
    result: RateBreakpoint = {"knee": None, "first_failure": None, "peak_served": None}
    if not points:
        return result
    short = [p["offered"] >= min_rate and p["served"] < (1 - shortfall) * p["offered"] for p in points]
    kept_up = next((i for i, p in enumerate(points) if p["offered"] >= min_rate and not short[i]), len(points))
    for i in range(kept_up, len(points)):
        if len(short[i:i + hold_s]) == hold_s and all(short[i:i + hold_s]):
            window = range(kept_up, i + hold_s)
            found = knee_split([points[j]["offered"] for j in window], [points[j]["served"] for j in window])
            assert found is not None  # the window holds hold_s seconds
            split, rate, _ = found
            # from the first line's last point on (a held rate's knee is that point: the rate does not move)
            last = window[split - 1]
            reached = next((j for j in range(last, i + hold_s) if points[j]["offered"] >= rate), last)
            result["knee"] = {**points[reached], "offered": round(rate, 1)}
            break
    result["peak_served"] = max(points, key=lambda p: p["served"])
    loaded = without_final_stop([s for s in series if s["users"] > 0])
    failing = next((s["time"] for s in loaded if s["failures"] > 0), None)
    if failing is not None:
        then = next((p for p in reversed(points) if p["time"] <= failing), points[0])
        result["first_failure"] = {**then, "time": failing}
    return result


def with_rate_breakpoint(breakpoint: Breakpoint, rate: RateBreakpoint,
                         requests_per_visit: int = REQUESTS_PER_VISIT) -> Breakpoint:
    """An open-model run's breakpoint: find_breakpoint's, its knee the moment of the knee in visits/s (the users
    then, and the requests served then), without a users' ratio (the load sizes its users to the rate), and the
    visits/s figures under `arrivals`."""
    knee = rate["knee"]
    return {**breakpoint, "healthy_rps_per_user": None, "arrivals": rate,
            "knee": {"time": knee["time"], "users": knee["users"], "rps": knee["served"] * requests_per_visit}
            if knee else None}


def first_failures(failure_rows: Iterable[Mapping[str, str]]) -> list[Failure]:
    """[(endpoint, error, occurrences)] most frequent first."""
    rows = [(r["Name"], r["Error"], int(r["Occurrences"])) for r in failure_rows]
    return sorted(rows, key=lambda r: -r[2])


# ---- server side: the platform samples ----------------------------------------------------------
def counter_rate(samples: Sequence[SampleRow],
                 get: Callable[[SampleRow], Any]) -> list[tuple[float, float | None]]:
    """[(time, per-second rate)] of a cumulative counter, None where it is missing."""
    rates = []
    for before, after in zip(samples, samples[1:]):
        a, b = get(before), get(after)
        dt = after["time"] - before["time"]
        rates.append((after["time"], (b - a) / dt if a is not None and b is not None and dt > 0 else None))
    return rates


def fn_field(name: str, key: str) -> Callable[[SampleRow], Any]:
    return lambda sample: ((sample.get("functions") or {}).get(name) or {}).get(key)


def store_field(key: str) -> Callable[[SampleRow], Any]:
    return lambda sample: (sample.get("store") or {}).get(key)


def server_series(samples: Sequence[SampleRow]) -> dict[str, Any]:
    """Time series for the plots and the report; every value may be None (missing on a platform)."""
    series: dict[str, Any] = {"time": [s["time"] for s in samples],
                              "backlog": [store_field("backlog")(s) for s in samples],
                              "writes_per_s": counter_rate(samples, store_field("stored")),
                              "accepted_per_s": counter_rate(samples, store_field("accepted")),
                              "functions": {}}
    for name in FUNCTIONS:
        series["functions"][name] = {
            "in_flight": [fn_field(name, "in_flight")(s) for s in samples],
            "queued": [fn_field(name, "queued")(s) for s in samples],
            "service_ms": [fn_field(name, "service_ms")(s) for s in samples],
            "r429_per_s": counter_rate(samples, fn_field(name, "responses_429")),
        }
    return series


def mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def during(samples: Iterable[S], start: float | None, end: float | None) -> list[S]:
    """The samples from start to end (every one without a start; load_window gives both ends or neither)."""
    if start is None or end is None:
        return list(samples)
    return [s for s in samples if start <= s["time"] <= end]


def server_by_function(samples: Sequence[SampleRow], start: float | None,
                       end: float | None) -> dict[str, ServerFigures]:
    """Per function during the load: mean service and queue time, most queued, 429s (counters diffed
    against the first sample of the run)."""
    window = during(samples, start, end)
    result: dict[str, ServerFigures] = {}
    for name in FUNCTIONS:
        first = fn_field(name, "responses_429")(samples[0]) if samples else None
        last = fn_field(name, "responses_429")(samples[-1]) if samples else None
        queued = [v for v in (fn_field(name, "queued")(s) for s in window) if v is not None]
        # a function with no request yet reports 0 ms: no figure, not a fast one
        served = [s for s in window if fn_field(name, "requests")(s) != 0]
        result[name] = {
            "service_ms": mean(fn_field(name, "service_ms")(s) for s in served),
            "service_ms_p95": mean(fn_field(name, "service_ms_p95")(s) for s in served),
            "queue_ms": mean(fn_field(name, "queue_ms")(s) for s in served),
            "max_queued": max(queued) if queued else None,
            "responses_429": last - first if first is not None and last is not None else None,
        }
    return result


def progress_field(samples: Iterable[SampleRow]) -> str:
    """The store's progress counter: `stored` (visits in Firestore) where the platform samples it,
    else `delivered` (push deliveries acknowledged, per minute on Google Cloud)."""
    return "stored" if any(store_field("stored")(s) is not None for s in samples) else "delivered"


def store_figures(samples: Sequence[SampleRow], load_start: float | None, load_end: float | None) -> Store:
    """Accept, delivery and store rates during the load, the store's throughput while it had a
    backlog, the backlog's peak and how fast it drained from there (the study's slope)."""
    in_load = lambda t: load_start is not None and load_end is not None and load_start <= t <= load_end  # noqa: E731

    def rate(field: str) -> float | None:
        return mean(r for t, r in counter_rate(samples, store_field(field)) if in_load(t))

    figures: Store = {"accepted_per_s": rate("accepted"), "delivered_per_s": rate("delivered"),
                      "writes_per_s": rate("stored"), "throughput_per_s": None,
                      "throughput_of": progress_field(samples), "backlog_peak": None, "backlog_peak_time": None,
                      "drain_per_s": None}
    backlog = {s["time"]: store_field("backlog")(s) for s in samples}
    progress = counter_rate(samples, store_field(figures["throughput_of"]))
    figures["throughput_per_s"] = mean(r for t, r in progress if (backlog.get(t) or 0) > 0)
    known = [(s["time"], store_field("backlog")(s)) for s in samples if store_field("backlog")(s) is not None]
    if known:
        peak_time, peak = max(known, key=lambda tb: tb[1])
        figures["backlog_peak"], figures["backlog_peak_time"] = peak, peak_time
        emptied = next((t for t, b in known if t > peak_time and b <= 0), None)
        if peak > 0 and emptied is not None:
            figures["drain_per_s"] = peak / (emptied - peak_time)
    return figures


# ---- convergence and the ledger -----------------------------------------------------------------
def convergence(polls: Sequence[tuple[float, Mapping[str, int]]], before: Mapping[str, int],
                acknowledged: Mapping[str, int], load_start: float | None, load_end: float | None) -> Convergence:
    """When the stored totals caught up with the acknowledged visits.

    polls: [(time, {page: stored total})] taken after the load. Converged at the first poll where
    every page's stored delta >= its acknowledged visits; extra minutes per minute of load as the study.
    """
    expected = {page: before.get(page, 0) + acknowledged.get(page, 0) for page in PAGES}
    converged_at = next((t for t, totals in polls
                         if all(totals.get(page, 0) >= expected[page] for page in PAGES)), None)
    load_s = (load_end - load_start) if load_start is not None and load_end is not None else None
    after_s = max(0.0, converged_at - load_end) if converged_at is not None and load_end is not None else None
    return {
        "converged": converged_at is not None,
        "converged_at": converged_at,
        "seconds_after_load": after_s,
        "load_seconds": load_s,
        "extra_minutes_per_minute": after_s / load_s if after_s is not None and load_s else None,
        "waited_seconds": polls[-1][0] - load_end if polls and load_end is not None else None,
    }


def visit_accounting(ledger: Mapping[str, Any], before: Mapping[str, int],
                     after: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """Per page and in total: what the client was told vs what was stored.

    refused (4xx, the platform's 429 included) was never published, so never stored. failed (5xx)
    and unanswered are ambiguous: an instance may die after publishing, a publish may land after
    the 503, so they may or may not be stored. lost: acknowledged but not stored; duplicated:
    stored beyond acknowledged + ambiguous (a visit counted twice); stored_unacknowledged: the
    ambiguous visits that were stored. rejected: every error answer (refused + failed).
    Older ledgers have only `rejected`, every error status alike: it is read as ambiguous, so no
    visit is called duplicated that a 5xx could explain.
    """
    split = "refused" in ledger or "failed" in ledger
    rows: dict[str, dict[str, int]] = {}

    def count(key: str, page: str) -> int:
        return ledger.get(key, {}).get(page, 0)

    for page in PAGES:
        sent, acked = count("sent", page), count("acknowledged", page)
        refused, failed = (count("refused", page), count("failed", page)) if split else (0, count("rejected", page))
        stored = after.get(page, 0) - before.get(page, 0)
        unanswered = max(0, sent - acked - refused - failed)
        ambiguous = failed + unanswered
        rows[page] = {"sent": sent, "acknowledged": acked, "refused": refused, "failed": failed,
                      "rejected": refused + failed, "unanswered": unanswered, "stored": stored,
                      "lost": max(0, acked - stored),
                      "stored_unacknowledged": max(0, min(stored - acked, ambiguous)),
                      "duplicated": max(0, stored - acked - ambiguous)}
    # Summed per page: a page that lost visits and one that counted some twice must not cancel out.
    rows["total"] = {key: sum(rows[page][key] for page in PAGES) for key in rows[PAGES[0]]}
    return rows

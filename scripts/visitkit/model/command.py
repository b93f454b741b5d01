"""What `visitkit predict` (scripts/predict) takes and prints: its options, and what the capacity and
cost model say for them. The iteration's settings, the profile and the sizing benchmark are handed in
(the profile is the twin's, the benchmark the benchmarks'), so the command line prints these lines and
`visitkit docs` writes them into a doc's `predict:` block from the same function.
"""
import argparse
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from visitkit.catalogue import QUEUE_TIMEOUT_S
from visitkit.model import capacity, cost, curve
from visitkit.model.fleet import fleet_lines, fleet_plan
from visitkit.settings import Settings, load_settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The predict command's options, on an argparse parser (the command line's subcommand, or the docs')."""
    parser.add_argument("iteration", type=Path, nargs="+",
                        help="iteration folders or settings files, each predicted in turn (with --write-profile: a "
                             "Google Cloud run's results folder)")
    parser.add_argument("--profile", default="study", help="service times: study (default), none or a profile file")
    parser.add_argument("--queue-timeout", type=float, default=QUEUE_TIMEOUT_S,
                        help="seconds queued before a 429 (default: %(default)g)")
    parser.add_argument("--minutes", type=float, default=15.0,
                        help="minutes of load past the knee, for the convergence time (default: 15)")
    parser.add_argument("--ramp", type=float, metavar="USERS_PER_S",
                        help="also print the convergence after a breakpoint adding this many users per second for "
                             "--minutes (the study's: 1)")
    parser.add_argument("--dwell", type=float, default=0.0, metavar="SECONDS",
                        help="how long a reader stays on each page, the page re-reading get-counter meanwhile "
                             "(default 0: the study's visitor, one read per page)")
    parser.add_argument("--hold", type=float, metavar="VISITS_PER_S",
                        help="also print the instances this many visits per second need (with --dwell), the knee "
                             "and the cost with them; with several iterations, which one holds it cheapest")
    parser.add_argument("--cost-at", type=float, metavar="VISITS_PER_S",
                        help="also print the bill of a month at this many visits per second (prices.json); with "
                             "several iterations, the cheapest of those that hold it")
    parser.add_argument("--cost-per-million", action="store_true",
                        help="what a million visits cost at the knee's rate, in the study's region and a US one")
    parser.add_argument("--cost-curve", type=Path, nargs="?", const=Path("cost-curve"), metavar="FOLDER",
                        help="price each iteration from 0.1 visits/s to its knee, a month and per million visits, in "
                             "--region: writes curves.json, curves.md (with the break-even rates) and curves.png "
                             "into FOLDER (default: ./cost-curve)")
    parser.add_argument("--free-tier", action="store_true",
                        help="with the costs: take Google's free tiers off (one project, one billing account, used by "
                             "nothing else)")
    parser.add_argument("--compare", type=Path, metavar="ITERATION",
                        help="with --cost-per-million: also price this iteration folder or settings file on the same "
                             "profile and dwell, and print the ratio")
    parser.add_argument("--region", default="southamerica-east1",
                        help="with --cost-at, --hold, --cost-curve or --fleet: the region whose prices apply "
                             "(default: the study's southamerica-east1)")
    parser.add_argument("--fleet", type=float, metavar="VISITS_PER_S",
                        help="also print the Locust fleet this many visits per second need (worker processes and VMs, "
                             "from a loadgen benchmark: --loadgen) and its cost per hour")
    parser.add_argument("--loadgen", metavar="FOLDER",
                        help="with --fleet: the sizing benchmark to read, a folder or its name in benchmarks/ "
                             "(default: the newest benchmarks/loadgen-*)")
    parser.add_argument("--worker-type", default="e2-standard-4",
                        help="with --fleet: the worker VMs' machine type (default e2-standard-4)")
    parser.add_argument("--write-profile", action="store_true",
                        help="write the profile a Google Cloud run measured (its metrics/request_latencies.csv)")
    parser.add_argument("--out", type=Path, help="with --write-profile: where (default: RESULTS_DIR/profile.json)")


def lines(options: argparse.Namespace, profile: capacity.LatencyProfile,
          chosen_loadgen: Callable[[str | None], tuple[Path, dict[str, Any]]]) -> Iterator[str]:
    """What predict prints for `options` (add_arguments' namespace), one printed piece at a time, so that a piece
    that fails comes after the ones before it: each iteration's (iteration_lines), then with several, which one
    holds --cost-at / --hold cheapest, then --cost-curve's table."""
    iterations = list(options.iteration)
    for folder in iterations:
        if len(iterations) > 1:
            yield f"== {folder} =="
        yield from iteration_lines(options, folder, load_settings(folder), profile, chosen_loadgen)
    if len(iterations) > 1 and (options.cost_at is not None or options.hold is not None):
        yield "\n".join(cheapest_lines(options, iterations, profile))
    if options.cost_curve is not None:
        priced = [curve.Priced(label(folder), settings, capacity.predict(settings, profile, dwell_s=options.dwell))
                  for folder in iterations for settings in [load_settings(folder)]]
        data = curve.write_curves(options.cost_curve, priced, cost.load_prices(), options.region, options.free_tier)
        yield "\n".join([f"cost curves in {options.region} (profile {profile.name}"
                         + (", free tiers taken off" if options.free_tier else ", list prices") + "):",
                         *curve.table_lines(data),
                         f"wrote {options.cost_curve / 'curves.md'}, curves.png and curves.json"])


def label(folder: Path) -> str:
    """An iteration's short name: its folder's (iteration-7), or a settings file's folder's."""
    return (folder.parent if folder.is_file() else folder).name


def cheapest_lines(options: argparse.Namespace, iterations: list[Path], profile: capacity.LatencyProfile) -> list[str]:
    """Which of the iterations holds the rate cheapest a month: --hold's rate with each one's instances raised to
    hold it, else --cost-at's as each is set (those whose knee is below it are named and left out)."""
    rate = options.hold if options.hold is not None else options.cost_at
    prices, bills, short = cost.load_prices(), {}, []
    for folder in iterations:
        settings = load_settings(folder)
        if options.hold is not None:
            plan = capacity.hold_plan(settings, profile, rate, options.dwell)
            settings, prediction = plan["settings"], plan["prediction"]
        else:
            prediction = capacity.predict(settings, profile, dwell_s=options.dwell)
        if prediction.knee_visits_per_s < rate:
            short.append(f"{label(folder)} (knee {prediction.knee_visits_per_s:,.0f})")
            continue
        bills[label(folder)] = cost.monthly_at(settings, prediction, rate, prices, options.region, options.free_tier)
    free = ", free tiers taken off" if options.free_tier else ""
    found = [f"a month at {rate:g} visits/s in {options.region}{free}, "
             + ("each with the instances it needs: " if options.hold is not None else "as set: ")
             + ", ".join(f"{name} {bill['total']:,.2f}" for name, bill in bills.items())
             + (f"; beyond {', '.join(short)}" if short else "")]
    if bills:
        name = min(bills, key=lambda n: bills[n]["total"])
        found.append(f"  cheapest: {name}, {bills[name]['total']:,.2f} {bills[name]['currency']} a month "
                     f"({largest_items(bills[name])})")
    else:
        found.append("  none of them holds it: try --hold to raise their instances")
    return found


def largest_items(estimate: dict[str, Any], count: int = 3) -> str:
    split = cost.by_service(estimate)
    return ", ".join(f"{service} {usd:,.2f}" for service, usd in sorted(split.items(), key=lambda p: -p[1])[:count])


def iteration_lines(options: argparse.Namespace, folder: Path, settings: Settings, profile: capacity.LatencyProfile,
                    chosen_loadgen: Callable[[str | None], tuple[Path, dict[str, Any]]]) -> Iterator[str]:
    """What predict prints for one iteration; `chosen_loadgen(folder)`: the sizing benchmark --loadgen names (None:
    the newest) as (folder, record), read only for --fleet."""
    prediction = capacity.predict(settings, profile, options.queue_timeout, options.minutes, dwell_s=options.dwell)
    free = ", free tiers taken off" if options.free_tier else ""
    yield "\n".join(capacity.report_lines(prediction, settings))
    if options.ramp is not None:
        ramp = capacity.breakpoint_convergence(prediction.as_dict(), options.ramp, options.minutes)
        yield (f"a breakpoint at +{options.ramp:g} users/s for {options.minutes:g} min: {ramp['backlog_at_end']:,.0f} "
               f"visits left at its end, stored {ramp['seconds_after_load'] / 60:.1f} min after it: "
               f"{ramp['extra_min_per_min']:.2f} extra minutes per minute of load")
    if options.fleet is not None:
        found_folder, record = chosen_loadgen(options.loadgen)
        plan = fleet_plan(options.fleet, options.worker_type, options.region, record)
        yield "\n".join(fleet_lines(plan, found_folder))
    if options.cost_per_million:
        compared = options.compare
        other = load_settings(compared) if compared else None
        for region in cost.PER_MILLION_REGIONS:
            knee_visits, found = cost.cost_per_million(settings, prediction, cost.load_prices(), region,
                                                           free_tier=options.free_tier)
            parts = ", ".join(f"{service} {usd:,.2f}" for service, usd in cost.by_service(found).items())
            yield (f"cost per million visits in {region} (Cloud Run Tier {found['tier']}), at the knee's "
                   f"{knee_visits:,.0f} visits/s: {found['total']:,.2f} {found['currency']} ({parts}; every instance "
                   f"full, profile {prediction.profile}, list prices of {found['as_of']}{free})")
            yield "  left out: " + "; ".join(found["left_out"])
            if other is not None:
                theirs = capacity.predict(other, profile, options.queue_timeout, options.minutes, dwell_s=options.dwell)
                their_knee, their_cost = cost.cost_per_million(other, theirs, cost.load_prices(), region,
                                                                   free_tier=options.free_tier)
                yield (f"  beside {compared}: {their_cost['total']:,.2f} {their_cost['currency']} at its knee's "
                       f"{their_knee:,.0f} visits/s; this costs {found['total'] / their_cost['total']:.2f} x that")
    if options.cost_at is not None:
        rate = min(options.cost_at, prediction.knee_visits_per_s)
        month = cost.monthly_at(settings, prediction, rate, cost.load_prices(), options.region, options.free_tier)
        beyond = (f" (it holds {rate:,.0f}, its knee: priced there)" if rate < options.cost_at else "")
        yield (f"cost of a month at {options.cost_at:g} visits/s{beyond} in {options.region} (Cloud Run Tier "
               f"{month['tier']}; list prices of {month['as_of']}{free}; each instance billed while it serves, "
               "rounded up, the min_instances idle otherwise):")
        yield "\n".join(f"  {item:32} {usage:72} {usd:10,.2f} {month['currency']}"
                        for item, usage, usd in month["lines"])
        per_million = f", {curve.per_million(month['total'], rate):,.2f} per million visits" if rate else ""
        yield f"  {'total':32} {'':72} {month['total']:10,.2f} {month['currency']} a month{per_million}"
        yield "  left out: " + "; ".join(month["left_out"])
    if options.hold is not None:
        yield "\n".join(hold_lines(settings, profile, options.hold, options.dwell, cost.load_prices(),
                                            options.region))


def hold_lines(settings: Settings, profile: capacity.LatencyProfile, visits_per_s: float, dwell_s: float,
               prices: Mapping[str, Any], region: str) -> list[str]:
    """What `visitkit predict --hold V` prints: the instances V visits/s need, the knee they give, and the cost."""
    plan = capacity.hold_plan(settings, profile, visits_per_s, dwell_s)
    held, p = plan["settings"], plan["prediction"]
    reader = f" with a {dwell_s:g} s dwell ({p.reads_per_visit} get-counter requests per visit)" if dwell_s else ""
    grown = ", ".join(f"{name} {new} instances x {held.functions[name].concurrency} ({old} now)"
                      for name, (old, new) in plan["raised"].items()) or "no function more instances"
    kept = [name for name in settings.functions if name not in plan["raised"]]
    lines = [f"to hold {visits_per_s:,.0f} visits/s{reader}: {grown}"
             + (f"; {', '.join(kept)} as set" if kept and plan["raised"] else ""),
             f"  with them: knee {p.knee_visits_per_s:,.0f} visits/s ({p.knee_rps:,.0f} RPS), "
             f"limited by {p.limited_by}; "
             f"{sum(f.max_instances for f in held.functions.values())} instances, "
             f"{sum(f.max_instances * float(f.effective_cpu) for f in held.functions.values()):g} vCPU at most"]
    for where in cost.PER_MILLION_REGIONS:
        _, found = cost.cost_per_million(held, p, prices, where, visits_per_s)
        parts = ", ".join(f"{service} {usd:,.2f}" for service, usd in cost.by_service(found).items())
        lines.append(f"  cost per million visits at that rate in {where}: {found['total']:,.2f} {found['currency']} "
                     f"({parts})")
    month = cost.monthly_at(held, p, visits_per_s, prices, region)
    lines.append(f"  cost of a month at {visits_per_s:,.0f} visits/s in {region}: {month['total']:,.2f} "
                 f"{month['currency']} ("
                 + ", ".join(f"{service} {usd:,.2f}" for service, usd in cost.by_service(month).items()) + ")")
    return lines

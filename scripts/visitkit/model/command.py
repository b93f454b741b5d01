"""What `visitkit predict` (scripts/predict) takes and prints: its options, and what the capacity and
cost model say for them. The iteration's settings, the profile and the sizing benchmark are handed in
(the profile is the twin's, the benchmark the benchmarks'), so the command line prints these lines and
`visitkit docs` writes them into a doc's `predict:` block from the same function.
"""
import argparse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from visitkit.catalogue import QUEUE_TIMEOUT_S
from visitkit.model import capacity, cost
from visitkit.model.fleet import fleet_lines, fleet_plan
from visitkit.settings import Settings, load_settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The predict command's options, on an argparse parser (the command line's subcommand, or the docs')."""
    parser.add_argument("iteration", type=Path, help="an iteration folder or settings file (with --write-profile: "
                                                     "a Google Cloud run's results folder)")
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
                             "and the cost with them")
    parser.add_argument("--cost-at", type=float, metavar="VISITS_PER_S",
                        help="also print the cost of one hour at this many visits per second (prices.json)")
    parser.add_argument("--cost-per-million", action="store_true",
                        help="what a million visits cost at the knee's rate, in the study's region and a US one")
    parser.add_argument("--compare", type=Path, metavar="ITERATION",
                        help="with --cost-per-million: also price this iteration folder or settings file on the same "
                             "profile and dwell, and print the ratio")
    parser.add_argument("--region", default="southamerica-east1",
                        help="with --cost-at, --hold or --fleet: the region whose prices apply (default: the "
                             "study's southamerica-east1)")
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


def lines(options: argparse.Namespace, settings: Settings, profile: capacity.LatencyProfile,
          chosen_loadgen: Callable[[str | None], tuple[Path, dict[str, Any]]]) -> Iterator[str]:
    """What predict prints for `options` (add_arguments' namespace), one printed piece at a time, so that
    a piece that fails comes after the ones before it; `chosen_loadgen(folder)`: the sizing benchmark
    --loadgen names (None: the newest) as (folder, record), read only for --fleet."""
    prediction = capacity.predict(settings, profile, options.queue_timeout, options.minutes, dwell_s=options.dwell)
    yield "\n".join(capacity.report_lines(prediction, settings))
    if options.ramp is not None:
        ramp = capacity.breakpoint_convergence(prediction.as_dict(), options.ramp, options.minutes)
        yield (f"a breakpoint at +{options.ramp:g} users/s for {options.minutes:g} min: {ramp['backlog_at_end']:,.0f} "
               f"visits left at its end, stored {ramp['seconds_after_load'] / 60:.1f} min after it: "
               f"{ramp['extra_min_per_min']:.2f} extra minutes per minute of load")
    if options.fleet is not None:
        folder, record = chosen_loadgen(options.loadgen)
        yield "\n".join(fleet_lines(fleet_plan(options.fleet, options.worker_type, options.region, record), folder))
    if options.cost_per_million:
        compared = options.compare
        other = load_settings(compared) if compared else None
        for region in cost.PER_MILLION_REGIONS:
            knee_visits, found = capacity.cost_per_million(settings, prediction, cost.load_prices(), region)
            parts = ", ".join(f"{service} {usd:,.2f}" for service, usd in cost.by_service(found).items())
            yield (f"cost per million visits in {region} (Cloud Run Tier {found['tier']}), at the knee's "
                   f"{knee_visits:,.0f} visits/s: {found['total']:,.2f} {found['currency']} ({parts}; instances packed "
                   f"to their concurrency, profile {prediction.profile}, list prices of {found['as_of']})")
            if other is not None:
                theirs = capacity.predict(other, profile, options.queue_timeout, options.minutes, dwell_s=options.dwell)
                their_knee, their_cost = capacity.cost_per_million(other, theirs, cost.load_prices(), region)
                yield (f"  beside {compared}: {their_cost['total']:,.2f} {their_cost['currency']} at its knee's "
                       f"{their_knee:,.0f} visits/s; this costs {found['total'] / their_cost['total']:.2f} x that")
    if options.cost_at is not None:
        prices = cost.load_prices()
        reads = capacity.count_reads_per_s(settings, options.cost_at, prediction.reads_per_visit)
        estimate = cost.hourly_at(settings, options.cost_at, prices, options.region, get_counter_reads_per_s=reads,
                                  get_counter_requests_per_visit=prediction.reads_per_visit)
        yield (f"cost of one hour at {options.cost_at:g} visits/s in {options.region} (Cloud Run Tier "
               f"{estimate['tier']}; an upper bound from list prices of {estimate['as_of']}: every instance billed all "
               "hour, no free tier):")
        yield "\n".join(f"  {item:32} {usage:60} {usd:10,.2f} {estimate['currency']}"
                        for item, usage, usd in estimate["lines"])
        yield f"  {'total':32} {'':60} {estimate['total']:10,.2f} {estimate['currency']} per hour"
        yield "  left out: " + "; ".join(estimate["left_out"])
        idle, total = cost.idle_hourly(settings, prices, options.region)
        if idle:
            yield (f"min_instances kept warm without a request: {total:,.2f} {estimate['currency']} per hour ("
                   + ", ".join(f"{name} {n} x {usd / n:,.3f}" for name, n, usd in idle) + ")")
    if options.hold is not None:
        yield "\n".join(capacity.hold_lines(settings, profile, options.hold, options.dwell, cost.load_prices(),
                                            options.region))

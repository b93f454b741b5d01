"""Sizing a Locust fleet from a load-generator benchmark's record (benchmarks/loadgen-*/benchmark.json,
written by visitkit.benchmarks.loadgen): the worker processes and VMs a rate of visits needs, what they
cost per hour at list prices (prices.json), and the Cloud NAT ports each VM needs for its users'
connections. Pure: the record and the prices are handed in.

A worker process is planned at

    plain HTTP's requests per core-second / TLS's CPU ratio x the share of a core where latency holds

all three measured in one benchmark run: the requests one core sends over plain HTTP on kept-alive
connections; the worker's CPU per request over HTTPS on kept-alive connections (the fleet's users keep
theirs to Google's front end) over that of plain HTTP; and, from a curve of the client's latency against
the worker's CPU as the offered rate steps up, the highest CPU at which latency still holds (HOLD_*).
"""
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from visitkit.errors import GcpError, VisitkitError
from visitkit.model import cost
from visitkit.paths import BENCHMARKS_DIR, ROOT

# The record this module reads: benchmarks/loadgen-*/benchmark.json, as visitkit.benchmarks.loadgen writes it
BENCHMARK_KIND, BENCHMARK_FORMAT, RECORD = "loadgen", 2, "benchmark.json"
REQUESTS_PER_VISIT = 3  # the study's visitor: the page, the visit, the counter
DEFAULT_WORKER_TYPE = "e2-standard-4"  # infra/loadgen/variables.tf's default
MASTER_TYPE = "e2-standard-2"  # infra/loadgen/variables.tf's default
# Latency holds at a step of the curve while its p95 is within HOLD_P95_MARGIN_MS of the lightest step's
# and it carried at least HOLD_ACHIEVED of the visits offered. 5 ms is under a tenth of what one request
# takes on Google Cloud (50-100 ms in the study's profile), and five of Locust's 1 ms buckets.
HOLD_P95_MARGIN_MS = 5.0
HOLD_ACHIEVED = 0.95
# Each user keeps a connection of its own to one Google front end, and Cloud NAT gives each
# connection to one destination a port of its own: room for a VM's planned users, and half again.
NAT_HEADROOM = 1.5
NAT_PORTS_RANGE = (1024, 65536)
# NAT is sized for the most users per request the suite runs: the study's visitor (the closed model),
# 3 requests per page every 4 s (3-5 s waits); the open model's arrivals need fewer (locust/arrivals.py).
VISITOR_REQUESTS_PER_S = REQUESTS_PER_VISIT / 4.0


def load_benchmark(folder: str | Path | None = None, out_root: str | Path = BENCHMARKS_DIR
                   ) -> tuple[Path, dict[str, Any]]:
    """A load-generator benchmark, (folder, record): `folder` (a path, or a folder's name in out_root), by
    default the newest benchmarks/loadgen-*; refused unless its record is one this module reads."""
    if folder is None:
        found = sorted(Path(out_root).glob(f"{BENCHMARK_KIND}-*/{RECORD}"))
        if not found:
            raise VisitkitError(f"no load-generator benchmark in {out_root}: run scripts/benchmark-loadgen")
        path = found[-1].parent
    else:
        path = Path(folder) if Path(folder).exists() else Path(out_root) / folder
    if not (path / RECORD).exists():
        raise VisitkitError(f"{path}: no {RECORD} (not a benchmark's results folder, or a run that failed)")
    record = json.loads((path / RECORD).read_text())
    if record.get("benchmark") != BENCHMARK_KIND:
        raise VisitkitError(f"{path / RECORD}: a {record.get('benchmark')} benchmark, not {BENCHMARK_KIND}")
    if record.get("format") != BENCHMARK_FORMAT:
        raise VisitkitError(f"{path / RECORD}: format {record.get('format')}, this kit reads {BENCHMARK_FORMAT}")
    return path, record


def scenario(record: Mapping[str, Any], name: str) -> dict[str, Any]:
    found = next((item for item in record["scenarios"] if item["name"] == name), None)
    if found is None:
        raise VisitkitError(f"the load-generator benchmark has no scenario {name!r}")
    return found


def planning(record: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario a fleet is sized by (HTTPS on kept-alive connections)."""
    return scenario(record, record["planning_scenario"])


def cpu_ratio(record: Mapping[str, Any], name: str) -> float:
    """The worker's CPU per request in scenario `name` over its CPU per request over plain HTTP (on
    kept-alive connections), in the same run: what TLS costs the worker."""
    plain = scenario(record, record["plain_scenario"])["requests_per_core_second"]
    return plain / scenario(record, name)["requests_per_core_second"]


def holding_step(record: Mapping[str, Any]) -> dict[str, Any]:
    """The highest step of the benchmark's curve up to which latency held at every step (HOLD_*)."""
    steps = sorted(record["curve"]["steps"], key=lambda step: step["offered_visits_per_s"])
    if not steps:
        raise VisitkitError("the load-generator benchmark's curve has no steps")
    lightest_p95, held = steps[0]["p95_ms"], None
    for step in steps:
        carried = step["rps"] >= HOLD_ACHIEVED * REQUESTS_PER_VISIT * step["offered_visits_per_s"]
        if not carried or step["p95_ms"] > lightest_p95 + HOLD_P95_MARGIN_MS:
            break
        held = step
    if held is None:
        raise VisitkitError("the load-generator benchmark's lightest step did not carry its visits: no share "
                            "of a core holds")
    return held


def holding_cpu_percent(record: Mapping[str, Any]) -> float:
    """The share of one core (in %) a worker process may use while its latency still holds: the worker's
    CPU at the curve's holding step. The share a fleet is planned at, and the live warning's threshold."""
    return float(holding_step(record)["worker_cpu_percent"])


def per_process_rps(record: Mapping[str, Any], name: str | None = None) -> float:
    """Requests/s one worker process is planned to send: plain HTTP's requests per core-second, over
    TLS's CPU ratio in scenario `name` (default: the planning scenario), at the holding share."""
    plain = scenario(record, record["plain_scenario"])["requests_per_core_second"]
    return plain / cpu_ratio(record, name or record["planning_scenario"]) * holding_cpu_percent(record) / 100


def machine(worker_type: str, prices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The price list's entry for a machine type (vCPUs, USD per hour by region)."""
    machines = (prices or cost.load_prices())["compute_engine"]["machines"]
    if worker_type not in machines:
        raise GcpError(f"scripts/visitkit/model/prices.json does not know machine type {worker_type!r} (it knows "
                       f"{', '.join(machines)}): add its vCPUs and prices from the source it names")
    return machines[worker_type]


def hourly_cost(workers: int, worker_type: str, region: str, prices: Mapping[str, Any] | None = None) -> float:
    """USD per hour of the fleet: its VMs and its NAT gateway (data processed through NAT apart)."""
    prices = prices or cost.load_prices()
    worker, master = machine(worker_type, prices), machine(MASTER_TYPE, prices)
    try:
        vms = workers * worker["usd_per_hour"][region] + master["usd_per_hour"][region]
    except KeyError:
        raise GcpError(f"scripts/visitkit/model/prices.json has no Compute Engine prices for region {region}") from None
    nat = prices["cloud_nat"]
    count = workers + 1
    nat_hourly = (count * nat["usd_per_vm_hour"] if count <= nat["vms_billed_at_most"] else nat["usd_per_hour_above"])
    return vms + nat_hourly


def planned_users(record: Mapping[str, Any]) -> float:
    """Users of the study's visitor one worker process carries at its planned load."""
    return per_process_rps(record) / VISITOR_REQUESTS_PER_S


def nat_ports(processes: int, record: Mapping[str, Any]) -> int:
    """Cloud NAT ports per VM for `processes` Locust workers at the benchmark's planned load (a
    power of two: Google rounds the figure up to one anyway)."""
    needed = NAT_HEADROOM * processes * planned_users(record)
    low, high = NAT_PORTS_RANGE
    return min(high, max(low, 2 ** math.ceil(math.log2(needed))))


def sized(rps: float, per_process: float, worker_type: str, region: str,
          prices: Mapping[str, Any] | None) -> dict[str, Any]:
    """Processes, worker VMs (one process per vCPU) and USD per hour for `rps` at `per_process` each."""
    processes = math.ceil(rps / per_process)
    vcpus = machine(worker_type, prices)["vcpus"]
    vms = math.ceil(processes / vcpus)
    return {"per_process_rps": per_process, "processes": processes, "vcpus": vcpus, "worker_vms": vms,
            "usd_per_hour": hourly_cost(vms, worker_type, region, prices)}


def fleet_plan(visits_per_s: float, worker_type: str = DEFAULT_WORKER_TYPE, region: str | None = None,
               record: Mapping[str, Any] | None = None, prices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What `visits_per_s` visits a second need: Locust worker processes, worker VMs of `worker_type`
    (one process per vCPU), the fleet's cost per hour; and the same if every request opened a new TLS
    connection (the benchmark's bound)."""
    if visits_per_s <= 0:
        raise VisitkitError("--fleet needs a rate of visits above 0")
    if record is None:
        raise VisitkitError("--fleet needs a load-generator benchmark's record (benchmarks/loadgen-*)")
    region = region or cost.DEFAULT_REGION
    rps = visits_per_s * REQUESTS_PER_VISIT
    plain, planned = record["plain_scenario"], record["planning_scenario"]
    new_connection = record["new_connection_scenario"]
    return {"visits_per_s": visits_per_s, "rps": rps, "worker_type": worker_type, "region": region,
            **sized(rps, per_process_rps(record), worker_type, region, prices),
            "plain_requests_per_core_second": scenario(record, plain)["requests_per_core_second"],
            "tls_cpu_ratio": cpu_ratio(record, planned), "holding_cpu_percent": holding_cpu_percent(record),
            "held_throughout": holding_step(record)["offered_visits_per_s"] == max(
                step["offered_visits_per_s"] for step in record["curve"]["steps"]),
            "new_connection_cpu_ratio": cpu_ratio(record, new_connection),
            "new_connection": sized(rps, per_process_rps(record, new_connection), worker_type, region, prices)}


def fleet_lines(plan: Mapping[str, Any], folder: str | Path) -> list[str]:
    folder = Path(folder).resolve()
    shown = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder  # benchmarks/... or elsewhere
    worst = plan["new_connection"]
    return [f"a Locust fleet for {plan['visits_per_s']:,g} visits/s ({plan['rps']:,.0f} requests/s, "
            f"{REQUESTS_PER_VISIT} per visit):",
            f"  one worker process sends {plan['per_process_rps']:,.0f} requests/s = "
            f"{plan['plain_requests_per_core_second']:,.0f} per core-second over plain HTTP / "
            f"{plan['tls_cpu_ratio']:.2f} (TLS's CPU per request on kept-alive connections, over plain's) x "
            f"{plan['holding_cpu_percent']:.0f}% of a core (the highest share at which the no-op's p95 latency held "
            f"within {HOLD_P95_MARGIN_MS:g} ms of the lightest load's"
            + ("; it held at every step, so the worker's limit lies beyond" if plan["held_throughout"] else "")
            + f"; {shown})",
            f"  {plan['processes']} worker processes = {plan['worker_vms']} x {plan['worker_type']} "
            f"({plan['vcpus']} vCPUs each) and a master {MASTER_TYPE}, in {plan['region']}",
            f"  about {plan['usd_per_hour']:.2f} USD per hour (VMs and the NAT gateway at list prices; "
            "scripts/visitkit/model/prices.json)",
            f"  if every request opened a new TLS connection (CPU {plan['new_connection_cpu_ratio']:.2f} x plain's): "
            f"{worst['processes']} processes = {worst['worker_vms']} x {plan['worker_type']}, about "
            f"{worst['usd_per_hour']:.2f} USD per hour",
            "  assumed, and settled only by a run on Google Cloud: one Locust process per vCPU, where a vCPU is one "
            "hyperthread (an e2-standard-4 is 2 physical cores; this kit's 2-vCPU machine reports one thread per "
            "core), and TLS to Google's front end costs the worker what TLS to HAProxy on loopback does",
            f"  the first fleet run's report shows it: health.csv (its Load generator section) gives each worker "
            f"process's CPU; at {plan['per_process_rps']:,.0f} requests/s a process above "
            f"{plan['holding_cpu_percent']:.0f}% means these figures were optimistic",
            f"  run it: scripts/run-iteration ITERATION --target gcp --project P --workers {plan['worker_vms']}"
            + (f" --worker-type {plan['worker_type']}" if plan['worker_type'] != DEFAULT_WORKER_TYPE else "")]

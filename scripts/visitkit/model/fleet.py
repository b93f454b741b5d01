"""Sizing a Locust fleet from a load-generator benchmark's record (benchmarks/loadgen-*/benchmark.json,
written by visitkit.benchmarks.loadgen): the worker processes and VMs a rate of visits needs, what they
cost per hour at list prices (prices.json), and the Cloud NAT ports each VM needs for its users'
connections. Pure: the record and the prices are handed in.
"""
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from visitkit.errors import GcpError, VisitkitError
from visitkit.model import cost
from visitkit.paths import ROOT

PLANNED_CPU = 0.7  # plan each worker process at 70 % of a core: headroom under Locust's 90 % warning
REQUESTS_PER_VISIT = 3  # the study's visitor: the page, the visit, the counter
DEFAULT_WORKER_TYPE = "e2-standard-4"  # infra/loadgen/variables.tf's default
MASTER_TYPE = "e2-standard-2"  # infra/loadgen/variables.tf's default
# Each user keeps a connection of its own to one Google front end, and Cloud NAT gives each
# connection to one destination a port of its own: room for a VM's planned users, and half again.
NAT_HEADROOM = 1.5
NAT_PORTS_RANGE = (1024, 65536)


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


def planning(record: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario a fleet is sized by."""
    return next(item for item in record["scenarios"] if item["name"] == record["planning_scenario"])


def planned_users(record: Mapping[str, Any]) -> float:
    """Users of the study's visitor one worker process carries at its planned load."""
    plan = planning(record)
    return plan["requests_per_core_second"] * record["planned_cpu"] * plan["users"] / plan["rps"]


def nat_ports(processes: int, record: Mapping[str, Any]) -> int:
    """Cloud NAT ports per VM for `processes` Locust workers at the benchmark's planned load (a
    power of two: Google rounds the figure up to one anyway)."""
    needed = NAT_HEADROOM * processes * planned_users(record)
    low, high = NAT_PORTS_RANGE
    return min(high, max(low, 2 ** math.ceil(math.log2(needed))))


def fleet_plan(visits_per_s: float, worker_type: str = DEFAULT_WORKER_TYPE, region: str | None = None,
               record: Mapping[str, Any] | None = None, prices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What `visits_per_s` visits a second need: Locust worker processes, worker VMs of `worker_type`
    (one process per vCPU), the fleet's cost per hour."""
    if visits_per_s <= 0:
        raise VisitkitError("--fleet needs a rate of visits above 0")
    if record is None:
        raise VisitkitError("--fleet needs a load-generator benchmark's record (benchmarks/loadgen-*)")
    region = region or cost.DEFAULT_REGION
    rps = visits_per_s * REQUESTS_PER_VISIT
    per_process = planning(record)["requests_per_core_second"] * record["planned_cpu"]
    processes = math.ceil(rps / per_process)
    vcpus = machine(worker_type, prices)["vcpus"]
    vms = math.ceil(processes / vcpus)
    return {"visits_per_s": visits_per_s, "rps": rps, "per_process_rps": per_process, "processes": processes,
            "worker_type": worker_type, "vcpus": vcpus, "worker_vms": vms, "region": region,
            "usd_per_hour": hourly_cost(vms, worker_type, region, prices)}


def fleet_lines(plan: Mapping[str, Any], folder: str | Path) -> list[str]:
    folder = Path(folder).resolve()
    shown = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder  # benchmarks/... or elsewhere
    return [f"a Locust fleet for {plan['visits_per_s']:,g} visits/s ({plan['rps']:,.0f} requests/s, "
            f"{REQUESTS_PER_VISIT} per visit):",
            f"  one worker process sends {plan['per_process_rps']:,.0f} requests/s at {PLANNED_CPU:.0%} of a core "
            f"({shown}, measured on this kit's machines; a cloud vCPU is a hyperthread, so check the run's Load "
            "generator section)",
            f"  {plan['processes']} worker processes = {plan['worker_vms']} x {plan['worker_type']} "
            f"({plan['vcpus']} vCPUs each) and a master {MASTER_TYPE}, in {plan['region']}",
            f"  about {plan['usd_per_hour']:.2f} USD per hour (VMs and the NAT gateway at list prices; "
            "scripts/visitkit/model/prices.json)",
            f"  run it: scripts/run-iteration ITERATION --target gcp --project P --workers {plan['worker_vms']}"
            + (f" --worker-type {plan['worker_type']}" if plan['worker_type'] != DEFAULT_WORKER_TYPE else "")]

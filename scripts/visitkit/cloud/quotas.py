"""The quotas a Google Cloud run's plan needs, checked by the preflight (preflight.py) before
anything is created: it stops where the plan exceeds one, naming the quota and how to ask for more.

- Cloud Run's regional CPU and memory allocation (run.googleapis.com, quotas
  CpuAllocPerProjectRegion in milli-vCPU and MemAllocPerProjectRegion in bytes) for the functions
  at their maximum instances. Cloud Run refuses to deploy a service whose max instances x cpu (or
  x memory) exceeds it ("Max instances must be set to N or fewer to set the requested total CPU.
  ... Quota violated: CpuAllocPerProjectRegion requested: 60000 allowed: 20000"), and counts the
  in-use instances of every service in the region against it ("These quotas are also accounted as
  a sum of all in-use resources in the region", https://cloud.google.com/run/docs/configuring/max-instances-limits;
  beyond it a request gets 503 "the project exceeded its quota limit for
  run.googleapis.com/cpu_allocation"). So the check is on the sum over the functions: past it they
  cannot all reach their maximum, and the run would measure the quota, not the system. The limit
  comes from the Cloud Quotas API (https://cloud.google.com/docs/quotas/reference/rest/v1/projects.locations.services.quotaInfos),
  which gives no usage: other Cloud Run services running in the region are not counted.
- Compute Engine's regional CPUs for a Locust fleet (its workers' and its master's vCPUs; E2 and N1
  machine types count against CPUS, quota CPUS-per-project-region; other series against their own,
  N2_CPUS, C2D_CPUS...). Read from Compute's regions.get, which gives the limit and the usage now
  (VMs already running count), so the judgement is on what is left; where the Compute Engine API
  is off in the project (a new one), no VM can be running there: the limit comes from Cloud
  Quotas and the usage is 0.
- Compute Engine's CPUs in all regions for the same fleet (CPUS_ALL_REGIONS in Compute's projects.get, with
  its usage; Cloud Quotas id CPUS-ALL-REGIONS-per-project where Compute is off): a project-wide cap
  beside the regional one, small in new and trial projects.

A quota that cannot be read (permission denied, an API off) is a note, not a stop: the apply then
meets Google's own quota error, which names the quota too.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from visitkit.errors import GcpError
from visitkit.model.fleet import MASTER_TYPE, machine
from visitkit.settings import MEMORY, MEMORY_BYTES

if TYPE_CHECKING:
    from google.cloud.cloudquotas_v1 import QuotaInfo

    from visitkit.settings import Settings

CONSOLE = "https://console.cloud.google.com/iam-admin/quotas?project={project}"  # the Quotas page
COMPUTE_API, RUN_API = "compute.googleapis.com", "run.googleapis.com"


@dataclass(frozen=True)
class Quota:
    service: str
    quota_id: str  # Cloud Quotas' id, as `gcloud quotas preferences create --quota-id` takes it
    title: str
    unit: str  # the quota's own unit, which the figures below are in
    compute_metric: str | None = None  # its name in Compute's regions.get quotas (Compute only)

    def whole(self, amount: float) -> float:
        """`amount` (in the quota's unit) in vCPUs or GiB, the units the kit shows and tune searches in."""
        if self.unit == "milli-vCPU":
            return amount / 1000
        if self.unit == "bytes":
            return amount / 2**30
        return amount

    def shown(self, amount: float) -> str:
        if self.unit == "milli-vCPU":
            return f"{self.whole(amount):,.3g} vCPUs"
        if self.unit == "bytes":
            return f"{self.whole(amount):,.1f} GiB"
        return f"{amount:,.0f} vCPUs"


EVERYWHERE = "global"  # the "region" of a project-wide quota
CPUS_ALL_REGIONS = Quota(COMPUTE_API, "CPUS-ALL-REGIONS-per-project", "Compute Engine CPUs in all regions", "vCPUs",
                         compute_metric="CPUS_ALL_REGIONS")
RUN_CPU = Quota(RUN_API, "CpuAllocPerProjectRegion", "Cloud Run CPU allocation", "milli-vCPU")
RUN_MEMORY = Quota(RUN_API, "MemAllocPerProjectRegion", "Cloud Run memory allocation", "bytes")


def compute_cpus(machine_type: str) -> Quota:
    """The regional CPU quota a machine type counts against: CPUS for E2 and N1, the series' own else."""
    series = machine_type.split("-", 1)[0].upper()
    prefix = "" if series in ("E2", "N1") else f"{series}_"
    return Quota(COMPUTE_API, prefix.replace("_", "-") + "CPUS-per-project-region",
                 f"Compute Engine {prefix}CPUS", "vCPUs", compute_metric=f"{prefix}CPUS")


@dataclass(frozen=True)
class Need:
    """What the plan needs of one quota in one region, in the quota's unit, and what makes it up."""
    quota: Quota
    region: str
    amount: float
    parts: str  # "serve-page 20 x 1 vCPU, ..."
    fix: str  # how the plan asks for less

    @property
    def where(self) -> str:
        return "across all regions" if self.region == EVERYWHERE else f"in region {self.region}"


@dataclass(frozen=True)
class Available:
    limit: float | None  # None: unlimited
    usage: float  # in use now; 0 where not read
    source: str  # where the figures come from, said in the message


# --- what the plan needs ----------------------------------------------------------------------------

def memory_bytes(memory: str) -> int:
    found = MEMORY.match(memory)
    if found is None:  # the settings file was checked on load
        raise GcpError(f"memory {memory!r} is not of the form 256M, 512Mi, 1G or 1Gi")
    return int(memory[:found.start(1)]) * MEMORY_BYTES[found[1]]


def function_needs(settings: Settings, region: str) -> list[Need]:
    """Cloud Run's CPU and memory allocation for every function at its maximum instances."""
    functions = settings.functions.items()
    fix = ("lower the functions' max_instances (or cpu, memory) in the settings file, or deploy to another region "
           "(--region)")
    cpu = [(name, f.max_instances, float(f.effective_cpu)) for name, f in functions]
    memory = [(name, f.max_instances, f.memory) for name, f in functions]
    return [Need(RUN_CPU, region, sum(n * c * 1000 for _, n, c in cpu),
                 ", ".join(f"{name} {n} x {c:g} vCPU" for name, n, c in cpu), fix),
            Need(RUN_MEMORY, region, sum(n * memory_bytes(m) for _, n, m in memory),
                 ", ".join(f"{name} {n} x {m}" for name, n, m in memory), fix)]


def fleet_needs(workers: int, worker_type: str, region: str,
                prices: Mapping[str, Any] | None = None) -> list[Need]:
    """Compute Engine's CPUs for a Locust fleet, its worker VMs and its master: in its region (by the quota of
    their series), and in all regions."""
    vms = [(worker_type, workers), (MASTER_TYPE, 1)]
    by_quota: dict[Quota, list[tuple[str, int]]] = {}
    for machine_type, count in vms:
        by_quota.setdefault(compute_cpus(machine_type), []).append((machine_type, count))
    fix = "run fewer --workers, or put the fleet in another region (--region, with the functions)"

    def need(quota: Quota, where: str, kinds: list[tuple[str, int]], fix: str) -> Need:
        return Need(quota, where, sum(count * machine(t, prices)["vcpus"] for t, count in kinds),
                    " and ".join(f"{count} x {t} ({machine(t, prices)['vcpus']} vCPUs)" for t, count in kinds)
                    + " (the Locust fleet)", fix)

    return [*(need(quota, region, kinds, fix) for quota, kinds in by_quota.items()),
            need(CPUS_ALL_REGIONS, EVERYWHERE, vms, "run fewer --workers")]


# --- what the project has -------------------------------------------------------------------------

def regional_limit(info: QuotaInfo, region: str) -> float | None:
    """The limit in force in `region`: the first dimensions info (Google orders them from the more
    specific to the less) whose dimensions all fit the region; one without any is the default.
    None where the value is -1 (unlimited)."""
    for dimensions_info in info.dimensions_infos:
        dimensions = dict(dimensions_info.dimensions)
        if all(key == "region" and value == region for key, value in dimensions.items()):
            value = int(dimensions_info.details.value)
            return None if value < 0 else float(value)
    raise GcpError(f"the quota {info.quota_id} of {info.service} gives no limit for region {region}")


def read(apis: Any, quota: Quota, region: str, patient: Callable[[Callable[[], Any]], Any] = lambda call: call()
         ) -> Available:
    """The quota's limit (and usage, where Google gives it) in `region`. `apis`: preflight.Apis."""
    from google.api_core import exceptions

    if quota.compute_metric is not None:
        try:  # not `patient`: Compute off is how a new project is, not an API still turning on
            quotas = apis.project_quotas() if region == EVERYWHERE else apis.region_quotas(region)
        except exceptions.GoogleAPICallError as error:
            if getattr(error, "reason", None) != "SERVICE_DISABLED":
                raise
        else:
            if quota.compute_metric in quotas:
                limit, usage = quotas[quota.compute_metric]
                method = "projects.get" if region == EVERYWHERE else "regions.get"
                return Available(limit, usage, f"Compute Engine {method}: limit and usage")
    info = patient(lambda: apis.quota_info(quota.service, quota.quota_id))
    usage_note = ("no VM running, the Compute Engine API being off" if quota.compute_metric is not None else
                  "usage not read: other Cloud Run services running in the region take from it too")
    return Available(regional_limit(info, region), 0.0, f"Cloud Quotas: limit; {usage_note}")


# --- the judgement --------------------------------------------------------------------------------

def request_more(project: str, need: Need, available: Available) -> str:
    """How to ask for enough: the console's Quotas page, or the gcloud command (Cloud Quotas)."""
    wanted = math.ceil(need.amount + available.usage)
    everywhere = need.region == EVERYWHERE
    return (f"ask for at least {wanted:,} {need.quota.unit} on the Quotas page ({CONSOLE.format(project=project)}, "
            f"filter by {need.quota.quota_id}{'' if everywhere else f' and region {need.region}'}) or with `gcloud "
            f"quotas preferences create --service={need.quota.service} --quota-id={need.quota.quota_id} "
            f"--preferred-value={wanted}{'' if everywhere else f' --dimensions=region={need.region}'} "
            f"--project={project} --email=YOUR_EMAIL`, which Google reviews "
            "(https://cloud.google.com/docs/quotas/help/request_increase)")


def excess(project: str, need: Need, available: Available) -> str | None:
    """One sentence where the need exceeds what is left of the quota, else None."""
    if available.limit is None or need.amount <= available.limit - available.usage:
        return None
    quota = need.quota
    in_use = f", {quota.shown(available.usage)} of it in use" if available.usage else ""
    return (f"{quota.title} ({quota.service} quota {quota.quota_id}) {need.where}: the plan needs "
            f"{quota.shown(need.amount)} ({need.parts}), the project allows {quota.shown(available.limit)}{in_use} "
            f"({available.source}). {need.fix[0].upper()}{need.fix[1:]}; or {request_more(project, need, available)}.")


READ_PERMISSION = "cloudquotas.quotas.get (the Quota Viewer role, roles/servicemanagement.quotaViewer, has it)"


def why_unread(error: BaseException) -> str:
    """Why a quota could not be read: Google's own words, without the request's URL."""
    return re.sub(r"^[A-Z]+ \S+: ", "", getattr(error, "message", None) or str(error)).rstrip(".")


def unread(need: Need, error: BaseException) -> str:
    """The note for a quota that could not be read."""
    return (f"the quota {need.quota.quota_id} ({need.quota.service}) in {need.region} could not be read "
            f"({why_unread(error)}); the plan needs {need.quota.shown(need.amount)} of it. Reading it takes "
            f"{READ_PERMISSION}; if the apply then stops on a quota, see docs/google-cloud.md (Quotas)")


def check(project: str, needs: Iterable[Need], available: Callable[[Quota, str], Available]) -> list[str]:
    """Stops (GcpError) where the plan exceeds a quota, naming each; returns the notes of the quotas
    that could not be read. available(quota, region) reads one (`read`, bound to the preflight's APIs)."""
    from google.api_core import exceptions

    found: list[str] = []
    notes: list[str] = []
    for need in needs:
        try:
            have = available(need.quota, need.region)
        except (exceptions.GoogleAPICallError, GcpError) as error:
            notes.append(unread(need, error))
            continue
        if (sentence := excess(project, need, have)) is not None:
            found.append(sentence)
    if found:
        raise GcpError(f"The plan exceeds project {project}'s quota, so nothing was created: " + " ".join(found))
    return notes


def describe(needs: Sequence[Need]) -> list[str]:
    """The quota check, for --dry-run."""
    return [f"quota {need.quota.quota_id} ({need.quota.service}) in {need.region}: the plan needs "
            f"{need.quota.shown(need.amount)} ({need.parts})" for need in needs]

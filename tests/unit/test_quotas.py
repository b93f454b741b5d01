"""The preflight's quota check (visitkit.cloud.quotas): what the plan needs of Cloud Run's regional CPU
and memory allocation and of Compute Engine's regional CPUs, read through Google's own client
libraries from the local recorded fake of Cloud Quotas and Compute's regions.get
(tests/integration/fake_google.py; its answers are checked against Google's schemas by
test_google_schemas.py). Nothing is created where the plan exceeds a quota; a quota that cannot be
read is a note. tune --project reads Cloud Run's allocation the same way (preflight.tune_quota)."""
import sys
from pathlib import Path

import pytest
from google.oauth2.credentials import Credentials

from visitkit.cloud import preflight, quotas
from visitkit.errors import GcpError
from visitkit.settings import load_settings

TESTS = Path(__file__).resolve().parents[1]
sys.path.append(str(TESTS / "integration"))  # the fake, a local HTTP server
from fake_google import FakeGoogle, Scenario  # noqa: E402

PROJECT = "visitkit-fake"
REGION = "southamerica-east1"  # the fixtures: 24 CPUs, 4 in use; Cloud Run 200 vCPUs, 400 GiB
ITERATION_5 = TESTS.parent / "iterations" / "iteration-5" / "settings.tfvars.json"
ON = preflight.READ_APIS + ("pubsub.googleapis.com", "compute.googleapis.com")


def run(scenario, needs):
    logged = []
    with FakeGoogle(scenario) as fake:
        apis = preflight.Apis(Credentials(token="user-token"), PROJECT, endpoint=fake.url)
        try:
            result = preflight.run(PROJECT, "public", apis=apis, which=lambda name: f"/usr/bin/{name}",
                                   sleep=lambda _s: None, log=logged.append, needs=needs)
        except GcpError as error:
            result = error
    return result, fake, logged


def created(fake):
    return [path for path in fake.mutations if "generateServiceIdentity" in path]


def functions(region=REGION):
    return quotas.function_needs(load_settings(ITERATION_5), region)


# --- what the plan needs --------------------------------------------------------------------------

def test_the_functions_need_their_maximum_instances_times_cpu_and_memory():
    cpu, memory = functions()
    # iteration 5: 20 + 20 + 30 + 40 instances, concurrency 80 so 1 vCPU each, 256M each
    assert (cpu.quota.quota_id, cpu.amount) == ("CpuAllocPerProjectRegion", 110 * 1000)
    assert (memory.quota.quota_id, memory.amount) == ("MemAllocPerProjectRegion", 110 * 256 * 10**6)
    assert "store-inc-counter 40 x 1 vCPU" in cpu.parts and cpu.region == REGION


def test_the_fleet_needs_its_workers_and_its_masters_vcpus_from_the_quota_of_their_series():
    cpus, everywhere = quotas.fleet_needs(7, "e2-standard-4", REGION)
    assert (cpus.quota.quota_id, cpus.quota.compute_metric, cpus.amount) == ("CPUS-per-project-region", "CPUS", 30)
    assert (everywhere.quota.compute_metric, everywhere.region, everywhere.amount) == ("CPUS_ALL_REGIONS", "global", 30)
    n2, master, everywhere = quotas.fleet_needs(3, "n2-standard-4", REGION)
    assert (n2.quota.quota_id, n2.quota.compute_metric, n2.amount) == ("N2-CPUS-per-project-region", "N2_CPUS", 12)
    assert (master.quota.quota_id, master.amount) == ("CPUS-per-project-region", 2)
    assert everywhere.amount == 14  # every series counts against the project's CPUs in all regions


# --- the judgement, through the client libraries and the fake --------------------------------------

def test_a_plan_under_the_quotas_passes_and_reads_compute_with_its_usage():
    needs = functions() + quotas.fleet_needs(4, "e2-standard-4", REGION)  # 18 vCPUs of the 20 left
    result, fake, logged = run(Scenario(enabled=ON), needs)
    assert isinstance(result, preflight.Preflight), result
    assert result.notes == () and created(fake)
    assert f"/compute/v1/projects/{PROJECT}/regions/{REGION}" in fake.paths()
    assert not any("CPUS-per-project-region" in path for path in fake.paths())  # Compute's own figures


def test_a_fleet_over_what_is_left_of_the_cpu_quota_stops_before_anything_is_created():
    # 5 x 4 + 2 = 22 vCPUs: under the limit of 24, over the 20 left with 4 in use
    result, fake, _ = run(Scenario(enabled=ON), functions() + quotas.fleet_needs(5, "e2-standard-4", REGION))
    assert isinstance(result, GcpError) and created(fake) == []
    message = str(result)
    assert "\n" not in message
    for words in ("Compute Engine CPUS", "compute.googleapis.com quota CPUS-per-project-region",
                  f"in region {REGION}", "needs 22 vCPUs", "5 x e2-standard-4 (4 vCPUs) and 1 x e2-standard-2",
                  "allows 24 vCPUs, 4 vCPUs of it in use", "Run fewer --workers",
                  f"https://console.cloud.google.com/iam-admin/quotas?project={PROJECT}",
                  "gcloud quotas preferences create --service=compute.googleapis.com "
                  f"--quota-id=CPUS-per-project-region --preferred-value=26 --dimensions=region={REGION} "
                  f"--project={PROJECT}"):
        assert words in message, (words, message)
    assert "Cloud Run" not in message  # the functions fit


def test_functions_over_cloud_runs_allocation_stop_with_both_quotas_named():
    result, fake, _ = run(Scenario(enabled=ON), functions("us-central1"))  # its default: 20 vCPUs, 40 GiB
    assert isinstance(result, GcpError) and created(fake) == []
    message = str(result)
    assert "Cloud Run CPU allocation (run.googleapis.com quota CpuAllocPerProjectRegion) in region us-central1: " \
           "the plan needs 110 vCPUs" in message
    assert "allows 20 vCPUs (Cloud Quotas: limit; usage not read" in message
    assert "--quota-id=CpuAllocPerProjectRegion --preferred-value=110000 --dimensions=region=us-central1" in message
    assert "lower the functions' max_instances" in message.lower()
    assert "MemAllocPerProjectRegion" not in message  # 28.2 GB of 40 GiB fits


def test_a_region_without_a_dimension_of_its_own_gets_the_quotas_default():
    with FakeGoogle(Scenario(enabled=ON)) as fake:
        apis = preflight.Apis(Credentials(token="user-token"), PROJECT, endpoint=fake.url)
        own = quotas.read(apis, quotas.RUN_CPU, REGION)
        default = quotas.read(apis, quotas.RUN_CPU, "europe-west9")  # listed nowhere: the entry without dimensions
    assert (own.limit, default.limit) == (200_000, 20_000)


def test_with_compute_off_the_cpu_limit_comes_from_cloud_quotas_and_nothing_is_in_use():
    # a new project: Compute Engine's API off, so no VM runs; 24 CPUs by default there
    off = tuple(api for api in ON if api != "compute.googleapis.com")
    result, fake, _ = run(Scenario(enabled=off), quotas.fleet_needs(6, "e2-standard-4", REGION))  # 26 vCPUs
    assert isinstance(result, GcpError) and created(fake) == []
    assert "needs 26 vCPUs" in str(result) and "allows 24 vCPUs (Cloud Quotas: limit; no VM running" in str(result)
    result, _, _ = run(Scenario(enabled=off), quotas.fleet_needs(5, "e2-standard-4", REGION))  # 22: fits
    assert isinstance(result, preflight.Preflight) and result.notes == ()


def test_a_quota_api_that_refuses_is_a_note_and_the_run_goes_on():
    off = tuple(api for api in ON if api != "compute.googleapis.com")
    result, fake, logged = run(Scenario(enabled=off, errors={"cloudquotas": "error-quotas-denied"}),
                               functions() + quotas.fleet_needs(5, "e2-standard-4", REGION))
    assert isinstance(result, preflight.Preflight), result
    assert len(result.notes) == 4 and created(fake)  # each quota said, then the run goes on
    assert "the quota CpuAllocPerProjectRegion (run.googleapis.com) in southamerica-east1 could not be read " \
           "(Permission 'cloudquotas.quotas.get' denied" in result.notes[0]
    assert any("preflight: the quota CPUS-per-project-region" in line for line in logged)


def test_a_quota_api_still_turning_on_is_waited_for_then_read():
    scenario = Scenario(enabled=ON, errors={"cloudquotas": "error-crm-disabled"})  # SERVICE_DISABLED, once
    scenario.errors_left["cloudquotas"] = 1
    scenario.enabled.discard("cloudquotas.googleapis.com")  # so the preflight turns it on, and waits for it
    result, fake, _ = run(scenario, functions("us-central1"))
    assert isinstance(result, GcpError) and "CpuAllocPerProjectRegion" in str(result)


def test_the_dry_run_names_the_check():
    assert any("Cloud Quotas" in line and "ask for more" in line for line in preflight.describe(PROJECT, "public"))
    lines = quotas.describe(functions())
    assert lines[0].startswith(f"quota CpuAllocPerProjectRegion (run.googleapis.com) in {REGION}: the plan needs 110")


@pytest.mark.parametrize("limit, usage, need, exceeds",
                         [(24, 4, 20, False), (24, 4, 21, True), (None, 0, 10**9, False)])
def test_the_judgement_is_on_what_is_left(limit, usage, need, exceeds):
    cpus = quotas.fleet_needs(1, "e2-standard-2", REGION)[0]
    need = quotas.Need(cpus.quota, REGION, need, cpus.parts, cpus.fix)
    assert (quotas.excess(PROJECT, need, quotas.Available(limit, usage, "test")) is not None) == exceeds


def test_the_gcp_targets_preflight_is_given_the_functions_and_the_fleets_needs_in_its_region():
    from visitkit.cloud.gcp import GcpTarget

    seen = []
    target = GcpTarget(load_settings(ITERATION_5), ITERATION_5.parent, "p1", region="us-east1", log=lambda *_: None,
                       preflight=lambda project, access, credentials, before_creating, needs: seen.extend(needs))
    target.fleet_vms = (7, "e2-standard-4")  # as fleetrun.fleet_steps sets it
    target._check()
    assert [(need.quota.quota_id, need.region, need.amount) for need in seen] == [
        ("CpuAllocPerProjectRegion", "us-east1", 110_000), ("MemAllocPerProjectRegion", "us-east1", 110 * 256 * 10**6),
        ("CPUS-per-project-region", "us-east1", 30), ("CPUS-ALL-REGIONS-per-project", "global", 30)]


def test_a_fleet_over_the_projects_cpus_in_all_regions_stops_though_its_region_has_room():
    # the region allows 40 (4 in use); the project 32 in all regions, 4 in use: 7 x 4 + 2 = 30 > 28 left
    scenario = Scenario(enabled=ON, regions={REGION: "region-southamerica-east1"})
    with FakeGoogle(scenario) as fake:
        apis = preflight.Apis(Credentials(token="user-token"), PROJECT, endpoint=fake.url)
        regional, everywhere = quotas.fleet_needs(7, "e2-standard-4", REGION)
        found = quotas.read(apis, everywhere.quota, everywhere.region)
        paths = fake.paths()
    assert (found.limit, found.usage) == (32, 4) and "projects.get" in found.source
    assert f"/compute/v1/projects/{PROJECT}" in paths
    message = quotas.excess(PROJECT, everywhere, found)
    assert message is not None and "Compute Engine CPUs in all regions" in message and "across all regions" in message
    assert "--quota-id=CPUS-ALL-REGIONS-per-project --preferred-value=34 --project=" in message
    assert "--dimensions" not in message
    assert quotas.excess(PROJECT, regional, quotas.Available(40, 4, "test")) is None


def test_with_compute_off_the_projects_cpus_come_from_cloud_quotas():
    off = tuple(api for api in ON if api != "compute.googleapis.com")
    with FakeGoogle(Scenario(enabled=off)) as fake:
        apis = preflight.Apis(Credentials(token="user-token"), PROJECT, endpoint=fake.url)
        found = quotas.read(apis, quotas.CPUS_ALL_REGIONS, quotas.EVERYWHERE)
    assert (found.limit, found.usage) == (32, 0) and found.source.startswith("Cloud Quotas")


# --- tune --project: Cloud Run's allocation read the same way ----------------------------------------

@pytest.fixture(scope="module")
def google():
    """One fake for the tune tests (each fake makes a key, which takes a while); each test sets its scenario."""
    with FakeGoogle(Scenario(enabled=ON)) as fake:
        yield fake


def tune_quota(google, region, **scenario):
    google.scenario = Scenario(enabled=ON, **scenario)
    apis = preflight.Apis(Credentials(token="user-token"), PROJECT, endpoint=google.url)
    return preflight.tune_quota(PROJECT, region, apis)


def test_tune_reads_cloud_runs_cpu_and_memory_allocation_in_vcpus_and_gib_and_turns_nothing_on(google):
    before = len(google.requests)
    own, notes = tune_quota(google, REGION)  # the fixtures: 200,000 milli-vCPU and 400 GiB in bytes there
    assert (own.vcpu, own.memory_gib, own.vcpu_from, own.memory_from) == (200, 400, f"read from project {PROJECT}",
                                                                          f"read from project {PROJECT}")
    assert notes == [] and not own.assumed
    default, _ = tune_quota(google, "us-central1")  # the entry without dimensions: read, so not ASSUMED
    assert (default.vcpu, default.memory_gib, default.assumed) == (20, 40, False)
    assert google.mutations == []
    read = {path.split("?")[0].split("/quotaInfos/")[-1] for path in google.paths()[before:]}
    assert read == {"CpuAllocPerProjectRegion", "MemAllocPerProjectRegion"}  # Cloud Quotas alone


@pytest.mark.parametrize("error, words", [
    ("error-quotas-denied", "Permission 'cloudquotas.quotas.get' denied"),  # no Quota Viewer role
    ("error-crm-disabled", "has not been used in project 123456789012 before or it is disabled"),  # the API off
])
def test_a_quota_tune_cannot_read_is_a_note_and_the_assumed_default_stays(google, error, words):
    quota, notes = tune_quota(google, REGION, errors={"cloudquotas": error})
    assert quota.shown() == "20 vCPUs and 40 GiB (ASSUMED)"
    assert len(notes) == 1  # Google's same words for both: one note naming both
    assert notes[0].startswith(f"Cloud Run's CpuAllocPerProjectRegion and MemAllocPerProjectRegion in {REGION} could "
                               f"not be read from project {PROJECT} (")
    assert words in notes[0] and "roles/servicemanagement.quotaViewer" in notes[0]


KNOWN = Scenario().quota_infos


@pytest.mark.parametrize("scenario, shown, unread", [
    ({"errors": {"cloudquotas": "error-quotas-denied"}, "errors_left": {"cloudquotas": 1}},  # the CPU's read refused
     f"20 vCPUs (ASSUMED) and 400 GiB (read from project {PROJECT})", "CpuAllocPerProjectRegion"),
    ({"quota_infos": {k: v for k, v in KNOWN.items() if k != "MemAllocPerProjectRegion"}},  # the memory's unknown
     f"200 vCPUs (read from project {PROJECT}) and 40 GiB (ASSUMED)", "MemAllocPerProjectRegion"),
])
def test_one_quota_read_and_one_not_keep_their_own_sources(google, scenario, shown, unread):
    quota, notes = tune_quota(google, REGION, **scenario)
    assert quota.shown() == shown
    assert len(notes) == 1 and notes[0].startswith(f"Cloud Run's {unread} in {REGION} could not be read")


def test_without_credentials_tune_notes_it_and_assumes(monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/application_default_credentials.json")
    quota, notes = preflight.tune_quota(PROJECT, REGION)
    assert quota.shown() == "20 vCPUs and 40 GiB (ASSUMED)"
    assert len(notes) == 1 and "(No application-default credentials were found: run `gcloud auth " \
                               "application-default login`)" in notes[0]


def test_an_unlimited_allocation_is_unlimited_for_tune():
    import json

    from google.cloud.cloudquotas_v1 import QuotaInfo

    from visitkit.rehearsal.google import recorded

    class Unlimited:  # Cloud Quotas' value -1 (QuotaDetails: unlimited) for the region, as the library parses it
        def quota_info(self, service, quota_id):
            answer = recorded("quota-run-cpu" if quota_id == quotas.RUN_CPU.quota_id else "quota-run-memory")
            answer["dimensionsInfos"][0]["details"]["value"] = "-1"
            return QuotaInfo.from_json(json.dumps(answer))

    quota, notes = preflight.tune_quota(PROJECT, REGION, Unlimited())
    assert quota.shown() == f"unlimited vCPUs and unlimited GiB (read from project {PROJECT})" and notes == []

"""The Locust fleet on Google Cloud (visitkit.cloud.fleet), offline: terraform and the bucket are fakes."""
import json
import subprocess
from types import SimpleNamespace
from pathlib import Path

import pytest
from fakes import FakeClock

from visitkit.benchmarks import loadgen
from visitkit.cloud import fleet as fleets
from visitkit.errors import GcpError
from visitkit.model.fleet import hourly_cost, nat_ports
from visitkit.results.folder import ResultsFolder
from visitkit.runs import fleetrun
from visitkit.runs.config import LoadPlan, RunConfig
from visitkit.runs.state import RunState
from visitkit.runs.targets import UrlTarget
from visitkit.steps import run_steps

LOADGEN = loadgen.latest()[1]  # the newest committed sizing benchmark, as the runner hands it in


class FakeRun:
    def __init__(self, outputs=None, state=""):
        self.calls, self.outputs = [], outputs or {"bucket": "p-visitkit-loadgen", "ssh_master": "gcloud compute ssh m"}
        self.state = state  # `terraform state list`: what an earlier run left

    def __call__(self, argv, check=False, text=True, capture_output=False, echo=True):
        self.calls.append(argv)
        stdout = json.dumps({k: {"value": v} for k, v in self.outputs.items()}) if argv[2] == "output" else ""
        stdout = self.state if argv[2] == "state" else stdout
        return subprocess.CompletedProcess(argv, 0, stdout, "")

    def verbs(self):
        return [argv[2] for argv in self.calls]


class FakeBlob:
    def __init__(self, bucket, name):
        self.bucket, self.name = bucket, name

    def exists(self):
        return self.name in self.bucket.files

    def download_as_text(self):
        return self.bucket.files[self.name]

    def download_to_filename(self, path):
        Path(path).write_text(self.bucket.files[self.name])


class FakeBucket:
    def __init__(self, files=None, appear_after=0):
        self.files, self.polls, self.appear_after, self.later = {}, 0, appear_after, files or {}

    def blob(self, name):
        self.polls += 1
        if self.polls > self.appear_after:
            self.files.update(self.later)
        return FakeBlob(self, name)

    def list_blobs(self, prefix):
        return [FakeBlob(self, name) for name in sorted(self.files) if name.startswith(prefix)]


def make_fleet(tmp_path, bucket=None, access="public", workers=3, run=None):
    clock = FakeClock()
    return fleets.Fleet("p", "southamerica-east1", workers, "e2-standard-4", access, "breakpoint-1", loadgen_record=LOADGEN,
                        run=run or FakeRun(), bucket=bucket, now=clock.now, sleep=clock.sleep, log=lambda *_: None,
                        stage_root=tmp_path)


def test_the_fleet_runs_one_locust_worker_per_vcpu_and_costs_its_vms_and_nat():
    fleet = fleets.Fleet("p", "us-central1", 10, "e2-standard-8", loadgen_record=LOADGEN)
    assert fleet.processes == 8 and fleet.expect_workers == 80
    # 10 x e2-standard-8 + an e2-standard-2 master, and NAT for 11 VMs, in us-central1 (prices.json)
    assert hourly_cost(10, "e2-standard-8", "us-central1") == pytest.approx(
        10 * 0.26804568 + 0.06701142 + 11 * 0.0014)
    assert hourly_cost(40, "e2-standard-4", "us-central1") == pytest.approx(
        40 * 0.13402284 + 0.06701142 + 0.044)  # NAT's hourly price stops growing above 32 VMs
    with pytest.raises(GcpError, match="does not know machine type"):
        fleets.Fleet("p", "us-central1", 1, "m9-huge-1", loadgen_record=LOADGEN)
    with pytest.raises(GcpError, match="needs --project"):
        fleets.Fleet(None, "us-central1", 1, loadgen_record=LOADGEN)


def test_the_stage_holds_the_suite_the_modules_it_imports_and_its_options(tmp_path):
    fleet = make_fleet(tmp_path, access="authenticated")
    stages = tmp_path / "my-stages.csv"
    stages.write_text("users,hold_s\n100,60\n")
    load = LoadPlan.build("endurance", stages=str(stages), workers=3, local=False)
    staged = fleet.stage(load, "https://system")
    for name in ("locust/node.py", "locust/locustfile.py", "locust/ledger.py", "locust/health.py", "locust/shapes.py",
                 "visitkit/cloud/idtoken.py", "visitkit/cloud/credentials.py", "stages.csv", "run.conf"):
        assert (staged / name).is_file(), name
    assert not list(staged.rglob("__pycache__"))
    conf = (staged / "run.conf").read_text()
    assert "host = https://system\n" in conf and "stages = stages.csv\n" in conf and "auth = id-token\n" in conf
    assert "impersonate" not in conf  # a VM mints its own account's tokens
    assert not (staged / "requirements.txt").exists()  # the VMs install infra/loadgen's lock (test_fleet_lock.py)
    assert fleet.invoked_services == ["app", "get-counter", "inc-counter"]


def test_the_fleets_tokens_name_each_functions_run_app_url_whatever_host_it_loads(tmp_path):
    """Behind edge_protection the host is the load balancer's: each token's audience is its function's
    run.app URL (the deployment's function_audiences), which the staged run.conf hands every worker."""
    from visitkit.runs.fleetrun import provision_fleet

    fleet = make_fleet(tmp_path, access="authenticated")
    audiences = {"serve-page": "https://app-123456789012.southamerica-east1.run.app"}
    target = SimpleNamespace(deployed_region=None, access="authenticated", audiences=audiences,
                             base_url="https://edge.example.com")
    state = SimpleNamespace(fleet=fleet, target=target, record={}, folder=SimpleNamespace(save_run=lambda _r: None),
                            config=SimpleNamespace(load=LoadPlan.build("breakpoint", workers=3, local=False)))
    fleet.provision = lambda: None  # staging is what this test reads; provisioning is Terraform's (tested above)
    provision_fleet(state)
    conf = (fleet.stage_dir / "run.conf").read_text()
    assert "host = https://edge.example.com\n" in conf
    assert json.dumps(audiences, sort_keys=True) in conf


def test_provision_applies_infra_loadgen_with_the_fleets_variables_and_reads_its_outputs(tmp_path):
    run = FakeRun()
    fleet = make_fleet(tmp_path, run=run)
    fleet.provision()
    assert run.verbs() == ["init", "state", "apply", "output"]
    apply = run.calls[2]
    assert apply[1] == f"-chdir={fleets.LOADGEN_DIR}"
    assert {"-var=workers=3", "-var=processes_per_worker=4", "-var=worker_machine_type=e2-standard-4",
            f"-var=run_dir={tmp_path / 'breakpoint-1' / 'run'}", "-var=invoked_services=[]"} <= set(apply)
    assert fleet.outputs["bucket"] == "p-visitkit-loadgen"


def test_the_kit_waits_for_the_masters_exit_code_then_copies_its_files(tmp_path):
    bucket = FakeBucket({"results/exit-code": "0\n", "results/ledger.json": "{}", "results/locust_stats.csv": "x",
                         "run/run.conf": "no", "results/sub/x": "no"}, appear_after=4)
    fleet = make_fleet(tmp_path, bucket)
    assert fleet.wait_for_results(timeout=600) == 0 and bucket.polls == 5
    out = tmp_path / "out"
    out.mkdir()
    assert sorted(fleet.collect(out)) == ["ledger.json", "locust_stats.csv"]
    assert (out / "ledger.json").read_text() == "{}"


def test_a_master_that_never_reports_ends_the_wait_with_where_to_look(tmp_path):
    fleet = make_fleet(tmp_path, FakeBucket())
    with pytest.raises(GcpError, match="no exit code within 100 s.*fleet-logs/; --keep-fleet"):
        fleet.wait_for_results(timeout=100)


def test_the_fleet_is_destroyed_after_a_failed_run_too(tmp_path, monkeypatch):
    run = FakeRun()
    fleet = make_fleet(tmp_path, FakeBucket({"logs/master.log": "boot"}), run=run)
    iteration = tmp_path / "iteration-4"
    iteration.mkdir()
    (iteration / "settings.tfvars.json").write_text((fleets.ROOT / "iterations" / "iteration-4" /
                                                     "settings.tfvars.json").read_text())
    config = RunConfig.build(iteration, "breakpoint", target="https://system", workers=3, project="p",
                             duration="60s")
    folder = ResultsFolder(tmp_path / "results" / "breakpoint-1")
    folder.create()
    target = UrlTarget("https://system", config.settings)
    state = RunState(config, folder, target, lambda *_: None, {"notes": []}, fleet=fleet)
    steps = fleetrun.fleet_steps(config, folder, target, fleet)
    monkeypatch.setattr(fleetrun, "fleet_timeout", lambda load: 30)  # the master never answers: fail fast
    try:
        with pytest.raises(GcpError, match="no exit code"):
            run_steps(steps, state, log=lambda *_: None)
    finally:
        state.sampler and state.sampler.stop()
    assert run.verbs() == ["init", "state", "apply", "output", "destroy"]
    assert not (tmp_path / "breakpoint-1").exists()  # the staged files are gone with the fleet
    assert (folder.path / "fleet-logs" / "master.log").read_text() == "boot"  # read before the VMs went


def test_a_fleet_left_by_an_earlier_run_is_destroyed_rather_than_read(tmp_path):
    run = FakeRun(state="google_compute_instance.master\ngoogle_storage_bucket.run\n")
    fleet = make_fleet(tmp_path, FakeBucket({"results/exit-code": "0"}), run=run)
    with pytest.raises(GcpError, match="still up \\(2 resources.*destroyed now"):
        fleet.provision()
    assert run.verbs() == ["init", "state"] and fleet.provisioning  # the destroy step will run


def test_a_first_fleet_provisions_though_terraform_has_no_state_file_yet(tmp_path):
    class NoStateYet(FakeRun):  # Terraform's `state list` before any apply
        def __call__(self, argv, **options):
            if argv[2] != "state":
                return super().__call__(argv, **options)
            self.calls.append(argv)
            return subprocess.CompletedProcess(argv, 1, "", "No state file was found!\n")

    run = NoStateYet()
    fleet = make_fleet(tmp_path, FakeBucket(), run=run)
    fleet.provision()
    assert run.verbs() == ["init", "state", "apply", "output"]


def test_a_staging_that_fails_leaves_nothing_to_destroy(tmp_path, monkeypatch):
    run = FakeRun()
    fleet = make_fleet(tmp_path, run=run)
    monkeypatch.setattr(fleets, "suite_pins", lambda: (_ for _ in ()).throw(GcpError("no pins")))
    state = RunState(None, None, type("T", (), {"base_url": "https://s"})(), lambda *_: None, {"notes": []},
                            fleet=fleet)
    with pytest.raises(GcpError):
        fleet.stage(LoadPlan("breakpoint"), "https://s")
    fleetrun.destroy_fleet(state)
    assert run.verbs() == [] and not (tmp_path / "breakpoint-1").exists()


def test_nat_gives_each_vm_a_port_per_planned_user_connection_and_half_again():
    step = {"offered_visits_per_s": 100, "rps": 300, "worker_cpu_percent": 70, "p95_ms": 2}
    record = {"plain_scenario": "study", "planning_scenario": "study", "curve": {"steps": [step]},
              "scenarios": [{"name": "study", "requests_per_core_second": 3000}]}
    # 3,000 x 0.7 requests/s per process, 4/3 study visitors per request/s: 2,800 users per process
    assert nat_ports(4, record) == 32768  # 1.5 x 11,200 = 16,800, rounded up to a power of two
    light = {**record, "curve": {"steps": [{**step, "worker_cpu_percent": 1}]}}
    assert nat_ports(64, record) == 65536 and nat_ports(1, light) == 1024
    fleet = fleets.Fleet("p", "us-central1", 2, "e2-standard-8", loadgen_record=LOADGEN)
    assert f"-var=nat_min_ports_per_vm={fleet.nat_ports}" in fleet.commands()["apply"]

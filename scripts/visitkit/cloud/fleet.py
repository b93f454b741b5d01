"""A Locust fleet on Google Cloud (infra/loadgen): a master VM and N worker VMs in the system's
region, each starting Locust with locust/node.py as a local `--workers` run does, one worker
process per vCPU. The run's files go up through a bucket and its results come back through it:

  stage     build/fleet/<run>/: locust/, the visitkit modules the suite imports and run.conf (the
            test's options, the stages file beside it); the VMs install infra/loadgen's hashed lock,
            requirements.txt, which must pin the kit's Locust and google-auth
  provision terraform apply infra/loadgen with the run's planned length: the VMs boot, install, and
            the master waits for every worker process (--expect-workers), runs the test and uploads
            its files; Compute Engine deletes every VM at the latest BOOT_ALLOWANCE_S + planned +
            END_MINUTES after it starts, even if this kit is gone, and each worker sooner, by itself,
            once its part is over
  collect   wait for results/exit-code in the bucket, then copy results/ into the results folder
  destroy   terraform destroy, after a failure too

Every command, the bucket and the clock can be injected, so tests never reach Google.
"""
from __future__ import annotations

import json
import math
import re
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from visitkit.catalogue import CATALOGUE
from visitkit.cloud import firstrun
from visitkit.cloud.failures import CommandFailed
from visitkit.cloud.gcp import parse_outputs, run_command
from visitkit.errors import GcpError
from visitkit.model import cost
from visitkit.model.fleet import DEFAULT_WORKER_TYPE, MASTER_TYPE, hourly_cost, machine, nat_ports
from visitkit.paths import INFRA_DIR, LOCUST_DIR, ROOT
from visitkit.suite import RUN_CONF

if TYPE_CHECKING:  # google-cloud-storage is imported when the bucket is first read
    from google.cloud.storage import Bucket

LOADGEN_DIR = INFRA_DIR / "loadgen"
STAGE_ROOT = ROOT / "build" / "fleet"
BOOT_ALLOWANCE_S = 900  # VMs boot, install Python's venv and Locust, connect (node.py waits 600 s for them)
UNPLANNED_S = 24 * 3600  # a load with no planned length: the longest the kit waits for it, and the VMs live
END_MINUTES = 10  # infra/loadgen's end_minutes: a VM's life after the planned load (the last upload, the copy)
POLL_S = 15
# The suite imports these of the kit (ID tokens on an authenticated deployment), by their paths in it.
SUITE_MODULES = ("__init__.py", "errors.py", "cloud/__init__.py", "cloud/credentials.py", "cloud/idtoken.py")
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # scripts/visitkit
SUITE_PINS = ("locust", "google-auth")  # from requirements-cloud.txt: the VMs run the kit's versions
LOCK = LOADGEN_DIR / "requirements.txt"  # what the VMs install (infra/loadgen/requirements.in: how it is made)
PROGRESS_EVERY_S = 60
LOGS_DIR = "fleet-logs"  # in the results folder: the VMs' boot and Locust logs (not committed)
LOGS_WAIT_S = 60  # workers upload their logs once their master has quit them


class FleetLoad(Protocol):
    """What the fleet asks of the run's load (runs.config.LoadPlan, in a room above this one)."""

    @property
    def stages(self) -> str | None: ...  # endurance stages: a CSV file or "users:hold_s,..."

    def node_commands(self, conf: str, out: str, port: str, master_host: str = ..., processes: int | None = ...,
                      expect_workers: int | None = ..., wait_s: float | None = ...) -> tuple[list[str], list[str]]: ...

    def run_conf(self, base_url: str, target_args: Iterable[str] = ..., stages: str | None = ...) -> str: ...


def suite_pins(requirements: str | Path = ROOT / "requirements-cloud.txt") -> list[str]:
    """The kit's pinned lines for the suite's packages."""
    lines = Path(requirements).read_text().splitlines()
    pins = [line.strip() for line in lines if re.match(rf"^({'|'.join(SUITE_PINS)})==", line.strip())]
    if len(pins) != len(SUITE_PINS):
        raise GcpError(f"{requirements} must pin {', '.join(SUITE_PINS)} (name==version)")
    return pins


def check_lock(pins: Iterable[str], lock: str | Path = LOCK) -> None:
    """Refuses a fleet whose lock would install another Locust or google-auth than the kit's pins."""
    locked = set(re.findall(r"^([A-Za-z0-9][\w.-]*==[^\s;\\]+)", Path(lock).read_text(), re.M))
    stale = [pin for pin in pins if pin not in locked]
    if stale:
        raise GcpError(f"{lock} does not pin {', '.join(stale)} as requirements-cloud.txt does: regenerate it "
                       "(infra/loadgen/requirements.in says how)")


def planned_minutes(planned_s: float | None) -> int:
    """The load's planned length in whole minutes, rounded up, as infra/loadgen's run_minutes."""
    return math.ceil((UNPLANNED_S if planned_s is None else planned_s) / 60)


class Fleet:
    """One run's fleet; `steps()` gives the runner its provision and destroy steps, `run(...)` the load.
    `loadgen_record`: a load-generator benchmark's record (the runner hands in the newest), which sizes
    the VMs' NAT ports by the users each worker process carries. `planned_s`: the load's planned length
    (None: UNPLANNED_S), which bounds how long the VMs live."""

    def __init__(self, project: str | None, region: str | None, workers: int, worker_type: str | None = None,
                 access: str = "public", run_name: str = "<run>", *, loadgen_record: dict[str, Any],
                 planned_s: float | None = None,
                 run: firstrun.RunCommand = firstrun.stream_command, bucket: Bucket | None = None,
                 now: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 log: Callable[[str], None] = print, loadgen_dir: str | Path = LOADGEN_DIR,
                 stage_root: str | Path = STAGE_ROOT):
        if not project:
            raise GcpError("a fleet (--workers with --target gcp or a URL) needs --project: the Google Cloud project "
                           "its VMs run in")
        self.project, self.region, self.workers = project, region or cost.DEFAULT_REGION, workers
        self.worker_type = worker_type or DEFAULT_WORKER_TYPE
        self.processes = machine(self.worker_type)["vcpus"]  # one Locust worker per vCPU
        self.access, self.loadgen_dir = access, Path(loadgen_dir)
        self.stage_dir = Path(stage_root) / run_name / "run"
        self.outputs: dict[str, Any] = {}
        # {function name: the audience of its ID tokens} (the deployment's function_audiences), set before stage()
        self.audiences: dict[str, str] = {}
        self.provisioning = False  # True once provision() began: from then on there may be a fleet to destroy
        self.nat_ports = nat_ports(self.processes, loadgen_record)
        self.run_minutes = planned_minutes(planned_s)
        self._run, self._bucket, self._now, self._sleep, self._log = run, bucket, now, sleep, log

    @property
    def expect_workers(self) -> int:
        return self.workers * self.processes

    @property
    def invoked_services(self) -> list[str]:
        """The system's HTTP functions, whose run.invoker the fleet's account needs when they are not public."""
        return sorted(f.service for f in CATALOGUE.values() if f.public) if self.access == "authenticated" else []

    @property
    def locust_args(self) -> list[str]:
        """Locust's options for the target: a VM mints its own account's ID tokens (metadata server), each
        for its function's run.app URL."""
        if self.access != "authenticated":
            return []
        return ["--auth", "id-token"] + (
            ["--audiences", json.dumps(self.audiences, sort_keys=True)] if self.audiences else [])

    def commands(self) -> dict[str, list[str]]:
        variables = [f"-var=project_id={self.project}", f"-var=region={self.region}", f"-var=workers={self.workers}",
                     f"-var=worker_machine_type={self.worker_type}", f"-var=processes_per_worker={self.processes}",
                     f"-var=run_dir={self.stage_dir}", f"-var=invoked_services={json.dumps(self.invoked_services)}",
                     f"-var=nat_min_ports_per_vm={self.nat_ports}", f"-var=run_minutes={self.run_minutes}",
                     f"-var=boot_minutes={BOOT_ALLOWANCE_S // 60}"]
        base = ["terraform", f"-chdir={self.loadgen_dir}"]
        return {"init": base + ["init", "-input=false"],
                "apply": base + ["apply", "-auto-approve", "-input=false"] + variables,
                "output": base + ["output", "-json"],
                "state": base + ["state", "list"],
                "destroy": base + ["destroy", "-auto-approve", "-input=false"] + variables}

    def node_lines(self, load: FleetLoad) -> tuple[list[str], list[str]]:
        """The master's and a worker's command lines on the VMs (infra/loadgen/startup.sh.tftpl)."""
        master, worker = load.node_commands("run.conf", "/opt/visitkit/out", "5557", master_host="<master's address>",
                                            processes=self.processes, expect_workers=self.expect_workers,
                                            wait_s=None)
        venv = "/opt/visitkit/venv/bin/python"
        master[:2] = [venv, "locust/node.py"]
        worker[:2] = [venv, "locust/node.py"]
        return master, [*worker, "--master-wait", str(BOOT_ALLOWANCE_S)]  # no master by then: the VM ends

    def describe(self) -> str:
        hourly = hourly_cost(self.workers, self.worker_type, self.region)
        return (f"{self.workers} worker VMs {self.worker_type} x {self.processes} Locust workers "
                f"({self.expect_workers} processes) and a master {MASTER_TYPE}, in {self.region} (project "
                f"{self.project}); about {hourly:.2f} USD per hour with its NAT gateway (prices.json); "
                f"{self.nat_ports:,} NAT ports per VM, one per kept-alive user connection to the system; "
                f"Compute Engine deletes each VM at the latest {self.max_run_minutes} minutes after it starts")

    @property
    def max_run_minutes(self) -> int:
        """infra/loadgen's bound on every VM's life: boot, the planned load, the end."""
        return BOOT_ALLOWANCE_S // 60 + self.run_minutes + END_MINUTES

    # --- the steps' actions ---
    def stage(self, load: FleetLoad, base_url: str) -> Path:
        """The folder Terraform uploads: the suite, the modules it imports, run.conf. The packages come
        from infra/loadgen's lock, which Terraform uploads itself."""
        check_lock(suite_pins())
        if self.stage_dir.exists():
            shutil.rmtree(self.stage_dir)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(LOCUST_DIR, self.stage_dir / "locust", ignore=ignore)
        for name in SUITE_MODULES:
            (self.stage_dir / "visitkit" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(PACKAGE_DIR / name, self.stage_dir / "visitkit" / name)
        stages = None
        if load.stages and Path(load.stages).is_file():
            shutil.copy(load.stages, self.stage_dir / "stages.csv")
            stages = "stages.csv"  # the master starts in the run folder
        (self.stage_dir / RUN_CONF).write_text(load.run_conf(base_url, self.locust_args, stages))
        return self.stage_dir

    def provision(self) -> None:
        commands = self.commands()
        self.provisioning = True
        run_command(commands["init"], self._run)
        # A fleet left by an earlier run (its destroy failed) has run its test: its VMs would not run
        # this one, and its bucket still holds the old results. The destroy step removes it.
        left = self._left_in_state(commands["state"])
        if left:
            raise GcpError(f"a fleet from an earlier run is still up ({len(left)} resources in infra/loadgen's "
                           "state): it is destroyed now; run again")
        firstrun.apply_with_retries(commands["apply"], self._run, self._sleep, self._log)
        self.outputs = parse_outputs(run_command(commands["output"], self._run, capture=True))

    def _left_in_state(self, command: list[str]) -> list[str]:
        """What infra/loadgen's state holds: none before the first apply, when `terraform state list`
        fails with "No state file was found!"."""
        try:
            return run_command(command, self._run, capture=True).split()
        except CommandFailed as failure:
            if "No state file was found" in failure.output:
                return []
            raise

    def wait_for_results(self, timeout: float) -> int:
        """Waits until the master has uploaded its exit code; returns it."""
        bucket = self.bucket()
        started = self._now()
        shown = started
        while True:
            blob = bucket.blob("results/exit-code")
            if blob.exists():
                text = blob.download_as_text().strip()
                return int(text) if text.lstrip("-").isdigit() else 1
            if self._now() - started > timeout:
                raise GcpError(f"the fleet's master uploaded no exit code within {timeout:.0f} s: the VMs' logs, as "
                               f"far as they got, are in the results folder's {LOGS_DIR}/; --keep-fleet leaves the "
                               "fleet up to look inside (infra/loadgen/README.md)")
            if self._now() - shown >= PROGRESS_EVERY_S:
                shown = self._now()
                self._log(f"  fleet: {shown - started:.0f} s, waiting for the master's results")
            self._sleep(POLL_S)

    def collect(self, folder: str | Path) -> list[str]:
        """Copies the master's files (results/ in the bucket) into the results folder."""
        bucket = self.bucket()
        copied = []
        for blob in bucket.list_blobs(prefix="results/"):
            name = blob.name[len("results/"):]
            if not name or name == "exit-code" or "/" in name:
                continue
            blob.download_to_filename(str(Path(folder) / name))
            copied.append(name)
        return copied

    def collect_logs(self, folder: str | Path, wait_s: float = LOGS_WAIT_S) -> list[str]:
        """Copies the VMs' logs (logs/ in the bucket) into FOLDER/fleet-logs/, once the master's and every
        worker's are there or `wait_s` has passed."""
        bucket, started = self.bucket(), self._now()
        while len(list(bucket.list_blobs(prefix="logs/"))) < self.workers + 1 and self._now() - started < wait_s:
            self._sleep(5)
        out = Path(folder) / LOGS_DIR
        copied = []
        for blob in bucket.list_blobs(prefix="logs/"):
            name = blob.name[len("logs/"):]
            if name and "/" not in name:
                out.mkdir(exist_ok=True)
                blob.download_to_filename(str(out / name))
                copied.append(name)
        return copied

    def destroy(self) -> None:
        run_command(self.commands()["destroy"], self._run)

    def bucket(self) -> Bucket:
        if self._bucket is None:
            from google.cloud import storage

            from visitkit.cloud.credentials import default_credentials

            client = storage.Client(project=self.project, credentials=default_credentials(self.project))
            self._bucket = client.bucket(self.outputs["bucket"])
        return self._bucket


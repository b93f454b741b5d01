"""A Locust fleet (cloud/fleet.py, infra/loadgen), rehearsed on this machine: the kit's own fleet steps,
with only Google's side stood in for.

`RehearsalFleet` is Fleet itself (the same stage, terraform commands, wait_for_results, collect,
collect_logs, destroy), with:
- Terraform's google provider: the schema stand-in in its rehearsal mode (terraform.py), through which
  the kit's own `terraform init`, `state list`, `apply`, `output -json` and `destroy` of infra/loadgen run
  unchanged, in a tree of links to infra/loadgen's files (loadgen_dir(folder)), the state in the
  rehearsal's folder;
- Cloud Storage: a folder (FolderBucket), which the applied google_storage_bucket_objects are copied
  into (run/: the staged suite and the lock), and which the kit reads results/ and logs/ from;
- Compute Engine: each VM of the applied state is a folder standing in for its disk, VMS/NAME, and
  its boot runs the node.py line of its startup script as rendered in the applied state (metadata
  startup-script, from infra/loadgen/startup.sh.tftpl and the kit's node_commands): the master's, then
  each worker's, as local processes in VMS/NAME/run (the staged files copied from the bucket as the
  script does), /opt/visitkit/... mapped to VMS/NAME/..., the VM's Python to this kit's venv (which
  holds the pinned Locust), and the master's internal address and port to 127.0.0.1 and a free port
  (the one network seam). What else the script does is Google's or Debian's (apt, pip's install from
  the lock, gcloud's copies, the VM's deletion): the rehearsal does its part of it (the copies: run/
  down, then the master's out/ up to results/, its exit code last, each VM's log to logs/).
What a real fleet does differently: FLEET_DIFFERS.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from visitkit.cloud import firstrun
from visitkit.cloud.fleet import LOADGEN_DIR, Fleet
from visitkit.errors import GcpError
from visitkit.model.fleet import nat_ports
from visitkit.net import free_port
from visitkit.rehearsal import terraform
from visitkit.rehearsal.target import polled

if TYPE_CHECKING:
    from google.cloud.storage import Bucket

VM_ROOT = "/opt/visitkit"  # where a VM's startup script keeps the run (startup.sh.tftpl)
PROCESSES_PER_WORKER = 1  # one Locust worker process per worker VM: this machine's cores are shared by all
NODE_LINE = re.compile(r"^\s*(\S+)\s+locust/node\.py\s+(master|worker)\s")
STOP_WAIT_S = 30
FLEET_DIFFERS = [
    f"each worker VM runs {PROCESSES_PER_WORKER} Locust worker process (one per vCPU on Google Cloud), and every "
    "VM is a set of processes on this machine: apt, pip's install from the lock and the VM's deletion are not run",
    "the workers reach the master on 127.0.0.1 and a free port, not on its internal address in the fleet's network",
    "the bucket is a folder: the master's files are copied up once, at its end, not also every minute",
]


# --- Terraform's tree for infra/loadgen ----------------------------------------------------------

def loadgen_path(folder: str | Path) -> Path:
    """Where loadgen_dir(folder) puts its tree, made by nothing (a dry run names it)."""
    return Path(folder).resolve() / "tree" / "loadgen"


def loadgen_dir(folder: str | Path) -> Path:
    """FOLDER/tree/loadgen: a link to each of infra/loadgen's files that the configuration reads (its .tf,
    the startup script's template, the lock); what the kit's fleet commands run in (-chdir)."""
    tree = loadgen_path(folder)
    tree.mkdir(parents=True, exist_ok=True)
    wanted = {p.name: p for p in LOADGEN_DIR.iterdir()
              if p.is_file() and (p.suffix in (".tf", ".tftpl") or p.name == "requirements.txt")}
    for link in tree.iterdir():
        if link.is_symlink() and link.name not in wanted:
            link.unlink()
    for name, target in wanted.items():
        link = tree / name
        if not link.is_symlink():
            link.symlink_to(target)
    return tree


def environment(folder: str | Path) -> dict[str, str]:
    """terraform.environment(folder) for infra/loadgen's commands: the same stand-in, mirror and rehearsal
    mode, serving infra/loadgen's types."""
    return {**terraform.environment(folder, grants_wait_seconds=None),
            "SCHEMA_PROVIDER_TYPES": terraform.served_types(LOADGEN_DIR)}


def applied_state(folder: str | Path) -> dict[str, Any]:
    """infra/loadgen's state in the rehearsal, as `terraform show -json` gives it."""
    return terraform.applied_state(folder, loadgen_dir(folder), environment(folder))


# --- Cloud Storage: a folder ---------------------------------------------------------------------

class FolderBlob:
    """One object of a FolderBucket: what Fleet calls of google.cloud.storage.Blob."""

    def __init__(self, root: Path, name: str):
        self.root, self.name = root, name

    @property
    def path(self) -> Path:
        return self.root / self.name

    def exists(self) -> bool:
        return self.path.is_file()

    def download_as_text(self) -> str:
        return self.path.read_text()

    def download_to_filename(self, filename: str) -> None:
        shutil.copyfile(self.path, filename)

    def upload_from_string(self, data: str | bytes) -> None:
        """Written whole, then renamed: a reader never sees half an object."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.partial")
        partial.write_bytes(data.encode() if isinstance(data, str) else data)
        partial.replace(self.path)

    def upload_from_filename(self, filename: str | Path) -> None:
        self.upload_from_string(Path(filename).read_bytes())


class FolderBucket:
    """A bucket as a folder: what Fleet calls of google.cloud.storage.Bucket (blob, list_blobs)."""

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()  # made by the first upload

    def blob(self, name: str) -> FolderBlob:
        return FolderBlob(self.root, name)

    def list_blobs(self, prefix: str = "") -> Iterator[FolderBlob]:
        files = self.root.rglob("*") if self.root.exists() else ()
        names = sorted(p.relative_to(self.root).as_posix() for p in files if p.is_file() and not p.name.startswith("."))
        return iter([FolderBlob(self.root, name) for name in names if name.startswith(prefix)])

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)


# --- Compute Engine: the VMs' startup scripts ----------------------------------------------------

@dataclass(frozen=True)
class Vm:
    """One google_compute_instance of the applied state: its name, role and startup script."""
    name: str
    role: str  # "master" or "worker"
    startup_script: str


def vms(state: Mapping[str, Any]) -> list[Vm]:
    """The applied instances, the master first."""
    found = []
    for resource in terraform.resources(state):
        if resource.get("mode") == "managed" and resource["type"] == "google_compute_instance":
            values = resource.get("values") or {}
            script = (values.get("metadata") or {}).get("startup-script")
            if not script:
                raise GcpError(f"rehearsal: {resource['address']} has no startup-script in its metadata")
            found.append(Vm(values["name"], resource["name"], script))
    return sorted(found, key=lambda vm: (vm.role != "master", vm.name))


def node_line(script: str, role: str) -> tuple[list[str], str]:
    """The startup script's one node.py command line for `role` (what follows it on the line, such as
    `|| code=$?`, left out) and the folder it runs in (the `cd` before it)."""
    lines = script.splitlines()
    found = [i for i, line in enumerate(lines) if (match := NODE_LINE.match(line)) and match[2] == role]
    if len(found) != 1:
        raise GcpError(f"rehearsal: the {role}'s startup script has {len(found)} node.py {role} lines, not 1")
    words = shlex.split(lines[found[0]], comments=True)
    for end, word in enumerate(words):
        if word in ("||", "&&", ";", "|", "&"):
            words = words[:end]
            break
    cds = [line.split(None, 1)[1].strip() for line in lines[:found[0]] if line.strip().startswith("cd ")]
    if not cds:
        raise GcpError(f"rehearsal: the {role}'s startup script has no `cd` before its node.py line")
    return words, cds[-1]


def localised(argv: Sequence[str], disk: Path, python: str, address: tuple[str, str],
              local: tuple[str, str]) -> list[str]:
    """A VM's command line on this machine: its Python, its paths under VM_ROOT in `disk`, the master's
    address and port (`address`) as `local`'s."""
    command = [python]
    options = {"--master-host": {address[0]: local[0]}, "--master-port": {address[1]: local[1]},
               "--bind-port": {address[1]: local[1]}}
    for i, word in enumerate(argv[1:], start=1):
        mapped = options.get(argv[i - 1], {})
        if word in mapped:
            command.append(mapped[word])
        elif argv[i - 1] in options:
            raise GcpError(f"rehearsal: {argv[i - 1]} {word} in a startup script is not the master's "
                           f"{address[0]}:{address[1]}")
        else:
            command.append(mapped_path(word, disk))
    return command


def mapped_path(word: str, disk: Path) -> str:
    if word == VM_ROOT or word.startswith(VM_ROOT + "/"):
        return str(disk / word[len(VM_ROOT):].lstrip("/"))
    return word


class RehearsalFleet(Fleet):
    """Fleet with Google stood in for; `folder`: where the rehearsal keeps the fleet's state, bucket and VMs."""

    def __init__(self, project: str | None, region: str | None, workers: int, worker_type: str | None = None,
                 access: str = "public", run_name: str = "<run>", *, folder: str | Path,
                 loadgen_record: dict[str, Any], planned_s: float | None = None,
                 log: Callable[[str], None] = print):
        self.workspace = Path(folder).resolve()
        self.folder_bucket = FolderBucket(self.workspace / "bucket")
        super().__init__(project, region, workers, worker_type, access, run_name, loadgen_record=loadgen_record,
                         planned_s=planned_s, run=self._run_terraform,
                         bucket=cast("Bucket", self.folder_bucket), sleep=polled, log=log,
                         loadgen_dir=loadgen_path(self.workspace / "terraform"), stage_root=self.workspace / "stage")
        self.processes = PROCESSES_PER_WORKER
        self.nat_ports = nat_ports(self.processes, loadgen_record)
        self.booted: dict[str, subprocess.Popen[bytes]] = {}
        self._boots: list[threading.Thread] = []

    def describe(self) -> str:
        return (super().describe() + "; rehearsed: each VM's node.py line from its startup script in the applied "
                "state, run here (" + "; ".join(FLEET_DIFFERS) + ")")

    def _run_terraform(self, argv: Any, **options: Any) -> Any:
        """The kit's own command line, run with the rehearsal's provider and state, in its tree."""
        loadgen_dir(self.workspace / "terraform")
        env = {**os.environ, **environment(self.workspace / "terraform")}
        return firstrun.stream_command(argv, env=env, **options)

    # --- the steps' actions ---
    def provision(self) -> None:
        self.folder_bucket.clear()
        super().provision()
        state = applied_state(self.workspace / "terraform")
        self._upload(state)
        self._boot(state)

    def destroy(self) -> None:
        """The kit's destroy; then what Google deletes with it: the VMs (their processes, then their disks)
        and the bucket's objects (force_destroy)."""
        self.stop()
        super().destroy()
        shutil.rmtree(self.workspace / "vms", ignore_errors=True)
        self.folder_bucket.clear()

    # --- Google's side ---
    def _upload(self, state: Mapping[str, Any]) -> None:
        """What Cloud Storage holds once the apply has uploaded the bucket's objects: each one's source."""
        for resource in terraform.resources(state):
            if resource.get("mode") == "managed" and resource["type"] == "google_storage_bucket_object":
                values = resource.get("values") or {}
                source = self.loadgen_dir / values["source"]  # relative: to the module's folder (path.module)
                self.folder_bucket.blob(values["name"]).upload_from_filename(source)

    def _boot(self, state: Mapping[str, Any]) -> None:
        """Each VM's boot: its startup script's node.py line, here; the master first, as it has its address first."""
        machines = vms(state)
        if [vm.role for vm in machines].count("master") != 1 or len(machines) != self.workers + 1:
            raise GcpError(f"rehearsal: the applied state has {len(machines)} VMs, not a master and "
                           f"{self.workers} workers")
        address = (str(self.outputs["master_internal_ip"]), "")
        local = ("127.0.0.1", str(free_port()))
        for vm in machines:
            argv, cwd = node_line(vm.startup_script, vm.role)
            port = argv[argv.index("--bind-port" if vm.role == "master" else "--master-port") + 1]
            disk = self.workspace / "vms" / vm.name
            if disk.exists():
                shutil.rmtree(disk)
            # `gcloud storage cp -r gs://BUCKET/run /opt/visitkit/`, then the master's `mkdir -p .../out`
            for blob in self.folder_bucket.list_blobs(prefix="run/"):
                (disk / blob.name).parent.mkdir(parents=True, exist_ok=True)
                blob.download_to_filename(str(disk / blob.name))
            if vm.role == "master":
                (disk / "out").mkdir(parents=True)
            command = localised(argv, disk, sys.executable, (address[0], port), local)
            self._log(f"  rehearsal: {vm.name} boots: $ {shlex.join(command)}")
            log = (disk / "startup.log").open("wb")
            process = subprocess.Popen(command, cwd=mapped_path(cwd, disk), stdout=log, stderr=subprocess.STDOUT,
                                       env=_vm_environment(), start_new_session=True)
            self.booted[vm.name] = process
            thread = threading.Thread(target=self._finish, args=(vm, process, disk, log), daemon=True)
            thread.start()
            self._boots.append(thread)

    def _finish(self, vm: Vm, process: subprocess.Popen[bytes], disk: Path, log: IO[bytes]) -> None:
        """The startup script's finish: the master's files to results/, each VM's log to logs/, then the
        master's exit code (last: the kit reads the results once it is there)."""
        code = process.wait()
        log.close()
        if vm.role == "master":
            for path in sorted((disk / "out").glob("*")):
                if path.is_file():
                    self.folder_bucket.blob(f"results/{path.name}").upload_from_filename(path)
            self.folder_bucket.blob("logs/master.log").upload_from_filename(disk / "startup.log")
            self.folder_bucket.blob("results/exit-code").upload_from_string(f"{code}\n")
        else:
            self.folder_bucket.blob(f"logs/{vm.name}.log").upload_from_filename(disk / "startup.log")

    def stop(self) -> None:
        """Ends any VM still running (Compute Engine's delete), then waits for their copies."""
        for process in self.booted.values():
            if process.poll() is None:
                process.terminate()
        for process in self.booted.values():
            try:
                process.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for thread in self._boots:
            thread.join(timeout=STOP_WAIT_S)


def _vm_environment() -> dict[str, str]:
    """A VM's environment: this machine's, less what belongs to the kit's own process (the emulators)."""
    return {key: value for key, value in os.environ.items()
            if key not in ("FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST")}

"""The load of a run on a Locust fleet in Google Cloud (cloud/fleet.py, infra/loadgen): the fleet
built for the run, its steps (provision, run the test and collect its files, destroy) and their
actions."""
import shlex
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from visitkit.errors import RunError
from visitkit.results import folder as results
from visitkit.runs.config import STOP_TIMEOUT_S, LoadPlan, RunConfig
from visitkit.runs.state import RunState, Sampler
from visitkit.runs.targets import Target
from visitkit.runs.watch import LiveWatch
from visitkit.settings import DEPLOYED_ACCESS_MODES
from visitkit.steps import Step

if TYPE_CHECKING:
    from visitkit.cloud.fleet import Fleet


def make_fleet(config: RunConfig, folder: results.ResultsFolder) -> "Fleet | None":
    """The run's Locust fleet on Google Cloud, or None; builds it without contacting anything."""
    if not config.on_fleet:
        return None
    from visitkit.benchmarks import loadgen
    from visitkit.cloud.fleet import Fleet

    access = config.access or config.settings.access if config.target == "gcp" else "public"
    assert config.load.workers is not None  # on_fleet: the workers were asked for
    if config.rehearse:  # the fleet's VMs and bucket stood in for on this machine, beside the target's
        from visitkit.rehearsal.fleet import RehearsalFleet

        return RehearsalFleet(config.project, config.region, config.load.workers, config.worker_type, access,
                              folder.name, folder=folder / "rehearsal" / "fleet", loadgen_record=loadgen.latest()[1],
                              planned_s=config.load.planned_seconds())
    return Fleet(config.project, config.region, config.load.workers, config.worker_type, access, folder.name,
                 loadgen_record=loadgen.latest()[1], planned_s=config.load.planned_seconds())


def fleet_steps(config: RunConfig, folder: results.ResultsFolder, target: Target, fleet: "Fleet") -> list[Step]:
    from visitkit.cloud.gcp import GcpTarget

    if isinstance(target, GcpTarget):  # its preflight, before anything is created, checks the fleet's CPU quota
        target.fleet_vms = (fleet.workers, fleet.worker_type)
    load = config.load
    commands = fleet.commands()
    master, worker = fleet.node_lines(load)
    conf = load.run_conf(target.base_url, fleet.locust_args,
                         "stages.csv" if load.stages and Path(load.stages).is_file() else None)
    return [
        Step("provision the Locust fleet", [
            fleet.describe(),
            f"stage {fleet.stage_dir}: locust/, the visitkit modules it imports and run.conf (the VMs install "
            "infra/loadgen/requirements.txt, a hashed lock holding the kit's Locust and google-auth pins):",
            *(f"    {line}" for line in conf.splitlines()[1:]),
            f"$ {shlex.join(commands['init'])}", f"$ {shlex.join(commands['apply'])}",
            f"apply retry policy: {_retry_policy()}",
            "a bucket for the files, its own network (workers reach the master's port on the internal network only; "
            "SSH only through IAP), Cloud NAT for the VMs' connections (no external address), a service account"
            + {"authenticated": " with run.invoker on the three HTTP functions (the VMs mint their own ID tokens)",
               "auto": " (with run.invoker on the three HTTP functions, the VMs minting their own ID tokens, if the "
                       "preflight decides access authenticated)"}.get(fleet.access, ""),
            "each VM installs the pinned Locust and starts its node (infra/loadgen/startup.sh.tftpl); the master:",
            f"$ {shlex.join(master)}", f"each of the {fleet.workers} worker VMs:", f"$ {shlex.join(worker)}"],
             provision_fleet),
        Step(f"run the Locust test '{load.test}' on the fleet", [
            f"{load.describe()}, against {target.base_url}",
            f"the master waits for {fleet.expect_workers} worker processes, runs the test, asks each worker for its "
            "whole visit ledger, and uploads its files to gs://<bucket>/results/ and then results/exit-code",
            f"wait for results/exit-code (up to {fleet_timeout(load):.0f} s), then copy results/ into {folder.path}: "
            "the Locust CSVs and HTML, ledger.json, per_second.csv, health.csv (each worker's CPU and event-loop lag "
            "every second, the master's view of their heartbeats: the report flags a saturated worker and when); "
            "then the load generator's warnings, from health.csv once it is here (not live)"], run_on_fleet),
        Step("leave the Locust fleet running (--keep-fleet)", [
            f"look inside: infra/loadgen/README.md; clean up later: $ {shlex.join(commands['destroy'])}"], None)
        if config.keep_fleet else
        Step("destroy the Locust fleet", [f"$ {shlex.join(commands['destroy'])}",
                                          f"then remove the staged files in {fleet.stage_dir.parent}"],
             destroy_fleet, always=True),  # as soon as its files are in: VMs bill by the second
    ]


def _retry_policy() -> str:
    from visitkit.cloud.firstrun import retry_policy_text

    return retry_policy_text()


def provision_fleet(state: RunState) -> None:
    fleet, target = state.fleet, state.target
    assert fleet is not None  # the plan has the fleet's steps only with a fleet
    fleet.region = target.deployed_region or fleet.region  # beside the functions
    if target.access in DEPLOYED_ACCESS_MODES:  # "auto" is decided by now
        fleet.access = target.access
    fleet.audiences = dict(getattr(target, "audiences", None) or {})
    fleet.stage(state.config.load, target.base_url)
    state.record["fleet"] = {"workers": fleet.workers, "worker_type": fleet.worker_type,
                             "processes": fleet.expect_workers, "region": fleet.region}
    state.folder.save_run(state.record)
    fleet.provision()


def run_on_fleet(state: RunState) -> None:
    """The fleet's master has started once its workers connected: wait for its results, copy them."""
    config, folder, fleet = state.config, state.folder, state.fleet
    assert fleet is not None  # the plan has the fleet's steps only with a fleet
    state.sampler = Sampler(state.target, folder / results.SAMPLES)
    state.sampler.start()
    (folder / results.RUN_CONF).write_text((fleet.stage_dir / results.RUN_CONF).read_text())
    waited_from = time.time()
    try:
        code = fleet.wait_for_results(fleet_timeout(config.load))
        copied = fleet.collect(folder.path)
    finally:
        # the VMs go next: their logs are all there will be to read of them
        state.record["fleet"]["logs"] = fleet.collect_logs(folder.path)
        state.folder.save_run(state.record)
    state.record["locust_exit_code"] = code
    state.record["fleet"]["files"] = sorted(copied)
    if code != 0:
        state.record["notes"].append(f"Locust on the fleet exited with code {code}: see {results.LOCUST_LOG}")
    if results.LEDGER not in copied:
        raise RunError(f"the fleet's master uploaded no {results.LEDGER} "
                       f"(it uploaded: {', '.join(copied) or 'nothing'})")
    seconds = sorted(int(row["time"]) for row in results.read_csv(folder / results.PER_SECOND))
    # the load's own window, from the master's clock, rather than the wait's (VMs booting first)
    state.load_started = float(seconds[0]) if seconds else waited_from
    state.load_ended = float(seconds[-1] + 1) if seconds else time.time()
    state.record["load_window"] = [state.load_started, state.load_ended]
    LiveWatch(state, folder / results.HEALTH, live=False).poll()  # the master's file, read once it is here
    state.folder.save_run(state.record)


def destroy_fleet(state: RunState) -> None:
    fleet = state.fleet
    if fleet is None or not fleet.provisioning:  # nothing was created
        if fleet is not None and fleet.stage_dir.parent.exists():
            shutil.rmtree(fleet.stage_dir.parent)
        return
    fleet.destroy()
    shutil.rmtree(fleet.stage_dir.parent)


def fleet_timeout(load: LoadPlan) -> float:
    """How long the kit waits for a fleet's results: its VMs' start, the load, its end."""
    from visitkit.cloud.fleet import BOOT_ALLOWANCE_S, UNPLANNED_S

    return BOOT_ALLOWANCE_S + (load.planned_seconds() or UNPLANNED_S) + STOP_TIMEOUT_S + 120

"""A Locust fleet is never left running (visitkit.cloud.fleet, locust/node.py, infra/loadgen): the kit
hands Terraform the load's planned length, which bounds every VM's life, and a worker that finds no
master within the boot allowance ends instead of waiting or restarting."""
import re
import socket

import pytest
from fakes import FakeClock

import node
from visitkit.benchmarks import loadgen
from visitkit.cloud import fleet as fleets
from visitkit.errors import GcpError
from visitkit.runs import fleetrun
from visitkit.runs.config import LoadPlan

LOADGEN = loadgen.latest()[1]


def a_fleet(tmp_path=None, **options):
    extra = {"stage_root": tmp_path} if tmp_path else {}
    return fleets.Fleet("p", "southamerica-east1", 3, "e2-standard-4", loadgen_record=LOADGEN, **options, **extra)


def test_terraform_gets_the_planned_length_in_whole_minutes_rounded_up():
    commands = a_fleet(planned_s=3601).commands()
    for verb in ("apply", "destroy"):  # the same variables, or destroy would plan another fleet
        assert {"-var=run_minutes=61", "-var=boot_minutes=15"} <= set(commands[verb])
    assert "-var=run_minutes=2" in a_fleet(planned_s=90).commands()["apply"]
    # a load with no planned length: the kit's own longest wait, a day
    assert "-var=run_minutes=1440" in a_fleet(planned_s=None).commands()["apply"]


def test_the_vms_outlive_the_kits_wait_and_no_more_than_the_margins():
    load = LoadPlan("breakpoint", seconds=1800)
    fleet = a_fleet(planned_s=load.planned_seconds())
    waited = fleetrun.fleet_timeout(load)
    assert fleet.max_run_minutes == 15 + 30 + 10
    assert load.planned_seconds() < waited < fleet.max_run_minutes * 60  # results are in before the VMs go
    assert f"deletes each VM at the latest {fleet.max_run_minutes} minutes after it starts" in fleet.describe()
    main_tf = (fleets.LOADGEN_DIR / "main.tf").read_text()
    assert re.search(r"\n\s*end_minutes\s*=\s*(\d+)\n", main_tf)[1] == str(fleets.END_MINUTES)


def test_a_workers_line_waits_for_its_master_as_long_as_the_boot_allowance():
    _, worker = a_fleet(planned_s=600).node_lines(LoadPlan("breakpoint", seconds=600, workers=3))
    assert worker[-2:] == ["--master-wait", str(fleets.BOOT_ALLOWANCE_S)] and worker[1] == "locust/node.py"


def test_the_stage_leaves_the_packages_to_the_lock_and_refuses_one_off_the_kits_pins(tmp_path, monkeypatch):
    fleet = a_fleet(tmp_path, planned_s=600)
    staged = fleet.stage(LoadPlan("breakpoint", seconds=600, workers=3), "https://system")
    assert (staged / "run.conf").is_file() and not (staged / "requirements.txt").exists()
    monkeypatch.setattr(fleets, "suite_pins", lambda: ["locust==0.0.1"])
    with pytest.raises(GcpError, match=r"requirements.txt does not pin locust==0.0.1 .*regenerate it"):
        fleet.stage(LoadPlan("breakpoint", seconds=600, workers=3), "https://system")


# --- locust/node.py: a worker's bounded wait for its master ---

def test_a_worker_finds_a_master_that_listens():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        clock = FakeClock()
        assert node.wait_for_master("127.0.0.1", port, 60, now=clock.now, sleep=clock.sleep)
        assert clock.t == 0


def test_a_worker_gives_up_on_a_master_that_never_answers():
    clock = FakeClock()
    tries = []

    def refused(address, timeout):
        tries.append(address)
        raise ConnectionRefusedError

    assert not node.wait_for_master("10.10.0.2", 5557, 900, connect=refused, now=clock.now, sleep=clock.sleep)
    assert 900 <= clock.t < 900 + node.PROBE_EVERY_S and len(tries) == 900 // node.PROBE_EVERY_S + 1


def test_a_master_that_comes_up_late_is_found():
    clock = FakeClock()

    def up_after_a_minute(address, timeout):
        if clock.t < 60:
            raise ConnectionRefusedError
        return socket.socket()

    assert node.wait_for_master("10.10.0.2", 5557, 900, connect=up_after_a_minute, now=clock.now, sleep=clock.sleep)
    assert clock.t == 60


def test_a_worker_without_a_master_ends_with_no_master_and_starts_no_locust(monkeypatch, capsys):
    started = []
    monkeypatch.setattr(node, "run", started.append)
    monkeypatch.setattr(node, "wait_for_master", lambda host, port, wait_s: False)
    argv = ["worker", "--config", "run.conf", "--master-host", "10.10.0.2", "--master-port", "5557", "--processes", "4"]
    assert node.main([*argv, "--master-wait", "900"]) == node.NO_MASTER and started == []
    assert "no master answered on 10.10.0.2:5557 within 900 s" in capsys.readouterr().err
    monkeypatch.setattr(node, "run", lambda commands: len(commands) and 0)
    assert node.main(argv) == 0  # without --master-wait (a local run), Locust's own connection rules


def test_a_negative_master_wait_is_refused():
    with pytest.raises(SystemExit):
        node.parse(["worker", "--config", "c", "--master-host", "h", "--master-port", "1", "--master-wait", "-1"])

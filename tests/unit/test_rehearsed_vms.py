"""The rehearsed fleet's reading of infra/loadgen's startup scripts and its bucket folder
(visitkit.rehearsal.fleet), offline; tests/integration/test_rehearsal_fleet.py runs the whole fleet."""
import pytest

from visitkit.errors import GcpError
from visitkit.rehearsal import fleet

MASTER_SCRIPT = """#!/bin/bash
set -euo pipefail
cd /opt/visitkit/run
mkdir -p /opt/visitkit/out
code=0
/opt/visitkit/venv/bin/python locust/node.py master --config run.conf --out /opt/visitkit/out --bind-port 5557 --expect-workers 2 || code=$?
exit "$code"
"""  # noqa: E501
WORKER_SCRIPT = """cd /opt/visitkit/run
# Its part ends when its master quits it
/opt/visitkit/venv/bin/python locust/node.py worker --config run.conf --master-host 10.10.0.2 --master-port 5557 --processes 1 --master-wait 900
"""  # noqa: E501


def test_the_node_line_is_read_without_what_follows_it_with_its_folder():
    argv, cwd = fleet.node_line(MASTER_SCRIPT, "master")
    assert argv[-2:] == ["--expect-workers", "2"] and argv[1:3] == ["locust/node.py", "master"]
    assert cwd == "/opt/visitkit/run"
    assert fleet.node_line(WORKER_SCRIPT, "worker")[0][-2:] == ["--master-wait", "900"]


def test_a_script_without_exactly_one_node_line_of_its_role_is_refused():
    with pytest.raises(GcpError, match="0 node.py worker lines"):
        fleet.node_line(MASTER_SCRIPT, "worker")
    with pytest.raises(GcpError, match="2 node.py master lines"):
        fleet.node_line(MASTER_SCRIPT + MASTER_SCRIPT, "master")


def test_a_vms_line_runs_here_with_its_paths_on_its_disk_and_the_masters_address_local(tmp_path):
    master, _ = fleet.node_line(MASTER_SCRIPT, "master")
    local = fleet.localised(master, tmp_path, "python", ("10.10.0.2", "5557"), ("127.0.0.1", "40000"))
    assert local == ["python", "locust/node.py", "master", "--config", "run.conf", "--out", str(tmp_path / "out"),
                     "--bind-port", "40000", "--expect-workers", "2"]
    worker, _ = fleet.node_line(WORKER_SCRIPT, "worker")
    local = fleet.localised(worker, tmp_path, "python", ("10.10.0.2", "5557"), ("127.0.0.1", "40000"))
    assert local[local.index("--master-host") + 1:local.index("--master-port") + 2] == [
        "127.0.0.1", "--master-port", "40000"]
    with pytest.raises(GcpError, match="not the master's 10.10.0.9:5557"):
        fleet.localised(worker, tmp_path, "python", ("10.10.0.9", "5557"), ("127.0.0.1", "40000"))


def test_the_folder_bucket_answers_as_the_fleet_reads_a_bucket(tmp_path):
    bucket = fleet.FolderBucket(tmp_path / "bucket")
    assert not bucket.blob("results/exit-code").exists()
    bucket.blob("results/ledger.json").upload_from_string("{}")
    bucket.blob("results/exit-code").upload_from_string("0\n")
    bucket.blob("logs/master.log").upload_from_string("boot")
    assert bucket.blob("results/exit-code").download_as_text() == "0\n"
    assert [blob.name for blob in bucket.list_blobs(prefix="results/")] == ["results/exit-code",
                                                                          "results/ledger.json"]
    bucket.blob("logs/master.log").download_to_filename(str(tmp_path / "copy"))
    assert (tmp_path / "copy").read_text() == "boot"
    bucket.clear()
    assert list(bucket.list_blobs()) == []


def test_the_applied_instances_come_master_first_with_their_startup_scripts():
    def instance(name, index, vm_name, script):
        return {"mode": "managed", "type": "google_compute_instance", "name": name, "index": index,
                "address": f"google_compute_instance.{name}", "values": {"name": vm_name,
                                                                          "metadata": {"startup-script": script}}}
    state = {"values": {"root_module": {"resources": [
        instance("worker", "w-02", "w-02", WORKER_SCRIPT), instance("master", None, "m", MASTER_SCRIPT),
        instance("worker", "w-01", "w-01", WORKER_SCRIPT)]}}}
    assert [(vm.name, vm.role) for vm in fleet.vms(state)] == [("m", "master"), ("w-01", "worker"), ("w-02", "worker")]

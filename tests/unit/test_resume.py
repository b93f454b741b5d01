"""--resume: a failed Google Cloud run continued after its last finished step, in its own results
folder; the steps' bookkeeping and the deploy's resumed action, with every command faked."""
import json
import subprocess
from types import SimpleNamespace

import pytest

from visitkit.cloud import gcp
from visitkit.errors import RunError
from visitkit.paths import ROOT
from visitkit.results import folder as results
from visitkit.runs import runner
from visitkit.runs.config import RunConfig, resumable
from visitkit.steps import Step, run_steps
from visitkit.settings import load_settings

ITERATION_1 = ROOT / "iterations" / "iteration-1"


def steps_of(ran, fail=None):
    def act(name):
        def action(_state):
            ran.append(name)
            if name == fail:
                raise RuntimeError(f"{name} failed")
        return action

    return [Step("check", action=act("check"), again=True),
            Step("deploy", action=act("deploy"), resumed=act("read outputs")),
            Step("load", action=act("load")),
            Step("report", action=act("report")),
            Step("tear down", action=act("tear down"), always=True)]


def test_a_resumed_run_skips_what_finished_checks_again_and_reads_what_the_apply_made():
    ran, finished = [], []
    run_steps(steps_of(ran), None, log=lambda *_: None, done={"check", "deploy", "load"},
              on_done=lambda step: finished.append(step.name))
    assert ran == ["check", "read outputs", "report", "tear down"]
    assert finished == ["check", "deploy", "report", "tear down"]


def test_the_failed_step_is_told_once_and_the_clean_up_still_runs():
    ran, failed = [], []
    with pytest.raises(RuntimeError, match="load failed"):
        run_steps(steps_of(ran, fail="load"), None, log=lambda *_: None,
                  on_failure=lambda step, error: failed.append((step.name, str(error))))
    assert ran == ["check", "deploy", "load", "tear down"] and failed == [("load", "load failed")]


class Record:
    """What runner.finished and runner.failed see of a run's state."""

    def __init__(self, folder, destroy=False, target="gcp"):
        self.record, self.folder, self.logged = {}, results.ResultsFolder(folder), []
        self.target = gcp.GcpTarget(load_settings(ITERATION_1), ITERATION_1, "p1", destroy=destroy)
        self.config = SimpleNamespace(target=target, project="p1", rehearse=None)

    def log(self, line):
        self.logged.append(line)


def test_finished_steps_are_kept_in_run_json_and_a_tear_down_forgets_the_deployment(tmp_path):
    state = Record(tmp_path, destroy=True)
    for name in ("preflight", "deploy"):
        runner.finished(state, Step(name))
    assert json.loads((tmp_path / results.RUN).read_text())["steps_done"] == ["preflight", "deploy"]
    runner.finished(state, state.target.stop_step())
    assert state.record["steps_done"] == []  # destroyed: a resumed run applies again


def test_without_destroy_the_deployment_stays_and_so_do_its_steps(tmp_path):
    state = Record(tmp_path)
    runner.finished(state, Step("deploy"))
    runner.finished(state, state.target.stop_step())
    assert state.record["steps_done"][0] == "deploy"


def test_only_a_google_cloud_run_of_the_same_iteration_and_test_resumes(tmp_path):
    folder = results.ResultsFolder(tmp_path / "breakpoint-1")
    folder.create()
    folder.save_run({"iteration": "iteration-1", "test": "breakpoint", "target": "gcp"})
    assert resumable(folder.path, ITERATION_1, "breakpoint") == folder.path
    with pytest.raises(RunError, match="resume it with that iteration and --test"):
        resumable(folder.path, ITERATION_1, "endurance")
    with pytest.raises(RunError, match="--target gcp"):
        RunConfig.build(ITERATION_1, "breakpoint", target="local", resume=folder.path)
    with pytest.raises(RunError, match="not a results folder"):
        resumable(tmp_path, ITERATION_1, "breakpoint")


class FakeTerraform:
    def __init__(self):
        self.calls = []

    def __call__(self, argv, check, text, capture_output, echo=True):
        self.calls.append(argv[2])
        outputs = {"base_url": {"value": "https://r-p1.cloudfunctions.net/"}}
        return subprocess.CompletedProcess(argv, 0, json.dumps(outputs) if argv[2] == "output" else "", "")


def test_a_resumed_deploy_reads_the_outputs_and_applies_nothing():
    terraform = FakeTerraform()
    deployed = gcp.GcpTarget(load_settings(ITERATION_1), ITERATION_1, "p1", run=terraform)
    deploy = deployed.start_steps()[1]
    assert deploy.name.startswith("deploy") and deploy.resumed is not None
    deploy.resumed(None)
    assert terraform.calls == ["init", "output"] and deployed.outputs["base_url"].startswith("https://")


def test_a_failed_cloud_step_leaves_failure_json_and_says_how_to_send_it_home(tmp_path):
    from visitkit.cloud.failures import CommandFailed

    state = Record(tmp_path)
    error = CommandFailed(["terraform", "apply", "-var=project_id=visitkit-p123"], 1,
                          "Error: googleapi: Error 418: a teapot in project visitkit-p123 (me@example.com)")
    runner.failed(state, Step("deploy iteration-1 to project visitkit-p123"), error)
    failure = json.loads((tmp_path / "failure.json").read_text())
    assert failure["exit_code"] == 1 and "Error 418" in failure["error"]
    assert "visitkit-p123" not in json.dumps(failure) and "me@example.com" not in json.dumps(failure)
    assert any("failure.json" in line and "scripts/kit fixture" in line for line in state.logged)
    assert any(f"--resume {tmp_path}" in line for line in state.logged)
    assert json.loads((tmp_path / results.RUN).read_text())["failed_step"].startswith("deploy")


def test_a_failed_local_step_leaves_no_failure_json(tmp_path):
    runner.failed(Record(tmp_path, target="local"), Step("start the stack"), RuntimeError("no emulator"))
    assert not (tmp_path / "failure.json").exists()


def test_a_resumed_run_deploys_as_the_failed_one_decided_not_as_its_preflight_would_now():
    first = gcp.GcpTarget(load_settings(ITERATION_1), ITERATION_1, "p1")
    first.access, first.dead_letter = "authenticated", False  # what auto and the refused grants came to
    again = gcp.GcpTarget(load_settings(ITERATION_1), ITERATION_1, "p1")
    again.resume(json.loads(json.dumps(first.decisions)))  # through run.json
    assert again.access == again.requested_access == "authenticated"
    assert "-var=access=authenticated" in again.commands["destroy"]
    assert "-var=dead_letter=false" in again.commands["destroy"]


def test_each_finished_step_keeps_the_deployments_decisions(tmp_path):
    state = Record(tmp_path)
    state.target.access = "authenticated"
    runner.finished(state, Step("preflight"))
    assert json.loads((tmp_path / results.RUN).read_text())["decisions"] == {"access": "authenticated",
                                                                              "dead_letter": None}

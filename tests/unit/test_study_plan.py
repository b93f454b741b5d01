"""The whole study's plan (visitkit.studies.plan) and how a study runs it (visitkit.studies.run): issue #37's
targets, every step printed without a network, how far each fast breakpoint goes, the budget's refusal, and a
study's state through a failure and --resume (the runner and Terraform faked)."""
import dataclasses
import inspect
import json
import re
import shutil
import socket

import pytest

from visitkit.errors import VisitkitError
from visitkit.model import capacity
from visitkit.paths import ITERATIONS_DIR
from visitkit.results import analysis
from visitkit.results import folder as results
from visitkit.studies import plan as plans
from visitkit.studies import run as studies
from visitkit.studies.state import read_state

GCP = studies.Options(target="gcp", project="demo-project")
LOCAL = studies.Options()


def test_the_default_study_is_planned_under_the_issues_targets_on_google_cloud_and_on_the_twin():
    gcp, local = studies.make_plan(GCP), studies.make_plan(LOCAL)
    assert [(run.iteration.name, run.test) for run in gcp.runs] == [
        (f"iteration-{n}", "breakpoint") for n in range(4)]
    assert gcp.minutes < plans.TARGET_MINUTES["gcp"] == 90 and gcp.usd < plans.TARGET_USD == 2
    assert local.minutes < plans.TARGET_MINUTES["local"] == 75
    # how far each fast breakpoint goes: the READMEs' ramps, lengths chosen by the model (see below)
    assert [(run.ramp, run.seconds) for run in gcp.runs] == [(1, 210), (4, 210), (4, 100), (4, 140)]
    # Google Cloud: one deploy, then each iteration applied in place, one destroy at the end
    assert "deploy" in gcp.runs[0].steps and all("apply in place" in run.steps for run in gcp.runs[1:])
    assert all("deploy" not in run.steps for run in gcp.runs[1:])
    assert gcp.destroy_s == plans.assumed("destroy")
    assert studies.make_plan(dataclasses.replace(GCP, keep=True)).destroy_s == 0
    # the Monitoring wait is the runner's own, and the twin has none
    assert all(run.steps["Monitoring"] == 240 for run in gcp.runs)
    assert all("Monitoring" not in run.steps and "warm-up" in run.steps for run in local.runs)
    # the twin's warm-up stores its own visits before the test: iterations 1 and 2 drain them at ~9/s
    assert local.runs[1].steps["warm-up"] > 2 * local.runs[0].steps["warm-up"]


def far_enough(run, seconds, rule=plans.FAST_RULE):
    """The ramp passes, with the rule's margin, where the knee can be read and (where the study measured them) the
    first 429s, and leaves the store a backlog of min_drain_s where a store figure is to be measured."""
    p, it = run.prediction.as_dict(), run.iteration
    users, margin = run.ramp * seconds, 1 + rule.margin
    read = p["knee_users"] / (1 - rule.knee_shortfall) + run.ramp * (rule.knee_hold_s + rule.knee_smooth_s)
    ok = users >= margin * read
    if "first_failure_users" in it.study:  # iterations 0 and 1: the study measured first failures
        ok = ok and users >= margin * p["first_429_users"]
    if "drain_per_s" in it.study or any(check.startswith("store.") for check in it.checks):
        backlog = capacity.breakpoint_convergence(p, run.ramp, seconds / 60, "gcp")["backlog_at_end"]
        ok = ok and backlog >= p["drain_per_s"] * rule.min_drain_s
    return ok


def test_each_fast_breakpoint_goes_as_far_as_the_figures_its_iteration_is_judged_by_and_no_further():
    rule = plans.FAST_RULE
    for run in studies.make_plan(GCP).runs:
        assert far_enough(run, run.seconds), run.iteration.name
        assert not far_enough(run, run.seconds - rule.round_s), f"{run.iteration.name} goes further than it needs"
    assert rule.margin > 0 and rule.min_drain_s >= 180  # three of Monitoring's per-minute points of backlog


def test_the_fast_rule_reads_the_knee_as_the_runs_analysis_does():
    defaults = inspect.signature(analysis.find_breakpoint).parameters
    rule = plans.FastRule()
    assert (rule.knee_shortfall, rule.knee_hold_s, rule.knee_smooth_s) == (
        defaults["shortfall"].default, defaults["hold_s"].default, defaults["smooth_s"].default)


def test_the_study_protocol_is_the_studys_own_ramps_and_takes_about_three_hours_of_load_and_drain():
    study = studies.make_plan(dataclasses.replace(LOCAL, protocol="study"))
    assert [(run.ramp, run.seconds / 60) for run in study.runs] == [(1, 5), (1, 15), (1, 15), (1, 15)]
    hours = sum(run.steps["load"] + run.steps["drain"] for run in study.runs) / 3600
    assert 2.5 < hours < 4, hours
    assert study.minutes > 2 * studies.make_plan(LOCAL).minutes


def test_the_fast_ramps_are_the_readmes_breakpoint_commands():
    assert [plans.load_iteration(ITERATIONS_DIR / f"iteration-{n}").readme_ramp for n in range(4)] == [1, 4, 4, 4]
    text = ("# x\n\n## Run it\n\n    scripts/run-iteration I --test breakpoint --duration 90s --chaos every=10\n"
            "    scripts/run-iteration I --test breakpoint --duration 3m --shape-set spawn_rate=10,max_users=2000\n\n"
            "## Later\n\n    scripts/run-iteration I --test breakpoint --shape-set spawn_rate=99\n")
    assert plans.readme_shape(text) == {"spawn_rate": "10", "max_users": "2000"}
    assert plans.readme_shape(text.replace("## Run it", "## Elsewhere")) is None


def test_the_dry_run_prints_every_step_minutes_and_dollars_without_a_network(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("the dry run reached for the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    lines = studies.dry_run(GCP)
    text = "\n".join(lines)
    for n in range(4):  # each run's own steps, as the runner runs them
        assert f"deploy iteration-{n} to project demo-project" in text
    assert text.count("read the platform's metrics for the test window") == 4
    assert re.search(r"^5\. destroy the deployment .*\n   \$ terraform -chdir=\S+ destroy .*iteration-3/settings",
                     text, re.M)
    assert re.search(r"^6\. write the study report", text, re.M)
    found = re.search(r"the whole study on gcp, protocol fast: (\d+) minutes predicted .* US\$([\d.]+) ", text)
    assert found and int(found[1]) < 90 and float(found[2]) < 2
    assert re.search(r"the study's own protocol .* would take (\d{3}) minutes", text)
    assert "--budget US$2.00: within it" in text
    # every assumed figure is named with where it comes from
    assumed = [line for line in lines if line.startswith("  - ")]
    assert {line.split(":")[0][4:] for line in assumed} >= {"deploy", "apply in place", "Monitoring", "destroy"}
    assert "cloud.google.com/monitoring/api/v3/latency-n-retention" in text
    local = "\n".join(studies.dry_run(LOCAL))
    assert local.count("start the local stack") == 4 and "destroy" not in local


def test_a_budget_below_the_plan_refuses_to_start_and_says_what_would_bring_it_under(tmp_path, monkeypatch):
    plan = studies.make_plan(GCP)
    replan = lambda **changes: studies.make_plan(GCP, **changes)  # noqa: E731
    assert plans.over_budget(plan, plan.usd, replan) is None  # at the budget exactly: it starts
    refused = plans.over_budget(plan, 0.3, replan)
    assert refused.startswith(f"the study is predicted to cost US${plan.usd:.2f} on Google Cloud, above --budget "
                              "US$0.30: not started")
    assert re.search(r"--iterations 0,1 \(US\$0\.\d\d\)", refused)
    study = dataclasses.replace(GCP, protocol="study")
    assert "--protocol fast (US$" in plans.over_budget(studies.make_plan(study), 1.0,
                                                        lambda **c: studies.make_plan(study, **c))
    monkeypatch.setattr(studies, "STUDIES_DIR", tmp_path)
    with pytest.raises(VisitkitError, match="above --budget US\\$0.20: not started"):
        studies.run_study(GCP, budget=0.2, run=lambda *a, **k: pytest.fail("a run started"), log=lambda line: None)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(VisitkitError, match="--target gcp"):
        studies.run_study(LOCAL, budget=5, log=lambda line: None)


# ---- running it: the runner and Terraform faked ----------------------------------------------------
COMMITTED = {"iteration-0": "breakpoint-20261123-213523", "iteration-1": "breakpoint-20261125-191233",
             "iteration-2": "breakpoint-20261123-215100", "iteration-3": "breakpoint-20261123-214227"}


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """Iterations 0-3 (settings, README, study.json) and a studies folder in tmp_path, for the study to run in."""
    iterations = tmp_path / "iterations"
    for name in COMMITTED:
        (iterations / name).mkdir(parents=True)
        for file in ("settings.tfvars.json", "README.md", "study.json"):
            shutil.copy(ITERATIONS_DIR / name / file, iterations / name / file)
    monkeypatch.setattr(studies, "ITERATIONS_DIR", iterations)
    monkeypatch.setattr(studies, "STUDIES_DIR", tmp_path / "studies")
    return iterations


class FakeRunner:
    """runner.run: a committed run's results folder, copied where the run would make it (with `access` in its
    run.json on Google Cloud), or a failure for the iterations in `fail` (after making its folder)."""

    def __init__(self, iterations, fail=(), access=None):
        self.iterations, self.fail, self.access, self.configs = iterations, set(fail), access, []

    def __call__(self, config, log, *, publish):
        self.configs.append(config)
        name = config.iteration_dir.name
        made = config.resume or self.iterations / name / "results" / f"{COMMITTED[name]}"
        if config.resume is None:
            shutil.copytree(ITERATIONS_DIR / name / "results" / COMMITTED[name], made,
                            ignore=shutil.ignore_patterns("stack", "warm-up", "*.png", "locust*"))
            record = json.loads((made / "run.json").read_text())
            (made / "run.json").write_text(json.dumps({**record, "target": config.target, "access": self.access}))
        if name in self.fail:
            self.fail.discard(name)
            raise RuntimeError(f"{name} failed on purpose")
        folder = results.ResultsFolder(made)
        return folder, folder.summary()


def test_a_study_runs_each_iteration_in_order_and_writes_one_report(checkout):
    fake = FakeRunner(checkout)
    folder = studies.run_study(LOCAL, run=fake, log=lambda line: None)
    assert [config.iteration_dir.name for config in fake.configs] == list(COMMITTED)
    assert [config.load.shape_set for config in fake.configs] == [
        "spawn_rate=1,duration_s=210", "spawn_rate=4,duration_s=210", "spawn_rate=4,duration_s=100",
        "spawn_rate=4,duration_s=140"]
    assert not any(config.update_readme or config.destroy for config in fake.configs)
    state = read_state(folder)
    assert [entry["status"] for entry in state["runs"]] == ["finished"] * 4
    assert state["runs"][2]["results"].endswith(f"iteration-2/results/{COMMITTED['iteration-2']}")
    assert state["outcome"]["as_study"] == 4
    assert "**verdicts 4 of 4 as the study**" in (folder / "report.md").read_text()


def test_a_study_with_scaling_auto_runs_every_iteration_autoscaled_and_says_so(checkout):
    fake = FakeRunner(checkout)
    folder = studies.run_study(dataclasses.replace(LOCAL, scaling="auto"), run=fake, log=lambda line: None)
    assert [config.settings.scaling for config in fake.configs] == ["auto"] * 4
    assert folder.name.startswith("local-fast-auto-") and read_state(folder)["options"]["scaling"] == "auto"
    assert "protocol fast, scaling auto" in (folder / "report.md").read_text().splitlines()[0]
    with pytest.raises(VisitkitError, match="Cloud Run always autoscales"):
        studies.Options(target="gcp", project="demo-project", scaling="auto")


def test_a_failed_run_stops_the_study_leaves_the_deployment_up_and_resume_goes_on_from_it(checkout):
    fake, destroyed, said = FakeRunner(checkout, fail={"iteration-2"}, access="authenticated"), [], []
    with pytest.raises(RuntimeError, match="iteration-2 failed on purpose"):
        studies.run_study(GCP, run=fake, destroy=destroyed.append, log=said.append)
    assert destroyed == []  # left up for --resume
    folder = next((checkout.parent / "studies").iterdir())
    state = read_state(folder)
    assert [entry["status"] for entry in state["runs"]] == ["finished", "finished", "failed", "pending"]
    assert state["runs"][2]["error"] == "RuntimeError: iteration-2 failed on purpose"
    text = "\n".join(said)
    assert f"scripts/run-study --resume {folder}" in text
    assert re.search(r"terraform -chdir=\S+ destroy .*-var=project_id=demo-project -var=access=authenticated", text)
    # the first run decided the access; the later runs deploy with it
    assert [config.access for config in fake.configs] == [None, "authenticated", "authenticated"]

    resumed = studies.resumed_options(folder, keep=False)
    assert resumed == GCP
    studies.run_study(resumed, resume=folder, run=fake, destroy=destroyed.append, log=said.append)
    # iteration 2 again, in its own results folder (the runner's --resume), then iteration 3; one destroy at the end
    assert [(config.iteration_dir.name, config.resume is not None) for config in fake.configs[3:]] == [
        ("iteration-2", True), ("iteration-3", False)]
    assert len(destroyed) == 1 and "iteration-3/settings.tfvars.json" in " ".join(destroyed[0])
    state = read_state(folder)
    assert [entry["status"] for entry in state["runs"]] == ["finished"] * 4
    assert state["deployment"]["destroyed"] and state["outcome"]["as_study"] == 4


def test_keep_leaves_the_deployment_up_after_the_last_run(checkout):
    destroyed = []
    studies.run_study(dataclasses.replace(GCP, keep=True), run=FakeRunner(checkout), destroy=destroyed.append,
                      log=lambda line: None)
    assert destroyed == []


def test_a_first_run_that_fails_after_its_apply_says_how_to_destroy_what_it_deployed(checkout):
    said = []
    with pytest.raises(RuntimeError, match="iteration-0 failed on purpose"):
        studies.run_study(GCP, run=FakeRunner(checkout, fail={"iteration-0"}, access="authenticated"),
                          destroy=lambda command: pytest.fail("destroyed"), log=said.append)
    folder = next((checkout.parent / "studies").iterdir())
    assert read_state(folder)["deployment"]["access"] == "authenticated"  # as its run.json says the apply decided
    assert re.search(r"\$ terraform -chdir=\S+ destroy .*iteration-0/settings.tfvars.json .*-var=access=authenticated",
                     "\n".join(said))


def test_the_command_line_prints_the_plan_and_turns_a_wrong_option_into_one_line(capsys):
    from visitkit.cli import main

    assert main(["study", "--target", "gcp", "--project", "demo-project", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "the whole study on gcp, protocol fast" in out and "5. destroy the deployment" in out
    assert main(["study", "--iterations", "0,1", "--dry-run"]) == 0
    assert "iterations iteration-0, iteration-1 on local" in capsys.readouterr().out
    assert main(["study", "--budget", "1", "--dry-run"]) == 2
    assert "--budget caps what a study spends on Google Cloud" in capsys.readouterr().err

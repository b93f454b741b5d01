"""Every Google Cloud command in the docs (README, iteration READMEs, docs/) works as written: each
runs with --dry-run offline and prints a plan that shows the preflight, the organization-policy
check, the apply retry policy and the dead-letter topic."""
import json
import os
import re
import shlex
import subprocess

import pytest

from visitkit.paths import ROOT

pytestmark = pytest.mark.timeout(120)  # seconds: one dry run, ~1 s

DOCS = [ROOT / "README.md", *sorted(ROOT.glob("iterations/*/README.md")), *sorted(ROOT.glob("docs/*.md"))]
LINES = [line.strip() for doc in DOCS for line in re.sub(r"\\\n\s*", "", doc.read_text()).splitlines()]
COMMANDS = [line for line in LINES if line.startswith("scripts/run-iteration") and "--target gcp" in line]
GOOGLE_CLOUD_DOC = ROOT / "docs" / "google-cloud.md"


def dry_run(command, tmp_path):
    argv = shlex.split(command.replace(" P ", " visitkit-readme ").replace("--project P", "--project visitkit-readme"))
    if "--resume" in argv:  # the folder of a run that failed: one is made for the dry run
        folder = tmp_path / "resumed"
        folder.mkdir()
        iteration = argv[1].rstrip("/").rsplit("/", 1)[-1]
        (folder / "run.json").write_text(json.dumps({"iteration": iteration, "test": argv[argv.index("--test") + 1],
                                                     "target": "gcp", "steps_done": ["deploy"]}))
        argv[argv.index("--resume") + 1] = str(folder)
    env = {**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "none.json")}
    result = subprocess.run([str(ROOT / argv[0]), *argv[1:], "--dry-run"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_docs_first_google_cloud_command_lets_the_organization_policy_decide_access(tmp_path):
    first = next(line.strip() for line in GOOGLE_CLOUD_DOC.read_text().splitlines()
                 if line.startswith("scripts/run-iteration") and "--target gcp" in line)
    assert "--access" not in first  # it works in any project: in an organization that refuses allUsers too
    plan = dry_run(first, tmp_path)
    assert "access: auto, decided by the preflight from the organization policy" in plan
    assert "Organization Policy: access will be decided by the effective iam.allowedPolicyMemberDomains" in plan
    assert "-var=access=<public or authenticated, as the preflight decides>" in plan


def test_the_readme_shows_google_cloud_commands():
    assert len(COMMANDS) >= 6 and any("--access authenticated" in command for command in COMMANDS)
    assert any("iterations/iteration-4 " in command for command in COMMANDS)  # an iteration README's too
    assert any("--workers" in command for command in COMMANDS)  # iteration 5's, with its fleet


def test_an_iteration_whose_settings_say_authenticated_dry_runs_cleanly(tmp_path):
    iteration = tmp_path / "iteration-0"
    iteration.mkdir()
    settings = json.loads((ROOT / "iterations" / "iteration-0" / "settings.tfvars.json").read_text())
    (iteration / "settings.tfvars.json").write_text(json.dumps({**settings, "access": "authenticated"}))
    env = {**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "none.json")}
    result = subprocess.run([str(ROOT / "scripts" / "run-iteration"), str(iteration), "--test", "breakpoint",
                             "--target", "gcp", "--project", "visitkit-readme", "--dry-run"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "-var=access=authenticated" in result.stdout and "--auth id-token" in result.stdout
    assert "Organization Policy: the effective iam.allowedPolicyMemberDomains" in result.stdout
    assert "access will be decided" not in result.stdout  # the file's own choice is honoured


@pytest.mark.parametrize("command", COMMANDS)
def test_each_google_cloud_command_runs_as_a_dry_run(command, tmp_path):
    plan = dry_run(command, tmp_path)
    assert "preflight" in plan and "apply retry policy: up to 3 tries" in plan
    assert "visits-dead-letter" in plan and re.search(r"after \d+ delivery attempts", plan)
    assert "send one visit and see it stored" in plan
    if "--access authenticated" in command:
        assert "-var=access=authenticated" in plan and "--auth id-token" in plan
        assert "Organization Policy: the effective iam.allowedPolicyMemberDomains" in plan
    elif "--access public" in command:
        assert "-var=access=public" in plan and "--auth" not in plan
        assert "Organization Policy: the effective iam.allowedPolicyMemberDomains" in plan
    else:  # the default: the preflight decides
        assert "Organization Policy: access will be decided by the effective iam.allowedPolicyMemberDomains" in plan
        assert "-var=access=<public or authenticated, as the preflight decides>" in plan
    if "--workers" in command:  # a fleet: provisioned, run, destroyed before the counters are awaited
        assert re.search(r"^\d+\. provision the Locust fleet\n", plan, re.M) and "infra/loadgen apply" in plan
        assert plan.index("destroy the Locust fleet") < plan.index("wait for the counters to converge")
    if "--resume" in command:
        assert "(resumed: deploy;" in plan
    if "--destroy" in command:
        assert re.search(r"^\d+\. tear down$", plan, re.M)
    else:
        assert "leave the deployment running" in plan

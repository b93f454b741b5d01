"""`scripts/run-iteration ... --dry-run`, run for real as a subprocess: it prints the plan and
touches nothing. A fake `terraform` and `gcloud` first on PATH record any call, and the Google
credentials point nowhere, so a run that tried to deploy or read Google Cloud would show."""
import os
import re
import shutil
import subprocess

import pytest

from visitkit.paths import ROOT

pytestmark = pytest.mark.timeout(120)  # seconds: a dry run or two, each ~1 s

SCRIPT = ROOT / "scripts" / "run-iteration"
INFRA = ROOT / "infra"


@pytest.fixture
def sandbox(tmp_path):
    """A copy of iteration 1 and an environment whose terraform/gcloud only leave a trace."""
    iteration = tmp_path / "iterations" / "iteration-1"
    iteration.mkdir(parents=True)
    shutil.copy(ROOT / "iterations" / "iteration-1" / "settings.tfvars.json", iteration)
    bin_dir, trace = tmp_path / "bin", tmp_path / "called"
    bin_dir.mkdir()
    for tool in ("terraform", "gcloud"):
        fake = bin_dir / tool
        fake.write_text(f"#!/bin/sh\necho {tool} \"$@\" >> '{trace}'\nexit 1\n")
        fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "no-such-credentials.json"),
           "GOOGLE_CLOUD_PROJECT": "", "CLOUDSDK_CORE_PROJECT": ""}
    return iteration, env, trace


def dry_run(iteration, env, *args):
    result = subprocess.run([str(SCRIPT), str(iteration), "--test", "breakpoint", *args,
                             "--dry-run"], env=env, capture_output=True, text=True, timeout=60)
    return result


def command_lines(plan):
    return [line.strip()[2:] for line in plan.splitlines() if line.strip().startswith("$ ")]


def test_gcp_dry_run_prints_the_plan_and_touches_nothing(sandbox):
    iteration, env, trace = sandbox
    result = dry_run(iteration, env, "--target", "gcp", "--project", "demo-p", "--region", "us-central1",
                     "--duration", "90s")
    assert result.returncode == 0, result.stderr
    commands = command_lines(result.stdout)
    [apply] = [c for c in commands if c.startswith("terraform") and " apply " in c]
    # terraform runs in infra/ and reads this iteration's settings file
    var_file = next(arg for arg in apply.split() if arg.startswith("-var-file="))[len("-var-file="):]
    assert (INFRA / var_file).resolve() == (iteration / "settings.tfvars.json").resolve()
    assert "-var=project_id=demo-p" in apply and "-var=region=us-central1" in apply
    [locust] = [c for c in commands if " -m locust " in c]
    assert "--host '<base_url>'" in locust and "--shape breakpoint" in locust
    assert "duration_s=90" in locust
    text = result.stdout
    for metric in ("run.googleapis.com/request_latencies", "run.googleapis.com/request_count",
                   "run.googleapis.com/container/instance_count",
                   "pubsub.googleapis.com/subscription/num_undelivered_messages",
                   "pubsub.googleapis.com/subscription/oldest_unacked_message_age",
                   "firestore.googleapis.com/document/write_count"):
        assert metric in text
    assert text.index(apply) < text.index(locust) < text.index("request_latencies")
    # without --destroy, destroy is only suggested, never a step
    assert not any(" destroy " in c for c in commands)
    assert "clean up later" in text
    assert not trace.exists()
    assert not (iteration / "results").exists()


def test_gcp_dry_run_with_destroy_ends_with_terraform_destroy(sandbox):
    iteration, env, trace = sandbox
    result = dry_run(iteration, env, "--target", "gcp", "--project", "demo-p", "--destroy")
    assert result.returncode == 0, result.stderr
    commands = command_lines(result.stdout)
    assert commands[-1].startswith("terraform") and " destroy " in commands[-1]
    assert "-var=project_id=demo-p" in commands[-1]
    assert not trace.exists() and not (iteration / "results").exists()


def test_gcp_dry_run_needs_a_project(sandbox):
    iteration, env, _ = sandbox
    result = dry_run(iteration, env, "--target", "gcp")
    assert result.returncode != 0 and "--project" in result.stderr


def test_local_dry_run_names_the_stack_and_the_locust_command(sandbox):
    iteration, env, trace = sandbox
    result = dry_run(iteration, env)
    assert result.returncode == 0, result.stderr
    assert "start the local stack" in result.stdout
    [locust] = [c for c in command_lines(result.stdout) if " -m locust " in c and "--shape breakpoint" in c]
    assert "--shape breakpoint" in locust
    assert not (iteration / "results").exists()


def test_a_local_run_warms_the_stack_up_first_unless_told_not_to(sandbox):
    iteration, env, _ = sandbox
    plan = dry_run(iteration, env, "--warm-up-users", "7").stdout
    [warm] = [c for c in command_lines(plan) if " -m locust " in c and "--shape endurance" in c]
    assert "--stages 7:45" in warm and "/warm-up/" in warm
    assert plan.index("warm up the stack") < plan.index("read the totals before the load")
    skipped = dry_run(iteration, env, "--warm-up", "0").stdout
    assert "warm up" not in skipped and "--shape endurance" not in skipped
    refused = dry_run(iteration, env, "--warm-up", "30s", "--target", "https://example.invalid")
    assert refused.returncode != 0 and "--warm-up" in refused.stderr


def test_url_dry_run_aims_locust_at_the_url(sandbox):
    iteration, env, _ = sandbox
    result = dry_run(iteration, env, "--target", "https://example.invalid/")
    assert result.returncode == 0, result.stderr
    [locust] = [c for c in command_lines(result.stdout) if " -m locust " in c and "--shape breakpoint" in c]
    assert "--host https://example.invalid " in locust
    assert not (iteration / "results").exists()


def test_a_duration_in_the_shape_settings_is_not_overridden_by_the_default(sandbox):
    iteration, env, _ = sandbox
    result = dry_run(iteration, env, "--shape-set", "spawn_rate=15,duration_s=120")
    assert result.returncode == 0, result.stderr
    [locust] = [c for c in command_lines(result.stdout) if " -m locust " in c and "--shape breakpoint" in c]
    assert locust.count("duration_s=") == 1 and "duration_s=120" in locust


def test_duration_beats_a_duration_in_the_shape_settings(sandbox):
    iteration, env, _ = sandbox
    result = dry_run(iteration, env, "--shape-set", "duration_s=120", "--duration", "90s")
    assert result.returncode == 0, result.stderr
    [locust] = [c for c in command_lines(result.stdout) if " -m locust " in c and "--shape breakpoint" in c]
    assert re.search(r"--shape-set \S*duration_s=120,duration_s=90 ", locust)  # the later key wins


def test_the_warm_up_holds_60_percent_of_the_knee_on_this_machine():
    from visitkit.runs.config import WarmUp
    from visitkit.errors import RunError
    from visitkit.model.capacity import predict
    from visitkit.twin.profile import load_profile
    from visitkit.settings import load_settings

    # iteration 4 on none: the machine's knee (~1,000 users), not the platform's (~64,000)
    prediction = predict(load_settings(ROOT / "iterations" / "iteration-4"), load_profile("none"))
    warm = WarmUp.build(None, None, prediction)
    assert warm.users == round(0.6 * prediction.machine_knee_users) and warm.seconds == 45
    assert WarmUp.build("20s", 9, prediction) == WarmUp(9, 20)
    assert WarmUp.build("0", None, prediction) is None
    with pytest.raises(RunError):
        WarmUp.build("10s", 0, prediction)


def test_a_gcp_dry_run_with_workers_prints_the_fleets_steps_and_destroys_it_before_converging(sandbox):
    iteration, env, calls = sandbox
    result = dry_run(iteration, env, "--target", "gcp", "--project", "p", "--workers", "3", "--worker-type",
                     "e2-standard-8")
    assert result.returncode == 0, result.stderr
    names = [line.split(". ", 1)[1] for line in result.stdout.splitlines() if re.match(r"^\d+\. ", line)]
    fleet = names.index("provision the Locust fleet")
    assert names[fleet + 1:fleet + 4] == ["run the Locust test 'breakpoint' on the fleet", "destroy the Locust fleet",
                                          "wait for the counters to converge"]
    lines = command_lines(result.stdout)
    apply = next(c for c in lines if "loadgen apply" in c)
    assert "-var=workers=3" in apply and "-var=processes_per_worker=8" in apply
    assert any("node.py master --config run.conf" in c and "--expect-workers 24" in c for c in lines)
    assert any("node.py worker --config run.conf" in c and "--processes 8" in c for c in lines)
    assert any("loadgen destroy" in c for c in lines)
    assert "24 processes" in result.stdout and "USD per hour" in result.stdout


@pytest.mark.parametrize("args, error", [
    (["--target", "https://example.com", "--workers", "2"], "needs --project"),
    (["--worker-type", "e2-standard-4"], "use it with --workers"),
    (["--target", "gcp", "--project", "p", "--workers", "101"], "--workers must be 1 to 100"),
])
def test_fleet_options_are_checked(sandbox, args, error):
    iteration, env, _ = sandbox
    result = dry_run(iteration, env, *args)
    assert result.returncode != 0 and error in result.stderr


def test_keep_fleet_leaves_the_fleet_up_and_says_how_to_remove_it(sandbox):
    iteration, env, _ = sandbox
    result = dry_run(iteration, env, "--target", "gcp", "--project", "p", "--workers", "1", "--keep-fleet")
    assert result.returncode == 0, result.stderr
    assert "leave the Locust fleet running (--keep-fleet)" in result.stdout
    assert "destroy the Locust fleet" not in result.stdout and "loadgen destroy" in result.stdout

"""The docs' first Google Cloud command, rehearsed (--rehearse): every step of the real run on this
machine, with everything of ours real (the kit's own Terraform commands and config, the functions,
the Locust suite, the report) and only Google's control plane stood in for. Each rehearsal ends
with a report whose audit finds every acknowledged visit stored exactly once, and whose store figures,
read from the Monitoring stand-in (what the functions really logged), agree with it."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from visitkit.paths import ROOT

pytestmark = pytest.mark.timeout(600)

PROJECT = "visitkit-rehearsal"
# The docs' first command (docs/google-cloud.md, "One command per iteration"), with a short load.
FIRST_COMMAND = ["--test", "breakpoint", "--target", "gcp", "--project", PROJECT, "--region", "southamerica-east1"]
SHORT_LOAD = ["--duration", "10s", "--shape-set", "spawn_rate=2", "--destroy"]


def rehearse(tmp_path, iteration, *options):
    """Runs the kit's own command line on a copy of an iteration (its results stay out of the checkout)."""
    copy = tmp_path / "iterations" / iteration
    copy.mkdir(parents=True)
    for name in ("settings.tfvars.json", "README.md", "study.json"):
        if (ROOT / "iterations" / iteration / name).exists():
            shutil.copy(ROOT / "iterations" / iteration / name, copy / name)
    env = {key: value for key, value in os.environ.items()
           if key not in ("GOOGLE_APPLICATION_CREDENTIALS", "FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST")}
    result = subprocess.run([sys.executable, "-m", "visitkit", "run", str(copy), *FIRST_COMMAND, *SHORT_LOAD,
                             "--rehearse", *options], cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)
    folders = sorted((copy / "results").glob("rehearsal-breakpoint-*"))
    assert result.returncode == 0, (result.stdout[-6000:], result.stderr[-3000:])
    assert len(folders) == 1
    return result, folders[0]


def test_a_dry_run_of_a_rehearsal_makes_and_starts_nothing(tmp_path):
    """--dry-run prints a rehearsal's steps (the fleet's too) without a folder, a file or a port of its own."""
    copy = tmp_path / "iterations" / "iteration-0"
    copy.mkdir(parents=True)
    shutil.copy(ROOT / "iterations" / "iteration-0" / "settings.tfvars.json", copy)
    for fleet in ([], ["--workers", "2"]):
        result = subprocess.run([sys.executable, "-m", "visitkit", "run", str(copy), *FIRST_COMMAND, "--rehearse",
                                 *fleet, "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "rehearsal: start Google's stand-ins" in result.stdout
        assert sorted(p.name for p in copy.iterdir()) == ["settings.tfvars.json"]


def samples(folder):
    return [json.loads(line) for line in (folder / "server-samples.jsonl").read_text().splitlines()]


def check_audit(folder):
    """The report's audit: every acknowledged visit stored exactly once. Returns the summary."""
    summary = json.loads((folder / "summary.json").read_text())
    headline = summary["headline"]
    assert headline["visits.acknowledged"] > 0
    assert headline["visits.lost"] == 0 and headline["visits.duplicated"] == 0
    assert summary["audit"]["method"] == "exact" and summary["audit"]["lost_ids"] == []
    assert headline["visits.stored"] == headline["visits.acknowledged"]
    return summary


def check_report(folder):
    summary = check_audit(folder)
    headline = summary["headline"]
    # The store's figures come from the Monitoring stand-in: visits counted from the store's own log lines,
    # visits accepted from inc-counter's 202s in the front's log. Monitoring's minutes are whole, so the
    # window holds the load's visits and may hold some of the warm-up's, never more than Firestore holds
    # (the rehearsal's emulator starts empty).
    last = samples(folder)[-1]
    assert last["source"] == "gcp-monitoring"
    stored = sum(json.loads((folder / "convergence.jsonl").read_text().splitlines()[-1])["totals"].values())
    assert headline["visits.acknowledged"] <= last["store"]["accepted"] <= stored, (last["store"], stored)
    assert headline["visits.stored"] <= last["store"]["counted"] <= stored, (last["store"], stored)
    # The store's deliveries are never 0 while visits were stored (a push that ends before its visit's 202 does
    # may fall on the other side of the window's first minute: not held to the count). Its rates come from
    # Monitoring's minutes: a load shorter than two of them may leave them unknown (None), never 0.
    assert last["store"]["delivered"] > 0, last["store"]
    assert summary["store"]["delivered_per_s"] != 0 and summary["store"]["throughput_per_s"] != 0, summary["store"]
    return summary


def test_the_first_command_of_a_public_push_iteration_runs_through(tmp_path):
    result, folder = rehearse(tmp_path, "iteration-0")
    summary = check_report(folder)
    assert "access: public" in result.stdout or summary.get("settings", {}).get("access") in (None, "auto")
    assert "what a real run does differently" in result.stdout
    assert not (ROOT / "infra" / "terraform.tfstate").exists()


@pytest.mark.slow  # ~50 s; CI rehearses the docs' first command, the public one above
def test_an_organization_refusing_all_users_is_rehearsed_authenticated(tmp_path):
    result, folder = rehearse(tmp_path, "iteration-0", "restricted-org")
    check_report(folder)
    assert "access auto: authenticated" in result.stdout
    run = json.loads((folder / "run.json").read_text())
    assert run["access"] == "authenticated"


@pytest.mark.slow
def test_iteration_7s_pull_store_is_rehearsed_with_its_build(tmp_path):
    from visitkit.rehearsal import terraform

    _, folder = rehearse(tmp_path, "iteration-7")
    check_report(folder)  # its deliveries are the puller's batches, not store-inc-counter's requests
    builds = terraform.builds(folder / "rehearsal" / "terraform")
    assert len(builds) == 1 and builds[0]["exit"] == 0, builds  # the puller's image, as gcloud would build it

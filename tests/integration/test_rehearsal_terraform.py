"""The rehearsal's Terraform (visitkit.rehearsal.terraform): the kit's own terraform command lines
(visitkit.cloud.gcp.terraform_commands) run for real, init, apply, output -json and destroy, against the
schema stand-in in its rehearsal mode; for iteration 0 (push, public) and iteration 7 (pull: the apply runs
gcloud for the puller's image, the recording gcloud takes it). What they apply is read back per function
and checked against the iteration's settings; outputs are in Google's shapes; nothing lands in infra/.
Needs terraform, go, and the providers' schemas in ../shared/terraform/ (or $SHARED_DIR)."""
import os
import re
import subprocess

import pytest
from helpers import rehearsal_missing

from visitkit.catalogue import CATALOGUE, PUSH_FUNCTION
from visitkit.cloud import monitoring
from visitkit.cloud.gcp import parse_outputs, terraform_commands
from visitkit.paths import INFRA_DIR, ITERATIONS_DIR, SETTINGS_FILE
from visitkit.rehearsal import terraform as rehearsal
from visitkit.settings import load_settings


pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(bool(rehearsal_missing()), reason=rehearsal_missing() or "ready")]

PROJECT = "visitkit-rehearsal-tf"  # its own: tests of the whole rehearsal use visitkit-rehearsal
REGION = "southamerica-east1"
RUN_APP = re.compile(rf"^https://([a-z0-9-]+)-{rehearsal.PROJECT_NUMBER}\.{REGION}\.run\.app$")


def terraform(argv, env):
    done = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def declared_outputs():
    return set(re.findall(r'^output "([a-z0-9_]+)"', (INFRA_DIR / "outputs.tf").read_text(), re.MULTILINE))


def check_kept_in_folder(folder):
    """What Terraform writes is in the rehearsal's folder (its state, lock file, data folder, the zip), not in
    infra/ (other checkouts' tests may run Terraform in infra/ meanwhile: a state file there must not be ours)."""
    tree = folder / "tree"
    for written in (tree / "infra" / "terraform.tfstate", tree / "infra" / ".terraform.lock.hcl",
                    folder / "data" / "providers", tree / "build" / "functions.zip"):
        assert written.exists(), written
    for name in ("terraform.tfstate", "terraform.tfstate.backup"):
        state = INFRA_DIR / name
        assert not state.exists() or PROJECT not in state.read_text(errors="replace"), state


def deploy(folder, iteration):
    """init, apply and output -json as the kit runs them; the outputs, the applied state and the environment."""
    env = rehearsal.environment(folder)
    commands = terraform_commands(ITERATIONS_DIR / iteration, PROJECT, REGION, rehearsal.infra_dir(folder),
                                  access="public")
    assert commands["apply"][1] == f"-chdir={rehearsal.infra_dir(folder)}"
    terraform(commands["init"], env)
    terraform(commands["apply"], env)
    outputs = parse_outputs(terraform(commands["output"], env))
    return commands, env, outputs, rehearsal.applied_state(folder)


def check_outputs(outputs, applied):
    """Every output declared, and the ones the kit reads (gcp.py, monitoring.LOG_METRIC_OUTPUTS) in Google's shapes."""
    # terraform output -json leaves out a null output: here the edge's address (no edge_protection) and the load
    # generator's account (public access), which the kit reads with .get().
    assert declared_outputs() - set(outputs) == {"edge_address", "load_generator_service_account"}
    assert outputs["base_url"] == f"https://{REGION}-{PROJECT}.cloudfunctions.net"
    assert outputs["project_id"] == PROJECT and outputs["region"] == REGION
    assert outputs["subscription_name"] == "visits-store-inc-counter" and outputs["topic_name"] == "visits"
    for output in monitoring.LOG_METRIC_OUTPUTS.values():
        assert outputs[output].startswith("visitkit_")
    assert outputs["push_service_account"] == f"visitkit-push@{PROJECT}.iam.gserviceaccount.com"
    assert outputs["build_service_account"] == f"visitkit-build@{PROJECT}.iam.gserviceaccount.com"
    assert outputs["alert_policies"]["failed_deliveries"].startswith(f"projects/{PROJECT}/alertPolicies/")
    assert set(outputs["function_urls"]) == set(CATALOGUE)
    for name, function in applied.functions.items():
        if function.kind == "function":
            assert outputs["function_urls"][name] == f"{outputs['base_url']}/{CATALOGUE[name].service}" == function.url
        else:
            assert outputs["function_urls"][name] == function.uri
        assert RUN_APP.match(function.uri).group(1) == CATALOGUE[name].service
    if "function_audiences" in outputs:
        assert outputs["function_audiences"] == {name: f.uri for name, f in applied.functions.items()}


def check_against_settings(applied, iteration):
    settings = load_settings(ITERATIONS_DIR / iteration / SETTINGS_FILE)
    assert set(applied.functions) == set(settings.functions) == set(CATALOGUE)
    for name, function in applied.functions.items():
        wanted = settings.functions[name]
        assert (function.max_instances, function.min_instances, function.concurrency) == (
            wanted.max_instances, wanted.min_instances, wanted.concurrency), name
        assert (function.cpu, function.memory, function.timeout_seconds) == (
            wanted.cpu or wanted.effective_cpu, wanted.memory, wanted.timeout_seconds), name
        assert function.environment["THREADS"] == str(wanted.concurrency)
        assert function.environment["GOOGLE_CLOUD_PROJECT"] == PROJECT
        assert function.environment["STORE_MODE"] == settings.store_mode
        assert function.service == CATALOGUE[name].service


def destroy(commands, env, folder):
    terraform(commands["destroy"], env)
    assert rehearsal.resources(rehearsal.applied_state(folder)) == []
    check_kept_in_folder(folder)


def test_iteration_0_push_public(tmp_path):
    folder = tmp_path / "terraform"
    commands, env, outputs, state = deploy(folder, "iteration-0")
    check_kept_in_folder(folder)
    applied = rehearsal.deployed(state)
    check_outputs(outputs, applied)
    check_against_settings(applied, "iteration-0")
    functions = applied.functions
    # iteration 0's own figures, as its README gives them
    assert {(f.max_instances, f.concurrency, f.cpu) for f in functions.values()} == {(2, 1, "0.167")}
    assert all(f.kind == "function" for f in functions.values())
    for name, function in functions.items():
        wanted = ("allUsers",) if CATALOGUE[name].public else (f"serviceAccount:{outputs['push_service_account']}",)
        assert function.invokers == wanted, name
    store_uri = functions[PUSH_FUNCTION].uri
    assert applied.push == rehearsal.PushConfig(
        endpoint=store_uri, service_account_email=outputs["push_service_account"], audience=store_uri)
    assert rehearsal.builds(folder) == []  # push mode runs no gcloud
    # Applying again changes nothing: the kit's retried apply meets a settled plan.
    assert "No changes." in terraform(commands["apply"], env)
    destroy(commands, env, folder)


def test_iteration_7_pull_builds_the_puller_with_gcloud(tmp_path):
    folder = tmp_path / "terraform"
    commands, env, outputs, state = deploy(folder, "iteration-7")
    applied = rehearsal.deployed(state)
    check_outputs(outputs, applied)
    check_against_settings(applied, "iteration-7")
    store = applied.functions[PUSH_FUNCTION]
    assert store.kind == "service" and (store.min_instances, store.max_instances, store.cpu, store.memory) == (
        1, 1, "1", "1Gi")
    assert store.environment["PULL_SUBSCRIPTION"] == "visits-store-inc-counter"
    assert store.invokers == () and applied.push is None
    (call,) = rehearsal.builds(folder)
    assert call["exit"] == 0, call
    build = call["build"]
    image = next(r["values"]["build_config"][0]["image_uri"] for r in rehearsal.resources(state)
                 if r["type"] == "google_cloud_run_v2_service")
    assert build["images"] == [image] and build["pack"]["image"] == image
    assert build["pack"]["env"] == {"GOOGLE_FUNCTION_TARGET": "store_inc_counter", "GOOGLE_PYTHON_VERSION": "3.12.x"}
    assert build["pack"]["builder"] == "gcr.io/buildpacks/builder:google-22"
    assert build["staging_dir"] == f"gs://{PROJECT}-visitkit-source/staging"
    assert build["logging"] == "CLOUD_LOGGING_ONLY"
    assert build["source"].startswith(f"gs://{PROJECT}-visitkit-source/functions-")
    assert build["service_account"] == (f"projects/{PROJECT}/serviceAccounts/"
                                        f"{outputs['build_service_account']}")
    destroy(commands, env, folder)


def test_without_the_rehearsal_mode_the_stand_in_refuses_to_apply(tmp_path):
    folder = tmp_path / "terraform"
    env = {**rehearsal.environment(folder), "SCHEMA_PROVIDER_REHEARSAL": ""}
    commands = terraform_commands(ITERATIONS_DIR / "iteration-0", PROJECT, REGION, rehearsal.infra_dir(folder),
                                  access="public")
    terraform(commands["init"], env)
    done = subprocess.run(commands["apply"], env={**os.environ, **env}, capture_output=True, text=True)
    assert done.returncode != 0
    assert "schema-only stand-in provider" in done.stdout + done.stderr
    assert rehearsal.resources(rehearsal.applied_state(folder)) == []

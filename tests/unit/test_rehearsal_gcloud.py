"""The rehearsal's recording gcloud (visitkit.rehearsal.gcloud_stand_in): `gcloud builds submit` refused where
gcloud or Cloud Build would refuse it, every call recorded. The puller's build command of infra/pull.tf before
issue 47 is refused (its build account could read neither the staged source nor create the logs bucket), the
command pull.tf runs now is accepted; the whole command line runs through sh, as Terraform's local-exec runs it."""
import io
import json
import os
import subprocess

import pytest

from visitkit.paths import INFRA_DIR
from visitkit.rehearsal import gcloud_stand_in as gcloud
from visitkit.rehearsal.terraform import GCLOUD

PROJECT = "visitkit-test"
REGION = "southamerica-east1"
IMAGE = f"{REGION}-docker.pkg.dev/{PROJECT}/visitkit-functions/store-inc-counter:0123abcd"
SOURCE = f"gs://{PROJECT}-visitkit-source/functions-0123abcd.zip"
ACCOUNT = f"projects/{PROJECT}/serviceAccounts/visitkit-build@{PROJECT}.iam.gserviceaccount.com"
TARGET = "GOOGLE_FUNCTION_TARGET=store_inc_counter"

# infra/pull.tf's command before issue 47
OLD = (f"gcloud builds submit '{SOURCE}' --project='{PROJECT}' --region='{REGION}' --service-account='{ACCOUNT}' "
       f"--default-buckets-behavior=regional-user-owned-bucket --pack='image={IMAGE},env={TARGET}'")
# infra/pull.tf's command now, as Terraform renders it (jsonencode: compact, keys sorted)
BUILD_CONFIG = {
    "images": [IMAGE],
    "options": {"logging": "CLOUD_LOGGING_ONLY"},
    "steps": [{"args": ["build", IMAGE, "--network", "cloudbuild", "--env", TARGET, "--env",
                        "GOOGLE_PYTHON_VERSION=3.12.x", "--builder", "gcr.io/buildpacks/builder:google-22"],
               "entrypoint": "pack", "name": "gcr.io/k8s-skaffold/pack"}],
}
NEW = (f"printf '%s' '{json.dumps(BUILD_CONFIG, separators=(',', ':'), sort_keys=True)}' | "
       f"gcloud builds submit '{SOURCE}' --config=/dev/stdin --project='{PROJECT}' --region='{REGION}' "
       f"--service-account='{ACCOUNT}' --gcs-source-staging-dir='gs://{PROJECT}-visitkit-source/staging'")


def shell(command, tmp_path):
    """`command` run by sh with the recording gcloud first on PATH: the result and what gcloud recorded."""
    log = tmp_path / "gcloud.jsonl"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "gcloud").exists():
        (bin_dir / "gcloud").symlink_to(GCLOUD)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", gcloud.LOG_ENV: str(log)}
    done = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True, timeout=30)
    return done, [json.loads(line) for line in log.read_text().splitlines()]


def call(argv, config=None, tmp_path=None):
    """One in-process call: (exit status, stderr)."""
    if config is not None:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        argv = [*argv, f"--config={path}"]
    out, err = io.StringIO(), io.StringIO()
    return gcloud.run(argv, environ={}, stdout=out, stderr=err), err.getvalue()


def test_the_old_build_command_is_refused(tmp_path):
    done, (record,) = shell(OLD, tmp_path)
    assert done.returncode == 1
    assert 'ERROR: (gcloud.builds.submit) build rehearsal-build completed with status "FAILURE"' in done.stderr
    # gcloud staged the source in the regional default bucket, which the build account cannot read ...
    assert record["build"]["staging_dir"] == f"gs://{PROJECT}_{REGION}_cloudbuild/source"
    assert f"may not read gs://{PROJECT}_{REGION}_cloudbuild" in done.stderr
    # ... and the regional logs bucket needs an account that may create buckets
    assert "-southamerica-east1-cloudbuild-logs" in done.stderr and "may not create buckets" in done.stderr
    assert record["exit"] == 1 and record["argv"][:3] == ["gcloud", "builds", "submit"]
    assert record["build"]["python_version"] is None  # and the builder's latest Python, not python312's


def test_the_new_build_command_is_accepted_and_recorded(tmp_path):
    done, (record,) = shell(NEW, tmp_path)
    assert done.returncode == 0, done.stderr
    build = record["build"]
    assert record["exit"] == 0 and record["problems"] == []
    assert build["staging_dir"] == f"gs://{PROJECT}-visitkit-source/staging" and build["source"] == SOURCE
    assert build["logging"] == "CLOUD_LOGGING_ONLY" and build["logs_bucket"] is None
    assert build["pack"] == {"image": IMAGE, "builder": "gcr.io/buildpacks/builder:google-22",
                             "env": {"GOOGLE_FUNCTION_TARGET": "store_inc_counter", "GOOGLE_PYTHON_VERSION": "3.12.x"}}
    assert build["images"] == [IMAGE] and build["service_account"] == ACCOUNT


def test_pull_tf_runs_the_new_command():
    """The flags NEW stands for are pull.tf's (pull.tftest.hcl checks the rendered command itself)."""
    pull = (INFRA_DIR / "pull.tf").read_text()
    command = pull[pull.index('command = join(" ", ['):]
    command = command[:command.index("])")]
    for flag in ("gcloud builds submit", "--config=/dev/stdin", "--gcs-source-staging-dir=", "--service-account="):
        assert flag in command
    assert "--default-buckets-behavior" not in command and "--pack" not in command
    for setting in ('logging = "CLOUD_LOGGING_ONLY"', '"GOOGLE_PYTHON_VERSION=',
                    '"gcr.io/buildpacks/builder:google-22"'):
        assert setting in pull


def test_a_logs_bucket_of_ours_and_a_comma_joined_env_are_refused(tmp_path):
    """--gcs-log-dir needs Storage Admin on the bucket; --pack carries one env, which pack takes whole."""
    command = (f"gcloud builds submit '{SOURCE}' --project='{PROJECT}' --region='{REGION}' "
               f"--service-account='{ACCOUNT}' --gcs-source-staging-dir='gs://{PROJECT}-visitkit-source/staging' "
               f"--gcs-log-dir='gs://{PROJECT}-visitkit-source/logs' "
               f"--pack='^|^image={IMAGE}|env={TARGET},GOOGLE_PYTHON_VERSION=3.12.x'")
    done, (record,) = shell(command, tmp_path)
    assert done.returncode == 1
    assert "is not Storage Admin" in done.stderr
    assert record["build"]["pack"]["env"] == {
        "GOOGLE_FUNCTION_TARGET": "store_inc_counter,GOOGLE_PYTHON_VERSION=3.12.x"}
    assert "pack takes one VAR=VALUE per --env" in done.stderr


@pytest.mark.parametrize("argv, code, message", [
    (["builds", "submit", SOURCE, "--bogus"], 2, "ERROR: (gcloud.builds.submit) unrecognized arguments: --bogus"),
    (["builds", "submit", SOURCE, f"--pack=image={IMAGE}", "--config=x.json"], 2,
     "argument --config: At most one of --config | --pack | --tag can be specified."),
    (["builds", "submit", SOURCE, f"--pack=image={IMAGE},env=A=1,B=2"], 2,
     "argument --pack: valid keys are [builder, env, image]; received: B"),
    (["builds", "submit", SOURCE, "--pack=image=docker.io/x/y"], 1,
     "Invalid value for [--pack]: Image value must be in the *gcr.io* or *pkg.dev* namespace"),
    (["builds", "submit", SOURCE, "--pack=builder=x"], 1, "Invalid value for [--pack]: Image value must not be empty."),
    (["builds", "submit", SOURCE, f"--pack=image={IMAGE}", "--default-buckets-behavior=bogus"], 2,
     "argument --default-buckets-behavior: Invalid choice: 'bogus'."),
    (["builds", "submit", SOURCE, "--config=/nonexistent.json"], 1, "Unable to read file [/nonexistent.json]"),
    (["run", "deploy", "x"], 1, "ERROR: (gcloud) the rehearsal's gcloud stands in for `gcloud builds submit` only"),
])
def test_what_gcloud_itself_refuses(argv, code, message):
    status, stderr = call([*argv, f"--project={PROJECT}", f"--region={REGION}"])
    assert status == code and message in stderr, stderr


@pytest.mark.parametrize("config, message", [
    ({"steps": [{"name": "x"}], "bogus": 1}, "as build config: .bogus: unused"),
    ({"steps": [{"name": "x"}], "options": {"logging": "BOGUS"}}, "as build config: .options.logging: unused"),
    ({"steps": []}, "as build config: config must list at least one step"),
    ({"steps": [{"name": "x"}], "source": {"storageSource": {"bucket": "b"}}}, "config cannot specify source"),
])
def test_build_configs_gcloud_refuses(tmp_path, config, message):
    status, stderr = call(["builds", "submit", SOURCE, f"--project={PROJECT}"], config, tmp_path)
    assert status == 1 and message in stderr, stderr


def test_a_service_account_build_must_say_where_its_logs_go(tmp_path):
    config = {**BUILD_CONFIG, "options": {}}
    status, stderr = call(["builds", "submit", SOURCE, f"--project={PROJECT}", f"--region={REGION}",
                           f"--service-account={ACCOUNT}", f"--gcs-source-staging-dir=gs://{PROJECT}-visitkit-source/s"],
                          config, tmp_path)
    assert status == 1 and "INVALID_ARGUMENT" in stderr and "CLOUD_LOGGING_ONLY" in stderr


def test_the_builder_must_have_the_python(tmp_path):
    args = BUILD_CONFIG["steps"][0]["args"]
    step = {**BUILD_CONFIG["steps"][0], "args": [*args[:-1], "gcr.io/buildpacks/builder:latest"]}
    config = {**BUILD_CONFIG, "steps": [step]}
    status, stderr = call(["builds", "submit", SOURCE, f"--project={PROJECT}", f"--region={REGION}",
                           f"--service-account={ACCOUNT}", f"--gcs-source-staging-dir=gs://{PROJECT}-visitkit-source/s"],
                          config, tmp_path)
    assert status == 1 and "has no Python 3.12.x" in stderr


def test_default_staging_buckets_are_named_as_gcloud_names_them():
    assert gcloud.staging_bucket("my.google-proj", "us-east1", regional=True) == "my_elgoog-proj_us-east1_cloudbuild"
    assert gcloud.staging_bucket("example.com:p", "us-east1", regional=False) == "example_com_p_cloudbuild"
    # regional only with regional-user-owned-bucket and a region other than global
    line = gcloud.parse(["builds", "submit", SOURCE, f"--pack=image={IMAGE}", f"--project={PROJECT}",
                         "--default-buckets-behavior=regional-user-owned-bucket"])
    assert gcloud.build_of(line).staging_dir == f"gs://{PROJECT}_cloudbuild/source"

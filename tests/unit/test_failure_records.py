"""Every failure's text kept (scripts/visitkit/cloud/failures.py): the record a failed step leaves in
its results folder, its redaction, the versions in it, and a record made a test of the catalogue."""
import argparse
import json
import subprocess
from pathlib import Path

import pytest

from visitkit.cloud import failures, firstrun
from visitkit.errors import GcpError, RunError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "terraform"
ALL_FIXTURES = sorted(FIXTURES.glob("*.txt"))
PROJECT, NUMBER = "acme-prod-4821", "918273645501"


def as_if_from(text, project=PROJECT, number=NUMBER):
    """A recorded text as a real-looking project of someone else's would print it."""
    return text.replace("visitkit-demo", project).replace("123456789012", number)


def classified(text):
    return (firstrun.propagation_reason(text), firstrun.stop_hint(text),
            firstrun.fresh_name(text, firstrun.created_names(text)) is not None)


# --- CommandFailed ---------------------------------------------------------------------------------

def test_a_failed_command_keeps_its_argv_exit_code_and_output():
    failed = failures.CommandFailed(["terraform", "apply", "-auto-approve"], 1, "lots of text")
    assert isinstance(failed, GcpError)
    assert (failed.command, failed.exit_code, failed.output) == (["terraform", "apply", "-auto-approve"], 1,
                                                                "lots of text")
    assert str(failed) == "command failed (1): terraform apply -auto-approve"
    assert str(failures.CommandFailed(["x"], 2, "", "terraform apply failed:\nError: y")).startswith("terraform apply")


# --- redaction -------------------------------------------------------------------------------------

def test_project_ids_and_numbers_become_placeholders_where_google_names_them():
    text = as_if_from((FIXTURES / "retry-api-disabled-with-details.txt").read_text())
    redacted = failures.redact(text)
    assert PROJECT not in redacted and NUMBER not in redacted
    assert '"consumer": "projects/PROJECT_ID"' in redacted and "overview?project=PROJECT_ID" in redacted
    number = failures.redact(as_if_from((FIXTURES / "retry-api-just-enabled.txt").read_text()))
    assert "in project PROJECT_NUMBER before" in number and NUMBER not in number


def test_service_accounts_keep_their_shape_and_other_addresses_go():
    text = ("Service account service-918273645501@gcp-sa-pubsub.iam.gserviceaccount.com does not exist. "
            "You must grant Storage Object Viewer permission to visitkit-build@acme-prod-4821.iam.gserviceaccount.com; "
            "918273645501-compute@developer.gserviceaccount.com and acme-prod-4821@appspot.gserviceaccount.com too. "
            '-var=invokers=["user:jane.doe@example.com","group:ops+gcp@corp.example.org"]')
    redacted = failures.redact(text)
    assert "service-PROJECT_NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com does not exist" in redacted
    assert "visitkit-build@PROJECT_ID.iam.gserviceaccount.com" in redacted
    assert "PROJECT_NUMBER-compute@developer.gserviceaccount.com" in redacted
    assert "PROJECT_ID@appspot.gserviceaccount.com" in redacted
    assert '["user:EMAIL","group:EMAIL"]' in redacted
    assert "jane" not in redacted and "corp.example" not in redacted and NUMBER not in redacted


def test_organization_customer_and_billing_ids_become_placeholders():
    text = ("Error setting billing account \"0A1B2C-3D4E5F-6A7B8C\" for project \"projects/acme-prod-4821\": "
            "googleapi: Error 403: The caller does not have permission on billingAccounts/0A1B2C-3D4E5F-6A7B8C\n"
            "Constraint constraints/iam.allowedPolicyMemberDomains of organizations/246813579024 allows customer "
            "C03abc4de only.")
    redacted = failures.redact(text)
    assert redacted.count("BILLING_ACCOUNT_ID") == 2 and "organizations/ORGANIZATION_ID" in redacted
    assert "customer CUSTOMER_ID only" in redacted and "246813579024" not in redacted and "C03abc4de" not in redacted


def test_buckets_become_placeholders_unless_made_of_placeholders_already():
    text = ("Error: Failed to get existing workspaces: querying Cloud Storage failed: storage: bucket doesn't exist "
            "gs://jane-terraform-state/env/default.tfstate; buckets/jane-uploads; "
            "Access to bucket jane-sources denied. "
            "failed to download archive gs://gcf-v2-sources-918273645501-europe-west3/get-counter/function-source.zip: "
            "Access to bucket gcf-v2-sources-918273645501-europe-west3 denied; "
            "projects/_/buckets/acme-prod-4821-visitkit-source")
    redacted = failures.redact(text, project=PROJECT)
    assert "gs://BUCKET/env/default.tfstate" in redacted and "buckets/BUCKET;" in redacted
    assert "Access to bucket BUCKET denied." in redacted and "jane" not in redacted
    assert "Access to bucket gcf-v2-sources-PROJECT_NUMBER-europe-west3 denied" in redacted
    assert "buckets/PROJECT_ID-visitkit-source" in redacted


def test_a_given_project_is_redacted_wherever_it_appears():
    text = "google_project_service.this: Creation complete after 2s [id=acme-prod-4821/pubsub.googleapis.com]"
    assert "[id=PROJECT_ID/pubsub.googleapis.com]" in failures.redact(text, project=PROJECT)
    assert PROJECT in failures.redact(text)  # named where Google's texts do not name projects
    assert failures.redact("europe-docker.pkg.dev/acme-prod-4821/images/acme--prod--4821__x") == \
        "europe-docker.pkg.dev/PROJECT_ID/images/PROJECT_ID__x"
    assert failures.redact("path /srv/jane/infra", extra=["/srv/jane"]) == "path REDACTED/infra"


def test_redaction_is_idempotent_and_drops_terminal_colours():
    text = "\x1b[31mError: \x1b[0m" + as_if_from((FIXTURES / "retry-build-bucket-denied.txt").read_text())
    once = failures.redact(text)
    assert "\x1b" not in once and failures.redact(once) == once


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.stem)
def test_a_redacted_text_is_classified_as_the_text_was(path):
    text = as_if_from(path.read_text())
    redacted = failures.redact(text, project=PROJECT)
    assert PROJECT not in redacted and NUMBER not in redacted
    assert classified(redacted) == classified(text) == classified(path.read_text())


# --- the record ------------------------------------------------------------------------------------

def failed_apply():
    output = as_if_from((FIXTURES / "fresh-service-account-get-denied.txt").read_text())
    command = ["terraform", f"-chdir={Path.home()}/visitkit/infra", "apply", "-auto-approve",
               "-var=project_id=acme-prod-4821", '-var=invokers=["user:jane.doe@example.com"]']
    return failures.CommandFailed(command, 1, output, "terraform apply failed:\nError: ...")


VERSIONS = {"kit": "0.2.0", "terraform": "1.11.4", "providers": {"registry.terraform.io/hashicorp/google": "6.50.0"}}


def test_a_failure_record_holds_the_command_its_exit_code_and_its_whole_text_redacted():
    record = failures.failure_record("deploy", failed_apply(), VERSIONS)
    assert record["format"] == failures.FORMAT and record["step"] == "deploy" and record["exit_code"] == 1
    assert record["command"] == ["terraform", "-chdir=~/visitkit/infra", "apply", "-auto-approve",
                                 "-var=project_id=PROJECT_ID", '-var=invokers=["user:EMAIL"]']
    assert record["error"] == failures.redact(failed_apply().output, PROJECT)
    assert "Permission 'iam.serviceAccounts.get' denied" in record["error"]
    assert (record["kit_version"], record["terraform_version"]) == ("0.2.0", "1.11.4")
    assert record["providers"] == {"registry.terraform.io/hashicorp/google": "6.50.0"}
    dumped = json.dumps(record)
    assert PROJECT not in dumped and NUMBER not in dumped and "jane" not in dumped and str(Path.home()) not in dumped


def test_the_project_of_the_command_is_redacted_in_the_output_too():
    """Terraform's own lines name the project bare ([id=P/pubsub.googleapis.com]): the command says which it is."""
    output = ("google_project_service.this[\"pubsub.googleapis.com\"]: Creation complete after 2s "
              "[id=acme-prod-4821/pubsub.googleapis.com]\nError: something else")
    error = failures.CommandFailed(["terraform", "apply", "-var=project_id=acme-prod-4821"], 1, output)
    assert "[id=PROJECT_ID/pubsub.googleapis.com]" in failures.failure_record("deploy", error, None)["error"]


def test_a_failure_that_ran_no_command_keeps_its_message():
    record = failures.failure_record("preflight", GcpError("project acme-prod-4821 has no billing account"), None,
                                     project=PROJECT)
    assert record["command"] is None and record["exit_code"] is None
    assert record["error"] == "project PROJECT_ID has no billing account"
    assert record["kit_version"] is None and record["providers"] == {}


def test_write_failure_writes_failure_json_in_the_results_folder(tmp_path):
    path = failures.write_failure(tmp_path / "results" / "run-1", "deploy", failed_apply(), VERSIONS)
    assert path == tmp_path / "results" / "run-1" / "failure.json"
    assert json.loads(path.read_text()) == failures.failure_record("deploy", failed_apply(), VERSIONS)


def test_send_home_names_the_file_and_the_fixture_command():
    line = failures.send_home("results/run-1/failure.json")
    assert "\n" not in line and "results/run-1/failure.json (ids replaced by placeholders)" in line
    assert "`scripts/kit fixture results/run-1/failure.json`" in line and "issue or pull request" in line


# --- versions ---------------------------------------------------------------------------------------

LOCK = '''# This file is maintained automatically by "terraform init".
provider "registry.terraform.io/hashicorp/archive" {
  version     = "2.7.1"
  constraints = "2.7.1"
  hashes = [
    "h1:abc=",
  ]
}

provider "registry.terraform.io/hashicorp/google" {
  version     = "6.50.0"
  constraints = "6.50.0"
  hashes = [
    "h1:def=",
    "zh:0123",
  ]
}
'''


def terraform_says(stdout, calls=None):
    def run(argv, **options):
        if calls is not None:
            calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, stdout, "")
    return run


def test_versions_come_from_the_lock_file_and_terraform(tmp_path):
    (tmp_path / ".terraform.lock.hcl").write_text(LOCK)
    calls = []
    found = failures.versions(tmp_path, run=terraform_says(json.dumps(
        {"terraform_version": "1.11.4", "platform": "linux_amd64", "provider_selections": {},
         "terraform_outdated": False}), calls))
    assert found["providers"] == {"registry.terraform.io/hashicorp/archive": "2.7.1",
                                  "registry.terraform.io/hashicorp/google": "6.50.0"}
    assert found["terraform"] == "1.11.4" and found["kit"] == failures.kit_version() and found["kit"]
    assert calls == [["terraform", f"-chdir={tmp_path}", "version", "-json"]]


def test_without_a_lock_file_the_providers_are_terraforms_selections(tmp_path):
    found = failures.versions(tmp_path, run=terraform_says(json.dumps(
        {"terraform_version": "1.9.0", "provider_selections": {"registry.terraform.io/hashicorp/google": "6.50.0"}})))
    assert found["providers"] == {"registry.terraform.io/hashicorp/google": "6.50.0"}


@pytest.mark.parametrize("terraform", ["missing", "garbage", "list"])
def test_versions_tolerate_a_missing_or_odd_terraform(tmp_path, terraform):
    def run(argv, **options):
        if terraform == "missing":
            raise FileNotFoundError("terraform")
        return subprocess.CompletedProcess(argv, 1, "not json" if terraform == "garbage" else "[]", "")
    found = failures.versions(tmp_path / "nowhere", run=run)
    assert found["terraform"] is None and found["providers"] == {} and found["kit"]


def test_the_kit_version_falls_back_to_pyproject(monkeypatch):
    def not_installed(name):
        raise failures.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(failures.metadata, "version", not_installed)
    assert failures.kit_version() == failures.tomllib.loads(
        (failures.REPO_DIR / "pyproject.toml").read_text())["project"]["version"]


# --- a failure made a test ------------------------------------------------------------------------

def test_a_failure_becomes_a_reported_fixture_naming_where_it_came_from(tmp_path):
    record = failures.write_failure(tmp_path / "run", "Deploy (apply)", failed_apply(), VERSIONS)
    path = failures.fixture_from_failure(record, tmp_path)
    assert path.parent == tmp_path and path.name.startswith("reported-deploy-apply-") and path.suffix == ".txt"
    assert path.read_text().rstrip("\n") == json.loads(record.read_text())["error"].rstrip("\n")
    about = json.loads(path.with_suffix(".source.json").read_text())
    assert about["from"].endswith("run/failure.json") and about["step"] == "Deploy (apply)"
    assert about["terraform_version"] == "1.11.4" and "error" not in about
    assert failures.fixture_from_failure(record, tmp_path) == path  # the same text, the same file


def test_a_reported_text_fails_the_catalogue_test_until_the_catalogue_knows_it(tmp_path):
    unknown = failures.CommandFailed(["terraform", "apply"], 1,
                                     "│ Error: Error creating Widget: googleapi: Error 418: I'm a teapot.")
    known = failures.CommandFailed(["terraform", "apply"], 1, as_if_from(
        (FIXTURES / "retry-pubsub-agent-missing.txt").read_text()))
    for error, catalogued in ((unknown, False), (known, True)):
        path = failures.fixture_from_failure(failures.write_failure(tmp_path / "r", "deploy", error), tmp_path)
        text = path.read_text()
        assert bool(firstrun.propagation_reason(text) or firstrun.stop_hint(text)) is catalogued


def test_the_fixture_command_prints_the_path_and_the_test_to_run(tmp_path, capsys):
    record = failures.write_failure(tmp_path / "run", "deploy", failed_apply(), VERSIONS)
    top = argparse.ArgumentParser(prog="visitkit")
    failures.add_fixture_parser(top.add_subparsers(dest="command", required=True))
    args = top.parse_args(["fixture", str(record), "--fixtures-dir", str(tmp_path)])
    assert args.handler(args) == 0
    written = sorted(tmp_path.glob("reported-*.txt"))
    out = capsys.readouterr().out
    assert len(written) == 1 and str(written[0]) in out
    assert f"pytest tests/unit/test_firstrun.py -q -k {written[0].stem}" in out
    assert top.parse_args(["fixture", "x.json"]).fixtures_dir == failures.FIXTURES_DIR


def test_the_fixture_command_says_what_it_could_not_read(tmp_path):
    args = argparse.Namespace(failure_json=tmp_path / "missing.json", fixtures_dir=tmp_path)
    with pytest.raises(RunError, match="missing.json"):
        failures.fixture_command(args)

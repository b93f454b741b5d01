"""Every failure's text kept: the command that failed, its exit code and all it printed, written to
the results folder's failure.json with the ids that name a project, an organization or a person
replaced by placeholders, so that it can be sent to the project as it is, or made a test of the
error catalogue (firstrun.py) with `scripts/kit fixture RESULTS/failure.json`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import subprocess
import tomllib
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from visitkit.errors import GcpError, RunError

FORMAT = 1  # failure.json's layout; a change of its fields makes it 2
FAILURE_FILE = "failure.json"
REPO_DIR = Path(__file__).resolve().parents[3]
FIXTURES_DIR = REPO_DIR / "tests" / "fixtures" / "terraform"
SEND_HOME = ("The full text is in {path} (ids replaced by placeholders): send it to the project in an issue or pull "
             "request, or make it a test with `scripts/kit fixture {path}`.")


def send_home(path: str | Path) -> str:
    """SEND_HOME for one failure.json."""
    return SEND_HOME.format(path=path)


class CommandFailed(GcpError):
    """A command that failed, with all it printed (the message itself stays short)."""

    def __init__(self, command: Iterable[str], exit_code: int, output: str | None, message: str | None = None):
        self.command, self.exit_code, self.output = list(command), exit_code, output or ""
        super().__init__(message or f"command failed ({exit_code}): {shlex.join(self.command)}")


# --- redaction -------------------------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
ID = r"[a-z][a-z0-9-]{4,28}[a-z0-9]"  # a project id
NUMBER = r"\d{6,}"  # a project number (12 digits in practice)
# Where Google's texts and the kit's commands name a project, by id or by number.
PROJECT_IN = tuple(re.compile(pattern) for pattern in (
    rf"projects/({ID}|{NUMBER})\b",
    rf"\bproject(?:_id)?=({ID}|{NUMBER})\b",
    rf"\bproject ['\"]({ID}|{NUMBER})['\"]",
    rf"\bin project ({ID}|{NUMBER}) before",
    rf"@(?!gcp-sa-)({ID})\.iam\.gserviceaccount\.com",  # gcp-sa-pubsub is a service agent's domain
    rf"\b({ID})@appspot\.gserviceaccount\.com",
    rf"-docker\.pkg\.dev/({ID})/",
    rf"\bservice-({NUMBER})@",
    rf"\b({NUMBER})-compute@",
    rf"\b({NUMBER})@cloud(?:build|services)\.gserviceaccount\.com",
    rf"\bgcf-v2-(?:sources|uploads)-({NUMBER})-",
))
BUCKET = re.compile(r"(gs://|\bbuckets/|\bAccess to bucket )([\w.-]+)")


def projects_named(text: str | None) -> set[str]:
    """The project ids and numbers a text names where Google's texts name them."""
    return {found for pattern in PROJECT_IN for found in pattern.findall(ANSI.sub("", text or ""))}


def redact(text: str | None, project: str | Iterable[str] | None = None, extra: Iterable[str] = ()) -> str:
    """`text` with placeholders for project ids and numbers (`project`: one id or number or several,
    besides those the text names itself), e-mail addresses other than service accounts' (those keep
    their shape: service-PROJECT_NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com), organization, customer
    and billing account ids, and the names of buckets not already made of placeholders; `extra`
    strings become REDACTED."""
    text = ANSI.sub("", text or "")
    given = [project] if isinstance(project, str) else list(project or ())
    found = projects_named(text) | {str(value) for value in given if value}
    text = EMAIL.sub(lambda email: email[0] if email[0].endswith(".gserviceaccount.com") else "EMAIL", text)
    for value in sorted(found, key=len, reverse=True):
        placeholder = "PROJECT_NUMBER" if value.isdigit() else "PROJECT_ID"
        for form in {value, value.replace("-", "--")}:  # Artifact Registry's image names double the dashes
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(form)}(?![A-Za-z0-9])", placeholder, text)
    text = re.sub(r"\borganizations/\d+", "organizations/ORGANIZATION_ID", text)
    text = re.sub(r"\bC0[0-9A-Za-z]{5,}\b", "CUSTOMER_ID", text)
    text = re.sub(r"\b[0-9A-Fa-f]{6}-[0-9A-Fa-f]{6}-[0-9A-Fa-f]{6}\b", "BILLING_ACCOUNT_ID", text)
    text = BUCKET.sub(lambda bucket: bucket[0] if "PROJECT_" in bucket[2] else bucket[1] + "BUCKET", text)
    for value in extra:
        text = text.replace(value, "REDACTED")
    return text


# --- the record ------------------------------------------------------------------------------------

LOCKED = re.compile(r'provider\s+"([^"]+)"\s*\{[^}]*?\bversion\s*=\s*"([^"]+)"', re.S)


def kit_version() -> str | None:
    try:
        return metadata.version("visitkit")
    except metadata.PackageNotFoundError:
        pass
    try:
        return tomllib.loads((REPO_DIR / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None


def versions(infra_dir: str | Path,
             run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run) -> dict[str, Any]:
    """The kit's version, Terraform's and the providers' (from infra/.terraform.lock.hcl when there is
    one, else from `terraform version -json`); None or {} for what cannot be known."""
    try:
        providers = dict(LOCKED.findall((Path(infra_dir) / ".terraform.lock.hcl").read_text()))
    except OSError:
        providers = {}
    try:
        result = run(["terraform", f"-chdir={infra_dir}", "version", "-json"], capture_output=True, text=True,
                     check=False, timeout=60, env={**os.environ, "CHECKPOINT_DISABLE": "1"})
        info = json.loads(result.stdout or "")
    except (OSError, ValueError, subprocess.SubprocessError):
        info = {}
    info = info if isinstance(info, dict) else {}
    return {"kit": kit_version(), "terraform": info.get("terraform_version"),
            "providers": providers or info.get("provider_selections") or {}}


def failure_record(step: str, error: BaseException, versions: Mapping[str, Any] | None,
                   project: str | None = None) -> dict[str, Any]:
    """What failure.json holds: the step, the command, its exit code and its whole output (or the
    error's message when it was no command), redacted, and the versions that produced it."""
    command = getattr(error, "command", None)
    text = getattr(error, "output", "") or str(error)
    projects = [project] if project else []
    projects += sorted(projects_named(shlex.join(command or []) + "\n" + text))
    home = str(Path.home())

    def clean(value: str) -> str:
        return redact(value.replace(home, "~") if len(home) > 1 else value, projects)

    versions = versions or {}
    return {"format": FORMAT, "step": clean(step),
            "command": [clean(str(arg)) for arg in command] if command else None,
            "exit_code": getattr(error, "exit_code", None),
            "error": clean(text),
            "kit_version": versions.get("kit"), "terraform_version": versions.get("terraform"),
            "providers": versions.get("providers") or {}}


def write_failure(results_dir: str | Path, step: str, error: BaseException, versions: Mapping[str, Any] | None = None,
                  project: str | None = None) -> Path:
    """Writes RESULTS/failure.json; returns its path."""
    path = Path(results_dir) / FAILURE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(failure_record(step, error, versions, project), indent=2) + "\n")
    return path


# --- a failure made a test -------------------------------------------------------------------------

def fixture_from_failure(failure_json: str | Path, fixtures_dir: str | Path = FIXTURES_DIR) -> Path:
    """Writes the failure's text as tests/fixtures/terraform/reported-STEP-HASH.txt, and beside it
    reported-STEP-HASH.source.json (where it came from, with the versions); returns the .txt's path.
    test_firstrun.py fails on it until the catalogue classifies it."""
    source = Path(failure_json)
    record = json.loads(source.read_text())
    text = redact(record["error"]).rstrip("\n") + "\n"
    slug = re.sub(r"[^a-z0-9]+", "-", str(record.get("step") or "failure").lower()).strip("-") or "failure"
    path = Path(fixtures_dir) / f"reported-{slug}-{hashlib.sha256(text.encode()).hexdigest()[:8]}.txt"
    path.write_text(text)
    about = {key: value for key, value in record.items() if key != "error"}
    about["from"] = redact(str(source).replace(str(Path.home()), "~"))
    path.with_suffix(".source.json").write_text(json.dumps(about, indent=2) + "\n")
    return path


def fixture_command(args: argparse.Namespace) -> int:
    try:
        path = fixture_from_failure(args.failure_json, args.fixtures_dir)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise RunError(f"cannot make a test of {args.failure_json}: {error}") from error
    print(f"wrote {path} (where it came from: {path.with_suffix('.source.json').name})")
    print(f"test: .venv/bin/python -m pytest tests/unit/test_firstrun.py -q -k {path.stem}")
    print("it fails until scripts/visitkit/cloud/firstrun.py knows the text: a propagation error to try again "
          "(PROPAGATION_ERRORS) or an error that stops with what to do (STOP_HINTS)")
    return 0


def add_fixture_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """`scripts/kit fixture FAILURE_JSON`."""
    fixture = subparsers.add_parser("fixture", help="make a failure.json a test of the error catalogue", description=(
        "Writes a results folder's failure.json as tests/fixtures/terraform/reported-*.txt: "
        "tests/unit/test_firstrun.py fails on it until the catalogue (scripts/visitkit/cloud/firstrun.py) knows it."))
    fixture.add_argument("failure_json", type=Path, help="a results folder's failure.json")
    fixture.add_argument("--fixtures-dir", type=Path, default=FIXTURES_DIR,
                         help="where to write it (default: tests/fixtures/terraform)")
    fixture.set_defaults(handler=fixture_command)
    return fixture

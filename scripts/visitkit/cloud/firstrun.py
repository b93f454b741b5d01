"""What makes the first apply on a brand-new Google Cloud project work (the checks before it are
preflight.py's): `terraform apply` tried again, with growing waits, only on the errors Google Cloud
gives while a change made moments earlier is still propagating (an API just enabled, a service
agent not created yet, a role not visible yet): the catalogue below, matched on the sentence and on
what Terraform prints besides it (the ErrorInfo `reason`). An error not in the catalogue gets one more
try when it is a 403 or 404 naming something the same apply created or granted (an apply is
idempotent, so a try costs only time); any other error stops at once.

The error texts come from real runs and provider issues; each pattern has a recorded example in
tests/fixtures/terraform/, and its test says which patterns must and must not match.
"""
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from visitkit.cloud.failures import CommandFailed

# subprocess.run's signature, as stream_command and the tests' fakes take it: run(argv, check=, text=,
# capture_output=, echo=) -> the finished process, its output as text.
RunCommand = Callable[..., subprocess.CompletedProcess[str]]

APPLY_TRIES = 3
APPLY_WAITS_S = (60, 180)  # before the 2nd and the 3rd try


@dataclass(frozen=True)
class Propagation:
    reason: str
    pattern: re.Pattern[str]
    min_wait_s: int = 0  # what Google says must pass before the same call can succeed
    reasons: tuple[str, ...] = ()  # ErrorInfo or googleapi reasons that mean it whatever the sentence says


FIRESTORE_REUSE_WAIT_S = 300  # "you cannot immediately re-use the database ID until after 5 minutes"

PROPAGATION_ERRORS = (
    # googleapi prints the reason twice: ErrorInfo's "SERVICE_DISABLED" and the legacy ", accessNotConfigured".
    Propagation("an API was enabled moments ago",
                re.compile(r"has not been used in project \S+ before or it is disabled"),
                reasons=("SERVICE_DISABLED", "accessNotConfigured")),
    # \w+ rather than \d+ for the project number: redacted texts say PROJECT_NUMBER.
    Propagation("a Google service agent does not exist yet",
                re.compile(r"service-\w+@gcp-sa-[\w-]+\.iam\.gserviceaccount\.com (does not exist|not found)|"
                           r"Service account service-\w+@gcp-sa-[\w-]+\S* does not exist", re.I)),
    Propagation("a new service account is not visible yet",
                re.compile(r"Service account \S+@\S+\.iam\.gserviceaccount\.com does not exist|"
                           r"serviceAccounts/\S+ (was )?not found", re.I)),
    Propagation("a role granted moments ago is not visible yet",
                re.compile(r"missing permission on the build service account|"
                           r"Access to bucket gcf-v2-sources-\S+ denied|"
                           r"does not have permission to write logs to Cloud Logging|"
                           r"Permission \"artifactregistry\.repositories\.(upload|download)Artifacts\" denied|"
                           r"Permission 'iam\.serviceaccounts\.actAs' denied|"
                           r"iam\.serviceAccounts\.actAs.*(denied|lacks)", re.I)),
    # A new project's service agents get their roles a little after the API is on; their names
    # run to several words ("Artifact Registry Service Agent", "Google Cloud Run Service Agent").
    Propagation("a Google service agent's roles are not visible yet",
                re.compile(r"Permission denied while using the (?:[\w-]+ )+?Service Agent|"
                           r"Cloud Run Service Agent (?:does not have|must have) permission|"
                           r"(?:may|might) take a few minutes (?:before all necessary permissions are propagated|"
                           r"to propagate)", re.I)),
    # Any repository: gcf-artifacts (Cloud Functions' own) or infra/build.tf's visitkit-functions, whose
    # metadata the Cloud Functions service agent reads on a first build.
    Propagation("the Cloud Functions service agent cannot read an image repository yet (a first build in the project)",
                re.compile(r"Unable to retrieve the repository metadata for projects/[^/\s]+/locations/[^/\s]+/"
                           r"repositories/[\w-]+")),
    Propagation("Firestore's (default) database was deleted less than 5 minutes ago",
                re.compile(r"Database ID '\(default\)' is not available in project \S+ Please retry in \d+ seconds"),
                min_wait_s=FIRESTORE_REUSE_WAIT_S),
    Propagation("two changes to one IAM policy met (retried by design)",
                re.compile(r"Error 409: There were concurrent policy changes", re.I)),
    # An alert policy on a log-based metric created in the same apply (Monitoring's own words).
    Propagation("a log-based metric created moments ago is not visible to Monitoring yet",
                re.compile(r"Cannot find metric\(s\) that match type = \"logging\.googleapis\.com/user/|"
                           r"The metric referenced by the provided filter is unknown", re.I)),
)

# Errors that stop the apply, with what to do (the error itself says what happened).
STOP_HINTS = (
    (re.compile(r"do not belong to a permitted customer"),
     "an organization policy refuses one of the members granted a role: for the public functions' allUsers, run with "
     "--access authenticated (or leave access to auto); for Pub/Sub's service agent (service-NUMBER@gcp-sa-pubsub...), "
     "set \"dead_letter\": false in the settings file (no dead-letter topic, no grant to the agent: a delivery that "
     "always fails is then retried until its message expires), or have an Organization Policy Administrator run "
     "`gcloud org-policies reset iam.allowedPolicyMemberDomains --project=PROJECT` (docs/google-cloud.md: First run)"),
    (re.compile(r"Database already exists"),
     "the project has a (default) Firestore database: if a deployment of yours was destroyed minutes ago, wait 5 "
     "minutes and run the same command again; otherwise import it (infra/README.md) or use another project"),
    (re.compile(r"Billing must be enabled|billing-enabled|UREQ_PROJECT_BILLING_NOT_FOUND"),
     "link a billing account: `gcloud billing projects link PROJECT --billing-account=ACCOUNT_ID`"),
)


ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # Terraform colours its output even into a pipe


def plain(output: str | None) -> str:
    return ANSI.sub("", output or "")


# A long-running operation's error is a google.rpc.Code ("Error code 7, message: ..."), a googleapi
# error an HTTP status ("googleapi: Error 403: ..."): the codes as the statuses they stand for.
RPC_STATUS = {3: 400, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 13: 500, 14: 503, 16: 401}


def statuses(output: str | None) -> set[int]:
    """The HTTP statuses of the errors in a Terraform output."""
    text = plain(output)
    found = {int(code) for code in re.findall(r"\bError (\d{3})\b", text)}
    return found | {RPC_STATUS[int(code)] for code in re.findall(r"\bError code (\d+), message:", text)
                    if int(code) in RPC_STATUS}


def reasons(output: str | None) -> set[str]:
    """The reasons Google gave: ErrorInfo's `"reason": "SERVICE_DISABLED"` in the details Terraform
    prints, and the legacy reason googleapi appends to a message (`..., accessNotConfigured`)."""
    text = plain(output)
    legacy = re.findall(r", ([a-z][A-Za-z]+)(?=\.?[ \t]*$|\. )", text, re.M)  # at a message's end
    return set(re.findall(r'"reason":\s*"(\w+)"', text)) | set(legacy)


def propagation_error(output: str | None) -> Propagation | None:
    """The propagation error a failed apply met (worth another try), or None to stop."""
    text, found = plain(output), reasons(output)
    return next((known for known in PROPAGATION_ERRORS
                 if known.pattern.search(text) or found.intersection(known.reasons)), None)


def propagation_reason(output: str | None) -> str | None:
    """Why a failed apply is worth another try, or None to stop."""
    known = propagation_error(output)
    return known.reason if known else None


def stop_hint(output: str | None) -> str | None:
    """What to do about an error that stops the apply, where the kit knows it; else None."""
    return next((hint for pattern, hint in STOP_HINTS if pattern.search(plain(output))), None)


# What an apply announces it created or changed: `NAME: Creation complete after 2s [id=ID]`.
DONE = re.compile(r"^\S+: (?:Creation|Modifications) complete after \S+ \[\w+=(.+)\]\s*$", re.M)
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
PROGRESS = re.compile(r"^\S+: (?:Creating|Modifying|Destroying|Reading|Refreshing|Still \w+|\w+ complete)\b")
WHERE = re.compile(r"^[│ \t]*(?:with \S+|on \S+ line \d+.*|\d+: .*)$")  # the error's resource and source line


def created_names(output: str | None) -> set[str]:
    """The ids an apply announced it created or changed, with the e-mail addresses in them and their
    last part (`visits` of projects/P/topics/visits, `pubsub.googleapis.com` of P/pubsub.googleapis.com)."""
    names: set[str] = set()
    for made in DONE.findall(plain(output)):
        names |= {made, made.rsplit("/", 1)[-1], *EMAIL.findall(made)}
    return {name for name in names if len(name) >= 4}


def error_text(output: str | None) -> str:
    """The error blocks alone: from the first `Error:` on, without progress lines or the resource's address."""
    lines = plain(output).splitlines()
    start = next((i for i, line in enumerate(lines) if "Error:" in line), len(lines))
    return "\n".join(line for line in lines[start:] if not PROGRESS.match(line) and not WHERE.match(line))


def fresh_name(output: str | None, names: Iterable[str]) -> str | None:
    """What a 403 or 404 error names of what this apply created or granted (`names`), else None."""
    if not statuses(output) & {403, 404}:
        return None
    text = error_text(output)
    return next((name for name in sorted(names, key=len, reverse=True)
                 if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text)), None)


def error_key(output: str | None) -> frozenset[str]:
    """One error's identity across tries (the summary lines, numbers aside)."""
    return frozenset(re.sub(r"\d+", "N", line.strip()) for line in plain(output).splitlines() if "Error:" in line)


def error_lines(output: str | None, most: int = 12) -> str:
    """Terraform's error block(s), for a short message."""
    lines = plain(output).splitlines()
    start = next((i for i, line in enumerate(lines) if "Error:" in line), max(0, len(lines) - most))
    return "\n".join(line.rstrip() for line in lines[start:start + most])


def stream_command(argv: Sequence[str], check: bool = False, text: bool = True, capture_output: bool = False,
                   echo: bool = True, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """subprocess.run that, when capturing, still shows the output as it comes (an apply takes
    minutes); the signature of subprocess.run, so tests pass a fake."""
    if not capture_output:
        return subprocess.run(argv, check=check, text=text, env=env)
    lines = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as process:
        assert process.stdout is not None  # stdout=PIPE
        for line in process.stdout:
            lines.append(line)
            if echo:
                sys.stdout.write(line)
                sys.stdout.flush()
    return subprocess.CompletedProcess(argv, process.returncode, "".join(lines), "")


def apply_with_retries(argv: Sequence[str], run: RunCommand = stream_command,
                       sleep: Callable[[float], None] = time.sleep, log: Callable[[str], None] = print,
                       tries: int = APPLY_TRIES, waits: Sequence[float] = APPLY_WAITS_S) -> None:
    """Runs terraform apply; on a propagation error waits and tries again, up to `tries` times; on an
    error not in the catalogue that names something this apply created or granted, one more try
    (once per distinct error). Raises CommandFailed with the last output."""
    made: set[str] = set()
    extra: set[frozenset[str]] = set()  # the errors not in the catalogue given one more try
    known_failures, attempt = 0, 0
    while True:
        attempt += 1
        result = run(argv, check=False, text=True, capture_output=True)
        if result.returncode == 0:
            return
        output = (result.stdout or "") + (result.stderr or "")
        made |= created_names(output)
        known, key = propagation_error(output), error_key(output)
        if known is not None and attempt < tries + len(extra):
            known_failures += 1
            wait = max(waits[min(known_failures - 1, len(waits) - 1)], known.min_wait_s)
            log(f"terraform apply failed because {known.reason}: Google Cloud is still propagating it; "
                f"trying again in {wait} s (try {attempt + 1} of {tries + len(extra)})")
            sleep(wait)
            continue
        named = fresh_name(output, made) if known is None and key not in extra else None
        if named:
            extra.add(key)
            log(f"terraform apply failed on an error not in the catalogue that names {named}, which this apply "
                f"created or granted minutes ago: trying once more in {waits[0]} s (an apply is idempotent). "
                f"Please send this failure text to the project (an issue or pull request), so that the catalogue "
                f"learns it:\n{error_lines(output)}")
            sleep(waits[0])
            continue
        why = f" after {attempt} tries ({known.reason})" if known else ""
        if known is None and key in extra:
            why = f" after {attempt} tries (one more try did not mend this error, which is not in the catalogue)"
        hint = stop_hint(output) if known is None else None
        raise CommandFailed(argv, result.returncode, output, f"terraform apply failed{why}:\n{error_lines(output)}"
                            + (f"\nWhat to do: {hint}" if hint else ""))


def retry_policy_text(tries: int = APPLY_TRIES, waits: Sequence[float] = APPLY_WAITS_S) -> str:
    listed = "; ".join(known.reason + (f" (then at least {known.min_wait_s} s)" if known.min_wait_s else "")
                      for known in PROPAGATION_ERRORS)
    return (f"up to {tries} tries, waiting {' then '.join(f'{w} s' for w in waits)}, only when the error is "
            f"a known propagation error ({listed}); one more try for an error not in that catalogue that is a "
            f"403 or 404 naming something the same apply created or granted; any other error stops at once")

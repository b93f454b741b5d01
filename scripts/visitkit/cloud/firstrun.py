"""What makes the first apply on a brand-new Google Cloud project work (the checks before it are
preflight.py's): `terraform apply` tried again, with growing waits, only on the errors Google Cloud
gives while a change made moments earlier is still propagating (an API just enabled, a service
agent not created yet, a role not visible yet). Any other error stops at once.

The error texts come from real runs and provider issues; each pattern has a recorded example in
tests/fixtures/terraform/, and its test says which patterns must and must not match.
"""
import re
import subprocess
import sys
import time
from dataclasses import dataclass

from visitkit.errors import GcpError

APPLY_TRIES = 3
APPLY_WAITS_S = (60, 180)  # before the 2nd and the 3rd try


@dataclass(frozen=True)
class Propagation:
    reason: str
    pattern: re.Pattern
    min_wait_s: int = 0  # what Google says must pass before the same call can succeed


FIRESTORE_REUSE_WAIT_S = 300  # "you cannot immediately re-use the database ID until after 5 minutes"

PROPAGATION_ERRORS = (
    Propagation("an API was enabled moments ago",
                re.compile(r"has not been used in project \S+ before or it is disabled|\bSERVICE_DISABLED\b")),
    Propagation("a Google service agent does not exist yet",
                re.compile(r"service-\d+@gcp-sa-[\w-]+\.iam\.gserviceaccount\.com (does not exist|not found)|"
                           r"Service account service-\d+@gcp-sa-[\w-]+\S* does not exist", re.I)),
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
    Propagation("Cloud Functions' own image repository is not ready yet (a first build in the project)",
                re.compile(r"Unable to retrieve the repository metadata for projects/[^/\s]+/locations/[^/\s]+/"
                           r"repositories/gcf-artifacts")),
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
     "--access authenticated; for a Google service agent, an Organization Policy Administrator must run `gcloud "
     "org-policies reset iam.allowedPolicyMemberDomains --project=PROJECT` (README: First run)"),
    (re.compile(r"Database already exists"),
     "the project has a (default) Firestore database: if a deployment of yours was destroyed minutes ago, wait 5 "
     "minutes and run the same command again; otherwise import it (infra/README.md) or use another project"),
    (re.compile(r"Billing must be enabled|billing-enabled|UREQ_PROJECT_BILLING_NOT_FOUND"),
     "link a billing account: `gcloud billing projects link PROJECT --billing-account=ACCOUNT_ID`"),
)


def propagation_error(output):
    """The propagation error a failed apply met (worth another try), or None to stop."""
    return next((known for known in PROPAGATION_ERRORS if known.pattern.search(output or "")), None)


def propagation_reason(output):
    """Why a failed apply is worth another try, or None to stop."""
    known = propagation_error(output)
    return known.reason if known else None


def stop_hint(output):
    """What to do about an error that stops the apply, where the kit knows it; else None."""
    return next((hint for pattern, hint in STOP_HINTS if pattern.search(output or "")), None)


def error_lines(output, most=12):
    """Terraform's error block(s), for a short message."""
    lines = (output or "").splitlines()
    start = next((i for i, line in enumerate(lines) if "Error:" in line), max(0, len(lines) - most))
    return "\n".join(line.rstrip() for line in lines[start:start + most])


def stream_command(argv, check=False, text=True, capture_output=False, echo=True):
    """subprocess.run that, when capturing, still shows the output as it comes (an apply takes
    minutes); the signature of subprocess.run, so tests pass a fake."""
    if not capture_output:
        return subprocess.run(argv, check=check, text=text)
    lines = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
        for line in process.stdout:
            lines.append(line)
            if echo:
                sys.stdout.write(line)
                sys.stdout.flush()
    return subprocess.CompletedProcess(argv, process.returncode, "".join(lines), "")


def apply_with_retries(argv, run=stream_command, sleep=time.sleep, log=print, tries=APPLY_TRIES,
                       waits=APPLY_WAITS_S):
    """Runs terraform apply; on a propagation error waits and tries again, up to `tries` times."""
    for attempt in range(1, tries + 1):
        result = run(argv, check=False, text=True, capture_output=True)
        if result.returncode == 0:
            return
        output = (result.stdout or "") + (result.stderr or "")
        known = propagation_error(output)
        if known is None or attempt == tries:
            why = f" after {attempt} tries ({known.reason})" if known else ""
            hint = stop_hint(output) if known is None else None
            raise GcpError(f"terraform apply failed{why}:\n{error_lines(output)}" + (f"\nWhat to do: {hint}" if hint else ""))
        wait = max(waits[min(attempt - 1, len(waits) - 1)], known.min_wait_s)
        log(f"terraform apply failed because {known.reason}: Google Cloud is still propagating it; "
            f"trying again in {wait} s (try {attempt + 1} of {tries})")
        sleep(wait)


def retry_policy_text(tries=APPLY_TRIES, waits=APPLY_WAITS_S):
    reasons = "; ".join(known.reason + (f" (then at least {known.min_wait_s} s)" if known.min_wait_s else "")
                        for known in PROPAGATION_ERRORS)
    return (f"up to {tries} tries, waiting {' then '.join(f'{w} s' for w in waits)}, only when the error is "
            f"a known propagation error ({reasons}); any other error stops at once")

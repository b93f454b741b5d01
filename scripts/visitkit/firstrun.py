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
                           r"Permission 'iam\.serviceaccounts\.actAs' denied|"
                           r"iam\.serviceAccounts\.actAs.*(denied|lacks)|"
                           r"Permission denied while using the \w+ Service Agent", re.I)),
    Propagation("two changes to one IAM policy met (retried by design)",
                re.compile(r"Error 409: There were concurrent policy changes", re.I)),
)


def propagation_reason(output):
    """Why a failed apply is worth another try (a propagation error), or None to stop."""
    for known in PROPAGATION_ERRORS:
        if known.pattern.search(output or ""):
            return known.reason
    return None


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
        reason = propagation_reason(output)
        if reason is None or attempt == tries:
            why = f" after {attempt} tries ({reason})" if reason else ""
            raise GcpError(f"terraform apply failed{why}:\n{error_lines(output)}")
        wait = waits[min(attempt - 1, len(waits) - 1)]
        log(f"terraform apply failed because {reason}: Google Cloud is still propagating it; "
            f"trying again in {wait} s (try {attempt + 1} of {tries})")
        sleep(wait)


def retry_policy_text(tries=APPLY_TRIES, waits=APPLY_WAITS_S):
    reasons = "; ".join(known.reason for known in PROPAGATION_ERRORS)
    return (f"up to {tries} tries, waiting {' then '.join(f'{w} s' for w in waits)}, only when the error is "
            f"a known propagation error ({reasons}); any other error stops at once")

"""The Google Cloud target: an iteration deployed with Terraform, measured from outside.

`GcpTarget` gives the runner its steps: a preflight (preflight.py), deploy (terraform init + apply
with the iteration's settings file, apply retried on known propagation errors, firstrun.py), wait
until every HTTP function answers, one visit sent and seen stored, then the system warmed with
real visits until they are stored; then `totals()` (the shards in Firestore, read with the user's
credentials), the platform's metrics for the test window (read after the run) and the tear-down
when asked to. A dry run prints the same steps without running any of them.

Access "auto" (the default) is decided by the preflight from the organization policy, before
Terraform sees it. With "authenticated" (chosen so, or by --access authenticated) no function is
public: run.invoker goes to the account of the user's credentials (or --invoker), and every
request the kit and Locust send carries an ID token for its function, whose audience is the function's
run.app URL (Terraform's function_audiences; idtoken.py says why).

Google's client libraries are imported only inside the functions that need them, and every
command, HTTP call, clock and client can be injected, so tests never reach Google.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from visitkit.catalogue import (
    CATALOGUE,
    FIRESTORE,
    PAGE_FUNCTION,
    PAGES,
    PUBLIC_PATHS,
    PUBLISHER_FUNCTION,
    PUSH_FUNCTION,
    READER_FUNCTION,
    counted_in_batches,
    stored_totals,
    stored_visits,
)
from visitkit.cloud import firstrun, monitoring, preflight, quotas
from visitkit.cloud.failures import CommandFailed
from visitkit.errors import GcpError
from visitkit.model import cost
from visitkit.net import Answer, http_answer
from visitkit.paths import INFRA_DIR, SETTINGS_FILE
from visitkit.samples import Sample
from visitkit.settings import Settings
from visitkit.settle import STORED_TIMEOUT_SECONDS, wait_until_stored
from visitkit.steps import Step

if TYPE_CHECKING:  # Google's client libraries are imported by the functions that use them
    from google.auth.credentials import Credentials
    from google.auth.transport.requests import AuthorizedSession
    from google.cloud.firestore import Client as FirestoreClient
    from google.cloud.monitoring_v3 import MetricServiceClient

    from visitkit.cloud.idtoken import IdTokens

# status(url, method) -> the HTTP status of one request, None when nothing answered
Status = Callable[[str, str], int | None]
# probe(url, method) -> the answer to one request (status, headers, body), None when nothing answered
Probe = Callable[[str, str], Answer | None]
# http(url, method, headers) -> the answer to one request, None when nothing answered: GcpTarget's HTTP seam
Http = Callable[[str, str, dict[str, str] | None], Answer | None]

READY_TIMEOUT_SECONDS = 600
# The readiness probe sends each HTTP function a method none of them serves. Our own code refuses it,
# and does nothing else: 405, the methods it serves in Allow, the JSON error body and the security
# headers every JSON reply of ours carries (functions/common.py: check_request, JSON_SECURITY_HEADERS).
# Whatever answers while a function is not serving yet answers otherwise: Cloud Run's own pages (404 not
# deployed yet, 429 or 503 starting, 401 or 403 while a run.invoker binding propagates) are HTML, and so
# is a framework's own 405 (Flask's, which has an Allow header too). A bare OPTIONS is no probe: our
# functions refuse it (403) unless another site's origin is allowed (CORS_ALLOWED_ORIGINS).
READY_METHOD = "PUT"
OUR_CONTENT_SECURITY_POLICY = "default-src 'none'; frame-ancestors 'none'"  # common.JSON_SECURITY_HEADERS'
SERVED_METHODS = frozenset({"GET", "HEAD", "POST"})  # what an HTTP function of ours may name in Allow
WARM_ROUNDS = 5
FIRST_VISIT_POLL_S = 15
# Right after an apply, these answers to the first visit usually mean something still propagating:
# what it probably is, said while the kit asks again (up to FIRST_VISIT_ANSWER_TIMEOUT_S).
FIRST_VISIT_PROPAGATING: dict[int | None, str] = {
    403: "a run.invoker binding made by the apply is not honoured yet",
    404: "the function's new revision is not serving on its URL yet",
    429: "the function's first instances are still starting",
    503: "the function's first instance is still starting, or its own role on Pub/Sub is not visible yet",
}
FIRST_VISIT_ANSWER_TIMEOUT_S = 300
FIRST_VISIT_ANSWER_POLL_S = 10
YOUR_ACCOUNT = "<the account of your credentials>"  # what a dry run shows for the invokers
DECIDED_ACCESS = "<public or authenticated, as the preflight decides>"  # what a dry run shows for access auto
# The domain restriction refusing a member: Google's text names the resource, not the member. On a
# Pub/Sub topic or subscription, or the push account, the only member from outside the organization
# is Pub/Sub's service agent (the dead-letter grants); on a Cloud Run service, allUsers.
REFUSED = r"[\s\S]{0,600}?do not belong to a permitted customer"
SERVICE_AGENT_REFUSED = re.compile(r"IAM policy for pubsub (?:topic|subscription)" + REFUSED + "|"
                                   r"serviceAccounts/visitkit-push@" + REFUSED + "|gcp-sa-pubsub" + REFUSED)
ALL_USERS_REFUSED = re.compile(r"IAM policy for cloudrun service" + REFUSED)
DEAD_LETTER_OFF = ("dead_letter: false, since the organization refuses roles for Pub/Sub's service agent (domain "
                   "restricted sharing): applying again without the dead-letter topic; a delivery that always fails "
                   "is then retried until its message expires and is not counted as dead-lettered (to keep dead "
                   "letters, an Organization Policy Administrator runs `gcloud org-policies reset "
                   "iam.allowedPolicyMemberDomains --project=PROJECT`, then set \"dead_letter\": true)")
PUSH_REFUSED = ("store-inc-counter refused Pub/Sub's push with 403: the push account's run.invoker binding has not "
                "propagated yet (it can take several minutes on a new deployment)")


# --- terraform -----------------------------------------------------------------------------------

def terraform_commands(iteration_dir: str | Path, project: str, region: str | None = None,
                       infra_dir: str | Path = INFRA_DIR, access: str = "public", invokers: Iterable[str] = (),
                       load_generator_users: Iterable[str] = (),
                       dead_letter: bool | None = None) -> dict[str, list[str]]:
    """The terraform command lines for an iteration, by step: init, apply, output, destroy. `access`
    is passed even when the settings file says the same (a flag may override the file, and "auto"
    is the kit's to decide); `invokers` and `load_generator_users` only with access "authenticated"."""
    infra_dir = Path(infra_dir)
    var_file = Path(os.path.relpath(Path(iteration_dir).resolve() / SETTINGS_FILE, infra_dir.resolve()))
    variables = [f"-var-file={var_file}", f"-var=project_id={project}"]
    if region:
        variables.append(f"-var=region={region}")
    variables.append(f"-var=access={DECIDED_ACCESS if access == 'auto' else access}")
    if dead_letter is not None:  # over the settings file's
        variables.append(f"-var=dead_letter={str(dead_letter).lower()}")
    if access == "authenticated":
        variables.append(f"-var=invokers={json.dumps(list(invokers))}")
        if load_generator_users:
            variables.append(f"-var=load_generator_users={json.dumps(list(load_generator_users))}")
    base = ["terraform", f"-chdir={infra_dir}"]
    return {
        "init": base + ["init", "-input=false"],
        "apply": base + ["apply", "-auto-approve", "-input=false"] + variables,
        "output": base + ["output", "-json"],
        "destroy": base + ["destroy", "-auto-approve", "-input=false"] + variables,
    }


def command_line(argv: Iterable[str]) -> str:
    return f"$ {shlex.join(argv)}"


def run_command(argv: Sequence[str], run: firstrun.RunCommand = firstrun.stream_command, capture: bool = False) -> str:
    """Run one command, its output shown to the user as it comes unless `capture` (then returned);
    a failure keeps what it printed, for failure.json."""
    result = run(argv, check=False, text=True, capture_output=True, echo=not capture)
    if result.returncode != 0:
        raise CommandFailed(argv, result.returncode, (result.stdout or "") + (result.stderr or ""))
    return result.stdout if capture else ""


def parse_outputs(text: str) -> dict[str, Any]:
    """`terraform output -json` as {name: value}."""
    return {name: output["value"] for name, output in json.loads(text).items()}


# --- readiness and warm-up -----------------------------------------------------------------------

def answer_of(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> Answer | None:
    return http_answer(url, method, timeout=30, headers=headers)


def status_of(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> int | None:
    answer = answer_of(url, method, headers)
    return answer.status if answer else None


def is_our_refusal(answer: Answer | None) -> bool:
    """True when `answer` is our function's own refusal of the readiness probe's method (READY_METHOD)."""
    if answer is None or answer.status != 405:
        return False
    allowed = {method.strip() for method in answer.headers.get("allow", "").split(",")} - {""}
    if not allowed or not allowed <= SERVED_METHODS:
        return False
    if answer.headers.get("content-security-policy") != OUR_CONTENT_SECURITY_POLICY:
        return False
    try:
        body = json.loads(answer.body)
    except ValueError:
        return False
    return isinstance(body, dict) and isinstance(body.get("error"), str)


def said(answer: Answer | None) -> str:
    return f"HTTP {answer.status}" if answer else "no answer"


def wait_until_answering(base_url: str, probe: Probe = answer_of, timeout: float = READY_TIMEOUT_SECONDS,
                         interval: float = 10, now: Callable[[], float] = time.monotonic,
                         sleep: Callable[[float], None] = time.sleep) -> None:
    """Wait until every HTTP function's own code answers: each refuses the probe's method
    (READY_METHOD) as only our code does (is_our_refusal), which changes nothing."""
    deadline = now() + timeout
    waiting = {name: path for path, name in PUBLIC_PATHS.items()}
    while True:
        answers = {name: probe(base_url + path, READY_METHOD) for name, path in waiting.items()}
        waiting = {name: path for name, path in waiting.items() if not is_our_refusal(answers[name])}
        if not waiting:
            return
        if now() >= deadline:
            statuses = {name: answer.status for name, answer in answers.items() if answer}
            refused = sorted(name for name in waiting if statuses.get(name) in (401, 403))
            hint = (f"; {', '.join(refused)} refused your requests ({statuses[refused[0]]}): a new run.invoker "
                    "binding can take several minutes to propagate, so run the same command again (the deployment "
                    "stays), and check that your account is among the invokers (terraform output) or Owner of the "
                    "project") if refused else ""
            answered = ", ".join(f"{name} ({said(answers[name])})" for name in sorted(waiting))
            raise GcpError(f"functions not answering after {timeout} s: {answered}{hint}")
        sleep(interval)


def visit(base_url: str, page: str, status: Status = status_of) -> bool:
    """One visitor task, as the Locust visitor does it; True when the visit was recorded (202)."""
    status(f"{base_url}{CATALOGUE[PAGE_FUNCTION].path}?view={page}", "GET")
    recorded = status(f"{base_url}{CATALOGUE[PUBLISHER_FUNCTION].path}?visit_type={page}", "POST") == 202
    status(f"{base_url}{CATALOGUE[READER_FUNCTION].path}?visit_type={page}", "GET")
    return recorded


def first_visit_stored(base_url: str, status: Status, totals: Callable[[], Mapping[str, int]], timeout: float,
                       refusals: Callable[[], int] = lambda: 0, log: Callable[[str], None] = print,
                       interval: float = FIRST_VISIT_POLL_S, now: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], None] = time.sleep,
                       answer_timeout: float = FIRST_VISIT_ANSWER_TIMEOUT_S) -> None:
    """One visit, sent and seen stored before the load: the whole store path works (the push
    account may invoke store-inc-counter). refusals(): pushes store-inc-counter refused with 403
    since the visit (its request logs); a refusal is said at once, and the wait goes on, since
    Pub/Sub retries the push for up to its maximum backoff. `answer_timeout`: how long inc-counter may
    answer the visit as a deployment still propagating does (accepted_first_visit)."""
    baseline = totals()
    accepted_first_visit(f"{base_url}{CATALOGUE[PUBLISHER_FUNCTION].path}?visit_id={uuid.uuid4()}&visit_type="
                         f"{PAGES[0]}", status, log, timeout=answer_timeout, now=now, sleep=sleep)
    deadline, refused = now() + timeout, False
    while sum(totals().values()) <= sum(baseline.values()):
        if not refused and refusals():
            refused = True
            log(f"{PUSH_REFUSED}; waiting, as Pub/Sub retries it")
        if now() >= deadline:
            if refused or refusals():
                raise GcpError(f"{PUSH_REFUSED}, and the first visit was still not stored after {timeout} s: run the "
                               "same command again in a few minutes (the deployment stays; without --destroy)")
            raise GcpError(f"the first visit was not stored after {timeout} s: see `gcloud functions logs read "
                           f"{CATALOGUE[PUSH_FUNCTION].service}` and the subscription's backlog")
        sleep(interval)


def accepted_first_visit(url: str, status: Status, log: Callable[[str], None] = print,
                         timeout: float = FIRST_VISIT_ANSWER_TIMEOUT_S, interval: float = FIRST_VISIT_ANSWER_POLL_S,
                         now: Callable[[], float] = time.monotonic,
                         sleep: Callable[[float], None] = time.sleep) -> None:
    """POSTs the first visit until inc-counter accepts it (202). A 403, 404, 429 or 503 right after
    the apply is usually something still propagating: said once, and the same visit (one visit id,
    so it counts once) is posted again for up to `timeout` s. Any other answer stops at once."""
    deadline = now() + timeout
    said: set[int | None] = set()
    while True:
        answer = status(url, "POST")
        if answer == 202:
            return
        why = FIRST_VISIT_PROPAGATING.get(answer)
        if why is None or now() >= deadline:
            waited = f" for {timeout} s" if why else ""
            raise GcpError(f"{PUBLISHER_FUNCTION} did not accept a visit (HTTP {answer}{waited}"
                           f"{f'; probably {why}' if why else ''}): see `gcloud functions logs read "
                           f"{CATALOGUE[PUBLISHER_FUNCTION].service}`; the deployment stays, so run the same command "
                           "again in a few minutes")
        if answer not in said:
            said.add(answer)
            log(f"{PUBLISHER_FUNCTION} answered the first visit with HTTP {answer}: probably {why}; asking again "
                f"every {interval} s for up to {timeout} s")
        sleep(interval)


def push_refusals(session: AuthorizedSession, project: str, since: str, endpoint: str | None = None) -> int:
    """How many pushes store-inc-counter's Cloud Run service refused with 403 since `since` (RFC 3339),
    from its request logs (Cloud Logging's entries:list); 0 when the logs cannot be read."""
    log_filter = " AND ".join([
        'resource.type="cloud_run_revision"',
        f'resource.labels.service_name="{CATALOGUE[PUSH_FUNCTION].service}"',
        f'logName="projects/{project}/logs/run.googleapis.com%2Frequests"',
        "httpRequest.status=403", f'timestamp>="{since}"'])
    try:
        reply = session.post(f"{endpoint or 'https://logging.googleapis.com'}/v2/entries:list", timeout=30, json={
            "resourceNames": [f"projects/{project}"], "filter": log_filter, "pageSize": 5})
    except OSError:
        return 0
    return len(reply.json().get("entries") or []) if reply.status_code == 200 else 0


def warm_up(base_url: str, parallel: int, rounds: int = WARM_ROUNDS, status: Status = status_of) -> int:
    """`rounds` waves of `parallel` visits at once, so each function starts up to that many
    instances (the study warmed the system before its endurance test). Returns the visits recorded."""
    pages = [PAGES[i % len(PAGES)] for i in range(parallel * rounds)]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return sum(pool.map(lambda page: visit(base_url, page, status), pages))


# --- the target ----------------------------------------------------------------------------------

def firestore_client(project: str, credentials: Credentials) -> FirestoreClient:
    from google.cloud import firestore

    return firestore.Client(project=project, credentials=credentials)


class GcpTarget:
    """An iteration deployed on Google Cloud, in the runner's target seam (visitkit.runs.targets.Target)."""
    kind = "gcp"
    updates_readme = False
    reads_visits = True  # the markers in Firestore, one billed read each

    def __init__(self, settings: Settings, iteration_dir: str | Path, project: str | None, region: str | None = None,
                 destroy: bool = False, access: str | None = None, invokers: Iterable[str] = (),
                 impersonate: str | None = None, infra_dir: str | Path = INFRA_DIR,
                 run: firstrun.RunCommand = firstrun.stream_command, http: Http | None = None,
                 firestore: FirestoreClient | None = None, metrics_client: MetricServiceClient | None = None,
                 warm: bool = True, now: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 ingestion_delay: float = monitoring.DEFAULT_INGESTION_DELAY_SECONDS,
                 preflight: Callable[..., preflight.Preflight] = preflight.run, credentials: Credentials | None = None,
                 id_tokens: IdTokens | None = None, tokens_as: Callable[[str], IdTokens] | None = None,
                 refusals: Callable[[str], int] | None = None, log: Callable[[str], None] = print,
                 ready_timeout: float = READY_TIMEOUT_SECONDS,
                 first_visit_timeout: float = FIRST_VISIT_ANSWER_TIMEOUT_S):
        if not project:
            raise GcpError("--target gcp needs --project (the Google Cloud project id)")
        self.settings, self.project, self.region, self.destroy, self.warm = settings, project, region, destroy, warm
        self.access = self.requested_access = access or settings.access
        self.dead_letter: bool | None = None  # False once the organization refused the dead-letter grants
        self.invokers, self.impersonate = list(invokers), impersonate
        self.load_generator_users: list[str] = []  # a user login acts as the deployment's visitkit-loadgen
        self.iteration_dir, self.infra_dir = iteration_dir, infra_dir
        self.commands = self._terraform_commands()
        self.iteration_name = Path(iteration_dir).name
        self.base_url, self.subscription = "<base_url>", "<subscription>"
        self.outputs: dict[str, Any] = {}
        self.totals_source = f"Firestore (project {project}, {FIRESTORE['counters']}/<page>/{FIRESTORE['shards']})"
        subscription = settings.subscription
        # A push that failed is tried again after up to the maximum backoff, and may take the ack
        # deadline: a visit is not called lost before both have passed.
        self.redelivery_wait = subscription.maximum_backoff_seconds + subscription.ack_deadline_seconds
        self.min_convergence_wait = self.redelivery_wait
        self.notes: list[str] = []
        # (worker VMs, machine type) of a Locust fleet beside the functions: the preflight checks its CPUs' quota too
        self.fleet_vms: tuple[int, str] | None = None
        self.ingestion_delay = ingestion_delay
        self._run, self._now, self._sleep = run, now, sleep
        self._http = http or answer_of  # http(url, method, headers) -> Answer | None
        # How long the kit waits for every function to answer, and for inc-counter to accept the first
        # visit, while the deployment propagates (a rehearsal, where nothing propagates, sets seconds).
        self.ready_timeout, self.first_visit_timeout = ready_timeout, first_visit_timeout
        # {function name: the audience of its ID tokens}: its Cloud Run service's run.app URL, once deployed
        self.audiences: dict[str, str] = {}
        self._preflight, self._log = preflight, log
        self._firestore, self._metrics_client = firestore, metrics_client
        self._credentials, self.id_tokens, self._refusals = credentials, id_tokens, refusals
        self._tokens_as = tokens_as or self._tokens_as_service_account  # (service account) -> IdTokens

    def _terraform_commands(self) -> dict[str, list[str]]:
        invokers = self.invokers or [YOUR_ACCOUNT]
        return terraform_commands(self.iteration_dir, self.project, self.region, self.infra_dir, self.access, invokers,
                                  self.load_generator_users, self.dead_letter)

    @property
    def decisions(self) -> dict[str, Any]:
        """What the run decided about the deployment (run.json keeps it for --resume)."""
        return {"access": self.access, "dead_letter": self.dead_letter}

    def resume(self, decisions: Mapping[str, Any]) -> None:
        """A resumed run deploys as the failed one decided: the same access ("auto" settled by what its
        apply met) and dead-letter topic, whatever its preflight would decide again now."""
        if decisions.get("access") in ("public", "authenticated"):
            self.access = self.requested_access = decisions["access"]
        if decisions.get("dead_letter") is False:
            self.dead_letter = False
        self.commands = self._terraform_commands()

    @property
    def deployed_region(self) -> str | None:
        """The region the deployment is in (its prices in the report), once deployed."""
        return self.outputs.get("region") or self.region

    @property
    def locust_args(self) -> list[str]:
        """What Locust needs to call the functions: ID tokens on an authenticated deployment, each for its
        function's run.app URL (--audiences), whatever host the requests go to."""
        if self.access != "authenticated":
            return []
        audiences = json.dumps(self.audiences, sort_keys=True) if self.audiences else "<output function_audiences>"
        return (["--auth", "id-token", "--quota-project", self.project, "--audiences", audiences]
                + (["--impersonate", self.impersonate] if self.impersonate else []))

    # --- steps ---
    def start_steps(self) -> list[Step]:
        parallel = self.settings.largest_slots
        ready = ", ".join(f"{READY_METHOD} <base_url>{path}" for path in PUBLIC_PATHS)
        subscription = self.settings.subscription
        topic = self.settings.raw.get("topic_name", "visits")
        who = (", ".join(self.invokers) if self.invokers else
               f"the account of your credentials{f' (impersonating {self.impersonate})' if self.impersonate else ''}")
        authenticated = (f"run.invoker on the three HTTP functions to {who}; every request of the kit and of Locust "
                         "carries an ID token for its function, minted now to fail before anything is created if these "
                         "credentials cannot; a user login, which cannot, acts instead as the visitkit-loadgen account "
                         "Terraform creates for it (-var=load_generator_users)")
        public = "allUsers may invoke the three HTTP functions, as a browser needs"
        access = {"authenticated": f"access: authenticated; {authenticated}",
                  "public": f"access: public ({public})",
                  "auto": (f"access: auto, decided by the preflight from the organization policy: public ({public}) "
                           f"where it lets allUsers invoke; authenticated where it refuses them ({authenticated}); "
                           "the run says which it chose and why")}[self.access]
        steps = [
            Step("preflight: check what the deployment needs, before anything is created",
                 [access, *preflight.describe(self.project, self.access), *quotas.describe(self.quota_needs)],
                 self._check, again=True),
            Step(f"deploy {self.iteration_name} to project {self.project}"
                 + (f", region {self.region}" if self.region else " (region: infra default)"),
                 [command_line(self.commands["init"]), command_line(self.commands["apply"]),
                  f"apply retry policy: {firstrun.retry_policy_text()}",
                  f"store path: push subscription to store-inc-counter (OIDC), ack deadline "
                  f"{subscription.ack_deadline_seconds} s, retry backoff {subscription.minimum_backoff_seconds}-"
                  f"{subscription.maximum_backoff_seconds} s; " + (
                      f"after {subscription.max_delivery_attempts} delivery attempts a visit goes to the dead-letter "
                      f"topic {topic}-dead-letter (counted in the report)"
                      + ("" if "dead_letter" in self.settings.raw else
                         "; where the organization refuses roles for Pub/Sub's service agent, applied again without "
                         "it (dead_letter: false, said when it happens)") if self.settings.dead_letter else
                      "dead_letter: false, so no dead-letter topic and no grant to Pub/Sub's service agent: a "
                      "delivery that always fails is retried until its message expires "
                      f"({subscription.message_retention_seconds} s) and is not counted as dead-lettered"),
                  command_line(self.commands["output"]) + "   (base_url, subscription_name, function_audiences, log "
                  "metric names)"],
                 self._deploy, resumed=self._deployed),
            Step("wait until every HTTP function answers",
                 [f"the function's own 405 to a method it does not serve ({ready}: Allow, its JSON error and "
                  f"security headers, which no platform page has); up to {self.ready_timeout:g} s; a 401 or 403 "
                  "there is a run.invoker binding still propagating"], self._wait_ready, again=True),
            Step("send one visit and see it stored", [
                f"POST <base_url>/inc-counter, then read Firestore until it is stored, up to {self.redelivery_wait} s "
                "(the subscription's maximum backoff plus its ack deadline: a refused push is retried that late); "
                "store-inc-counter's request logs are read for 403s meanwhile, which mean the push account's "
                "run.invoker binding has not propagated yet"], self._first_visit)]
        if self.warm:
            steps.append(Step("warm up", [
                f"{WARM_ROUNDS} waves of {parallel} visits at once, then wait until Firestore has stored them "
                f"(up to {max(STORED_TIMEOUT_SECONDS, self.redelivery_wait)} s)"], self._warm_up))
        return steps

    def window_step(self) -> Step:
        requests = monitoring.build_requests(self.project, 0, 60, self.subscription, log_metrics=self.log_metrics,
                                             pulls=self.settings.pulls)
        return Step("read the platform's metrics for the test window", [
            f"after Monitoring's ingestion delay ({monitoring.DEFAULT_INGESTION_DELAY_SECONDS} s), "
            f"projects/{self.project}/timeSeries with 60 s alignment:",
            *(f"- {name}: {request['filter']}" for name, request in requests.items()),
            "saved as metrics/<metric>.csv, plotted as gcp-metrics.png"], None)

    def check_steps(self) -> list[Step]:
        return []  # Monitoring's figures arrive late and sampled: nothing to hold them to here

    def stop_step(self) -> Step:
        if self.destroy:
            return Step("tear down", [command_line(self.commands["destroy"])], self._tear_down, always=True)
        return Step("leave the deployment running",
                    [f"clean up later: {command_line(self.commands['destroy'])}"], self._close_client, always=True)

    @property
    def log_metrics(self) -> dict[str, str]:
        """{MetricQuery.log_metric: the deployed log-based metric's name}, once deployed."""
        return {key: self.outputs[output] for key, output in monitoring.LOG_METRIC_OUTPUTS.items()
                if output in self.outputs}

    @property
    def quota_needs(self) -> list[quotas.Need]:
        """What the plan needs of the region's quotas: the functions at their maximum instances, the fleet."""
        region = self.region or cost.DEFAULT_REGION
        fleet = quotas.fleet_needs(*self.fleet_vms, region) if self.fleet_vms else []
        return quotas.function_needs(self.settings, region) + fleet

    # --- actions ---
    def _check(self, _run: object = None) -> None:
        self._preflight(self.project, self.access, credentials=self._credentials, before_creating=self._decided,
                        needs=self.quota_needs)

    def _decided(self, access: str) -> None:
        """The preflight's last call, before anything is created: the access to deploy with ("auto"
        decided by now). Authenticated, the ID tokens are tried now, once the preflight has turned
        on the IAM Credentials API (impersonation goes through it)."""
        self.access = access
        self.commands = self._terraform_commands()
        if access == "authenticated":
            self._authenticate()

    def _authenticate(self) -> None:
        """Who invokes the functions, and the ID tokens to do it with; fails before anything is
        created when the credentials cannot mint them. A user login cannot mint a token for a
        function itself: it then acts as the deployment's load-generator account (visitkit-loadgen,
        created by Terraform), whose tokens are minted once it exists (_wait_for_tokens); so does
        Cloud Shell, whose metadata server speaks for the user."""
        from visitkit.cloud import idtoken
        from visitkit.cloud.credentials import caller_member, impersonating, speaks_for_user

        def signer() -> Credentials:
            return impersonating(self.credentials(), self.impersonate) if self.impersonate else self.credentials()

        acts_as_load_generator = (self.id_tokens is None and not self.impersonate
                                  and speaks_for_user(self.credentials()))
        if not self.invokers:
            member = caller_member(signer())
            if member is None:
                raise GcpError("Your credentials' account could not be told: name who invokes the functions with "
                               "--invoker user:EMAIL or --invoker serviceAccount:EMAIL.")
            self.invokers = [member]
        if acts_as_load_generator:
            member = caller_member(self.credentials())
            if member is None:
                raise GcpError(f"Your user login's email could not be read: {idtoken.IMPERSONATE_HINT}.")
            self.load_generator_users = [member]
        self.commands = self._terraform_commands()
        if acts_as_load_generator:
            return
        if self.id_tokens is None:
            self.id_tokens = idtoken.IdTokens(idtoken.minter(signer()))
        # Only whether these credentials can mint at all: Google signs an ID token for whatever audience it
        # is asked, and the functions' own audiences (their run.app URLs) exist once applied. The tokens the
        # kit sends are minted for those (function_audiences, _read_outputs); this one is never sent.
        self.id_tokens.token(f"https://{CATALOGUE[PAGE_FUNCTION].service}-{self.project}."
                             f"{self.region or cost.DEFAULT_REGION}.run.app")

    def _tokens_as_service_account(self, service_account: str) -> IdTokens:
        from visitkit.cloud import idtoken
        from visitkit.cloud.credentials import impersonating

        return idtoken.IdTokens(idtoken.minter(impersonating(self.credentials(), service_account)))

    def _wait_for_tokens(self, timeout: float | None = None, interval: float = 15) -> None:
        """After the deploy, with a user login: act as the load generator once Google lets you (a new
        token-creator binding takes minutes to propagate)."""
        timeout = self.ready_timeout if timeout is None else timeout
        self.impersonate = self.outputs.get("load_generator_service_account")
        if not self.impersonate:
            raise GcpError("the deployment names no load_generator_service_account: run the same command again so "
                           "that Terraform creates it")
        self.id_tokens = self._tokens_as(self.impersonate)
        self.id_tokens.audiences = self.audiences
        audience = self.id_tokens.audience(f"{self.base_url}{CATALOGUE[PAGE_FUNCTION].path}")
        deadline = self._now() + timeout
        while True:
            try:
                self.id_tokens.token(audience)
                return
            except GcpError as error:
                if self._now() >= deadline:
                    raise GcpError(f"{error}; you were granted the right to act as {self.impersonate} moments ago "
                                   "and Google can take several minutes to honour it: run the same command "
                                   "again") from error
            self._sleep(interval)

    def _answer(self, url: str, method: str = "GET") -> Answer | None:
        """One request's answer; with an ID token for its function on an authenticated deployment."""
        return self._http(url, method, self.id_tokens.headers(url) if self.id_tokens else None)

    def _status(self, url: str, method: str = "GET") -> int | None:
        answer = self._answer(url, method)
        return answer.status if answer else None

    def _deploy(self, _run: object = None) -> None:
        run_command(self.commands["init"], self._run)
        for _ in range(3):  # the first apply, and one again after each of the two decisions below
            try:
                firstrun.apply_with_retries(self.commands["apply"], self._run, self._sleep, self._log)
                break
            except CommandFailed as error:
                if not (self._authenticated_after(error) or self._without_dead_letter_after(error)):
                    raise
        self._read_outputs()

    def _authenticated_after(self, error: CommandFailed) -> bool:
        """Access auto went on public where the policy could not be read; if the apply's own refusal
        shows the organization refuses allUsers, it goes on authenticated, saying so; True when it does."""
        if self.requested_access != "auto" or self.access != "public" or not ALL_USERS_REFUSED.search(error.output):
            return False
        self._log("access auto: authenticated, since the apply was refused allUsers on the functions (the organization "
                  "policy could not be read before); the kit and Locust send ID tokens, and the pages cannot be opened "
                  "in a plain browser")
        self._decided("authenticated")
        return True

    def _without_dead_letter_after(self, error: CommandFailed) -> bool:
        """An organization that refuses grants to Pub/Sub's service agent: where the settings file
        leaves dead_letter unsaid, the deployment goes on without the dead-letter topic (and so
        without a grant to the agent), saying so; True when it does."""
        if "dead_letter" in self.settings.raw or self.dead_letter is False or not SERVICE_AGENT_REFUSED.search(
                error.output):
            return False
        self.dead_letter = False
        self.commands = self._terraform_commands()
        self._log(DEAD_LETTER_OFF)
        return True

    def _deployed(self, _run: object = None) -> None:
        """A resumed run whose apply had finished: what it made, read without applying again."""
        run_command(self.commands["init"], self._run)
        self._read_outputs()

    def _read_outputs(self) -> None:
        self.outputs = parse_outputs(run_command(self.commands["output"], self._run, capture=True))
        self.base_url = self.outputs["base_url"].rstrip("/")
        self.subscription = self.outputs.get("subscription_name", "")
        self.audiences = dict(self.outputs.get("function_audiences") or {})
        if self.access == "authenticated" and not self.audiences:
            raise GcpError("the deployment's outputs have no function_audiences (each function's run.app URL, the "
                           "audience of its ID tokens): it was applied by an older kit; apply it again (a run that "
                           "deploys, without --resume)")
        if self.id_tokens is not None:
            self.id_tokens.audiences = self.audiences

    def _wait_ready(self, _run: object = None) -> None:
        if self.load_generator_users:
            self._wait_for_tokens()
        wait_until_answering(self.base_url, self._answer, timeout=self.ready_timeout, now=self._now, sleep=self._sleep)

    def _first_visit(self, _run: object = None) -> None:
        since = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        first_visit_stored(self.base_url, self._status, self.totals, self.redelivery_wait,
                           lambda: self.refusals(since), self._log, now=self._now, sleep=self._sleep,
                           answer_timeout=self.first_visit_timeout)

    def refusals(self, since: str) -> int:
        if self._refusals is not None:
            return self._refusals(since)
        from google.auth.transport.requests import AuthorizedSession

        return push_refusals(AuthorizedSession(self.credentials()), self.project, since)

    def _warm_up(self, _run: object = None) -> None:
        baseline = self.totals()
        recorded = warm_up(self.base_url, self.settings.largest_slots, status=self._status)
        wait_until_stored(self.totals, baseline, recorded, timeout=max(STORED_TIMEOUT_SECONDS, self.redelivery_wait),
                          now=self._now, sleep=self._sleep, error=GcpError)

    def _close_client(self, _run: object = None) -> None:
        if self._firestore is not None and hasattr(self._firestore, "close"):
            self._firestore.close()

    def _tear_down(self, _run: object = None) -> None:
        self._close_client()
        run_command(self.commands["destroy"], self._run)

    # --- reading ---
    def credentials(self) -> Credentials:
        """The user's application-default credentials, every call billed to the target project."""
        if self._credentials is None:
            from visitkit.cloud.credentials import default_credentials

            self._credentials = default_credentials(self.project)
        return self._credentials

    def firestore(self) -> FirestoreClient:
        if self._firestore is None:
            self._firestore = firestore_client(self.project, self.credentials())
        return self._firestore

    def totals(self) -> dict[str, int]:
        return stored_totals(self.firestore())

    def stored_visits(self, visit_ids: Iterable[str]) -> Collection[str]:
        if self.settings.pulls:  # the ids are in the pull store's batch documents, not in markers
            return counted_in_batches(self.firestore(), visit_ids)
        return stored_visits(self.firestore(), visit_ids)

    @property
    def billed_region(self) -> str:
        return self.deployed_region or cost.DEFAULT_REGION

    def sample(self) -> dict[str, Any]:
        """No live figures: Monitoring is read once, after the run (see window_samples)."""
        functions = {name: dict.fromkeys(monitoring.empty_function()) for name in CATALOGUE}
        return {"time": time.time(), "source": "gcp-monitoring", "functions": functions,
                "store": dict.fromkeys(("accepted", "delivered", "stored", "backlog"))}

    def watch(self, component: str, pid: int) -> None:
        pass  # the platform's processes are Google's: Monitoring has their figures

    def mark_start(self) -> None:
        pass  # Monitoring is read for the test's window alone (window_samples)

    def twin_figures(self) -> None:
        return None  # no twin

    def window_samples(self, start: float, end: float, results_dir: str | Path, now: Callable[[], float] = time.time,
                       sleep: Callable[[float], None] = time.sleep) -> list[Sample]:
        """The platform's per-minute samples for [start, end]; waits for ingestion first and saves
        each metric's series as results_dir/metrics/<metric>.csv (a query that failed is named in
        metrics/missing.json, and only its figures are left empty)."""
        return monitoring.fetch_window(self.project, start, end, self.subscription, results_dir,
                                       client=self._metrics_client, ingestion_delay=self.ingestion_delay,
                                       now=now, sleep=sleep, log_metrics=self.log_metrics, pulls=self.settings.pulls)

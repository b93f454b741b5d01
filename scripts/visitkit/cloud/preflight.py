"""The preflight of a Google Cloud run: what the deployment needs, checked before anything is created.

In order, each failure one sentence with the command that fixes it:
1. terraform and gcloud on PATH; application-default credentials, every call billed to the
   target project (its quota project), so an error names that project and no other;
2. the APIs these checks read (Service Usage's view of the project): turned on if off, as
   Terraform would turn them on anyway (reading them costs nothing);
3. the project exists, is ACTIVE, and its number (Cloud Resource Manager);
4. billing is enabled (Cloud Billing), where the API answers;
5. the organization policy (the effective iam.allowedPolicyMemberDomains and
   iam.managed.allowedPolicyMembers): with access "auto", the default, it decides: "public" where
   it lets allUsers be granted run.invoker, "authenticated" where it refuses them; with "public" a
   refusal stops the run; with "authenticated", a restriction is only noted;
6. the quotas the plan needs (quotas.py): Cloud Run's regional CPU and memory allocation for the
   functions at their maximum instances, Compute Engine's regional CPUs for a Locust fleet; a plan
   that exceeds one stops, naming it and how to ask for more; one that cannot be read is a note;
7. the caller's own last check (an authenticated run's ID tokens);
8. then, all checks passed, Pub/Sub is turned on and its service agent created if it does not
   exist yet, so that the dead-letter grants find it (Service Usage's generateServiceIdentity).

Every Google call goes through `Apis`, built on Google's client libraries with the REST
transport: tests point it at a local fake of these APIs (tests/integration/test_preflight.py).

`visitkit tune --project` reads Cloud Run's regional CPU and memory allocation through the same
APIs and quotas.read (tune_quota), without turning anything on.
"""
from __future__ import annotations

import functools
import importlib
import math
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from visitkit.cloud import quotas
from visitkit.cloud.credentials import billed_to
from visitkit.errors import GcpError

if TYPE_CHECKING:  # Google's client libraries are imported when a check calls them
    from google.auth.credentials import Credentials
    from google.cloud.cloudquotas_v1 import QuotaInfo
    from google.cloud.orgpolicy_v2 import Policy

    from visitkit.model import tune

T = TypeVar("T")
# patiently(call) with the run's sleep and tries: call(), tried again while its API is still turning on
Patient = Callable[[Callable[[], Any]], Any]

# What these checks read, turned on before they read it (Service Usage itself is on in every project).
# iamcredentials: an authenticated run's ID tokens, when it impersonates a service account.
# cloudquotas: the quotas' limits (Compute's own regions.get is read only where Compute is on already).
READ_APIS = ("cloudresourcemanager.googleapis.com", "cloudbilling.googleapis.com", "orgpolicy.googleapis.com",
             "iamcredentials.googleapis.com", "cloudquotas.googleapis.com")
PUBSUB_API = "pubsub.googleapis.com"
DOMAINS_CONSTRAINT = "iam.allowedPolicyMemberDomains"
MANAGED_CONSTRAINT = "iam.managed.allowedPolicyMembers"
ENABLE_TIMEOUT_S = 180
PROPAGATION_TRIES, PROPAGATION_WAIT_S = 4, 20  # an API turned on moments ago may answer "disabled" a while


@dataclass(frozen=True)
class Preflight:
    """What the preflight learnt: the project's number, the access to deploy with, and what it
    could not check."""
    project_number: str
    notes: tuple[str, ...] = ()  # said once to the user too
    access: str = "public"  # "public" or "authenticated": what Terraform is given
    access_reason: str | None = None  # with access "auto": the one line that says what it chose and why


# --- the organization policy, as data ---------------------------------------------------------------

def all_users_refused_by(policy: Policy | None, constraint: str) -> bool:
    """True when an effective policy (a google.cloud.orgpolicy_v2.Policy, or None where none
    applies) of `constraint` refuses allUsers as a member of an IAM policy."""
    rules = list(policy.spec.rules) if policy is not None and policy.spec else []
    unconditional = [rule for rule in rules if not (rule.condition and rule.condition.expression)]
    if constraint == DOMAINS_CONSTRAINT:
        # A list constraint: allowed customer ids (allUsers is never one), deny all, or allow all.
        if any(rule.allow_all for rule in unconditional):
            return False
        return any(rule.deny_all or list(rule.values.allowed_values) for rule in unconditional)
    # The managed constraint: enforced, allUsers is refused unless named among the allowed subjects.
    for rule in unconditional:
        if rule.enforce:
            parameters = dict(rule.parameters or {})
            if "allUsers" not in list(parameters.get("allowedMemberSubjects") or []):
                return True
    return False


def org_policy_way_out(project: str, constraint: str) -> str:
    return ("switch to `--access authenticated` (or \"access\": \"authenticated\" in the settings file: the kit then "
            "sends ID tokens), or have an Organization Policy Administrator (roles/orgpolicy.policyAdmin on the "
            f"organization) restore the constraint's default, which allows allUsers, for this project alone: "
            f"`gcloud org-policies reset {constraint} --project={project}`")


SERVICE_AGENT_NOTE = ("the organization restricts IAM members to its own domains ({constraint}); Google documents that "
                      "this can also refuse roles granted to Google's service agents, so if the apply stops on "
                      "Pub/Sub's service agent (service-NUMBER@gcp-sa-pubsub...) with `do not belong to a permitted "
                      "customer`, set \"dead_letter\": false in the settings file (no dead-letter topic, no grant to "
                      "the agent), or have an Organization Policy Administrator allow it for this project: `gcloud "
                      "org-policies reset {constraint} --project={project}`")


# --- the APIs -------------------------------------------------------------------------------------------

class Apis:
    """Google's client libraries for the checks, all billed to the target project; `endpoint`
    sends every call to one base URL instead (a local fake in tests)."""

    def __init__(self, credentials: Credentials, project: str, endpoint: str | None = None):
        self.credentials, self.project, self.endpoint = billed_to(credentials, project), project, endpoint

    def _client(self, module: str, name: str) -> Any:
        from google.api_core.client_options import ClientOptions

        cls = getattr(importlib.import_module(module), name)
        return cls(credentials=self.credentials, transport="rest",
                   client_options=ClientOptions(api_endpoint=self.endpoint))

    def service_states(self, services: Iterable[str]) -> dict[str, str]:
        """{service: "ENABLED" | "DISABLED"} (Service Usage)."""
        client = self._client("google.cloud.service_usage_v1", "ServiceUsageClient")
        reply = client.batch_get_services(request={
            "parent": f"projects/{self.project}",
            "names": [f"projects/{self.project}/services/{name}" for name in services]})
        return {service.config.name or service.name.rsplit("/", 1)[-1]: service.state.name
                for service in reply.services}

    def enable(self, services: Iterable[str], timeout: float = ENABLE_TIMEOUT_S) -> None:
        client = self._client("google.cloud.service_usage_v1", "ServiceUsageClient")
        operation = client.batch_enable_services(request={"parent": f"projects/{self.project}",
                                                          "service_ids": list(services)})
        operation.result(timeout=timeout)

    def project_info(self) -> tuple[str, str]:
        """(state name, project number) (Cloud Resource Manager v3)."""
        client = self._client("google.cloud.resourcemanager_v3", "ProjectsClient")
        project = client.get_project(name=f"projects/{self.project}")
        return project.state.name, project.name.rsplit("/", 1)[-1]

    def billing_enabled(self) -> bool:
        client = self._client("google.cloud.billing_v1", "CloudBillingClient")
        return client.get_project_billing_info(name=f"projects/{self.project}").billing_enabled

    def effective_policy(self, constraint: str) -> Policy:
        client = self._client("google.cloud.orgpolicy_v2", "OrgPolicyClient")
        return client.get_effective_policy(name=f"projects/{self.project}/policies/{constraint}")

    def quota_info(self, service: str, quota_id: str) -> QuotaInfo:
        """A quota's limits by dimension (Cloud Quotas v1 getQuotaInfo)."""
        client = self._client("google.cloud.cloudquotas_v1", "CloudQuotasClient")
        return client.get_quota_info(
            name=f"projects/{self.project}/locations/global/services/{service}/quotaInfos/{quota_id}")

    def region_quotas(self, region: str) -> dict[str, tuple[float, float]]:
        """{metric: (limit, usage)} of a Compute Engine region (Compute v1 regions.get)."""
        client = self._client("google.cloud.compute_v1", "RegionsClient")
        return {quota.metric: (quota.limit, quota.usage)
                for quota in client.get(project=self.project, region=region).quotas}

    def project_quotas(self) -> dict[str, tuple[float, float]]:
        """{metric: (limit, usage)} of the project's Compute Engine quotas in all regions (Compute v1 projects.get)."""
        client = self._client("google.cloud.compute_v1", "ProjectsClient")
        return {quota.metric: (quota.limit, quota.usage) for quota in client.get(project=self.project).quotas}

    def create_pubsub_agent(self) -> str | None:
        """Pub/Sub's service agent, created if missing (idempotent); returns its email. The call is
        only in Service Usage's v1beta1, which the client library does not cover."""
        from google.auth.transport.requests import AuthorizedSession

        base = self.endpoint or "https://serviceusage.googleapis.com"
        session = AuthorizedSession(self.credentials)
        reply = session.post(f"{base}/v1beta1/projects/{self.project}/services/pubsub.googleapis.com"
                             ":generateServiceIdentity", json={}, timeout=60)
        if reply.status_code != 200:
            from google.api_core.exceptions import from_http_response

            raise from_http_response(reply)
        return ((reply.json().get("response") or {}).get("email"))


def apis_for(project: str, credentials: Credentials | None = None) -> Apis:
    """The APIs with the user's application-default credentials (GcpError where there are none)."""
    from visitkit.cloud.credentials import default_credentials

    return Apis(credentials or default_credentials(project), project)


# --- the checks ---------------------------------------------------------------------------------------

def reason_of(error: BaseException) -> str | None:
    """The ErrorInfo reason of a google.api_core exception (SERVICE_DISABLED, ...), or None."""
    return getattr(error, "reason", None)


def patiently(call: Callable[[], T], sleep: Callable[[float], None] = time.sleep, tries: int = PROPAGATION_TRIES,
              wait: float = PROPAGATION_WAIT_S) -> T | None:
    """call(), tried again while it answers SERVICE_DISABLED: an API turned on moments ago."""
    from google.api_core import exceptions

    for attempt in range(1, tries + 1):
        try:
            return call()
        except exceptions.GoogleAPICallError as error:
            if reason_of(error) != "SERVICE_DISABLED" or attempt == tries:
                raise
            sleep(wait)
    return None  # tries < 1: call() was never made


def not_found(project: str) -> GcpError:
    return GcpError(f"Project {project} was not found, or your account cannot see it: check the id with "
                    "`gcloud projects list` (and that you are logged in as the right account: "
                    "`gcloud auth application-default login`).")


def turn_on_read_apis(apis: Apis, project: str, log: Callable[[str], None]) -> tuple[bool, bool]:
    """The APIs the checks read, on; returns (whether any had to be turned on, whether Pub/Sub is on)."""
    from google.api_core import exceptions

    try:
        states = apis.service_states(READ_APIS + (PUBSUB_API,))
    except exceptions.GoogleAPICallError as error:
        if reason_of(error) == "SERVICE_DISABLED":
            raise GcpError(f"The Service Usage API is off in project {project}: run `gcloud services enable "
                           f"serviceusage.googleapis.com --project {project}`.") from error
        if reason_of(error) == "USER_PROJECT_DENIED":
            raise GcpError(f"Your account may not bill API calls to project {project} (serviceusage.services.use): "
                           "ask for roles/serviceusage.serviceUsageConsumer on it, or Owner.") from error
        if isinstance(error, (exceptions.Forbidden, exceptions.NotFound)):
            raise not_found(project) from error
        raise
    off = [name for name in READ_APIS if states.get(name) != "ENABLED"]
    pubsub_on = states.get(PUBSUB_API) == "ENABLED"
    if not off:
        return False, pubsub_on
    log(f"preflight: turning on {', '.join(off)} in project {project} (what these checks read)")
    try:
        apis.enable(off)
    except exceptions.Forbidden as error:
        raise GcpError(f"Your account may not turn on APIs in project {project} (serviceusage.services.enable): "
                       f"use an account that is Owner of it, or have one run `gcloud services enable {' '.join(off)} "
                       f"--project {project}`.") from error
    return True, pubsub_on


def check_project(apis: Apis, project: str, patient: Patient) -> str:
    """The project's number, once it is known to exist and be ACTIVE."""
    from google.api_core import exceptions

    try:
        state, number = patient(apis.project_info)
    except (exceptions.Forbidden, exceptions.NotFound) as error:
        if reason_of(error) == "SERVICE_DISABLED":
            raise GcpError(f"The Cloud Resource Manager API is still off in project {project}: run `gcloud services "
                           f"enable cloudresourcemanager.googleapis.com --project {project}`, wait a minute and "
                           "try again.") from error
        raise not_found(project) from error
    if state != "ACTIVE":
        raise GcpError(f"Project {project} is {state}: restore it with `gcloud projects undelete {project}` or "
                       "use another project.")
    return number


def check_billing(apis: Apis, project: str, patient: Patient) -> list[str]:
    """Stops where billing is off; returns the notes of what could not be checked."""
    from google.api_core import exceptions

    try:
        enabled = patient(apis.billing_enabled)
    except exceptions.Forbidden:
        return ["billing could not be checked (your account may not read the project's billing information); if the "
                "apply says `Billing must be enabled`, link a billing account to the project"]
    if not enabled:
        raise GcpError(f"Billing is not enabled on project {project}: link a billing account with `gcloud billing "
                       f"projects link {project} --billing-account=ACCOUNT_ID` (`gcloud billing accounts list` shows "
                       "yours).")
    return []


def check_org_policy(apis: Apis, project: str, patient: Patient,
                     access: str) -> tuple[list[str], str, str | None]:
    """What the organization policy allows: (notes, the access to deploy with, why, with "auto").
    With "public", stops where a policy refuses allUsers; with "auto", chooses "authenticated"
    there and "public" elsewhere (also where a policy cannot be read: the apply's own refusal then
    makes the deployment go on authenticated: gcp.py); with "authenticated", only notes a restriction that may
    still bite."""
    from google.api_core import exceptions

    notes: list[str] = []
    refusing: list[str] = []
    unread: list[str] = []
    for constraint in (DOMAINS_CONSTRAINT, MANAGED_CONSTRAINT):
        try:
            policy = patient(functools.partial(apis.effective_policy, constraint))
        except (exceptions.NotFound, exceptions.BadRequest):
            continue  # a constraint this organization's API does not know refuses nothing
        except exceptions.Forbidden:
            unread.append(constraint)
            continue
        if all_users_refused_by(policy, constraint):
            refusing.append(constraint)
    if refusing and access == "public":
        raise GcpError(f"Project {project}'s organization policy {refusing[0]} refuses allUsers, which the public "
                       "functions need (access \"public\"): " + org_policy_way_out(project, refusing[0]) + ".")
    if access != "authenticated" and not refusing:
        notes += [f"the organization policy {constraint} could not be read (orgpolicy.policy.get); if the apply says "
                  "`do not belong to a permitted customer`, " + org_policy_way_out(project, constraint)
                  for constraint in unread]
    if DOMAINS_CONSTRAINT in refusing:
        notes.append(SERVICE_AGENT_NOTE.format(constraint=DOMAINS_CONSTRAINT, project=project))
    if access != "auto":
        return notes, access, None
    return notes, ("authenticated" if refusing else "public"), access_choice(project, refusing, unread)


def access_choice(project: str, refusing: Sequence[str], unread: Sequence[str]) -> str:
    """The one line that says what access "auto" chose and why."""
    if refusing:
        return (f"access auto: authenticated, since project {project}'s organization policy {' and '.join(refusing)} "
                "refuses allUsers; the kit and Locust send ID tokens, and the pages cannot be opened in a plain "
                "browser (for public pages an Organization Policy Administrator runs `gcloud org-policies reset "
                f"{refusing[0]} --project={project}`, then run with --access public)")
    if unread:
        return (f"access auto: public, since the organization policy ({' and '.join(unread)}) could not be read; "
                "if the apply is refused allUsers, the deployment goes on authenticated and says so")
    return (f"access auto: public, since no organization policy on project {project} refuses allUsers (the pages open "
            "in any browser)")


def create_pubsub_agent(apis: Apis, pubsub_on: bool, log: Callable[[str], None]) -> list[str]:
    """Pub/Sub on and its service agent created, so that the apply's dead-letter grants find it;
    a failure is a note (the apply then retries while Google creates it)."""
    from google.api_core import exceptions

    try:
        if not pubsub_on:
            log(f"preflight: turning on {PUBSUB_API}, whose service agent the dead-letter grants name")
            apis.enable([PUBSUB_API])
        apis.create_pubsub_agent()
    except exceptions.GoogleAPICallError as error:
        return [f"Pub/Sub's service agent could not be created ahead ({error.message}); the apply retries while "
                "Google creates it"]
    return []


def run(project: str, access: str = "public", *, credentials: Credentials | None = None, apis: Apis | None = None,
        which: Callable[[str], str | None] = shutil.which, sleep: Callable[[float], None] = time.sleep,
        log: Callable[[str], None] = print, before_creating: Callable[[str], None] | None = None,
        needs: Sequence[quotas.Need] = ()) -> Preflight:
    """The whole preflight; returns a Preflight or raises GcpError with one sentence. Nothing is
    created before every check passed (turning on the APIs the checks read aside);
    before_creating(access) is the caller's own last check, given the access to deploy with ("auto"
    decided by then); `needs`: what the plan needs of the quotas (quotas.function_needs, fleet_needs)."""
    from google.api_core import exceptions

    check_tools(which)
    apis = apis or apis_for(project, credentials)
    try:
        turned_on, pubsub_on = turn_on_read_apis(apis, project, log)
        # Only an API turned on moments ago is worth waiting for.
        patient = functools.partial(patiently, sleep=sleep, tries=PROPAGATION_TRIES if turned_on else 1)
        number = check_project(apis, project, patient)
        notes = check_billing(apis, project, patient)
        policy_notes, access, access_reason = check_org_policy(apis, project, patient, access)
        notes += policy_notes
        if access_reason:
            log(access_reason)
        notes += quotas.check(project, needs, functools.partial(quotas.read, apis, patient=patient))
        if before_creating is not None:
            before_creating(access)
        notes += create_pubsub_agent(apis, pubsub_on, log)
    except GcpError:
        raise
    except exceptions.GoogleAPICallError as error:
        raise GcpError(f"Checking project {project} failed: {error.code} {error.message}") from error
    except Exception as error:
        if type(error).__name__ == "RefreshError":
            raise GcpError("Your application-default credentials have expired or were revoked: run "
                           "`gcloud auth application-default login`.") from error
        if type(error).__name__ == "TransportError" or isinstance(error, OSError):
            raise GcpError(f"Google Cloud could not be reached to check project {project} ({error}): check the "
                           "network and try again.") from error
        raise
    for note in notes:
        log(f"preflight: {note}")
    return Preflight(number, notes=tuple(notes), access=access, access_reason=access_reason)


def check_tools(which: Callable[[str], str | None] = shutil.which) -> None:
    if not which("terraform"):
        raise GcpError("terraform was not found on PATH: install Terraform 1.7 or later "
                       "(https://developer.hashicorp.com/terraform/install).")
    if not which("gcloud"):
        raise GcpError("gcloud was not found on PATH: install the Google Cloud CLI "
                       "(https://cloud.google.com/sdk/docs/install).")


def describe(project: str, access: str) -> list[str]:
    """The preflight's checks, for --dry-run: what each reads, and that nothing is created before them."""
    lines = [
        "terraform and gcloud on PATH; application-default credentials (google-auth), every call billed to "
        f"project {project} (its quota project)",
        f"Service Usage: {', '.join(READ_APIS)} on in {project}, turned on if off (what the checks read)",
        f"Cloud Resource Manager: project {project} exists and is ACTIVE; its number",
        f"Cloud Billing: billing enabled on {project}",
    ]
    if access == "auto":
        lines.append(f"Organization Policy: access will be decided by the effective {DOMAINS_CONSTRAINT} and "
                     f"{MANAGED_CONSTRAINT} on {project}: public where they let allUsers invoke the three HTTP "
                     "functions, authenticated (ID tokens; the pages then cannot be opened in a plain browser) where "
                     "they refuse them; public where they cannot be read, and authenticated after all if the apply "
                     "is then refused allUsers")
    elif access == "public":
        lines.append(f"Organization Policy: the effective {DOMAINS_CONSTRAINT} and {MANAGED_CONSTRAINT} on {project} "
                     "let allUsers invoke the three HTTP functions (access \"public\"); if not, stop and name both "
                     "ways out (--access authenticated, or a project-level reset of the constraint)")
    else:
        lines.append(f"Organization Policy: the effective {DOMAINS_CONSTRAINT} and {MANAGED_CONSTRAINT} on {project} "
                     "read for a note only: access \"authenticated\" grants run.invoker to named accounts, never "
                     "allUsers")
    lines.append("Cloud Quotas (and Compute Engine regions.get, limit and usage, where Compute is on): the plan's "
                 "Cloud Run CPU and memory allocation (the functions at their maximum instances) and a Locust fleet's "
                 "Compute Engine CPUs fit the region's quotas; if not, stop and name the quota and how to ask for "
                 "more; a quota that cannot be read is a note")
    lines += [f"then {PUBSUB_API} on and Service Usage v1beta1 generateServiceIdentity: Pub/Sub's service agent exists "
              "before the apply grants it the dead-letter roles",
              "each failure is one sentence with the command that fixes it; nothing is created before every check "
              "passed"]
    return lines


# --- tune's quota ----------------------------------------------------------------------------------------

def tune_quota(project: str, region: str, apis: Apis | None = None) -> tuple[tune.Quota, list[str]]:
    """Cloud Run's CPU and memory allocation in `region` for `visitkit tune --project`, read as the preflight reads
    them (quotas.read, through these APIs): each figure read from the project, or, where it cannot be read
    (permission denied, the Cloud Quotas API off, no credentials, no network), tune's ASSUMED default and a note
    saying why. It only reads: unlike the preflight it turns no API on, as a search must not change a project."""
    from google.api_core import exceptions
    from google.auth.exceptions import GoogleAuthError

    from visitkit.model import tune

    unreadable = (exceptions.GoogleAPICallError, GcpError, GoogleAuthError, OSError)
    found: dict[quotas.Quota, float] = {}  # in vCPUs and GiB, as tune searches; inf: unlimited
    unread: dict[str, list[quotas.Quota]] = {}  # why -> the quotas it kept from being read
    try:
        reader = apis or apis_for(project)
    except unreadable as error:
        unread[quotas.why_unread(error)] = [quotas.RUN_CPU, quotas.RUN_MEMORY]
    else:
        for quota in (quotas.RUN_CPU, quotas.RUN_MEMORY):
            try:
                limit = quotas.read(reader, quota, region).limit
            except unreadable as error:
                unread.setdefault(quotas.why_unread(error), []).append(quota)
                continue
            found[quota] = math.inf if limit is None else quota.whole(limit)
    default, source = tune.Quota(), tune.read_from(project)
    vcpu = (found[quotas.RUN_CPU], source) if quotas.RUN_CPU in found else (default.vcpu, default.vcpu_from)
    memory = ((found[quotas.RUN_MEMORY], source) if quotas.RUN_MEMORY in found
              else (default.memory_gib, default.memory_from))
    # tune's header says what it searches within instead: the ASSUMED default, or the figure given
    notes = [f"Cloud Run's {' and '.join(q.quota_id for q in kept)} in {region} could not be read from project "
             f"{project} ({why}); reading {'it' if len(kept) == 1 else 'them'} takes {quotas.READ_PERMISSION}"
             for why, kept in unread.items()]
    return tune.Quota(vcpu[0], memory[0], vcpu[1], memory[1]), notes

"""The Google Cloud preflight against a local fake of the APIs it calls (fake_google.py), through
Google's own client libraries: each failure is one sentence with its way out, nothing is created
before every check passed, and every call is billed to the target project."""
import pytest
from fake_google import FakeGoogle, Scenario
from google.oauth2.credentials import Credentials

from visitkit.cloud import preflight
from visitkit.errors import GcpError

pytestmark = pytest.mark.timeout(60)  # seconds: each test takes one or two

PROJECT = "visitkit-fake"
READ_APIS = preflight.READ_APIS


def tools(name):
    return f"/usr/bin/{name}"


def run(scenario, access="public", **options):
    logged = []
    with FakeGoogle(scenario) as fake:
        apis = preflight.Apis(Credentials(token="user-token"), PROJECT, endpoint=fake.url)
        try:
            result = preflight.run(PROJECT, access, apis=apis, which=tools, sleep=lambda _s: None,
                                   log=logged.append, **options)
        except GcpError as error:
            result = error
    return result, fake, logged


def refused(scenario, access="public"):
    result, fake, _ = run(scenario, access)
    assert isinstance(result, GcpError), result
    message = str(result)
    assert "\n" not in message and "Traceback" not in message
    assert fake.mutations == [] or all(":batchEnable" in path for path in fake.mutations), fake.mutations
    assert not any("generateServiceIdentity" in path for path in fake.mutations), "created before the checks passed"
    return message


def test_a_ready_project_passes_and_pubsubs_agent_is_created_last():
    result, fake, logged = run(Scenario(enabled=READ_APIS + ("pubsub.googleapis.com",)))
    assert result == preflight.Preflight("123456789012")
    assert fake.mutations == [f"/v1beta1/projects/{PROJECT}/services/pubsub.googleapis.com:generateServiceIdentity"]
    assert "generateServiceIdentity" in fake.paths()[-1] and logged == []


def test_pubsub_is_turned_on_once_every_check_passed_then_its_agent_created():
    result, fake, logged = run(Scenario())
    assert isinstance(result, preflight.Preflight)
    assert fake.mutations == [f"/v1/projects/{PROJECT}/services:batchEnable",
                              f"/v1beta1/projects/{PROJECT}/services/pubsub.googleapis.com:generateServiceIdentity"]
    assert "pubsub.googleapis.com" in logged[0]


def test_every_call_is_billed_to_the_target_project():
    _, fake, _ = run(Scenario())
    quota = [{k.lower(): v for k, v in headers.items()}.get("x-goog-user-project") for _, _, headers in fake.requests]
    assert len(quota) >= 5 and set(quota) == {PROJECT}


@pytest.mark.parametrize("constraint, policy", [
    ("iam.allowedPolicyMemberDomains", "policy-domains-restricted"),
    ("iam.managed.allowedPolicyMembers", "policy-managed-enforced"),
])
def test_an_organization_policy_that_refuses_all_users_stops_a_public_run_with_both_ways_out(constraint, policy):
    policies = {"iam.allowedPolicyMemberDomains": "policy-none", "iam.managed.allowedPolicyMembers": "policy-none",
                constraint: policy}
    message = refused(Scenario(policies=policies))
    assert f"organization policy {constraint} refuses allUsers" in message
    assert "--access authenticated" in message
    assert f"gcloud org-policies reset {constraint} --project={PROJECT}" in message
    assert "roles/orgpolicy.policyAdmin" in message


def test_the_same_policy_lets_an_authenticated_run_through_with_a_note_on_service_agents():
    policies = {"iam.allowedPolicyMemberDomains": "policy-domains-restricted",
                "iam.managed.allowedPolicyMembers": "policy-managed-enforced"}
    result, _, logged = run(Scenario(policies=policies), access="authenticated")
    assert isinstance(result, preflight.Preflight)
    assert any("service agent" in line and "gcloud org-policies reset iam.allowedPolicyMemberDomains" in line
               for line in logged)


@pytest.mark.parametrize("policies", [
    {"iam.allowedPolicyMemberDomains": "policy-allow-all", "iam.managed.allowedPolicyMembers": "policy-none"},
    {"iam.allowedPolicyMemberDomains": "policy-none", "iam.managed.allowedPolicyMembers": "policy-managed-allows-all-users"},
    {"iam.allowedPolicyMemberDomains": "policy-none"},  # the managed constraint unknown to the API
], ids=["project-allows-all", "managed-lists-allUsers", "managed-unknown"])
def test_policies_that_allow_all_users_pass(policies):
    result, _, _ = run(Scenario(policies=policies))
    assert isinstance(result, preflight.Preflight)


def test_a_policy_it_may_not_read_is_a_note_not_a_stop():
    result, _, logged = run(Scenario(errors={"orgpolicy": "error-policy-denied"}))
    assert isinstance(result, preflight.Preflight)
    assert any("could not be read" in line and "--access authenticated" in line for line in logged)


def test_billing_off_stops_with_the_link_command():
    message = refused(Scenario(billing=False))
    assert f"Billing is not enabled on project {PROJECT}" in message
    assert f"gcloud billing projects link {PROJECT} --billing-account=ACCOUNT_ID" in message


def test_the_apis_the_checks_read_are_turned_on_when_off():
    result, fake, logged = run(Scenario(enabled=()))
    assert isinstance(result, preflight.Preflight)
    assert fake.mutations[0] == f"/v1/projects/{PROJECT}/services:batchEnable"
    assert any("turning on cloudresourcemanager.googleapis.com" in line for line in logged)


def test_an_api_off_that_the_account_may_not_turn_on_stops_with_the_command():
    message = refused(Scenario(enabled=("cloudresourcemanager.googleapis.com",), may_enable=False))
    assert "may not turn on APIs" in message
    assert ("gcloud services enable cloudbilling.googleapis.com orgpolicy.googleapis.com "
            f"iamcredentials.googleapis.com cloudquotas.googleapis.com --project {PROJECT}") in message


def test_an_api_turned_on_moments_ago_that_still_answers_disabled_is_waited_for():
    scenario = Scenario(enabled=(), errors={"cloudresourcemanager": "error-crm-disabled"})
    scenario.errors_left = {"cloudresourcemanager": 2}  # answers "disabled" twice after being turned on
    result, fake, _ = run(scenario)
    assert isinstance(result, preflight.Preflight)
    assert sum("/v3/projects/" in path for path in fake.paths()) == 3


@pytest.mark.parametrize("errors", [{"serviceusage": "error-project-denied"},
                                    {"cloudresourcemanager": "error-project-missing"}])
def test_a_missing_project_stops_with_the_list_command(errors):
    message = refused(Scenario(errors=errors))
    assert f"Project {PROJECT} was not found, or your account cannot see it" in message
    assert "`gcloud projects list`" in message


def test_a_project_being_deleted_stops_with_the_undelete_command():
    message = refused(Scenario(state="DELETE_REQUESTED"))
    assert f"`gcloud projects undelete {PROJECT}`" in message


def test_a_missing_tool_stops_before_any_call():
    with FakeGoogle(Scenario()) as fake:
        apis = preflight.Apis(Credentials(token="t"), PROJECT, endpoint=fake.url)
        with pytest.raises(GcpError, match="install Terraform"):
            preflight.run(PROJECT, apis=apis, which=lambda name: None if name == "terraform" else name)
    assert fake.requests == []


def test_the_callers_own_check_runs_after_the_checks_and_before_anything_is_created():
    seen = []

    def own_check(access):
        seen.append(list(fake_requests))
        assert access == "authenticated"
        raise GcpError("your credentials cannot mint ID tokens")

    with FakeGoogle(Scenario(enabled=READ_APIS + ("pubsub.googleapis.com",))) as fake:
        fake_requests = fake.requests
        apis = preflight.Apis(Credentials(token="t"), PROJECT, endpoint=fake.url)
        with pytest.raises(GcpError, match="cannot mint"):
            preflight.run(PROJECT, "authenticated", apis=apis, which=tools, before_creating=own_check,
                          log=lambda *_: None)
    assert any("getEffectivePolicy" in path for _, path, _ in seen[0]) and fake.mutations == []


# --- access "auto": the organization policy decides --------------------------------------------------

@pytest.mark.parametrize("constraint, policy", [
    ("iam.allowedPolicyMemberDomains", "policy-domains-restricted"),
    ("iam.managed.allowedPolicyMembers", "policy-managed-enforced"),
])
def test_auto_goes_on_authenticated_where_the_organization_refuses_all_users(constraint, policy):
    policies = {"iam.allowedPolicyMemberDomains": "policy-none", "iam.managed.allowedPolicyMembers": "policy-none",
                constraint: policy}
    told = []
    result, fake, logged = run(Scenario(policies=policies), access="auto", before_creating=told.append)
    assert isinstance(result, preflight.Preflight) and result.access == "authenticated" and told == ["authenticated"]
    [said] = [line for line in logged if line.startswith("access auto:")]
    assert f"authenticated, since project {PROJECT}'s organization policy {constraint} refuses allUsers" in said
    assert "cannot be opened in a plain browser" in said
    assert any("generateServiceIdentity" in path for path in fake.mutations)  # the run goes on


def test_auto_goes_on_public_where_no_policy_refuses_all_users():
    told = []
    result, _, logged = run(Scenario(policies={"iam.allowedPolicyMemberDomains": "policy-allow-all"}), access="auto",
                            before_creating=told.append)
    assert result.access == "public" and told == ["public"]
    assert [line for line in logged if line.startswith("access auto:")] == [result.access_reason]
    assert "no organization policy" in result.access_reason


def test_auto_goes_on_public_where_the_policy_cannot_be_read_and_names_both_ways_out():
    result, _, logged = run(Scenario(errors={"orgpolicy": "error-policy-denied"}), access="auto")
    assert result.access == "public" and "could not be read" in result.access_reason
    assert any("could not be read" in line and "--access authenticated" in line for line in logged)


def test_an_explicit_access_is_honoured_and_says_no_choice():
    result, _, logged = run(Scenario(policies={"iam.allowedPolicyMemberDomains": "policy-domains-restricted"}),
                            access="authenticated")
    assert result.access == "authenticated" and result.access_reason is None
    assert not any(line.startswith("access auto:") for line in logged)

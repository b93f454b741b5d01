"""The projects a rehearsal can stand in for: what Google's control plane answers of them."""
from collections.abc import Callable
from dataclasses import dataclass

from visitkit.rehearsal.google import Scenario as GoogleScenario


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    google: Callable[[str], GoogleScenario]  # the project id -> what the control plane answers


SCENARIOS = {scenario.name: scenario for scenario in (
    Scenario("open", "a project outside any organization policy: allUsers may be granted run.invoker",
             lambda project: GoogleScenario(project=project)),
    # Organizations created since early 2024 enforce domain restricted sharing by default ("secure by
    # default" organization policies, https://cloud.google.com/resource-manager/docs/secure-by-default-organizations):
    # allUsers cannot be granted a role, so a public deployment is refused.
    Scenario("restricted-org", "a project in an organization made after 2024, whose default policy (domain "
             "restricted sharing) refuses allUsers",
             lambda project: GoogleScenario(project=project, policies={
                 "iam.allowedPolicyMemberDomains": "policy-domains-restricted",
                 "iam.managed.allowedPolicyMembers": "policy-managed-enforced"})),
)}

"""The first apply on a new project: which apply errors are tried again (from recorded error texts),
and the retry itself. Nothing reaches Google (the preflight's test is integration/test_preflight.py).

tests/fixtures/terraform/: `retry-*` the catalogue tries again, `stop-*` stop at once, `fresh-*` are
not in the catalogue but name what the same apply created (one more try), `reported-*` come from
users' failure.json (`scripts/kit fixture`) and fail here until the catalogue knows them."""
import re
import subprocess
from pathlib import Path

import pytest

from visitkit.cloud import firstrun
from visitkit.cloud.failures import CommandFailed
from visitkit.errors import GcpError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "terraform"
RETRY = sorted(FIXTURES.glob("retry-*.txt"))
STOP = sorted(FIXTURES.glob("stop-*.txt"))
FRESH = sorted(FIXTURES.glob("fresh-*.txt"))
REPORTED = sorted(FIXTURES.glob("reported-*.txt"))
QUIET = {"log": lambda *_: None}


@pytest.mark.parametrize("path", RETRY, ids=lambda p: p.stem)
def test_propagation_errors_are_tried_again(path):
    assert firstrun.propagation_reason(path.read_text())


@pytest.mark.parametrize("path", STOP, ids=lambda p: p.stem)
def test_other_errors_stop_at_once(path):
    assert firstrun.propagation_reason(path.read_text()) is None


def test_there_are_recorded_examples_of_both():
    assert len(RETRY) >= 5 and len(STOP) >= 3


class Apply:
    """A fake `terraform apply`: answers with the given outputs in turn ('' means success)."""

    def __init__(self, *outputs):
        self.outputs, self.calls = list(outputs), 0

    def __call__(self, argv, check, text, capture_output, echo=True):
        self.calls += 1
        output = self.outputs.pop(0)
        return subprocess.CompletedProcess(argv, 1 if output else 0, output, "")


def test_a_propagation_error_is_tried_again_after_a_wait():
    apply, slept = Apply((FIXTURES / "retry-pubsub-agent-missing.txt").read_text(), ""), []
    firstrun.apply_with_retries(["terraform", "apply"], apply, slept.append, log=lambda *_: None)
    assert apply.calls == 2 and slept == [firstrun.APPLY_WAITS_S[0]]


def test_any_other_error_stops_at_once_with_terraforms_message():
    apply, slept = Apply((FIXTURES / "stop-quota-exceeded.txt").read_text()), []
    with pytest.raises(GcpError, match="Quota exceeded") as stopped:
        firstrun.apply_with_retries(["terraform", "apply"], apply, slept.append, log=lambda *_: None)
    assert apply.calls == 1 and slept == [] and "after" not in str(stopped.value)


def test_it_gives_up_after_three_tries_with_growing_waits():
    text = (FIXTURES / "retry-api-just-enabled.txt").read_text()
    apply, slept = Apply(text, text, text), []
    with pytest.raises(GcpError, match="after 3 tries .*API was enabled moments ago"):
        firstrun.apply_with_retries(["terraform", "apply"], apply, slept.append, log=lambda *_: None)
    assert apply.calls == 3 and slept == list(firstrun.APPLY_WAITS_S) and slept[0] < slept[1]


def test_service_agents_of_several_words_are_recognised():
    for name in ("Eventarc", "Artifact Registry", "Cloud Build", "Cloud Functions"):
        text = f"Permission denied while using the {name} Service Agent. If you recently started to use it, ..."
        assert firstrun.propagation_reason(text) == "a Google service agent's roles are not visible yet", name


def test_firestores_database_deleted_moments_ago_is_waited_for_five_minutes():
    text = (FIXTURES / "retry-firestore-recreated-too-soon.txt").read_text()
    apply, slept = Apply(text, ""), []
    firstrun.apply_with_retries(["terraform", "apply"], apply, slept.append, log=lambda *_: None)
    assert slept == [firstrun.FIRESTORE_REUSE_WAIT_S] and slept[0] >= 300


@pytest.mark.parametrize("fixture, says", [
    ("stop-org-policy-all-users", "--access authenticated"),
    ("stop-firestore-exists", "wait 5 minutes"),
    ("stop-billing-disabled", "gcloud billing projects link"),
])
def test_an_error_that_stops_says_what_to_do_where_the_kit_knows(fixture, says):
    apply = Apply((FIXTURES / f"{fixture}.txt").read_text())
    with pytest.raises(GcpError, match="What to do: .*" + re.escape(says)):
        firstrun.apply_with_retries(["terraform", "apply"], apply, lambda _s: None, log=lambda *_: None)
    assert apply.calls == 1


# --- the catalogue: recorded texts, other names, what Terraform prints besides the sentence ----------

@pytest.mark.parametrize("path", REPORTED, ids=lambda p: p.stem)
def test_reported_failures_are_in_the_catalogue(path):
    """A text from a user's failure.json: a propagation error, or an error the kit says what to do about."""
    text = path.read_text()
    assert firstrun.propagation_reason(text) or firstrun.stop_hint(text), \
        f"teach scripts/visitkit/cloud/firstrun.py this text (PROPAGATION_ERRORS or STOP_HINTS): {path}"


OTHER_NAMES = [
    {"visitkit-demo": "acme-prod-4821", "123456789012": "918273645501"},
    {"southamerica-east1": "europe-west3", "europe-west3": "us-central1", "visitkit-functions": "images"},
    {"gcf-artifacts": "web-images", "visitkit-": "shop-", "123456789012": "42"},
]


@pytest.mark.parametrize("names", OTHER_NAMES, ids=lambda names: ",".join(names.values()))
@pytest.mark.parametrize("path", RETRY + STOP, ids=lambda p: p.stem)
def test_the_catalogue_does_not_depend_on_the_project_region_or_repository(path, names):
    text = path.read_text()
    other = text
    for old, new in names.items():
        other = other.replace(old, new)
    assert firstrun.propagation_reason(other) == firstrun.propagation_reason(text)
    assert firstrun.stop_hint(other) == firstrun.stop_hint(text)


@pytest.mark.parametrize("repository", ["gcf-artifacts", "visitkit-functions", "my_images-2"])
def test_any_repositorys_metadata_error_is_tried_again(repository):
    text = (FIXTURES / "retry-repository-metadata-visitkit-functions.txt").read_text()
    assert firstrun.propagation_reason(text.replace("visitkit-functions", repository)).startswith(
        "the Cloud Functions service agent cannot read an image repository yet")


def test_an_errorinfo_reason_classifies_whatever_the_sentence():
    """googleapi prints ErrorInfo's reason in the details and the legacy reason after the message."""
    details = (FIXTURES / "retry-api-disabled-with-details.txt").read_text()
    reworded = details.replace("has not been used in project visitkit-demo before or it is disabled",
                               "is not enabled for this project")
    assert "has not been used" not in reworded
    assert firstrun.propagation_reason(reworded) == "an API was enabled moments ago"
    legacy = "googleapi: Error 403: The API is off in this project, accessNotConfigured"
    assert firstrun.propagation_reason(legacy) == "an API was enabled moments ago"
    assert firstrun.reasons(details) >= {"SERVICE_DISABLED", "accessNotConfigured"}
    assert firstrun.propagation_reason(details.replace("SERVICE_DISABLED", "IAM_PERMISSION_DENIED").replace(
        "accessNotConfigured", "forbidden").replace("has not been used", "is not used")) is None


def test_statuses_are_read_from_googleapi_errors_and_long_running_operations():
    assert firstrun.statuses("googleapi: Error 403: Permission denied") == {403}
    assert firstrun.statuses("Error waiting for Creating function: Error code 7, message: Unable to") == {403}
    assert firstrun.statuses("Error code 5, message: not found\ngoogleapi: Error 409: conflict") == {404, 409}
    assert firstrun.statuses("Error code 3, message: Build failed") == {400}


def coloured(text):
    """A text as Terraform 1.11 writes it into a pipe: its progress lines bold, its error boxes red."""
    def line(text):
        if text.startswith(("│", "╷", "╵")):
            rest = text[2:].replace("Error: ", "\x1b[1m\x1b[31mError: \x1b[0m\x1b[0m\x1b[1m", 1)
            return f"\x1b[31m{text[:1]}\x1b[0m \x1b[0m{rest}\x1b[0m"
        return f"\x1b[0m\x1b[1m{text}\x1b[0m"
    return "\n".join(line(each) for each in text.splitlines())


def test_terraforms_colours_do_not_hide_an_error():
    text = (FIXTURES / "retry-pubsub-agent-missing.txt").read_text()
    assert firstrun.propagation_reason(coloured(text)) == firstrun.propagation_reason(text)
    fresh = (FIXTURES / "fresh-topic-not-found.txt").read_text()
    apply = Apply(coloured(fresh), "")
    firstrun.apply_with_retries(["terraform", "apply"], apply, lambda _s: None, **QUIET)
    assert apply.calls == 2


# --- one more try for an error that names what the same apply created ------------------------------

def without_progress(text):
    return "\n".join(line for line in text.splitlines() if not firstrun.PROGRESS.match(line))


@pytest.mark.parametrize("path", FRESH, ids=lambda p: p.stem)
def test_an_error_naming_what_the_apply_created_gets_one_more_try(path):
    text = path.read_text()
    assert firstrun.propagation_reason(text) is None and firstrun.stop_hint(text) is None
    assert firstrun.fresh_name(text, firstrun.created_names(text))
    apply, slept, logged = Apply(text, ""), [], []
    firstrun.apply_with_retries(["terraform", "apply"], apply, slept.append, log=logged.append)
    assert apply.calls == 2 and slept == [firstrun.APPLY_WAITS_S[0]]
    assert "not in the catalogue" in logged[0] and "send this failure text to the project" in logged[0]


@pytest.mark.parametrize("path", FRESH, ids=lambda p: p.stem)
def test_the_same_error_naming_nothing_the_apply_created_stops_at_once(path):
    text = without_progress(path.read_text())
    apply = Apply(text, "")
    with pytest.raises(CommandFailed):
        firstrun.apply_with_retries(["terraform", "apply"], apply, lambda _s: None, **QUIET)
    assert apply.calls == 1


def test_only_one_more_try_per_distinct_error():
    text = (FIXTURES / "fresh-topic-not-found.txt").read_text()
    apply = Apply(text, text.replace("13", "14"), "")
    with pytest.raises(CommandFailed, match="one more try did not mend") as stopped:
        firstrun.apply_with_retries(["terraform", "apply"], apply, lambda _s: None, **QUIET)
    assert apply.calls == 2 and "Resource not found (resource=visits)" in stopped.value.output


def test_each_distinct_error_gets_its_own_try():
    topic = (FIXTURES / "fresh-topic-not-found.txt").read_text()
    account = (FIXTURES / "fresh-service-account-get-denied.txt").read_text()
    apply = Apply(topic, account, "")
    firstrun.apply_with_retries(["terraform", "apply"], apply, lambda _s: None, **QUIET)
    assert apply.calls == 3


def test_what_earlier_tries_created_counts_too():
    """A catalogued error on the first try, after the topic was created; on the second the topic is not
    created again (it exists), and its 404 names it."""
    first = ("google_pubsub_topic.visits: Creation complete after 1s [id=projects/visitkit-demo/topics/visits]\n"
             + (FIXTURES / "retry-api-just-enabled.txt").read_text())
    second = without_progress((FIXTURES / "fresh-topic-not-found.txt").read_text())
    apply = Apply(first, second, "")
    firstrun.apply_with_retries(["terraform", "apply"], apply, lambda _s: None, **QUIET)
    assert apply.calls == 3


@pytest.mark.parametrize("status", ["Error 400", "Error 409", "Error 500", "Error code 9, message:"])
def test_only_a_403_or_404_gets_the_extra_try(status):
    text = (FIXTURES / "fresh-topic-not-found.txt").read_text().replace("Error 404", status)
    apply = Apply(text, "")
    with pytest.raises(CommandFailed):
        firstrun.apply_with_retries(["terraform", "apply"], apply, lambda _s: None, **QUIET)
    assert apply.calls == 1


def test_the_resource_address_and_progress_lines_are_not_what_an_error_names():
    names = {"visits", "projects/visitkit-demo/topics/visits"}
    text = ("google_pubsub_topic.visits: Creation complete after 1s [id=projects/visitkit-demo/topics/visits]\n"
            "╷\n│ Error: Error creating Subscription: googleapi: Error 403: The caller does not have permission\n"
            "│\n│   with google_pubsub_subscription.visits,\n"
            "│   on main.tf line 175, in resource \"x\" \"visits\":\n"
            "│  175: resource \"google_pubsub_subscription\" \"visits\" {\n╵\n")
    assert firstrun.fresh_name(text, names) is None
    assert firstrun.fresh_name(text.replace("have permission", "have permission on visits"), names) == "visits"


def test_a_failed_apply_raises_command_failed_with_all_it_printed():
    text = (FIXTURES / "stop-quota-exceeded.txt").read_text()
    with pytest.raises(CommandFailed) as stopped:
        firstrun.apply_with_retries(["terraform", "apply", "-auto-approve"], Apply(text), lambda _s: None, **QUIET)
    assert stopped.value.command == ["terraform", "apply", "-auto-approve"]
    assert stopped.value.exit_code == 1 and stopped.value.output == text
    assert str(stopped.value).startswith("terraform apply failed:\n")


def test_a_refused_grant_to_pubsubs_service_agent_names_the_way_without_an_administrator():
    text = (FIXTURES / "stop-org-policy-all-users.txt").read_text().replace(
        "allUsers", "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com")
    hint = firstrun.stop_hint(text)
    assert '"dead_letter": false' in hint and "--access authenticated" in hint

"""The first apply on a new project: which apply errors are tried again (from recorded error texts),
and the retry itself. Nothing reaches Google (the preflight's test is integration/test_preflight.py)."""
import re
import subprocess
from pathlib import Path

import pytest

from visitkit.cloud import firstrun
from visitkit.errors import GcpError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "terraform"
RETRY = sorted(FIXTURES.glob("retry-*.txt"))
STOP = sorted(FIXTURES.glob("stop-*.txt"))


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

"""The pure decisions of replay-dead-letters (visitkit/cloud/replay.py): a visit's age, the horizon in each
store mode, what a republished copy carries, and the deployment read from Terraform's outputs. The replay
itself, against the emulators: integration/test_replay.py."""
import datetime
import json

import pytest

from visitkit.cloud import replay
from visitkit.errors import GcpError
from visitkit.paths import ITERATIONS_DIR

VISIT_ID = "3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b"
FIRST = datetime.datetime(2026, 8, 24, 10, 35, 14, 812000, tzinfo=datetime.UTC)
PUSH = replay.Deployment("p", "visits", "visits-dead-letter-pull", "push", marker_ttl_days=7)
PULL_DAY_WINDOW = replay.Deployment("p", "visits", "visits-dead-letter-pull", "pull", marker_ttl_days=7,
                                    window_minutes=1440)


def letter(**attributes):
    return replay.DeadLetter("ack", "m1", json.dumps({"visit_type": "home"}).encode(),
                             {"visit_type": "home", "visit_id": VISIT_ID, **attributes})


def forwarded(**attributes):
    """As Pub/Sub forwards it (the attributes a gcloud pull on Google showed, replay.py's docstring)."""
    return letter(CloudPubSubDeadLetterSourceDeliveryCount="20", CloudPubSubDeadLetterSourceSubscription="s",
                  CloudPubSubDeadLetterSourceSubscriptionProject="p",
                  CloudPubSubDeadLetterSourceTopicPublishTime="2026-08-24T10:35:14.812+00:00", **attributes)


def test_a_visit_is_as_old_as_its_original_publish_in_googles_form_and_the_emulators():
    assert forwarded().first_published == FIRST
    assert letter(CloudPubSubDeadLetterSourceTopicPublishTime="2026-08-24T10:35:14.812Z").first_published == FIRST
    assert letter().first_published is None


def test_the_horizon_is_the_ttl_less_the_span_copies_of_a_visit_come_in():
    assert replay.refusal(forwarded(), PUSH, FIRST + datetime.timedelta(days=7) - replay.COPIES_APART
                          - datetime.timedelta(seconds=1)) is None
    too_old = replay.refusal(forwarded(), PUSH, FIRST + datetime.timedelta(days=7) - replay.COPIES_APART)
    assert too_old and "markers live 7 days" in too_old
    # pull: a day's window means copies a day apart are one visit to the store
    assert replay.refusal(forwarded(), PULL_DAY_WINDOW, FIRST + datetime.timedelta(days=6, seconds=-1)) is None
    assert "batch documents live 7 days" in replay.refusal(forwarded(), PULL_DAY_WINDOW,
                                                           FIRST + datetime.timedelta(days=6))


@pytest.mark.parametrize("dead_letter, said", [
    (letter(), "no CloudPubSubDeadLetterSourceTopicPublishTime"),
    (replay.DeadLetter("ack", "m1", b'{"visit_type": "home"}', {"visit_type": "home"}), "no visit_id"),
    (replay.DeadLetter("ack", "m1", b"{}", {"visit_id": VISIT_ID}), "not a visit"),
])
def test_a_visit_that_cannot_be_checked_is_refused_whatever_its_age(dead_letter, said):
    assert said in replay.refusal(dead_letter, PUSH, FIRST)


def test_a_republished_copy_keeps_the_visits_attributes_and_its_first_publish_not_pubsubs():
    attributes = forwarded(trace="0af7651916cd43dd8448eb211c80319c").republished_attributes()
    assert attributes == {"visit_type": "home", "visit_id": VISIT_ID, "trace": "0af7651916cd43dd8448eb211c80319c",
                          "first_published": "2026-08-24T10:35:14.812000Z"}
    # dead-lettered again after a replay: judged by the first publish, not the replay's
    again = letter(first_published=attributes["first_published"],
                   CloudPubSubDeadLetterSourceTopicPublishTime="2026-08-25T09:00:00Z")
    assert again.first_published == FIRST


def test_the_deployment_is_terraforms_names_and_the_settings_files_horizon():
    outputs = {"project_id": "p", "topic_name": "visits", "dead_letter_subscription_name": "visits-dead-letter-pull"}
    deployment = replay.deployment_of(outputs, ITERATIONS_DIR / "iteration-7", "p")
    assert deployment == replay.Deployment("p", "visits", "visits-dead-letter-pull", "pull", 7, 15)
    with pytest.raises(GcpError, match="project q's"):
        replay.deployment_of({**outputs, "project_id": "q"}, ITERATIONS_DIR / "iteration-7", "p")
    with pytest.raises(GcpError, match="no dead-letter subscription"):
        replay.deployment_of({**outputs, "dead_letter_subscription_name": None}, ITERATIONS_DIR / "iteration-0", "p")

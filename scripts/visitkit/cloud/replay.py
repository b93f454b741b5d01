"""`visitkit replay-dead-letters`: the visits Pub/Sub dead-lettered, published again to the visits topic
unless the store already holds them.

Republishing a dead-lettered visit by hand is safe only while the store still refuses its repeats: in
push mode while its marker (processed_messages/<sha256 of the visit id>) lives, marker_ttl_days; in pull
mode the puller refuses a repeat only within its window (pull.dedup_window_minutes, counted between
publish times), and dead-lettering takes hours, so a republished copy of a visit counted meanwhile would
be counted again. So each visit is checked against what the store wrote before it is republished: its
marker (push), or the `ids` of the visit_batches documents (pull), both kept marker_ttl_days.

- Already stored: acknowledged, not republished.
- Not stored, and young enough for the check to be sound: republished (same data and attributes), then
  acknowledged.
- Too old for the check (its marker, or the batch of a copy counted first, may have expired), or not
  checkable at all (no visit_id, no original publish time, malformed): refused, left in the dead-letter
  subscription. The command exits 1 when it refused any.

What a dead-lettered message keeps. Pub/Sub "wraps the original message in a new one and adds
attributes that identify the source subscription" (https://cloud.google.com/pubsub/docs/handling-failures,
read 2026-11-28 through its mirror https://documentation.s3ns.fr/pubsub/docs/handling-failures): the
forwarded copy is a new message, with a new message id and its own publish time, the time it was
forwarded; it keeps the data and attributes, and gains CloudPubSubDeadLetterSourceDeliveryCount,
CloudPubSubDeadLetterSourceSubscription, CloudPubSubDeadLetterSourceSubscriptionProject and
CloudPubSubDeadLetterSourceTopicPublishTime, the original's publish time (seen on Google in a
`gcloud pubsub subscriptions pull`, github.com/thatmike1/pixel-patrol, docs/dlq-verification.md,
2026-08-24: "CloudPubSubDeadLetterSourceTopicPublishTime=2026-08-24T10:35:14.812+00:00"; and here with
the Pub/Sub emulator 0.8, 2026-11-28: a copy published 54 ms after its original, whose publish time the
attribute gave as "2026-11-28T19:59:20.026Z"). Google's reference pages read here name no attributes:
the list is from those two observations. So a visit's age is counted from that attribute, never from
the copy's publish time (hours later); the original message id is not kept, so a message without a
visit_id cannot be checked.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from visitkit.catalogue import FIRESTORE, PAGES, stored_visits, visits
from visitkit.errors import GcpError

if TYPE_CHECKING:
    from google.cloud.firestore import Client as FirestoreClient
    from google.cloud.pubsub_v1 import PublisherClient, SubscriberClient

ORIGINAL_PUBLISH_TIME = "CloudPubSubDeadLetterSourceTopicPublishTime"
DEAD_LETTER_PREFIX = "CloudPubSubDeadLetter"  # Pub/Sub's own attributes on a forwarded copy
# Ours, on a republished copy: the visit's first publish time, so that a copy dead-lettered again is
# judged by it rather than by the replay's publish.
FIRST_PUBLISHED = "first_published"
# Another copy of the same visit (a publish retried, the client posting the visit again) may have been
# published, and counted, up to this long before the dead-lettered one: its marker or batch expires that
# much sooner, and the batches searched start that much earlier. The pull store's default window.
COPIES_APART = datetime.timedelta(hours=1)
# While the replay decides, the messages it pulled stay hidden from other pulls (the subscription's own
# deadline is 60 s); the most Pub/Sub allows.
HOLD_SECONDS = 600
PULL_MAX = 100  # messages per pull request

ALREADY_STORED, REPUBLISHED, REFUSED = "already stored", "republished", "refused"


@dataclass(frozen=True)
class Deployment:
    """Where the dead letters are and where visits go, and how long the store can tell a repeat."""
    project: str
    topic: str  # the visits topic (short name)
    dead_letter_subscription: str  # short name
    store_mode: str  # "push" or "pull"
    marker_ttl_days: int  # the markers' (push) or batch documents' (pull) lifetime
    window_minutes: int = 60  # pull: the puller's dedup window

    @property
    def copies_apart(self) -> datetime.timedelta:
        window = datetime.timedelta(minutes=self.window_minutes)
        return max(COPIES_APART, window) if self.store_mode == "pull" else COPIES_APART

    @property
    def checkable_for(self) -> datetime.timedelta:
        """How long after its first publish a visit can still be checked against the store."""
        return datetime.timedelta(days=self.marker_ttl_days) - self.copies_apart

    @property
    def record(self) -> str:
        """What the store writes of a visit it counted."""
        return "batch document" if self.store_mode == "pull" else "marker"


@dataclass(frozen=True)
class DeadLetter:
    ack_id: str
    message_id: str
    data: bytes
    attributes: dict[str, str]

    @property
    def visit_id(self) -> str | None:
        visit_id = self.attributes.get("visit_id")
        return visit_id if visits.is_visit_id(visit_id) else None

    @property
    def page(self) -> str | None:
        try:
            payload = json.loads(self.data)
        except ValueError:
            return None
        page = payload.get("visit_type") if isinstance(payload, dict) else None
        return page if page in PAGES else None

    @property
    def first_published(self) -> datetime.datetime | None:
        """The visit's first publish time: its original's (Pub/Sub's attribute), or the first one a
        replay recorded if that is earlier; None when neither is there."""
        times = [parsed_time(self.attributes.get(name)) for name in (ORIGINAL_PUBLISH_TIME, FIRST_PUBLISHED)]
        known = [t for t in times if t is not None]
        return min(known) if known else None

    def republished_attributes(self) -> dict[str, str]:
        """The visit's own attributes, without Pub/Sub's about its dead-lettering, and its first publish time."""
        kept = {k: v for k, v in self.attributes.items() if not k.startswith(DEAD_LETTER_PREFIX)}
        first = self.first_published
        assert first is not None  # only a checkable visit is republished
        return {**kept, FIRST_PUBLISHED: first.isoformat().replace("+00:00", "Z")}


@dataclass(frozen=True)
class Outcome:
    letter: DeadLetter
    action: str  # ALREADY_STORED, REPUBLISHED or REFUSED
    reason: str


def parsed_time(text: str | None) -> datetime.datetime | None:
    """An RFC 3339 time as Pub/Sub writes it ("...:14.812+00:00", "...:20.026Z"), in UTC; None otherwise."""
    if not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.astimezone(datetime.UTC) if moment.tzinfo else None


def refusal(letter: DeadLetter, deployment: Deployment, now: datetime.datetime) -> str | None:
    """Why the store cannot tell whether this visit was counted, or None when it can."""
    if letter.page is None:
        return "not a visit (its data names no page): store-inc-counter would count nothing"
    if letter.visit_id is None:
        return ("no visit_id attribute: such a visit is named by its original message id, which the "
                "dead-lettered copy does not keep")
    first = letter.first_published
    if first is None:
        return (f"no {ORIGINAL_PUBLISH_TIME} attribute: not forwarded by a dead-letter policy, so its age, "
                "and whether the store still remembers it, is unknown")
    if now - first >= deployment.checkable_for:
        return (f"first published {days(now - first)} ago: the store's {deployment.record}s live "
                f"{deployment.marker_ttl_days} days, so whether it was counted can no longer be told")
    return None


def shown_time(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


def days(span: datetime.timedelta) -> str:
    return f"{span.total_seconds() / 86400:.1f} days"


def counted_in_batches_since(db: FirestoreClient, visit_ids: Iterable[str], since: datetime.datetime,
                             timeout: float = 300) -> set[str]:
    """The visit ids given that a visit_batches document published since then holds (a batch's
    published_to is its newest copy's publish time, at or after every copy it counted)."""
    from google.cloud.firestore_v1.base_query import FieldFilter

    wanted, found = set(visit_ids), set[str]()
    query = db.collection(FIRESTORE["batches"]).where(filter=FieldFilter("published_to", ">=", since))
    for batch in query.select(["ids"]).stream(timeout=timeout):
        found.update(visit_id for visit_id in batch.get("ids") or () if visit_id in wanted)
    return found


def stored(db: FirestoreClient, deployment: Deployment, letters: Sequence[DeadLetter]) -> set[str]:
    """The visit ids of `letters` (all checkable) the store already holds."""
    visit_ids = {letter.visit_id for letter in letters if letter.visit_id}
    if not visit_ids:
        return set()
    if deployment.store_mode == "pull":
        since = min(first for letter in letters if (first := letter.first_published) is not None)
        return counted_in_batches_since(db, visit_ids, since - deployment.copies_apart)
    return stored_visits(db, visit_ids)


def pull_all(subscriber: SubscriberClient, path: str, most: int, timeout: float) -> list[DeadLetter]:
    """Up to `most` messages of the subscription, each hidden from other pulls for HOLD_SECONDS."""
    from google.api_core import exceptions

    letters: list[DeadLetter] = []
    seen: set[str] = set()
    while len(letters) < most:
        try:
            reply = subscriber.pull(request={"subscription": path, "max_messages": min(PULL_MAX, most - len(letters))},
                                    timeout=timeout)
        except exceptions.DeadlineExceeded:  # nothing came within the timeout
            break
        new = [r for r in reply.received_messages if r.message.message_id not in seen]
        if not new:
            break
        subscriber.modify_ack_deadline(request={"subscription": path, "ack_ids": [r.ack_id for r in new],
                                                "ack_deadline_seconds": HOLD_SECONDS})
        for received in new:
            message = received.message
            seen.add(message.message_id)
            letters.append(DeadLetter(received.ack_id, message.message_id, bytes(message.data),
                                      dict(message.attributes)))
    return letters


def decide(letters: Sequence[DeadLetter], deployment: Deployment, now: datetime.datetime,
           stored_ids: Callable[[Sequence[DeadLetter]], set[str]]) -> list[Outcome]:
    """Each letter's outcome; the store is read once, for the checkable ones."""
    refused = {letter.message_id: refusal(letter, deployment, now) for letter in letters}
    checkable = [letter for letter in letters if refused[letter.message_id] is None]
    held = stored_ids(checkable)
    outcomes, republished = [], set()
    for letter in letters:
        reason = refused[letter.message_id]
        if reason is not None:
            outcomes.append(Outcome(letter, REFUSED, reason))
        elif letter.visit_id in held:
            outcomes.append(Outcome(letter, ALREADY_STORED, f"a {deployment.record} of the store holds it"))
        elif letter.visit_id in republished:
            outcomes.append(Outcome(letter, ALREADY_STORED, "the same visit as another dead letter republished above"))
        else:
            republished.add(letter.visit_id)
            outcomes.append(Outcome(letter, REPUBLISHED, f"no {deployment.record} of the store holds it"))
    return outcomes


def replay(deployment: Deployment, subscriber: SubscriberClient, publisher: PublisherClient, db: FirestoreClient,
           now: datetime.datetime, dry_run: bool = False, most: int = 1000,
           pull_timeout: float = 10) -> tuple[list[Outcome], bool]:
    """(each dead letter's outcome, whether more may be left than `most`). Republishes and acknowledges
    unless dry_run; what it refuses, and with dry_run everything, is made visible again at once."""
    path = subscriber.subscription_path(deployment.project, deployment.dead_letter_subscription)
    letters = pull_all(subscriber, path, most, pull_timeout)
    outcomes = decide(letters, deployment, now, lambda checkable: stored(db, deployment, checkable))
    settled = [] if dry_run else [o for o in outcomes if o.action != REFUSED]
    topic = publisher.topic_path(deployment.project, deployment.topic)
    # All published first: a visit is acknowledged only once its copy is in the topic.
    futures = [publisher.publish(topic, o.letter.data, **o.letter.republished_attributes())
               for o in settled if o.action == REPUBLISHED]
    for future in futures:
        future.result(timeout=60)
    left = [o.letter.ack_id for o in outcomes if o not in settled]
    for ack_ids, method, extra in (([o.letter.ack_id for o in settled], subscriber.acknowledge, {}),
                                   (left, subscriber.modify_ack_deadline, {"ack_deadline_seconds": 0})):
        for start in range(0, len(ack_ids), 1000):  # well under a request's size limit
            method(request={"subscription": path, "ack_ids": ack_ids[start:start + 1000], **extra})
    return outcomes, len(letters) >= most


# ---- the command ----------------------------------------------------------------------------

def report_lines(outcomes: Sequence[Outcome], deployment: Deployment, dry_run: bool, more: bool) -> list[str]:
    would = "would be " if dry_run else ""
    done = {ALREADY_STORED: f"{would}acknowledged", REPUBLISHED: f"{would}published to {deployment.topic}, "
            f"{would}acknowledged", REFUSED: f"left in {deployment.dead_letter_subscription}"}
    lines = []
    for o in outcomes:
        first = o.letter.first_published
        lines.append(f"{o.action:15} visit {o.letter.visit_id or '-'} ({o.letter.page or '?'}, message "
                     f"{o.letter.message_id}, first published {shown_time(first) if first else 'unknown'}): "
                     f"{o.reason}; {done[o.action]}")
    counts = {action: sum(o.action == action for o in outcomes) for action in done}
    lines.append(f"{len(outcomes)} dead-lettered messages in {deployment.dead_letter_subscription} "
                 f"({deployment.store_mode} mode, {deployment.record}s kept {deployment.marker_ttl_days} days): "
                 f"{counts[ALREADY_STORED]} already stored ({done[ALREADY_STORED]}), "
                 f"{counts[REPUBLISHED]} republished ({done[REPUBLISHED]}), {counts[REFUSED]} refused "
                 f"({done[REFUSED]})" + ("; dry run: nothing was published or acknowledged" if dry_run else ""))
    if more:
        lines.append("more may be left: run the command again")
    if counts[REFUSED]:
        lines.append("The refused visits cannot be checked against the store: republishing one may count it twice. "
                     "Look at them (gcloud pubsub subscriptions pull ... without --auto-ack) and decide by hand.")
    return lines


def exit_status(outcomes: Sequence[Outcome]) -> int:
    """1 when a visit was refused (someone must look at it), else 0."""
    return 1 if any(o.action == REFUSED for o in outcomes) else 0


def deployment_of(outputs: dict[str, Any], settings_path: Path, project: str) -> Deployment:
    """The deployment's names from `terraform output`, its store's horizon from the settings file it was
    applied with."""
    from visitkit.settings import load_settings

    if outputs.get("project_id") not in (None, project):
        raise GcpError(f"infra/'s Terraform state is project {outputs['project_id']}'s, not {project}'s")
    subscription = outputs.get("dead_letter_subscription_name")
    if not subscription:
        raise GcpError("the deployment has no dead-letter subscription (dead_letter = false, or not applied): "
                       "nothing was dead-lettered")
    settings = load_settings(settings_path)
    return Deployment(project=project, topic=outputs["topic_name"], dead_letter_subscription=subscription,
                      store_mode=settings.store_mode, marker_ttl_days=settings.marker_ttl_days,
                      window_minutes=settings.pull.dedup_window_minutes)


def command(args: argparse.Namespace) -> int:
    from google.cloud import firestore, pubsub_v1

    from visitkit.cloud.credentials import billed_to, default_credentials
    from visitkit.cloud.gcp import parse_outputs, run_command, terraform_commands

    outputs = parse_outputs(run_command(terraform_commands(args.iteration, args.project)["output"], capture=True))
    deployment = deployment_of(outputs, args.iteration, args.project)
    on_emulators = os.environ.get("PUBSUB_EMULATOR_HOST") and os.environ.get("FIRESTORE_EMULATOR_HOST")
    credentials = None if on_emulators else billed_to(default_credentials(args.project), args.project)
    outcomes, more = replay(deployment, pubsub_v1.SubscriberClient(credentials=credentials),
                            pubsub_v1.PublisherClient(credentials=credentials),
                            firestore.Client(project=args.project, credentials=credentials),
                            datetime.datetime.now(datetime.UTC), dry_run=args.dry_run, most=args.max_messages)
    print("\n".join(report_lines(outcomes, deployment, args.dry_run, more)))
    return exit_status(outcomes)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """`scripts/kit replay-dead-letters ITERATION --project P`."""
    parser = subparsers.add_parser(
        "replay-dead-letters", help="publish dead-lettered visits again, unless the store holds them",
        formatter_class=argparse.RawDescriptionHelpFormatter, description=(
            "Pulls the deployment's dead-letter subscription (terraform output in infra/) and checks each visit "
            "against what the store wrote: its marker (push mode) or the batch documents (pull mode). Already "
            "stored: acknowledged. Not stored: published again to the visits topic, same data and attributes, then "
            "acknowledged. Too old to check (first published more than marker_ttl_days less an hour ago), or "
            "without a visit_id: refused, left in the subscription.\n"
            "  visitkit replay-dead-letters iterations/iteration-1 --project P --dry-run\n"
            "Exit status: 0; 1 when it refused any; 2 when it could not run (its error on stderr)"))
    parser.add_argument("iteration", type=Path, help=(
        "the iteration folder the deployment was applied with (its settings file gives store_mode and "
        "marker_ttl_days)"))
    parser.add_argument("--project", required=True, help="the deployment's Google Cloud project")
    parser.add_argument("--dry-run", action="store_true",
                        help="say what it would do; publish and acknowledge nothing")
    parser.add_argument("--max-messages", type=int, default=1000, metavar="N",
                        help="handle at most N messages in this run (default %(default)s)")
    parser.set_defaults(handler=command)
    return parser

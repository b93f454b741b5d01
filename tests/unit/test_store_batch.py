"""The pull store's own logic (functions/store_batch.py): the dedup window by publish time, its
eviction and loading, how a batch is split and grouped, the lease rules, and what a batch does on
success and failure (Firestore and Pub/Sub replaced by recorders)."""
import datetime
import gc
import importlib
import json
import queue
import tracemalloc
import uuid
import weakref
from types import SimpleNamespace

import pytest

import store_batch
from store_batch import Message, Puller, Window, batch_document, decide, lease_after, lease_is

SPAN = 600.0  # a ten-minute window
T = 1_800_000_000.0  # a publish time


def visit(key, published=T, page="home", ack_id=None):
    return Message(ack_id or f"ack-{key}-{published}", f"m-{key}", page, key, published)


def malformed(message_id="bad", published=T):
    return Message(f"ack-{message_id}", message_id, None, None, published)


# ---- the window -----------------------------------------------------------------------------
def test_a_repeat_published_within_the_window_is_refused_either_side():
    window = Window(SPAN)
    window.add_batch(["a"], T, T, exact={"a": T})
    assert window.refuses("a", T)
    assert window.refuses("a", T + SPAN)  # a late re-post, however late it arrives
    assert window.refuses("a", T - SPAN)  # an older copy arriving after the newer one
    assert not window.refuses("a", T + SPAN + 1)  # beyond the stated horizon: a new visit
    assert not window.refuses("a", T - SPAN - 1)
    assert not window.refuses("b", T)


def test_a_key_loaded_from_a_batch_is_refused_around_the_whole_batch_span():
    window = Window(SPAN)
    window.loaded(T - 2 * SPAN, [(["a"], T, T + 100)])  # only known to lie within [T, T + 100]
    assert window.refuses("a", T + 100 + SPAN) and window.refuses("a", T - SPAN)
    assert not window.refuses("a", T + 101 + SPAN)
    assert window.covers_from == T - 2 * SPAN


def test_the_newest_counted_copy_is_remembered():
    window = Window(SPAN)
    window.add_batch(["a"], T + 2 * SPAN, T + 2 * SPAN)
    window.add_batch(["a"], T, T)  # an older batch loaded later does not replace it
    assert window.keys["a"] == (T + 2 * SPAN, T + 2 * SPAN)


def test_eviction_drops_batches_older_than_the_window_and_says_what_memory_covers():
    window = Window(SPAN)
    window.loaded(T - SPAN, [])
    window.add_batch(["old"], T, T)
    window.add_batch(["new"], T + SPAN, T + SPAN)
    window.saw(T + SPAN + 10)
    window.evict()
    assert "old" not in window.keys and "new" in window.keys and len(window) == 1
    assert window.covers_from == T + 10  # newest seen - the window
    # A copy older than that needs the batches from its own publish time - the window loaded first.
    assert window.needs_load_from(T + 5) == T + 5 - SPAN
    assert window.needs_load_from(T + SPAN + 10) is None


def test_a_key_counted_again_is_not_evicted_with_its_older_batch():
    window = Window(SPAN)
    window.add_batch(["a"], T, T)
    window.add_batch(["a"], T + 3 * SPAN, T + 3 * SPAN)  # counted again beyond the horizon
    window.saw(T + 3 * SPAN)
    window.evict()
    assert window.keys["a"] == (T + 3 * SPAN, T + 3 * SPAN)


def test_an_empty_window_needs_loading_first():
    assert Window(SPAN).needs_load_from(T) == T - SPAN


def test_a_visit_id_is_held_as_its_number_and_never_taken_for_a_message_id_of_the_same_digits():
    window = Window(SPAN)
    visit_id = "00000000-0000-0000-0000-000000012345"
    window.add_batch([visit_id], T, T, exact={visit_id: T})
    assert window.refuses(visit_id, T) and list(window.keys) == [0x12345]
    assert not window.refuses("12345", T)  # a message without a visit id: another visit


def loaded_bytes_per_id(ids=20_000, batch=1000):
    """Bytes a window loaded from batch documents holds per visit id, the ids' text read afresh for each
    document as Firestore's stream gives it, and let go of as the load goes on."""
    def documents():
        for start in range(0, ids, batch):
            yield [str(uuid.UUID(int=start + n)) for n in range(batch)], T + start, T + start + 1

    gc.collect()
    tracemalloc.start()
    try:
        window = Window(SPAN)
        window.loaded(T - SPAN, documents())
        assert len(window) == ids
        return tracemalloc.get_traced_memory()[0] / ids
    finally:
        tracemalloc.stop()


def test_a_loaded_window_holds_a_visit_id_in_under_a_hundred_bytes():
    # as Python allocates them (tracemalloc): an id as its number 44, the dict's slot and the expiry list's
    # pointer, its batch's span shared (82 measured); its text alone would take 85, a span of its own 56
    assert loaded_bytes_per_id() < 100


# ---- a batch split and grouped ----------------------------------------------------------------
def test_a_batch_is_split_into_counted_duplicates_and_malformed():
    window = Window(SPAN)
    window.add_batch(["seen"], T, T)
    batch = [visit("a"), visit("seen", T + 5), malformed(), visit("a", T + 1), visit("b", page="jobs")]
    counted, duplicates, bad = decide(window, batch)
    assert [m.key for m in counted] == ["a", "b"]
    assert [m.key for m in duplicates] == ["seen", "a"]  # twice in this batch: once
    assert [m.message_id for m in bad] == ["bad"]


def test_a_batch_document_names_its_keys_pages_and_publish_span():
    document = batch_document([visit("a", T + 3), visit("b", T, "jobs"), visit("c", T + 1)], generation=4)
    assert document["ids"] == ["a", "b", "c"]
    assert document["pages"] == {"home": 2, "jobs": 1}
    assert document["published_from"].timestamp() == T and document["published_to"].timestamp() == T + 3
    assert document["writer"] == 4
    assert document["expire_at"] - document["published_to"] == datetime.timedelta(days=store_batch.MARKER_TTL_DAYS)


def test_a_pulled_message_is_read_by_store_inc_counters_rules():
    def received(data, attributes):
        published = datetime.datetime.fromtimestamp(T, datetime.UTC)
        return SimpleNamespace(ack_id="ack", message=SimpleNamespace(
            data=data, attributes=attributes, message_id="77", publish_time=published))

    visit_id = "0f8fad5b-d9cb-469f-a165-70867728950e"
    good = store_batch.message_of(received(json.dumps({"visit_type": "jobs"}).encode(), {"visit_id": visit_id}))
    assert (good.page, good.key, good.published) == ("jobs", visit_id, T)
    assert store_batch.message_of(received(json.dumps({"visit_type": "jobs"}).encode(), {})).key == "77"
    for data, attributes in ((b"not json", {}), (json.dumps({"visit_type": "x"}).encode(), {}),
                             (json.dumps({"visit_type": "jobs"}).encode(), {"visit_id": "NOT-AN-ID"})):
        bad = store_batch.message_of(received(data, attributes))
        assert bad.key is None and bad.page is None


def test_the_committer_takes_a_full_batch_at_once_or_what_came_within_the_flush(monkeypatch):
    monkeypatch.setattr(store_batch, "BATCH_SIZE", 3)
    monkeypatch.setattr(store_batch, "FLUSH_SECONDS", 0.05)
    puller = Puller()
    puller.queue = queue.Queue()
    for n in range(5):
        puller.queue.put(visit(str(n)))
    assert [m.key for m in puller._take_batch()] == ["0", "1", "2"]
    assert [m.key for m in puller._take_batch()] == ["3", "4"]  # the flush ends a partial batch
    assert puller._take_batch() == []


# ---- the lease ----------------------------------------------------------------------------------
NOW = datetime.datetime(2026, 11, 26, tzinfo=datetime.UTC)
LATER = NOW + datetime.timedelta(seconds=30)


def test_a_free_or_expired_lease_is_taken_with_a_new_generation():
    assert lease_after(None, "me", None, NOW) == 1
    assert lease_after({"owner": "other", "generation": 4, "expires_at": NOW}, "me", None, NOW) == 5


def test_a_lease_held_by_another_is_not_taken_and_ours_is_renewed():
    assert lease_after({"owner": "other", "generation": 4, "expires_at": LATER}, "me", None, NOW) is None
    assert lease_after({"owner": "me", "generation": 4, "expires_at": NOW}, "me", 4, NOW) == 4
    # Ours once, taken by another since and back at a new generation: not ours to renew.
    assert lease_after({"owner": "me", "generation": 6, "expires_at": LATER}, "me", 4, NOW) is None


def test_only_the_current_unexpired_lease_lets_a_batch_commit():
    lease = {"owner": "me", "generation": 4, "expires_at": LATER}
    assert lease_is(lease, "me", 4, NOW)
    assert not lease_is(lease, "me", 3, NOW)
    assert not lease_is(lease, "other", 4, NOW)
    assert not lease_is(lease, "me", 4, LATER)
    assert not lease_is(None, "me", 4, NOW)


# ---- one batch ----------------------------------------------------------------------------------
class Recorder(Puller):
    """A puller whose Firestore and Pub/Sub calls are recorded; `fail` makes the commit raise."""

    def __init__(self, fail=None, stored=()):
        super().__init__()
        self.window = Window(SPAN)
        self.window.loaded(T - SPAN, [])
        self.loaded_generation = self.generation = 1
        self.events, self.fail, self.stored = [], fail, list(stored)

    def commit(self, counted, generation, batch_id):
        self.events.append(("commit", [m.key for m in counted], generation))
        if self.fail:
            raise self.fail

    def _ack(self, batch):
        self.events.append(("ack", [m.message_id for m in batch]))

    def _nack(self, batch):
        self.events.append(("nack", [m.message_id for m in batch]))

    def _read_batches(self, since, before=None):
        self.events.append(("load", since, before))
        return [(ids, start, end) for ids, start, end in self.stored if end >= since]

    def _resolve_unsure(self):
        self.events.append(("resolve", self.unsure[0]))
        self.unsure = None


def test_a_batch_is_committed_then_acknowledged_all_of_it():
    puller = Recorder()
    puller.process([visit("a"), malformed(), visit("a", T + 1)])
    assert puller.events == [("commit", ["a"], 1), ("ack", ["m-a", "bad", "m-a"])]
    assert puller.figures["counted"] == 1 and puller.figures["duplicates"] == 1 and puller.figures["malformed"] == 1
    assert puller.window.refuses("a", T)
    puller.events.clear()
    puller.process([visit("a", T + 2)])  # a redelivery after the ack was lost: refused, acked, no commit
    assert puller.events == [("ack", ["m-a"])]


def test_a_failed_commit_acknowledges_nothing_and_remembers_nothing():
    puller = Recorder(fail=RuntimeError("Firestore unreachable"))
    puller.process([visit("a"), malformed(), visit("b")])
    assert puller.events == [("commit", ["a", "b"], 1), ("nack", ["m-a", "bad", "m-b"])]
    assert not puller.window.refuses("a", T) and puller.figures["counted"] == 0
    assert puller.unsure[1] == [visit("a"), visit("b")]  # it may have landed: checked before the next batch
    puller.fail = None
    puller.process([visit("a")])
    assert puller.events[2][0] == "resolve" and puller.events[3] == ("commit", ["a"], 1)


def test_a_batch_fenced_off_by_a_new_lease_holder_is_nacked_and_not_in_doubt():
    puller = Recorder(fail=store_batch.LeaseLost())
    puller.process([visit("a")])
    assert puller.events[-1] == ("nack", ["m-a"]) and puller.unsure is None


def test_a_copy_older_than_the_memory_loads_the_batches_it_needs_first():
    old = T - 3 * SPAN
    puller = Recorder(stored=[(["a"], old - 10, old - 10)])
    puller.process([visit("a", old)])
    assert puller.events == [("load", old - SPAN, T - SPAN), ("ack", ["m-a"])]  # refused: counted back then
    assert puller.figures["duplicates"] == 1


def test_a_window_loaded_for_another_generation_cannot_commit():
    puller = Recorder()
    puller.generation = 2  # the lease was lost and taken again; the window is still generation 1's
    puller.process([visit("a")])
    assert puller.events[0] == ("commit", ["a"], 1)  # fenced by the lease check: generation 1 is over


def test_a_retake_lets_go_of_the_old_window_before_it_reads_the_new_one():
    puller = Recorder()
    puller.window.add_batch(["old"], T, T)
    old, seen = weakref.ref(puller.window), []

    def read(since, before=None):
        seen.append((old(), puller.loaded_generation, len(puller.window)))
        yield ["new"], T, T

    puller._read_batches = read
    puller.generation = 2  # taken back after a takeover
    puller.load_window()
    assert seen == [(None, None, 0)]  # no commit can use either window while the new one is read
    assert puller.loaded_generation == 2 and puller.window.refuses("new", T) and not puller.window.refuses("old", T)


# ---- the entry point ------------------------------------------------------------------------------
@pytest.fixture
def main_module(monkeypatch):
    import main

    yield lambda: importlib.reload(main)
    monkeypatch.delenv("STORE_MODE", raising=False)
    importlib.reload(main)


def test_the_store_entry_point_is_the_puller_in_pull_mode_only(main_module, monkeypatch):
    import store_inc_counter

    monkeypatch.setenv("STORE_MODE", "push")
    assert main_module().store_inc_counter.__module__ == store_inc_counter.__name__
    monkeypatch.setenv("STORE_MODE", "pull")
    assert main_module().store_inc_counter.__module__ == store_batch.__name__

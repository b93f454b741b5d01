"""Every visit the suite posted to inc-counter, by its visit id, with what the client was told.

A visit's outcome is what its attempts (one, or more with --retry-visits) came to:
- acknowledged: an attempt answered 2xx (the visit must end up stored, exactly once);
- refused: every attempt answered 4xx and the visit was not tried again: a 4xx other than 429, or a
  429 without --retry-visits (the study's visitor); never published: never stored;
- gave_up: every attempt answered 429 (refused for now) and the visit ran out of tries (--retry-visits:
  posted 1 + N times); never published: never stored;
- failed: no 2xx, and an attempt answered 5xx (a publish that timed out may still have landed);
- unanswered: no 2xx, and an attempt got no answer (timeout, connection error, user stopped
  mid-request), or the visit is still under way.
failed and unanswered are ambiguous on their own; the runner's audit reads the store's marker of
every id, so each visit's fate is known. ("lost" is the audit's word: acknowledged and not stored.)

ledger.json (format 5): per outcome the visits per page ("sent" is them all), the visits sent more
than once ("retried"), the visits outside the sample ("unsampled"), the sampled visits not kept by id
("untracked", beyond --ledger-ids), under "visits" the ids, per page and outcome, and under "sent_at"
when each was first posted (unix seconds, in the same order); "sample": {"fraction": the share of
visits kept by id, "planned_visits": the plan it was set from (None: no plan)}; "workers": each
worker's latest running counts and whether its final ledger arrived; "complete": every sampled visit
is in it by id. Format 4 added gave_up: an older ledger has none (its visitor never posted a visit
again after a 429), which the reports read as 0. Format 5 added the sample and sent_at: an older
ledger kept every id up to its limit (fraction 1), without their times.

The sample: when the run's planned visits (the shape's, set before the run: locustfile.py) exceed
--ledger-ids, a visit is kept by id iff the sha256 of its id, read as a number in [0, 1), falls
below the fraction (`sampled`), so the sample is uniform over the whole run (not its first visits)
and every worker applies the same rule without a word to the others. The fraction aims at
SAMPLE_SHARE of the limit; the limit stays a hard cap on the ids a process holds. The master (or the
only process) writes the ledger every minute while the run goes on, and at its end.

In distributed mode each worker's stats report carries the visits recorded or changed since its
previous report (merged by id, so a report lost on the way is made good by a later one) and its
running counts (the master keeps each worker's latest). When the load is over the master asks
every worker for its whole ledger and waits for the replies: only then is the ledger complete. A
worker that dies first leaves its latest visits unknown by id; its counts say how many.
"""
import collections
import hashlib
import json
import os
import time
from pathlib import Path

FORMAT = 5
# A sampled ledger aims at this share of its id limit: its size varies by chance (binomially), and
# its plan is an upper bound, so the limit is not reached and the sample stays uniform to the end.
SAMPLE_SHARE = 0.8
HASH_SPACE = 2 ** 64  # the first 8 bytes of an id's sha256, as a number
OUTCOMES = ("acknowledged", "refused", "gave_up", "failed", "unanswered")


def outcome_of(status_code):
    """The outcome of one answer: status 0 is no answer at all."""
    if not status_code:
        return "unanswered"
    if 200 <= status_code < 300:
        return "acknowledged"
    if 400 <= status_code < 500:
        return "refused"
    # 5xx, and anything else inc-counter never sends itself: we cannot tell whether it was published.
    return "failed"


def settled(previous, answer):
    """The outcome of a visit after one more attempt: a 2xx settles it; otherwise an ambiguous
    attempt (5xx, no answer) keeps it ambiguous whatever later attempts say, since its publish may
    still land."""
    if previous == "acknowledged" or answer == "acknowledged":
        return "acknowledged"
    if previous in (None, "refused", "gave_up"):
        return answer
    return previous if answer == "refused" else answer


COUNTED = ("sent", *OUTCOMES, "retried", "unsampled", "untracked")


def sample_fraction(id_limit, planned_visits):
    """The share of visits kept by id: all of them when the planned visits fit under the limit, or
    when there is no plan (then the first id_limit, as before samples); otherwise SAMPLE_SHARE of
    the limit spread over the plan."""
    if not planned_visits or id_limit is None or planned_visits <= id_limit:
        return 1.0
    return SAMPLE_SHARE * id_limit / planned_visits


def sampled(visit_id, fraction):
    """True if the visit is in the sample: its id's sha256 falls below `fraction` of the hash space.
    The same answer in every process; a smaller fraction's sample lies within a larger one's."""
    if fraction >= 1:
        return True
    digest = hashlib.sha256(visit_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") < fraction * HASH_SPACE


class VisitLedger:
    """One process's visits. Its counts are kept as it records (a worker reports them every few
    seconds, however many visits it holds). It keeps by id the visits in its sample (`fraction`: all
    of them at 1), up to `id_limit`: the others are counted (as "unsampled", or "untracked" beyond
    the limit, besides their outcome) and forgotten once settled, so that a fleet's hours of load
    fit in memory."""

    def __init__(self, id_limit=None, fraction=1.0, planned_visits=None):
        self.id_limit = id_limit
        self.fraction, self.planned_visits = fraction, planned_visits
        self.visits = {}  # visit id -> [page, outcome, attempts, first sent (unix s)]
        self.in_flight = {}  # visits not kept by id, still under way: visit id -> the same
        self.changed = set()  # ids recorded or changed since the last take()
        self.tally = {key: collections.Counter() for key in COUNTED}
        self.workers = {}  # the master's: worker id -> {"counts": latest running counts, "final": bool}

    def _entry(self, visit_id):
        return self.visits.get(visit_id) or self.in_flight.get(visit_id)

    def record_sent(self, page, visit_id):
        """A new attempt of the visit is about to be posted: until it is answered, it has none."""
        entry = self._entry(visit_id)
        if entry is None:
            entry = [page, None, 0, int(time.time())]
            in_sample = sampled(visit_id, self.fraction)
            tracked = in_sample and (self.id_limit is None or len(self.visits) < self.id_limit)
            (self.visits if tracked else self.in_flight)[visit_id] = entry
            self.tally["sent"][page] += 1
            self.tally["unanswered"][page] += 1  # no outcome yet
            if not tracked:
                self.tally["untracked" if in_sample else "unsampled"][page] += 1
        entry[2] += 1
        if entry[2] == 2:
            self.tally["retried"][page] += 1
        if visit_id in self.visits:
            self.changed.add(visit_id)

    def record_answer(self, visit_id, status_code):
        entry = self._entry(visit_id)
        self._settle(visit_id, entry, settled(entry[1], outcome_of(status_code)))

    def record_gave_up(self, visit_id):
        """The visit's last try was refused for now (429) and it is not tried again: one that was tried
        more than once and refused every time gave up (one that had a 5xx or no answer stays ambiguous)."""
        entry = self._entry(visit_id)
        if entry is not None and entry[1] == "refused" and entry[2] > 1:
            self._settle(visit_id, entry, "gave_up")

    def _settle(self, visit_id, entry, outcome):
        before, entry[1] = entry[1] or "unanswered", outcome
        self.tally[before][entry[0]] -= 1
        self.tally[outcome][entry[0]] += 1
        if visit_id in self.visits:
            self.changed.add(visit_id)

    def record_done(self, visit_id):
        """The visit is settled (no more attempts): one not kept by id is forgotten."""
        self.in_flight.pop(visit_id, None)

    def take(self):
        """The visits recorded or changed since the last call (for a worker's report)."""
        taken = {visit_id: list(self.visits[visit_id]) for visit_id in self.changed}
        self.changed.clear()
        return taken

    def everything(self):
        """The whole ledger (a worker's final reply)."""
        self.changed.clear()
        return {visit_id: list(entry) for visit_id, entry in self.visits.items()}

    def add(self, visits):
        """Merges a worker's report: its latest word on each visit wins."""
        self.visits.update(visits)

    def report(self, worker, counts, visits=None, final=False):
        """The master's side of one worker's report: its visits, its running counts, and whether
        this is its final (whole) ledger."""
        if visits:
            self.add(visits)
        entry = self.workers.setdefault(worker, {"counts": {}, "final": False})
        entry["counts"] = counts or entry["counts"]
        entry["final"] = entry["final"] or final

    def complete(self):
        """Every sampled visit (every visit, at fraction 1) is known by id: every worker's final ledger
        arrived, and none went untracked."""
        return (all(entry["final"] for entry in self.workers.values())
                and not sum(self.counts().get("untracked", {}).values()))

    def counts(self):
        """Visits per outcome and page ("sent" is them all; "retried": sent more than once;
        "unsampled": outside the sample; "untracked": sampled, not kept by id): this process's own,
        or on a master the sum of each worker's latest running counts."""
        if not self.workers:
            return {key: {page: n for page, n in counter.items() if n} for key, counter in self.tally.items()}
        total = {key: collections.Counter() for key in COUNTED}
        for entry in self.workers.values():
            for key, by_page in entry["counts"].items():
                total.setdefault(key, collections.Counter()).update(by_page)
        return {key: {page: n for page, n in counter.items() if n} for key, counter in total.items()}

    def as_dict(self):
        ids = collections.defaultdict(lambda: collections.defaultdict(list))
        sent_at = collections.defaultdict(lambda: collections.defaultdict(list))
        for visit_id, (page, outcome, _attempts, first_sent) in self.visits.items():
            ids[page][outcome or "unanswered"].append(visit_id)
            sent_at[page][outcome or "unanswered"].append(first_sent)
        return {"format": FORMAT, **self.counts(),
                "sample": {"fraction": self.fraction, "planned_visits": self.planned_visits},
                "visits": {page: dict(by_outcome) for page, by_outcome in ids.items()},
                "sent_at": {page: dict(by_outcome) for page, by_outcome in sent_at.items()},
                "workers": self.workers, "complete": self.complete()}

    def write(self, path):
        """Written whole or not at all (a temporary file, then renamed over the path), so that a copy
        taken while the run goes on never reads half a ledger."""
        path = Path(path)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(self.as_dict(), sort_keys=True))
        os.replace(temporary, path)

"""Per page, what happened to the visits the suite sent to inc-counter.

sent: POSTs started; acknowledged: answered 2xx (the visit must end up stored);
refused: answered 4xx, the platform's 429 included (never published: never stored);
failed: answered 5xx (ambiguous: an instance may die after publishing, a publish may land after
the 503, so the visit may or may not be stored); the rest (sent - acknowledged - refused - failed)
got no answer (timeout, connection error, user stopped mid-request) and is just as ambiguous.
Workers ship their counts to the master with each stats report; the master sums them.
"""
import collections
import json

OUTCOMES = ("sent", "acknowledged", "refused", "failed")


def outcome_of(status_code):
    """The ledger column of an answer, or None for no answer at all (status 0)."""
    if not status_code:
        return None
    if 200 <= status_code < 300:
        return "acknowledged"
    if 400 <= status_code < 500:
        return "refused"
    # 5xx, and anything else inc-counter never sends itself: we cannot tell whether it was published.
    return "failed"


class VisitLedger:
    def __init__(self):
        self.counts = {outcome: collections.Counter() for outcome in OUTCOMES}

    def record_sent(self, page):
        self.counts["sent"][page] += 1

    def record_answer(self, page, status_code):
        outcome = outcome_of(status_code)
        if outcome:
            self.counts[outcome][page] += 1

    def take(self):
        """The counts so far as plain dicts, and start again from zero (for worker reports)."""
        taken = self.as_dict()
        for counter in self.counts.values():
            counter.clear()
        return taken

    def add(self, counts):
        for outcome in OUTCOMES:
            self.counts[outcome].update(counts.get(outcome, {}))

    def as_dict(self):
        return {outcome: dict(counter) for outcome, counter in self.counts.items()}

    def write(self, path):
        with open(path, "w") as f:
            json.dump(self.as_dict(), f, indent=2, sort_keys=True)

"""Per page, what happened to the visits the suite sent to inc-counter.

sent: POSTs started; acknowledged: answered 2xx (the visit must end up stored);
rejected: answered with an error status (never stored); the rest (sent - acknowledged - rejected)
got no answer (timeout, connection error, user stopped mid-request) and may or may not be stored.
Workers ship their counts to the master with each stats report; the master sums them.
"""
import collections
import json

OUTCOMES = ("sent", "acknowledged", "rejected")


class VisitLedger:
    def __init__(self):
        self.counts = {outcome: collections.Counter() for outcome in OUTCOMES}

    def record_sent(self, page):
        self.counts["sent"][page] += 1

    def record_answer(self, page, status_code):
        if 200 <= status_code < 300:
            self.counts["acknowledged"][page] += 1
        elif status_code >= 300:
            self.counts["rejected"][page] += 1
        # status 0: no answer at all (connection error or timeout)

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

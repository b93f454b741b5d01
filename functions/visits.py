"""What names a visit, shared by inc-counter, store-inc-counter and the kit's audit (which reads the
markers of a run's visit ids): the form of a visit id and the name of its marker document.

No dependency beyond the standard library: the kit loads this file from the checkout as it is.
"""
import hashlib
import re

# A canonical UUID as crypto.randomUUID() and str(uuid.uuid4()) write it: lowercase, hyphenated.
# One spelling per id, so that the same visit cannot be counted twice under two spellings.
VISIT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def is_visit_id(text):
    return isinstance(text, str) and VISIT_ID.fullmatch(text) is not None


def marker_id(key):
    """The marker document of a visit id (or, for a message without one, its Pub/Sub message id).
    A hash, not the raw key: Firestore spreads ids that do not grow monotonically better."""
    return hashlib.sha256(key.encode()).hexdigest()

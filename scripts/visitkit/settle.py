"""Waiting for the store to settle, so a test starts from a store that has every visit a warm-up
had acknowledged (the warm-up's visits then count in the totals read before the test)."""
import time

from visitkit.errors import VisitkitError

STORED_TIMEOUT_SECONDS = 300


def wait_until_stored(totals, baseline, expected, timeout=STORED_TIMEOUT_SECONDS, interval=10,
                      now=time.monotonic, sleep=time.sleep, error=VisitkitError):
    """Wait until the stored totals grew by `expected` visits; returns them, or raises `error`."""
    deadline = now() + timeout
    while True:
        current = totals()
        grown = sum(current.values()) - sum(baseline.values())
        if grown >= expected:
            return current
        if now() >= deadline:
            raise error(f"only {grown} of {expected} warm-up visits stored after {timeout} s")
        sleep(interval)

"""Waiting for the store to settle, so a test starts from a store that has every visit a warm-up
had acknowledged (the warm-up's visits then count in the totals read before the test)."""
import time
from collections.abc import Callable, Mapping

from visitkit.errors import VisitkitError

STORED_TIMEOUT_SECONDS = 300


def wait_until_stored(totals: Callable[[], dict[str, int]], baseline: Mapping[str, int], expected: int,
                      timeout: float = STORED_TIMEOUT_SECONDS, interval: float = 10,
                      now: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep,
                      error: type[Exception] = VisitkitError) -> dict[str, int]:
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

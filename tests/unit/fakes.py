"""Fakes the unit tests share."""


class FakeClock:
    """A clock that moves only when something sleeps: `now` and `sleep` to inject."""

    def __init__(self):
        self.t = 0.0

    def now(self):
        return self.t

    def sleep(self, seconds):
        self.t += seconds

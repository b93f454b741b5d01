"""Fakes the unit tests share."""


class FakeClock:
    """A clock that moves only when something sleeps: `now` and `sleep` to inject."""

    def __init__(self):
        self.t = 0.0

    def now(self):
        return self.t

    def sleep(self, seconds):
        self.t += seconds


def a_summary(**fields):
    """A run's summary (visitkit.results.records.Summary) for a renderer: a committed one, a local breakpoint run,
    with `fields` (its top-level keys) replaced."""
    import dataclasses
    import json

    from visitkit.paths import ROOT
    from visitkit.results.records import Summary

    committed = ROOT / "iterations/iteration-1/results/breakpoint-20261125-191233/summary.json"
    return dataclasses.replace(Summary.from_json(json.loads(committed.read_text())), **fields)

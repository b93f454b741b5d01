"""What a run's steps share: the run's state, and the sampler that reads the target once a second
while the load runs."""
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from visitkit.results import folder as results
from visitkit.results.records import Summary
from visitkit.runs.config import RunConfig
from visitkit.runs.targets import Target

if TYPE_CHECKING:
    from visitkit.cloud.fleet import Fleet


class Sampler(threading.Thread):
    """Appends target.sample() to a JSONL file once per second until stopped; keeps the first and the
    latest."""

    def __init__(self, target: Target, path: Path, interval: float = 1.0):
        super().__init__(daemon=True)
        self.target, self.path, self.interval = target, path, interval
        self.stopping = threading.Event()
        self.errors = 0
        self.first: dict[str, Any] = {}
        self.latest: dict[str, Any] = {}

    def run(self) -> None:
        with open(self.path, "a") as out:
            while not self.stopping.is_set():
                started = time.monotonic()
                try:
                    self.latest = self.target.sample()
                    self.first = self.first or self.latest
                    out.write(json.dumps(self.latest) + "\n")
                    out.flush()
                except Exception as error:  # a missed sample must not end the run
                    self.errors += 1
                    if self.errors <= 3:
                        print(f"server sample failed: {error!r}", file=sys.stderr)
                self.stopping.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)

    def figure(self, section: str, key: str, since_first: bool = False) -> float | None:
        """The latest sample's figure, summed over functions for a per-function key; with since_first,
        a counter's growth since the first sample (the stack may have counted before the test, e.g.
        during a warm-up)."""
        latest = self._read(self.latest, section, key)
        if not since_first or latest is None:
            return latest
        return latest - (self._read(self.first, section, key) or 0)

    @staticmethod
    def _read(sample: dict[str, Any], section: str, key: str) -> float | None:
        if section == "store":
            return (sample.get("store") or {}).get(key)
        values = [f.get(key) for f in (sample.get("functions") or {}).values() if f.get(key) is not None]
        return sum(values) if values else None


@dataclass
class RunState:
    """What the steps share while a run goes on; `record` becomes run.json."""
    config: RunConfig
    folder: results.ResultsFolder
    target: Target
    log: Callable[[str], None] = print
    record: dict[str, Any] = field(default_factory=dict)
    sampler: Sampler | None = None
    load_started: float | None = None
    load_ended: float | None = None
    converged: bool = False
    summary: Summary | None = None
    fleet: "Fleet | None" = None  # when Locust runs on VMs in Google Cloud
    # publish(folder, update_readme=...) -> summary, for the report step (cli hands it in)
    publish: Callable[..., Summary] | None = None

"""The runner's sampler: what the progress line reads while a test runs."""
import json
import time

from visitkit.runs.state import Sampler


class CountingTarget:
    """A target whose 429 counters keep growing, as HAProxy's do from the stack's start (a warm-up's
    429s included)."""

    def __init__(self, before_the_test):
        self.calls = before_the_test

    def sample(self):
        self.calls += 1
        return {"functions": {"get-counter": {"responses_429": 10 * self.calls},
                              "inc-counter": {"responses_429": self.calls}},
                "store": {"backlog": 100 + self.calls}}


def test_the_progress_counts_429s_from_the_tests_first_sample_not_from_the_stacks_start(tmp_path):
    target = CountingTarget(before_the_test=50)
    sampler = Sampler(target, tmp_path / "samples.jsonl", interval=0.01)
    sampler.start()
    while target.calls < 55:
        time.sleep(0.005)
    sampler.stop()
    written = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    first, latest = written[0], written[-1]
    assert first["functions"]["get-counter"]["responses_429"] == 510
    total = lambda sample: sum(f["responses_429"] for f in sample["functions"].values())  # noqa: E731
    assert sampler.figure("functions", "responses_429") == total(latest)
    assert sampler.figure("functions", "responses_429", since_first=True) == total(latest) - 561
    assert sampler.figure("store", "backlog") == latest["store"]["backlog"]

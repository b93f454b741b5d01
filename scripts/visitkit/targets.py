"""What a run is aimed at: an object with base_url, totals(), sample(), close().

Optional: window_samples(start, end, results_dir) -> [samples] for platforms whose figures only
arrive after the run (Cloud Monitoring); the runner then uses those instead of the live samples.
`convergence_note` says anything that delays or blurs the stored totals.
"""
import json
import time
import urllib.request
from pathlib import Path

from visitkit.settings import PAGES


class LocalTarget:
    """The emulator stack, brought up with the iteration's settings and taken down at close()."""
    convergence_note = ""

    def __init__(self, iteration_dir, state_dir, queue_timeout=10.0, port=0, keep_up=False):
        from visitkit.stack import LocalStack  # only the local target needs the emulators

        # The stack's state folder is inside the results: its logs stay with the run.
        self.stack = LocalStack(state_dir)
        self.keep_up = keep_up
        self.base_url = self.stack.up(Path(iteration_dir) / "settings.tfvars.json", port=port,
                                      queue_timeout=queue_timeout).rstrip("/")
        self._client = self.stack.firestore()
        self._sample_client = self.stack.firestore()  # the sampler thread has its own

    def totals(self):
        return self.stack.totals(self._client)

    def sample(self):
        return self.stack.sample(self._sample_client)

    def close(self):
        if self.keep_up:
            print(f"stack left running; stop it with: scripts/local down --state-dir {self.stack.state_dir}")
            return
        self.stack.down()


class UrlTarget:
    """An already deployed system known only by its base URL: totals come from get-counter."""

    def __init__(self, base_url, cache_ttl_seconds=None):
        self.base_url = base_url.rstrip("/")
        ttl = f"{cache_ttl_seconds} s" if cache_ttl_seconds is not None else "the configured"
        self.convergence_note = (
            f"Totals read through get-counter, whose in-process cache ({ttl} TTL, per instance) "
            "delays convergence by up to one TTL and can show different totals per instance.")

    def totals(self):
        totals = {}
        for page in PAGES:
            with urllib.request.urlopen(f"{self.base_url}/get-counter?visit_type={page}", timeout=30) as reply:
                totals[page] = int(json.load(reply)["count"])
        return totals

    def sample(self):
        return {"time": time.time(), "source": "url", "functions": {}, "store": {}}

    def close(self):
        pass


def open_target(spec, iteration_dir, state_dir, *, queue_timeout=10.0, keep_up=False, project=None,
                region=None, destroy=False):
    """spec: "local", "gcp" or a base URL."""
    if spec == "local":
        return LocalTarget(iteration_dir, state_dir, queue_timeout=queue_timeout, keep_up=keep_up)
    if spec == "gcp":
        from visitkit import gcp

        if not project:
            raise SystemExit("--target gcp needs --project")
        return gcp.open_target(iteration_dir, project, region=region, destroy=destroy)
    if spec.startswith(("http://", "https://")):
        from visitkit.settings import load_settings

        return UrlTarget(spec, load_settings(iteration_dir).cache_ttl_seconds)
    raise SystemExit(f"--target must be local, gcp or a base URL, not {spec!r}")

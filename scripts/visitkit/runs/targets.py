"""What a run is aimed at: the local stack, a deployed base URL, or a Google Cloud deployment.

A target is built from the run's configuration without side effects, so a dry run can ask it
for its steps. It offers:
  start_steps() / stop_step(): named steps (steps.Step) the runner runs and --dry-run prints
  base_url, totals(), sample()            once started
  totals_source                           where totals come from, in words
  notes                                   what the report should say about figures from it
  min_convergence_wait                    seconds a late redelivery may still take
  window_step() (optional)                the platform's figures, read after the run
  stored_visits(ids) (optional)           the visit ids whose marker the store holds (the exact audit)
  billed_region (optional)                the region whose prices the audit's reads are billed at
"""
import json
import time
import urllib.request

from visitkit.twin import push, resources
from visitkit.catalogue import CATALOGUE, PAGES, QUEUE_TIMEOUT_S, READER_FUNCTION, stored_visits
from visitkit.steps import Step

LOCAL_NOTE = ("Local figures: Locust, the emulators, HAProxy and every function instance share one small "
              "machine (2 cores here), and the emulators are not Firestore/Pub/Sub: absolute RPS and "
              "latencies are far below Google Cloud's; compare iterations with each other, not with the study.")


class LocalTarget:
    """The emulator stack, brought up with the iteration's settings and taken down at the end."""
    kind = "local"
    totals_source = "the Firestore emulator"
    min_convergence_wait = 0
    updates_readme = True

    def __init__(self, settings, state_dir, queue_timeout=QUEUE_TIMEOUT_S, keep_up=False, profile=None):
        from visitkit.twin.profile import load_profile
        from visitkit.twin.stack import LocalStack  # only the local target needs the emulators

        self.settings, self.queue_timeout, self.keep_up = settings, queue_timeout, keep_up
        self.profile = profile or load_profile()
        self.stack = LocalStack(state_dir)  # inside the results folder: its logs stay with the run
        self.base_url = "<base_url>"  # a free port, known once started
        self.notes = [LOCAL_NOTE]
        self._client = self._sample_client = None
        self._push_start = {}  # the push relay's counters when the test began (after a warm-up)

    def start_steps(self):
        from visitkit.settings import summary_line

        return [Step("start the local stack", [
            f"Firestore and Pub/Sub emulators, HAProxy ({self.queue_timeout:g} s queue before a 429) and the "
            f"functions with {self.settings.source}: {summary_line(self.settings)}",
            f"latency profile {self.profile.describe()}"
            + (", through Toxiproxy" if self.profile.needs_proxy else ""),
            "push relay (pulls from the emulator, pushes like Pub/Sub); a supervisor restarts crashed instances",
            "<base_url> is its HAProxy on a free port"], self._start)]

    def _start(self, _run):
        self.base_url = self.stack.up(self.settings, port=0, queue_timeout=self.queue_timeout,
                                      profile=self.profile).rstrip("/")
        self._client = self.stack.firestore()
        self._sample_client = self.stack.firestore()  # the sampler thread has its own
        self._resources = resources.ProcessSampler(self._process_groups)

    def _process_groups(self):
        """{component: process group ids} of what the stack runs now (restarted instances included)."""
        groups = {}
        for process in (self.stack.state() or {}).get("processes", []):
            groups.setdefault(resources.component_of(process["name"]), []).append(process["pid"])
        return groups

    def watch(self, component, pid):
        """Also sample a process the run starts itself (Locust), with its children."""
        self._resources.watch(component, pid)

    def totals(self):
        return self.stack.totals(self._client)

    def stored_visits(self, visit_ids):
        return stored_visits(self._client, visit_ids)

    def sample(self):
        sample = self.stack.sample(self._sample_client)
        return {**sample, "push": self._since_start(sample.get("push")), "resources": self._resources.sample()}

    def mark_start(self):
        """The test begins: from here the push relay's counters count from zero (a warm-up's deliveries
        are not the test's). HAProxy's counters are read against the test's first sample already."""
        figures = self.stack.sample(self._sample_client).get("push") or {}
        self._push_start = {key: value for key, value in figures.items() if key in push.COUNTERS}

    def _since_start(self, figures):
        if not figures:
            return figures
        return {key: value - self._push_start.get(key, 0) if key in push.COUNTERS else value
                for key, value in figures.items()}

    def twin_figures(self):
        """The twin's own figures at the end: instance restarts and the push relay's counters."""
        return {"restarts": self.stack.restarts(),
                "push": self._since_start(self.stack.sample(self._sample_client).get("push"))}

    def stop_step(self):
        if self.keep_up:
            return Step("leave the local stack running", [
                f"stop it later: scripts/local down --state-dir {self.stack.state_dir}"], None, always=True)
        return Step("stop the local stack", ["every process it started, by process group"],
                    lambda _run: self.stack.down(), always=True)


class UrlTarget:
    """An already deployed system known only by its base URL: totals come from get-counter."""
    kind = "url"
    min_convergence_wait = 0
    updates_readme = False

    def __init__(self, base_url, settings):
        self.base_url = base_url.rstrip("/")
        self.totals_source = (f"{self.base_url}{CATALOGUE[READER_FUNCTION].path} (its cache delays them by up to "
                              f"one TTL)")
        self.notes = [f"Totals read through {READER_FUNCTION}, whose in-process cache ({settings.cache_ttl_seconds} s "
                      "TTL, per instance) delays convergence by up to one TTL and can show different totals per "
                      "instance."]

    def start_steps(self):
        return [Step("use the deployed system", [f"at {self.base_url}"], None)]

    def totals(self):
        totals = {}
        for page in PAGES:
            url = f"{self.base_url}{CATALOGUE[READER_FUNCTION].path}?visit_type={page}"
            with urllib.request.urlopen(url, timeout=30) as reply:
                totals[page] = int(json.load(reply)["count"])
        return totals

    def sample(self):
        return {"time": time.time(), "source": "url", "functions": {}, "store": {}}

    def stop_step(self):
        return None

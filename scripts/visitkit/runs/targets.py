"""What a run is aimed at: the local stack, a deployed base URL, or a Google Cloud deployment.

A target is built from the run's configuration without side effects, so a dry run can ask it
for its steps. `Target` is what the runner asks of one; LocalTarget and UrlTarget are here, and
GcpTarget (cloud/gcp.py) has the same members without importing this module (the runs sit above
the cloud). A member that has nothing to do for a target says so (None, False, a no-op).
"""
import json
import time
import urllib.request
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from visitkit.catalogue import CATALOGUE, PAGES, QUEUE_TIMEOUT_S, READER_FUNCTION, counted_in_batches, stored_visits
from visitkit.errors import RunError
from visitkit.samples import Sample
from visitkit.settings import Settings
from visitkit.steps import Step
from visitkit.twin import push, resources
from visitkit.twin.profile import Profile

if TYPE_CHECKING:
    from google.cloud.firestore import Client

LOCAL_NOTE = ("Local figures: Locust, the emulators, HAProxy and every function instance share one small "
              "machine (2 cores here), and the emulators are not Firestore/Pub/Sub: absolute RPS and "
              "latencies are far below Google Cloud's; compare iterations with each other, not with the study.")


class Target(Protocol):
    """What the runner asks of a target."""

    @property
    def kind(self) -> str: ...  # "local", "url" or "gcp"

    @property
    def base_url(self) -> str: ...  # once started ("<base_url>" before, as a dry run shows it)

    @property
    def totals_source(self) -> str: ...  # where totals come from, in words

    @property
    def notes(self) -> list[str]: ...  # what the report should say about figures from it

    @property
    def min_convergence_wait(self) -> float: ...  # seconds a late redelivery may still take

    @property
    def updates_readme(self) -> bool: ...  # a run on it may point the iteration README's latest-run block at it

    @property
    def locust_args(self) -> Sequence[str]: ...  # what Locust needs to call the functions (ID tokens)

    @property
    def reads_visits(self) -> bool: ...  # stored_visits() can read the store's markers (the exact audit)

    @property
    def billed_region(self) -> str | None: ...  # where the audit's reads are billed; None: not billed

    # The deployment the kit made, for run.json, the fleet and --resume (None or False where it made none).
    @property
    def access(self) -> str | None: ...  # as deployed: "public" or "authenticated" once the preflight decided

    @property
    def dead_letter(self) -> bool | None: ...  # False once the organization refused the dead-letter grants

    @property
    def deployed_region(self) -> str | None: ...

    @property
    def decisions(self) -> dict[str, Any] | None: ...  # what run.json keeps for --resume

    @property
    def destroy(self) -> bool: ...  # its stop step tears the deployment down (a resumed run deploys again)

    def resume(self, decisions: dict[str, Any]) -> None: ...  # deploy as the failed run decided

    def start_steps(self) -> list[Step]: ...  # named steps the runner runs and --dry-run prints

    def stop_step(self) -> Step | None: ...

    def window_step(self) -> Step | None: ...  # the platform's figures, read after the run; None: none

    def check_steps(self) -> list[Step]: ...  # checks of the run's own figures after the window (a rehearsal's)

    def window_samples(self, start: float, end: float, results_dir: Path) -> list[Sample]: ...  # with a window step

    def totals(self) -> dict[str, int]: ...  # {page: stored visits}, once started

    # the ids the store holds (their markers); a Mapping says how many times each was counted (a pull store's
    # batches, where an id counted twice is in two of them)
    def stored_visits(self, visit_ids: Iterable[str]) -> Collection[str]: ...

    def sample(self) -> dict: ...  # the platform's figures now, once a second during the load

    def watch(self, component: str, pid: int) -> None: ...  # also sample a process the run started (Locust)

    def mark_start(self) -> None: ...  # the test begins after a warm-up: its counters count from here

    def twin_figures(self) -> dict[str, Any] | None: ...  # the twin's own figures at the end; None off the twin


class NotDeployed:
    """The Target members about a deployment, for the targets whose system the kit did not deploy."""
    access = dead_letter = deployed_region = billed_region = decisions = None
    destroy = False
    locust_args = ()

    def resume(self, decisions: dict[str, Any]) -> None:
        """Nothing to resume: RunConfig takes --resume for Google Cloud runs only."""

    def window_step(self) -> None:
        return None  # no platform's figures to read after the run: the live samples are the figures

    def check_steps(self) -> list[Step]:
        return []

    def window_samples(self, start: float, end: float, results_dir: Path) -> list[Sample]:
        return []


class LocalTarget(NotDeployed):
    """The emulator stack, brought up with the iteration's settings and taken down at the end."""
    kind = "local"
    totals_source = "the Firestore emulator"
    min_convergence_wait = 0
    updates_readme = True
    reads_visits = True

    def __init__(self, settings: Settings, state_dir: Path, queue_timeout: float = QUEUE_TIMEOUT_S,
                 keep_up: bool = False, profile: Profile | None = None):
        from visitkit.twin.profile import load_profile
        from visitkit.twin.stack import LocalStack  # only the local target needs the emulators

        self.settings, self.queue_timeout, self.keep_up = settings, queue_timeout, keep_up
        self.profile = profile or load_profile()
        self.stack = LocalStack(state_dir)  # inside the results folder: its logs stay with the run
        self.base_url = "<base_url>"  # a free port, known once started
        self.notes = [LOCAL_NOTE]
        self._client: Client | None = None
        self._sample_client: Client | None = None
        self._push_start: dict[str, Any] = {}  # the push relay's counters when the test began (after a warm-up)

    def start_steps(self) -> list[Step]:
        from visitkit.settings import summary_line

        return [Step("start the local stack", [
            f"Firestore and Pub/Sub emulators, HAProxy ({self.queue_timeout:g} s queue before a 429) and the "
            f"functions with {self.settings.source}: {summary_line(self.settings)}",
            f"latency profile {self.profile.describe()}"
            + (", through Toxiproxy" if self.profile.needs_proxy else ""),
            ("no push relay: store-inc-counter pulls its visits in batches itself (store_mode pull)"
             if self.settings.pulls else "push relay (pulls from the emulator, pushes like Pub/Sub)")
            + "; a supervisor restarts crashed instances",
            self._instances_line(),
            "<base_url> is its HAProxy on a free port"], self._start)]

    def _instances_line(self) -> str:
        """How the twin starts the functions' instances: all with the stack, or as its autoscaler decides."""
        autoscaled = [name for name in self.settings.functions if self.settings.autoscaled(name)]
        if not autoscaled:
            return (f"scaling {self.settings.scaling}: every instance of each function (its max_instances) starts "
                    "with the stack and runs to the end"
                    + (", min_instances being max_instances" if self.settings.scaling == "auto" else ""))
        others = len(autoscaled) < len(self.settings.functions)
        return (f"scaling auto: {', '.join(autoscaled)} start at their min_instances; the autoscaler starts more on "
                "demand (requests waiting) and on the one-minute averages, up to max_instances, and stops those idle "
                "past the idle time" + ("; the others run all their instances" if others else "")
                + " (docs/local-twin.md, Autoscaling)")

    def _start(self, _run: object) -> None:
        self.base_url = self.stack.up(self.settings, port=0, queue_timeout=self.queue_timeout,
                                      profile=self.profile).rstrip("/")
        self._client = self.stack.firestore()
        self._sample_client = self.stack.firestore()  # the sampler thread has its own
        self._resources = resources.ProcessSampler(self._process_groups)

    def _process_groups(self) -> dict[str, list[int]]:
        """{component: process group ids} of what the stack runs now (restarted instances included)."""
        groups: dict[str, list[int]] = {}
        for process in (self.stack.state() or {}).get("processes", []):
            groups.setdefault(resources.component_of(process["name"]), []).append(process["pid"])
        return groups

    def watch(self, component: str, pid: int) -> None:
        """Also sample a process the run starts itself (Locust), with its children."""
        self._resources.watch(component, pid)

    def totals(self) -> dict[str, int]:
        return self.stack.totals(self._client)

    def stored_visits(self, visit_ids: Iterable[str]) -> Collection[str]:
        assert self._client is not None  # start() made it
        if self.settings.pulls:  # the ids are in the batch documents, not in markers
            return counted_in_batches(self._client, visit_ids)
        return stored_visits(self._client, visit_ids)

    def sample(self) -> dict[str, Any]:
        sample = self.stack.sample(self._sample_client)
        return {**sample, "push": self._since_start(sample.get("push")), "resources": self._resources.sample()}

    def mark_start(self) -> None:
        """The test begins: from here the push relay's counters count from zero (a warm-up's deliveries
        are not the test's). HAProxy's counters are read against the test's first sample already."""
        figures: Mapping[str, object] = self.stack.sample(self._sample_client).get("push") or {}
        self._push_start = {key: value for key, value in figures.items() if key in push.COUNTERS}

    def _since_start(self, figures):
        if not figures:
            return figures
        return {key: value - self._push_start.get(key, 0) if key in push.COUNTERS else value
                for key, value in figures.items()}

    def twin_figures(self) -> dict[str, Any]:
        """The twin's own figures at the end: instance restarts and the push relay's counters."""
        return {"restarts": self.stack.restarts(),
                "push": self._since_start(self.stack.sample(self._sample_client).get("push"))}

    def stop_step(self) -> Step:
        if self.keep_up:
            return Step("leave the local stack running", [
                f"stop it later: scripts/local down --state-dir {self.stack.state_dir}"], None, always=True)
        return Step("stop the local stack", ["every process it started, by process group"],
                    lambda _run: self.stack.down(), always=True)


class UrlTarget(NotDeployed):
    """An already deployed system known only by its base URL: totals come from get-counter."""
    kind = "url"
    min_convergence_wait = 0
    updates_readme = False
    reads_visits = False  # the kit has no way into its store

    def __init__(self, base_url: str, settings: Settings):
        self.base_url = base_url.rstrip("/")
        self.totals_source = (f"{self.base_url}{CATALOGUE[READER_FUNCTION].path} (its cache delays them by up to "
                              f"one TTL)")
        self.notes = [f"Totals read through {READER_FUNCTION}, whose in-process cache ({settings.cache_ttl_seconds} s "
                      "TTL, per instance) delays convergence by up to one TTL and can show different totals per "
                      "instance."]

    def start_steps(self) -> list[Step]:
        return [Step("use the deployed system", [f"at {self.base_url}"], None)]

    def totals(self) -> dict[str, int]:
        totals = {}
        for page in PAGES:
            url = f"{self.base_url}{CATALOGUE[READER_FUNCTION].path}?visit_type={page}"
            with urllib.request.urlopen(url, timeout=30) as reply:
                totals[page] = int(json.load(reply)["count"])
        return totals

    def stored_visits(self, visit_ids: Iterable[str]) -> set[str]:
        raise RunError("the kit cannot read the store of a deployment known only by its URL")

    def sample(self) -> dict[str, Any]:
        return {"time": time.time(), "source": "url", "functions": {}, "store": {}}

    def watch(self, component: str, pid: int) -> None:
        pass  # no process of its own to sample

    def mark_start(self) -> None:
        pass  # no warm-up: its counters are read as they are

    def twin_figures(self) -> None:
        return None

    def stop_step(self) -> None:
        return None

"""The Google Cloud target, rehearsed on this machine: every step of the real run, nothing sent to Google.

`RehearsalTarget` is GcpTarget itself (the same steps, commands, waits and reads), with only what
belongs to Google stood in for:
- Google's APIs the preflight and google-auth call: the control plane stand-in (google.py), with the
  organization policy of a scenario (scenarios.py), and a service account key of its own as the
  application-default credentials (GOOGLE_APPLICATION_CREDENTIALS, for the kit and Locust alike);
- Terraform's google and archive providers: the schema stand-in in its rehearsal mode (terraform.py),
  through which the kit's own `terraform init`, `apply`, `output -json` and `destroy` run unchanged,
  the state kept in the rehearsal's folder;
- Cloud Run, Pub/Sub and Firestore: the twin (visitkit.twin) started from the applied state (each
  function's instances, concurrency, timeout and environment, its run.invoker members, the push
  account), with Cloud Run's front in HAProxy (twin/cloudrun.py) and Google's emulators;
- Cloud Monitoring: answered from what the functions really did (monitoring.py);
- DNS and TLS to Google's front: the one seam. Terraform's outputs keep Google's URLs; the kit and
  Locust send the requests to the twin's front instead (base_url), with the same paths and tokens.
What a real run does differently is said at the end (REAL_RUN_DIFFERS).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from visitkit.catalogue import PUSH_FUNCTION
from visitkit.cloud import preflight
from visitkit.cloud.gcp import GcpTarget
from visitkit.errors import GcpError
from visitkit.net import free_port
from visitkit.rehearsal import terraform
from visitkit.rehearsal.google import ControlPlane
from visitkit.rehearsal.scenarios import SCENARIOS, Scenario
from visitkit.settings import Settings
from visitkit.steps import Step

# A rehearsal waits this long at most where a real run waits for Google (readiness, the first visit):
# nothing propagates here, so a step that has not passed by then never will.
REHEARSAL_WAIT_S = 30
REAL_RUN_DIFFERS = [
    "IAM bindings made by the apply take effect at once here; on Google Cloud a new run.invoker or token-creator "
    "binding can take minutes (the kit waits for it, and says so)",
    "the functions' builds (Cloud Build, Artifact Registry) are not run: gcloud's command for the puller's image is "
    "recorded and checked, the functions run from this checkout",
    "latencies and throughput are this machine's emulators and processes, not Google's",
    "requests go to the twin's front on this machine: Google's DNS, TLS and front ends are not in the path",
    "Cloud Monitoring is read at once: on Google Cloud its data arrive minutes late (the kit waits for them)",
    "the quotas and organization policy are the scenario's, not your project's",
]


class RehearsalTarget(GcpTarget):
    """GcpTarget with Google stood in for; `folder`: where the rehearsal keeps its state (in the results)."""

    def __init__(self, settings: Settings, iteration_dir: str | Path, project: str | None, folder: Path,
                 scenario: str = "open", region: str | None = None, destroy: bool = False,
                 access: str | None = None, invokers: Iterable[str] = (), wait_s: float = REHEARSAL_WAIT_S,
                 log: Callable[[str], None] = print):
        if scenario not in SCENARIOS:
            raise GcpError(f"--rehearse {scenario}: no such scenario; one of {', '.join(SCENARIOS)}")
        self.workspace = Path(folder).resolve()
        self.scenario: Scenario = SCENARIOS[scenario]
        self._google: ControlPlane | None = None  # started by the first step (a dry run starts nothing)
        self.stack: Any = None  # the twin, once the apply made something to run
        self.monitoring: Any = None
        self.wait_s = wait_s
        super().__init__(settings, iteration_dir, project, region, destroy, access, invokers,
                         infra_dir=terraform.infra_path(self.workspace / "terraform"), run=self._run_terraform,
                         preflight=self._rehearsed_preflight, ingestion_delay=0, refusals=self._push_refusals,
                         ready_timeout=wait_s, first_visit_timeout=wait_s, sleep=polled, log=log)
        # Nothing is late here: a redelivery comes within the twin's own backoff, and Monitoring at once.
        self.redelivery_wait, self.min_convergence_wait = int(wait_s), 0
        self.notes.append("A rehearsal: Google's control plane, Cloud Run, Pub/Sub, Firestore and Monitoring stood in "
                          "for on this machine; " + "; ".join(REAL_RUN_DIFFERS) + ".")

    # --- steps ---
    def start_steps(self) -> list[Step]:
        start = Step("rehearsal: start Google's stand-ins", [
            f"the control plane stand-in (preflight APIs, OAuth tokens, ID tokens) with scenario "
            f"{self.scenario.name}: {self.scenario.description}",
            "a service account key of its own as the application-default credentials (the kit's and Locust's)",
            "Terraform's google and archive providers: the schema stand-in in rehearsal mode, state in "
            f"{self.workspace / 'terraform'}",
            "after the apply: the twin started from the applied state, Cloud Run's front in HAProxy"],
            self._start_google)
        return [start, *super().start_steps()]

    def check_steps(self) -> list[Step]:
        return [Step("rehearsal: the platform's figures agree with the audit", [
            "Monitoring's store figures for the window (from what the functions logged) against the audit: the "
            "visits Locust saw acknowledged are among those inc-counter accepted, the audit's stored visits among "
            "those the store counted, none beyond what Firestore holds, and the store's deliveries are not 0 while "
            "visits were stored"], self._check_figures)]

    def stop_step(self) -> Step:
        real = super().stop_step()
        lines = [*real.details, "then stop the twin and the control plane stand-in",
                 "what a real run does differently:", *(f"- {line}" for line in REAL_RUN_DIFFERS)]
        return Step(real.name, lines, self._stop, always=True)

    # --- actions ---
    @property
    def google(self) -> ControlPlane:
        if self._google is None:
            raise GcpError("rehearsal: Google's stand-ins are not started (the first step starts them)")
        return self._google

    def _start_google(self, _run: object = None) -> None:
        self.workspace.mkdir(parents=True, exist_ok=True)
        self._google = ControlPlane(self.scenario.google(self.project)).start()
        key = self.google.service_account_key(f"rehearsal@{self.project}.iam.gserviceaccount.com",
                                              self.workspace / "credentials.json")
        # The kit's clients and Locust's read application-default credentials from here.
        os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = str(key)
        os.environ.pop("GOOGLE_CLOUD_QUOTA_PROJECT", None)

    def _rehearsed_preflight(self, project: str, access: str, **options: Any) -> preflight.Preflight:
        apis = preflight.Apis(self.credentials(), project, endpoint=self.google.url)
        return preflight.run(project, access, apis=apis, which=terraform.which, **options)

    def _run_terraform(self, argv: Any, **options: Any) -> Any:
        """The kit's own command line, run with the rehearsal's providers, state and gcloud."""
        from visitkit.cloud import firstrun

        env = {**os.environ, **terraform.environment(self.workspace / "terraform")}
        return firstrun.stream_command(argv, env=env, **options)

    def _read_outputs(self) -> None:
        super()._read_outputs()
        self._start_twin()

    def _start_twin(self) -> None:
        """The twin from the applied state; the kit's requests then go to its front (the one seam)."""
        from visitkit.rehearsal.monitoring import MonitoringStandIn
        from visitkit.twin.stack import LocalStack

        if self.stack is not None:
            return
        state = terraform.applied_state(self.workspace / "terraform")
        deployment = terraform.deployment(state, self.outputs, public_key=self.google.public_key_file(self.workspace),
                                          token_endpoint=self.google.url)
        self.deployment = deployment
        self.stack = LocalStack(self.workspace / "stack")
        front = self.stack.up(self.settings, port=free_port(), deployment=deployment, request_log=True)
        stack_state = self.stack.state()
        os.environ["FIRESTORE_EMULATOR_HOST"] = stack_state["firestore"]
        self.base_url = front  # Terraform's base_url stays in self.outputs
        self.monitoring = MonitoringStandIn.for_stack(self.stack, deployment, state)
        self.monitoring.start()
        self._metrics_client = self.monitoring.client()

    def _check_figures(self, run: Any) -> None:
        """Raises GcpError naming each disagreement between Monitoring's figures and the audit."""
        from visitkit.results import folder as results

        samples = [json.loads(line) for line in (run.folder / results.SAMPLES).read_text().splitlines()]
        audit = json.loads((run.folder / results.AUDIT).read_text())
        acknowledged = json.loads((run.folder / results.LEDGER).read_text()).get("acknowledged", {})
        problems = disagreements(samples[-1]["store"] if samples else {}, sum(acknowledged.values()), audit)
        if problems:
            raise GcpError("rehearsal: the platform's figures disagree with the audit: " + "; ".join(problems))

    def _push_refusals(self, since: str) -> int:
        """Pushes store-inc-counter refused with 403 since `since`, from the front's request log (what
        Cloud Run's request logs say on Google Cloud)."""
        import datetime

        from visitkit.rehearsal.monitoring import request_of

        if self.stack is None:
            return 0
        start = datetime.datetime.fromisoformat(since).timestamp()
        log = self.stack.logs / "haproxy.log"
        requests = [request_of(line) for line in (log.read_text(errors="replace").splitlines() if log.exists() else [])]
        return sum(1 for request in requests if request and request["backend"] == PUSH_FUNCTION
                   and request["status"] == 403 and request["time"] >= start)

    def _stop(self, run: object = None) -> None:
        try:
            if self.destroy:
                self._tear_down(run)
            else:
                self._close_client(run)
        finally:
            if self.monitoring is not None:
                self.monitoring.stop()
            if self.stack is not None:
                self.stack.down()
            if self._google is not None:
                self._google.stop()
            for name in ("GOOGLE_APPLICATION_CREDENTIALS", "FIRESTORE_EMULATOR_HOST"):
                os.environ.pop(name, None)
            self._log("rehearsal over; what a real run does differently:\n"
                      + "\n".join(f"- {line}" for line in REAL_RUN_DIFFERS))


def polled(seconds: float) -> None:
    """The kit's waits between two reads, at most a second: on Google Cloud it reads Firestore slowly
    because each read is billed; the twin's are free, and a rehearsal should take minutes, not more."""
    time.sleep(min(seconds, 1.0))


def disagreements(store: Mapping[str, Any], acknowledged: int | None, audit: Mapping[str, Any]) -> list[str]:
    """What Monitoring's last sample of the window (`store`) says that the audit contradicts."""
    counted, accepted, delivered = store.get("counted"), store.get("accepted"), store.get("delivered")
    stored = sum(audit.get("totals", {}).values())
    found = []
    if counted is None or accepted is None:
        return ["Monitoring has no figure of the visits counted or accepted"]
    # Monitoring's window is whole minutes: at its start a visit may be accepted before it and counted
    # in it, so the two are held to the audit, not to each other.
    if acknowledged is not None and accepted < acknowledged:
        found.append(f"inc-counter accepted {accepted} visits, fewer than the {acknowledged} Locust saw acknowledged")
    if acknowledged is not None and counted < acknowledged - len(audit.get("not_stored", [])):
        found.append(f"the store counted {counted} visits, fewer than the {acknowledged} the audit found stored")
    if counted > stored:
        found.append(f"the store counted {counted} visits, more than the {stored} Firestore holds")
    if stored and not delivered:
        found.append(f"the store's deliveries read {delivered} while Firestore holds {stored} visits")
    return found

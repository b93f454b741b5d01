"""The Google Cloud target: an iteration deployed with Terraform, measured from outside.

`GcpTarget` gives the runner its steps: a preflight (firstrun.py), deploy (terraform init + apply
with the iteration's settings file, apply retried on known propagation errors), wait until every HTTP function answers, warm the system with real visits and
wait until they are stored; then `totals()` (the shards in Firestore, read with the user's
credentials), the platform's metrics for the test window (read after the run) and the tear-down
when asked to. A dry run prints the same steps without running any of them.

Google's client libraries are imported only inside the functions that need them, and every
command, HTTP call, clock and client can be injected, so tests never reach Google.
"""
import json
import os
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from visitkit import firstrun, monitoring
from visitkit.catalogue import CATALOGUE, FIRESTORE, PAGES, PUBLIC_PATHS, stored_totals
from visitkit.errors import GcpError
from visitkit.net import http_status
from visitkit.paths import INFRA_DIR, SETTINGS_FILE
from visitkit.settle import STORED_TIMEOUT_SECONDS, wait_until_stored
from visitkit.steps import Step

READY_TIMEOUT_SECONDS = 600
WARM_ROUNDS = 5


# --- terraform -----------------------------------------------------------------------------------

def terraform_commands(iteration_dir, project, region=None, infra_dir=INFRA_DIR):
    """The terraform command lines for an iteration, by step: init, apply, output, destroy."""
    infra_dir = Path(infra_dir)
    var_file = Path(os.path.relpath(Path(iteration_dir).resolve() / SETTINGS_FILE, infra_dir.resolve()))
    variables = [f"-var-file={var_file}", f"-var=project_id={project}"]
    if region:
        variables.append(f"-var=region={region}")
    base = ["terraform", f"-chdir={infra_dir}"]
    return {
        "init": base + ["init", "-input=false"],
        "apply": base + ["apply", "-auto-approve", "-input=false"] + variables,
        "output": base + ["output", "-json"],
        "destroy": base + ["destroy", "-auto-approve", "-input=false"] + variables,
    }


def command_line(argv):
    return f"$ {shlex.join(argv)}"


def run_command(argv, run=firstrun.stream_command, capture=False):
    """Run one command, its output shown to the user unless captured (and returned)."""
    result = run(argv, check=False, text=True, capture_output=capture, echo=False)
    if result.returncode != 0:
        raise GcpError(f"command failed ({result.returncode}): {shlex.join(argv)}")
    return result.stdout if capture else ""


def parse_outputs(text):
    """`terraform output -json` as {name: value}."""
    return {name: output["value"] for name, output in json.loads(text).items()}


# --- readiness and warm-up -----------------------------------------------------------------------

def status_of(url, method="GET"):
    return http_status(url, method, timeout=30)


def wait_until_answering(base_url, status=status_of, timeout=READY_TIMEOUT_SECONDS, interval=10,
                         now=time.monotonic, sleep=time.sleep):
    """Wait until every HTTP function's own code answers.

    It asks with OPTIONS: the functions answer a CORS preflight with 204 and do nothing else, while
    a platform error page (404 not deployed yet, 5xx starting) is anything but 204.
    """
    deadline = now() + timeout
    waiting = {name: path for path, name in PUBLIC_PATHS.items()}
    while True:
        waiting = {name: path for name, path in waiting.items()
                   if status(base_url + path, "OPTIONS") != 204}
        if not waiting:
            return
        if now() >= deadline:
            raise GcpError(f"functions not answering after {timeout} s: {', '.join(sorted(waiting))}")
        sleep(interval)


def visit(base_url, page, status=status_of):
    """One visitor task, as the Locust visitor does it; True when the visit was recorded (202)."""
    status(f"{base_url}{CATALOGUE['serve-page'].path}?view={page}", "GET")
    recorded = status(f"{base_url}{CATALOGUE['inc-counter'].path}?visit_type={page}", "POST") == 202
    status(f"{base_url}{CATALOGUE['get-counter'].path}?visit_type={page}", "GET")
    return recorded


def warm_up(base_url, parallel, rounds=WARM_ROUNDS, status=status_of):
    """`rounds` waves of `parallel` visits at once, so each function starts up to that many
    instances (the study warmed the system before its endurance test). Returns the visits recorded."""
    pages = [PAGES[i % len(PAGES)] for i in range(parallel * rounds)]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return sum(pool.map(lambda page: visit(base_url, page, status), pages))


# --- the target ----------------------------------------------------------------------------------

def firestore_client(project):
    from google.cloud import firestore

    return firestore.Client(project=project)  # the user's Application Default Credentials


class GcpTarget:
    """An iteration deployed on Google Cloud, in the runner's target seam."""
    kind = "gcp"
    updates_readme = False

    def __init__(self, settings, iteration_dir, project, region=None, destroy=False, infra_dir=INFRA_DIR,
                 run=firstrun.stream_command, status=status_of, firestore=None, metrics_client=None, warm=True,
                 now=time.monotonic, sleep=time.sleep, ingestion_delay=monitoring.DEFAULT_INGESTION_DELAY_SECONDS,
                 preflight=firstrun.preflight, log=print):
        if not project:
            raise GcpError("--target gcp needs --project (the Google Cloud project id)")
        self.settings, self.project, self.region, self.destroy, self.warm = settings, project, region, destroy, warm
        self.commands = terraform_commands(iteration_dir, project, region, infra_dir)
        self.iteration_name = Path(iteration_dir).name
        self.base_url, self.subscription, self.outputs = "<base_url>", "<subscription>", {}
        self.totals_source = f"Firestore (project {project}, {FIRESTORE['counters']}/<page>/{FIRESTORE['shards']})"
        # A delivery that failed is retried after up to the subscription's maximum backoff.
        self.min_convergence_wait = settings.subscription.maximum_backoff_seconds
        self.notes = []
        self.ingestion_delay = ingestion_delay
        self._run, self._status, self._now, self._sleep = run, status, now, sleep
        self._preflight, self._log = preflight, log
        self._firestore, self._metrics_client = firestore, metrics_client

    # --- steps ---
    def start_steps(self):
        parallel = self.settings.largest_slots
        ready = ", ".join(f"OPTIONS <base_url>{path}" for path in PUBLIC_PATHS)
        subscription = self.settings.subscription
        topic = self.settings.raw.get("topic_name", "visits")
        steps = [
            Step("preflight: check what the deployment needs, before anything is created",
                 firstrun.preflight_text(), self._check),
            Step(f"deploy {self.iteration_name} to project {self.project}"
                 + (f", region {self.region}" if self.region else " (region: infra default)"),
                 [command_line(self.commands["init"]), command_line(self.commands["apply"]),
                  f"apply retry policy: {firstrun.retry_policy_text()}",
                  f"store path: push subscription to store-inc-counter (OIDC), ack deadline "
                  f"{subscription.ack_deadline_seconds} s, retry backoff {subscription.minimum_backoff_seconds}-"
                  f"{subscription.maximum_backoff_seconds} s; after {subscription.max_delivery_attempts} delivery "
                  f"attempts a visit goes to the dead-letter topic {topic}-dead-letter (counted in the report)",
                  command_line(self.commands["output"]) + "   (base_url, subscription_name, log metric names)"],
                 self._deploy),
            Step("wait until every HTTP function answers",
                 [f"204 to a preflight ({ready}); up to {READY_TIMEOUT_SECONDS} s"], self._wait_ready)]
        if self.warm:
            steps.append(Step("warm up", [
                f"{WARM_ROUNDS} waves of {parallel} visits at once, then wait until Firestore has stored them "
                f"(up to {STORED_TIMEOUT_SECONDS} s)"], self._warm_up))
        return steps

    def window_step(self):
        requests = monitoring.build_requests(self.project, 0, 60, self.subscription, log_metrics=self.log_metrics)
        return Step("read the platform's metrics for the test window", [
            f"after Monitoring's ingestion delay ({monitoring.DEFAULT_INGESTION_DELAY_SECONDS} s), "
            f"projects/{self.project}/timeSeries with 60 s alignment:",
            *(f"- {name}: {request['filter']}" for name, request in requests.items()),
            "saved as metrics/<metric>.csv, plotted as gcp-metrics.png"], None)

    def stop_step(self):
        if self.destroy:
            return Step("tear down", [command_line(self.commands["destroy"])], self._tear_down, always=True)
        return Step("leave the deployment running",
                    [f"clean up later: {command_line(self.commands['destroy'])}"], self._close_client, always=True)

    @property
    def log_metrics(self):
        """{MetricQuery.log_metric: the deployed log-based metric's name}, once deployed."""
        return {key: self.outputs[output] for key, output in monitoring.LOG_METRIC_OUTPUTS.items()
                if output in self.outputs}

    # --- actions ---
    def _check(self, _run=None):
        self._preflight(self.project)

    def _deploy(self, _run=None):
        run_command(self.commands["init"], self._run)
        firstrun.apply_with_retries(self.commands["apply"], self._run, self._sleep, self._log)
        self.outputs = parse_outputs(run_command(self.commands["output"], self._run, capture=True))
        self.base_url = self.outputs["base_url"].rstrip("/")
        self.subscription = self.outputs.get("subscription_name", "")

    def _wait_ready(self, _run=None):
        wait_until_answering(self.base_url, self._status, now=self._now, sleep=self._sleep)

    def _warm_up(self, _run=None):
        baseline = self.totals()
        recorded = warm_up(self.base_url, self.settings.largest_slots, status=self._status)
        wait_until_stored(self.totals, baseline, recorded, now=self._now, sleep=self._sleep, error=GcpError)

    def _close_client(self, _run=None):
        if self._firestore is not None and hasattr(self._firestore, "close"):
            self._firestore.close()

    def _tear_down(self, _run=None):
        self._close_client()
        run_command(self.commands["destroy"], self._run)

    # --- reading ---
    def firestore(self):
        if self._firestore is None:
            self._firestore = firestore_client(self.project)
        return self._firestore

    def totals(self):
        return stored_totals(self.firestore())

    def sample(self):
        """No live figures: Monitoring is read once, after the run (see window_samples)."""
        functions = {name: dict.fromkeys(monitoring.empty_function()) for name in CATALOGUE}
        return {"time": time.time(), "source": "gcp-monitoring", "functions": functions,
                "store": dict.fromkeys(("accepted", "delivered", "stored", "backlog"))}

    def window_samples(self, start, end, results_dir, now=time.time, sleep=time.sleep):
        """The platform's per-minute samples for [start, end]; waits for ingestion first and saves
        each metric's series as results_dir/metrics/<metric>.csv."""
        samples = monitoring.fetch_window(self.project, start, end, self.subscription, results_dir,
                                          client=self._metrics_client, ingestion_delay=self.ingestion_delay,
                                          now=now, sleep=sleep, log_metrics=self.log_metrics)
        window_start = monitoring.aligned_window(start, end)[0]
        if samples and samples[0]["time"] > window_start:
            # The counters count from the window's start: saying so with a zero sample there lets
            # the first minute's requests, 429s and stored visits count in the report's differences.
            samples.insert(0, monitoring.window_start_sample(window_start))
        return samples

"""The Google Cloud target: an iteration deployed with Terraform, measured from outside.

`open_target` deploys an iteration (terraform init + apply with its settings file), waits until
every HTTP function answers, warms the system with real visits and waits until they are stored,
and returns a `GcpTarget` for the runner: `base_url`, `totals()` (the shards in Firestore, read
with the user's credentials), `sample()`, `window_samples()` (the platform's metrics for the test
window, read after the run) and `close()` (which tears everything down when asked to).
`dry_run_plan` lists every step and command without running any of them.

Google's client libraries are imported only inside the functions that need them, and every
command, HTTP call, clock and client can be injected, so tests never reach Google.
"""
import json
import os
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from visitkit import monitoring
from visitkit.settings import PAGES, load_settings

INFRA_DIR = Path(__file__).resolve().parents[2] / "infra"
SETTINGS_FILE = "settings.tfvars.json"
# Paths of the HTTP functions under the base URL, by logical name; store-inc-counter has no
# public URL (Eventarc pushes to it), so its readiness shows in the warm-up's visits being stored.
HTTP_PATHS = {"serve-page": "/app", "get-counter": "/get-counter", "inc-counter": "/inc-counter"}
READY_TIMEOUT_SECONDS = 600
WARM_ROUNDS = 5
STORED_TIMEOUT_SECONDS = 300


class GcpError(RuntimeError):
    pass


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


def run_command(argv, run=subprocess.run, capture=False):
    """Run one command, its output shown to the user unless captured (and returned)."""
    result = run(argv, check=False, text=True, capture_output=capture)
    if result.returncode != 0:
        raise GcpError(f"command failed ({result.returncode}): {shlex.join(argv)}")
    return result.stdout if capture else ""


def parse_outputs(text):
    """`terraform output -json` as {name: value}."""
    return {name: output["value"] for name, output in json.loads(text).items()}


# --- readiness and warm-up -----------------------------------------------------------------------

def http_status(method, url, timeout=30):
    """The HTTP status of one request (error statuses included), or None when nothing answered."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, OSError):
        return None


def wait_until_answering(base_url, status=http_status, timeout=READY_TIMEOUT_SECONDS, interval=10,
                         now=time.monotonic, sleep=time.sleep):
    """Wait until every HTTP function's own code answers.

    It asks with OPTIONS: the functions answer a CORS preflight with 204 and do nothing else, while
    a platform error page (404 not deployed yet, 5xx starting) is anything but 204.
    """
    deadline = now() + timeout
    waiting = dict(HTTP_PATHS)
    while True:
        waiting = {name: path for name, path in waiting.items()
                   if status("OPTIONS", base_url + path) != 204}
        if not waiting:
            return
        if now() >= deadline:
            raise GcpError(f"functions not answering after {timeout} s: {', '.join(sorted(waiting))}")
        sleep(interval)


def visit(base_url, page, status=http_status):
    """One visitor task, as the Locust visitor does it; True when the visit was recorded (202)."""
    status("GET", f"{base_url}/app?view={page}")
    recorded = status("POST", f"{base_url}/inc-counter?visit_type={page}") == 202
    status("GET", f"{base_url}/get-counter?visit_type={page}")
    return recorded


def warm_up(base_url, parallel, rounds=WARM_ROUNDS, status=http_status):
    """`rounds` waves of `parallel` visits at once, so each function starts up to that many
    instances (the study warmed the system before its endurance test). Returns the visits recorded."""
    pages = [PAGES[i % len(PAGES)] for i in range(parallel * rounds)]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return sum(pool.map(lambda page: visit(base_url, page, status), pages))


def wait_until_stored(totals, baseline, expected, timeout=STORED_TIMEOUT_SECONDS, interval=10,
                      now=time.monotonic, sleep=time.sleep):
    """Wait until the stored totals grew by `expected` visits, so a test starts from a settled store."""
    deadline = now() + timeout
    while True:
        current = totals()
        grown = sum(current.values()) - sum(baseline.values())
        if grown >= expected:
            return current
        if now() >= deadline:
            raise GcpError(f"only {grown} of {expected} warm-up visits stored after {timeout} s")
        sleep(interval)


# --- Firestore totals ----------------------------------------------------------------------------

def firestore_client(project):
    from google.cloud import firestore

    return firestore.Client(project=project)  # the user's Application Default Credentials


def read_totals(client):
    """{page: stored visits}: the sum of `count` over counters/<page>/shards/*."""
    totals = {}
    for page in PAGES:
        shards = client.collection("counters").document(page).collection("shards").stream()
        totals[page] = sum(int((shard.to_dict() or {}).get("count", 0)) for shard in shards)
    return totals


# --- the target ----------------------------------------------------------------------------------

class GcpTarget:
    """An iteration deployed on Google Cloud, in the runner's target seam."""

    def __init__(self, outputs, project, commands, destroy=False, firestore=None, metrics_client=None,
                 run=subprocess.run, ingestion_delay=monitoring.DEFAULT_INGESTION_DELAY_SECONDS):
        self.outputs = outputs
        self.base_url = outputs["base_url"].rstrip("/")
        # infra/outputs.tf names it subscription_name (the push subscription Eventarc created)
        self.subscription = outputs.get("subscription_name") or outputs.get("subscription", "")
        self.project = project
        self.commands = commands
        self.destroy = destroy
        self.ingestion_delay = ingestion_delay
        self._firestore = firestore
        self._metrics_client = metrics_client
        self._run = run

    def firestore(self):
        if self._firestore is None:
            self._firestore = firestore_client(self.project)
        return self._firestore

    def totals(self):
        return read_totals(self.firestore())

    def sample(self):
        """No live figures: Monitoring is read once, after the run (see window_samples)."""
        functions = {name: {key: None for key in monitoring.empty_function()}
                     for name in monitoring.SERVICE_NAMES}
        return {"time": time.time(), "source": "gcp-monitoring", "functions": functions,
                "store": {"published": None, "stored": None, "backlog": None}}

    def window_samples(self, start, end, results_dir, now=time.time, sleep=time.sleep):
        """The platform's per-minute samples for [start, end]; waits for ingestion first and saves
        each metric's series as results_dir/metrics/<metric>.csv."""
        samples = monitoring.fetch_window(self.project, start, end, self.subscription, results_dir,
                                          client=self._metrics_client,
                                          ingestion_delay=self.ingestion_delay, now=now, sleep=sleep)
        window_start = monitoring.aligned_window(start, end)[0]
        if samples and samples[0]["time"] > window_start:
            # The counters count from the window's start: saying so with a zero sample there lets
            # the first minute's requests, 429s and stored visits count in the report's differences.
            samples.insert(0, monitoring.window_start_sample(window_start))
        return samples

    def close(self):
        if self._firestore is not None and hasattr(self._firestore, "close"):
            self._firestore.close()
        if self.destroy:
            run_command(self.commands["destroy"], self._run)


def open_target(iteration_dir, project, region=None, destroy=False, infra_dir=INFRA_DIR,
                run=subprocess.run, status=http_status, firestore=None, warm=True,
                now=time.monotonic, sleep=time.sleep):
    """Deploy the iteration, wait until it answers, warm it, and hand it over as a GcpTarget."""
    settings = load_settings(iteration_dir)
    commands = terraform_commands(iteration_dir, project, region, infra_dir)
    run_command(commands["init"], run)
    run_command(commands["apply"], run)
    outputs = parse_outputs(run_command(commands["output"], run, capture=True))
    target = GcpTarget(outputs, project, commands, destroy, firestore, run=run)
    try:
        wait_until_answering(target.base_url, status, now=now, sleep=sleep)
        if warm:
            parallel = max(f.max_instances * f.concurrency for f in settings.functions.values())
            baseline = target.totals()
            recorded = warm_up(target.base_url, parallel, status=status)
            wait_until_stored(target.totals, baseline, recorded, now=now, sleep=sleep)
    except BaseException:
        target.close()  # with --destroy, a failed start does not leave billable resources behind
        raise
    return target


def dry_run_plan(iteration_dir, project, region=None, test="breakpoint", destroy=False,
                 infra_dir=INFRA_DIR, locust_command=None):
    """Every step `run-iteration --target gcp` would take, as lines to print; runs nothing.
    locust_command: the Locust command line the runner would run, shown under its step."""
    settings = load_settings(iteration_dir)
    commands = terraform_commands(iteration_dir, project, region, infra_dir)
    parallel = max(f.max_instances * f.concurrency for f in settings.functions.values())
    ready = ", ".join(f"OPTIONS <base_url>{path}" for path in HTTP_PATHS.values())
    requests = monitoring.build_requests(project, 0, 60, "<subscription>")
    steps = [
        f"deploy {Path(iteration_dir).name} to project {project}"
        + (f", region {region}" if region else " (region: infra default)"),
        f"  $ {shlex.join(commands['init'])}",
        f"  $ {shlex.join(commands['apply'])}",
        f"  $ {shlex.join(commands['output'])}   (base_url, subscription_name)",
        f"wait until every HTTP function answers 204 to a preflight ({ready}); "
        f"up to {READY_TIMEOUT_SECONDS} s",
        f"read baseline totals from Firestore (project {project}, counters/<page>/shards)",
        f"warm up: {WARM_ROUNDS} waves of {parallel} visits at once, then wait until Firestore "
        f"has stored them (up to {STORED_TIMEOUT_SECONDS} s)",
        f"run the Locust test '{test}' against <base_url>",
        *([f"  $ {shlex.join(locust_command)}"] if locust_command else []),
        "measure convergence: read Firestore totals until they match the visits Locust recorded",
        f"wait {monitoring.DEFAULT_INGESTION_DELAY_SECONDS} s after the window for Monitoring "
        f"ingestion, then read (projects/{project}/timeSeries, 60 s alignment):",
    ]
    steps += [f"  - {name}: {request['filter']}" for name, request in requests.items()]
    steps += ["write the report (same format as a local run), results/metrics/<metric>.csv and "
              "their plot, gcp-metrics.png"]
    if destroy:
        steps += ["tear down", f"  $ {shlex.join(commands['destroy'])}"]
    else:
        steps += [f"leave the deployment running (clean up later: $ {shlex.join(commands['destroy'])})"]
    return steps

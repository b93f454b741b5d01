"""The local stack: Google's Firestore and Pub/Sub emulators, one functions-framework server per
function instance (each under a supervisor that restarts it when it crashes, as Cloud Run does),
HAProxy in front of them playing the Cloud Functions platform, the push relay delivering Pub/Sub
messages to store-inc-counter as a push subscription does, and, with a latency profile, Toxiproxy
between the instances and the emulators (and, for the profile's push overhead, between HAProxy and
each store-inc-counter instance).

With store_mode "pull" (Settings.pulls) there is no push relay: store-inc-counter's one instance is the
puller (functions/store_batch.py), which pulls the same subscription itself, as on Cloud Run. It still
reaches the emulators through Toxiproxy; HAProxy still lists it, though nothing but the kit's status
reads (its GET /) calls it.

Every process runs in its own process group (the emulators are wrapper scripts that start java),
is recorded in the state folder, and is stopped by group.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from visitkit.catalogue import CATALOGUE, PUSH_FUNCTION, QUEUE_TIMEOUT_S, stored_totals
from visitkit.errors import StackError
from visitkit.model.scaleout import limits_of
from visitkit.net import free_port, http_status, port_is_open
from visitkit.paths import FUNCTIONS_DIR, LOCAL_STATE_DIR, ROOT
from visitkit.samples import Sample, StoreFigures
from visitkit.settings import Settings, function_environment
from visitkit.twin import autoscaler, cloudrun, haproxy, push, toxiproxy
from visitkit.twin.profile import Profile, load_profile
from visitkit.twin.resources import component_of

if TYPE_CHECKING:  # imported when a client is made, not with the stack
    from google.cloud.firestore import Client as FirestoreClient

FUNCTIONS_SOURCE = FUNCTIONS_DIR / "main.py"
PROJECT = "demo-visit-counter"  # "demo-" ids never reach Google
TOPIC = "visits"
SUBSCRIPTION = PUSH_FUNCTION
DEAD_LETTER_TOPIC = f"{TOPIC}-dead-letter"  # as infra/pubsub.tf names it
RESTART_DELAY_SECONDS = 1.0
SETTLED_FILE = "push-relay-settled.txt"  # in the state folder: the messages the push relay acknowledged
STATUS_TIMEOUT_S = 2.0  # the puller's GET /: a paused instance does not answer, and a sample goes on without it
STARTUP_TIMEOUT = 90
EMULATORS_MISSING = (
    "The Firestore and Pub/Sub emulators were not found. Install them with\n"
    "  gcloud components install cloud-firestore-emulator pubsub-emulator beta\n"
    "or the Debian/RPM packages google-cloud-cli-firestore-emulator and google-cloud-cli-pubsub-emulator.")
HAPROXY_MISSING = "HAProxy was not found: install it (Debian: apt-get install haproxy)."

# The Google clients read the emulator hosts from the environment when they are built.
_environment_lock = threading.Lock()


def function_command(function: str, port: int) -> list[str]:
    """One functions-framework server of a function (an instance, as Cloud Run runs it)."""
    return [sys.executable, "-m", "functions_framework", "--target", CATALOGUE[function].entry_point,
            "--source", str(FUNCTIONS_SOURCE), "--host", "127.0.0.1", "--port", str(port)]


def sdk_root() -> Path | None:
    for candidate in (os.environ.get("CLOUDSDK_ROOT"), "/usr/lib/google-cloud-sdk"):
        if candidate and Path(candidate, "platform").is_dir():
            return Path(candidate)
    gcloud = shutil.which("gcloud")
    if gcloud:
        found = subprocess.run([gcloud, "info", "--format=value(installation.sdk_root)"],
                               capture_output=True, text=True).stdout.strip()
        if found:
            return Path(found)
    return None


def supervised(name: str, command: list[str], restarts_file: str | Path) -> list[str]:
    """An instance's command under the supervisor that restarts it after a crash."""
    return [sys.executable, "-m", "visitkit.twin.supervisor", "--name", name, "--restarts", str(restarts_file),
            "--delay", str(RESTART_DELAY_SECONDS), "--", *command]


def emulator_commands(firestore_port: int, pubsub_port: int) -> tuple[list[str], list[str]]:
    root = sdk_root()
    firestore = root and root / "platform" / "cloud-firestore-emulator" / "cloud_firestore_emulator"
    pubsub = root and root / "platform" / "pubsub-emulator" / "bin" / "cloud-pubsub-emulator"
    if not (firestore and pubsub and firestore.exists() and pubsub.exists()):
        raise StackError(EMULATORS_MISSING)
    return ([str(firestore), "start", "--host=127.0.0.1", f"--port={firestore_port}"],
            [str(pubsub), "--host=127.0.0.1", f"--port={pubsub_port}"])


class LocalStack:
    def __init__(self, state_dir: str | Path = LOCAL_STATE_DIR):
        self.state_dir = Path(state_dir).resolve()
        self.state_file = self.state_dir / "state.json"
        self.logs = self.state_dir / "logs"
        self._client: FirestoreClient | None = None  # a Firestore client for totals(), made once the stack is up
        # pull mode: {puller process id: visits it refused (duplicates, malformed)}, so that the backlog
        # survives a restart of the puller, whose own counters start again from zero
        self._refused_by_puller: dict[int, dict[str, int]] = {}
        # while `up` runs: each function's environment and its instances' own ports, for the autoscaler
        self._environments: dict[str, dict[str, str]] = {}
        self._instance_ports: dict[str, list[int]] = {}

    # ---- state -------------------------------------------------------------------------
    def state(self) -> dict[str, Any] | None:
        """state.json, its processes with the instances the autoscaler runs now."""
        if not self.state_file.exists():
            return None
        state = json.loads(self.state_file.read_text())
        autoscaled = self.state_dir / autoscaler.INSTANCES_FILE
        if state.get("autoscaler") and autoscaled.exists():
            state["processes"] += json.loads(autoscaled.read_text())
        return state

    def _save(self, state: dict[str, Any]) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_file)

    @property
    def base_url(self) -> str:
        return self._require()["base_url"]

    def _require(self) -> dict[str, Any]:
        state = self.state()
        if not state:
            raise StackError(f"the local stack is not up (no {self.state_file})")
        return state

    # ---- processes -----------------------------------------------------------------------
    def _start(self, state: dict[str, Any], name: str, command: list[str], env: dict[str, str] | None = None,
               port: int | None = None) -> subprocess.Popen[bytes]:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = open(self.logs / f"{name}.log", "ab")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, **(env or {})}, cwd=ROOT, start_new_session=True)
        log.close()
        state["processes"].append({"name": name, "pid": process.pid, "port": port,
                                   "log": str(self.logs / f"{name}.log")})
        self._save(state)  # recorded at once, so `down` can stop it even if `up` fails later
        return process

    def status(self) -> list[tuple[str, int, int | None, bool]]:
        """[(name, pid, port, alive)] of every process the stack started."""
        state = self.state() or {"processes": []}
        return [(p["name"], p["pid"], p["port"], group_alive(p["pid"])) for p in state["processes"]]

    def down(self, timeout: float = 10) -> list[str]:
        state = self.state()
        if not state:
            return []
        stopped = []
        for process in state["processes"]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process["pid"], signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in state["processes"]:
            while group_alive(process["pid"]) and time.monotonic() < deadline:
                time.sleep(0.1)
            if group_alive(process["pid"]):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process["pid"], signal.SIGKILL)
            stopped.append(process["name"])
            with contextlib.suppress(ChildProcessError):  # reap it if this process started it
                os.waitpid(process["pid"], 0)
        for process in state["processes"]:  # the port must be free again before we say done
            while process["port"] and port_is_open(process["port"]) and time.monotonic() < deadline + 5:
                time.sleep(0.1)
        self.state_file.unlink(missing_ok=True)
        (self.state_dir / autoscaler.INSTANCES_FILE).unlink(missing_ok=True)
        # debris once the relay is gone (a run's state folder is in its results)
        (self.state_dir / SETTLED_FILE).unlink(missing_ok=True)
        self._client = None
        self._refused_by_puller = {}
        return stopped

    # ---- up ------------------------------------------------------------------------------
    def up(self, settings: Settings, port: int = 8080, queue_timeout: float = QUEUE_TIMEOUT_S,
           profile: Profile | None = None, deployment: cloudrun.Deployment | None = None,
           request_log: bool = False, idle_s: float = autoscaler.IDLE_S,
           metrics_window_s: float = autoscaler.METRICS_WINDOW_S) -> str:
        """Starts everything with an iteration's Settings and a latency Profile (default `none`) and
        returns the base URL once every part answers. With a `deployment` (a rehearsal's applied state),
        each function's instances, concurrency, timeout and environment, the Pub/Sub names and Cloud Run's
        access rules are the deployment's; request_log: HAProxy logs every request (haproxy.REQUEST_LOG_FORMAT).
        With settings.scaling "auto", the autoscaler (autoscaler.py) starts and stops the instances of each function
        it scales, keeping one idle idle_s seconds and averaging its metrics over metrics_window_s (shortened by
        tests)."""
        profile = profile or load_profile()
        if deployment is not None:
            settings = deployed_settings(settings, deployment)
        if self.state():
            if any(alive for *_, alive in self.status()):
                raise StackError(f"the local stack already runs from {self.state_dir}: stop it first (down)")
            self.state_file.unlink()
        if not shutil.which("haproxy"):
            raise StackError(HAPROXY_MISSING)
        port = port or free_port()
        if port_is_open(port):
            raise StackError(f"port {port} is already in use: choose another with --port")
        firestore_port, pubsub_port, push_port = free_port(), free_port(), free_port()
        firestore_command, pubsub_command = emulator_commands(firestore_port, pubsub_port)
        if profile.needs_proxy:
            toxiproxy.binary()  # fails now, with how to build it, rather than half-way up
        names = ((deployment.project, deployment.topic, deployment.subscription,
                  deployment.dead_letter_topic or DEAD_LETTER_TOPIC) if deployment else
                 (PROJECT, TOPIC, SUBSCRIPTION, DEAD_LETTER_TOPIC))
        state: dict[str, Any] = {"settings": str(settings.source), "project": names[0], "topic": names[1],
                 "subscription": names[2], "dead_letter_topic": names[3], "profile": profile.record(),
                 "base_url": f"http://127.0.0.1:{port}", "push_url": f"http://127.0.0.1:{push_port}",
                 "firestore": f"127.0.0.1:{firestore_port}", "pubsub": f"127.0.0.1:{pubsub_port}",
                 "haproxy_stats": f"127.0.0.1:{free_port()}", "queue_timeout": queue_timeout,
                 "push_stats_port": free_port(), "restarts": str(self.state_dir / "restarts.jsonl"),
                 "store_mode": settings.store_mode, "processes": []}
        if settings.pulls:
            del state["push_stats_port"]  # no relay: nothing answers there
        self._save(state)
        Path(state["restarts"]).unlink(missing_ok=True)  # a previous stack's restarts are not this one's
        (self.state_dir / SETTLED_FILE).unlink(missing_ok=True)  # nor its settled messages
        try:
            self._start(state, "firestore-emulator", firestore_command, port=firestore_port)
            self._start(state, "pubsub-emulator", pubsub_command, port=pubsub_port)
            routes = self._start_toxiproxy(state, profile, port)
            if settings.pulls:  # the puller pulls as soon as it starts: its subscription first
                self._wait_until_ready(state, front_end=False)
                self._create_topics_and_subscriptions(state, settings)
            instances = self._start_functions(state, settings, routes, deployment)
            if settings.pulls:
                state["store_status"] = f"http://127.0.0.1:{instances[PUSH_FUNCTION][0]}/"  # its one instance
                self._save(state)
            else:
                instances = self._delay_pushes(state, profile, instances)
            self._start_haproxy(state, settings, instances, routes["frontend"], push_port, queue_timeout, deployment,
                                request_log)
            if any(settings.autoscaled(function) for function in instances):
                self._start_autoscaler(state, settings, profile, instances, idle_s, metrics_window_s)
            # a page the front serves anyone proves the way in; behind Cloud Run's access rules it needs a token
            self._wait_until_ready(state, page=deployment is None or deployment.services["serve-page"].public)
            if not settings.pulls:
                self._create_topics_and_subscriptions(state, settings)
                # Supervised like an instance: if it dies, delivery resumes, as Pub/Sub's push does after an outage.
                self._start(state, "push-relay", supervised("push-relay", self._relay_command(state, settings,
                                                                                              deployment),
                                                            state["restarts"]), port=state["push_stats_port"])
                self._wait_until_ready(state, front_end=False)
        except BaseException:
            self.down()
            raise
        return state["base_url"]

    def _start_toxiproxy(self, state, profile, port):
        """Where the instances reach each backend and HAProxy's public port: through a Toxiproxy
        proxy with the profile's latency, or directly when the profile adds none."""
        routes = {"firestore": state["firestore"], "pubsub": state["pubsub"], "frontend": port}
        if not profile.needs_proxy:
            return routes
        api_port = free_port()
        self._start(state, "toxiproxy", toxiproxy.server_command(api_port), port=api_port)
        self._wait_until_ready(state, front_end=False)
        state["toxiproxy_api"] = f"127.0.0.1:{api_port}"
        proxies = toxiproxy.Toxiproxy(state["toxiproxy_api"])
        for backend in ("firestore", "pubsub"):
            latency = profile.latency_ms.get(backend, 0)
            if latency > 0:
                routes[backend] = f"127.0.0.1:{free_port()}"
                proxies.proxy(backend, routes[backend], state[backend], latency)
        if profile.latency_ms.get("frontend", 0) > 0:  # the client reaches HAProxy through a proxy
            routes["frontend"] = free_port()
            proxies.proxy("frontend", f"127.0.0.1:{port}", f"127.0.0.1:{routes['frontend']}",
                          profile.latency_ms["frontend"])
        state["routes"] = routes
        self._save(state)
        return routes

    def _delay_pushes(self, state, profile, instances):
        """HAProxy reaches each store-inc-counter instance through a proxy adding the profile's push
        overhead, so that a delivery holds its slot (HAProxy's maxconn) that much longer than the
        function's execution, as a push delivery holds a Cloud Run instance's."""
        if not profile.push_overhead_ms:
            return instances
        proxies, delayed = toxiproxy.Toxiproxy(state["toxiproxy_api"]), []
        for i, port in enumerate(instances[PUSH_FUNCTION]):
            delayed.append(free_port())
            proxies.proxy(f"push-{i}", f"127.0.0.1:{delayed[-1]}", f"127.0.0.1:{port}", profile.push_overhead_ms)
        return {**instances, PUSH_FUNCTION: delayed}

    def _relay_command(self, state, settings, deployment=None):
        # With a deployment, each push carries the push account's OIDC token, as Pub/Sub's does.
        token = (push.PushToken(deployment.token_endpoint, deployment.push_email, deployment.push_audience)
                 if deployment and deployment.token_endpoint and deployment.push_email and deployment.push_audience
                 else None)
        config = push.RelayConfig.from_settings(
            settings.subscription, dead_letter=settings.dead_letter, pubsub_host=state["pubsub"],
            project=state["project"], subscription=state["subscription"], dead_letter_topic=state["dead_letter_topic"],
            push_url=f"{state['push_url']}{CATALOGUE[PUSH_FUNCTION].path}",
            port=state["push_stats_port"], settled_file=str(self.state_dir / SETTLED_FILE), token=token)
        path = push.write_config(config, self.state_dir / "push-relay.json")
        return [sys.executable, "-m", "visitkit.twin.push", "--config", str(path)]

    def _start_functions(self, state, settings, routes, deployment=None):
        emulators = {"FIRESTORE_EMULATOR_HOST": routes["firestore"], "PUBSUB_EMULATOR_HOST": routes["pubsub"],
                     "PYTHONUNBUFFERED": "1"}
        instances = {}
        for function, spec in settings.functions.items():
            if deployment is not None and function not in deployment.services:
                continue  # not deployed: the front answers 404 on its path
            # in pull mode the puller pulls the subscription the relay would (its PULL_SUBSCRIPTION);
            # a deployment's functions run with the environment Terraform gave them
            env = {**(dict(deployment.services[function].environment) if deployment else
                      function_environment(settings, function, project=PROJECT, topic=TOPIC,
                                           pull_subscription=SUBSCRIPTION)), **emulators}
            instances[function] = []
            for i in range(spec.max_instances):
                port = free_port()
                instances[function].append(port)
                if settings.autoscaled(function):
                    continue  # the autoscaler starts it when the traffic needs it, on this port
                # Each instance is its own process with its own in-process cache, as on Cloud Run.
                name = f"{function}-{i}"
                self._start(state, name, supervised(name, function_command(function, port), state["restarts"]),
                            port=port, env={**env, "K_SERVICE": CATALOGUE[function].service})
            self._environments[function] = {**env, "K_SERVICE": CATALOGUE[function].service}
        self._instance_ports = {function: list(ports) for function, ports in instances.items()}
        return instances

    def _start_autoscaler(self, state, settings, profile, instances, idle_s, metrics_window_s):
        """The autoscaler, with each autoscaled function's limits, its instances' ports (HAProxy's servers,
        in maintenance until it starts them) and their commands. The instances it starts run in process groups
        of their own, which state() lists (autoscaler.INSTANCES_FILE) and `down` stops."""
        functions = {}
        for function in instances:
            if not settings.autoscaled(function):
                continue
            functions[function] = {
                **dataclasses.asdict(limits_of(settings.functions[function], (profile.cpu_ms or {}).get(function))),
                "ports": self._instance_ports[function], "env": self._environments[function],
                # the stack's own ports: with a push overhead HAProxy reaches store-inc-counter through Toxiproxy
                "commands": [supervised(f"{function}-{i}", function_command(function, port), state["restarts"])
                             for i, port in enumerate(self._instance_ports[function])]}
        port = free_port()
        config = {"stats": state["haproxy_stats"], "port": port, "logs": str(self.logs),
                  "events": str(self.state_dir / autoscaler.EVENTS_FILE), "idle_s": idle_s,
                  "instances": str(self.state_dir / autoscaler.INSTANCES_FILE),
                  "window_s": metrics_window_s, "functions": functions}
        path = self.state_dir / "autoscaler.json"
        path.write_text(json.dumps(config, indent=2))
        for debris in (autoscaler.EVENTS_FILE, autoscaler.INSTANCES_FILE):  # a previous stack's are not this one's
            (self.state_dir / debris).unlink(missing_ok=True)
        state["autoscaler"] = f"http://127.0.0.1:{port}/"
        self._start(state, "autoscaler", [sys.executable, "-m", "visitkit.twin.autoscaler", "--config", str(path)],
                    port=port)

    def scaling(self) -> dict[str, Any] | None:
        """Each autoscaled function's instances now (starting, ready, drained, stopping), from the autoscaler;
        None when no function is autoscaled."""
        url = self._require().get("autoscaler")
        if not url:
            return None
        with urllib.request.urlopen(url, timeout=STATUS_TIMEOUT_S) as reply:
            return json.load(reply)

    def _start_haproxy(self, state, settings, instances, port, push_port, queue_timeout, deployment=None,
                       request_log=False):
        errorfile = self.state_dir / "429.http"
        errorfile.write_text(haproxy.TOO_MANY_REQUESTS)
        if deployment is not None:
            cloudrun.write_error_pages(self.state_dir)  # beside the 429's
        config = self.state_dir / "haproxy.cfg"
        config.write_text(haproxy.render_config(
            public_port=port, push_port=push_port, stats_address=state["haproxy_stats"],
            errorfile_path=errorfile, instances=instances, settings=settings, queue_timeout=queue_timeout,
            deployment=deployment, request_log=request_log,
            started={function: 0 for function in instances if settings.autoscaled(function)}))
        check = subprocess.run(["haproxy", "-c", "-q", "-f", str(config)], capture_output=True, text=True)
        if check.returncode != 0:
            raise StackError(f"HAProxy rejected {config}:\n{check.stdout}{check.stderr}")
        self._start(state, "haproxy", ["haproxy", "-db", "-f", str(config)], port=port)

    def _wait_until_ready(self, state, front_end=True, page=True):
        """Probes every process until it answers (fails fast when one exits), then, with `front_end`,
        until a page is served."""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        waiting = list(state["processes"])
        while waiting:
            for process in list(waiting):
                if not group_alive(process["pid"]):
                    log_tail = Path(process["log"]).read_text(errors="replace")[-2000:]
                    raise StackError(f"{process['name']} exited while starting; its log ends:\n{log_tail}")
                if http_status(f"http://127.0.0.1:{process['port']}/", timeout=1) is not None:
                    waiting.remove(process)
            if waiting and time.monotonic() > deadline:
                raise StackError("not ready in time: " + ", ".join(p["name"] for p in waiting))
            if waiting:
                time.sleep(0.2)
        if not front_end:
            return
        # Ready means a page is served through the front end, HAProxy counts every instance UP
        # (it may have checked one before the instance listened) and Firestore has answered once
        # (its first request is slow).
        while page and http_status(f"{state['base_url']}/app?view=home") != 200:
            if time.monotonic() > deadline:
                raise StackError("the front end does not serve pages")
            time.sleep(0.2)
        while down := haproxy.servers_not_up(haproxy.show_stat(state["haproxy_stats"])):
            if time.monotonic() > deadline:
                raise StackError("HAProxy does not count these instances up: " + ", ".join(down))
            time.sleep(0.2)
        self.totals()

    def _create_topics_and_subscriptions(self, state, settings):
        """The visits topic and its subscription, which the push relay (or, in pull mode, the puller)
        pulls from (the emulator's own push is not used), and the dead-letter topic with a pull
        subscription that keeps its messages."""
        project = state["project"]
        pubsub = f"http://{state['pubsub']}/v1/projects/{project}"
        for topic, subscription, ack_deadline in (
                (state["topic"], state["subscription"], settings.subscription.ack_deadline_seconds),  # as Terraform
                (state["dead_letter_topic"], state["dead_letter_topic"], 60)):
            _put_json(f"{pubsub}/topics/{topic}", {})
            _put_json(f"{pubsub}/subscriptions/{subscription}", {
                "topic": f"projects/{project}/topics/{topic}", "ackDeadlineSeconds": ack_deadline,
                "messageRetentionDuration": f"{settings.subscription.message_retention_seconds}s"})

    # ---- reading the stack -----------------------------------------------------------------
    def firestore(self) -> FirestoreClient:
        state = self._require()
        from google.cloud import firestore

        with _environment_lock, _environment(FIRESTORE_EMULATOR_HOST=state["firestore"]):
            return firestore.Client(project=state["project"])

    def totals(self, client: FirestoreClient | None = None) -> dict[str, int]:
        """Stored visits per page, summed straight from the shards in the Firestore emulator."""
        if client is None:
            self._client = self._client or self.firestore()
            client = self._client
        return stored_totals(client)

    def reset_counts(self) -> None:
        """Deletes every document in the Firestore emulator (counters and dedup markers)."""
        state = self._require()
        delete_all_documents(state["firestore"], state["project"])

    def sample(self, client: FirestoreClient | None = None) -> Sample:
        """One server-side sample: per function figures from HAProxy, the store's progress.
        accepted: inc-counter's 202s (messages Pub/Sub accepted); delivered: store-inc-counter's 2xx
        (push deliveries acknowledged, redeliveries included); stored: visits in Firestore; backlog:
        the messages not yet acknowledged, accepted - the push relay's settled (distinct messages it
        acknowledged, delivered or dead-lettered), None while the relay does not answer. Not
        accepted - stored: a visit posted again with its id is a second message but no second
        stored visit. A message that reached the topic without a 202 (published straight into it,
        or a publish that landed after its 503) makes it lower by one.
        In pull mode (no relay, no push request) the store's figures are the puller's, pull_store_figures."""
        state = self._require()
        stats = state["haproxy_stats"]
        if state.get("store_mode") == "pull":
            refused = self._puller_refused()  # before accepted, as the relay's settled below
            figures = haproxy.function_figures(haproxy.show_stat(stats), CATALOGUE)
            store = pull_store_figures(haproxy.accepted_count(stats), sum(self.totals(client).values()), refused)
            sample: Sample = {"time": time.time(), "source": "local-haproxy", "functions": figures, "store": store}
        else:
            # before accepted: nothing settled is missing from it
            relay = push.read_stats(state["push_stats_port"])
            figures = haproxy.function_figures(haproxy.show_stat(stats), CATALOGUE)
            accepted = haproxy.accepted_count(stats)
            stored = sum(self.totals(client).values())
            settled = relay.get("settled") if relay else None
            sample = {"time": time.time(), "source": "local-haproxy", "functions": figures,
                      "store": {"accepted": accepted, "delivered": figures[PUSH_FUNCTION]["responses_2xx"],
                                "stored": stored, "backlog": accepted - settled if settled is not None else None},
                      "push": relay}
        restarts = self.restarts()
        for name, row in figures.items():
            row["restarts"] = restarts.get(name, 0)
        return sample

    def store_status(self) -> dict[str, Any] | None:
        """The puller's own figures (its GET /: counted, duplicates, ...) in pull mode; None in push mode
        or when it does not answer (paused, restarting)."""
        url = self._require().get("store_status")
        if not url:
            return None
        try:
            with urllib.request.urlopen(url, timeout=STATUS_TIMEOUT_S) as reply:
                return json.load(reply)
        except (OSError, ValueError):
            return None

    def _puller_refused(self) -> dict[str, int] | None:
        """{"duplicates": n, "malformed": n} the puller refused since the stack started, over its restarts
        (each process's last figures, by pid), or None while it does not answer. What a killed puller
        refused after its last status read is not seen: the backlog then stays that much above 0."""
        status = self.store_status()
        if status is None:
            return None
        try:
            pid = self.instance_pid(f"{PUSH_FUNCTION}-0")
        except (OSError, ValueError):
            return None  # between a crash and the restart
        self._refused_by_puller[pid] = {"duplicates": int(status.get("duplicates") or 0),
                                        "malformed": int(status.get("malformed") or 0)}
        return {key: sum(refused[key] for refused in self._refused_by_puller.values())
                for key in ("duplicates", "malformed")}

    def restarts(self) -> dict[str, int]:
        """{function or "push-relay": restarts so far}, from the supervisors' restarts file."""
        path = Path(self._require()["restarts"])
        counts: dict[str, int] = {}
        for line in (path.read_text().splitlines() if path.exists() else []):
            part = component_of(json.loads(line)["instance"])  # a function, or the push relay
            counts[part] = counts.get(part, 0) + 1
        return counts

    def running_instances(self, function: str, settings: Settings) -> list[str]:
        """The names of a function's instances whose server runs now: all of them unless it is autoscaled."""
        if settings.autoscaled(function):
            return list((self.scaling() or {}).get(function, {}).get("running", []))
        return [f"{function}-{i}" for i in range(settings.functions[function].max_instances)]

    def instance_pid(self, name: str) -> int:
        """The pid of an instance's functions-framework server itself (its supervisor's child):
        killing it is a crash the supervisor answers with a restart."""
        return int((Path(self._require()["restarts"]).parent / f"{name}.pid").read_text())


def deployed_settings(settings: Settings, deployment: cloudrun.Deployment) -> Settings:
    """The settings with each function's limits as deployed (its max instances, concurrency and timeout)."""
    return dataclasses.replace(settings, functions={
        name: dataclasses.replace(spec, max_instances=deployed.max_instances, concurrency=deployed.concurrency,
                                  timeout_seconds=deployed.timeout_seconds) if deployed else spec
        for name, spec in settings.functions.items() for deployed in [deployment.services.get(name)]})


def pull_store_figures(accepted: int, stored: int, refused: Mapping[str, int] | None) -> StoreFigures:
    """The store's figures in pull mode. A message the puller took is counted (then it is a stored visit:
    the shards grow in the transaction that records its id) or refused (a duplicate, or malformed), so
    delivered = stored + refused and backlog = accepted - delivered: reading the shards keeps them right
    across a killed puller, whose own counters start again. None while the puller does not answer."""
    if refused is None:
        return {"accepted": accepted, "delivered": None, "stored": stored, "backlog": None}
    delivered = stored + refused["duplicates"] + refused["malformed"]
    return {"accepted": accepted, "delivered": delivered, "stored": stored, "backlog": accepted - delivered,
            "already_counted": refused["duplicates"], "malformed": refused["malformed"]}


def delete_all_documents(firestore_host: str, project: str, timeout: float = 60) -> None:
    """Empties a Firestore emulator's database through its own endpoint."""
    url = f"http://{firestore_host}/emulator/v1/projects/{project}/databases/(default)/documents"
    urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=timeout).close()


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (a zombie whose parent never reaps it does not)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie leader still "exists": look for a member that is not a zombie.
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                    if int(fields[2]) == pgid and fields[0] != "Z":
                        return True
    return False


def _put_json(url: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="PUT",
                                     headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=30).close()
    except urllib.error.HTTPError as error:
        if error.code != 409:  # already exists
            raise


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

"""Cloud Run's instance autoscaling in the twin's front: instances of a function start when its traffic needs
them, idle, and stop, as https://cloud.google.com/run/docs/about-instance-autoscaling (read 2026-11-28) says:

- each function runs between its min_instances and max_instances ("The minimum number of instances setting",
  "The maximum number of instances setting");
- on demand: when requests wait, instances are started for them (the page's "on-demand scaling"); a request
  waits for an instance at most the greater of 10 s and 3.5 times the average start time (the page's "Exceeding
  maximum instances");
- on metrics: enough instances to keep the average request concurrency at 60 % of the maximum concurrency, and
  the average CPU at 60 % of the instances' vCPUs, each averaged over a one-minute window; the larger of the two
  (the page's "Metrics-based scaling"; model/occupancy.py's TARGET_UTILIZATION is that 60 %);
- an instance stopped gets SIGTERM, then SIGKILL 10 s later if it has not exited
  (https://cloud.google.com/run/docs/container-contract#lifecycle; read second-hand, unverified).

Assumed (Google leaves them unstated): how long an idle instance is kept (IDLE_S; the Cloud Run functions page
says "an unspecified amount of time", https://cloud.google.com/functions/1stgendocs/configuring/min-instances),
how often the autoscaler decides (DEMAND_TICK_S, METRICS_INTERVAL_S: the page says "periodically"), that an
instance is ready once its port accepts connections (Cloud Run's default TCP startup probe), and the CPU an
instance uses: the profile's cpu_ms per request (profile.py) times the requests it served, not a measurement
(on this machine's 2 shared cores the host's CPU measures contention, not an instance's vCPU). Which instance
a surplus drains and which one a scale-out starts is the twin's choice: the highest drained or unused index.

How: HAProxy (haproxy.py) lists max_instances servers per autoscaled function, all in maintenance at first.
This process (started by stack.py, `python -m visitkit.twin.autoscaler --config FILE`) starts an instance (a
functions-framework server under the supervisor, as the stack starts fixed ones) and sets its server ready once
it listens; a surplus instance is drained (no new request), and once it has been empty for IDLE_S it is set in
maintenance, its supervisor gets SIGTERM (the supervisor then gives its server SIGTERM and GRACE_S) and does
not restart it. Each decision is a line of the events file (scaling.jsonl in the state folder); GET / on its
port answers each function's instances. Only functions whose min_instances is below their max_instances are
autoscaled: the others run all their instances all the time, as Cloud Run keeps its minimum.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from visitkit.model.scaleout import (
    DEMAND_TICK_S,
    IDLE_S,
    METRICS_INTERVAL_S,
    METRICS_WINDOW_S,
    Limits,
    Sample,
    by_metrics,
    kept,
    on_demand,
    queue_wait_s,
    target,
)
from visitkit.net import port_is_open
from visitkit.twin import haproxy
from visitkit.twin.supervisor import GRACE_S

EVENTS_FILE = "scaling.jsonl"
# The instances it runs now, as state.json lists the stack's processes (LocalStack.state adds them): each in its
# own process group, so that `down` stops them, and a run's CPU and memory count under their function, even if
# this process is gone.
INSTANCES_FILE = "autoscaled-instances.json"


def cold_start_figures(events: Sequence[Mapping[str, Any]], load_start: float | None = None,
                       load_end: float | None = None) -> dict[str, dict[str, Any]]:
    """Per autoscaled function, from its events file: its cold starts under load (the instance was started with
    requests in flight or waiting: on this machine's 2 cores their imports compete with the load) apart from the
    quiet ones (the minimum, started with the stack), the median and slowest start of each (launch to listening:
    what a request routed to it waited at most beyond its own service), and those that began during the load
    (between load_start and load_end, unix s; all of them without a window)."""
    started: dict[str, Mapping[str, Any]] = {}
    figures: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["event"] == "start":
            started[event["instance"]] = event
            figures.setdefault(event["function"], {"under_load": [], "quiet": [], "during_load": 0})
        elif event["event"] == "ready" and event["instance"] in started:
            start = started.pop(event["instance"])
            row = figures[event["function"]]
            row["under_load" if start["in_flight"] + start["waiting"] > 0 else "quiet"].append(event["start_ms"])
            inside = (load_start is None or start["time"] >= load_start) and (load_end is None
                                                                               or start["time"] <= load_end)
            row["during_load"] += inside
    return {function: {"during_load": row["during_load"],
                       **{f"{kind}_{figure}": value for kind in ("under_load", "quiet")
                          for figure, value in _spread(row[kind]).items()}}
            for function, row in figures.items()}


def no_cold_starts() -> dict[str, Any]:
    """cold_start_figures' row of a function the autoscaler left alone (min_instances = max_instances): none
    during the load nor under it; how many started quietly with the stack is not recorded (None)."""
    return {"during_load": 0, **{f"under_load_{figure}": value for figure, value in _spread([]).items()},
            "quiet_count": None, "quiet_ms_median": None, "quiet_ms_max": None}


def _spread(start_ms: Sequence[float]) -> dict[str, float | None]:
    return {"count": len(start_ms), "ms_median": statistics.median(start_ms) if start_ms else None,
            "ms_max": max(start_ms, default=None)}


# ---- the process ---------------------------------------------------------------------------------------
@dataclass
class Instance:
    """One server slot of a function: off, starting, ready (taking requests), drained (idle, kept warm) or
    stopping (SIGTERM sent)."""
    index: int
    port: int
    state: str = "off"
    process: subprocess.Popen[bytes] | None = None
    since: float = 0.0  # when it entered its state (drained: when it was last seen busy)


@dataclass
class Function:
    name: str
    limits: Limits
    command: list[list[str]]  # per slot
    env: dict[str, str]
    instances: list[Instance]
    window: deque[Sample] = field(default_factory=deque)
    start_times_s: list[float] = field(default_factory=list)
    metrics_wanted: int = 0
    asked: deque[tuple[float, int]] = field(default_factory=deque)  # (when, instances the rules asked for)


class Autoscaler:
    def __init__(self, config: Mapping[str, Any], clock: Callable[[], float] = time.monotonic):
        self.stats = config["stats"]
        self.logs = Path(config["logs"])
        self.events = Path(config["events"])
        self.idle_s = float(config.get("idle_s", IDLE_S))
        self.window_s = float(config.get("window_s", METRICS_WINDOW_S))
        self.metrics_interval_s = float(config.get("metrics_interval_s", METRICS_INTERVAL_S))
        self.clock = clock
        self.functions = [
            Function(name, Limits(spec["min_instances"], spec["max_instances"], spec["concurrency"], spec["vcpus"],
                                  spec.get("cpu_s_per_request")),
                     spec["commands"], spec["env"], [Instance(i, port) for i, port in enumerate(spec["ports"])])
            for name, spec in config["functions"].items()]
        self.stopping = threading.Event()
        self._last_metrics = -math.inf
        self.instances_file = Path(config["instances"])

    def event(self, function: Function, instance: Instance, what: str, **extra: Any) -> None:
        with open(self.events, "a") as out:
            out.write(json.dumps({"time": time.time(), "function": function.name,
                                  "instance": f"{function.name}-{instance.index}", "event": what, **extra}) + "\n")

    def set_state(self, function: Function, instance: Instance, state: str) -> None:
        haproxy.ask(self.stats, f"set server {function.name}/{haproxy.server_name(instance.index)} state {state}")

    # ---- one step -------------------------------------------------------------------------------------
    def step(self) -> None:
        now = self.clock()
        rows = haproxy.show_stat(self.stats)
        waiting = parse_waiting(haproxy.ask(self.stats, "show waiting"))
        evaluate_metrics = now - self._last_metrics >= self.metrics_interval_s
        if evaluate_metrics:
            self._last_metrics = now
        for function in self.functions:
            self.follow(function, now, rows)
            sample = observe(function.name, rows, waiting, now)
            function.window.append(sample)
            while function.window and function.window[0].time < now - self.window_s:
                function.window.popleft()
            if evaluate_metrics:
                function.metrics_wanted = by_metrics(function.window, function.limits)
            running = sum(1 for i in function.instances if i.state == "ready")
            starting = sum(1 for i in function.instances if i.state == "starting")
            demand = on_demand(sample, running, starting, function.limits)
            # out at once; in only when the averages were just evaluated, and no lower than the window asked for
            wanted = target(function.metrics_wanted, demand, function.limits)
            function.asked.append((now, wanted))
            while function.asked and function.asked[0][0] < now - self.window_s:
                function.asked.popleft()
            self.scale(function, wanted, sample, now, shrink=evaluate_metrics,
                       keep=kept(function.asked, now, self.window_s))

    def follow(self, function: Function, now: float, rows: Sequence[Mapping[str, str]]) -> None:
        """Moves each instance on: a started one that listens is ready; a drained one busy again restarts its
        idle clock, one idle past IDLE_S is stopped; a stopped one whose process exited is off."""
        busy = {r["svname"]: int(r["scur"] or 0) for r in rows if r["pxname"] == function.name}
        for instance in function.instances:
            if instance.state == "starting" and port_is_open(instance.port):
                self.set_state(function, instance, "ready")
                start_s = now - instance.since
                function.start_times_s.append(start_s)
                haproxy.ask(self.stats, f"set queue-wait {function.name} "
                                        f"{int(queue_wait_s(function.start_times_s) * 1000)}")
                instance.state, instance.since = "ready", now
                self.event(function, instance, "ready", start_ms=round(start_s * 1000, 1))
            elif instance.state == "drained":
                if busy.get(haproxy.server_name(instance.index), 0):
                    instance.since = now
                elif now - instance.since >= self.idle_s:
                    self.stop(function, instance, now)
            elif instance.state in ("stopping", "starting", "ready") and instance.process is not None \
                    and instance.process.poll() is not None:
                if instance.state != "stopping":  # its supervisor died: not ours to hide
                    self.set_state(function, instance, "maint")
                self.event(function, instance, "stopped", exit_code=instance.process.returncode,
                           after_s=round(now - instance.since, 2))
                instance.state, instance.process = "off", None
                self.record_instances()

    def scale(self, function: Function, wanted: int, sample: Sample, now: float, shrink: bool = True,
              keep: int = 0) -> None:
        active = [i for i in function.instances if i.state in ("starting", "ready")]
        if len(active) < wanted:
            for instance in sorted((i for i in function.instances if i.state == "drained"),
                                   key=lambda i: -i.index)[:wanted - len(active)]:
                self.set_state(function, instance, "ready")  # warm: no cold start
                instance.state, instance.since = "ready", now
                self.event(function, instance, "undrain")
                active.append(instance)
            free = [i for i in function.instances if i.state == "off"]
            for instance in free[:wanted - len(active)]:
                self.start(function, instance, sample, now)
        elif len(active) > max(wanted, keep) and shrink:
            for instance in sorted((i for i in active if i.state == "ready"), key=lambda i: -i.index)[
                    :len(active) - max(wanted, keep)]:
                self.set_state(function, instance, "drain")
                instance.state, instance.since = "drained", now
                self.event(function, instance, "drain")

    def start(self, function: Function, instance: Instance, sample: Sample, now: float) -> None:
        name = f"{function.name}-{instance.index}"
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as log:
            instance.process = subprocess.Popen(function.command[instance.index], stdout=log,
                                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                env={**os.environ, **function.env}, start_new_session=True)
        instance.state, instance.since = "starting", now
        self.record_instances()
        # under load: requests were in flight or waiting; the host's load says how busy its cores were
        self.event(function, instance, "start", in_flight=sample.in_flight, waiting=sample.queued + sample.waiting,
                   load_1m=round(os.getloadavg()[0], 2))

    def record_instances(self) -> None:
        processes = [{"name": f"{f.name}-{i.index}", "pid": i.process.pid, "port": i.port,
                      "log": str(self.logs / f"{f.name}-{i.index}.log")}
                     for f in self.functions for i in f.instances if i.process is not None]
        temporary = self.instances_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(processes, indent=1))
        temporary.replace(self.instances_file)

    def stop(self, function: Function, instance: Instance, now: float) -> None:
        self.set_state(function, instance, "maint")
        assert instance.process is not None
        instance.process.send_signal(signal.SIGTERM)  # the supervisor: SIGTERM to its server, GRACE_S, SIGKILL
        instance.state, instance.since = "stopping", now
        self.event(function, instance, "sigterm", idle_s=self.idle_s)

    def status(self) -> dict[str, Any]:
        return {f.name: {"min_instances": f.limits.min_instances, "max_instances": f.limits.max_instances,
                         **{state: sum(1 for i in f.instances if i.state == state)
                            for state in ("starting", "ready", "drained", "stopping")},
                         # whose server runs (a crash test may kill it): ready or drained
                         "running": [f"{f.name}-{i.index}" for i in f.instances if i.state in ("ready", "drained")]}
                for f in self.functions}

    # ---- the loop -------------------------------------------------------------------------------------
    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.step()
            except OSError as error:  # HAProxy not up yet, or restarting: try again
                print(f"autoscaler: {error}", file=sys.stderr, flush=True)
            self.stopping.wait(DEMAND_TICK_S)
        for function in self.functions:
            for instance in function.instances:
                if instance.process is not None and instance.process.poll() is None:
                    instance.process.send_signal(signal.SIGTERM)
        for function in self.functions:
            for instance in function.instances:
                if instance.process is not None:
                    try:
                        instance.process.wait(timeout=GRACE_S + 5)
                    except subprocess.TimeoutExpired:
                        instance.process.kill()


def observe(backend: str, rows: Sequence[Mapping[str, str]], waiting: Mapping[str, int], now: float) -> Sample:
    summary = next(r for r in rows if r["pxname"] == backend and r["svname"] == "BACKEND")
    in_flight = sum(int(r["scur"] or 0) for r in rows if r["pxname"] == backend and haproxy.is_server(r))
    return Sample(now, in_flight, int(summary["qcur"] or 0), waiting.get(backend, 0), int(summary["req_tot"] or 0))


def parse_waiting(text: str) -> dict[str, int]:
    """`show waiting`'s lines, "backend count", as a dict."""
    found = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            found[parts[0]] = int(parts[1])
    return found


def serve_status(autoscaler: Autoscaler, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = json.dumps(autoscaler.status()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="visitkit.twin.autoscaler", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, type=Path)
    args = parser.parse_args(argv)
    config = json.loads(args.config.read_text())
    autoscaler = Autoscaler(config)
    signal.signal(signal.SIGTERM, lambda *_: autoscaler.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: autoscaler.stopping.set())
    server = serve_status(autoscaler, config["port"])
    try:
        autoscaler.run()
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

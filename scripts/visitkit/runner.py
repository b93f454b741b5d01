"""One iteration's experiment loop: settings -> load test -> measured figures -> report.

  bring up the target -> totals before -> Locust headless (server sampled every second)
  -> poll stored totals until they reach before + acknowledged -> report, plots, README block
"""
import datetime
import json
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from visitkit import plots, report, targets
from visitkit.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = ROOT / "locust" / "locustfile.py"
STAGES = {"local": ROOT / "locust" / "stages" / "endurance-local.csv",
          "remote": ROOT / "locust" / "stages" / "endurance-study.csv"}
DEFAULT_BREAKPOINT_SECONDS = 300  # the study's shortest breakpoint run (5 min)
STOP_TIMEOUT_S = 30  # users finish their current page (3 requests) when the load ends
SETTLE_POLLS = 5  # after converging, keep polling this many seconds to see duplicates arrive
LOCAL_NOTE = ("Local figures: Locust, the emulators, HAProxy and every function instance share one small "
              "machine (2 cores here), and the emulators are not Firestore/Pub/Sub: absolute RPS and "
              "latencies are far below Google Cloud's; compare iterations with each other, not with the study.")


def parse_duration(text):
    """'90', '90s', '5m', '1h30m' -> seconds."""
    if text is None:
        return None
    total, digits = 0.0, ""
    for char in str(text).strip():
        if char.isdigit() or char == ".":
            digits += char
        elif char in "hms" and digits:
            total += float(digits) * {"h": 3600, "m": 60, "s": 1}[char]
            digits = ""
        else:
            raise ValueError(f"cannot read duration {text!r} (e.g. 90s, 5m, 1h30m)")
    return total + (float(digits) if digits else 0.0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def locust_command(base_url, test, results_dir, shape_set, stages=None, processes=None):
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", base_url,
               "--shape", test, "--csv", str(results_dir / "locust"), "--csv-full-history",
               "--html", str(results_dir / "locust.html"), "--ledger-file", str(results_dir / "ledger.json"),
               "--stop-timeout", str(STOP_TIMEOUT_S), "--only-summary", "--exit-code-on-error", "0",
               "--logfile", str(results_dir / "locust.log")]
    if shape_set:
        command += ["--shape-set", shape_set]
    if stages:
        command += ["--stages", str(stages)]
    if processes:
        port = str(free_port())  # never Locust's default 5557: others may run Locust too
        command += ["--processes", str(processes), "--master-port", port, "--master-bind-port", port]
    return command


class Sampler(threading.Thread):
    """Appends target.sample() to a JSONL file once per second until stopped."""

    def __init__(self, target, path, interval=1.0):
        super().__init__(daemon=True)
        self.target, self.path, self.interval = target, path, interval
        self.stopping = threading.Event()
        self.errors = 0

    def run(self):
        with open(self.path, "a") as out:
            while not self.stopping.is_set():
                started = time.monotonic()
                try:
                    out.write(json.dumps(self.target.sample()) + "\n")
                    out.flush()
                except Exception as error:  # a missed sample must not end the run
                    self.errors += 1
                    if self.errors <= 3:
                        print(f"server sample failed: {error!r}", file=sys.stderr)
                self.stopping.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def stop(self):
        self.stopping.set()
        self.join(timeout=30)


def wait_for_convergence(target, before, acknowledged, path, timeout, interval=1.0):
    """Polls stored totals into a JSONL file until every page holds before + acknowledged (then a few
    more polls, so late duplicates show) or the timeout passes."""
    expected = {page: before.get(page, 0) + count for page, count in acknowledged.items()}
    deadline, settle = time.monotonic() + timeout, None
    with open(path, "a") as out:
        while True:
            totals = target.totals()
            out.write(json.dumps({"time": time.time(), "totals": totals}) + "\n")
            out.flush()
            if settle is None and all(totals.get(p, 0) >= n for p, n in expected.items()):
                settle = SETTLE_POLLS
            if settle is not None:
                settle -= 1
                if settle <= 0:
                    return True
            if time.monotonic() > deadline:
                return settle is not None
            time.sleep(interval)


def target_kind(target_spec):
    return target_spec if target_spec in ("local", "gcp") else "url"


def load_shape(test, duration, shape_set, stages, target_spec):
    """(load seconds or None, Locust --shape-set, endurance stages) for a run."""
    seconds = parse_duration(duration)
    if seconds is None and test == "breakpoint":
        seconds = DEFAULT_BREAKPOINT_SECONDS
    # "k=v,k=v" as locust/shapes.py reads it; a later key wins, so --duration beats duration_s
    shape_set = ",".join(filter(None, [shape_set, f"duration_s={seconds:g}" if seconds is not None else ""]))
    if test == "endurance" and not stages:
        stages = STAGES["local" if target_spec == "local" else "remote"]
    return seconds, shape_set, stages


def convergence_wait_text(convergence_timeout):
    if convergence_timeout is not None:
        return f"up to {convergence_timeout:g} s"
    return "up to 3 x the load's length, at least 120 s"


def dry_run_plan(iteration_dir, test, duration=None, target_spec="local", processes=None, shape_set=None,
                 stages=None, convergence_timeout=None, queue_timeout=10.0, keep_up=False, project=None,
                 region=None, destroy=False):
    """What run_iteration would do, as lines to print; starts, writes and contacts nothing."""
    iteration_dir = Path(iteration_dir).resolve()
    settings = load_settings(iteration_dir)
    _, shape_set, stages = load_shape(test, duration, shape_set, stages, target_spec)
    results_dir = iteration_dir / "results" / f"{test}-<timestamp>"
    is_url = target_spec.startswith(("http://", "https://"))
    base_url = target_spec.rstrip("/") if is_url else "<base_url>"  # the others' is known once started
    command = locust_command(base_url, test, results_dir, shape_set, stages, processes)
    locust_line = f"  $ {shlex.join(command)}"
    if target_spec == "gcp":
        from visitkit import gcp

        if not project:
            raise SystemExit("--target gcp needs --project")
        return [f"results: {results_dir}"] + gcp.dry_run_plan(
            iteration_dir, project, region, test=test, destroy=destroy, locust_command=command)
    local = target_spec == "local"
    if local:
        instances = ", ".join(f"{name} {f.max_instances}x{f.concurrency}" for name, f in settings.functions.items())
        start = [f"start the local stack with {settings.source}: Firestore and Pub/Sub emulators, HAProxy "
                 f"({queue_timeout:g} s queue before a 429), function instances x concurrency: {instances}; "
                 "<base_url> is its HAProxy on a free port",
                 "read totals before the load from the Firestore emulator"]
        totals, end = "the Firestore emulator", ["leave the stack running" if keep_up else "stop the stack"]
    elif is_url:
        start = [f"use the deployed system at {base_url}",
                 f"read totals before the load through {base_url}/get-counter"]
        totals, end = "get-counter (its cache delays them by up to one TTL)", []
    else:
        raise SystemExit(f"--target must be local, gcp or a base URL, not {target_spec!r}")
    return [f"results: {results_dir}", *start,
            f"run the Locust test '{test}' against {base_url}", locust_line,
            f"measure convergence: read totals from {totals} until they match the visits Locust recorded "
            f"({convergence_wait_text(convergence_timeout)})",
            "write report.md, summary.json and the plots"
            + (" and update the iteration README's latest-results block" if local else ""),
            *end]


def run_iteration(iteration_dir, test, duration=None, target_spec="local", processes=None, shape_set=None,
                  stages=None, convergence_timeout=None, keep_up=False, queue_timeout=10.0, project=None,
                  region=None, destroy=False, log=print):
    iteration_dir = Path(iteration_dir).resolve()
    settings = load_settings(iteration_dir)  # fails early on a bad settings file
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    results_dir = iteration_dir / "results" / f"{test}-{stamp}"
    results_dir.mkdir(parents=True)
    seconds, shape_set, stages = load_shape(test, duration, shape_set, stages, target_spec)

    run = {"iteration": iteration_dir.name, "test": test, "target": target_kind(target_spec),
           "started": datetime.datetime.now().isoformat(timespec="seconds"),
           "settings": json.loads(Path(settings.source).read_text()),
           "shape": f"{test} {shape_set}"
           + (f", stages from {Path(stages).name if Path(str(stages)).exists() else stages}" if stages else "")
           + (f", {processes} Locust processes" if processes else ""),
           "notes": []}
    log(f"results: {results_dir}")
    log(f"bringing up the target ({target_spec}) ...")
    target = targets.open_target(target_spec, iteration_dir, results_dir / "stack", queue_timeout=queue_timeout,
                                 keep_up=keep_up, project=project, region=region, destroy=destroy)
    try:
        if target_spec == "local":
            run["notes"].append(LOCAL_NOTE)
        if getattr(target, "convergence_note", ""):
            run["notes"].append(target.convergence_note)
        run["base_url"] = target.base_url
        run["before"] = target.totals()
        (results_dir / "run.json").write_text(json.dumps(run, indent=2))

        sampler = Sampler(target, results_dir / "server-samples.jsonl")
        sampler.start()
        command = locust_command(target.base_url, test, results_dir, shape_set, stages, processes)
        run["locust_command"] = command
        log(f"load test: {run['shape']} against {target.base_url}")
        load_started = time.time()
        timeout = seconds + STOP_TIMEOUT_S + 120 if seconds is not None else None
        finished = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                  timeout=timeout, cwd=ROOT)
        load_ended = time.time()
        run["locust_exit_code"] = finished.returncode
        if finished.returncode != 0:
            run["notes"].append(f"Locust exited with code {finished.returncode}: see locust.log")
        log_text = (results_dir / "locust.log").read_text() if (results_dir / "locust.log").exists() else ""
        if "CPU usage above" in log_text or "exceeded cpu threshold" in log_text:
            run["notes"].append("Locust itself ran out of CPU during the run: its figures understate the system; "
                                "rerun with --processes N (see locust/README.md).")

        ledger = json.loads((results_dir / "ledger.json").read_text())
        wait = convergence_timeout if convergence_timeout is not None else max(120.0, 3 * (load_ended - load_started))
        log(f"load done; waiting up to {wait:.0f} s for the counters to converge ...")
        converged = wait_for_convergence(target, run["before"], ledger.get("acknowledged", {}),
                                         results_dir / "convergence.jsonl", wait)
        sampler.stop()
        if not converged:
            run["notes"].append(f"Counters had not converged {wait:.0f} s after the load (--convergence-timeout).")
        if sampler.errors:
            run["notes"].append(f"{sampler.errors} server samples failed (gaps in server-samples.jsonl).")
        if hasattr(target, "window_samples"):  # platforms whose figures arrive after the fact
            # the window spans the load and the convergence wait, so the backlog's drain is in it
            log("reading the platform's metrics for the test window (after its ingestion delay) ...")
            try:
                samples = target.window_samples(load_started, time.time(), results_dir)
            except Exception as error:  # e.g. no monitoring.viewer role: keep the client-side report
                samples = []
                run["notes"].append(f"The platform's metrics could not be read: {error!r}")
            with open(results_dir / "server-samples.jsonl", "w") as out:
                out.writelines(json.dumps(s) + "\n" for s in samples)
        (results_dir / "run.json").write_text(json.dumps(run, indent=2))
    finally:
        target.close()

    summary = report.write_report(results_dir, iteration_dir, update_iteration_readme=(target_spec == "local"))
    plots.write_plots(results_dir, summary)
    return results_dir, summary


def headline_lines(results_dir, summary):
    h, verdict = summary["headline"], summary.get("verdict", {})
    fmt, ms = report.fmt, report.ms
    return [
        f"report: {results_dir / 'report.md'}",
        f"  verdict: {verdict.get('outcome', 'n/a')}",
        f"  users max {h['users_max']}, requests {h['requests']}, failure ratio {fmt((h['failure_ratio'] or 0) * 100)} %",
        f"  knee: {fmt(h['knee_users'], 0)} users / {fmt(h['knee_rps'])} RPS; first failure: "
        f"{fmt(h['first_failure_users'], 0)} users / {fmt(h['first_failure_rps'])} RPS; peak {fmt(h['rps_peak'])} RPS; "
        f"p95 ceiling {ms(h['p95_ceiling_ms'])} ms; slowest: {h.get('slowest_function', 'n/a')}",
        f"  convergence: {fmt(h['convergence_s'], 0)} s after load ({fmt(h['extra_min_per_min'], 2)} extra min per min)",
        f"  visits: acknowledged {h['visits.acknowledged']}, stored {h['visits.stored']}, "
        f"lost {h['visits.lost']}, duplicated {h['visits.duplicated']}",
    ]

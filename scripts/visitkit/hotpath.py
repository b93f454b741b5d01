"""How much the hot path costs: the study's visitor mix, flat out (no think time), against the
whole local stack with every function at 1 instance x 8 threads, and against a no-op
functions-framework function on the same machine, in one run, side by side. Reports the RPS ratio,
CPU milliseconds per request per function, and whether the store kept up: its backlog when the
load ended and how long the counters took to converge after it.
"""
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from visitkit import resources
from visitkit.catalogue import FUNCTIONS
from visitkit.net import free_port, http_status, wait_until
from visitkit.paths import LOCUST_DIR, ROOT
from visitkit.predict import PUBLIC
from visitkit.settings import parse_settings
from visitkit.stack import LocalStack

NOOP_SOURCE = Path(__file__).with_name("noop") / "main.py"
THREADS = 8


def bench_settings(threads=THREADS):
    """Every function at 1 instance x `threads` (1 vCPU, as concurrency above 1 needs)."""
    return parse_settings({"shards_per_page": 20, "cache_ttl_seconds": 10,
                           "functions": {name: {"max_instances": 1, "concurrency": threads} for name in FUNCTIONS}},
                          "hot-path benchmark settings")


def locust_rps(base_url, users, seconds, folder):
    """Requests per second Locust measured, flat out, over the whole run."""
    prefix = Path(folder) / "locust"
    subprocess.run([sys.executable, "-m", "locust", "-f", str(LOCUST_DIR / "locustfile.py"), "--headless",
                    "--host", base_url, "-u", str(users), "-r", str(users), "--run-time", f"{seconds}s",
                    "--think-time", "0", "--csv", str(prefix), "--only-summary", "--exit-code-on-error", "0",
                    "--stop-timeout", "5", "--logfile", str(prefix) + ".log"],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=seconds + 120)
    with open(f"{prefix}_stats.csv", newline="") as f:
        aggregated = next(row for row in csv.DictReader(f) if row["Name"] == "Aggregated")
    return float(aggregated["Requests/s"]), int(aggregated["Failure Count"])


def measure_stack(users, seconds, threads=THREADS):
    """(RPS, failures, {function: CPU ms per own request}, {part: CPU ms per visitor request}, store
    figures) for the whole stack."""
    stack = LocalStack(tempfile.mkdtemp(prefix="bench-hot-path-"))
    stack.up(bench_settings(threads), port=0)
    try:
        groups = lambda: {resources.component_of(p["name"]): [p["pid"]]  # noqa: E731
                          for p in (stack.state() or {}).get("processes", [])}
        sampler = resources.ProcessSampler(groups)
        sampler.sample()
        before = stack.sample()
        rps, failures = locust_rps(stack.base_url, users, seconds, stack.state_dir)
        used, after = sampler.sample(), stack.sample()
        elapsed = after["time"] - before["time"]
        served = {name: after["functions"][name]["requests"] - before["functions"][name]["requests"]
                  for name in FUNCTIONS}
        cpu_ms_used = {part: figures["cpu_percent"] / 100 * elapsed * 1000 for part, figures in used.items()
                       if figures.get("cpu_percent") is not None}
        cpu_ms = {name: cpu_ms_used[name] / served[name] for name in FUNCTIONS if served[name] and name in cpu_ms_used}
        # Every part's share of a visitor's request (the stand-ins for Google's services included).
        visitor_requests = sum(served[name] for name in PUBLIC)
        per_visitor_request = {part: used_ms / visitor_requests for part, used_ms in cpu_ms_used.items()
                               if visitor_requests}
        store = {"accepted_per_s": (after["store"]["accepted"] - before["store"]["accepted"]) / elapsed,
                 "stored_per_s": (after["store"]["stored"] - before["store"]["stored"]) / elapsed,
                 "backlog_at_end": after["store"]["backlog"]}
        ended = time.monotonic()
        converged = wait_until(lambda: stack.sample()["store"]["backlog"] <= 0, timeout=300, interval=0.5)
        store["converged_after_s"] = time.monotonic() - ended if converged else None
        return rps, failures, cpu_ms, per_visitor_request, store
    finally:
        stack.down()


def measure_noop(users, seconds, threads=THREADS):
    """(RPS, failures, CPU ms per request) of one no-op functions-framework server with `threads` threads."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "functions_framework", "--target", "noop", "--source",
                               str(NOOP_SOURCE), "--host", "127.0.0.1", "--port", str(port)],
                              env={**os.environ, "THREADS": str(threads)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_status(url) is not None, timeout=30)
        sampler = resources.ProcessSampler(lambda: {"no-op": [server.pid]})  # its own process group
        sampler.sample()
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="bench-noop-") as folder:
            rps, failures = locust_rps(url, users, seconds, folder)
        percent, requests = sampler.sample()["no-op"]["cpu_percent"], rps * seconds
        return rps, failures, percent / 100 * (time.monotonic() - started) * 1000 / requests if requests else None
    finally:
        server.kill()
        server.wait()


def hot_path_lines(users=32, seconds=30):
    stack_rps, stack_failures, cpu_ms, per_visitor_request, store = measure_stack(users, seconds)
    noop_rps, noop_failures, noop_cpu_ms = measure_noop(users, seconds)
    lines = [f"hot path: the study's visitor mix, {users} users with no think time, {seconds} s each, "
             f"every function 1 instance x {THREADS} threads:",
             "| target | RPS | failures |", "|---|---:|---:|",
             f"| whole local stack | {stack_rps:.0f} | {stack_failures} |",
             f"| no-op functions-framework function | {noop_rps:.0f} | {noop_failures} |",
             f"| ratio (stack / no-op) | {stack_rps / noop_rps:.2f}x | |", "",
             "| function | CPU ms per request |", "|---|---:|"]
    lines += [f"| {name} | {value:.2f} |" for name, value in cpu_ms.items()]
    lines += [f"| the no-op function | {noop_cpu_ms:.2f} |" if noop_cpu_ms is not None else "| the no-op function | n/a |"]
    lines += ["", "| part of the local stack | CPU ms per visitor request |", "|---|---:|"]
    lines += [f"| {part} | {value:.2f} |" for part, value in sorted(per_visitor_request.items(), key=lambda kv: -kv[1])]
    lines += [f"| all parts (Locust apart) | {sum(per_visitor_request.values()):.2f} |"]
    converged = store["converged_after_s"]
    lines += ["", f"store: accepted {store['accepted_per_s']:.0f}/s, stored {store['stored_per_s']:.0f}/s during the "
                  f"load; backlog {store['backlog_at_end']} when it ended; counters converged "
                  + (f"{converged:.1f} s after it" if converged is not None else "NOT within 300 s")]
    return lines

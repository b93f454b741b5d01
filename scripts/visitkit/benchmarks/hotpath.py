"""How much the hot path costs: the study's visitor mix, flat out (no think time), against the
whole local stack with every function at 1 instance x 8 threads, and against a no-op
functions-framework function on the same machine, in one run, side by side. Reports the RPS ratio,
CPU milliseconds per request per function, and whether the store kept up: its backlog when the
load ended and how long the counters took to converge after it.

A server's CPU per request depends on its request rate (gunicorn's loop wakes once for fewer
requests at a lower one: the no-op costs more per request at ~300 requests/s than flat out), so the
no-op is also measured at about the rate each function served in the stack run, the yardstick a
function's own cost is compared with.

`benchmark(...)` writes a results folder under benchmarks/ (visitkit.benchmarks.benchfolder): benchmark.json
(FORMAT), summary.md, Locust's CSV files of each run (stack-locust_*.csv, noop-locust_*.csv), and
the samples the CPU and store figures come from (stack-samples.json, noop-samples.json).
"""
import csv
import datetime
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from visitkit.benchmarks import benchfolder, profiling
from visitkit.catalogue import FUNCTIONS, PUSH_FUNCTION, QUEUE_TIMEOUT_S
from visitkit.errors import StackError
from visitkit.model.capacity import PUBLIC
from visitkit.net import free_port, http_status, wait_until
from visitkit.paths import LOCUST_DIR, ROOT
from visitkit.settings import Settings, parse_settings
from visitkit.twin import haproxy, resources
from visitkit.twin.stack import LocalStack

FORMAT = 3  # 3: the no-op also at the functions' own request rate; 2: through the stack's HAProxy and directly
KIND = "hot-path"
PACED_TO = {"at_stack_rate": "the rate of each public function in the stack",
            "at_push_rate": "store-inc-counter's rate in the stack"}
NOOP_SOURCE = Path(__file__).with_name("noop") / "main.py"
THREADS = 8
DEFAULT_USERS, DEFAULT_SECONDS = 32, 30
NOOP_ROWS = {"via_platform": "no-op, through the stack's HAProxy", "direct": "no-op, direct",
             "at_stack_rate": "no-op, through the stack's HAProxy, at the public functions' rate",
             "at_push_rate": "no-op, through the stack's HAProxy, at store-inc-counter's rate"}


def bench_settings(threads: int = THREADS) -> Settings:
    """Every function at 1 instance x `threads` (1 vCPU, as concurrency above 1 needs)."""
    return parse_settings({"shards_per_page": 20, "cache_ttl_seconds": 10,
                           "functions": {name: {"max_instances": 1, "concurrency": threads} for name in FUNCTIONS}},
                          "hot-path benchmark settings")


def locust_rps(base_url: str, users: int, seconds: float, csv_prefix: str | Path, logfile: str | Path,
               think_time: str = "0") -> tuple[float, int]:
    """Requests per second Locust measured over the whole run (flat out unless think_time, Locust's
    MIN-MAX seconds between pages, says otherwise), and its failures; its CSV files are written as
    csv_prefix_*.csv."""
    subprocess.run([sys.executable, "-m", "locust", "-f", str(LOCUST_DIR / "locustfile.py"), "--headless",
                    "--host", base_url, "-u", str(users), "-r", str(users), "--run-time", f"{seconds}s",
                    "--think-time", think_time, "--csv", str(csv_prefix), "--only-summary", "--exit-code-on-error", "0",
                    "--stop-timeout", "5", "--logfile", str(logfile)],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=seconds + 120)
    with open(f"{csv_prefix}_stats.csv", newline="") as f:
        aggregated = next(row for row in csv.DictReader(f) if row["Name"] == "Aggregated")
    return float(aggregated["Requests/s"]), int(aggregated["Failure Count"])


def profiled_pass(pids: Mapping[str, int], url: str, users: int, seconds: float, folder: Path,
                  scratch: str | Path) -> dict[str, dict[str, Any] | None]:
    """The same load once more with py-spy watching each process ({name: pid}), apart from the measured
    pass because py-spy takes CPU from the same cores; {name: its profile's summary, or None}."""
    raw = {name: folder / f"profile-{name}.txt" for name in pids}
    profilers = [profiling.start(pid, seconds, raw[name]) for name, pid in pids.items()]
    locust_rps(url, users, seconds, Path(scratch) / "profiled-locust", Path(scratch) / "profiled-locust.log")
    for profiler in profilers:
        profiler.wait(timeout=60)
    summaries: dict[str, dict[str, Any] | None] = {}
    for name, path in raw.items():
        if path.exists():  # kept without this machine's paths
            path.write_text(profiling.portable(path.read_text(errors="replace")))
        summaries[name] = profiling.summarize(path.read_text()) if path.exists() else None
    return summaries


def _known(figure: float | None) -> float:
    """A figure these samples always have: the local stack's counters and stored visits, a process's CPU
    after its first sample."""
    if figure is None:
        raise StackError("a sample left out a figure it always has here")
    return figure


def measure_stack(users: int, seconds: float, folder: Path, threads: int = THREADS) -> dict[str, Any]:
    """The whole stack's figures: RPS, failures, CPU ms per own request per function, CPU ms per
    visitor request per part, and the store's; its raw files into `folder`."""
    stack = LocalStack(tempfile.mkdtemp(prefix="bench-hot-path-"))
    stack.up(bench_settings(threads), port=0)
    try:
        groups = lambda: {resources.component_of(p["name"]): [p["pid"]]  # noqa: E731
                          for p in (stack.state() or {}).get("processes", [])}
        sampler = resources.ProcessSampler(groups)
        sampler.sample()
        before = stack.sample()
        rps, failures = locust_rps(stack.base_url, users, seconds, folder / "stack-locust",
                                   stack.state_dir / "locust.log")
        used, after = sampler.sample(), stack.sample()
        (folder / "stack-samples.json").write_text(json.dumps({"before": before, "after": after, "cpu": used},
                                                              indent=2) + "\n")
        elapsed = after["time"] - before["time"]
        served = {name: _known(after["functions"][name]["requests"])
                  - _known(before["functions"][name]["requests"]) for name in FUNCTIONS}
        cpu_ms_used = {part: percent / 100 * elapsed * 1000 for part, figures in used.items()
                       if (percent := figures.get("cpu_percent")) is not None}
        cpu_ms = {name: round(cpu_ms_used[name] / served[name], 3) for name in FUNCTIONS
                  if served[name] and name in cpu_ms_used}
        # Every part's share of a visitor's request (the stand-ins for Google's services included).
        visitor_requests = sum(served[name] for name in PUBLIC)
        per_visitor_request = {part: round(used_ms / visitor_requests, 3) for part, used_ms in cpu_ms_used.items()
                               if visitor_requests}
        accepted = _known(after["store"]["accepted"]) - _known(before["store"]["accepted"])
        stored = _known(after["store"]["stored"]) - _known(before["store"]["stored"])
        store = {"accepted_per_s": round(accepted / elapsed, 1), "stored_per_s": round(stored / elapsed, 1),
                 "backlog_at_end": after["store"]["backlog"]}
        ended = time.monotonic()
        # every message acknowledged (None: the push relay did not answer this time)
        converged = wait_until(lambda: (backlog := stack.sample()["store"]["backlog"]) is not None and backlog <= 0,
                               timeout=300, interval=0.5)
        store["converged_after_s"] = round(time.monotonic() - ended, 1) if converged else None
        profile = profiled_pass({name: pid for name, (pid,) in groups().items() if name in FUNCTIONS},
                                stack.base_url, users, seconds, folder, stack.state_dir)
        return {"rps": round(rps, 1), "failures": failures, "cpu_ms_per_request": cpu_ms,
                "requests_per_s": {name: round(served[name] / elapsed, 1) for name in FUNCTIONS},
                "cpu_ms_per_visitor_request": per_visitor_request, "store": store, "profile": profile}
    finally:
        stack.down()


def noop_front_end(noop_port: int, state_dir: str | Path) -> tuple[subprocess.Popen[bytes], str]:
    """HAProxy in front of the no-op function with the local stack's own configuration (every
    function's path and limits, a connection per request), so the no-op is reached as the functions
    are; returns (its process, its URL)."""
    port = free_port()
    errorfile, config = Path(state_dir) / "429.http", Path(state_dir) / "haproxy.cfg"
    errorfile.write_text(haproxy.TOO_MANY_REQUESTS)
    config.write_text(haproxy.render_config(
        public_port=port, push_port=free_port(), stats_address=f"127.0.0.1:{free_port()}", errorfile_path=errorfile,
        instances={name: [noop_port] for name in FUNCTIONS}, settings=bench_settings(), queue_timeout=QUEUE_TIMEOUT_S))
    process = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.STDOUT, start_new_session=True)
    return process, f"http://127.0.0.1:{port}"


def measure_noop(users: int, seconds: float, folder: Path, rates: Mapping[str, float],
                 threads: int = THREADS) -> dict[str, dict[str, Any]]:
    """One no-op functions-framework server with `threads` threads, under the same load: flat out
    through the local stack's HAProxy configuration (as the functions are reached: `via_platform`),
    paced through it to each of `rates` ({key: requests/s}: `at_stack_rate`, `at_push_rate`), and
    flat out directly, on kept-alive connections (`direct`). Each: RPS, failures, CPU ms per
    request, the profile's shares; raw files into `folder`."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "functions_framework", "--target", "noop", "--source",
                               str(NOOP_SOURCE), "--host", "127.0.0.1", "--port", str(port)],
                              env={**os.environ, "THREADS": str(threads)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    front_end = None
    try:
        wait_until(lambda: http_status(f"http://127.0.0.1:{port}") is not None, timeout=30)
        with tempfile.TemporaryDirectory(prefix="bench-noop-") as scratch:
            front_end, front_url = noop_front_end(port, scratch)
            wait_until(lambda: http_status(front_url + "/app") is not None, timeout=30)
            figures = {"via_platform": measure_one_noop(server.pid, front_url, users, seconds, folder, "noop", scratch,
                                                             profile_it=True)}
            for key, rate in rates.items():
                figures[key] = measure_one_noop(server.pid, front_url, users, seconds, folder,
                                                f"noop-{key.replace('_', '-')}", scratch, profile_it=False,
                                                think_time=think_time_for(rate, users))
                figures[key]["target_rps"] = rate
            front_end.kill()
            figures["direct"] = measure_one_noop(server.pid, f"http://127.0.0.1:{port}", users, seconds, folder,
                                                 "noop-direct", scratch, profile_it=False)
        return figures
    finally:
        for process in (front_end, server):
            if process is not None:
                process.kill()
                process.wait()


def think_time_for(rate: float, users: int) -> str:
    """Locust's think time (MIN-MAX) at which `users` visitors, each page three quick requests, send
    about `rate` requests/s."""
    seconds = 3 * users / rate
    return f"{seconds:.3f}-{seconds:.3f}"


def measure_one_noop(pid: int, url: str, users: int, seconds: float, folder: Path, name: str, scratch: str | Path,
                     profile_it: bool, think_time: str = "0") -> dict[str, Any]:
    sampler = resources.ProcessSampler(lambda: {"no-op": [pid]})  # its own process group
    sampler.sample()
    started = time.monotonic()
    rps, failures = locust_rps(url, users, seconds, folder / f"{name}-locust", Path(scratch) / f"{name}-locust.log",
                               think_time)
    used, elapsed = sampler.sample(), time.monotonic() - started
    profile = profiled_pass({name: pid}, url, users, seconds, folder, scratch)[name] if profile_it else None
    (folder / f"{name}-samples.json").write_text(json.dumps({"seconds": elapsed, "cpu": used}, indent=2) + "\n")
    requests = rps * seconds
    cpu_ms = _known(used["no-op"]["cpu_percent"]) / 100 * elapsed * 1000 / requests if requests else None
    return {"rps": round(rps, 1), "failures": failures,
            "cpu_ms_per_request": round(cpu_ms, 3) if cpu_ms is not None else None, "profile": profile}


def benchmark(users: int = DEFAULT_USERS, seconds: float = DEFAULT_SECONDS,
              out_root: str | Path = benchfolder.BENCHMARKS_DIR,
              now: Callable[[], datetime.datetime] = datetime.datetime.now) -> tuple[Path, dict[str, Any]]:
    """The whole stack, then the no-op function, under the same load; returns (results folder, record)."""
    started = now()  # the folder's name and the record's "when"
    with benchfolder.new_folder(KIND, out_root, started) as folder:
        stack = measure_stack(users, seconds, folder)
        noop = measure_noop(users, seconds, folder, rates=paced_rates(stack))
        record = {"format": FORMAT, "benchmark": KIND, "when": started.isoformat(timespec="seconds"),
                  "machine": benchfolder.machine(), "locust": importlib.metadata.version("locust"),
                  "users": users, "seconds": seconds, "threads": THREADS, "stack": stack, "noop": noop}
        benchfolder.write(folder, record, summary_lines(record, folder.name))
    return folder, record


def paced_rates(stack: Mapping[str, Any]) -> dict[str, float]:
    """The rates the no-op is measured at too: the requests/s the public functions served in the stack
    run (on average: each page is one request to each) and the deliveries/s store-inc-counter served."""
    served = stack["requests_per_s"]
    return {"at_stack_rate": round(sum(served[name] for name in PUBLIC) / len(PUBLIC), 1),
            "at_push_rate": served[PUSH_FUNCTION]}


def load(folder: str | Path) -> dict[str, Any]:
    return benchfolder.load(folder, KIND, FORMAT)


def cpu_by_origin(cpu_ms: float | None, profile: Mapping[str, Any] | None) -> dict[str, float] | None:
    """CPU ms per request put down to our code, the server (functions-framework, Flask, gunicorn and
    the interpreter under them) and Google's client libraries, in the profile's proportions."""
    shares = (profile or {}).get("shares") or {}
    if cpu_ms is None or not shares:
        return None
    return {"ours": cpu_ms * shares[profiling.OURS],
            "server": cpu_ms * (shares[profiling.FRAMEWORK] + shares[profiling.INTERPRETER]),
            "google": cpu_ms * shares[profiling.GOOGLE]}


def cpu_rows(record: Mapping[str, Any]) -> list[tuple[str, float | None, dict[str, float] | None]]:
    """[(row name, CPU ms per request, its split by origin or None)]: the functions, then the no-op
    reached both ways."""
    stack, noop = record["stack"], record["noop"]
    rows = [(name, value, cpu_by_origin(value, (stack.get("profile") or {}).get(name)))
            for name, value in stack["cpu_ms_per_request"].items()]
    for key, label in NOOP_ROWS.items():
        rows.append((label, noop[key]["cpu_ms_per_request"],
                     cpu_by_origin(noop[key]["cpu_ms_per_request"], noop[key].get("profile"))))
    return rows


def render(record: Mapping[str, Any]) -> list[str]:
    """The Markdown tables of a record: RPS side by side; CPU ms per request per function, split by
    origin and against the no-op reached as the functions are, at each function's own rate and flat
    out; and per visitor request per part of the stack (the most expensive first)."""
    stack, noop = record["stack"], record["noop"]
    yardstick = noop["via_platform"]
    fmt = lambda value, unit="": "n/a" if value is None else f"{value:.2f}{unit}"  # noqa: E731
    ratio = lambda value, base: value / base if value is not None and base else None  # noqa: E731
    lines = ["| target | RPS | failures |", "|---|---:|---:|",
             f"| whole local stack | {stack['rps']:.0f} | {stack['failures']} |",
             f"| no-op function, through the stack's HAProxy (a connection per request) | {yardstick['rps']:.0f} | "
             f"{yardstick['failures']} |",
             *(f"| no-op function, through the stack's HAProxy, paced to {paced_to} "
               f"({noop[key]['target_rps']:.0f} requests/s) | {noop[key]['rps']:.0f} | {noop[key]['failures']} |"
               for key, paced_to in PACED_TO.items()),
             f"| no-op function, direct (kept-alive connections) | {noop['direct']['rps']:.0f} | "
             f"{noop['direct']['failures']} |",
             f"| ratio (stack / no-op through HAProxy) | {stack['rps'] / yardstick['rps']:.2f}x | |", "",
             "| function | CPU ms per request | our code | server (functions-framework, Flask, gunicorn) "
             "| Google client libraries | x the no-op's at the function's rate | x the no-op's flat out "
             "| x the no-op's flat out, our code added to it |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    base = yardstick["cpu_ms_per_request"]
    for name, value, split in cpu_rows(record):
        alone = (base + split["ours"]) / base if split and base else None
        same_rate = (noop["at_push_rate" if name == PUSH_FUNCTION else "at_stack_rate"]["cpu_ms_per_request"]
                     if name in FUNCTIONS else None)  # a function's yardstick: the no-op at its own rate
        lines.append(f"| {name} | {fmt(value)} | {fmt(split and split['ours'])} | {fmt(split and split['server'])} | "
                     f"{fmt(split and split['google'])} | {fmt(ratio(value, same_rate), 'x')} | "
                     f"{fmt(ratio(value, base), 'x')} | {fmt(alone, 'x')} |")
    per_visitor_request = stack["cpu_ms_per_visitor_request"]
    lines += ["", "| part of the local stack | CPU ms per visitor request |", "|---|---:|"]
    lines += [f"| {part} | {value:.2f} |" for part, value in sorted(per_visitor_request.items(), key=lambda kv: -kv[1])]
    lines += [f"| all parts (Locust apart) | {sum(per_visitor_request.values()):.2f} |"]
    return lines


def profile_lines(record: Mapping[str, Any]) -> list[str]:
    """Each profile's files with the most samples: where the CPU of each function goes."""
    profiles = {**(record["stack"].get("profile") or {}),
                **{label: record["noop"][key].get("profile") for key, label in NOOP_ROWS.items()}}
    lines = ["| profile | samples | files with the most samples (origin, share of the samples) |", "|---|---:|---|"]
    for name, profile in profiles.items():
        if not profile:
            continue
        top = "; ".join(f"{file} ({origin}, {share:.0%})" for origin, file, share in profile["top_files"])
        lines.append(f"| {name} | {profile['samples']:,} | {top} |")
    return lines


def summary_lines(record: Mapping[str, Any], name: str) -> list[str]:
    machine, store = record["machine"], record["stack"]["store"]
    converged = store["converged_after_s"]
    return [f"# Hot path ({name})", "",
            f"The study's visitor mix, {record['users']} users with no think time, {record['seconds']} s each, "
            f"against the whole local stack (every function 1 instance x {record['threads']} threads) and then a "
            f"no-op functions-framework function, through the stack's HAProxy configuration (flat out, and paced to "
            f"the rate each function served in the stack) and directly "
            f"({machine['processor']}, {machine['cores']} cores, Locust {record['locust']} on the same cores). "
            "CPU is split by origin in the proportions of py-spy's samples of each process (profile-*.txt).",
            "", *render(record), "", *profile_lines(record), "",
            f"store: accepted {store['accepted_per_s']:.0f}/s, stored {store['stored_per_s']:.0f}/s during the load; "
            f"backlog {store['backlog_at_end']} when it ended; counters converged "
            + (f"{converged:.1f} s after it" if converged is not None else "NOT within 300 s")]

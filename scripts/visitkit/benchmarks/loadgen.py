"""Sizing a Locust fleet: what one Locust worker process costs per request over plain HTTP and over TLS,
and how the latency it sees grows with its CPU, measured here; visitkit.model.fleet turns that into the
processes and VMs a planned rate of visits needs on Google Cloud.

`benchmark(...)` starts HAProxy answering as the no-op function (noopfront.py) and runs, from one master
and one worker (locust/node.py, as on a fleet's VMs), each running the open model's visitor (the
`Arrival` user, as iteration 5's fleet does):
  - SCENARIOS side by side, at one offered rate: plain HTTP and HTTPS on kept-alive connections, and
    HTTPS with a new connection for every request (HAProxy closes each one after its response; HAProxy's
    own counts of connections and requests show it). Each one's worker CPU per request, over plain
    HTTP's, is what TLS costs the worker: this machine's 2 cores are shared with HAProxy, so the ratio,
    not an absolute rate, is the figure.
  - the curve: HTTPS on kept-alive connections, the offered rate stepped from light to saturation (one
    run, an endurance shape in visits/s), the worker's CPU and the client's median and p95 latency at
    each step (Locust's own percentiles over its last 10 s, read once they cover the step alone).
It reads the worker's CPU every second (health.csv), Locust's exact per-second counts and its per-second
percentiles, and writes a results folder under benchmarks/ (visitkit.benchmarks.benchfolder):
benchmark.json (FORMAT), summary.md, and per run its health.csv, per_second.csv and latency.csv.
"""
import csv
import datetime
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from visitkit import suite
from visitkit.benchmarks import benchfolder, noopfront
from visitkit.errors import VisitkitError
from visitkit.model.fleet import (
    BENCHMARK_FORMAT,
    BENCHMARK_KIND,
    HOLD_ACHIEVED,
    HOLD_P95_MARGIN_MS,
    REQUESTS_PER_VISIT,
    cpu_ratio,
    holding_cpu_percent,
    holding_step,
    load_benchmark,
    per_process_rps,
)
from visitkit.net import free_port
from visitkit.paths import ROOT
from visitkit.results import folder as results

KIND, FORMAT = BENCHMARK_KIND, BENCHMARK_FORMAT  # the record visitkit.model.fleet reads
DEFAULT_SECONDS = 45  # each side-by-side scenario
STEP_SECONDS = 30  # each step of the curve
# A run's or step's first seconds are left out: users spawning, and Locust's percentiles, which cover its
# last 10 s (locust.stats.CURRENT_RESPONSE_TIME_PERCENTILE_WINDOW) and reach the master with a worker's
# report (every 3 s); so is its last second, which Locust may count in part.
SETTLE_S = 14
# Light enough that a new TLS connection per request stays under a core (600 handshakes a second)
SIDE_BY_SIDE_VISITS_PER_S = 200.0
# From a light load to past a core (~2,900 requests per core-second of plain HTTP in 2026-11: ~950 visits/s)
CURVE_VISITS_PER_S = (50.0, 200.0, 350.0, 500.0, 600.0, 700.0, 800.0, 900.0, 1050.0)
# The open model's users are capped (shape setting arrival_users_max): Little's law asks ~10 at 1,000 visits/s of
# a few ms each, and each new HTTPS user costs ~20 ms of CPU at once (geventhttpclient loads the CA bundle into
# every user's SSL context, insecure or not: USER_SETUP), so the shape's own sizing (thousands, at once, from
# a 1 s guess of the visit) would stall the worker past the master's heartbeat timeout.
USERS_MAX = 100
PLAIN, KEPT_ALIVE, NEW_CONNECTION = "http-kept-alive", "https-kept-alive", "https-new-connection"
SCENARIOS = ({"name": PLAIN, "scheme": "http", "connections": "kept-alive"},
             {"name": KEPT_ALIVE, "scheme": "https", "connections": "kept-alive"},
             {"name": NEW_CONNECTION, "scheme": "https", "connections": "per-request"})
CURVE = "curve"  # the curve's files: curve-health.csv, ...
LATENCY = "latency.csv"  # the Aggregated rows of Locust's stats history: time, users, p50_ms, p95_ms
TLS_SETUP = ("tls_user_setup_ms", "tls_user_setup_ms_suite")  # CPU ms per new HTTPS user: Locust's, the suite's
USER_CLASS = "Arrival (locust/locustfile.py: the open model's visitor, as iteration 5's fleet runs it)"


def benchmark(seconds: float = DEFAULT_SECONDS, out_root: str | Path = benchfolder.BENCHMARKS_DIR,
              now: Callable[[], datetime.datetime] = datetime.datetime.now,
              scenarios: Iterable[Mapping[str, Any]] = SCENARIOS, curve_rates: Sequence[float] = CURVE_VISITS_PER_S,
              step_seconds: float = STEP_SECONDS) -> tuple[Path, dict[str, Any]]:
    """Runs the scenarios side by side, then the curve, against one HAProxy; returns (results folder, record)."""
    started = now()  # the folder's name and the record's "when"
    with benchfolder.new_folder(KIND, out_root, started) as folder:
        measured = measure(folder, seconds, scenarios, curve_rates, step_seconds)
        record = make_record(measured, started, seconds, step_seconds)
        benchfolder.write(folder, record, summary_lines(record, folder.name))
    return folder, record


def make_record(measured: Mapping[str, Any], started: datetime.datetime, seconds: float,
                step_seconds: float) -> dict[str, Any]:
    """The record of a run's measurements (measure()'s), with what visitkit.model.fleet reads from it."""
    record: dict[str, Any] = {
        "format": FORMAT, "benchmark": KIND, "when": started.isoformat(timespec="seconds"),
        "machine": benchfolder.machine(), "locust": locust_version(), "haproxy": measured["haproxy"],
        "tls": measured["tls"], **{key: measured[key] for key in TLS_SETUP if key in measured},
        "user_class": USER_CLASS,
        "users_max": USERS_MAX,
        "target": "HAProxy answering as the no-op function, on the same machine (benchmarks/loadgen.py, noopfront.py)",
        "seconds": seconds, "step_seconds": step_seconds, "settle_seconds": SETTLE_S,
        "scenarios": measured["scenarios"], "curve": {"scenario": KEPT_ALIVE, "steps": measured["steps"]},
        "plain_scenario": PLAIN, "planning_scenario": KEPT_ALIVE, "new_connection_scenario": NEW_CONNECTION}
    # What the model reads, kept beside the figures for the docs (a test holds them to the model's functions)
    record["cpu_ratios"] = {item["name"]: round(cpu_ratio(record, item["name"]), 3) for item in record["scenarios"]}
    record["holding"] = {"p95_margin_ms": HOLD_P95_MARGIN_MS, "achieved": HOLD_ACHIEVED,
                         "worker_cpu_percent": holding_cpu_percent(record)}
    record["per_process_rps"] = round(per_process_rps(record), 1)
    return record


def measure(folder: Path, seconds: float, scenarios: Iterable[Mapping[str, Any]], curve_rates: Sequence[float],
            step_seconds: float) -> dict[str, Any]:
    """Each scenario's figures and the curve's steps, their files kept in `folder`."""
    scenarios = list(scenarios)
    frontends = {item["name"]: (item["scheme"], item["connections"]) for item in scenarios}
    with noopfront.running(frontends) as front:
        measured = []
        for item in scenarios:
            name, stages = item["name"], [(SIDE_BY_SIDE_VISITS_PER_S, seconds)]
            before = front.counts()[name]
            run_and_keep(folder, name, front.urls[name], stages)
            connections, requests = (after - then for after, then in zip(front.counts()[name], before))
            found = stage_figures(folder, name, stages)[0]
            measured.append({**item, **found, "connections_per_request": round(connections / max(1, requests), 3)})
        stages = [(rate, step_seconds) for rate in curve_rates]
        run_and_keep(folder, CURVE, front.urls[KEPT_ALIVE], stages)
        steps = stage_figures(folder, CURVE, stages)
        return {"scenarios": measured, "steps": steps, "haproxy": front.version, "tls": front.tls,
                **tls_user_setup()}


def run_and_keep(folder: Path, name: str, url: str, stages: Sequence[tuple[float, float]]) -> None:
    """One Locust run of `stages` (visits/s, seconds), its files kept in `folder` as NAME-FILE."""
    with tempfile.TemporaryDirectory(prefix="bench-loadgen-") as run_dir:
        run_one_worker(url, stages, Path(run_dir))
        for kept in (results.HEALTH, results.PER_SECOND):
            (folder / f"{name}-{kept}").write_bytes((Path(run_dir) / kept).read_bytes())
        write_latency(Path(run_dir) / results.HISTORY, folder / f"{name}-{LATENCY}")


def run_one_worker(url: str, stages: Sequence[tuple[float, float]], run_dir: Path) -> None:
    """A master and one worker process (locust/node.py), as on a fleet's VM, offering `stages` of
    visits/s (the open model: locust/shapes.py's endurance shape)."""
    conf = run_dir / results.RUN_CONF
    spec = ",".join(f"{rate:g}/s:{hold:g}" for rate, hold in stages)
    conf.write_text(f"headless = true\nhost = {url}\nshape = endurance\nstages = {spec}\n"
                    f"shape-set = arrival_users_max={USERS_MAX}\nstop-timeout = 5\nonly-summary = true\n"
                    "exit-code-on-error = 0\n")
    bind = free_port()
    node = [sys.executable, str(suite.LOCUSTFILE.with_name("node.py"))]
    master = subprocess.Popen([*node, "master", "--config", str(conf), "--out", str(run_dir), "--bind-port", str(bind),
                               "--expect-workers", "1", "--wait-workers", "60"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=ROOT)
    worker = subprocess.Popen([*node, "worker", "--config", str(conf), "--master-host", "127.0.0.1", "--master-port",
                               str(bind)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        master.wait(sum(hold for _, hold in stages) + 120)
        worker.wait(30)
    finally:
        for process in (master, worker):
            if process.poll() is None:
                process.kill()
                process.wait()


def write_latency(history: Path, out: Path) -> None:
    """The run-wide (Aggregated) rows of Locust's stats history, each second's median and p95 over the
    last 10 s: the only columns read, where the whole history has a row per request name too."""
    with open(history, newline="") as f:
        rows = [row for row in csv.DictReader(f) if row["Name"] == "Aggregated" and row["95%"] not in ("", "N/A")]
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(("time", "users", "p50_ms", "p95_ms"))
        writer.writerows((row["Timestamp"], row["User Count"], row["50%"], row["95%"]) for row in rows)


def load_start(health: Iterable[Mapping[str, str]]) -> int:
    """The second the load started: that of the first health sample with users (each sample is stamped at the
    end of its second). Not the first second with requests: new HTTPS users start seconds late (USERS_MAX)."""
    return int(min(float(row["time"]) for row in health if int(row["users"] or 0) > 0) - 1)


def stage_windows(start: float, stages: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Each stage's steady seconds [first, last], the run's first second counted at `start`."""
    windows, at = [], start
    for _rate, hold in stages:
        windows.append((at + SETTLE_S, at + hold - 2))
        at += hold
    return windows


def stage_figures(folder: Path, name: str, stages: Sequence[tuple[float, float]]) -> list[dict[str, Any]]:
    """Each stage's figures from a run's files, over its steady seconds (stage_windows)."""
    with open(folder / f"{name}-{results.PER_SECOND}", newline="") as f:
        per_second = {int(row["time"]): (int(row["requests"]), int(row["failures"])) for row in csv.DictReader(f)}
    with open(folder / f"{name}-{results.HEALTH}", newline="") as f:
        health = [row for row in csv.DictReader(f) if row["process"] != "master"]
    with open(folder / f"{name}-{LATENCY}", newline="") as f:
        latency = [{key: float(value) for key, value in row.items()} for row in csv.DictReader(f)]
    if not per_second or not health or not latency:
        raise VisitkitError(f"{folder}: the {name} run's Locust wrote no per-second counts, health or latencies")
    found = []
    for (rate, _hold), (first, last) in zip(stages, stage_windows(load_start(health), stages)):
        seconds = range(int(first), int(last) + 1)
        # a health sample is stamped at the end of its second
        cpu = [float(row["cpu_percent"]) for row in health if first < float(row["time"]) <= last + 1]
        lag = [float(row["loop_lag_ms"]) for row in health if first < float(row["time"]) <= last + 1]
        late = [row for row in latency if first <= row["time"] <= last]
        if not cpu or not late or not seconds:
            raise VisitkitError(f"{folder}: the {name} run had no steady part at {rate:g} visits/s (too short?)")
        rps = sum(per_second.get(second, (0, 0))[0] for second in seconds) / len(seconds)
        cpu_percent = statistics.fmean(cpu)
        found.append({"offered_visits_per_s": rate, "steady_s": len(seconds), "rps": round(rps, 1),
                      "failures": sum(per_second.get(second, (0, 0))[1] for second in seconds),
                      "worker_cpu_percent": round(cpu_percent, 1),
                      "requests_per_core_second": round(rps / (cpu_percent / 100), 1),
                      "p50_ms": statistics.median(row["p50_ms"] for row in late),
                      "p95_ms": statistics.median(row["p95_ms"] for row in late),
                      "loop_lag_ms": round(statistics.median(lag), 1)})
    return found


def tls_user_setup_ms(factory: Any = None, repeats: int = 20) -> float:
    """CPU ms one new HTTPS user of Locust's FastHttpUser costs before its first connection: the SSL context
    geventhttpclient makes for the user's connection pool with `factory` (default: Locust's insecure one, handed
    the CA bundle; the suite's users hand it locust/tls.py's shared context)."""
    import time

    from geventhttpclient.connectionpool import SSLConnectionPool, init_ssl_context
    from locust.contrib.fasthttp import insecure_ssl_context_factory

    started = time.process_time()
    for _ in range(repeats):
        init_ssl_context(factory or insecure_ssl_context_factory, SSLConnectionPool.default_options["ca_certs"], False)
    return round(1000 * (time.process_time() - started) / repeats, 1)


def tls_user_setup() -> dict[str, float]:
    """{"tls_user_setup_ms": Locust's default, "tls_user_setup_ms_suite": the suite's users'}."""
    return {"tls_user_setup_ms": tls_user_setup_ms(),
            "tls_user_setup_ms_suite": tls_user_setup_ms(suite.locust_module("tls").shared_context)}


def tls_setup_lines(record: Mapping[str, Any]) -> list[str]:
    locust_ms, suite_ms = record.get("tls_user_setup_ms"), record.get("tls_user_setup_ms_suite")
    if locust_ms is None:
        return []
    line = (f"With Locust's own TLS setup each new HTTPS user costs the worker {locust_ms:g} ms of CPU once, before "
            "its first connection: geventhttpclient loads the CA bundle into every user's SSL context, even an "
            "insecure one, and a process adding hundreds of users at once stalls for seconds.")
    if suite_ms is not None:
        line += (f" The suite's users share one context per process (locust/tls.py): {suite_ms:g} ms per new user.")
    return [line]


def locust_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("locust")


def load(folder: str | Path) -> dict[str, Any]:
    return benchfolder.load(folder, KIND, FORMAT)


def render(record: Mapping[str, Any]) -> list[str]:
    """The Markdown tables of a record: the scenarios side by side, each one's CPU per request as a multiple
    of plain HTTP's; then the curve, each step marked by whether latency held there (model.fleet's rule)."""
    lines = ["| scenario | offered visits/s | requests/s | worker CPU (% of a core) | requests per core-second "
             "| CPU per request vs plain HTTP | connections per request | p50 / p95 latency (ms) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {s['name']} | {s['offered_visits_per_s']:,g} | {s['rps']:,.0f} | {s['worker_cpu_percent']:.0f} "
              f"| {s['requests_per_core_second']:,.0f} | {cpu_ratio(record, s['name']):.2f}x "
              f"| {s['connections_per_request']:.2f} | {s['p50_ms']:g} / {s['p95_ms']:g} |"
              for s in record["scenarios"]]
    held = holding_step(record)["offered_visits_per_s"]
    lines += ["", f"| {record['curve']['scenario']}: offered visits/s | requests/s | worker CPU (% of a core) "
              "| p50 latency (ms) | p95 latency (ms) | event-loop lag (ms) | latency holds |",
              "|---:|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {s['offered_visits_per_s']:,g} | {s['rps']:,.0f} | {s['worker_cpu_percent']:.0f} | {s['p50_ms']:g} "
              f"| {s['p95_ms']:g} | {s['loop_lag_ms']:g} | {'yes' if s['offered_visits_per_s'] <= held else 'no'} |"
              for s in record["curve"]["steps"]]
    return lines


def summary_lines(record: Mapping[str, Any], name: str) -> list[str]:
    plain, planned = record["plain_scenario"], record["planning_scenario"]
    plain_rate = next(s for s in record["scenarios"] if s["name"] == plain)["requests_per_core_second"]
    share = holding_cpu_percent(record)
    return [
        f"# Load generator sizing ({name})", "",
        f"One Locust worker process (locust/node.py, as on a fleet's VMs) running {record['user_class']}, at most "
        f"{record['users_max']} users, against "
        f"{record['target']}: HAProxy {record['haproxy']}, {record['tls']} with a self-signed ECDSA P-256 certificate "
        f"made for the run ({record['machine']['processor']}, {record['machine']['cores']} cores; Locust "
        f"{record['locust']}). Side by side, each scenario offered its visits for {record['seconds']:g} s; then the "
        f"curve stepped the offered rate every {record['step_seconds']:g} s. Each is read from its steady seconds "
        f"(the first {record['settle_seconds']} left out: spawning, and Locust's percentiles covering its last "
        "10 s); a new connection per request is HAProxy closing each one after its response, counted by "
        "HAProxy itself.", "", *render(record), "",
        f"Latency holds at a step while its p95 is within {record['holding']['p95_margin_ms']:g} ms of the lightest "
        f"step's and it carried at least {record['holding']['achieved']:.0%} of the "
        f"{REQUESTS_PER_VISIT} requests per visit offered (visitkit.model.fleet, holding_step). A fleet is planned "
        f"at {record['per_process_rps']:,.0f} requests/s per worker process: {plain_rate:,.0f} per core-second over "
        f"plain HTTP, over {cpu_ratio(record, planned):.2f} (TLS on kept-alive connections), at {share:.0f}% of a "
        "core (`scripts/predict ITERATION --fleet VISITS_PER_S`).", "", *holding_notes(record), "",
        *tls_setup_lines(record), "",
        "This machine's 2 cores are shared by the worker, its master and HAProxy, so the rates are not a cloud VM's; "
        "the ratio of CPU per request is measured side by side for that reason. Only a run on Google Cloud settles "
        "the rest: a vCPU of an e2-standard-4 is one hyperthread (one Locust process per vCPU, two per physical "
        "core), and TLS goes to Google's front end rather than to HAProxy on loopback. The first fleet run's "
        "health.csv (its report's Load generator section) shows each worker process's CPU against the planned "
        "share at the planned rate."]


def holding_notes(record: Mapping[str, Any]) -> list[str]:
    """What the planned rate leaves out: a curve that never broke, and the curve's own rate at the share."""
    held, steps = holding_step(record), record["curve"]["steps"]
    notes = []
    if held["offered_visits_per_s"] == max(step["offered_visits_per_s"] for step in steps):
        notes.append("Latency held at every step: the share is the highest measured, and the worker's limit lies "
                     "beyond it.")
    notes.append(f"At that share the curve's own step carried {held['rps']:,.0f} requests/s, "
                 f"{held['rps'] / record['per_process_rps']:.2f}x the planned rate: the side-by-side rate's CPU "
                 "includes what the worker spends each second whatever its load, so the planned rate errs low.")
    return [" ".join(notes)]


def latest(out_root: str | Path = benchfolder.BENCHMARKS_DIR) -> tuple[Path, dict[str, Any]]:
    """The newest sizing benchmark: (folder, record)."""
    return load_benchmark(None, out_root)


def chosen(folder: str | Path | None = None, out_root: str | Path = benchfolder.BENCHMARKS_DIR
           ) -> tuple[Path, dict[str, Any]]:
    """A sizing benchmark, (folder, record): `folder` (a path, or a folder's name in out_root), by
    default the newest; naming one keeps what predict prints from following a newer local run."""
    return load_benchmark(folder, out_root)

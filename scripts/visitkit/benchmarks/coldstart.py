"""What a cold start costs: with the local stack's emulators up and warm, ONE extra instance of each
function (and of the no-op functions-framework function the hot-path benchmark uses) is started as
the platform starts it, several times, and timed from its process start to its first 2xx answer to
a real request of that function. Each time is split into (a) the interpreter and imports: an
import-only process that loads functions/main.py and looks the entry point up as functions-framework
does (create_app), timed from its start to that, and (b) the rest: the server's start, client
creation and the first backend call. Also the instance's memory (see memory_mb) right after its
first answer and after N requests sent over as many connections as it has threads, and the
smallest Cloud Run memory tier that leaves a third of itself free above the most any start used.
Reports medians per function and the slowest function's time to its first 2xx as a multiple of the
no-op's. Two settings change what a function loads, and are measured as functions of their own
(VARIANTS): store-inc-counter as the pull store's puller, serve-page embedding the page's count.

`benchmark(...)` writes a results folder under benchmarks/ (visitkit.benchmarks.benchfolder): benchmark.json
(FORMAT), summary.md, and starts.csv (every start's figures, the medians' source).
"""
import concurrent.futures
import contextlib
import csv
import datetime
import functools
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil

from visitkit.benchmarks import benchfolder, hotpath, profiling
from visitkit.catalogue import CATALOGUE, FUNCTIONS, PAGE_FUNCTION, PUBLISHER_FUNCTION, PUSH_FUNCTION, READER_FUNCTION
from visitkit.errors import VisitkitError
from visitkit.net import free_port
from visitkit.paths import ROOT
from visitkit.twin import push
from visitkit.twin.stack import FUNCTIONS_SOURCE, PROJECT, SUBSCRIPTION, LocalStack, function_command

FORMAT = 3  # 2: each target's import time by origin; 3: get-counter's memory with its reads in flight
KIND = "cold-start"
NOOP = "no-op"
DEFAULT_REPETITIONS, DEFAULT_REQUESTS = 5, 1000
DEFAULT_THREADS = 80  # iteration 4's concurrency: the most requests an instance of the iterations holds at once
# Cloud Run's memory tiers in MiB, and the share of a tier a function should leave free: its peak
# grows with requests in flight and with the files it writes (the file system is in memory).
MEMORY_TIERS_MIB = (128, 256, 512, 1024, 2048, 4096, 8192)
HEADROOM = 1 / 3
WARM_UP_REQUESTS = 5  # 2xx per function through the stack, so the emulators have served each kind of call
WARM_UP_TIMEOUT = 60  # a first read slower than get-counter's deadline answers 503 for a while: wait it out
FIRST_ANSWER_TIMEOUT = 60
# What functions-framework does before it serves: import the source and look the entry point up;
# then the moment it was done (the clock is the machine's, the parent's too), and out without teardown.
IMPORT_ONLY = ("import os, sys, time, functions_framework; functions_framework.create_app(sys.argv[1], sys.argv[2]); "
               "print(time.monotonic(), flush=True); os._exit(0)")
CALLS = {PAGE_FUNCTION: ("GET", "?view=home"), READER_FUNCTION: ("GET", "?visit_type=home"),
         PUBLISHER_FUNCTION: ("POST", "?visit_type=home")}  # the public functions' requests
# {variant: (the function, what its instance's environment adds)}, each measured beside its function. The
# puller (STORE_MODE=pull, functions/store_batch.py) is timed to its first answer to GET / (Cloud Run's
# startup probe), pulling from a subscription that does not exist: the stack's store path keeps every
# visit (the lease, which nothing else asks for in a push-mode stack, it may take).
PULL_STORE, PAGE_WITH_COUNT = f"{PUSH_FUNCTION} (pull)", f"{PAGE_FUNCTION} (count embedded)"
VARIANTS = {PULL_STORE: (PUSH_FUNCTION, {"STORE_MODE": "pull", "PULL_SUBSCRIPTION": "cold-start-pulls-nothing"}),
            PAGE_WITH_COUNT: (PAGE_FUNCTION, {"PAGE_EMBEDS_COUNT": "1"})}
FIELDS = ("target", "repetition", "first_2xx_ms", "imports_ms", "memory_mb_first", "memory_mb_after", "failures")


def noop_command(port: int) -> list[str]:
    return [sys.executable, "-m", "functions_framework", "--target", "noop", "--source", str(hotpath.NOOP_SOURCE),
            "--host", "127.0.0.1", "--port", str(port)]


def request(target: str) -> tuple[str, str, bytes | None, dict[str, str]]:
    """(method, path, body, headers) of one real request of a function, as its callers send it;
    store-inc-counter's is a push envelope of a new message each time, as the push relay sends it."""
    if target == PUSH_FUNCTION:
        message = SimpleNamespace(data=json.dumps({"visit_type": "home"}).encode(), attributes={},
                                  message_id=str(uuid.uuid4()),
                                  publish_time=datetime.datetime.now(datetime.UTC))
        body = json.dumps(push.envelope(f"projects/{PROJECT}/subscriptions/{SUBSCRIPTION}", message)).encode()
        return "POST", CATALOGUE[target].path, body, {"Content-Type": "application/json"}
    if target in (NOOP, PULL_STORE):
        return "GET", "/", None, {}
    function = VARIANTS[target][0] if target in VARIANTS else target
    method, query = CALLS[function]
    return method, CATALOGUE[function].path + query, b"" if method == "POST" else None, {}


def entry_point(target: str) -> str:
    if target == NOOP:
        return "noop"
    return CATALOGUE[VARIANTS[target][0] if target in VARIANTS else target].entry_point


def send(connection: http.client.HTTPConnection, target: str) -> int | None:
    """The status of one request of `target` over `connection`, or None when nothing answered."""
    method, path, body, headers = request(target)
    try:
        connection.request(method, path, body=body, headers=headers)
        answer = connection.getresponse()
        answer.read()
        return answer.status
    except (OSError, http.client.HTTPException):
        connection.close()
        return None


def ok(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


def warm_up(host: str, function: str, timeout: float = WARM_UP_TIMEOUT) -> None:
    """Sends `function` requests through the stack until WARM_UP_REQUESTS of them answered a 2xx."""
    connection, answered, deadline = http.client.HTTPConnection(host, timeout=10), 0, time.monotonic() + timeout
    try:
        while answered < WARM_UP_REQUESTS:
            if time.monotonic() > deadline:
                raise VisitkitError(f"{function}: the warm stack did not answer it with a 2xx "
                                    f"{WARM_UP_REQUESTS} times in {timeout} s")
            if ok(send(connection, function)):
                answered += 1
            else:
                time.sleep(0.5)
    finally:
        connection.close()


def environment_of(pid: int) -> dict[str, str]:
    """A process's environment as it was started: the stack's instances get theirs from the stack."""
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)


def memory_mb(pid: int) -> float:
    """Memory of an instance, its process and its children (gunicorn's master and worker), in MiB,
    as its container alone would hold it: the largest process's resident set, and what each other
    process holds that no other does (its unique set; the rest it shares with the first, forked
    from the same master). Library pages this machine's other processes share count in full."""
    root = psutil.Process(pid)
    figures = sorted((p.memory_full_info() for p in (root, *root.children(recursive=True))), key=lambda m: -m.rss)
    return (figures[0].rss + sum(m.uss for m in figures[1:])) / 2 ** 20


def smallest_tier(memory_mib: float) -> int:
    """The smallest memory tier (MiB) that leaves HEADROOM of itself free above `memory_mib`."""
    return next(tier for tier in MEMORY_TIERS_MIB if memory_mib <= tier * (1 - HEADROOM))


def send_at_once(connections: Sequence[http.client.HTTPConnection], target: str, requests: int) -> int:
    """`requests` requests of `target` over the given kept-alive connections at once; how many were not 2xx."""
    share = [requests // len(connections) + (i < requests % len(connections)) for i in range(len(connections))]
    with concurrent.futures.ThreadPoolExecutor(len(connections)) as pool:
        return sum(pool.map(lambda args: sum(not ok(send(args[0], target)) for _ in range(args[1])),
                            zip(connections, share)))


def import_seconds(target: str, source: str | Path, env: Mapping[str, str]) -> float:
    """Seconds from an import-only process's start to its entry point looked up (interpreter and imports)."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", IMPORT_ONLY, target, str(source)], env=env, cwd=ROOT, check=True,
                          capture_output=True, text=True, timeout=FIRST_ANSWER_TIMEOUT).stdout.split()[-1]
    return float(done) - started


STDLIB = "the interpreter (standard library modules no package asked for)"
IMPORT_ORIGINS = (profiling.OURS, profiling.FRAMEWORK, profiling.GOOGLE, STDLIB)


def module_origin(module: str, own_modules: Container[str]) -> str | None:
    """A module's origin, or None for the standard library (whoever imported it decides)."""
    top = module.strip().split(".")[0]
    if top in own_modules:
        return profiling.OURS
    if top in profiling.FRAMEWORK_PACKAGES:
        return profiling.FRAMEWORK
    if top in sys.stdlib_module_names or top.startswith("_"):
        return None
    return profiling.GOOGLE  # the functions import nothing else: a client library or one of their dependencies


def parse_importtime(stderr: str, own_modules: Container[str]) -> dict[str, float]:
    """{origin: ms} of the imports' own time (each module's self time) in `python -X importtime`'s
    report; a standard-library module counts for the package that first imported it. The report
    lists a module after the modules it imported, indented two spaces deeper, so read backwards
    each module comes before its imports."""
    totals = dict.fromkeys(IMPORT_ORIGINS, 0.0)
    importer: dict[int, str] = {}  # depth -> origin of the module last seen at that depth (reading backwards)
    for line in reversed(stderr.splitlines()):
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line.removeprefix("import time:").split("|", 2)
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
        origin = module_origin(name, own_modules) or importer.get(depth - 1) or STDLIB
        importer[depth] = origin
        totals[origin] += int(self_us) / 1000
    return {origin: round(ms, 1) for origin, ms in totals.items()}


def import_origins(target: str, source: str | Path, env: Mapping[str, str]) -> dict[str, float]:
    """One import-only process under -X importtime: its imports' time by origin."""
    own = {path.stem for path in Path(source).parent.glob("*.py")}
    report = subprocess.run([sys.executable, "-X", "importtime", "-c", IMPORT_ONLY, target, str(source)], env=env,
                            cwd=ROOT, check=True, capture_output=True, text=True, timeout=FIRST_ANSWER_TIMEOUT).stderr
    return parse_importtime(report, own)


@contextlib.contextmanager
def started(target: str, command: Callable[[int], list[str]], env: Mapping[str, str]
            ) -> Iterator[tuple[subprocess.Popen[bytes], http.client.HTTPConnection, float]]:
    """An instance started as the platform starts one, once it answered a real request with a 2xx:
    (its process, a connection to it, seconds from its start to that answer); killed at the end."""
    port = free_port()
    begun = time.monotonic()
    server = subprocess.Popen(command(port), env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while not ok(send(connection, target)):
            if server.poll() is not None:
                raise VisitkitError(f"{target}: its instance exited ({server.returncode}) before a 2xx answer")
            if time.monotonic() - begun > FIRST_ANSWER_TIMEOUT:
                raise VisitkitError(f"{target}: no 2xx answer within {FIRST_ANSWER_TIMEOUT} s of its start")
            time.sleep(0.005)
        yield server, connection, time.monotonic() - begun
    finally:
        os.killpg(server.pid, 9)
        server.wait()


def busy(target: str, connection: http.client.HTTPConnection, port: int, requests: int, threads: int) -> int:
    """`requests` requests over `threads` connections at once (every thread of the instance busy);
    how many were not 2xx."""
    connections = [connection, *(http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                                 for _ in range(threads - 1))]
    try:
        return send_at_once(connections, target, requests)
    finally:
        for each in connections:
            each.close()


def one_start(target: str, command: Callable[[int], list[str]], env: Mapping[str, str], requests: int,
              threads: int) -> tuple[float, float, float, int]:
    """One cold start of an instance: seconds to its first 2xx, its memory then and after `requests`
    more requests over as many connections as it has threads, and how many of those were not 2xx."""
    with started(target, command, env) as (server, connection, first):
        memory_first = memory_mb(server.pid)
        failures = busy(target, connection, connection.port, requests, threads)
        return first, memory_first, memory_mb(server.pid), failures


def reads_in_flight(command: Callable[[int], list[str]], env: Mapping[str, str], requests: int, threads: int,
                    every_s: float = 0.01) -> tuple[float, int]:
    """get-counter's most memory while each of its `threads` requests waits on a Firestore read of
    its own (no cache: CACHE_TTL_SECONDS=0), so that as many gRPC streams are open at once, sampled
    every `every_s` while `requests` requests go; and how many were not 2xx."""
    with started(READER_FUNCTION, command, {**env, "CACHE_TTL_SECONDS": "0"}) as (server, connection, _):
        peak, done = [memory_mb(server.pid)], threading.Event()

        def sample() -> None:
            while not done.wait(every_s):
                peak.append(max(peak[-1], memory_mb(server.pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            failures = busy(READER_FUNCTION, connection, connection.port, requests, threads)
        finally:
            done.set()
            sampler.join()
        return max(peak[-1], memory_mb(server.pid)), failures


def settle(stack: LocalStack, timeout: float = 300) -> None:
    """Waits until the stack has stored every visit an instance sent it (inc-counter's publishes are
    drained by the stack's own store path, which would otherwise take the cores from the next start):
    the push relay idle and the stored total the same one second later."""
    client, before = stack.firestore(), None
    while True:
        stored = sum(stack.totals(client).values())
        state = stack.state()
        assert state is not None, "the stack is up"
        relay = push.read_stats(state["push_stats_port"])
        if stored == before and relay and relay.get("in_flight") == 0:
            return
        if timeout <= 0:
            raise VisitkitError("the stack's store path did not settle after a start")
        before, timeout = stored, timeout - 1
        time.sleep(1)


def median_split(starts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Medians of a target's starts, in ms and MB; the rest is the median time to the first 2xx less
    the median of the imports, so that the two parts add up to the whole."""
    first = statistics.median(s["first_2xx_ms"] for s in starts)
    imports = statistics.median(s["imports_ms"] for s in starts)
    return {"first_2xx_ms": round(first, 1), "imports_ms": round(imports, 1), "rest_ms": round(first - imports, 1),
            "memory_mb_first": round(statistics.median(s["memory_mb_first"] for s in starts), 1),
            "memory_mb_after": round(max(s["memory_mb_after"] for s in starts), 1),  # the peak sizes the tier
            "failures": sum(s["failures"] for s in starts)}


def measure(functions: Sequence[str] = FUNCTIONS, repetitions: int = DEFAULT_REPETITIONS,
            requests: int = DEFAULT_REQUESTS, threads: int = DEFAULT_THREADS
            ) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]], dict[str, Any] | None]:
    """Every start of each function's extra instance and of the no-op's: [{FIELDS}]."""
    stack = LocalStack(tempfile.mkdtemp(prefix="bench-cold-start-"))
    stack.up(hotpath.bench_settings(), port=0)
    try:
        host, starts, state = stack.base_url.removeprefix("http://"), [], stack.state()
        assert state is not None, "the stack is up"
        # {target: (its command for a port, its environment, its source)}
        targets: dict[str, tuple[Callable[[int], list[str]], dict[str, str], Path]] = {
            NOOP: (noop_command, {**os.environ, "THREADS": str(threads)}, hotpath.NOOP_SOURCE)}
        for function in functions:
            warm_up(state["push_url"].removeprefix("http://") if function == PUSH_FUNCTION else host, function)
            env = {**environment_of(stack.instance_pid(f"{function}-0")), "THREADS": str(threads)}
            targets[function] = (functools.partial(function_command, function), env, FUNCTIONS_SOURCE)
        for variant, (function, setting) in VARIANTS.items():
            if function in functions:
                command, env, source = targets[function]
                targets[variant] = (command, {**env, **setting}, source)
        settle(stack)
        # Round after round of one start of each target, so that a busy spell of the machine falls on all of
        # them alike rather than on the target measured then.
        for repetition in range(1, repetitions + 1):
            for target, (command, env, source) in targets.items():
                first, memory_first, memory_after, failures = one_start(target, command, env, requests, threads)
                settle(stack)
                imports = import_seconds(entry_point(target), source, env)
                starts.append({"target": target, "repetition": repetition, "first_2xx_ms": round(first * 1000, 1),
                               "imports_ms": round(imports * 1000, 1), "memory_mb_first": round(memory_first, 1),
                               "memory_mb_after": round(memory_after, 1), "failures": failures})
        origins = {target: import_origins(entry_point(target), source, env)
                   for target, (_, env, source) in targets.items()}
        in_flight = None
        if READER_FUNCTION in functions:
            command, env, _ = targets[READER_FUNCTION]
            memory, failures = reads_in_flight(command, env, requests, threads)
            settle(stack)
            in_flight = {"function": READER_FUNCTION, "memory_mb_most": round(memory, 1), "failures": failures}
        return starts, origins, in_flight
    finally:
        stack.down()


def benchmark(functions: Sequence[str] = FUNCTIONS, repetitions: int = DEFAULT_REPETITIONS,
              requests: int = DEFAULT_REQUESTS, threads: int = DEFAULT_THREADS,
              out_root: str | Path = benchfolder.BENCHMARKS_DIR,
              now: Callable[[], datetime.datetime] = datetime.datetime.now) -> tuple[Path, dict[str, Any]]:
    """Cold starts of each function and of the no-op function, each instance with `threads` threads;
    returns (results folder, record)."""
    started = now()  # the folder's name and the record's "when"
    with benchfolder.new_folder(KIND, out_root, started) as folder:
        starts, origins, in_flight = measure(functions, repetitions, requests, threads)
        with open(folder / "starts.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, FIELDS)
            writer.writeheader()
            writer.writerows(starts)
        targets = {target: {**median_split([s for s in starts if s["target"] == target]),
                            "imports_by_origin_ms": origins[target]}
                   for target in dict.fromkeys(s["target"] for s in starts)}
        record = {"format": FORMAT, "benchmark": KIND, "when": started.isoformat(timespec="seconds"),
                  "machine": benchfolder.machine(), "repetitions": repetitions, "requests": requests,
                  "threads": threads, "noop": targets.pop(NOOP), "functions": targets, "reads_in_flight": in_flight}
        benchfolder.write(folder, record, summary_lines(record, folder.name))
    return folder, record


def load(folder: str | Path) -> dict[str, Any]:
    return benchfolder.load(folder, KIND, FORMAT)


def slowest_over_noop(record: Mapping[str, Any]) -> float:
    """The slowest function's median time to its first 2xx over the no-op function's."""
    return max(f["first_2xx_ms"] for f in record["functions"].values()) / record["noop"]["first_2xx_ms"]


def render(record: Mapping[str, Any]) -> list[str]:
    """The Markdown table of a record: one row per function and the no-op's, medians."""
    noop = record["noop"]["first_2xx_ms"]
    lines = [f"| function | ms to first 2xx | interpreter + imports ms | the rest ms | memory MiB at first answer "
             f"| memory MiB after {record['requests']:,} requests (most) | smallest tier with a third free "
             "| x the no-op's time |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    rows = [*record["functions"].items(), ("no-op functions-framework function", record["noop"])]
    lines += [f"| {name} | {f['first_2xx_ms']:.0f} | {f['imports_ms']:.0f} | {f['rest_ms']:.0f} "
              f"| {f['memory_mb_first']:.1f} | {f['memory_mb_after']:.1f} | {smallest_tier(f['memory_mb_after'])} MiB "
              f"| {f['first_2xx_ms'] / noop:.2f}x |"
              for name, f in rows]
    lines += ["", "| imports' own time, ms (-X importtime) | " + " | ".join(IMPORT_ORIGINS) + " |",
              "|---|" + "---:|" * len(IMPORT_ORIGINS)]
    lines += [f"| {name} | " + " | ".join(f"{f['imports_by_origin_ms'][o]:.0f}" for o in IMPORT_ORIGINS) + " |"
              for name, f in rows]
    return lines


def reads_in_flight_lines(record: Mapping[str, Any]) -> list[str]:
    """The memory get-counter needs with every request's read in flight (format 3 and later)."""
    found = record.get("reads_in_flight")
    if not found:
        return []
    return [f"{found['function']} with every request's Firestore read in flight (no cache, {record['requests']:,} "
            f"requests over {record['threads']} connections at once, so up to {record['threads']} gRPC streams open): "
            f"at most {found['memory_mb_most']:.1f} MiB, smallest tier with a third free "
            f"{smallest_tier(found['memory_mb_most'])} MiB; {found['failures']} of them were not 2xx."]


def variant_lines(record: Mapping[str, Any]) -> list[str]:
    """What each variant measured (format 3 records before them have none)."""
    found = [name for name in VARIANTS if name in record["functions"]]
    described = {PULL_STORE: f"{PULL_STORE}: STORE_MODE=pull, the puller, timed to its first answer to GET / "
                             "(Cloud Run's startup probe)",
                 PAGE_WITH_COUNT: f"{PAGE_WITH_COUNT}: PAGE_EMBEDS_COUNT=1, the page with its count read from "
                                  "Firestore"}
    return ["; ".join(described[name] for name in found) + ".", ""] if found else []


def summary_lines(record: Mapping[str, Any], name: str) -> list[str]:
    machine = record["machine"]
    failures = sum(f["failures"] for f in (*record["functions"].values(), record["noop"]))
    return [f"# Cold start ({name})", "",
            f"One extra instance of each function started as the local stack starts one (its command and "
            f"environment, {record['threads']} threads), with the stack's emulators up and warm, "
            f"{record['repetitions']} starts each, timed from its process start to its first 2xx answer to a real "
            f"request; medians ({machine['processor']}, {machine['cores']} cores, Python {machine['python']}).", "",
            *render(record), "",
            *variant_lines(record),
            "interpreter + imports: an import-only process loading functions/main.py and looking the entry point "
            "up (functions-framework's create_app), from its start to that; the rest: the server's start, client "
            "creation and the first backend call. Memory: the largest of the instance's processes (gunicorn's master "
            f"and worker) resident, plus what the other holds alone, the {record['requests']:,} requests sent over "
            f"{record['threads']} connections at once; {failures} of them were not 2xx.", "",
            *reads_in_flight_lines(record), "",
            f"cold start, slowest function / no-op: {slowest_over_noop(record):.2f}x"]

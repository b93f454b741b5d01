"""The load of a run from this machine: Locust's processes (one command, or a master and its workers
started by locust/node.py), the warm-up before the test, and the target sampled every second while
they run."""
import csv
import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self

from visitkit import settle
from visitkit.catalogue import FUNCTIONS, PUBLIC_PATHS, function_of_path
from visitkit.errors import RunError
from visitkit.net import free_port
from visitkit.paths import ROOT, recorded_command
from visitkit.results import analysis, thresholds
from visitkit.results import folder as results
from visitkit.runs.config import LOCAL_WAIT_WORKERS_S, STOP_TIMEOUT_S, WARM_UP_DIR, RunConfig
from visitkit.runs.progress import Progress
from visitkit.runs.state import RunState, Sampler
from visitkit.runs.targets import LocalTarget, Target
from visitkit.runs.watch import LiveWatch
from visitkit.twin.chaos import Chaos

END_TEST_MARGIN_S = 30  # --abort-on-fail: beyond --stop-timeout, for Locust to write its files and quit


def latest_history(history_path: str | Path) -> list[dict[str, str]]:
    """Locust's latest second in its history CSV, read from its end: each endpoint's row (--csv-full-history),
    then the Aggregated one, which Locust writes last; [] before there is one."""
    try:
        with open(history_path, newline="") as f:
            header = next(csv.reader([f.readline()]), None)
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 16384))
            tail = f.read().splitlines()
    except OSError:
        return []
    if not header:
        return []
    rows = [dict(zip(header, row)) for row in csv.reader(tail[1:]) if len(row) == len(header)]
    ends = [i for i, row in enumerate(rows) if row.get("Name") == "Aggregated"]
    if not ends:
        return []
    return rows[ends[-2] + 1 if len(ends) > 1 else 0:ends[-1] + 1]


def last_aggregated(history_path: str | Path) -> dict[str, str] | None:
    """Locust's latest per-second Aggregated row (users, RPS, failures), or None before there is one."""
    rows = latest_history(history_path)
    return rows[-1] if rows else None


def live_figures(rows: Sequence[Mapping[str, str]], first: Mapping[str, Any] | None,
                 latest: Mapping[str, Any] | None) -> dict[str, Any]:
    """The headline figures known while the load runs, by their headline names (what --abort-on-fail judges:
    thresholds.failing_live): from Locust's latest second (latest_history) the requests, failure ratio and
    failures so far and each public function's worst page's p50 and p95 over Locust's last ~10 s; from the
    first and latest server samples the 429s each function answered since the load began."""
    aggregated = rows[-1] if rows else {}
    requests, failures = _float(aggregated.get("Total Request Count")), _float(aggregated.get("Total Failure Count"))
    figures: dict[str, Any] = {"requests": requests,
                               "failure_ratio": failures / requests if requests and failures is not None else None}
    for name in sorted(set(PUBLIC_PATHS.values())):
        pages = [row for row in rows[:-1] if function_of_path(row.get("Name", "")) == name]
        for key, column in (("p50_ms", "50%"), ("p95_ms", "95%")):
            figures[f"{key}.{name}"] = max((v for row in pages if (v := _float(row.get(column))) is not None),
                                           default=None)
        failures_of = [_float(row.get("Total Failure Count")) or 0 for row in pages]
        figures[f"failures.{name}"] = sum(failures_of) if pages else None
    for name in FUNCTIONS:
        start, now = (analysis.fn_field(name, "responses_429")(sample or {}) for sample in (first, latest))
        figures[f"responses_429.{name}"] = now - start if start is not None and now is not None else None
    return figures


def judge_live(state: RunState, locust: "LocustProcesses", elapsed: float, rows: Sequence[Mapping[str, str]]) -> bool:
    """--abort-on-fail, once a second: when a threshold fails on the live figures, records why in run.json
    and ends the test as Locust's own end would (LocustProcesses.end_test). True once the load is stopped."""
    sampler = state.sampler
    figures = live_figures(rows, sampler.first if sampler else None, sampler.latest if sampler else None)
    failing = thresholds.failing_live(state.config.thresholds, figures)
    if failing is None:
        return False
    threshold, detail = failing
    state.record["stopped_early"] = {"at_s": round(elapsed, 1), "time": time.time(), "threshold": str(threshold),
                                     "detail": detail}
    state.folder.save_run(state.record)
    state.log(f"  --abort-on-fail: `{threshold}` failed {elapsed:.0f} s after Locust started ({detail}): "
              "stopping the load")
    locust.end_test(STOP_TIMEOUT_S + END_TEST_MARGIN_S)
    return True


def planned_seconds(config: RunConfig, log_path: str | Path) -> float | None:
    """The shape's planned length: --duration, or what the Locust file logged at start."""
    if config.load.seconds is not None:
        return config.load.seconds
    try:
        found = re.search(r"planned (\d+(?:\.\d+)?) s", Path(log_path).read_text())
    except OSError:
        return None
    return float(found[1]) if found else None


def warm_up_stack(state: RunState) -> None:
    """Runs the warm-up's Locust to its end, then waits until the store holds every visit it had
    acknowledged, so they count in the totals read before the test, not in the test."""
    warm, target = state.config.warm_up, state.target
    assert warm is not None  # the plan has this step only with a warm-up
    folder = state.folder.path / WARM_UP_DIR
    folder.mkdir(exist_ok=True)
    baseline = target.totals()
    command = warm.load().locust_command(target.base_url, folder)
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=ROOT,
                          start_new_session=True) as locust:
        try:
            locust.wait(warm.timeout())
        except subprocess.TimeoutExpired:
            stop_locust(locust)
            raise RunError(f"the warm-up's Locust did not end within {warm.timeout():.0f} s") from None
        except BaseException:
            stop_locust(locust)
            raise
    ledger = json.loads((folder / results.LEDGER).read_text()) if (folder / results.LEDGER).exists() else {}
    acknowledged = sum(ledger.get("acknowledged", {}).values())
    settle.wait_until_stored(target.totals, baseline, acknowledged, interval=1, error=RunError)
    (folder / results.LOCUST_HTML).unlink(missing_ok=True)  # the test's own locust.html is the one to read
    target.mark_start()
    state.record["warm_up"] = {"users": warm.users, "seconds": warm.seconds, "acknowledged": acknowledged}
    state.folder.save_run(state.record)


def run_load(state: RunState) -> None:
    config, folder = state.config, state.folder
    sampler = state.sampler = Sampler(state.target, folder / results.SAMPLES)
    sampler.start()
    timeout = config.load.seconds + STOP_TIMEOUT_S + 120 if config.load.seconds is not None else None
    state.load_started = time.time()
    progress, faults, stopped = Progress("load"), None, False
    watch = LiveWatch(state, folder / results.HEALTH)  # warns as soon as Locust itself is the limit
    try:
        with LocustProcesses(locust_commands(state)) as locust:
            try:
                state.target.watch("locust", locust.pid)
                if config.chaos:  # RunConfig allows chaos with the local target only
                    assert isinstance(state.target, LocalTarget)
                    faults = Chaos(config.chaos, state.target.stack, config.settings)
                    faults.start()
                while locust.poll() is None:
                    elapsed = time.time() - state.load_started
                    if timeout is not None and elapsed > timeout + locust.wait_workers_s:
                        raise RunError(f"Locust did not end within {timeout:.0f} s; see {folder / results.LOCUST_LOG}")
                    rows = latest_history(folder / results.HISTORY)
                    row = rows[-1] if rows else {}
                    if config.abort_on_fail and not stopped:
                        stopped = judge_live(state, locust, elapsed, rows)
                    progress.update(elapsed, planned_seconds(config, folder / results.LOCUST_LOG),
                                    users=row.get("User Count"), RPS=_float(row.get("Requests/s")),
                                    failures=row.get("Total Failure Count"),
                                    responses_429=sampler.figure("functions", "responses_429", since_first=True),
                                    backlog=sampler.figure("store", "backlog"))
                    watch.poll()
                    time.sleep(1)
            except BaseException:  # Ctrl-C or kill: leaving `with` would wait for Locust, so stop it first
                locust.stop()
                raise
    finally:
        progress.close()
        if faults and config.chaos:
            faults.stop()  # before the convergence wait: nothing stays frozen
            state.record["chaos"] = {"plan": config.chaos.describe(), "events": faults.events}
    state.load_ended = time.time()
    watch.poll()  # the last rows: the workers' final reports, in the file the master wrote as it quit
    state.record["load_window"] = [state.load_started, state.load_ended]
    state.record["locust_exit_code"] = locust.returncode
    if locust.returncode != 0:
        state.record["notes"].append(f"Locust exited with code {locust.returncode}: see {results.LOCUST_LOG}")


def locust_commands(state: RunState) -> list[list[str]]:
    """The run's Locust command lines: one command; or, with --workers, a master and its workers
    (locust/node.py), whose options go into the results folder's run.conf."""
    config, folder, target = state.config, state.folder, state.target
    target_args = target.locust_args
    if not config.load.workers:
        command = config.load.locust_command(target.base_url, folder.path, target_args)
        state.record["locust_command"] = recorded_command(command)
        return [command]
    (folder / results.RUN_CONF).write_text(config.load.run_conf(target.base_url, target_args))
    commands = config.load.node_commands(folder / results.RUN_CONF, folder.path, free_port())
    state.record["locust_command"], state.record["locust_workers_command"] = map(recorded_command, commands)
    return list(commands)


def locust_lines(config: RunConfig, folder: results.ResultsFolder, target: Target) -> list[str]:
    """The Locust step's command lines, as a dry run shows them."""
    target_args = target.locust_args
    if not config.load.workers:
        return [f"$ {shlex.join(config.load.locust_command(target.base_url, folder.path, target_args))}"]
    conf = folder.path / results.RUN_CONF
    master, worker = config.load.node_commands(conf, folder.path, "<free port>")
    return [f"{conf}, the options master and workers read:",
            *(f"    {line}" for line in config.load.run_conf(target.base_url, target_args).splitlines()[1:]),
            "the master (it waits for every worker, runs the shape, and asks each worker for its whole visit "
            "ledger before it quits):", f"$ {shlex.join(master)}",
            f"the {config.load.workers} workers, over loopback:", f"$ {shlex.join(worker)}"]


class LocustProcesses:
    """Locust's processes for one test, each in a process group of its own (so that stopping one
    reaches the workers it forked); the first is the one whose end ends the test."""

    def __init__(self, commands: list[list[str]], stop_grace_s: float = 10):
        self.commands, self.stop_grace_s = commands, stop_grace_s
        self.wait_workers_s = LOCAL_WAIT_WORKERS_S if len(commands) > 1 else 0
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Self:
        for command in self.commands:
            self.processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                   cwd=ROOT, start_new_session=True))
        return self

    @property
    def pid(self) -> int:
        return self.processes[0].pid

    @property
    def returncode(self) -> int | None:
        return self.processes[0].returncode

    def poll(self) -> int | None:
        return self.processes[0].poll()

    def stop(self) -> None:
        for process in self.processes:
            stop_locust(process, self.stop_grace_s)

    def end_test(self, grace_s: float) -> None:
        """Ends the test before its shape does, as Ctrl-C in Locust's terminal would: SIGINT to the first process
        alone (a master tells its workers to quit; node.py passes it on), whose users then finish their page
        within --stop-timeout before it writes its files and the visit ledger, as at the shape's end. Not SIGTERM:
        Locust (2.47, main.py) installs its SIGTERM handler only once a headless shape test has ended, so SIGTERM
        kills it before it writes anything, as stop() does to the whole group. After grace_s, stop() all the same."""
        first = self.processes[0]
        try:
            first.send_signal(signal.SIGINT)
            first.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.stop()

    def __exit__(self, *_exc: object) -> Literal[False]:
        # the workers quit when their master does; give them the time to, then stop whatever is left
        for process in self.processes[1:]:
            try:
                process.wait(self.stop_grace_s)
            except subprocess.TimeoutExpired:
                pass
        self.stop()
        for process in self.processes:
            process.wait()
        return False


def stop_locust(locust: subprocess.Popen[bytes], grace_s: float = 10) -> None:
    """SIGTERM to Locust's process group (the master and its --processes workers), then SIGKILL to
    whatever is left of the group once the master has ended or grace_s has passed."""
    try:
        os.killpg(locust.pid, signal.SIGTERM)
        locust.wait(grace_s)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    try:
        os.killpg(locust.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _float(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None

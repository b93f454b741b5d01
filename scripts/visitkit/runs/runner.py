"""One iteration's experiment loop, as named steps: start the target -> totals before -> Locust
headless (the platform sampled every second) -> poll stored totals until they reach before +
acknowledged -> (the platform's own metrics) -> stop the target -> report.

`RunConfig` holds everything a run needs, checked once where it is built (config.py); `plan(config)`
gives the steps, which `run(config)` runs and `--dry-run` prints. The steps' actions are by stage: the
load in load.py (on a fleet of VMs, fleetrun.py), the convergence wait and the audit in convergence.py.
"""
import datetime
import json
import os
import shlex
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from visitkit import settle
from visitkit.errors import GATES_FAILED, RunError
from visitkit.formatting import percent
from visitkit.paths import INFRA_DIR
from visitkit.results import folder as results
from visitkit.results import thresholds
from visitkit.results.records import Summary
from visitkit.results.summary import headline_table
from visitkit.runs.config import WARM_UP_DIR, RunConfig
from visitkit.runs.convergence import MIN_CONVERGENCE_WAIT_S, audit_visits, audit_words, converge
from visitkit.runs.fleetrun import fleet_steps, make_fleet
from visitkit.runs.load import locust_lines, run_load, warm_up_stack
from visitkit.runs.state import RunState
from visitkit.runs.targets import Target
from visitkit.runs.watch import plan_line as watch_plan_line
from visitkit.steps import Step, plan_lines, run_steps

if TYPE_CHECKING:
    from visitkit.cloud.fleet import Fleet


def make_target(config: RunConfig, folder: results.ResultsFolder) -> Target:
    """The target object for a config; builds it without starting or contacting anything."""
    if config.target == "local":
        from visitkit.runs.targets import LocalTarget

        return LocalTarget(config.settings, folder / results.STACK, config.queue_timeout, config.keep_up,
                           config.profile)
    if config.target == "gcp" and config.rehearse:
        from visitkit.rehearsal.target import RehearsalTarget

        return RehearsalTarget(config.settings, config.iteration_dir, config.project, folder / "rehearsal",
                               config.rehearse, config.region, config.destroy, config.access, config.invokers)
    if config.target == "gcp":
        from visitkit.cloud.gcp import GcpTarget

        return GcpTarget(config.settings, config.iteration_dir, config.project, config.region, config.destroy,
                         config.access, config.invokers, config.impersonate)
    from visitkit.runs.targets import UrlTarget

    return UrlTarget(config.target, config.settings)


# ---- the steps' actions --------------------------------------------------------------------------
def read_totals_before(state: RunState) -> None:
    state.record["base_url"] = state.target.base_url
    if state.target.access:
        state.record["access"] = state.target.access  # as deployed ("auto" decided by the preflight)
    if state.target.dead_letter is False:  # the organization refused the dead-letter grants
        state.record["settings"] = {**state.record["settings"], "dead_letter": False}
    if state.target.deployed_region:
        state.record["region"] = state.target.deployed_region
    state.record["before"] = state.target.totals()
    state.folder.save_run(state.record)


def read_window(state: RunState) -> None:
    """The platform's figures for the load and the convergence wait (so the backlog's drain is in
    them) replace the live samples."""
    assert state.load_started is not None  # the load step ran (or a resumed run read its window)
    try:
        samples = state.target.window_samples(state.load_started, time.time(), state.folder.path)
    except Exception as error:  # e.g. no monitoring.viewer role: keep the client-side report
        samples = []
        state.record["notes"].append(f"The platform's metrics could not be read: {error!r}")
    with open(state.folder / results.SAMPLES, "w") as out:
        out.writelines(json.dumps(s) + "\n" for s in samples)
    state.folder.save_run(state.record)


def write_report(state: RunState) -> None:
    assert state.publish is not None  # run() hands it in
    if not state.config.keep_up:  # the stack is down: its files may lose this machine's paths
        results.without_machine_paths(state.folder.path)
    # A run with injected faults is cited on its own, never as the iteration's latest run.
    state.summary = state.publish(state.folder, update_readme=readme_updated(state.config, state.target))


# ---- the plan ------------------------------------------------------------------------------------
def plan(config: RunConfig, folder: results.ResultsFolder, target: Target, fleet: "Fleet | None" = None) -> list[Step]:
    """The run's steps, in order; the same list is run or printed."""
    load, shown_url = config.load, target.base_url
    convergence = (f"up to {config.convergence_timeout:g} s" if config.convergence_timeout is not None else
                   f"up to the longest of {MIN_CONVERGENCE_WAIT_S} s, 3 x the load, twice the model's time to store "
                   "this load's backlog"
                   + (f" and the subscription's maximum backoff plus its ack deadline ({target.min_convergence_wait} s)"
                      if target.min_convergence_wait else ""))
    steps = [*target.start_steps()]
    if config.warm_up:
        warm = config.warm_up
        steps.append(Step("warm up the stack", [
            f"{warm.describe()}, the study's visitor (Locust's endurance shape), files in {WARM_UP_DIR}/: the "
            "emulators' JVMs start cold, Google's Firestore and Pub/Sub are warm",
            f"$ {shlex.join(warm.load().locust_command(shown_url, folder.path / WARM_UP_DIR))}",
            f"then wait until every visit it acknowledged is stored (up to {settle.STORED_TIMEOUT_SECONDS} s)"],
            warm_up_stack))
    steps += [
        Step("read the totals before the load", [f"from {target.totals_source}"], read_totals_before),
        *(fleet_steps(config, folder, target, fleet) if fleet else [
            Step(f"run the Locust test '{load.test}'", [f"{load.describe()}, against {shown_url}",
                                                        *locust_lines(config, folder, target), watch_plan_line(),
                                                        *([f"chaos during the load: {config.chaos.describe()}"]
                                                          if config.chaos else []), *abort_lines(config)],
                 run_load)]),
        Step("wait for the counters to converge", [
            f"read totals from {target.totals_source} until they match the visits Locust saw acknowledged "
            f"({convergence})"], converge),
        Step("audit every visit", [audit_words(config.audit, target)], audit_visits),
    ]
    window = target.window_step()
    if window is not None:
        steps.append(Step(window.name, window.details, read_window))
    steps += target.check_steps()
    stop = target.stop_step()
    if stop is not None:
        steps.append(stop)
    steps.append(Step("write the report", [
        f"{folder.path / results.REPORT}: summary.json, the plots, then report.md"
        + (" and the iteration README's latest-run block" if readme_updated(config, target) else ""),
        *thresholds.plan_lines(config.thresholds, config.expect)], write_report))
    return steps


def abort_lines(config: RunConfig) -> list[str]:
    """What --abort-on-fail judges every second of the load."""
    if not config.abort_on_fail:
        return []
    live = [f"`{threshold}`" for threshold in config.thresholds if threshold.live]
    return [f"--abort-on-fail: stop the load (then converge and audit as usual) once {', '.join(live)} fails, "
            "judged every second: a count as it is so far; once Locust has made "
            f"{thresholds.LIVE_MIN_REQUESTS} requests, the failure ratio over all of them so far and a percentile "
            "over Locust's last ~10 s"]


def readme_updated(config: RunConfig, target: Target) -> bool:
    """Only when asked: a run that rewrote a tracked doc would leave every clone's tree changed."""
    return config.update_readme and target.updates_readme and not config.chaos


def dry_run(config: RunConfig) -> list[str]:
    """The plan as lines to print; starts, writes and contacts nothing."""
    if config.resume:
        folder = results.ResultsFolder(config.resume)
        done = folder.run().get("steps_done") or []
        head = [f"results: {folder.path} (resumed: {', '.join(done) or 'no step had finished'}; a finished step is "
                "skipped, except the checks, which run again, and the deploy, which reads the apply's outputs)"]
    else:
        folder = results.ResultsFolder(config.iteration_dir / "results" / f"{config.load.test}-<timestamp>")
        head = [f"results: {folder.path}"]
    target = make_target(config, folder)
    return [*head, *plan_lines(plan(config, folder, target, make_fleet(config, folder)))]


def run(config: RunConfig, log: Callable[[str], None] = print, *,
        publish: Callable[..., Summary]) -> tuple[results.ResultsFolder, Summary]:
    """Runs the plan (or, with config.resume, what a failed run left); returns (ResultsFolder, summary).
    `publish(folder, update_readme=...)` writes the report and returns the summary (the command line hands
    in visitkit.reports.publish.publish: the reports sit above the runs)."""
    if config.resume:
        folder = results.ResultsFolder(config.resume)
        record = folder.run()
        record.pop("format_version", None)
        log(f"results: {folder.path} (resumed after: {', '.join(record.get('steps_done') or ['nothing'])})")
    else:
        folder = results.ResultsFolder.new(config.iteration_dir, config.load.test,
                                           prefix="rehearsal-" if config.rehearse else "")
        folder.create()
        record = None
    target = make_target(config, folder)
    if record:
        target.resume(record.get("decisions") or {})
    assert config.profile is not None and config.prediction is not None  # RunConfig.build sets both
    record = record or {
        "iteration": config.iteration_dir.name, "test": config.load.test, "target": config.target_kind,
        "started": datetime.datetime.now().isoformat(timespec="seconds"), "settings": config.settings.raw,
        "shape": config.load.describe(), "notes": list(target.notes),
        "workers": config.load.workers or config.load.processes or 0,
        "load_model": config.load.load_model,  # "open": arrivals at a rate (arrivals: the plan); "closed": users
        "arrivals": config.load.arrivals.record() if config.load.arrivals else None,
        "profile": config.profile.record() if config.target == "local" else None,
        "machine": {"cores": os.cpu_count()} if config.target == "local" else None,
        "prediction": config.prediction.as_dict()}
    if config.thresholds or config.expect:  # judged by the report step, and again by `visitkit report`
        record["gates"] = {"thresholds": [str(threshold) for threshold in config.thresholds],
                           "expect": config.expect, "abort_on_fail": config.abort_on_fail}
    state = RunState(config, folder, target, log, record, fleet=make_fleet(config, folder), publish=publish)
    state.load_started, state.load_ended = record.get("load_window") or (None, None)
    state.converged = record.get("converged", False)
    folder.save_run(record)
    if not config.resume:
        log(f"results: {folder.path}")
    steps = plan(config, folder, target, state.fleet)
    run_steps(steps, state, log, done=set(record.get("steps_done") or ()), on_done=lambda step: finished(state, step),
              on_failure=lambda step, error: failed(state, step, error))
    # a resumed run whose report was written before reads the summary that report was written from
    summary = state.summary or folder.summary()
    if summary is None:
        raise RunError(f"{folder.path}: the run ended without a summary.json")
    return folder, summary


def finished(state: RunState, step: Step) -> None:
    """Records a finished step in run.json, for --resume; a tear-down forgets the deployment's."""
    if state.target.decisions is not None:
        state.record["decisions"] = state.target.decisions
    done = state.record.setdefault("steps_done", [])
    if state.target.destroy and (stop := state.target.stop_step()) is not None and step.name == stop.name:
        done.clear()  # the deployment is gone: a resumed run deploys again
    elif step.name not in done:
        done.append(step.name)
    state.folder.save_run(state.record)


def failed(state: RunState, step: Step, error: BaseException) -> None:
    """A failed Google Cloud step leaves failure.json (ids replaced by placeholders) and says how to
    send it home, where the catalogue of first-run errors learns from it."""
    state.record["failed_step"] = step.name
    state.folder.save_run(state.record)
    if state.config.target != "gcp" or state.config.rehearse:  # a rehearsal's failure is ours: nothing to send
        return
    from visitkit.cloud import failures

    try:
        path = failures.write_failure(state.folder.path, step.name, error, failures.versions(INFRA_DIR),
                                      project=state.config.project)
    except Exception as unwritten:  # noqa: BLE001 - the step's own error is what the user must see
        state.log(f"  (failure.json could not be written: {unwritten!r})")
        return
    state.log(failures.send_home(path))
    state.log(f"to continue after the last finished step: the same command with --resume {state.folder.path}")


def headline_lines(folder: results.ResultsFolder, summary: Summary) -> list[str]:
    h, verdict = summary.headline, summary.verdict
    return [
        f"report: {folder / results.REPORT}",
        f"  verdict: {verdict['outcome'] if verdict else 'n/a'}",
        f"  users max {h['users_max']}, requests {h['requests']}, failure ratio {percent(h['failure_ratio'] or 0)}",
        *(f"  {line}" for line in headline_table(h)),
        *([f"  gates: {'all hold' if summary.gates['passed'] else f'FAILED (exit status {GATES_FAILED})'}"]
          + [f"    {line}" for line in thresholds.gate_lines(summary.gates)] if summary.gates else []),
    ]

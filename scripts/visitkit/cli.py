"""visitkit: the kit's one command.

  visitkit local up|down|status|stats|totals   the local stack (scripts/local)
  visitkit run ITERATION --test T ...          one iteration's load test and report (scripts/run-iteration)
  visitkit compare [PATH ...]                  latest reports side by side (scripts/compare-iterations)
  visitkit compare --baseline RUN RUN2         the figures that moved beyond their noise band (exit 3)
  visitkit report RESULTS_DIR                  rebuild a report from a results folder alone
  visitkit bench store-path [SETTINGS ...]     the local store path's drain rate (scripts/benchmark-store-path)
  visitkit bench hot-path                      the whole stack vs a no-op function, flat out
                                                 (scripts/benchmark-hot-path)
  visitkit bench emulator-scan                 the Firestore emulator's read cost vs documents stored
                                                 (scripts/benchmark-emulator-scan)
  visitkit bench loadgen                       a Locust worker's CPU per request over HTTP and HTTPS, and
                                                 its latency against its CPU (scripts/benchmark-loadgen)
  visitkit bench cold-start                    each function's cold start vs a no-op function's
                                                 (scripts/benchmark-cold-start)
  visitkit bench noise --run "ITERATION ..."   how far a run's headline figures move when nothing changed
                                                 (scripts/benchmark-noise; --from RESULTS_DIR ... reads runs)
  visitkit bench response-bytes               what a visit downloads, with and without gzip
                                                 (scripts/benchmark-response-bytes)
  visitkit bench puller-memory [ITERATION]     the puller's peak memory at a lease retake with the knee's window
                                                 (scripts/benchmark-puller-memory)
  visitkit docs [--check]                      the docs' figures, written from the results they cite
  visitkit predict ITERATION [--profile NAME]  the capacity model's knee, first 429 and backlog (scripts/predict)
  visitkit predict ITERATION --fleet V         the Locust fleet V visits/s need, and its cost per hour
  visitkit predict ITERATION --dwell S --hold V  readers who stay S s (re-reading the count), and V visits/s
  visitkit predict ITERATION... --cost-at V    a month's bill at V visits/s, and which iteration holds it cheapest
  visitkit predict ITERATION... --cost-curve F  the bills from 0.1 visits/s to the knees, break-even rates, a plot
  visitkit tune --visits-per-s R [--p95-ms P]  the cheapest, fastest and balanced settings for R, as an iteration
                                                 (scripts/tune)
  visitkit fixture FAILURE_JSON                a failed cloud run's error text as a test of the retry catalogue
  visitkit replay-dead-letters ITERATION --project P   dead-lettered visits published again, unless stored
  visitkit study [--target local|gcp] ...      the whole study: plan, runs, one report (scripts/run-study)
"""
import argparse
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from visitkit.errors import GATES_FAILED, VisitkitError
from visitkit.paths import ITERATIONS_DIR, LOCAL_STATE_DIR, SETTINGS_FILE

if TYPE_CHECKING:
    from visitkit.results.records import Summary

DEFAULT_SETTINGS = ITERATIONS_DIR / "iteration-0" / SETTINGS_FILE
RAW = argparse.RawDescriptionHelpFormatter
SCALING_HELP = ("fixed: every instance up all the time; auto: Cloud Run's autoscaling, between each function's "
                "min_instances and max_instances (docs/local-twin.md, Autoscaling); default: the settings file's "
                "scaling, else fixed")
PROFILE_HELP = ("latency profile: none (default: no added latency), study (calibrated on the study's Google "
                "Cloud figures), or a profile file (docs/local-twin.md)")


def local_command(args: argparse.Namespace) -> int:
    from visitkit.settings import load_settings
    from visitkit.twin.stack import LocalStack

    stack = LocalStack(args.state_dir)
    if args.action == "up":
        from visitkit.twin.profile import load_profile

        profile = load_profile(args.profile)
        settings = load_settings(args.settings)
        if args.scaling:  # over the settings file's
            settings = settings.with_scaling(args.scaling)
        base_url = stack.up(settings, port=args.port, queue_timeout=args.queue_timeout, profile=profile)
        print(f"Local stack up with {args.settings}, latency profile {profile.describe()}; logs in {stack.logs}")
        print(f"Open a page: {base_url}/app?view=home")
        print(base_url)
    elif args.action == "down":
        stopped = stack.down()
        print(f"stopped {len(stopped)} processes" if stopped else "the local stack was not up")
    elif args.action == "status":
        rows = stack.status()
        if not rows:
            print("the local stack is not up")
            return 3
        for name, pid, port, alive in rows:
            print(f"{name:24} pid {pid:<8} port {port or '-':<6} {'running' if alive else 'STOPPED'}")
        for function, now in (stack.scaling() or {}).items():  # the instances the autoscaler runs
            print(f"{function:24} autoscaled {now['min_instances']}-{now['max_instances']}: "
                  + ", ".join(f"{now[state]} {state}" for state in ("ready", "starting", "drained", "stopping")))
        print(f"base URL: {stack.base_url}")
        return 0 if all(alive for *_, alive in rows) else 1
    elif args.action == "stats":
        print(json.dumps(stack.sample(), indent=2))
    elif args.action == "totals":
        print(json.dumps(stack.totals(), indent=2))
    return 0


def run_command(args: argparse.Namespace) -> int:
    from visitkit.reports import publish
    from visitkit.runs import runner
    from visitkit.runs.config import RunConfig

    config = RunConfig.build(
        args.iteration, args.test, target=args.target, duration=args.duration, shape_set=args.shape_set,
        stages=args.stages, processes=args.processes, workers=args.workers, worker_type=args.worker_type,
        keep_fleet=args.keep_fleet, update_readme=args.update_readme,
        convergence_timeout=args.convergence_timeout,
        queue_timeout=args.queue_timeout, keep_up=args.keep_up, project=args.project, region=args.region,
        chaos=args.chaos, warm_up=args.warm_up, warm_up_users=args.warm_up_users,
        destroy=args.destroy, profile=args.profile, access=args.access, invokers=tuple(args.invoker or ()),
        impersonate=args.impersonate, retry_visits=args.retry_visits, dwell=args.dwell, audit=args.audit,
        arrival_rate=args.arrival_rate, arrival_ramp=args.arrival_ramp, arrival_start=args.arrival_start,
        resume=args.resume, thresholds=args.threshold or (), expect=args.expect, abort_on_fail=args.abort_on_fail,
        ledger_ids=args.ledger_ids, rehearse=args.rehearse, scaling=args.scaling)
    if args.junit and not (config.thresholds or config.expect):
        raise VisitkitError("--junit writes the run's thresholds and expected verdict: give --threshold or --expect")
    if args.dry_run:
        print("\n".join(runner.dry_run(config)))
        return 0
    folder, summary = runner.run(config, publish=publish.publish)
    print("\n".join(runner.headline_lines(folder, summary)))
    from visitkit.reports import study

    found = study.load(folder.iteration_dir)
    if found:
        print(study.comparison_line(found, summary))
    return gates_status(summary, args.junit)


def gates_status(summary: "Summary", junit: Path | None) -> int:
    """The exit status of a run or a rebuilt report: GATES_FAILED when a threshold or the expected verdict
    fails, else 0; with --junit, writes them there first."""
    if junit is not None:
        from visitkit.reports.junit import write_junit

        write_junit(junit, summary)
        print(f"JUnit XML: {junit}")
    return GATES_FAILED if summary.gates and not summary.gates["passed"] else 0


def compare_command(args: argparse.Namespace) -> int:
    from visitkit.reports.compare import baseline_lines, compare_table

    if args.baseline is not None:
        lines, moved = baseline_lines(args.baseline, args.paths, args.band, args.target, args.test)
        print("\n".join(lines))
        return GATES_FAILED if moved else 0
    print(compare_table(args.paths or sorted(ITERATIONS_DIR.glob("iteration-*")), args.target, args.test))
    return 0


def report_command(args: argparse.Namespace) -> int:
    from visitkit.reports import publish
    from visitkit.results import folder as results
    from visitkit.runs import runner

    folder = results.ResultsFolder(args.results_dir)
    summary = publish.publish(folder, update_readme=args.update_readme)
    print("\n".join(runner.headline_lines(folder, summary)))
    return gates_status(summary, args.junit)


def given(**options: Any) -> dict[str, Any]:
    """The options given on the command line: the others keep the benchmark's own defaults."""
    return {name: value for name, value in options.items() if value not in (None, [])}


def bench_command(args: argparse.Namespace) -> int:
    # Each benchmark writes a results folder in benchmarks/ and prints its summary but the title.
    # (each module under its own name, so that mypy checks each benchmark's call against its own signature)
    if args.benchmark == "emulator-scan":
        from visitkit.benchmarks import emulatorscan

        folder, record = emulatorscan.benchmark(**given(steps=args.markers))
        summary_lines = emulatorscan.summary_lines
    elif args.benchmark == "loadgen":
        from visitkit.benchmarks import loadgen

        folder, record = loadgen.benchmark(**given(seconds=args.seconds))
        summary_lines = loadgen.summary_lines
    elif args.benchmark == "hot-path":
        from visitkit.benchmarks import hotpath

        folder, record = hotpath.benchmark(**given(users=args.users, seconds=args.seconds))
        summary_lines = hotpath.summary_lines
    elif args.benchmark == "cold-start":
        from visitkit.benchmarks import coldstart

        folder, record = coldstart.benchmark(**given(repetitions=args.repetitions, requests=args.requests,
                                                     threads=args.threads))
        summary_lines = coldstart.summary_lines
    elif args.benchmark == "noise":
        import shlex

        from visitkit.benchmarks import noise

        if args.from_dirs and args.repeats:
            raise VisitkitError("--repeats runs the repeats, --from reads runs made earlier: give one of the two")
        folder, record = noise.benchmark(**given(from_dirs=args.from_dirs, repeats=args.repeats,
                                                 run_arguments=shlex.split(args.run or "")))
        summary_lines = noise.summary_lines
    elif args.benchmark == "response-bytes":
        from visitkit.benchmarks import responsebytes

        folder, record = responsebytes.benchmark(**given(requests=args.requests))
        summary_lines = responsebytes.summary_lines
    elif args.benchmark == "puller-memory":
        from visitkit.benchmarks import pullermemory

        folder, record = pullermemory.benchmark(**given(iteration=args.settings[0] if args.settings else None,
                                                        ids=args.ids))
        summary_lines = pullermemory.summary_lines
    else:
        from visitkit.benchmarks import storepath
        from visitkit.twin.profile import load_profile

        folder, record = storepath.benchmark(**given(paths=args.settings, visits=args.visits),
                                             profile=load_profile(args.profile))
        summary_lines = storepath.summary_lines
    print("\n".join(summary_lines(record, folder.name)[2:]))
    print(f"written: {folder}")
    return 0


def docs_command(args: argparse.Namespace) -> int:
    from visitkit.reports import docs

    files = [Path(path).resolve() for path in args.files] or list(docs.doc_files())
    if args.check:
        messages, count = docs.check(files)
        for message in messages:
            print(message)
        if messages:
            print(f"{len(messages)} figures or links differ from the results and files they cite: "
                  "run `scripts/kit docs` to write the figures from their results")
            return 1
        print(f"{count} blocks of figures in {len(files)} docs match their results; every link resolves")
        return 0
    changed = docs.write(files)
    print("\n".join(f"wrote {docs.shown(path)}" for path in changed) or "every doc was up to date")
    return 0


def study_command(args: argparse.Namespace) -> int:
    from visitkit.studies import run as studies

    return studies.command(args)


def predict_command(args: argparse.Namespace) -> int:
    from visitkit.model import command
    from visitkit.twin.profile import load_profile, write_profile

    if args.write_profile:
        for folder in args.iteration:
            print(f"wrote {write_profile(folder, args.out)}")
        return 0

    def chosen_loadgen(folder: str | None) -> tuple[Path, dict[str, Any]]:  # read for --fleet only
        from visitkit.benchmarks import loadgen

        return loadgen.chosen(folder)

    for text in command.lines(args, load_profile(args.profile), chosen_loadgen):
        print(text)
    return 0


def tune_command(args: argparse.Namespace) -> int:
    from visitkit.model import tune
    from visitkit.twin.profile import load_profile

    read: tune.Quota | None = None
    notes: list[str] = []
    # The model does not reach Google (the layers): the project's quotas are read here, as the preflight reads them.
    if args.project and (args.quota_vcpu is None or args.quota_memory_gib is None):
        from visitkit.cloud import preflight

        read, notes = preflight.tune_quota(args.project, args.region)
    status, lines = tune.run(args, load_profile(args.profile), "scripts/tune " + " ".join(sys.argv[1:][1:]), read,
                             notes)
    print("\n".join(lines))
    return status


def parser() -> argparse.ArgumentParser:
    from visitkit.benchmarks import coldstart, emulatorscan, hotpath, loadgen, noise
    from visitkit.benchmarks import storepath as store_path
    from visitkit.catalogue import QUEUE_TIMEOUT_S
    from visitkit.model import command
    from visitkit.results.thresholds import EXPECTATIONS
    from visitkit.runs.config import TESTS
    from visitkit.settings import SCALING_MODES

    top = argparse.ArgumentParser(prog="visitkit", description=__doc__, formatter_class=RAW)
    commands = top.add_subparsers(dest="command", required=True)

    local = commands.add_parser("local", help="the local stack", description=(
        "The local stack: emulators, one functions-framework server per function instance, HAProxy."))
    local.add_argument("action", choices=["up", "down", "status", "stats", "totals"])
    local.add_argument("--state-dir", default=LOCAL_STATE_DIR, type=Path,
                       help="where pids, logs and the HAProxy configuration live (default: .local)")
    local.add_argument("--settings", default=DEFAULT_SETTINGS, type=Path,
                       help="an iteration's settings.tfvars.json (default: iteration 0)")
    local.add_argument("--port", default=8080, type=int, help="the front end's port (default: 8080)")
    local.add_argument("--queue-timeout", default=QUEUE_TIMEOUT_S, type=float,
                       help="seconds a request waits for a free instance before its 429 (default: %(default)g)")
    local.add_argument("--profile", default="none", help=PROFILE_HELP)
    local.add_argument("--scaling", choices=SCALING_MODES, help=SCALING_HELP)
    local.set_defaults(handler=local_command)

    run = commands.add_parser("run", help="one iteration's load test and report", formatter_class=RAW, description=(
        "Runs one iteration's load test end to end and writes its report in "
        "iterations/iteration-N/results/<test>-<timestamp>/ (report.md first).\n"
        "  visitkit run iterations/iteration-0 --test breakpoint --duration 60s\n"
        "  visitkit run iterations/iteration-1 --test breakpoint --target gcp --project P [--region R] [--destroy]\n"
        "      [--access auto|public|authenticated [--impersonate SERVICE_ACCOUNT] [--invoker MEMBER]]\n"
        "      [--resume RESULTS_DIR]   continue a failed Google Cloud run after its last finished step\n"
        "  visitkit run iterations/iteration-1 --test breakpoint --threshold 'visits.lost==0' --expect supported \\\n"
        "      [--abort-on-fail] [--junit FILE]   gates for CI\n"
        "  add --dry-run to print the steps (commands included) without starting or contacting anything\n"
        "Exit status: 0; 3 when a --threshold or --expect fails; 2 when the kit could not run (its error on stderr)"))
    run.add_argument("iteration", type=Path, help="an iteration folder, e.g. iterations/iteration-0")
    run.add_argument("--test", required=True, choices=TESTS)
    run.add_argument("--duration", help="cap on the load, e.g. 60s, 5m (breakpoint default: 5m)")
    run.add_argument("--target", default="local", help="local (emulator stack, default), gcp, or a base URL")
    run.add_argument("--shape-set", default="",
                     help="shape settings, e.g. max_users=300,spawn_rate=2 (see locust/README.md)")
    run.add_argument("--stages", help="endurance stages: CSV file (users,hold_s) or 300:180,650:120")
    run.add_argument("--processes", type=int, help="Locust's own --processes: one command forks N workers")
    run.add_argument("--workers", type=int, help=(
        "Locust in distributed mode: a master and N workers, each started by locust/node.py; with --target local "
        "N worker processes over loopback, with gcp or a URL a fleet of N worker VMs in --project (infra/loadgen), "
        "destroyed after the run"))
    run.add_argument("--worker-type", help="with a fleet: the worker VMs' machine type (default: infra/loadgen's); "
                                           "each runs one Locust worker per vCPU")
    run.add_argument("--keep-fleet", action="store_true",
                     help="with a fleet: leave its VMs up after the run, to look inside (infra/loadgen/README.md)")
    run.add_argument("--convergence-timeout", type=float, help=(
        "seconds to wait for the counters after the load (default: 3 x the load, at least 120, at least twice "
        "what the capacity model says the store needs after this run's load, and on Google Cloud at least the "
        "subscription's maximum backoff)"))
    run.add_argument("--queue-timeout", type=float, default=QUEUE_TIMEOUT_S,
                     help="local: seconds in HAProxy's queue before a 429")
    run.add_argument("--keep-up", action="store_true", help="local: leave the stack running afterwards")
    run.add_argument("--update-readme", action="store_true",
                     help="local: point the iteration README's 'Latest local run' block at this run (then commit both)")
    run.add_argument("--project", help="gcp: the Google Cloud project")
    run.add_argument("--region", help="gcp: region (default: the infra's)")
    run.add_argument("--destroy", action="store_true", help="gcp: destroy the deployment afterwards")
    run.add_argument("--access", choices=["auto", "public", "authenticated"], help=(
        "gcp: who may call the three HTTP functions, over the settings file's \"access\" (default auto: public "
        "where the organization policy lets allUsers invoke them, authenticated where it refuses them: "
        "docs/google-cloud.md)"))
    run.add_argument("--invoker", action="append", metavar="MEMBER", help=(
        "gcp, authenticated: grant run.invoker to this principal, e.g. user:me@example.com or "
        "serviceAccount:loadgen@P.iam.gserviceaccount.com (repeatable; default: your credentials' account)"))
    run.add_argument("--rehearse", nargs="?", const="open", metavar="SCENARIO", help=(
        "gcp: rehearse the whole run on this machine before paying for one: every step as the real run takes it, "
        "the kit's own Terraform, functions and reads real, Google's control plane, Cloud Run, Pub/Sub, Firestore "
        "and Monitoring stood in for (the twin's parts: emulators, HAProxy, Java); nothing is sent to Google. "
        "SCENARIO: open (default) or restricted-org (an organization made after 2024, refusing allUsers)"))
    run.add_argument("--impersonate", metavar="SERVICE_ACCOUNT", help=(
        "gcp, authenticated: mint the ID tokens as this service account (needed with a plain user login; "
        "you need roles/iam.serviceAccountTokenCreator on it)"))
    run.add_argument("--profile", help="local: " + PROFILE_HELP)
    run.add_argument("--scaling", choices=SCALING_MODES, help=(
        "local: " + SCALING_HELP + "; run.json records it. Not with --target gcp: Cloud Run always autoscales"))
    run.add_argument("--chaos", nargs="?", const="default", metavar="PLAN", help=(
        "local: faults during the load, e.g. "
        "every=20,seed=7,actions=kill-instance+freeze-firestore+freeze-pubsub+kill-push+pause-instance "
        "(default: every 20 s one of those five)"))
    run.add_argument("--warm-up", metavar="DURATION", help=(
        "local: real visits before the test, held this long (default 45s; 0 skips it): the emulators' JVMs "
        "start cold, Google's services are warm"))
    run.add_argument("--warm-up-users", type=int, metavar="N",
                     help="local: the warm-up's users (default: 60 %% of the knee predicted on this machine)")
    run.add_argument("--retry-visits", nargs="?", type=int, const=3, default=0, metavar="N", help=(
        "post a visit that got a 429, a 5xx or no answer again with the same visit id, up to N times (default N: "
        "3), as a careful client does: after what Retry-After asks (at most 30 s), else 1, 2, 4 ... s with "
        "jitter; a visit id counts once, and a visit refused (429) every time gave up. Without it (the study's "
        "runs) each visit is posted once"))
    run.add_argument("--dwell", type=float, default=0.0, metavar="SECONDS", help=(
        "readers who keep each page open this long after its visit, re-reading its count as the page does "
        "(every max(its 5 s refresh, the cache TTL), with jitter), then the next page (default 0: the study's "
        "visitor, 3-5 s between pages)"))
    run.add_argument("--arrival-rate", type=float, metavar="VISITS_PER_S", help=(
        "with --test load: the open model, R visits/s arriving whatever the latency, paced (evenly spaced), held for "
        "--duration; users are added as needed, up to --shape-set arrival_users_max (default 5000); an arrival no "
        "user is free for is not started, and counted (locust/README.md, Arrival rate)"))
    run.add_argument("--arrival-ramp", type=float, metavar="VISITS_PER_S", help=(
        "with --test breakpoint: the open model, the rate raised by R visits/s every second from --arrival-start"))
    run.add_argument("--arrival-start", type=float, metavar="VISITS_PER_S",
                     help="with --arrival-ramp: the rate it starts from (default 1)")
    run.add_argument("--audit", choices=["auto", "exact", "totals"], default="auto", help=(
        "after convergence, read the store's marker of every visit id (exact), or compare the totals (totals); "
        "auto: exact, except on Google Cloud above 1,000,000 visits (one billed read each)"))
    run.add_argument("--ledger-ids", type=int, metavar="N", help=(
        "keep at most N visit ids in Locust's ledger (default 2,000,000): when the shape plans more visits, a "
        "uniform sample of them over the whole run, which the audit reads (locust/README.md, Visit ids)"))
    run.add_argument("--resume", type=Path, metavar="RESULTS_DIR", help=(
        "gcp: continue a failed run in its results folder after the last step that finished (no second apply "
        "when the apply had finished); give the same iteration, --test and --project"))
    run.add_argument("--threshold", action="append", metavar="'FIGURE OP VALUE'", help=(
        "a gate on a headline figure of summary.json, in the syntax of the hypotheses' **Check:** lines, e.g. "
        "'knee_users>=200', 'visits.lost==0', 'p95_ms.inc-counter<100', 'extra_min_per_min<=1' (OP: < <= == != "
        ">= >; repeatable). The run exits 3 if one fails; a figure the run did not measure fails; an unknown "
        "name is refused before the run"))
    run.add_argument("--expect", choices=list(EXPECTATIONS), help=(
        "the verdict the hypothesis' checks must reach; the run exits 3 otherwise (undetermined fails an "
        "expectation of supported or not-supported)"))
    run.add_argument("--abort-on-fail", action="store_true", help=(
        "stop the load early when a threshold judged during it fails (<, <= or == on failure_ratio, p50_ms.*, "
        "p95_ms.*, failures.*, responses_429.*); the counters still converge and every visit is audited, and the "
        "report says when the load stopped"))
    run.add_argument("--junit", type=Path, metavar="FILE", help=(
        "write the thresholds and the expected verdict as JUnit XML (one testcase each), for CI systems"))
    run.add_argument("--dry-run", action="store_true", help="print the steps, and do nothing")
    run.set_defaults(handler=run_command)

    compare = commands.add_parser("compare", help="latest reports side by side", formatter_class=RAW, description=(
        "Puts the latest reports of several iterations side by side (Markdown table on stdout).\n"
        "  visitkit compare                                   every iterations/iteration-*, local, any test\n"
        "  visitkit compare iterations/iteration-1 iterations/iteration-2 --test breakpoint\n"
        "  visitkit compare iterations/iteration-0/results/breakpoint-20261122-031522 ...   exact runs"))
    compare.add_argument("paths", nargs="*", type=Path, help="iteration folders or results folders")
    compare.add_argument("--target", default="local", help="local, gcp or url (default: local)")
    compare.add_argument("--test", choices=TESTS, help="only this test")
    compare.add_argument("--baseline", type=Path, metavar="RUN", help=(
        "a results folder (or an iteration: its latest run): flag each headline figure of the one PATH that moved "
        "beyond its noise band from this run's; exit 3 when one did, 0 when none did"))
    compare.add_argument("--band", type=Path, metavar="FILE", help=(
        "with --baseline: the noise band, a noise benchmark's folder or its benchmark.json (default: the newest "
        "in benchmarks/, scripts/benchmark-noise)"))
    compare.set_defaults(handler=compare_command)

    report = commands.add_parser("report", help="rebuild a report from a results folder alone")
    report.add_argument("results_dir", type=Path, help="e.g. iterations/iteration-0/results/breakpoint-<timestamp>")
    report.add_argument("--update-readme", action="store_true",
                        help="also point the iteration README's latest-results block at this run")
    report.add_argument("--junit", type=Path, metavar="FILE",
                        help="write the run's thresholds and expected verdict, judged again, as JUnit XML")
    report.set_defaults(handler=report_command)

    bench = commands.add_parser("bench", help="benchmarks of the local stack", description=(
        "store-path: how fast the local store path drains a backlog of N visits published at once, "
        "per settings file, side by side (default: iterations 2 and 3). hot-path: the whole stack vs a no-op "
        "function, flat out. emulator-scan: get-counter's read on the Firestore emulator as documents pile up. "
        "loadgen: a Locust worker process's CPU per request over HTTP and HTTPS, and its latency against its CPU "
        "as the offered rate steps up, against HAProxy answering as a no-op function (read by predict --fleet). "
        "cold-start: each function's time from process start to its first 2xx, and its memory, "
        "beside a no-op function's. noise: how far a run's headline figures move when nothing changed, over "
        "repeats of one command (compare --baseline judges by it). Each writes a results folder "
        "benchmarks/<benchmark>-<timestamp>/ (benchmarks/README.md)."))
    bench.add_argument("benchmark", choices=["store-path", "hot-path", "emulator-scan", "loadgen", "cold-start",
                                             "noise", "response-bytes", "puller-memory"])
    bench.add_argument("--users", type=int,
                       help=f"hot-path: Locust users, no think time (default {hotpath.DEFAULT_USERS})")
    bench.add_argument("--seconds", type=int, help=f"hot-path, loadgen: seconds of load (default "
                                                   f"{hotpath.DEFAULT_SECONDS}; loadgen {loadgen.DEFAULT_SECONDS} "
                                                   "per scenario)")
    bench.add_argument("settings", nargs="*", type=Path, help="store-path: settings files (default: iterations 2 "
                                                              "and 3); puller-memory: a pull store's iteration "
                                                              "(default: iteration 7)")
    bench.add_argument("--ids", type=int, help="puller-memory: ids to write instead of the knee's (a quick try, "
                                               "not the figure)")
    bench.add_argument("--visits", type=int,
                       help=f"store-path: visits published at once (default {store_path.DEFAULT_VISITS:,})")
    bench.add_argument("--markers", type=lambda text: [int(n) for n in text.split(",")],
                       help="emulator-scan: marker documents to time the read at, rising (default "
                            f"{','.join(map(str, emulatorscan.DEFAULT_STEPS))})")
    bench.add_argument("--repetitions", type=int,
                       help=f"cold-start: starts per function (default {coldstart.DEFAULT_REPETITIONS})")
    bench.add_argument("--requests", type=int,
                       help="cold-start: requests after the first answer, as many at once as the instance has "
                            f"threads, before the second memory reading (default {coldstart.DEFAULT_REQUESTS:,}); "
                            "response-bytes: serve-page requests per encoding for its CPU per request")
    bench.add_argument("--threads", type=int,
                       help="cold-start: each started instance's threads, the requests it serves at once "
                            f"(default {coldstart.DEFAULT_THREADS}, iteration 4's concurrency)")
    bench.add_argument("--profile", default="none", help=PROFILE_HELP)
    bench.add_argument("--run", metavar="'ITERATION --test T ...'", help=(
        "noise: the run to repeat, scripts/run-iteration's arguments in one string; with --from, the command "
        "those runs were made with (recorded, and checked against their iteration and test)"))
    bench.add_argument("--repeats", type=int,
                       help=f"noise: runs of --run, one after the other (default {noise.DEFAULT_REPEATS})")
    bench.add_argument("--from", dest="from_dirs", nargs="+", type=Path, metavar="RESULTS_DIR",
                       help="noise: read these runs' results folders (repeats of one command) instead of running")
    bench.set_defaults(handler=bench_command)
    from visitkit.cloud import failures, replay

    failures.add_fixture_parser(commands)
    replay.add_parser(commands)

    docs = commands.add_parser("docs", help="write the docs' figures from the results folders they cite", description=(
        "Writes every marked block of figures in the docs (<!-- figures ... -->) from the results folders it "
        "names; with --check, writes nothing and names each figure that differs and each link that leads nowhere."))
    docs.add_argument("files", nargs="*", help="the docs to read (default: every Markdown file but results')")
    docs.add_argument("--check", action="store_true", help="exit 1 if a figure or a link differs, writing nothing")
    docs.set_defaults(handler=docs_command)
    predict = commands.add_parser("predict", help="the capacity model: knee, first 429, backlog", formatter_class=RAW,
                                  description=(
        "Predicts from an iteration's settings and a profile's service times each function's capacity, the "
        "RPS knee, the users at the first 429, the store's drain rate, backlog growth and convergence time.\n"
        "  visitkit predict iterations/iteration-1 --profile study\n"
        "  visitkit predict iterations/iteration-5 --dwell 60 --hold 10000   readers who stay 60 s, and "
        "10,000 visits/s\n"
        "  visitkit predict iterations/iteration-3 iterations/iteration-7 --cost-at 5 --free-tier   which holds "
        "5 visits/s cheapest a month\n"
        "  visitkit predict iterations/iteration-{3,6,7} --cost-curve cost-curve --region us-central1   bills "
        "from 0.1 visits/s to the knees, break-even rates, a plot\n"
        "  visitkit predict RESULTS_DIR --write-profile     a Google Cloud run's profile, from its metrics"))
    command.add_arguments(predict)
    predict.set_defaults(handler=predict_command)
    from visitkit.model import tune

    tuning = commands.add_parser("tune", help="the settings that hold a rate and a p95, cheapest first",
                                 formatter_class=RAW, description=(
        "Searches the settings the model judges (each function's instances, concurrency and vCPUs, the cache TTL, the "
        "store and its batch, whether the page embeds its count) for those that hold the rate with headroom, the "
        "p95 goal and the freshness goal, within the region's quota; prints the cheapest, the fastest and a "
        "balanced pick, and writes one as an iteration folder with its hypothesis and checks (exit 3: none holds).\n"
        "  visitkit tune --visits-per-s 300 --p95-ms 300 --region us-central1 --explain\n"
        "  visitkit tune --visits-per-s 300 --region us-central1 --project P   within project P's quotas there"))
    tune.add_arguments(tuning)
    tuning.set_defaults(handler=tune_command)
    from visitkit.studies import run as studies

    study = commands.add_parser("study", help="the whole study: its plan, its runs and one report",
                                formatter_class=RAW, description=(
        "Runs iterations 0-3 (--iterations) one after the other through the runner, and writes one report beside "
        "the study's figures in studies/<target>-<protocol>-<timestamp>/ (report.md, study.json).\n"
        "  visitkit study --dry-run                          the plan: every step, minutes, US dollars\n"
        "  visitkit study --target gcp --project P [--budget USD] [--keep]\n"
        "  visitkit study --resume studies/gcp-fast-<timestamp>   go on from the first run that did not finish"))
    studies.add_arguments(study)
    study.set_defaults(handler=study_command)
    return top


def interrupted(signum: int, frame: FrameType | None) -> NoReturn:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the clean-up short
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """The only place that turns the kit's errors into one-line messages and exit codes."""
    args = parser().parse_args(argv)
    # `kill` stops a run as Ctrl-C does: the stack it started is stopped on the way out.
    signal.signal(signal.SIGTERM, interrupted)
    try:
        return args.handler(args)
    except VisitkitError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

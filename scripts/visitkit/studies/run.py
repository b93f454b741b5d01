"""Running a whole study (scripts/run-study): its plan printed first, then each run through the runner, in order,
its state kept in studies/<name>-<time>/study.json so that --resume starts from the first run that did not finish,
and at the end one study report (studies/report.py).

On Google Cloud the first run deploys; each later run's deploy step applies its iteration's settings in place (the
runner's `terraform apply` changes only what differs), so Firestore is never recreated and each run counts from
the totals it reads before its load. No run destroys: the study does, once, after the last run (unless --keep).
A run that fails stops the study with its reason and leaves the deployment up, for --resume (a destroy would make
Firestore wait minutes before its database can be created again); the study says how to destroy it.
"""
import argparse
import datetime
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from visitkit.errors import VisitkitError
from visitkit.model import cost
from visitkit.paths import ITERATIONS_DIR, ROOT, SETTINGS_FILE, from_root
from visitkit.results import folder as results
from visitkit.runs import runner
from visitkit.runs.config import RunConfig
from visitkit.settings import DEPLOYED_ACCESS_MODES, SCALING_MODES
from visitkit.studies import plan as plans
from visitkit.studies.state import FORMAT, STATE_FILE, STUDIES_DIR, read_state, resolved, save_state
from visitkit.twin.profile import load_profile

DEFAULT_PROFILE = "study"  # local: the twin calibrated on the study's Google Cloud figures


@dataclass(frozen=True)
class Options:
    """What a study runs, as study.json keeps it (--resume reads it back)."""
    target: str = "local"
    iterations: tuple[str, ...] = tuple(f"iteration-{n}" for n in plans.DEFAULT_ITERATIONS)
    protocol: str = "fast"
    endurance: bool = False
    profile: str | None = None  # local: the latency profile (None: DEFAULT_PROFILE)
    project: str | None = None
    region: str | None = None
    access: str | None = None
    workers: int | None = None
    keep: bool = False
    scaling: str | None = None  # local: "auto" or "fixed" over each settings file's (None: the files')

    def __post_init__(self) -> None:
        if self.target not in plans.TARGETS:
            raise VisitkitError(f"--target must be one of {', '.join(plans.TARGETS)}, not {self.target!r}")
        if self.target == "gcp" and not self.project:
            raise VisitkitError("--target gcp needs --project (the Google Cloud project id)")
        if self.target != "gcp" and (self.project or self.region or self.access or self.keep):
            raise VisitkitError("--project, --region, --access and --keep are for a study on Google Cloud: "
                                "use them with --target gcp")
        if self.target != "local" and self.scaling is not None:
            raise VisitkitError("--scaling sets how the local twin runs each function's instances: Cloud Run always "
                                "autoscales between min_instances and max_instances")
        if self.target != "local" and self.profile not in (None, DEFAULT_PROFILE):
            raise VisitkitError("--profile shapes the local twin: a study on Google Cloud is modelled with the "
                                "study profile")
        for name in self.iterations:
            if not (ITERATIONS_DIR / name / SETTINGS_FILE).is_file():
                raise VisitkitError(f"no iteration {name} (iterations/{name}/{SETTINGS_FILE})")

    @property
    def local_profile(self) -> str:
        return self.profile or DEFAULT_PROFILE

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "iterations": list(self.iterations)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Options":
        return cls(**{**data, "iterations": tuple(data["iterations"])})  # a study before --scaling: None


def iteration_names(text: str) -> tuple[str, ...]:
    """'0,1,2,3' (or 'iteration-0,...') -> ('iteration-0', ...)."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError("needs at least one iteration, e.g. 0,1,2,3")
    return tuple(name if name.startswith("iteration-") else f"iteration-{name}" for name in names)


def make_plan(options: Options, prices: dict[str, Any] | None = None, **changes: Any) -> plans.StudyPlan:
    """The plan of `options`, with some of them changed (plans.over_budget asks for alternatives so)."""
    options = replace(options, **{**changes, "iterations": tuple(changes.get("iterations", options.iterations))})
    profile = load_profile(options.local_profile if options.target == "local" else DEFAULT_PROFILE)
    return plans.plan_study([plans.load_iteration(ITERATIONS_DIR / name) for name in options.iterations],
                            options.target, options.protocol, profile, prices or cost.load_prices(), options.region,
                            endurance=options.endurance, keep=options.keep,
                            workers=options.workers if options.target == "gcp" else None)


def budget_of(options: Options, budget: float | None) -> float | None:
    """--budget, else US$2 on Google Cloud (issue #37's target); the twin spends nothing."""
    if budget is not None and options.target != "gcp":
        raise VisitkitError("--budget caps what a study spends on Google Cloud: use it with --target gcp")
    return budget if budget is not None else (plans.TARGET_USD if options.target == "gcp" else None)


def config_of(options: Options, run: dict[str, Any], access: str | None = None,
              resume: Path | None = None) -> RunConfig:
    """The runner's configuration of one planned run (a study.json entry): never a destroy, never the README."""
    gcp = options.target == "gcp"
    return RunConfig.build(
        ITERATIONS_DIR / run["iteration"], run["test"], target=options.target, duration=run["duration"],
        shape_set=run["shape_set"], stages=run["stages"], workers=options.workers,
        profile=None if gcp else options.local_profile, project=options.project, region=options.region,
        access=access or options.access, destroy=False, update_readme=False, resume=resume,
        scaling=options.scaling)


def planned_runs(plan: plans.StudyPlan) -> list[dict[str, Any]]:
    """The study.json entries of a plan's runs, before any of them started."""
    return [{"iteration": run.iteration.name, **run.run_options(), "predicted_minutes": run.total_s / 60,
             "predicted_usd": run.cost["total"], "status": "pending"} for run in plan.runs]


def other_protocol_line(options: Options, prices: dict[str, Any]) -> str:
    other = "study" if options.protocol == "fast" else "fast"
    try:
        alternative = make_plan(options, prices, protocol=other)
    except VisitkitError as error:
        return f"--protocol {other} cannot plan these iterations: {error}"
    words = {"study": "the study's own protocol (+1 user/s for 5 to 15 minutes)",
             "fast": "the fast protocol (the READMEs' ramps, as far as each figure needs)"}[other]
    return (f"{words} would take {alternative.minutes:.0f} minutes and cost US${alternative.usd:.2f} on Google Cloud "
            f"(--protocol {other})")


def plan_lines(options: Options, plan: plans.StudyPlan, budget: float | None, prices: dict[str, Any]) -> list[str]:
    lines = [line for run in plan.runs for line in plans.run_lines(run)]
    lines += plans.summary_lines(plan, budget)
    lines.append(other_protocol_line(options, prices))
    return lines


def destroy_command(options: Options, settings_of: Path, access: str | None) -> list[str]:
    """`terraform destroy` of the study's deployment (the last iteration's settings, the access it was deployed
    with; plain Terraform takes an undecided "auto" as public)."""
    from visitkit.cloud.gcp import terraform_commands

    assert options.project is not None  # Options: --target gcp needs it
    return terraform_commands(settings_of, options.project, options.region,
                              access=access if access in DEPLOYED_ACCESS_MODES else "public")["destroy"]


def dry_run(options: Options, budget: float | None = None) -> list[str]:
    """Every step of the study, the predicted minutes and US dollars; starts, writes and contacts nothing."""
    budget = budget_of(options, budget)
    prices = cost.load_prices()
    plan = make_plan(options, prices)
    folder = STUDIES_DIR / f"{study_name(options)}-<timestamp>"
    lines = [f"study: {folder.relative_to(ROOT)}/ ({STATE_FILE}, report.md, the plot); iterations "
             f"{', '.join(options.iterations)} on {options.target}, protocol {options.protocol}"]
    if options.target == "gcp":
        lines.append("deploys once (the first run's deploy step); each later run's deploy step applies its "
                     "iteration's settings in place (Firestore is kept, each run counts from the totals it reads "
                     "before its load); no run destroys")
    step = 0
    for run, entry in zip(plan.runs, planned_runs(plan)):
        step += 1
        in_place = " (its deploy step applies these settings in place)" if options.target == "gcp" and step > 1 else ""
        lines.append(f"{step}. {run.iteration.name} {run.test}: {run.why}{in_place}")
        lines += [f"   {line}" for line in runner.dry_run(config_of(options, entry))]
    if options.target == "gcp":
        step += 1
        last = ITERATIONS_DIR / plan.runs[-1].iteration.name
        if options.keep:
            lines += [f"{step}. leave the deployment up (--keep); destroy it later:",
                      f"   $ {' '.join(destroy_command(options, last, options.access))}"]
        else:
            lines += [f"{step}. destroy the deployment (only once every run finished: after a failure it stays up "
                      "for --resume, and the study says how to destroy it)",
                      f"   $ {' '.join(destroy_command(options, last, options.access))}"]
    lines += [f"{step + 1}. write the study report: {folder.relative_to(ROOT)}/report.md, beside each iteration's "
              "study.json and with each run's own report linked", "", *plan_lines(options, plan, budget, prices)]
    if budget is not None:
        refused = plans.over_budget(plan, budget, lambda **changes: make_plan(options, prices, **changes))
        lines.append(f"--budget: {refused}" if refused else f"--budget US${budget:.2f}: within it, it would start")
    return [*lines, *plans.assumption_lines(plan)]


def study_name(options: Options) -> str:
    return f"{options.target}-{options.protocol}" + (f"-{options.scaling}" if options.scaling else "")


# ---- the results folders -------------------------------------------------------------------------
def new_results(iteration_dir: Path, before: set[Path]) -> Path | None:
    """The results folder a run made (the newest one not there before it started), None when it made none."""
    made = sorted(set((iteration_dir / "results").glob("*/")) - before, key=lambda path: path.name)
    return made[-1] if made else None


# ---- running it ------------------------------------------------------------------------------------
Publish = Callable[..., Any]


def run_study(options: Options, *, budget: float | None = None, resume: Path | None = None,
              log: Callable[[str], None] = print, publish: Publish | None = None,
              run: Callable[..., tuple[results.ResultsFolder, Any]] = runner.run,
              destroy: Callable[[list[str]], object] | None = None,
              now: Callable[[], datetime.datetime] = datetime.datetime.now) -> Path:
    """Runs the study (or, with `resume`, what a study folder left), then writes its report; returns its folder.
    `run` and `destroy` are the runner's and Terraform's (tests hand in fakes)."""
    from visitkit.studies import report

    if publish is None:
        from visitkit.reports.publish import publish
    prices = cost.load_prices()
    if resume is not None:  # `options`: those the study recorded (resumed_options)
        folder = Path(resume).resolve()
        state = read_state(folder)
        state["options"] = options.to_json()
        log(f"study: {from_root(folder)} (resumed: "
            f"{sum(entry['status'] == 'finished' for entry in state['runs'])} of {len(state['runs'])} runs finished)")
    else:
        plan = make_plan(options, prices)
        log("\n".join(plan_lines(options, plan, budget_of(options, budget), prices)))
        refused = plans.over_budget(plan, budget_of(options, budget) or float("inf"),
                                    lambda **changes: make_plan(options, prices, **changes))
        if refused:
            raise VisitkitError(refused)
        folder = STUDIES_DIR / f"{study_name(options)}-{now().strftime('%Y%m%d-%H%M%S')}"
        folder.mkdir(parents=True)
        state = {"format": FORMAT, "options": options.to_json(), "started": time.time(), "ended": None,
                 "predicted": {"minutes": plan.minutes, "usd": plan.usd, "region": plan.region,
                               "destroy_minutes": plan.destroy_s / 60},
                 "runs": planned_runs(plan), "deployment": None}
        save_state(folder, state)
        log(f"study: {from_root(folder)}")
    for number, entry in enumerate(state["runs"], 1):
        if entry["status"] == "finished":
            continue
        log(f"== study run {number} of {len(state['runs'])}: {entry['iteration']} {entry['test']}")
        deployment = state.get("deployment") or {}
        earlier = resolved(entry["results"]) if entry.get("results") else None
        resumed = earlier if options.target == "gcp" and earlier and (earlier / results.RUN).is_file() else None
        config = config_of(options, entry, deployment.get("access"), resumed)
        iteration_dir = ITERATIONS_DIR / entry["iteration"]
        before = set((iteration_dir / "results").glob("*/"))
        entry.update(status="running", started=time.time(), ended=None, error=None)
        save_state(folder, state)
        try:
            made, _summary = run(config, log, publish=publish)
        except BaseException as error:  # noqa: B902 - Ctrl-C too: the study records where it stopped
            where = resumed or new_results(iteration_dir, before)
            entry.update(status="failed", ended=time.time(), error=f"{type(error).__name__}: {error}",
                         results=from_root(where) if where else entry.get("results"))
            if options.target == "gcp" and not state.get("deployment") and where and (where / results.RUN).is_file():
                state["deployment"] = deployment_of(results.ResultsFolder(where).run())  # what its apply decided
            save_state(folder, state)
            log("\n".join(failure_lines(options, state, folder)))
            raise
        if options.target == "gcp" and not (state.get("deployment") or {}).get("access"):
            state["deployment"] = deployment_of(made.run())
        entry.update(status="finished", ended=time.time(), results=from_root(made.path),
                     seconds=time.time() - entry["started"])
        save_state(folder, state)
    if options.target == "gcp" and not options.keep and not (state.get("deployment") or {}).get("destroyed"):
        command = destroy_command(options, ITERATIONS_DIR / state["runs"][-1]["iteration"],
                                  (state.get("deployment") or {}).get("access"))
        log(f"== destroy the deployment\n$ {' '.join(command)}")
        started = time.time()
        try:
            (destroy or terraform)(command)
        except BaseException:
            log("\n".join(failure_lines(options, state, folder)))
            raise
        state["deployment"] = {**(state.get("deployment") or {}), "destroyed": True,
                               "destroy_seconds": time.time() - started}
    state["ended"] = time.time()
    save_state(folder, state)
    written = report.write(folder)
    log(f"study report: {from_root(written)}")
    return folder


def deployment_of(record: dict[str, Any]) -> dict[str, Any]:
    """What a Google Cloud run's run.json says of the deployment: the access its preflight or apply decided, which
    the later runs deploy with (they do not decide again), and its region."""
    return {"access": record.get("access"), "region": record.get("region")}


def terraform(command: list[str]) -> None:
    from visitkit.cloud.gcp import run_command

    run_command(command)


def failure_lines(options: Options, state: dict[str, Any], folder: Path) -> list[str]:
    """What a stopped study says: where it stopped, how to go on, and on Google Cloud how to destroy."""
    lines = [f"the study stopped; to go on from the first run that did not finish: scripts/run-study --resume "
             f"{from_root(folder)}"]
    if options.target == "gcp":
        last = next((entry for entry in reversed(state["runs"]) if entry["status"] != "pending"), state["runs"][0])
        command = destroy_command(options, ITERATIONS_DIR / last["iteration"],
                                  (state.get("deployment") or {}).get("access"))
        lines += ["the deployment stays up for --resume (destroyed, Firestore's database could not be created again "
                  "for minutes); to destroy it instead:", f"$ {' '.join(command)}"]
    return lines


# ---- the command line ----------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="local", choices=plans.TARGETS,
                        help="local (the twin on this machine, default) or gcp (deployed to --project)")
    parser.add_argument("--iterations", default=",".join(plans.DEFAULT_ITERATIONS), type=iteration_names,
                        help="the iterations, in order (default %(default)s)")
    parser.add_argument("--protocol", default="fast", choices=plans.PROTOCOLS, help=(
        "fast (default): each README's ramp, as far past the knee as the figures each iteration is judged by need; "
        "study: the study's own breakpoints, +1 user/s for 5 to 15 minutes (hours: --dry-run says how many)"))
    parser.add_argument("--endurance", action="store_true",
                        help="also iteration 3's endurance test with the study's stages, after its breakpoint")
    parser.add_argument("--profile", help=f"local: the twin's latency profile (default {DEFAULT_PROFILE})")
    parser.add_argument("--project", help="gcp: the Google Cloud project")
    parser.add_argument("--region", help=f"gcp: the region (default: the infra's, {cost.DEFAULT_REGION})")
    parser.add_argument("--access", choices=["auto", "public", "authenticated"],
                        help="gcp: who may call the functions (docs/google-cloud.md; default: the settings')")
    parser.add_argument("--workers", type=int, help=(
        "Locust distributed: N workers (on gcp a fleet of VMs in --project, priced in the plan)"))
    parser.add_argument("--budget", type=float, metavar="USD", help=(
        f"gcp: refuse to start when the plan costs more (default {plans.TARGET_USD:g}); says what would bring it "
        "under"))
    parser.add_argument("--keep", action="store_true", help="gcp: leave the deployment up at the end")
    parser.add_argument("--scaling", choices=SCALING_MODES, help=(
        "local: fixed (every instance up) or auto (the twin's autoscaler, docs/local-twin.md) for every run, over "
        "each settings file's"))
    parser.add_argument("--resume", type=Path, metavar="STUDY_DIR", help=(
        "go on with a study that stopped, from its first run that did not finish, with the options its study.json "
        "recorded (a Google Cloud run that failed continues in its own results folder)"))
    parser.add_argument("--dry-run", action="store_true", help="print every step, the minutes and the US dollars; "
                                                               "start, write and contact nothing")


def options_of(args: argparse.Namespace) -> Options:
    return Options(target=args.target, iterations=args.iterations, protocol=args.protocol, endurance=args.endurance,
                   profile=args.profile, project=args.project, region=args.region, access=args.access,
                   workers=args.workers, keep=args.keep, scaling=args.scaling)


def resumed_options(folder: Path, keep: bool) -> Options:
    """The options a study folder recorded, with this command's --keep."""
    return replace(Options.from_json(read_state(folder)["options"]), keep=keep)


def command(args: argparse.Namespace) -> int:
    """`visitkit study`: the plan (--dry-run), or the study."""
    if args.resume is not None:
        options = resumed_options(args.resume, args.keep)
        if args.dry_run:
            left = [f"{entry['iteration']} {entry['test']} ({entry['status']})"
                    for entry in read_state(args.resume)["runs"] if entry["status"] != "finished"]
            print(f"would go on with: {', '.join(left) or 'nothing but the destroy and the report'}")
            return 0
        folder = run_study(options, resume=args.resume)
    else:
        options = options_of(args)
        if args.dry_run:
            print("\n".join(dry_run(options, args.budget)))
            return 0
        folder = run_study(options, budget=args.budget)
    print(f"study: {from_root(folder / 'report.md')}")
    return 0


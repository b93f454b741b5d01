"""A run as a list of named steps: the same list is run, or printed by --dry-run."""
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Step:
    name: str
    details: list[str] = field(default_factory=list)  # what it does; a command line starts with "$ "
    action: Callable[[Any], object] | None = None  # action(run_state); None: nothing to do but say it
    always: bool = False  # run even when an earlier step failed (clean-up)
    # A resumed run (--resume) skips the steps that finished before, except that a step with
    # `again` runs again (it only checks, or sets up what later steps use), and a step with
    # `resumed` runs that instead (e.g. the deploy reads what the finished apply made).
    again: bool = False
    resumed: Callable[[Any], object] | None = None


def plan_lines(steps: Iterable[Step]) -> list[str]:
    """The steps as --dry-run prints them: numbered, each detail indented below."""
    lines = []
    for number, step in enumerate(steps, 1):
        lines.append(f"{number}. {step.name}")
        lines += [f"   {detail}" for detail in step.details]
    return lines


def run_steps(steps: Sequence[Step], state: object, log: Callable[[str], object] = print, done: Collection[str] = (),
              on_done: Callable[[Step], object] | None = None,
              on_failure: Callable[[Step, BaseException], object] | None = None) -> None:
    """Runs the steps in order. After a failure only the `always` steps run; then it re-raises.
    `done`: the names of the steps a resumed run finished before. on_done(step) after each step
    that finished, on_failure(step, error) after the first that failed."""
    failure: BaseException | None = None
    for number, step in enumerate(steps, 1):
        if failure is not None and not step.always:
            continue
        action = step.action
        if step.name in done and not step.again:
            action = step.resumed
            log(f"[{number}/{len(steps)}] {step.name}: finished before" + ("" if action else ", skipped"))
        else:
            log(f"[{number}/{len(steps)}] {step.name}")
        if action is None:
            continue
        try:
            action(state)
        except BaseException as error:  # noqa: B902 - clean-up steps must run on Ctrl-C too
            if failure is None:
                failure = error
                if on_failure is not None:
                    on_failure(step, error)
            else:
                log(f"  ({step.name} failed too: {error})")
            continue
        if on_done is not None:
            on_done(step)
    if failure is not None:
        raise failure

"""A run as a list of named steps: the same list is run, or printed by --dry-run."""
from dataclasses import dataclass, field
from typing import Callable, Optional


@dataclass(frozen=True)
class Step:
    name: str
    details: list = field(default_factory=list)  # what it does; a command line starts with "$ "
    action: Optional[Callable] = None  # action(run_state); None: nothing to do but say it
    always: bool = False  # run even when an earlier step failed (clean-up)


def plan_lines(steps):
    """The steps as --dry-run prints them: numbered, each detail indented below."""
    lines = []
    for number, step in enumerate(steps, 1):
        lines.append(f"{number}. {step.name}")
        lines += [f"   {detail}" for detail in step.details]
    return lines


def run_steps(steps, state, log=print):
    """Runs the steps in order. After a failure only the `always` steps run; then it re-raises."""
    failure = None
    for number, step in enumerate(steps, 1):
        if failure is not None and not step.always:
            continue
        log(f"[{number}/{len(steps)}] {step.name}")
        if step.action is None:
            continue
        try:
            step.action(state)
        except BaseException as error:  # noqa: B902 - clean-up steps must run on Ctrl-C too
            if failure is None:
                failure = error
            else:
                log(f"  ({step.name} failed too: {error})")
    if failure is not None:
        raise failure

"""The GitHub Actions example of docs/experiments.md (docs/examples/github-actions-twin.yml): every `scripts/`
command in it is parsed by the kit's own parser (an option the kit does not have fails here), each run passes its
--dry-run, the comparison runs on the committed baseline, and the JUnit files the runs write are those the
publishing step reads. In-process: nothing is started."""
import fnmatch
import re
import shlex
import subprocess

import pytest
import yaml

from visitkit import cli
from visitkit.paths import ROOT

EXAMPLE = ROOT / "docs" / "examples" / "github-actions-twin.yml"
# a wrapper script's one line: exec "$(dirname "$0")/kit" SUBCOMMAND... "$@"
WRAPPER = re.compile(r'^exec "\$\(dirname "\$0"\)/kit" (?P<arguments>.*?)\s*"\$@"$', re.M)


def steps(path=EXAMPLE):
    workflow = yaml.safe_load(path.read_text())
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def shell_commands(path=EXAMPLE):
    """Each command of the steps' `run:` scripts, split as the shell splits it (one per line or per &&)."""
    for step in steps(path):
        for line in step.get("run", "").splitlines():
            for command in line.split("&&"):
                if command.strip():
                    yield shlex.split(command)


def kit_arguments(command):
    """`scripts/NAME ARGS` as the kit's own arguments: the wrapper's subcommand, then ARGS."""
    script = ROOT / command[0]
    if command[0] == "scripts/kit":
        return command[1:]
    found = WRAPPER.search(script.read_text())
    assert found, f"{command[0]} is not a wrapper of scripts/kit"
    return [*shlex.split(found["arguments"]), *command[1:]]


def kit_commands(path=EXAMPLE):
    return [kit_arguments(command) for command in shell_commands(path) if command[0].startswith("scripts/")]


def parse(arguments):
    try:
        return cli.parser().parse_args(arguments)
    except SystemExit:
        pytest.fail(f"the kit refuses the example's command: {shlex.join(arguments)}")


@pytest.fixture
def nothing_started(monkeypatch):
    class Refused(subprocess.Popen):  # a class still, for the annotations that subscript it
        def __init__(self, *args, **kwargs):
            raise AssertionError(f"a dry run started a process: {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "Popen", Refused)


def test_every_kit_command_of_the_example_parses_and_each_run_passes_its_dry_run(nothing_started, capsys):
    commands = kit_commands()
    assert [arguments[0] for arguments in commands] == ["run", "run", "compare"]
    for arguments in commands:
        parse(arguments)
    for arguments in (a for a in commands if a[0] == "run"):
        assert cli.main([*arguments, "--dry-run"]) == 0, capsys.readouterr().err
        assert capsys.readouterr().out.startswith("results: ")


def test_the_runs_gate_on_thresholds_and_the_verdict_and_the_comparison_on_the_baseline(capsys):
    runs = [parse(arguments) for arguments in kit_commands() if arguments[0] == "run"]
    assert all(args.threshold and args.junit for args in runs)
    assert any(args.abort_on_fail and args.arrival_rate for args in runs)
    assert any(args.expect == "supported" for args in runs)
    compare = next(arguments for arguments in kit_commands() if arguments[0] == "compare")
    assert parse(compare).baseline.is_relative_to("iterations") and (ROOT / parse(compare).baseline).is_dir()
    status = cli.main(compare)  # the committed baseline against iteration 1's latest run like it, as in CI
    assert status in (0, cli.GATES_FAILED), capsys.readouterr().err
    assert "| figure | baseline | run | change | band | flagged |" in capsys.readouterr().out


def test_the_junit_files_written_are_the_ones_published_and_every_action_is_pinned():
    written = [str(parse(arguments).junit) for arguments in kit_commands() if arguments[0] == "run"]
    publish = next(step for step in steps() if step.get("uses", "").startswith("mikepenz/action-junit-report@"))
    assert written and all(fnmatch.fnmatch(path, publish["with"]["report_paths"]) for path in written)
    for step in steps():
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), f"{step['uses']}: pin a commit"


def test_the_example_sets_up_the_kit_with_make_setup_and_the_docs_show_it():
    commands = list(shell_commands())
    assert ["make", "setup"] in commands
    assert re.search(r"^setup:", (ROOT / "Makefile").read_text(), re.M)
    assert "examples/github-actions-twin.yml" in (ROOT / "docs" / "experiments.md").read_text()


def test_an_option_the_kit_does_not_have_fails_the_check(tmp_path):
    bad = tmp_path / "workflow.yml"
    bad.write_text(EXAMPLE.read_text().replace("--abort-on-fail", "--abort-on-failure"))
    with pytest.raises(pytest.fail.Exception, match="refuses the example's command"):
        for arguments in kit_commands(bad):
            parse(arguments)

"""The kit's command line (visitkit.cli): what it hands the modules (their work stubbed)."""
from pathlib import Path

from visitkit import hotpath, loadgen
from visitkit.cli import main


def test_a_benchmark_gets_only_the_options_given_and_keeps_its_own_defaults(monkeypatch, capsys):
    calls = []
    for module in (hotpath, loadgen):
        monkeypatch.setattr(module, "benchmark", lambda **options: calls.append(options) or (Path("x"), {}))
        monkeypatch.setattr(module, "summary_lines", lambda record, name: ["# title", "", "| table |"])
    for argv in (["loadgen"], ["loadgen", "--seconds", "30"], ["hot-path"], ["hot-path", "--users", "8"]):
        assert main(["bench", *argv]) == 0
    assert calls == [{}, {"seconds": 30}, {}, {"users": 8}]  # 30 s is hot-path's default, and loadgen may have it
    assert "| table |" in capsys.readouterr().out

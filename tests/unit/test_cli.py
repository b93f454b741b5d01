"""The kit's command line (visitkit.cli): what it hands the modules (their work stubbed)."""
from pathlib import Path

from visitkit import hotpath, loadgen
from visitkit.cli import main
from visitkit.paths import ITERATIONS_DIR
from visitkit.predict import counter_reads_per_s
from visitkit.settings import load_settings


def test_a_benchmark_gets_only_the_options_given_and_keeps_its_own_defaults(monkeypatch, capsys):
    calls = []
    for module in (hotpath, loadgen):
        monkeypatch.setattr(module, "benchmark", lambda **options: calls.append(options) or (Path("x"), {}))
        monkeypatch.setattr(module, "summary_lines", lambda record, name: ["# title", "", "| table |"])
    for argv in (["loadgen"], ["loadgen", "--seconds", "30"], ["hot-path"], ["hot-path", "--users", "8"]):
        assert main(["bench", *argv]) == 0
    assert calls == [{}, {"seconds": 30}, {}, {"users": 8}]  # 30 s is hot-path's default, and loadgen may have it
    assert "| table |" in capsys.readouterr().out


def test_the_cost_at_a_rate_counts_get_counters_firestore_reads_through_its_cache(capsys):
    assert main(["predict", str(ITERATIONS_DIR / "iteration-5"), "--cost-at", "100"]) == 0
    reads = next(line for line in capsys.readouterr().out.splitlines() if "Firestore document reads" in line)
    settings = load_settings(ITERATIONS_DIR / "iteration-5")
    assert settings.cache_ttl_seconds > 0  # a cache: far fewer reads than the 100 requests a second
    assert f" {round(counter_reads_per_s(settings, 100) * 3600):,} " in reads and " 0 " not in reads

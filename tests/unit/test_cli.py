"""The kit's command line (visitkit.cli): what it hands the modules (their work stubbed)."""
import json
from pathlib import Path

from visitkit.benchmarks import hotpath, loadgen
from visitkit.cli import main
from visitkit.catalogue import PAGES
from visitkit.model.capacity import predict
from visitkit.model.cost import MONTH_S, billed_reads_per_query, occupancies
from visitkit.model.fleet import holding_cpu_percent, per_process_rps
from visitkit.paths import ITERATIONS_DIR
from visitkit.settings import load_settings
from visitkit.twin.profile import load_profile


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
    # get-counter's instances in use at 100 requests/s each read each page once per TTL
    in_use = occupancies(settings, predict(settings, load_profile("study")), 100)["get-counter"].instances
    per_s = min(100, in_use * len(PAGES) / settings.cache_ttl_seconds)
    billed = round(per_s * billed_reads_per_query(settings) * MONTH_S)
    assert f" {billed:,} " in reads and " 0 " not in reads and per_s < 100


def test_predict_sizes_a_fleet_from_the_loadgen_benchmark_named(tmp_path, capsys):
    committed, record = loadgen.latest()
    for scenario in record["scenarios"]:
        scenario["requests_per_core_second"] = 1000.0  # TLS costs nothing more: 1,000 x the holding share
    local = tmp_path / "loadgen-20991231-235959"
    local.mkdir()
    (local / "benchmark.json").write_text(json.dumps(record))
    iteration = str(ITERATIONS_DIR / "iteration-0")
    assert main(["predict", iteration, "--fleet", "100", "--loadgen", committed.name]) == 0
    rate = per_process_rps(loadgen.load(committed))
    assert f"sends {rate:,.0f} requests/s = " in capsys.readouterr().out
    assert main(["predict", iteration, "--fleet", "100", "--loadgen", str(local)]) == 0
    assert f"sends {10 * holding_cpu_percent(record):,.0f} requests/s = " in capsys.readouterr().out


def test_predict_prints_the_cost_per_million_visits_in_the_study_region_and_a_us_one(capsys):
    assert main(["predict", str(ITERATIONS_DIR / "iteration-3"), "--cost-per-million"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "per million visits" in line]
    assert [line.split(" (")[0] for line in lines] == ["cost per million visits in southamerica-east1",
                                                       "cost per million visits in us-central1"]
    dearer, cheaper = (float(line.split(": ")[1].split(" USD")[0]) for line in lines)
    assert dearer > cheaper > 0  # Tier 2 costs more than Tier 1

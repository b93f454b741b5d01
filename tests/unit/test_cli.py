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


def test_run_scaling_overrides_the_settings_file_records_it_and_the_dry_run_says_it(capsys):
    """--scaling on a local run: over the settings file's (iteration 4's has none: fixed), in the settings run.json
    records (a report reads which scaling a run used from them), and the plan's start step says it."""
    from visitkit.runs.config import RunConfig
    from visitkit.settings import parse_settings

    iteration = str(ITERATIONS_DIR / "iteration-4")
    plan = ["run", iteration, "--test", "spike", "--duration", "60s", "--warm-up", "0", "--dry-run"]
    assert main([*plan, "--scaling", "auto"]) == 0
    auto = capsys.readouterr().out
    assert ("scaling auto: serve-page, get-counter, inc-counter, store-inc-counter start at their min_instances; "
            "the autoscaler starts more on demand") in auto
    assert main(plan) == 0
    assert "scaling fixed: every instance of each function (its max_instances) starts with the stack" in \
        capsys.readouterr().out
    recorded = RunConfig.build(iteration, "spike", warm_up="0", scaling="auto").settings.raw  # run.json's settings
    assert parse_settings(recorded).scaling == "auto" and "scaling" not in load_settings(iteration).raw


def test_run_scaling_is_refused_off_the_twin(capsys):
    assert main(["run", str(ITERATIONS_DIR / "iteration-4"), "--test", "spike", "--target", "gcp", "--project", "p",
                 "--scaling", "fixed", "--dry-run"]) == 2
    assert "Cloud Run always autoscales them between min_instances and max_instances" in capsys.readouterr().err


def test_tune_hands_the_quota_read_from_project_p_in_its_region_to_the_search(monkeypatch, capsys):
    from visitkit.cloud import preflight
    from visitkit.model import tune

    read = tune.Quota(200, 400, tune.read_from("p1"), tune.read_from("p1"))
    asked, handed = [], []
    monkeypatch.setattr(preflight, "tune_quota", lambda project, region: asked.append((project, region)) or (
        read, ["a note"]))
    monkeypatch.setattr(tune, "run", lambda options, profile, line, *rest: handed.append(rest) or (0, ["printed"]))
    assert main(["tune", "--visits-per-s", "300", "--region", "us-east1", "--project", "p1"]) == 0
    assert asked == [("p1", "us-east1")] and handed == [(read, ["a note"])]
    assert main(["tune", "--visits-per-s", "300"]) == 0  # no project: nothing read, tune assumes
    assert main(["tune", "--visits-per-s", "300", "--project", "p1", "--quota-vcpu", "8", "--quota-memory-gib", "16"]) \
        == 0  # both given: nothing to read
    assert len(asked) == 1 and handed[1:] == [(None, []), (None, [])]
    assert "printed" in capsys.readouterr().out

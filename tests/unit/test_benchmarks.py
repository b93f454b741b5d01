"""The benchmarks' results folders (visitkit.benchmarks.benchfolder, visitkit.benchmarks.registry):
naming, the format check, and each record's table (pure logic; the measuring is stubbed)."""
import csv
import datetime
import json

import pytest

from visitkit.benchmarks import (
    benchfolder,
    coldstart,
    emulatorscan,
    hotpath,
    loadgen,
    noise,
    profiling,
    registry,
    storepath,
)
from visitkit.errors import VisitkitError

STARTED = datetime.datetime(2026, 11, 23, 13, 59, 50)
MACHINE = {"cores": 2, "processor": "AMD EPYC", "python": "3.11.7"}


def clock():
    """Each call a minute later, from STARTED: a benchmark that read it twice would show it."""
    return iter(STARTED + datetime.timedelta(minutes=n) for n in range(100)).__next__


def test_a_folder_is_named_by_its_benchmark_and_start():
    assert benchfolder.folder_name("hot-path", STARTED) == "hot-path-20261123-135950"


def test_a_failed_run_leaves_no_folder_and_a_whole_one_stays(tmp_path):
    with pytest.raises(RuntimeError):
        with benchfolder.new_folder("store-path", tmp_path, STARTED) as folder:
            (folder / "half.csv").write_text("x")
            raise RuntimeError("the stack did not start")
    assert list(tmp_path.iterdir()) == []
    with benchfolder.new_folder("store-path", tmp_path, STARTED) as folder:
        pass
    assert folder == tmp_path / "store-path-20261123-135950" and folder.is_dir()


def test_a_record_is_refused_in_another_format_or_of_another_benchmark(tmp_path):
    def folder_with(record):
        (tmp_path / "run").mkdir(exist_ok=True)
        (tmp_path / "run" / "benchmark.json").write_text(json.dumps(record))
        return tmp_path / "run"

    with pytest.raises(VisitkitError, match="no benchmark.json"):
        hotpath.load(tmp_path)
    with pytest.raises(VisitkitError, match=f"format 99, this kit reads {hotpath.FORMAT}"):
        hotpath.load(folder_with({"format": 99, "benchmark": "hot-path"}))
    with pytest.raises(VisitkitError, match="format None"):
        hotpath.load(folder_with({"benchmark": "hot-path"}))
    with pytest.raises(VisitkitError, match="a store-path benchmark, not hot-path"):
        hotpath.load(folder_with({"format": 1, "benchmark": "store-path"}))
    assert storepath.load(tmp_path / "run") == {"format": 1, "benchmark": "store-path"}


def scan_record(steps):
    return {"format": 1, "benchmark": "emulator-scan", "machine": MACHINE, "queries": 300, "steps": steps,
            "ms_per_1000_markers": emulatorscan.growth(steps)}


def test_the_emulator_scan_table_and_its_growth_per_1000_documents():
    record = scan_record([{"markers": 0, "mean_ms": 4.0}, {"markers": 10_000, "mean_ms": 5.0},
                          {"markers": 20_000, "mean_ms": 8.0}, {"markers": None, "mean_ms": 8.2}])
    assert record["ms_per_1000_markers"] == 0.2  # the first count to the last; the deleted step left out
    assert emulatorscan.render(record) == [
        "| markers stored | ms per counter read (sum over 2 shards) | x the empty store's |", "|---:|---:|---:|",
        "| 0 | 4.00 | 1.00x |", "| 10,000 | 5.00 | 1.25x |", "| 20,000 | 8.00 | 2.00x |",
        "| all deleted | 8.20 | 2.05x |"]
    assert emulatorscan.summary_lines(record, "x")[-1].startswith("each 1,000 stored documents add 0.20 ms")
    one_count = scan_record([{"markers": 0, "mean_ms": 4.0}, {"markers": None, "mean_ms": 4.1}])
    assert one_count["ms_per_1000_markers"] is None
    assert emulatorscan.summary_lines(one_count, "x")[-1] == "| all deleted | 4.10 | 1.02x |"


def test_the_emulator_scan_writes_a_folder_its_loader_reads_back(tmp_path, monkeypatch):
    monkeypatch.setattr(emulatorscan, "measure", lambda steps, queries: [(0, [3.0, 5.0]), (1000, [6.0, 6.0]),
                                                                         (None, [7.0, 7.0])])
    folder, record = emulatorscan.benchmark([0, 1000], queries=2, out_root=tmp_path, now=clock())
    assert folder.name == "emulator-scan-20261123-135950" and record["when"] == "2026-11-23T13:59:50"
    assert emulatorscan.load(folder) == record
    assert [step["mean_ms"] for step in record["steps"]] == [4.0, 6.0, 7.0]
    assert record["ms_per_1000_markers"] == 2.0  # (6.0 - 4.0) ms over the first 1,000 markers
    with open(folder / "queries.csv", newline="") as f:
        assert [(row["markers"], float(row["ms"])) for row in csv.DictReader(f)] == [
            ("0", 3.0), ("0", 5.0), ("1000", 6.0), ("1000", 6.0), ("all deleted", 7.0), ("all deleted", 7.0)]
    summary = (folder / "summary.md").read_text().splitlines()
    assert summary[0] == "# Firestore emulator scan (emulator-scan-20261123-135950)"
    assert summary[summary.index("| 0 | 4.00 | 1.00x |"):][:3] == [
        "| 0 | 4.00 | 1.00x |", "| 1,000 | 6.00 | 1.50x |", "| all deleted | 7.00 | 1.75x |"]


def test_the_store_path_table_compares_each_drain_rate_with_the_first():
    record = {"visits": 3000, "profile": "none", "machine": MACHINE, "runs": [
        {"settings": "iteration-2", "instances": 2, "concurrency": 1, "drained_per_s": 127.4, "service_ms": 15.0,
         "most_in_flight": 2},
        {"settings": "iteration-3", "instances": 4, "concurrency": 1, "drained_per_s": 99.2, "service_ms": 31.0,
         "most_in_flight": 2}]}
    assert storepath.render(record)[2:] == ["| iteration-2 | 2x1 | 127 | 15 | 2 | 1.00x |",
                                        "| iteration-3 | 4x1 | 99 | 31 | 2 | 0.78x |"]


def test_the_store_path_writes_each_settings_file_and_its_drain(tmp_path, monkeypatch):
    paths = []
    for name, instances, concurrency in (("iteration-9", 3, 1), ("iteration-10", 6, 2)):
        settings = tmp_path / name / "settings.tfvars.json"
        settings.parent.mkdir()
        settings.write_text(json.dumps({"shards_per_page": 20, "cache_ttl_seconds": 10, "functions": {
            name: {"max_instances": instances, "concurrency": concurrency}
            for name in ("serve-page", "get-counter", "inc-counter", "store-inc-counter")}}))
        paths.append(settings)

    def measure(settings, visits, profile):  # each settings file drains at 25.02 msgs/s per store slot
        store = settings.functions["store-inc-counter"]
        slots = store.max_instances * store.concurrency
        return 25.02 * slots, 12.0, slots, [(0.2, 0, 1), (2.0, visits, slots)]

    monkeypatch.setattr(storepath, "measure", measure)
    folder, record = storepath.benchmark(paths, 100, out_root=tmp_path / "out", now=clock())
    assert folder.name == "store-path-20261123-135950" and storepath.load(folder) == record
    assert record["when"] == "2026-11-23T13:59:50"  # the start, as the folder's name
    # the store's instances and concurrency read from each settings file; 75.06 and 300.24 msg/s to one decimal
    assert record["runs"] == [{"settings": "iteration-9", "instances": 3, "concurrency": 1, "drained_per_s": 75.1,
                               "service_ms": 12.0, "most_in_flight": 3},
                              {"settings": "iteration-10", "instances": 6, "concurrency": 2, "drained_per_s": 300.2,
                               "service_ms": 12.0, "most_in_flight": 12}]
    assert (folder / "iteration-9-settings.tfvars.json").read_text() == paths[0].read_text()
    assert (folder / "iteration-9-drain.csv").read_text().splitlines() == ["seconds,stored,in_flight", "0.2,0,1",
                                                                          "2.0,100,3"]
    # each rate against the first's: 300.2 / 75.1 = 4.00 (0.4 msg/s off 4 x 75.1 shows only in the third decimal)
    summary = (folder / "summary.md").read_text().splitlines()
    assert summary[summary.index("| iteration-9 | 3x1 | 75 | 12 | 3 | 1.00x |") + 1] == (
        "| iteration-10 | 6x2 | 300 | 12 | 12 | 4.00x |")


def hot_path_record(noop_cpu_ms=0.40):
    profile = lambda ours, server, google, interpreter: {  # noqa: E731
        "samples": 1000, "shares": {profiling.OURS: ours, profiling.FRAMEWORK: server, profiling.GOOGLE: google,
                                    profiling.INTERPRETER: interpreter},
        "top_files": [[profiling.GOOGLE, "grpc/_channel.py", google], [profiling.OURS, "inc_counter.py", ours]]}
    return {"format": 3, "benchmark": "hot-path", "machine": MACHINE, "locust": "2.47.0", "users": 32,
            "seconds": 30, "threads": 8,
            "stack": {"rps": 783.4, "failures": 0,
                      "cpu_ms_per_request": {"serve-page": 0.6, "inc-counter": 1.2, "store-inc-counter": 2.0},
                      "requests_per_s": {"serve-page": 261.0, "get-counter": 261.2, "inc-counter": 261.5,
                                         "store-inc-counter": 128.0},
                      "cpu_ms_per_visitor_request": {"HAProxy": 0.19, "Firestore emulator": 0.47, "serve-page": 0.22},
                      "store": {"accepted_per_s": 254.0, "stored_per_s": 128.0, "backlog_at_end": 3844,
                                "converged_after_s": 8.6},
                      "profile": {"serve-page": profile(0.0, 0.75, 0.0, 0.25), "inc-counter": profile(0.05, 0.3, 0.5, 0.15)}},
            "noop": {"via_platform": {"rps": 1900.0, "failures": 1, "cpu_ms_per_request": noop_cpu_ms,
                                      "profile": profile(0.0, 0.8, 0.0, 0.2)},
                     "direct": {"rps": 2353.0, "failures": 0, "cpu_ms_per_request": 0.3, "profile": None},
                     "at_stack_rate": {"rps": 258.9, "failures": 0, "cpu_ms_per_request": 0.6, "profile": None,
                                       "target_rps": 261.2},
                     "at_push_rate": {"rps": 127.0, "failures": 0, "cpu_ms_per_request": 0.8, "profile": None,
                                      "target_rps": 128.0}}}


def test_the_hot_path_tables_put_each_function_beside_the_no_op_reached_the_same_way():
    lines = hotpath.render(hot_path_record())
    assert lines[2:8] == ["| whole local stack | 783 | 0 |",
                          "| no-op function, through the stack's HAProxy (a connection per request) | 1900 | 1 |",
                          "| no-op function, through the stack's HAProxy, paced to the rate of each public function in "
                          "the stack (261 requests/s) | 259 | 0 |",
                          "| no-op function, through the stack's HAProxy, paced to store-inc-counter's rate in the stack "
                          "(128 requests/s) | 127 | 0 |",
                          "| no-op function, direct (kept-alive connections) | 2353 | 0 |",
                          "| ratio (stack / no-op through HAProxy) | 0.41x | |"]
    # CPU split in the profile's proportions; the ratios against the no-op through HAProxy at the
    # function's own rate (store-inc-counter: its deliveries') and flat out; our code's part added to
    # the flat-out no-op's (inc-counter: 0.05 x 1.2 = 0.06 ms over 0.40 ms)
    assert lines[11:18] == [
        "| serve-page | 0.60 | 0.00 | 0.60 | 0.00 | 1.00x | 1.50x | 1.00x |",
        "| inc-counter | 1.20 | 0.06 | 0.54 | 0.60 | 2.00x | 3.00x | 1.15x |",
        "| store-inc-counter | 2.00 | n/a | n/a | n/a | 2.50x | 5.00x | n/a |",
        "| no-op, through the stack's HAProxy | 0.40 | 0.00 | 0.40 | 0.00 | n/a | 1.00x | 1.00x |",
        "| no-op, direct | 0.30 | n/a | n/a | n/a | n/a | 0.75x | n/a |",
        "| no-op, through the stack's HAProxy, at the public functions' rate | 0.60 | n/a | n/a | n/a | n/a | 1.50x | n/a |",
        "| no-op, through the stack's HAProxy, at store-inc-counter's rate | 0.80 | n/a | n/a | n/a | n/a | 2.00x | n/a |"]
    # the parts by cost, most first, and their sum
    assert lines[-4:] == ["| Firestore emulator | 0.47 |", "| serve-page | 0.22 |", "| HAProxy | 0.19 |",
                          "| all parts (Locust apart) | 0.88 |"]
    assert "| serve-page | 0.60 | 0.00 | 0.60 | 0.00 | 1.00x | n/a | n/a |" in hotpath.render(
        hot_path_record(noop_cpu_ms=None))
    summary = hotpath.summary_lines(hot_path_record(), "x")
    assert "| inc-counter | 1,000 | grpc/_channel.py (Google client libraries, 50%); inc_counter.py (our code, 5%) |" in summary
    assert summary[-1] == (
        "store: accepted 254/s, stored 128/s during the load; backlog 3844 when it ended; counters converged 8.6 s "
        "after it")


def test_the_no_op_is_paced_by_the_think_time_that_gives_the_rate():
    assert hotpath.think_time_for(300, 32) == "0.320-0.320"  # 32 visitors x 3 requests every 0.32 s


def test_the_hot_path_writes_a_folder_its_loader_reads_back(tmp_path, monkeypatch):
    record = hot_path_record()
    monkeypatch.setattr(hotpath, "measure_stack", lambda users, seconds, folder: record["stack"])
    paced = []

    def measure_noop(users, seconds, folder, rates):  # the no-op paced as asked
        paced.append(rates)
        return {**record["noop"], **{key: {**record["noop"][key], "target_rps": rate} for key, rate in rates.items()}}

    monkeypatch.setattr(hotpath, "measure_noop", measure_noop)
    folder, written = hotpath.benchmark(32, 30, out_root=tmp_path, now=clock())
    assert folder == tmp_path / "hot-path-20261123-135950" and hotpath.load(folder) == written
    assert written["when"] == "2026-11-23T13:59:50"
    # the no-op paced to the public functions' mean rate in the stack run, and to the store's
    # ((261.0 + 261.2 + 261.5) / 3 = 261.23)
    assert paced == [{"at_stack_rate": 261.2, "at_push_rate": 128.0}]
    assert (written["stack"], written["format"]) == (record["stack"], hotpath.FORMAT)
    summary = (folder / "summary.md").read_text()
    assert summary == "\n".join(hotpath.summary_lines(written, folder.name)) + "\n"
    # 783.4 / 1900 RPS; inc-counter 1.2 ms against the no-op's 0.6 at its rate, 0.4 flat out, 0.4 + 0.05 x 1.2
    for line in ("| ratio (stack / no-op through HAProxy) | 0.41x | |",
                 "| no-op function, through the stack's HAProxy, paced to the rate of each public function in the stack "
                 "(261 requests/s) | 259 | 0 |",
                 "| inc-counter | 1.20 | 0.06 | 0.54 | 0.60 | 2.00x | 3.00x | 1.15x |",
                 "| all parts (Locust apart) | 0.88 |"):
        assert f"\n{line}\n" in summary, line
    assert registry.render(folder) == hotpath.render(written)  # the docs' table, from the record alone


def test_any_benchmark_folder_renders_its_table_and_an_unknown_one_is_refused(tmp_path):
    table = registry.render(loadgen.latest()[0])
    assert table[0].startswith("| scenario | offered visits/s |") and table.index("") == 5  # 3 scenarios, a curve
    (tmp_path / "benchmark.json").write_text(json.dumps({"format": 1, "benchmark": "fuzz"}))
    with pytest.raises(VisitkitError, match="does not know"):
        registry.render(tmp_path)


@pytest.mark.parametrize("module", [hotpath, storepath, emulatorscan, loadgen, coldstart, noise])
def test_the_committed_folders_load_and_render(module):
    folders = sorted(benchfolder.BENCHMARKS_DIR.glob(f"{module.KIND}-*/"))
    assert folders, f"no committed {module.KIND} folder"
    record = module.load(folders[-1])
    # the whole table as the benchmark wrote it when it ran (ratios included), not its header alone
    table = module.render(record)
    assert len(table) > 2 and "\n" + "\n".join(table) + "\n" in (folders[-1] / "summary.md").read_text()


def cold_start_record(slowest_ms=900.0):
    figures = lambda first, imports: {"first_2xx_ms": first, "imports_ms": imports,  # noqa: E731
                                      "rest_ms": round(first - imports, 1), "memory_mb_first": 80.0,
                                      "memory_mb_after": 82.5, "failures": 0,
                                      "imports_by_origin_ms": dict(zip(coldstart.IMPORT_ORIGINS, (1.0, 90.0, 0.0, 60.0)))}
    return {"format": 2, "benchmark": "cold-start", "machine": MACHINE, "repetitions": 5, "requests": 1000,
            "threads": 8, "noop": figures(300.0, 200.0),
            "functions": {"serve-page": figures(450.0, 250.0), "store-inc-counter": figures(slowest_ms, 500.0)}}


def test_the_cold_start_medians_split_the_time_to_the_first_answer_into_imports_and_the_rest():
    starts = [{"first_2xx_ms": first, "imports_ms": imports, "memory_mb_first": rss, "memory_mb_after": rss + 1,
               "failures": failures}
              for first, imports, rss, failures in [(500.0, 300.0, 70.0, 0), (400.0, 350.0, 60.0, 2),
                                                    (900.0, 100.0, 90.0, 1)]]
    # the medians of each column apart (memory after the load: the most); the rest is what the median of the
    # imports leaves of the whole
    assert coldstart.median_split(starts) == {"first_2xx_ms": 500.0, "imports_ms": 300.0, "rest_ms": 200.0,
                                              "memory_mb_first": 70.0, "memory_mb_after": 91.0, "failures": 3}
    assert coldstart.median_split(starts[:2])["first_2xx_ms"] == 450.0  # an even count: the middle two's mean


def test_import_time_is_put_down_to_its_origin_and_the_standard_library_to_its_importer():
    report = "\n".join([
        "import time: self [us] | cumulative | imported package",
        "import time:       200 |        200 | encodings",  # the interpreter's own start
        "import time:       500 |        500 |     json.decoder",  # for gunicorn, which imported json
        "import time:       100 |        600 |   json",
        "import time:      1200 |       1800 | gunicorn",
        "import time:       800 |        800 |     grpc._cython",
        "import time:       300 |        300 |     asyncio",  # for google, which imported it
        "import time:      3000 |       4100 |   google.cloud.firestore_v1",
        "import time:       100 |       4200 | get_counter",
        "some other line on stderr"])
    assert coldstart.parse_importtime(report, {"get_counter", "common"}) == {
        "our code": 0.1, "functions-framework, Flask, gunicorn": 1.8, "Google client libraries": 4.1,
        coldstart.STDLIB: 0.2}


def test_the_smallest_memory_tier_leaves_a_third_of_itself_free():
    assert coldstart.smallest_tier(85.0) == 128  # 85.3 MiB is two thirds of 128
    assert coldstart.smallest_tier(86.0) == 256
    assert coldstart.smallest_tier(170.0) == 256 and coldstart.smallest_tier(171.0) == 512


def test_the_cold_start_table_and_its_last_line_put_the_slowest_function_over_the_no_op():
    record = cold_start_record()
    assert coldstart.render(record) == [
        "| function | ms to first 2xx | interpreter + imports ms | the rest ms | memory MiB at first answer "
        "| memory MiB after 1,000 requests (most) | smallest tier with a third free | x the no-op's time |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        "| serve-page | 450 | 250 | 200 | 80.0 | 82.5 | 128 MiB | 1.50x |",
        "| store-inc-counter | 900 | 500 | 400 | 80.0 | 82.5 | 128 MiB | 3.00x |",
        "| no-op functions-framework function | 300 | 200 | 100 | 80.0 | 82.5 | 128 MiB | 1.00x |", "",
        "| imports' own time, ms (-X importtime) | our code | functions-framework, Flask, gunicorn "
        f"| Google client libraries | {coldstart.STDLIB} |", "|---|---:|---:|---:|---:|",
        "| serve-page | 1 | 90 | 0 | 60 |", "| store-inc-counter | 1 | 90 | 0 | 60 |",
        "| no-op functions-framework function | 1 | 90 | 0 | 60 |"]
    assert coldstart.summary_lines(record, "x")[-1] == "cold start, slowest function / no-op: 3.00x"
    # the slowest function, whichever row it is in
    assert coldstart.summary_lines(cold_start_record(slowest_ms=301.0), "x")[-1] == (
        "cold start, slowest function / no-op: 1.50x")


def test_the_cold_start_writes_a_folder_its_loader_reads_back(tmp_path, monkeypatch):
    def start(target, repetition, first):
        return {"target": target, "repetition": repetition, "first_2xx_ms": first, "imports_ms": 100.0,
                "memory_mb_first": 50.0, "memory_mb_after": 51.0, "failures": 0}

    origins = {target: dict.fromkeys(coldstart.IMPORT_ORIGINS, ours) for target, ours in (("no-op", 0.0),
                                                                                          ("get-counter", 1.0))}
    monkeypatch.setattr(coldstart, "measure", lambda functions, repetitions, requests, threads: ([
        start("no-op", 1, 200.0), start("no-op", 2, 300.0), start("get-counter", 1, 700.0),
        start("get-counter", 2, 500.0)], origins, {"function": "get-counter", "memory_mb_most": 90.0, "failures": 0}))
    folder, record = coldstart.benchmark(["get-counter"], 2, 10, out_root=tmp_path, now=clock())
    assert folder == tmp_path / "cold-start-20261123-135950" and coldstart.load(folder) == record
    assert (record["noop"]["first_2xx_ms"], list(record["functions"])) == (250.0, ["get-counter"])
    assert record["functions"]["get-counter"]["first_2xx_ms"] == 600.0  # the median of 700 and 500
    assert record["functions"]["get-counter"]["rest_ms"] == 500.0  # 600 less the imports' 100
    assert record["functions"]["get-counter"]["imports_by_origin_ms"] == origins["get-counter"]
    assert record["reads_in_flight"]["memory_mb_most"] == 90.0
    summary = (folder / "summary.md").read_text()
    assert "get-counter with every request's Firestore read in flight" in summary
    assert "at most 90.0 MiB, smallest tier with a third free 256 MiB" in summary  # 90 > 128 x 2/3
    assert "\n| get-counter | 600 | 100 | 500 | 50.0 | 51.0 | 128 MiB | 2.40x |\n" in summary  # 600 / 250
    assert summary.splitlines()[-1] == "cold start, slowest function / no-op: 2.40x"
    assert len((folder / "starts.csv").read_text().splitlines()) == 1 + 4  # every start, the medians' source
    assert registry.render(folder) == coldstart.render(record)  # the docs' table, from the record alone
    with pytest.raises(VisitkitError, match="a cold-start benchmark, not hot-path"):
        hotpath.load(folder)
    record["format"] = 1
    (folder / "benchmark.json").write_text(json.dumps(record))
    with pytest.raises(VisitkitError, match="format 1, this kit reads 3"):
        coldstart.load(folder)

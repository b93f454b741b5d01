"""Sizing a Locust fleet (visitkit.benchmarks.loadgen, visitkit.model.fleet) from a benchmark's files and
record (pure logic; noopfront's HAProxy configuration checked by `haproxy -c` where it is installed)."""
import datetime
import json
import shutil
import ssl
import subprocess
import sys

import pytest

from visitkit.benchmarks import benchfolder, loadgen, noopfront, registry
from visitkit.errors import VisitkitError
from visitkit.model import fleet
from visitkit.model.fleet import cpu_ratio, fleet_lines, fleet_plan, holding_cpu_percent, holding_step


def step(rate, cpu, p95, rps=None, p50=1.0):
    return {"offered_visits_per_s": rate, "rps": 3 * rate if rps is None else rps, "worker_cpu_percent": cpu,
            "p50_ms": p50, "p95_ms": p95, "loop_lag_ms": 1.0, "steady_s": 14, "failures": 0,
            "requests_per_core_second": 1.0}


def scenario(name, per_core_second, connections_per_request=0.01):
    return {"name": name, "scheme": "https" if name.startswith("https") else "http", "steady_s": 29,
            "connections": "per-request" if "new" in name else "kept-alive", "offered_visits_per_s": 250.0,
            "rps": 750.0, "worker_cpu_percent": round(75000 / per_core_second, 1), "failures": 0,
            "requests_per_core_second": per_core_second, "p50_ms": 1.0, "p95_ms": 3.0, "loop_lag_ms": 1.0,
            "connections_per_request": connections_per_request}


def a_record(steps=None):
    """Plain HTTP 3,000 requests per core-second; TLS kept alive 2,400 (1.25x the CPU), a new connection
    per request 1,000 (3x); latency holds up to the 75 % step."""
    return {"format": 2, "benchmark": "loadgen", "plain_scenario": "http-kept-alive",
            "planning_scenario": "https-kept-alive", "new_connection_scenario": "https-new-connection",
            "scenarios": [scenario("http-kept-alive", 3000.0), scenario("https-kept-alive", 2400.0),
                          scenario("https-new-connection", 1000.0, 1.0)],
            "curve": {"scenario": "https-kept-alive",
                      "steps": steps or [step(50, 8, 2), step(300, 45, 3), step(600, 75, 7), step(750, 92, 19)]}}


def test_tls_costs_the_worker_its_cpu_per_request_over_plain_https():
    record = a_record()
    assert cpu_ratio(record, "https-kept-alive") == pytest.approx(1.25)
    assert cpu_ratio(record, "https-new-connection") == pytest.approx(3.0)
    assert cpu_ratio(record, "http-kept-alive") == 1.0
    with pytest.raises(VisitkitError, match="no scenario 'quic'"):
        cpu_ratio(record, "quic")


def test_latency_holds_up_to_the_highest_step_within_the_margin_of_the_lightest_p95():
    # the lightest step's p95 is 2 ms: 7 ms is within 5 ms of it (the margin's edge), 19 ms is not
    assert holding_step(a_record())["offered_visits_per_s"] == 600
    assert holding_cpu_percent(a_record()) == 75.0
    # measured from the lightest step, not the one before: 2 -> 6 -> 8 ms stops at 6
    creeping = [step(50, 8, 2), step(300, 45, 6), step(600, 75, 8)]
    assert holding_cpu_percent(a_record(creeping)) == 45.0
    # the first step that fails ends the curve, even if a later one is within the margin again
    assert holding_cpu_percent(a_record([step(50, 8, 2), step(300, 45, 9), step(600, 75, 3)])) == 8.0
    # a step that did not carry 95 % of its offered visits does not hold, however fast its answers
    starved = [step(50, 8, 2), step(300, 45, 3), step(600, 99, 3, rps=1700)]  # 1,700 < 0.95 x 1,800
    assert holding_cpu_percent(a_record(starved)) == 45.0
    assert holding_cpu_percent(a_record([step(300, 45, 3), step(50, 8, 2), step(600, 75, 30)])) == 45.0  # by rate
    with pytest.raises(VisitkitError, match="lightest step did not carry"):
        holding_cpu_percent(a_record([step(50, 100, 2, rps=10)]))


def test_a_fleet_is_sized_from_plain_https_rate_over_the_tls_ratio_at_the_holding_share():
    plan = fleet_plan(10000, "e2-standard-4", "us-central1", a_record())
    # 3,000 / 1.25 x 75 % = 1,800 requests/s per process; 30,000 / 1,800 = 16.7: 17 processes, 5 VMs
    assert plan["per_process_rps"] == pytest.approx(1800)
    assert (plan["rps"], plan["processes"], plan["worker_vms"]) == (30000, 17, 5)
    assert plan["usd_per_hour"] == pytest.approx(5 * 0.13402284 + 0.06701142 + 6 * 0.0014)
    # a new connection per request: 3,000 / 3 x 75 % = 750 per process: 40 processes, 10 VMs
    assert (plan["new_connection"]["processes"], plan["new_connection"]["worker_vms"]) == (40, 10)
    lines = fleet_lines(plan, "benchmarks/loadgen-x")
    assert "one worker process sends 1,800 requests/s = 3,000 per core-second over plain HTTP / 1.25" in lines[1]
    assert "x 75% of a core" in lines[1] and "--workers 5" in lines[-1]
    assert any("hyperthread" in line for line in lines) and any("health.csv" in line for line in lines)
    assert "held at every step" not in lines[1]  # the 750 step broke: the curve found the worker's limit
    unbroken = a_record([step(50, 8, 2), step(300, 45, 3)])
    assert "held at every step" in fleet_lines(fleet_plan(10000, record=unbroken), "benchmarks/loadgen-x")[1]
    with pytest.raises(VisitkitError):
        fleet_plan(0, record=a_record())


def write_run(folder, name, stages, start=1000, settle_cpu=99.0, settle_p95=50.0):
    """A run's three files: in each stage (visits/s, seconds), 3 requests per visit, the worker at rate/10 %
    CPU and p95 rate/100 ms once settled, and busy, slow seconds (spawning) before that."""
    per_second, health, latency, at = ["time,requests,failures"], ["time,process,cpu_percent,loop_lag_ms,users"], \
        ["time,users,p50_ms,p95_ms"], start
    for rate, hold in stages:
        for t in range(at, at + int(hold)):
            settled = t >= at + loadgen.SETTLE_S
            if t >= start + 3:  # new HTTPS users' first requests come seconds after the load's start
                per_second.append(f"{t},{int(3 * rate) if settled else 1},0")
            health += [f"{t + 1}.0,master,3,1,10", f"{t + 1}.0,worker-1,{rate / 10 if settled else settle_cpu},2,10"]
            latency.append(f"{t},10,1,{rate / 100 if settled else settle_p95}")
        at += int(hold)
    for kind, rows in (("per_second.csv", per_second), ("health.csv", health), ("latency.csv", latency)):
        (folder / f"{name}-{kind}").write_text("\n".join(rows) + "\n")


def test_each_stage_is_read_from_its_steady_seconds_alone(tmp_path):
    stages = [(100.0, 30), (300.0, 30)]
    write_run(tmp_path, "curve", stages)
    first, second = loadgen.stage_figures(tmp_path, "curve", stages)
    # 1000 + 14 .. 1000 + 28 and 1030 + 14 .. 1030 + 28, counted from the load's start (the first health sample
    # with users), not from the first requests: spawning's busy, slow seconds and the last one left out
    assert (first["steady_s"], first["rps"], first["worker_cpu_percent"], first["p95_ms"]) == (15, 300, 10, 1)
    assert (second["rps"], second["worker_cpu_percent"], second["p95_ms"]) == (900, 30, 3)
    assert second["requests_per_core_second"] == 3000 and second["offered_visits_per_s"] == 300


def test_the_stats_history_keeps_its_run_wide_rows_with_a_percentile(tmp_path):
    history = tmp_path / "locust_stats_history.csv"
    history.write_text("Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,95%\n"
                       "1000,5,,Aggregated,0,0,N/A,N/A\n1001,5,GET,/app?view=home,9,0,1,40\n"
                       "1001,5,,Aggregated,30,0,2,3\n")
    loadgen.write_latency(history, tmp_path / "latency.csv")
    assert (tmp_path / "latency.csv").read_text().splitlines() == ["time,users,p50_ms,p95_ms", "1001,5,2,3"]


def test_haproxy_closes_only_the_new_connection_frontends_connections_and_speaks_tls_only_on_https(tmp_path):
    text = noopfront.render_config({"plain": ("http", "kept-alive", 1), "tls": ("https", "kept-alive", 2),
                                    "fresh": ("https", "per-request", 3)}, tmp_path / "x.pem", "127.0.0.1:4")
    blocks = {block.split("\n", 1)[0]: block for block in text.split("\nfrontend ")[1:]}
    assert "ssl crt" not in blocks["plain"] and f"bind 127.0.0.1:2 ssl crt {tmp_path / 'x.pem'}" in blocks["tls"]
    assert "option httpclose" in blocks["fresh"] and "httpclose" not in blocks["tls"] + blocks["plain"]
    assert "return status 202" in blocks["tls"] and noopfront.BODY in blocks["tls"]
    if shutil.which("haproxy"):
        pem = noopfront.self_signed_pem(tmp_path)
        (tmp_path / "h.cfg").write_text(noopfront.render_config({"tls": ("https", "per-request", 1)}, pem,
                                                                "127.0.0.1:4"))
        check = subprocess.run(["haproxy", "-c", "-q", "-f", str(tmp_path / "h.cfg")], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr


def test_the_certificate_is_made_with_cryptography_or_else_openssl(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(noopfront.self_signed_pem(tmp_path / "a"))
    if shutil.which("openssl"):
        monkeypatch.setitem(sys.modules, "cryptography", None)  # `import cryptography` now fails
        (tmp_path / "b").mkdir()
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(noopfront.self_signed_pem(tmp_path / "b"))


def test_the_latest_benchmark_is_read_and_its_format_checked(tmp_path):
    for name, fmt in (("loadgen-20260101-000000", 2), ("loadgen-20260202-000000", 99)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "benchmark.json").write_text(json.dumps({"format": fmt, "benchmark": "loadgen"}))
    with pytest.raises(VisitkitError, match="format 99"):
        loadgen.latest(tmp_path)
    with pytest.raises(VisitkitError, match="scripts/benchmark-loadgen"):
        loadgen.latest(tmp_path / "none")


def test_a_benchmark_is_chosen_by_path_or_by_name_and_by_default_the_newest(tmp_path):
    for name, rate in (("loadgen-20260101-000000", 1000), ("loadgen-20260202-000000", 2000)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "benchmark.json").write_text(json.dumps({"format": 2, "benchmark": "loadgen", "rate": rate}))
    assert loadgen.chosen(out_root=tmp_path)[1]["rate"] == 2000
    assert loadgen.chosen("loadgen-20260101-000000", tmp_path) == (tmp_path / "loadgen-20260101-000000",
                                                                   {"format": 2, "benchmark": "loadgen", "rate": 1000})
    assert loadgen.chosen(tmp_path / "loadgen-20260101-000000")[1]["rate"] == 1000
    assert fleet.load_benchmark(None, tmp_path)[1]["rate"] == 2000  # the model's loader is the same
    with pytest.raises(VisitkitError, match="no benchmark.json"):
        loadgen.chosen("loadgen-20990101-000000", tmp_path)


def test_a_run_writes_a_folder_its_loader_reads_back_and_a_failed_one_leaves_none(tmp_path, monkeypatch):
    started = datetime.datetime(2026, 11, 26, 2, 50, 0)
    measured = {"scenarios": a_record()["scenarios"], "steps": a_record()["curve"]["steps"],
                "haproxy": "2.6.12", "tls": "TLSv1.3 TLS_AES_256_GCM_SHA384", "tls_user_setup_ms": 20.0,
                "tls_user_setup_ms_suite": 0.1}
    monkeypatch.setattr(loadgen, "measure", lambda *_: measured)
    clock = iter([started, started + datetime.timedelta(minutes=5)]).__next__  # a second reading would differ
    folder, record = loadgen.benchmark(10, out_root=tmp_path, now=clock)
    assert folder == tmp_path / "loadgen-20261126-025000" and loadgen.load(folder) == record
    assert record["when"] == "2026-11-26T02:50:00"  # the start, as the folder's name
    assert record["cpu_ratios"]["https-kept-alive"] == 1.25 and record["holding"]["worker_cpu_percent"] == 75
    assert record["per_process_rps"] == 1800
    summary = (folder / "summary.md").read_text()
    assert summary == "\n".join(loadgen.summary_lines(record, folder.name)) + "\n"
    assert "| https-new-connection | 250 | 750 | 75 | 1,000 | 3.00x | 1.00 | 1 / 3 |" in summary
    assert "each new HTTPS user costs the worker 20 ms of CPU once" in summary
    assert "one context per process (locust/tls.py): 0.1 ms per new user" in summary
    assert "| 600 | 1,800 | 75 | 1 | 7 | 1 | yes |\n| 750 | 2,250 | 92 | 1 | 19 | 1 | no |" in summary

    def fails(*_):
        raise RuntimeError("HAProxy did not start")

    monkeypatch.setattr(loadgen, "measure", fails)
    with pytest.raises(RuntimeError):
        loadgen.benchmark(10, out_root=tmp_path / "failed", now=lambda: started)
    assert not list((tmp_path / "failed").iterdir())


def test_the_committed_benchmark_holds_its_tls_scenarios_curve_and_the_models_figures():
    folder, record = loadgen.latest()
    assert record["format"] == loadgen.FORMAT and {s["name"] for s in record["scenarios"]} == {
        s["name"] for s in loadgen.SCENARIOS}
    # what the record keeps for the docs is what the model reads from its figures now
    assert record["cpu_ratios"] == {s["name"]: round(cpu_ratio(record, s["name"]), 3) for s in record["scenarios"]}
    assert record["holding"]["worker_cpu_percent"] == holding_cpu_percent(record)
    assert record["per_process_rps"] == round(fleet.per_process_rps(record), 1)
    # its figures are what its files say, read by the code that reads them now
    for item in record["scenarios"]:
        found = loadgen.stage_figures(folder, item["name"], [(item["offered_visits_per_s"], record["seconds"])])[0]
        assert found == {key: item[key] for key in found}, item["name"]
    stages = [(step["offered_visits_per_s"], record["step_seconds"]) for step in record["curve"]["steps"]]
    assert loadgen.stage_figures(folder, loadgen.CURVE, stages) == record["curve"]["steps"]
    # the scenarios did what they say: one connection per request, or kept alive
    by_name = {s["name"]: s for s in record["scenarios"]}
    assert by_name["https-new-connection"]["connections_per_request"] > 0.95
    assert by_name["https-kept-alive"]["connections_per_request"] < 0.05
    assert len(record["curve"]["steps"]) >= 5 and fleet_plan(10000, record=record)["worker_vms"] >= 1
    table = loadgen.render(record)
    assert registry.render(folder) == table and "\n".join(table) in (folder / "summary.md").read_text()
    assert {path.name for path in folder.iterdir()} == {benchfolder.RECORD, benchfolder.SUMMARY} | {
        f"{name}-{kind}" for name in [*by_name, loadgen.CURVE] for kind in ("health.csv", "per_second.csv",
                                                                           "latency.csv")}


def test_a_docs_fleet_block_prints_what_predict_fleet_prints_from_the_benchmark_alone(tmp_path):
    from visitkit.reports import docs

    folder = tmp_path / "loadgen-20261126-025000"
    folder.mkdir()
    (folder / "benchmark.json").write_text(json.dumps(a_record()))
    text = docs.fleet_output(folder, "", "10000 us-central1")
    plan = fleet_plan(10000, region="us-central1", record=a_record())
    assert text == "```\n" + "\n".join(fleet_lines(plan, folder)) + "\n```\n" and "in us-central1" in text
    assert "in southamerica-east1" in docs.fleet_output(folder, "", "10000")  # predict's default region

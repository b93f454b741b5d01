"""The local platform's HAProxy configuration and the reading of its statistics."""
import shutil
import subprocess
from pathlib import Path

import pytest

from visitkit import haproxy
from visitkit.settings import FUNCTIONS, load_settings

SETTINGS = load_settings(Path(__file__).resolve().parents[2] / "iterations" / "iteration-3" / "settings.tfvars.json")


def config(tmp_path, queue_timeout=10.0):
    instances = {f: [20000 + 10 * n + i for i in range(SETTINGS.functions[f].max_instances)]
                 for n, f in enumerate(FUNCTIONS)}
    return haproxy.render_config(public_port=18080, push_port=18081, stats_address="127.0.0.1:18082",
                                 errorfile_path=tmp_path / "429.http", instances=instances,
                                 settings=SETTINGS, queue_timeout=queue_timeout)


def test_one_server_per_instance_limited_to_its_concurrency(tmp_path):
    text = config(tmp_path)
    store = text.split("\nbackend store-inc-counter")[1]
    assert store.count("maxconn 1 ") == 4  # iteration 3: four instances of concurrency 1
    assert "timeout queue 10000ms" in text
    assert "timeout queue 2500ms" in config(tmp_path, 2.5)


@pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy is not installed")
def test_haproxy_accepts_the_configuration(tmp_path):
    (tmp_path / "429.http").write_text(haproxy.TOO_MANY_REQUESTS)
    (tmp_path / "haproxy.cfg").write_text(config(tmp_path))
    result = subprocess.run(["haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def row(pxname, svname, **values):
    base = {"pxname": pxname, "svname": svname, "qcur": "", "scur": "0", "req_tot": "", "hrsp_2xx": "0",
            "hrsp_4xx": "0", "hrsp_5xx": "0", "rtime": "0", "qtime": "0", "status": "UP"}
    return {**base, **{k: str(v) for k, v in values.items()}}


def test_figures_separate_platform_429s_from_function_errors():
    rows = [
        row("inc-counter", "FRONTEND"),
        row("inc-counter", "instance-0", scur=1, hrsp_2xx=50, hrsp_5xx=2),
        row("inc-counter", "instance-1", scur=1, hrsp_2xx=48, status="DOWN"),
        row("inc-counter", "BACKEND", qcur=7, req_tot=120, hrsp_2xx=98, hrsp_4xx=3, hrsp_5xx=19,
            rtime=35, qtime=900),
    ]
    figures = haproxy.function_figures(rows, ["inc-counter"])["inc-counter"]
    assert figures == {"instances": 1, "in_flight": 2, "queued": 7, "requests": 120, "responses_2xx": 98,
                       "responses_4xx": 3, "responses_429": 17, "responses_5xx": 2, "service_ms": 35.0,
                       "service_ms_p95": None, "queue_ms": 900.0}

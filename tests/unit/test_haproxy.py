"""The local platform's HAProxy configuration and the reading of its statistics (haproxy itself
checking the configuration: integration/test_haproxy_config.py)."""
from visitkit.twin import haproxy


def test_one_server_per_instance_limited_to_its_concurrency(haproxy_config):
    text = haproxy_config()
    store = text.split("\nbackend store-inc-counter")[1]
    assert store.count("maxconn 1 ") == 4  # iteration 3: four instances of concurrency 1
    assert "timeout queue 10000ms" in text
    assert "timeout queue 2500ms" in haproxy_config(queue_timeout=2.5)


def row(pxname, svname, **values):
    base = {"pxname": pxname, "svname": svname, "qcur": "", "scur": "0", "req_tot": "", "hrsp_2xx": "0",
            "hrsp_4xx": "0", "hrsp_5xx": "0", "rtime": "0", "qtime": "0", "status": "UP"}
    return {**base, **{k: str(v) for k, v in values.items()}}


def test_an_instance_not_up_is_named_until_haproxy_counts_it_up():
    rows = [row("inc-counter", "FRONTEND", status="OPEN"), row("inc-counter", "instance-0"),
            row("inc-counter", "instance-1", status="DOWN 1/2"), row("inc-counter", "BACKEND"),
            row("store-inc-counter", "instance-0", status="DOWN"), row("store-inc-counter", "BACKEND", status="DOWN")]
    assert haproxy.servers_not_up(rows) == ["inc-counter/instance-1", "store-inc-counter/instance-0"]
    assert haproxy.servers_not_up([row("inc-counter", "instance-1", status="UP 1/3")]) == []


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

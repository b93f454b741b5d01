"""The autoscaler's rules (visitkit/twin/autoscaler.py) worked by hand, HAProxy's configuration of an autoscaled
function, and the settings' scaling switch."""
import json

import pytest
from conftest import ITERATION_0

from visitkit.errors import SettingsError
from visitkit.settings import load_settings, parse_settings
from visitkit.twin import autoscaler, haproxy
from visitkit.twin.autoscaler import (
    Limits,
    Sample,
    by_metrics,
    cold_start_figures,
    kept,
    on_demand,
    parse_waiting,
    queue_wait_s,
    target,
)

LIMITS = Limits(min_instances=1, max_instances=6, concurrency=10, vcpus=1.0)


def sample(t=0.0, in_flight=0, queued=0, waiting=0, requests=0):
    return Sample(t, in_flight, queued, waiting, requests)


def test_concurrency_is_kept_at_60_percent_of_the_maximum_over_the_window():
    # 12 in flight on average, concurrency 10: 12 / (0.6 x 10) = 2 instances; 12.1 needs a third
    assert by_metrics([sample(0, 10), sample(1, 14)], LIMITS) == 2
    assert by_metrics([sample(0, 10), sample(1, 14.2)], LIMITS) == 3
    assert by_metrics([], LIMITS) == 0


def test_cpu_is_kept_at_60_percent_of_the_vcpus_from_the_profiles_cpu_per_request():
    # 100 requests/s x 15 ms of CPU = 1.5 vCPU busy, on 1-vCPU instances at 60 %: ceil(2.5) = 3, though
    # concurrency alone (1 in flight) asks for 1
    limits = Limits(1, 6, 10, vcpus=1.0, cpu_s_per_request=0.015)
    window = [sample(0, 1, requests=0), sample(10, 1, requests=1000)]
    assert by_metrics(window, limits) == 3
    assert by_metrics(window, Limits(1, 6, 10, vcpus=2.0, cpu_s_per_request=0.015)) == 2  # 0.75 / 0.6


def test_on_demand_asks_for_instances_only_when_requests_wait_beyond_free_and_starting_slots():
    assert on_demand(sample(in_flight=20, queued=0), running=2, starting=0, limits=LIMITS) == 0
    # 2 running, full; 25 wait: 3 more
    assert on_demand(sample(in_flight=20, queued=25), running=2, starting=0, limits=LIMITS) == 5
    # one already starting takes 10 of them: 2 more
    assert on_demand(sample(in_flight=20, queued=25), running=2, starting=1, limits=LIMITS) == 5
    # from zero: a request waiting for an instance (HAProxy's Lua) asks for one
    assert on_demand(sample(waiting=1), running=0, starting=0, limits=LIMITS) == 1
    # an instance just ready, not busy yet, takes the request that waits: nothing more
    assert on_demand(sample(waiting=1), running=1, starting=0, limits=LIMITS) == 0


def test_the_target_stays_between_min_and_max_instances():
    assert target(0, 0, LIMITS) == 1
    assert target(4, 2, LIMITS) == 4
    assert target(2, 9, LIMITS) == 6


def test_a_request_waits_the_greater_of_10_s_and_3_5_times_the_average_start():
    assert queue_wait_s([]) == 10
    assert queue_wait_s([0.4, 0.5]) == 10
    assert queue_wait_s([3.0, 5.0]) == 14


def test_show_waiting_is_read_per_backend():
    assert parse_waiting("get-counter 3\nserve-page 0\n\n") == {"get-counter": 3, "serve-page": 0}


def autoscaled_config(tmp_path, scaling):
    raw = json.loads(ITERATION_0.read_text())
    raw["scaling"] = scaling
    raw["functions"]["get-counter"]["min_instances"] = 1
    raw["functions"]["inc-counter"]["min_instances"] = 2  # = its max: every instance runs, not autoscaled
    settings = parse_settings(raw)
    instances = {name: [9000 + 10 * i + j for j in range(spec.max_instances)]
                 for i, (name, spec) in enumerate(settings.functions.items())}
    return settings, haproxy.render_config(
        public_port=8080, push_port=8081, stats_address="127.0.0.1:8082", errorfile_path=tmp_path / "429.http",
        instances=instances, settings=settings, queue_timeout=10,
        started={f: 0 for f in instances if settings.autoscaled(f)})


def backend(config, name):
    return config.split(f"backend {name}\n")[1].split("\n\n")[0]


def test_an_autoscaled_functions_servers_start_in_maintenance_and_its_requests_wait_for_an_instance(tmp_path):
    settings, config = autoscaled_config(tmp_path, "auto")
    assert [f for f in settings.functions if settings.autoscaled(f)] == ["serve-page", "get-counter",
                                                                         "store-inc-counter"]
    assert "level admin" in config and f"lua-load {haproxy.AWAIT_INSTANCE_LUA}" in config
    reader = backend(config, "get-counter")
    assert "http-request lua.await_instance 10000" in reader
    assert [line.endswith(" disabled") for line in reader.splitlines() if "server instance-" in line] == [True, True]
    publisher = backend(config, "inc-counter")
    assert "await_instance" not in publisher and " disabled" not in publisher


def test_scaling_fixed_is_the_default_and_autoscales_nothing(tmp_path):
    settings, config = autoscaled_config(tmp_path, "fixed")
    assert load_settings(ITERATION_0).scaling == "fixed"
    assert not any(settings.autoscaled(f) for f in settings.functions)
    assert "lua-load" not in config and " disabled" not in config


def test_an_unknown_scaling_is_refused():
    raw = json.loads(ITERATION_0.read_text())
    with pytest.raises(SettingsError, match='scaling must be "fixed"'):
        parse_settings({**raw, "scaling": "elastic"})


def test_cold_starts_under_load_are_told_apart_from_quiet_ones_and_counted_in_the_load():
    def start(t, name, in_flight=0, waiting=0):
        return {"time": t, "function": name.rsplit("-", 1)[0], "instance": name, "event": "start",
                "in_flight": in_flight, "waiting": waiting}

    def ready(t, name, ms):
        return {"time": t, "function": name.rsplit("-", 1)[0], "instance": name, "event": "ready", "start_ms": ms}

    events = [start(0, "get-counter-0"), ready(1, "get-counter-0", 900.0),  # the minimum, quiet, before the load
              start(10, "get-counter-1", waiting=3), start(10, "get-counter-2", in_flight=1),
              ready(12, "get-counter-1", 2000.0), ready(13, "get-counter-2", 3000.0),
              {"time": 20, "function": "get-counter", "instance": "get-counter-2", "event": "drain"},
              start(30, "get-counter-2", waiting=1), ready(31, "get-counter-2", 1000.0)]  # after the load: 25 s
    figures = cold_start_figures(events, load_start=5, load_end=25)["get-counter"]
    assert figures == {"during_load": 2, "under_load_count": 3, "under_load_ms_median": 2000.0,
                       "under_load_ms_max": 3000.0, "quiet_count": 1, "quiet_ms_median": 900.0, "quiet_ms_max": 900.0}
    assert cold_start_figures(events)["get-counter"]["during_load"] == 4  # no window: every start


def test_a_drained_instance_counts_as_up_and_one_in_maintenance_does_not():
    def row(server, status):
        return {"pxname": "get-counter", "svname": server, "status": status, "scur": "0", "qcur": "0",
                "req_tot": "0", "hrsp_2xx": "0", "hrsp_4xx": "0", "hrsp_5xx": "0", "rtime": "0", "qtime": "0"}

    rows = [row("instance-0", "UP"), row("instance-1", "DRAIN"), row("instance-2", "MAINT"), row("BACKEND", "UP")]
    assert haproxy.function_figures(rows, ["get-counter"])["get-counter"]["instances"] == 2


def test_requests_served_in_the_window_keep_one_instance_though_none_was_seen_in_flight():
    # Google: from 1 to 0 only when the instance processes no request
    assert by_metrics([sample(0, 0, requests=10), sample(1, 0, requests=12)], LIMITS) == 1
    assert by_metrics([sample(0, 0, requests=12), sample(1, 0, requests=12)], LIMITS) == 0


def test_a_scale_in_leaves_what_the_last_minute_asked_for():
    # on demand asked for 2 five seconds ago while the minute's averages still say 1: keep 2; a minute later, 1
    asked = [(0.0, 1), (55.0, 2), (60.0, 1)]
    assert kept(asked, now=60.0) == 2
    assert kept(asked, now=115.1) == 1
    assert kept([], now=0.0) == 0


def test_the_autoscaler_drains_no_instance_on_demand_started_within_the_minute(tmp_path, monkeypatch):
    # two instances up, both ready; 3 requests wait at 0 s (on demand asks for 2), then none wait while the minute's
    # averages (half a request in flight, then requests served) ask for 1: the second is kept until the first look
    # more than a minute after the ask, then drained
    config = {"stats": "unused", "logs": tmp_path, "events": tmp_path / "events.jsonl",
              "instances": tmp_path / "instances.json", "window_s": 60, "metrics_interval_s": 5,
              "functions": {"inc-counter": {"min_instances": 0, "max_instances": 2, "concurrency": 1, "vcpus": 1,
                                            "commands": [[], []], "env": {}, "ports": [1, 2]}}}
    now = [0.0]
    scaler = autoscaler.Autoscaler(config, clock=lambda: now[0])
    for instance in scaler.functions[0].instances:
        instance.state = "ready"
    states = []
    monkeypatch.setattr(scaler, "set_state", lambda function, instance, state: states.append((now[0], state)))
    monkeypatch.setattr(scaler, "follow", lambda *args: None)
    monkeypatch.setattr(autoscaler.haproxy, "show_stat", lambda stats: [])
    monkeypatch.setattr(autoscaler.haproxy, "ask", lambda stats, command: "")
    monkeypatch.setattr(autoscaler, "observe", lambda name, rows, waiting, at: sample(
        at, in_flight=0.5 if at == 0 else 0, queued=3 if at == 0 else 0, requests=int(at)))
    for second in range(0, 70, 5):
        now[0] = float(second)
        scaler.step()
    assert states == [(60.0 + 5, "drain")]  # the first look past the minute after on demand asked for 2

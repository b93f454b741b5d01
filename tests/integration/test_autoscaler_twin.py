"""The twin's autoscaler on the real stack (emulators, HAProxy, functions-framework): get-counter autoscaled
between 1 and 3 instances of concurrency 1, serve-page between 0 and 1, the idle time and the metrics window
shortened to 2 s. The stack's first page starts serve-page from zero (only a waiting request can: no metric
does). Load that makes requests wait scales get-counter out to its maximum, with real cold starts and every
request answered;
once the load stops, the surplus is drained, gets SIGTERM (its process says "instance stopping", which it
only says when it exits on a signal it handles) and stops; the minimum instance stays."""
import json
import threading
import time
import urllib.request

import pytest
from conftest import running_stack

from visitkit.catalogue import FUNCTIONS, PAGE_FUNCTION, READER_FUNCTION
from visitkit.net import port_is_open
from visitkit.twin import autoscaler
from visitkit.twin.stack import group_alive

pytestmark = pytest.mark.slow  # about 40 s: a stack up, a scale-out, two idle times, the stop's grace

SHORT_S = 2.0  # the idle time and the metrics window


def settings_file(path):
    functions = {name: {"max_instances": 1, "concurrency": 1, "min_instances": 1} for name in FUNCTIONS}
    functions[READER_FUNCTION] = {"max_instances": 3, "concurrency": 1, "min_instances": 1}
    functions[PAGE_FUNCTION] = {"max_instances": 1, "concurrency": 1, "min_instances": 0}
    path.write_text(json.dumps({"shards_per_page": 2, "cache_ttl_seconds": 0, "scaling": "auto",
                                "functions": functions}))
    return path


def events(stack):
    lines = (stack.state_dir / autoscaler.EVENTS_FILE).read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_scales_out_on_waiting_requests_then_in_after_the_idle_time_keeping_the_minimum(tmp_path):
    with running_stack(tmp_path / "state", settings_file(tmp_path / "settings.json"), idle_s=SHORT_S,
                       metrics_window_s=SHORT_S) as stack:
        # the others run min = max instances: not autoscaled
        assert set(stack.scaling()) == {READER_FUNCTION, PAGE_FUNCTION}
        assert stack.scaling()[READER_FUNCTION]["ready"] == 1  # its minimum, started with the stack
        page_start = next(e for e in events(stack) if e["function"] == PAGE_FUNCTION)
        assert page_start["event"] == "start" and page_start["waiting"] >= 1  # on demand, from zero

        url, statuses, stop = f"{stack.base_url}/get-counter?visit_type=home", [], threading.Event()

        def reader():
            while not stop.is_set():
                with urllib.request.urlopen(url, timeout=30) as reply:
                    statuses.append(reply.status)

        readers = [threading.Thread(target=reader) for _ in range(8)]
        for thread in readers:
            thread.start()
        most, deadline = 0, time.monotonic() + 20
        while most < 3 and time.monotonic() < deadline:
            now = stack.scaling()[READER_FUNCTION]
            most = max(most, now["ready"])
            assert now["ready"] + now["starting"] <= 3  # never past max_instances
            time.sleep(0.2)
        time.sleep(1)
        stop.set()
        for thread in readers:
            thread.join(timeout=30)
        assert most == 3, "8 readers on 1 instance of concurrency 1: requests wait, it scales out to its maximum"
        # listed with the stack's processes, each in its own group: `down` stops them, a run samples them
        listed = {p["name"]: p["pid"] for p in stack.state()["processes"]}
        assert {f"{READER_FUNCTION}-{i}" for i in range(3)} <= set(listed)
        assert statuses and set(statuses) == {200}  # those that waited for a cold start were answered

        # after the load: the window empties, the surplus drains, idles SHORT_S, gets SIGTERM and stops
        deadline = time.monotonic() + 40
        while stack.scaling()[READER_FUNCTION] != {**stack.scaling()[READER_FUNCTION], "ready": 1, "starting": 0,
                                                   "drained": 0, "stopping": 0} and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2 * autoscaler.METRICS_INTERVAL_S)  # two more evaluations: the minimum stays
        final = stack.scaling()[READER_FUNCTION]
        assert (final["ready"], final["starting"], final["drained"], final["stopping"]) == (1, 0, 0, 0)
        assert stack.scaling()[PAGE_FUNCTION]["ready"] == 0  # idle past the idle time, scaled in to its minimum, 0

        log = [e for e in events(stack) if e["function"] == READER_FUNCTION]
        started = [e["instance"] for e in log if e["event"] == "start"]
        assert len(started) == 3 and all(e["start_ms"] > 0 for e in log if e["event"] == "ready")
        stopped = {e["instance"] for e in log if e["event"] == "stopped"}
        assert len(stopped) == 2 and f"{READER_FUNCTION}-0" not in stopped  # the first one is the minimum kept
        ports = json.loads((stack.state_dir / "autoscaler.json").read_text())["functions"][READER_FUNCTION]["ports"]
        for name in stopped:
            order = [e["event"] for e in log if e["instance"] == name]
            assert order[-3:] == ["drain", "sigterm", "stopped"], order
            instance_log = (stack.logs / f"{name}.log").read_text()
            assert '"instance stopping"' in instance_log.split('"instance started"')[-1]  # it exited on SIGTERM
            assert not port_is_open(ports[int(name.rsplit("-", 1)[1])])
    assert not group_alive(listed[f"{READER_FUNCTION}-0"])  # the minimum, stopped with the stack

"""The emulator-scan benchmark on a real Firestore emulator: it stores what it says and leaves nothing running."""
import pytest

from visitkit import emulatorscan
from visitkit.errors import StackError
from visitkit.net import port_is_open


def test_the_benchmark_times_the_read_at_each_count_and_stops_its_emulator(monkeypatch):
    ports = []
    real_free_port = emulatorscan.free_port
    monkeypatch.setattr(emulatorscan, "free_port", lambda: ports.append(real_free_port()) or ports[-1])
    rows = emulatorscan.measure([0, 1200], queries=20)
    assert [stored for stored, _ in rows] == [0, 1200, None]  # None: after deleting every document
    assert all(ms > 0 for _, ms in rows)
    assert not port_is_open(ports[0])  # the emulator's port: closed again
    lines = emulatorscan.scan_lines(rows)
    assert "all deleted" in lines[-2] and lines[-1].startswith("each 1,000 stored documents add ")


def test_marker_counts_must_rise():
    with pytest.raises(StackError, match="must rise"):
        emulatorscan.measure([10, 0])

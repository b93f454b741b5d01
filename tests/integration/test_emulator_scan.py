"""The emulator-scan benchmark on a real Firestore emulator: it stores what it says and leaves nothing running."""
import pytest

from visitkit.benchmarks import emulatorscan
from visitkit.errors import StackError
from visitkit.net import port_is_open


def test_the_benchmark_times_the_read_at_each_count_and_stops_its_emulator(monkeypatch, tmp_path):
    ports = []
    real_free_port = emulatorscan.free_port
    monkeypatch.setattr(emulatorscan, "free_port", lambda: ports.append(real_free_port()) or ports[-1])
    folder, record = emulatorscan.benchmark([0, 1200], queries=20, out_root=tmp_path)
    assert [step["markers"] for step in record["steps"]] == [0, 1200, None]  # None: after deleting every document
    assert all(step["mean_ms"] > 0 for step in record["steps"])
    assert not port_is_open(ports[0])  # the emulator's port: closed again
    assert len((folder / "queries.csv").read_text().splitlines()) == 1 + 3 * 20  # every query's time
    lines = (folder / "summary.md").read_text().splitlines()
    assert "all deleted" in lines[-3] and lines[-1].startswith("each 1,000 stored documents add ")


def test_marker_counts_must_rise():
    with pytest.raises(StackError, match="must rise"):
        emulatorscan.measure([10, 0])

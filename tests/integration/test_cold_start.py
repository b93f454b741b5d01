"""The cold-start benchmark on the real local stack, for one function and the no-op, once each:
its record has the shape its table needs, its split of the time to a first 2xx meets the bounds a
no-op of known delays sets, and nothing is left running."""
import ast
import csv
from pathlib import Path

import pytest

from visitkit.benchmarks import coldstart, hotpath

TIMED_NOOP = Path(__file__).resolve().parents[1] / "fixtures" / "coldstart" / "main.py"


def delays():
    """(IMPORT_S, FIRST_ANSWER_S) of the timed no-op, read from its file (importing it would sleep)."""
    for node in ast.parse(TIMED_NOOP.read_text()).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "(IMPORT_S, FIRST_ANSWER_S)":
            return ast.literal_eval(node.value)
    raise AssertionError(f"{TIMED_NOOP} sets no IMPORT_S, FIRST_ANSWER_S")


@pytest.mark.slow  # ~20 s
def test_one_cold_start_of_a_function_and_of_the_no_op(tmp_path, monkeypatch):
    # The no-op the benchmark starts is one whose loading sleeps IMPORT_S and whose first answer sleeps
    # FIRST_ANSWER_S more: the benchmark's own measurements, split as it splits them, must show both.
    monkeypatch.setattr(hotpath, "NOOP_SOURCE", TIMED_NOOP)
    import_s, first_answer_s = delays()
    folder, record = coldstart.benchmark(["get-counter"], repetitions=1, requests=20, threads=4, out_root=tmp_path)
    assert coldstart.load(folder) == record
    assert (record["repetitions"], record["requests"], record["threads"], list(record["functions"])) == (
        1, 20, 4, ["get-counter"])
    # get-counter's imports are mostly the Firestore client's; the no-op imports no Google client
    origins = record["functions"]["get-counter"]["imports_by_origin_ms"]
    assert origins["Google client libraries"] > origins["our code"] and record["noop"]["imports_by_origin_ms"][
        "Google client libraries"] < origins["Google client libraries"]
    for figures in (record["functions"]["get-counter"], record["noop"]):
        # the imports are timed in a process of their own, so with one start on a busy machine they may come out
        # longer than the whole: the two parts add up, each time is positive
        assert figures["first_2xx_ms"] > 0 and figures["imports_ms"] > 0
        assert round(figures["imports_ms"] + figures["rest_ms"], 1) == figures["first_2xx_ms"]
        assert figures["memory_mb_first"] > 0 and figures["memory_mb_after"] > 0
        assert figures["failures"] == 0
    noop = record["noop"]
    # Known lower bounds, in ms: the import-only process sleeps through the import; the instance through the
    # import and its first answer. The rest (the instance's time less the import-only process's, two processes
    # of their own) holds the first answer's sleep, less what the two processes' imports may differ by on a busy
    # machine (0.4 s allowed).
    assert noop["imports_ms"] >= 1000 * import_s, noop
    assert noop["first_2xx_ms"] >= 1000 * (import_s + first_answer_s), noop
    assert noop["rest_ms"] >= 1000 * first_answer_s - 400, noop
    assert noop["imports_ms"] < noop["first_2xx_ms"], noop
    # the medians are those of every start's own figures (one start each here)
    with open(folder / "starts.csv", newline="") as f:
        starts = {row["target"]: row for row in csv.DictReader(f)}
    assert set(starts) == {"no-op", "get-counter"}  # a header, one start each
    for target, figures in (("no-op", noop), ("get-counter", record["functions"]["get-counter"])):
        assert (float(starts[target]["first_2xx_ms"]), float(starts[target]["imports_ms"])) == (
            figures["first_2xx_ms"], figures["imports_ms"])
    slowest_over_noop = record["functions"]["get-counter"]["first_2xx_ms"] / noop["first_2xx_ms"]
    assert (folder / "summary.md").read_text().splitlines()[-1] == (
        f"cold start, slowest function / no-op: {slowest_over_noop:.2f}x")


@pytest.mark.slow  # ~25 s
def test_the_settings_that_change_what_a_function_loads_are_measured_beside_it(tmp_path):
    """The puller (STORE_MODE=pull) and serve-page embedding the count (PAGE_EMBEDS_COUNT=1) start, answer
    and load the Firestore client; serve-page by default loads none."""
    folder, record = coldstart.benchmark(["serve-page", "store-inc-counter"], repetitions=1, requests=20, threads=4,
                                         out_root=tmp_path)
    functions = record["functions"]
    assert list(functions) == ["serve-page", "store-inc-counter", coldstart.PULL_STORE, coldstart.PAGE_WITH_COUNT]
    assert all(figures["failures"] == 0 for figures in functions.values())
    google = {name: figures["imports_by_origin_ms"]["Google client libraries"] for name, figures in functions.items()}
    assert google[coldstart.PAGE_WITH_COUNT] > 10 * max(1.0, google["serve-page"])
    assert google[coldstart.PULL_STORE] > 10 * max(1.0, google["serve-page"])
    assert "STORE_MODE=pull" in (folder / "summary.md").read_text()

"""The cold-start benchmark on the real local stack, for one function and the no-op, once each:
its record has the shape its table needs, with positive times, and nothing is left running."""
from visitkit.benchmarks import coldstart


def test_one_cold_start_of_a_function_and_of_the_no_op(tmp_path):
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
        # longer than the whole (the no-op's server starts in a few ms): the two parts add up, each is positive
        assert figures["first_2xx_ms"] > 0 and figures["imports_ms"] > 0
        assert figures["rest_ms"] == round(figures["first_2xx_ms"] - figures["imports_ms"], 1)
        assert figures["memory_mb_first"] > 0 and figures["memory_mb_after"] > 0
        assert figures["failures"] == 0
    assert len((folder / "starts.csv").read_text().splitlines()) == 1 + 2  # a header, one start each
    assert (folder / "summary.md").read_text().splitlines()[-1].startswith("cold start, slowest function / no-op: ")

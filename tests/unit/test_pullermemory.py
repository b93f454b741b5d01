"""The puller-memory benchmark (visitkit.benchmarks.pullermemory): the batch documents it writes, read back
as the puller reads them; its table; and the committed folder against the memory iteration 7 deploys."""
import store_batch
from visitkit.benchmarks import benchfolder, pullermemory, registry
from visitkit.catalogue import PUSH_FUNCTION
from visitkit.paths import ROOT
from visitkit.settings import load_settings

UNTIL = 1_800_000_000.0


def test_the_ids_are_written_as_the_store_writes_its_batches_and_loaded_back_whole():
    documents = list(pullermemory.batch_documents(store_batch, 2_500, 1000, generation=3, until=UNTIL))
    assert [len(d["ids"]) for d in documents] == [1000, 1000, 500]
    for document in documents:
        assert sum(document["pages"].values()) == len(document["ids"]) and document["writer"] == 3
        assert UNTIL - pullermemory.SPREAD_S <= document["published_from"].timestamp() \
            <= document["published_to"].timestamp() <= UNTIL
    window = store_batch.Window(900)
    window.loaded(UNTIL - 1200, ((d["ids"], d["published_from"].timestamp(), d["published_to"].timestamp())
                                 for d in documents))
    assert len(window) == 2_500 and all(window.refuses(key, UNTIL) for d in documents for key in d["ids"])


def record(peak_mib, deployed="1Gi", deployed_mib=1024):
    phase = {"window_before": 0, "window": 10, "instance_peak_mib": peak_mib, "instance_after_mib": peak_mib}
    return {"idle": {"instance_mib": 77.7}, "phases": {"first load": phase, "retake": {**phase, "window_before": 10}},
            "peak_mib": peak_mib, "deployed": deployed, "deployed_mib": deployed_mib, "headroom": 1.5}


def test_a_peak_over_two_thirds_of_the_memory_deployed_is_below_the_headroom():
    assert pullermemory.fits(record(682.6)) and not pullermemory.fits(record(683.0))
    assert pullermemory.render(record(683.0))[-1] == "| the peak x 1.5 | | | 1,024.5 (beyond the 1,024 deployed) | |"


def test_the_committed_folder_renders_its_table_and_iteration_7_deploys_its_headroom():
    folder = sorted(benchfolder.BENCHMARKS_DIR.glob(f"{pullermemory.KIND}-*/"))[-1]
    written = pullermemory.load(folder)
    assert "\n" + "\n".join(registry.render(folder)) + "\n" in (folder / "summary.md").read_text()
    settings = load_settings(ROOT / written["iteration"])
    assert written["iteration"] == "iterations/iteration-7" and written["ids_written"] == written["ids"]
    # measured at the memory deployed now: a change of it needs the benchmark run again
    assert written["deployed"] == settings.functions[PUSH_FUNCTION].memory
    assert pullermemory.fits(written)


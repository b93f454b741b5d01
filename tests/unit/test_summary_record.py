"""summary.json as a record (visitkit.results.records.Summary): every committed one loads and is written back as
it was, a key the record does not know (or one it needs and does not find) is refused, not dropped, and the
renderers read the record."""
import dataclasses
import json

import pytest

from visitkit.errors import RunError
from visitkit.paths import ROOT
from visitkit.reports import docs, report
from visitkit.results import folder as results
from visitkit.results.records import FORMAT_VERSION, Summary, SummaryError

COMMITTED = sorted(ROOT.glob(f"iterations/*/results/*/{results.SUMMARY}"))
NEWEST = ROOT / "iterations/iteration-1/results/breakpoint-20261125-191233" / results.SUMMARY


def test_there_are_committed_summaries_to_read():
    assert len(COMMITTED) >= 20  # every one rebuilt by `visitkit report` (older shapes: the missing-key tests)


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: f"{path.parents[2].name}/{path.parent.name}")
def test_every_committed_summary_loads_and_is_written_back_as_it_was(path):
    text = path.read_text()
    data = json.loads(text)
    summary = Summary.from_json(data)
    assert summary.to_json() == data
    assert json.dumps(summary.to_json(), indent=2, default=str) == text.rstrip("\n")  # byte for byte, key order too
    assert results.ResultsFolder(path.parent).summary() == summary


def test_a_key_absent_from_an_older_summary_stays_absent_until_it_has_a_value():
    data = json.loads(NEWEST.read_text())
    older = {key: value for key, value in data.items() if key not in ("model_load", "settings_line")}
    summary = Summary.from_json(older)
    assert summary.model_load is None and summary.settings_line is None  # read as the renderers read None
    assert "model_load" not in summary.to_json() and "settings_line" not in summary.to_json()
    summary.model_load = data["model_load"]
    assert summary.to_json()["model_load"] == data["model_load"]


def test_an_unknown_key_is_refused_not_dropped():
    data = json.loads(NEWEST.read_text())
    with pytest.raises(SummaryError, match="keys this kit does not know: headlines"):
        Summary.from_json({**data, "headlines": data["headline"]})


def test_a_missing_key_is_refused():
    data = json.loads(NEWEST.read_text())
    del data["headline"]
    with pytest.raises(SummaryError, match="without headline"):
        Summary.from_json(data)


@pytest.mark.parametrize("version, words", [(None, "format 1; this kit reads format 2 (rebuild it"),
                                            (FORMAT_VERSION + 1, f"format {FORMAT_VERSION + 1}; this kit reads")])
def test_a_summary_of_another_format_is_refused(version, words):
    data = {key: value for key, value in json.loads(NEWEST.read_text()).items() if key != "format_version"}
    if version is not None:
        data["format_version"] = version
    with pytest.raises(SummaryError, match=words.replace("(", r"\(")):
        Summary.from_json(data)


def test_the_folder_names_the_summary_it_cannot_read(tmp_path):
    data = json.loads(NEWEST.read_text())
    (tmp_path / results.SUMMARY).write_text(json.dumps({**data, "headlines": {}}))
    with pytest.raises(RunError, match=f"{tmp_path / results.SUMMARY}: a summary with keys"):
        results.ResultsFolder(tmp_path).summary()


def test_the_docs_read_a_summary_through_the_record(tmp_path):
    folder = tmp_path / "results" / NEWEST.parent.name
    folder.mkdir(parents=True)
    data = json.loads(NEWEST.read_text())
    (folder / results.SUMMARY).write_text(json.dumps(data))
    doc = tmp_path / "README.md"
    doc.write_text(f"<!-- figures\nr: results/{folder.name}\n---\n{{r.summary.store.throughput_per_s:.1f}} msg/s\n"
                   "-->\n<!-- /figures -->\n")
    assert docs.write([doc]) == [doc] and "9.3 msg/s" in doc.read_text()
    (folder / results.SUMMARY).write_text(json.dumps({**data, "headlines": {}}))  # one the record cannot read
    with pytest.raises(docs.DocsError, match=r"README.md:1: .*r \(breakpoint-20261125-191233\): summary.json: a "
                                             "summary with keys this kit does not know: headlines"):
        docs.write([doc])


def test_the_report_reads_the_record():
    summary = results.read_summary(NEWEST)
    lines = report.headline_section(summary, ())
    when = next(line for line in lines if line.startswith("- When"))
    # the knee at 1795634210, the first failure at 1795634351, the load from 1795634155
    assert when == ("- When, into the load: knee 55 s, first failure 196 s, peak RPS 237 s, p95 ceiling 193 s "
                    "(770 users)")
    assert "| 218 / 160.0 | 783 / 169.3 | 203.1 | 10,000 ms | inc-counter | 1,048 s | 4.19 |" in "\n".join(lines)
    later = dataclasses.replace(summary, load={**summary.load, "start": summary.load["start"] + 5})
    assert next(line for line in report.headline_section(later, ()) if line.startswith("- When")).startswith(
        "- When, into the load: knee 50 s,")
    # the committed report was rendered from this summary.json: the record renders it again, to the byte
    plots = {key for key, name in results.PLOTS.items() if (NEWEST.parent / name).exists()}
    assert report.render(summary, plots) == (NEWEST.parent / results.REPORT).read_text()

"""A run's gates (--threshold, --expect) as JUnit XML, which CI systems show as test results: one
testsuite, one testcase per threshold and one for the expected verdict, a <failure> in each that fails.

The attributes are those the JUnit schema CI tools read requires (pytest's junit-10.xsd: a testsuite's name,
tests, failures and errors; a testcase's name). The failure's words are both its `message` and its text:
GitLab, for one, shows the text and ignores the message; it also keys a testcase by classname and name, so
each name is the threshold as given, and classname the iteration and test."""
import xml.etree.ElementTree as ET
from pathlib import Path

from visitkit.results.records import Gates, Summary


def junit_xml(summary: Summary, gates: Gates) -> str:
    """The gates of `summary`'s run as a JUnit XML document."""
    classname = f"visitkit.{summary.iteration}.{summary.test}"
    cases = [(o["threshold"], o["holds"], o["detail"], "threshold") for o in gates["thresholds"]]
    if expectation := gates["expectation"]:
        cases.append((f"verdict is {expectation['expected']}", expectation["holds"],
                      f"the verdict is {expectation['outcome'] or 'not given'}", "verdict"))
    failures = sum(not holds for _, holds, _, _ in cases)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": "0"}  # what testsuites may have too
    root = ET.Element("testsuites", {"name": "visitkit", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": f"{summary.iteration} {summary.test} ({summary.target}): "
                                                      f"{summary.results_dir}", **counts, "skipped": "0"})
    if stopped := gates["stopped_early"]:
        properties = ET.SubElement(suite, "properties")
        for name, value in (("stopped_early_by", stopped["threshold"]), ("stopped_early_at_s", f"{stopped['at_s']:g}")):
            ET.SubElement(properties, "property", {"name": name, "value": value})
    for name, holds, detail, kind in cases:
        case = ET.SubElement(suite, "testcase", {"classname": classname, "name": name})
        if holds:
            ET.SubElement(case, "system-out").text = detail
        else:
            ET.SubElement(case, "failure", {"message": detail, "type": kind}).text = detail
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path: Path, summary: Summary) -> None:
    """`path`: where --junit asked; a run without gates writes an empty suite."""
    gates: Gates = summary.gates or {"passed": True, "thresholds": [], "expectation": None, "abort_on_fail": False,
                                     "stopped_early": None}
    path.write_text(junit_xml(summary, gates), encoding="utf-8")  # as its declaration says

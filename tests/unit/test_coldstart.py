"""The cold-start benchmark's variants: a setting that changes what a function loads is measured as a
function of its own, with that function's request and entry point (the run: tests/integration/test_cold_start.py)."""
from visitkit.benchmarks import coldstart
from visitkit.catalogue import CATALOGUE, PAGE_FUNCTION, PUSH_FUNCTION


def test_the_puller_is_asked_for_its_status_and_the_page_with_its_count_as_the_page():
    assert coldstart.request(coldstart.PULL_STORE) == ("GET", "/", None, {})
    assert coldstart.request(coldstart.PAGE_WITH_COUNT) == coldstart.request(PAGE_FUNCTION)
    assert coldstart.entry_point(coldstart.PULL_STORE) == CATALOGUE[PUSH_FUNCTION].entry_point
    assert coldstart.entry_point(coldstart.PAGE_WITH_COUNT) == CATALOGUE[PAGE_FUNCTION].entry_point
    assert coldstart.entry_point(coldstart.NOOP) == "noop"
    assert coldstart.VARIANTS[coldstart.PULL_STORE][1]["STORE_MODE"] == "pull"
    assert coldstart.VARIANTS[coldstart.PAGE_WITH_COUNT][1] == {"PAGE_EMBEDS_COUNT": "1"}


def test_the_summary_says_what_each_variant_measured():
    record = {"functions": {PAGE_FUNCTION: {}, coldstart.PULL_STORE: {}}}
    [line, _] = coldstart.variant_lines(record)
    assert line.startswith(f"{coldstart.PULL_STORE}: STORE_MODE=pull") and coldstart.PAGE_WITH_COUNT not in line
    assert coldstart.variant_lines({"functions": {PAGE_FUNCTION: {}}}) == []

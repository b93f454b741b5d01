"""infra/'s log exclusions (the log_exclusions variable) drop only entries that say "it worked", and no
log-based metric loses an entry it counts.

The filters are read from infra/logging.tf as Terraform plans them (`terraform console`, offline, with the
stand-in provider scripts/check-infra builds: skipped without it, as tests/unit/test_infra_graph.py) and
evaluated with the kit's small evaluator of the part of Cloud Logging's query language they use
(visitkit.cloud.logquery: comparisons, a parenthesised OR of values, AND, OR, NOT, sample()), on sample
entries: Cloud Run request log entries made from a recorded one (tests/fixtures/logging/) with each status,
and store-inc-counter's "visit message" line with each outcome its code logs, as functions/common.py writes it.

The rule (infra/logging.tf, "Log exclusions"): user-defined log-based metrics are computed from every entry the
Logging API receives, "regardless of any inclusion filters or exclusion filters", unless they are
bucket-scoped (https://cloud.google.com/logging/docs/logs-based-metrics). So an exclusion may match an entry
a metric counts only where that is documented to cost the metric nothing, and only there: the counted lines
visitkit_store_deliveries counts, with both metrics project-scoped. Everything else a metric, an alert or the
runner reads is kept by construction: every 4xx and 5xx (429 included), every entry without a status, every
outcome but counted.
"""
import ast
import json
import re
import subprocess
import uuid

import pytest

from test_infra_graph import offline_terraform_env
from visitkit.catalogue import CATALOGUE, PUSH_FUNCTION
from visitkit.cloud.logquery import Parser, matches, sampled
from visitkit.paths import FUNCTIONS_DIR, INFRA_DIR as INFRA, ROOT

PROJECT = "visitkit-test"
LOGGING_TF = (INFRA / "logging.tf").read_text()
FIXTURE = ROOT / "tests" / "fixtures" / "logging" / "cloud-run-request-log.json"
SETTINGS = ROOT / "iterations" / "iteration-0" / "settings.tfvars.json"
STORE = CATALOGUE[PUSH_FUNCTION].service


# --- the evaluator (visitkit.cloud.logquery) ---------------------------------------------------------------

def test_the_evaluator_reads_googles_example_and_the_subset():
    # The LogExclusion reference's example: "matches 99% of low-severity log entries from Google Cloud Storage
    # buckets: resource.type=gcs_bucket severity<ERROR sample(insertId, 0.99)" (severity as a string here).
    tree = Parser('resource.type="gcs_bucket" severity<"ERROR" sample(insertId, 0.99)').parse()
    assert tree == ("and", [("compare", "resource.type", "=", ["gcs_bucket"]),
                            ("compare", "severity", "<", ["ERROR"]), ("sample", "insertId", 0.99)])
    entry = {"resource": {"type": "cloud_run_revision", "labels": {"service_name": "b"}}, "httpRequest": {"status": 429}}
    assert matches('resource.labels.service_name=("a" OR "b") AND httpRequest.status=429', entry)
    assert not matches('resource.labels.service_name=("a" OR "c")', entry)
    assert matches("httpRequest.status>=400 AND httpRequest.status<500", entry)
    assert not matches("httpRequest.status>=200 AND httpRequest.status<400", entry)
    assert not matches("jsonPayload.outcome=\"counted\"", entry)  # a missing field matches nothing
    assert matches('NOT jsonPayload.outcome="counted"', entry)
    assert matches('httpRequest.status=200 OR resource.type="cloud_run_revision"', entry)
    with pytest.raises(ValueError, match="operator != is not in the subset"):
        Parser("httpRequest.status!=200").parse()  # outside the subset: refused rather than guessed


def test_sample_picks_its_share_the_same_way_each_time():
    ids = [uuid.uuid4().hex for _ in range(20000)]
    share = sum(sampled(i, 0.9) for i in ids) / len(ids)
    assert share == pytest.approx(0.9, abs=0.01)
    assert [sampled(i, 0.3) for i in ids[:50]] == [sampled(i, 0.3) for i in ids[:50]]


# --- the sample entries ------------------------------------------------------------------------------

def request_entry(service, status, insert_id=None):
    """A Cloud Run request log entry of one of the deployment's services, as the recorded one."""
    entry = json.loads(FIXTURE.read_text())
    entry["insertId"] = insert_id or uuid.uuid4().hex[:24]
    entry["logName"] = f"projects/{PROJECT}/logs/run.googleapis.com%2Frequests"
    entry["resource"]["labels"].update(project_id=PROJECT, service_name=service,
                                       configuration_name=service, revision_name=f"{service}-00001-abc")
    entry["timestamp"] = "2026-11-25T12:00:01.000000Z"
    if status is None:
        del entry["httpRequest"]["status"]
    else:
        entry["httpRequest"]["status"] = status
        entry["severity"] = "ERROR" if status >= 500 else "WARNING" if status >= 400 else "INFO"
    return entry


def store_outcomes():
    """{outcome: severity} of store-inc-counter's "visit message" lines, read from its code."""
    tree = ast.parse((FUNCTIONS_DIR / "store_inc_counter.py").read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "log" and len(node.args) >= 2 \
                and getattr(node.args[1], "value", None) == "visit message":
            outcome = next(k.value for k in node.keywords if k.arg == "outcome")
            for constant in ast.walk(outcome):
                if isinstance(constant, ast.Constant) and isinstance(constant.value, str):
                    found[constant.value] = node.args[0].value
    return found


def store_line(outcome, severity, monkeypatch, capsys):
    """store-inc-counter's line for one delivery, as functions/common.py writes it and Cloud Run stores it:
    severity lifted into the entry, the rest its jsonPayload, logged to run.googleapis.com/stdout."""
    import common

    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    common.log(severity, "visit message", outcome=outcome, message_id="2070443601311540",
               visit_id="1b4e28ba-2fa1-11d2-883f-0016d3cca427", visit_type="home")
    fields = json.loads(capsys.readouterr().out)
    entry = request_entry(STORE, 200)
    del entry["httpRequest"]
    entry["logName"] = f"projects/{PROJECT}/logs/run.googleapis.com%2Fstdout"
    entry["severity"] = fields.pop("severity")
    entry["jsonPayload"] = fields
    return entry


@pytest.fixture
def entries(monkeypatch, capsys):
    """{name: (entry, kept)}: every kind of entry the functions make; kept says whether it must be stored
    whatever log_exclusions says (a 4xx, a 5xx, no status, an outcome but counted)."""
    outcomes = store_outcomes()
    assert set(outcomes) == {"counted", "already_counted", "malformed", "failed"}, outcomes
    found = {}
    for function in CATALOGUE.values():
        for status in (200, 202, 204, 302, 304, 400, 403, 404, 405, 429, 499, 500, 503, 504, None):
            found[f"{function.name} {status}"] = (request_entry(function.service, status),
                                                  status is None or status >= 400)
    for outcome, severity in outcomes.items():
        found[f"{outcome} line"] = (store_line(outcome, severity, monkeypatch, capsys), outcome != "counted")
    instance = store_line("counted", "INFO", monkeypatch, capsys)
    instance["jsonPayload"] = {"message": "instance started", "service": STORE, "threads": 80}
    found["instance started line"] = (instance, True)
    return found


# --- the filters as Terraform plans them ---------------------------------------------------------------

@pytest.fixture(scope="module")
def terraform(tmp_path_factory):
    """(terraform, its environment): offline, with the stand-in provider; skips without them."""
    return offline_terraform_env(tmp_path_factory.mktemp("terraform"))


def planned_filters(terraform, log_exclusions=None):
    """{"metrics": {name: filter}, "exclusions": {name: filter}} of infra/logging.tf's locals."""
    terraform, env = terraform
    args = [terraform, f"-chdir={INFRA}", "console", f"-var=project_id={PROJECT}", f"-var-file={SETTINGS}"]
    if log_exclusions is not None:
        args.append("-var=log_exclusions=" + json.dumps(log_exclusions))
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60,
                            input="jsonencode({metrics = local.log_metric_filters, exclusions = local.log_exclusion_filters})\n")
    assert result.returncode == 0, result.stderr
    return json.loads(json.loads(result.stdout.strip()))


def metrics_are_project_scoped():
    """No google_logging_metric of infra/logging.tf names a bucket_name (a bucket-scoped metric would not see
    what an exclusion drops)."""
    blocks = re.findall(r'^resource "google_logging_metric" "\w+" \{\n(.*?)^\}', LOGGING_TF, re.M | re.S)
    assert len(blocks) == 3  # requests_429, store_deliveries and a pull store's store_batch_visits
    return not any(re.search(r"^\s*bucket_name\s*=", block, re.M) for block in blocks)


def push_refusals_filter():
    """The query the runner reads store-inc-counter's refused pushes with, from the stored request logs."""
    from visitkit.cloud import gcp

    class Session:
        def post(self, url, timeout, json):
            self.body = json
            raise OSError("no network here")

    session = Session()
    assert gcp.push_refusals(session, PROJECT, "2026-11-25T12:00:00Z") == 0
    return session.body["filter"]


def check_the_rule(filters, entries):
    """The rule, for one plan's filters: the list of what breaks it (empty when it holds)."""
    broken = []
    project_scoped = metrics_are_project_scoped()
    readers = {"the runner's push_refusals": push_refusals_filter()}
    for name, (entry, kept) in entries.items():
        dropped_by = [e for e, text in filters["exclusions"].items() if matches(text, entry, sample="any")]
        if not dropped_by:
            continue
        if kept:
            broken.append(f"{name} is matched by {dropped_by}: it must always be stored")
        for metric, text in filters["metrics"].items():
            if matches(text, entry):
                documented = (metric == "store_deliveries" and entry.get("jsonPayload", {}).get("outcome") == "counted"
                              and project_scoped)
                if not documented:
                    broken.append(f"{name}, counted by {metric}, is matched by {dropped_by}")
        for reader, text in readers.items():
            if matches(text, entry):
                broken.append(f"{name}, read by {reader}, is matched by {dropped_by}")
    return broken


@pytest.mark.timeout(120)
def test_by_default_nothing_is_excluded(terraform):
    assert planned_filters(terraform)["exclusions"] == {}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shares", [
    {"successful_requests_percent": 90, "counted_deliveries_percent": 90},
    {"successful_requests_percent": 100, "counted_deliveries_percent": 100},
    {"successful_requests_percent": 1, "counted_deliveries_percent": 0},
    {"successful_requests_percent": 0, "counted_deliveries_percent": 99},
], ids=lambda s: f"{s['successful_requests_percent']}-{s['counted_deliveries_percent']}")
def test_no_metric_loses_an_entry_and_only_success_is_dropped(terraform, entries, shares):
    filters = planned_filters(terraform, shares)
    assert set(filters["metrics"]) == {"requests_429", "store_deliveries"}
    assert check_the_rule(filters, entries) == []
    # ...and each exclusion does drop what it is for: every 2xx and 3xx of every service, every counted line.
    expected = {"visitkit-successful-requests": shares["successful_requests_percent"],
                "visitkit-counted-deliveries": shares["counted_deliveries_percent"]}
    assert set(filters["exclusions"]) == {name for name, percent in expected.items() if percent}
    for name, (entry, kept) in entries.items():
        if not kept:
            assert any(matches(text, entry, sample="any") for text in filters["exclusions"].values()) == \
                bool(expected["visitkit-counted-deliveries" if "line" in name else "visitkit-successful-requests"]), name


@pytest.mark.timeout(120)
def test_the_shares_are_what_the_variable_says(terraform):
    filters = planned_filters(terraform, {"successful_requests_percent": 90, "counted_deliveries_percent": 25})
    for name, share, make in (("visitkit-successful-requests", 0.9, lambda i: request_entry("get-counter", 200, i)),
                              ("visitkit-counted-deliveries", 0.25, None)):
        assert f"sample(insertId, {share})" in filters["exclusions"][name]
        if make:
            found = [matches(filters["exclusions"][name], make(uuid.uuid4().hex)) for _ in range(5000)]
            assert sum(found) / len(found) == pytest.approx(share, abs=0.02)
    full = planned_filters(terraform, {"successful_requests_percent": 100, "counted_deliveries_percent": 100})
    assert not any("sample(" in text for text in full["exclusions"].values())  # 100: every matching entry


def test_the_rule_catches_an_exclusion_that_drops_what_a_metric_counts(entries):
    """The check itself: exclusions that would cost a metric, an alert or the runner an entry are caught."""
    metrics = {"requests_429": 'resource.type="cloud_run_revision" AND httpRequest.status=429',
               "store_deliveries": 'resource.type="cloud_run_revision" AND jsonPayload.message="visit message"'}
    for bad, caught in (
            ("httpRequest.status>=200 AND httpRequest.status<500 AND sample(insertId, 0.9)", "429"),  # 4xx too
            ('jsonPayload.message="visit message" AND sample(insertId, 0.9)', "failed line"),  # every outcome
            ('resource.type="cloud_run_revision" AND httpRequest.status>=400', "403"),  # the runner's 403s
    ):
        broken = check_the_rule({"metrics": metrics, "exclusions": {"bad": bad}}, entries)
        assert any(caught in line for line in broken), (bad, broken)


"""The public API fuzzed from its OpenAPI document (functions/openapi.yaml) with schemathesis,
against the real local stack: no 5xx, every answer conforms to the document, and a request that is
refused publishes nothing, while every 202 ends up stored exactly once."""
import uuid

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode, checks

from helpers import relay_figures, settle
from visitkit.catalogue import PAGES, PUBLIC_PATHS, visits
from visitkit.paths import FUNCTIONS_DIR

is_visit_id = visits.is_visit_id

DOCUMENT = FUNCTIONS_DIR / "openapi.yaml"
schema = schemathesis.openapi.from_path(DOCUMENT)
EXAMPLES = 25  # per operation: bounded, so CI stays short
CHECKS = [checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
          checks.response_schema_conformance, checks.response_headers_conformance,
          checks.negative_data_rejection]
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


def test_the_document_describes_the_functions_public_paths_and_pages():
    document = schema.raw_schema
    assert set(document["paths"]) == set(PUBLIC_PATHS)
    assert document["components"]["schemas"]["Page"]["enum"] == list(PAGES)


@schema.parametrize()
@FUZZ
def test_every_answer_conforms(case, stack):
    # That a refused call publishes nothing is checked below, where every message Pub/Sub pushed is counted.
    case.call_and_validate(base_url=stack.base_url, checks=CHECKS, timeout=30)


def test_fuzzed_visits_are_stored_exactly_once_and_nothing_else_counts(stack):
    """Valid and invalid calls to inc-counter, generated from the document: the totals grow by
    exactly the visit ids acknowledged, page by page, and Pub/Sub received one message per 202 (a
    refused call published nothing, whatever page it named)."""
    before, acknowledged = stack.totals(), {page: set() for page in PAGES}
    acked_before, answers_202 = relay_figures(stack)["acked"], []
    operation = schema["/inc-counter"]["POST"]

    @given(case=operation.as_strategy() | operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))
    @FUZZ
    def visit(case):
        if case.query and is_visit_id(case.query.get("visit_id")):
            # Derandomized generation repeats the ids of the test above, which were counted there
            # (an id counts once, ever): a valid id becomes a new one.
            case.query["visit_id"] = str(uuid.uuid4())
        response = case.call(base_url=stack.base_url, timeout=30)
        assert response.status_code < 500
        if response.status_code == 202:
            answers_202.append(case)
            reply = response.json()
            acknowledged[reply["visit_type"]].add(reply["visit_id"])
            if case.query and "visit_id" in case.query:
                assert reply["visit_id"] == case.query["visit_id"]

    visit()
    expected = {page: before[page] + len(acknowledged[page]) for page in PAGES}
    assert sum(map(len, acknowledged.values())) > 0
    settle(stack, expected)  # every one stored, then nothing more once the deliveries stop
    assert relay_figures(stack)["acked"] - acked_before == len(answers_202)

"""What a visit sends to its visitor, in bytes, for the egress the model prices: the answers of the real handlers as
the response-bytes benchmark measured them (scripts/benchmark-response-bytes, the newest benchmarks/response-bytes-*
folder), headers and body, gzipped where the function compresses and the client accepts it (every browser does).

A visit gets one page (the pages' mean: the visitor picks them alike), inc-counter's answer and get-counter's for each
of its reads. Pushes and pulls stay inside Google's network: no egress."""
import json
from functools import cache
from pathlib import Path
from typing import Any

from visitkit.catalogue import PAGE_FUNCTION, PUBLISHER_FUNCTION, READER_FUNCTION
from visitkit.errors import VisitkitError
from visitkit.paths import ROOT

BENCHMARKS = ROOT / "benchmarks"
ENCODING = "gzip"  # what a browser's Accept-Encoding asks for


def newest() -> Path:
    folders = sorted(BENCHMARKS.glob("response-bytes-*/benchmark.json"))
    if not folders:
        raise VisitkitError("no benchmarks/response-bytes-* folder: run scripts/benchmark-response-bytes")
    return folders[-1]


@cache
def measured(path: Path | None = None) -> dict[str, Any]:
    return json.loads((path or newest()).read_text())


def answer_bytes(function: str, encoding: str = ENCODING) -> float:
    """One answer of `function` on the wire (status line, headers, body), the mean over its measured answers."""
    answers = measured()["answers"][function][encoding]
    return sum(answer["header_bytes"] + answer["body_bytes"] for answer in answers) / len(answers)


def per_visit(reads_per_visit: int, encoding: str = ENCODING) -> float:
    """Bytes one visit sends its visitor: a page, inc-counter's answer, reads_per_visit of get-counter's."""
    return (answer_bytes(PAGE_FUNCTION, encoding) + answer_bytes(PUBLISHER_FUNCTION, encoding)
            + reads_per_visit * answer_bytes(READER_FUNCTION, encoding))

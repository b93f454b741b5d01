"""What a visit downloads: the answers of the real handlers of the public functions, each sent by its own
functions-framework instance of the local stack (emulators up), as bytes on the wire, with and without
Accept-Encoding: gzip. Per function and encoding, every answer's status line and headers (HTTP/1.1, up
to the blank line that ends them) and its body, as the instance sent them: serve-page's page for each
page of the catalogue, get-counter's JSON total and inc-counter's 202 for each page too. A gzipped body
is checked to unzip to the page sent without it. Also serve-page's CPU per request from its instance's
CPU time, without gzip and with it (each page compressed once, then served from memory), and what one
compression of each page costs.

`benchmark(...)` writes a results folder under benchmarks/ (visitkit.benchmarks.benchfolder): benchmark.json
(FORMAT; "answers" is what model/response_bytes.py reads), summary.md, heads.txt (every answer's request
and its status line and headers, as received) and README.md (what the figures leave out, and whether
Google's front end would compress for us).
"""
import datetime
import gzip
import http.client
import socket
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from visitkit.benchmarks import benchfolder, coldstart, hotpath
from visitkit.catalogue import CATALOGUE, PAGE_FUNCTION, PAGES, PUBLIC_PATHS, PUBLISHER_FUNCTION, READER_FUNCTION
from visitkit.errors import VisitkitError
from visitkit.twin.stack import LocalStack

FORMAT = 1
KIND = "response-bytes"
# encoding -> the Accept-Encoding its client sends (None: no such header)
ENCODINGS: dict[str, str | None] = {"identity": None, "gzip": "gzip"}
DEFAULT_REQUESTS = 2000  # serve-page requests per encoding for its CPU per request
ROUNDS = 4  # the CPU requests in rounds, the encodings taking turns: a busy spell of the machine falls on both
COMPRESSIONS = 200  # timed compressions of each page
TIMEOUT_S = 30
PUBLIC = tuple(PUBLIC_PATHS.values())  # the functions a browser calls
README = """# response-bytes

What a visit downloads, per answer of each public function, as its functions-framework instance sent it
(`scripts/benchmark-response-bytes`; figures in `summary.md`, every answer's head in `heads.txt`).

What the figures leave out: TLS records, TCP/IP framing and retransmissions; the headers' form on the way
to a browser, which speaks HTTP/2 or HTTP/3 to Google's front end (headers compressed, HPACK/QPACK, where
these are HTTP/1.1 text), and what the front end changes in them (it answers for the instance: its own
`Server`, `Date`, hop-by-hop headers such as `Connection`, and maybe `Alt-Svc` and trace headers; not
verified here). So the header bytes are a stand-in for the front end's; the body bytes are what it carries.
The JSON bodies hold numbers that are small here and longer in production: get-counter's count (a fresh
stack's few visits) and inc-counter's Pub/Sub message id (the emulator counts from 1; Pub/Sub's ids are
longer, about 16 digits, not verified here): a few to about 15 bytes more per answer.

## Does Google's front end compress a Cloud Run answer by itself? No (as far as could be read)

Read on 2026-11-28 with the project's search tool:

- No Cloud Run page found says that its front end compresses answers. Google's docs say so for App Engine,
  which takes Accept-Encoding off the request before the app sees it: "the server may automatically send a
  gzipped response depending on the value of the Accept-Encoding request header. The application itself
  does not need to know which content encodings the client can accept."
  (https://cloud.google.com/appengine/docs/standard/reference/request-headers). A Cloud Run service
  receives the client's Accept-Encoding itself.
- Google's compression for an HTTP answer is "Dynamic compression", a Cloud CDN feature of a backend
  service of the external Application Load Balancer, switched on per backend (compressionMode AUTOMATIC),
  with "a Cloud CDN-enabled backend" required (https://cloud.google.com/cdn/docs/dynamic-compression). The
  project's optional load balancer (infra/edge.tf) has no Cloud CDN and sets no compression mode.
- Users who measured Cloud Run found no compression: a Cloud Run service URL asked with
  `Accept-Encoding: gzip, br` answered without Content-Encoding, Content-Length 1,162,734, "neither Starlet
  nor Cloud Run's front end compresses" (https://github.com/perldoc-jp/perldoc.jp/issues/84, 2026-09-17,
  translated); "Cloud Run doesn't include a content-encoding=gzip header in the response. AppEngine adds
  this automatically." (https://github.com/snowplow/snowplow-gtm-server-side-client/issues/34, 2023-01-25).

Unverified by Google's own words: no Google page states that Cloud Run does not compress. So serve-page
compresses its page itself; get-counter's and inc-counter's JSON bodies (tens of bytes) would not shrink
(gzip's own header and trailer take 18 bytes), so they go as they are.
"""


def read_answer(stream: Any) -> tuple[bytes, bytes]:
    """(head, body) of one HTTP/1.1 answer read from a binary stream: the status line and headers up to
    and with the blank line that ends them, exactly as received, and the Content-Length bytes after them."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = stream.readline()
        if not line:
            raise VisitkitError(f"the answer ended in its headers: {head!r}")
        head += line
    fields = header_fields(head)
    if "content-length" not in fields:  # a chunked body's size on the wire would need its framing counted
        raise VisitkitError(f"an answer without Content-Length, which this benchmark does not count: {head!r}")
    body = stream.read(int(fields["content-length"]))
    return head, body


def header_fields(head: bytes) -> dict[str, str]:
    """{lowercased name: value} of an answer's head (its status line left out)."""
    fields = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            fields[name.strip().lower()] = value.strip()
    return fields


def exchange(port: int, method: str, target: str, accept_encoding: str | None) -> tuple[bytes, bytes]:
    """(head, body) of one request to the instance listening on `port`, over a connection of its own."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    if accept_encoding is not None:
        lines.append(f"Accept-Encoding: {accept_encoding}")
    if method == "POST":
        lines.append("Content-Length: 0")
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock, sock.makefile("rb") as stream:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        return read_answer(stream)


def requests_of(function: str, page: str) -> tuple[str, str]:
    """(method, target) of a function's request for a page, as the page sends it."""
    path = CATALOGUE[function].path
    if function == PAGE_FUNCTION:
        return "GET", f"{path}?view={page}"
    if function == READER_FUNCTION:
        return "GET", f"{path}?visit_type={page}"
    if function == PUBLISHER_FUNCTION:
        return "POST", f"{path}?visit_type={page}&visit_id={uuid.uuid4()}"
    raise VisitkitError(f"{function}: not a public function")


def answers_of(ports: Mapping[str, int], pages: Sequence[str] = PAGES
               ) -> tuple[dict[str, dict[str, list[dict[str, Any]]]], list[str]]:
    """({function: {encoding: [an answer's figures, a page each]}}, every answer's request and head)."""
    answers: dict[str, dict[str, list[dict[str, Any]]]] = {}
    heads = []
    for function, port in ports.items():
        answers[function] = {}
        plain: dict[str, bytes] = {}
        for encoding, accept_encoding in ENCODINGS.items():
            answers[function][encoding] = []
            for page in pages:
                method, target = requests_of(function, page)
                head, body = exchange(port, method, target, accept_encoding)
                status = int(head.split(b" ", 2)[1])
                if not 200 <= status < 300:
                    raise VisitkitError(f"{function}: {method} {target} answered {status}: {head!r} {body[:200]!r}")
                content_encoding = header_fields(head).get("content-encoding")
                if encoding == "identity":
                    plain[page] = body
                elif content_encoding == "gzip" and function == PAGE_FUNCTION and gzip.decompress(body) != plain[page]:
                    raise VisitkitError(f"{function}: the gzipped {page} is not the page sent without gzip")
                answers[function][encoding].append({
                    "request": f"{method} {target}", "status": status, "content_encoding": content_encoding,
                    "header_bytes": len(head), "body_bytes": len(body)})
                sent = f"Accept-Encoding: {accept_encoding}" if accept_encoding else "no Accept-Encoding"
                heads.append(f"### {function} {encoding}: {method} {target} ({sent}); body {len(body)} bytes\n"
                             + head.decode("latin-1").replace("\r\n", "\n"))
    return answers, heads


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) so far of an instance: its process and its children (gunicorn's worker)."""
    root = psutil.Process(pid)
    return sum(sum(p.cpu_times()[:2]) for p in (root, *root.children(recursive=True)))


def cpu_ms_per_request(port: int, pid: int, requests: int, pages: Sequence[str] = PAGES,
                       rounds: int = ROUNDS) -> dict[str, float]:
    """{encoding: serve-page's CPU ms per request}: `requests` pages each (all pages in turn) over one kept-alive
    connection, in `rounds` rounds in which the encodings take turns."""
    spent = dict.fromkeys(ENCODINGS, 0.0)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        for _ in range(rounds):
            for encoding, accept_encoding in ENCODINGS.items():
                headers = {"Accept-Encoding": accept_encoding} if accept_encoding else {}
                before = cpu_seconds(pid)
                for n in range(requests // rounds):
                    connection.request("GET", requests_of(PAGE_FUNCTION, pages[n % len(pages)])[1], headers=headers)
                    answer = connection.getresponse()
                    answer.read()
                    if answer.status != 200:
                        raise VisitkitError(f"{PAGE_FUNCTION} answered {answer.status} while its CPU was measured")
                spent[encoding] += cpu_seconds(pid) - before
    finally:
        connection.close()
    return {encoding: round(seconds * 1000 / (requests // rounds * rounds), 3) for encoding, seconds in spent.items()}


def compression_ms(page: bytes, times: int = COMPRESSIONS) -> float:
    """CPU ms of one gzip compression of a page as serve-page makes it (gzip.compress, its default level)."""
    started = time.process_time()
    for _ in range(times):
        gzip.compress(page, mtime=0)
    return (time.process_time() - started) * 1000 / times


def measure(requests: int = DEFAULT_REQUESTS) -> tuple[dict[str, Any], list[str]]:
    """(the record's measured part, every answer's head) from a local stack started for it."""
    stack = LocalStack(tempfile.mkdtemp(prefix="bench-response-bytes-"))
    stack.up(hotpath.bench_settings(), port=0)
    try:
        state = stack.state()
        assert state is not None, "the stack is up"
        ports = {p["name"].removesuffix("-0"): p["port"] for p in state["processes"]
                 if p["name"] in {f"{function}-0" for function in PUBLIC}}
        for function in PUBLIC:  # a first Firestore read or publish can be slow: answered before measuring
            coldstart.warm_up(f"127.0.0.1:{ports[function]}", function)
        answers, heads = answers_of({function: ports[function] for function in PUBLIC})
        pages = {page: exchange(ports[PAGE_FUNCTION], "GET", requests_of(PAGE_FUNCTION, page)[1], None)[1]
                 for page in PAGES}
        cpu = cpu_ms_per_request(ports[PAGE_FUNCTION], stack.instance_pid(f"{PAGE_FUNCTION}-0"), requests)
        compress = {page: round(compression_ms(body), 3) for page, body in pages.items()}
        return {"answers": answers, "page_cpu_ms": {"per_request": cpu, "requests": requests,
                                                    "compression_once": compress}}, heads
    finally:
        stack.down()


def benchmark(requests: int = DEFAULT_REQUESTS, out_root: str | Path = benchfolder.BENCHMARKS_DIR,
              now: Callable[[], datetime.datetime] = datetime.datetime.now) -> tuple[Path, dict[str, Any]]:
    """The public functions' answers in bytes, and serve-page's CPU for gzip; returns (results folder, record)."""
    started = now()
    with benchfolder.new_folder(KIND, out_root, started) as folder:
        measured, heads = measure(requests)
        record = {"format": FORMAT, "benchmark": KIND, "when": started.isoformat(timespec="seconds"),
                  "machine": benchfolder.machine(), "encodings": ENCODINGS, **measured}
        (folder / "heads.txt").write_text("\n".join(heads))
        (folder / "README.md").write_text(README)
        benchfolder.write(folder, record, summary_lines(record, folder.name))
    return folder, record


def load(folder: str | Path) -> dict[str, Any]:
    return benchfolder.load(folder, KIND, FORMAT)


def mean_bytes(record: Mapping[str, Any], function: str, encoding: str) -> tuple[float, float]:
    """(header bytes, body bytes) of one answer of a function, the mean over its pages."""
    answers = record["answers"][function][encoding]
    return (statistics.mean(a["header_bytes"] for a in answers), statistics.mean(a["body_bytes"] for a in answers))


def render(record: Mapping[str, Any]) -> list[str]:
    """The Markdown table of a record: each public function's answer, mean bytes, per encoding; and a visit
    with one read of its count: one answer of each (the cost model counts a visit's reads itself)."""
    encodings = list(record["encodings"])
    lines = ["| answer | " + " | ".join(f"{e}: headers | {e}: body | {e}: total" for e in encodings) + " |",
             "|---|" + "---:|" * 3 * len(encodings)]
    visit = dict.fromkeys(encodings, 0.0)
    for function in record["answers"]:
        cells = []
        for encoding in encodings:
            head, body = mean_bytes(record, function, encoding)
            visit[encoding] += head + body
            cells += [f"{head:,.0f}", f"{body:,.0f}", f"{head + body:,.0f}"]
        lines.append(f"| {function} | " + " | ".join(cells) + " |")
    totals = [cell for e in encodings for cell in ("", "", f"{visit[e]:,.0f}")]
    lines.append("| a visit with one get-counter read: one answer of each | " + " | ".join(totals) + " |")
    return lines


def summary_lines(record: Mapping[str, Any], name: str) -> list[str]:
    machine, cpu = record["machine"], record["page_cpu_ms"]
    per_request, compress = cpu["per_request"], cpu["compression_once"]
    sent = {e: f"Accept-Encoding: {a}" if a else "no Accept-Encoding" for e, a in record["encodings"].items()}
    return [f"# Response bytes ({name})", "",
            "Each public function's answers as its functions-framework instance sent them (the local stack, "
            f"emulators up), a request per page ({'; '.join(e + ': ' + sent[e] for e in sent)}): mean bytes per "
            "answer, the status line and headers (HTTP/1.1) and the body; bytes on the wire, leaving out TLS, "
            "TCP/IP and what Google's front end changes in the headers (README.md).", "",
            *render(record), "",
            f"serve-page's CPU per request, {cpu['requests']:,} pages each, its instance's CPU time "
            f"({machine['processor']}, {machine['cores']} cores, Python {machine['python']}): "
            + ", ".join(f"{e} {ms:.3f} ms" for e, ms in per_request.items())
            + f"; one gzip compression of a page, done once per page text and kept: "
              f"{statistics.mean(compress.values()):.3f} ms (mean over the pages)."]

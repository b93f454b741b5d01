"""The response-bytes benchmark's counting, checks and results folder (the stack stubbed: its run is
scripts/benchmark-response-bytes itself; the answers are read over real sockets here)."""
import datetime
import gzip
import io
import socket
import threading

import pytest

from visitkit.benchmarks import registry, responsebytes
from visitkit.errors import VisitkitError

STARTED = datetime.datetime(2026, 11, 28, 20, 0, 0)
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\n"


def test_an_answer_is_counted_as_its_head_to_the_blank_line_and_its_content_length_bytes():
    head, body = responsebytes.read_answer(io.BytesIO(HEAD + b"hello" + b"HTTP/1.1 next answer"))
    assert (head, body) == (HEAD, b"hello")


def test_a_chunked_answer_is_refused_rather_than_counted_without_its_framing():
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    with pytest.raises(VisitkitError, match="without Content-Length"):
        responsebytes.read_answer(io.BytesIO(chunked))


@pytest.fixture
def server():
    """A one-answer-per-connection server on a free port: (its port, the requests it received)."""
    received, listener = [], socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                request = b""
                while not request.endswith(b"\r\n\r\n"):
                    request += connection.recv(4096)
                received.append(request.decode())
                connection.sendall(HEAD + b"hello")

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1], received
    listener.close()


def test_only_the_gzip_client_sends_accept_encoding(server):
    port, received = server
    assert responsebytes.exchange(port, "GET", "/app?view=home", None) == (HEAD, b"hello")
    assert responsebytes.exchange(port, "POST", "/inc-counter?visit_type=home", "gzip") == (HEAD, b"hello")
    assert "accept-encoding" not in received[0].lower()
    assert "\r\nAccept-Encoding: gzip\r\n" in received[1] and "\r\nContent-Length: 0\r\n" in received[1]


def answering(pages, gzipped_page=None, status=200):
    """A stand-in for exchange: serve-page's page (gzipped when asked, or `gzipped_page` then), JSON otherwise."""
    def exchange(port, method, target, accept_encoding):
        if "view=" not in target:
            return f"HTTP/1.1 {status} X\r\nContent-Length: 9\r\n\r\n".encode(), b'{"n": 12}'
        page = pages[target.split("view=")[1]]
        if accept_encoding:
            body = gzip.compress(gzipped_page or page)
            return f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {len(body)}\r\n\r\n".encode(), body
        return f"HTTP/1.1 200 OK\r\nContent-Length: {len(page)}\r\n\r\n".encode(), page
    return exchange


def test_each_answer_is_recorded_per_function_encoding_and_page(monkeypatch):
    pages = {"home": b"<p>home</p>" * 50, "jobs": b"<p>jobs</p>" * 60}
    monkeypatch.setattr(responsebytes, "exchange", answering(pages))
    answers, heads = responsebytes.answers_of({"serve-page": 1, "get-counter": 2}, pages=list(pages))
    page = answers["serve-page"]
    assert [a["body_bytes"] for a in page["identity"]] == [550, 660]
    assert [a["content_encoding"] for a in page["gzip"]] == ["gzip", "gzip"]
    assert page["gzip"][1]["body_bytes"] == len(gzip.compress(pages["jobs"]))
    gzipped_home = len(gzip.compress(pages["home"]))
    assert page["gzip"][0]["header_bytes"] == len(
        f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {gzipped_home}\r\n\r\n")
    assert answers["get-counter"]["gzip"][0]["request"] == "GET /get-counter?visit_type=home"
    assert len(heads) == 2 * 2 * 2  # every answer's head, for the reader of the folder


def test_a_gzipped_page_that_is_not_the_page_or_a_failed_answer_stops_the_run(monkeypatch):
    pages = {"home": b"<p>home</p>"}
    monkeypatch.setattr(responsebytes, "exchange", answering(pages, gzipped_page=b"<p>another</p>"))
    with pytest.raises(VisitkitError, match="not the page sent without gzip"):
        responsebytes.answers_of({"serve-page": 1}, pages=list(pages))
    monkeypatch.setattr(responsebytes, "exchange", answering(pages, status=503))
    with pytest.raises(VisitkitError, match="answered 503"):
        responsebytes.answers_of({"get-counter": 1}, pages=list(pages))


def answer(header_bytes, body_bytes, encoding=None):
    return {"request": "GET /", "status": 200, "content_encoding": encoding, "header_bytes": header_bytes,
            "body_bytes": body_bytes}


MEASURED = {
    "answers": {"serve-page": {"identity": [answer(500, 10000), answer(502, 10002)],
                               "gzip": [answer(524, 3900, "gzip"), answer(526, 3902, "gzip")]},
                "get-counter": {"identity": [answer(290, 40)], "gzip": [answer(290, 40)]},
                "inc-counter": {"identity": [answer(280, 95)], "gzip": [answer(280, 95)]}},
    "page_cpu_ms": {"per_request": {"identity": 1.1, "gzip": 1.05}, "requests": 2000,
                    "compression_once": {"home": 0.35, "jobs": 0.37}}}


def test_the_run_writes_a_folder_its_loader_and_the_registry_read_back(tmp_path, monkeypatch):
    monkeypatch.setattr(responsebytes, "measure", lambda requests: (MEASURED, ["### a head"]))
    folder, record = responsebytes.benchmark(out_root=tmp_path, now=lambda: STARTED)
    assert folder == tmp_path / "response-bytes-20261128-200000" and responsebytes.load(folder) == record
    assert record["encodings"] == {"identity": None, "gzip": "gzip"}
    assert registry.render(folder) == responsebytes.render(record)  # the docs' table, from the record alone
    summary = (folder / "summary.md").read_text()
    assert "\n| serve-page | 501 | 10,001 | 10,502 | 525 | 3,901 | 4,426 |\n" in summary  # means over the pages
    # a visit with one read: the page, get-counter's answer and inc-counter's
    assert "| a visit with one get-counter read: one answer of each |  |  | 11,207 |  |  | 5,131 |" in summary
    assert "identity 1.100 ms, gzip 1.050 ms" in summary and "0.360 ms (mean over the pages)" in summary
    assert "https://cloud.google.com/cdn/docs/dynamic-compression" in (folder / "README.md").read_text()
    assert (folder / "heads.txt").read_text() == "### a head"

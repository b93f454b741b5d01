"""The Locust suite against the real local stack: the ledger of every visit matches what Firestore
stored, visit id by visit id (in distributed mode: test_distributed.py)."""
import contextlib
import http.server
import json
import subprocess
import sys
import threading
import time

import pytest

from helpers import settle

from visitkit.results import audit
from visitkit.runs.config import LoadPlan
from visitkit.catalogue import stored_visits
from visitkit.paths import LOCUST_DIR


@pytest.mark.slow
def test_the_ledger_matches_what_was_stored(stack, tmp_path):
    before = stack.totals()
    load = LoadPlan("breakpoint", shape_set="spawn_rate=4,duration_s=8,step_s=2")
    command = load.locust_command(stack.base_url, tmp_path)
    subprocess.run(command, check=True, timeout=120, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ledger = json.loads((tmp_path / "ledger.json").read_text())
    acknowledged = ledger["acknowledged"]
    assert sum(acknowledged.values()) > 0 and set(acknowledged) <= set(before)
    assert ledger["unanswered"] == {}  # users finish their visit
    ids = audit.visit_ids(ledger)
    assert len(ids) == sum(ledger["sent"].values()) and {outcome for _, outcome in ids.values()} <= set(audit.OUTCOMES)
    # Every acknowledged visit stored, and no more than the ambiguous (5xx) ones on top.
    after = settle(stack, {page: before[page] + acknowledged.get(page, 0) for page in before},
                   {page: before[page] + acknowledged.get(page, 0) + ledger["failed"].get(page, 0) for page in before})
    # And id by id: each acknowledged visit has its marker, and the shards hold nothing else.
    record = audit.run(ledger, "exact", lambda visit_ids: stored_visits(stack.firestore(), visit_ids))
    rows = audit.exact_accounting(ledger, record, before, after)
    assert rows["total"]["lost"] == 0 and rows["total"]["duplicated"] == 0
    assert rows["total"]["acknowledged_stored"] == sum(acknowledged.values())
    assert (tmp_path / "locust_stats_history.csv").exists()


@contextlib.contextmanager
def recorder():
    """A server that answers every request at once (202 to a POST, 200 {} otherwise), and the list of
    (monotonic time, method, path, headers) it saw; yields (its URL, that list)."""
    seen = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def answer(self):
            seen.append((time.monotonic(), self.command, self.path, dict(self.headers)))
            self.send_response(202 if self.command == "POST" else 200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        do_GET = do_POST = answer

        def log_message(self, *_args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()


def locust(url, seconds, *options):
    subprocess.run([sys.executable, "-m", "locust", "-f", str(LOCUST_DIR / "locustfile.py"), "--headless", "-u", "1",
                    "-r", "1", "--run-time", f"{seconds}s", "--host", url, "--only-summary", *options], check=True,
                   timeout=60, capture_output=True)


def test_the_visitor_sends_the_studys_client_headers():
    """What a server sees of the visitor's requests: python-requests' User-Agent, Accept and
    Accept-Encoding (FastHttpUser's own would add br)."""
    with recorder() as (url, seen):
        locust(url, 2)
    assert len(seen) >= 3  # a page, its visit and its counter
    for *_, headers in seen:
        assert headers["User-Agent"].startswith("python-requests/") and headers["Accept"] == "*/*"
        assert headers["Accept-Encoding"] == "gzip, deflate"


def test_with_a_dwell_a_reader_rereads_its_pages_count_every_ttl_then_moves_on():
    """--dwell 9 --counter-ttl 6: the page, its visit and its first read, one more read 6 to 7.2 s later
    (the TTL, longer than the page's 5 s refresh, plus up to a fifth), and the next page 9 s after the first
    read; without --dwell the study's visitor reads each page's count once."""
    with recorder() as (url, seen):
        locust(url, 11, "--dwell", "9", "--counter-ttl", "6")
    paths = [path for _, _, path, _ in seen]
    assert paths[0].startswith("/app?view=") and paths[1].startswith("/inc-counter?") and len(paths) >= 5, paths
    page = paths[0].removeprefix("/app?view=")
    assert paths[2:4] == [f"/get-counter?visit_type={page}"] * 2 and paths[4].startswith("/app?view="), paths
    first_read, reread, next_page = seen[2][0], seen[3][0], seen[4][0]
    assert 6 <= reread - first_read <= 7.2 + 0.5 and 9 <= next_page - first_read <= 9 + 0.5
    with recorder() as (url, seen):
        locust(url, 4, "--think-time", "0.5-1")
    paths = [path for _, _, path, _ in seen]
    pages = [n for n, path in enumerate(paths) if path.startswith("/app?")]
    assert len(pages) >= 2 and all(paths[n + 2].startswith("/get-counter") and not paths[n + 3].startswith("/get")
                                   for n in pages[:-1])

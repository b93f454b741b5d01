"""The Locust suite against the real local stack: the ledger of every visit matches what Firestore
stored, visit id by visit id (in distributed mode: test_distributed.py)."""
import json
import subprocess

import pytest

from helpers import settle

from visitkit.reports import audit
from visitkit.runs import runner
from visitkit.catalogue import stored_visits


@pytest.mark.slow
def test_the_ledger_matches_what_was_stored(stack, tmp_path):
    before = stack.totals()
    load = runner.LoadPlan("breakpoint", shape_set="spawn_rate=4,duration_s=8,step_s=2")
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


def test_the_visitor_sends_the_studys_client_headers(tmp_path):
    """What a server sees of the visitor's requests: python-requests' User-Agent, Accept and
    Accept-Encoding (FastHttpUser's own would add br)."""
    import http.server
    import sys
    import threading

    from visitkit.paths import LOCUST_DIR

    seen = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def answer(self):
            seen.append(dict(self.headers))
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
        subprocess.run([sys.executable, "-m", "locust", "-f", str(LOCUST_DIR / "locustfile.py"), "--headless", "-u", "1",
                        "-r", "1", "--run-time", "2s", "--host", f"http://127.0.0.1:{server.server_port}",
                        "--only-summary"], check=True, timeout=60, capture_output=True)
    finally:
        server.shutdown()
    assert len(seen) >= 3  # a page, its visit and its counter
    for headers in seen:
        assert headers["User-Agent"].startswith("python-requests/") and headers["Accept"] == "*/*"
        assert headers["Accept-Encoding"] == "gzip, deflate"

"""The local stack's figures of a pull store (store_mode "pull"): its backlog from the shards and what
the puller refused, kept over a restart of the puller (the processes themselves:
integration/test_pull_twin.py)."""
from visitkit.twin import stack as twin_stack


def test_a_pull_stores_backlog_is_what_it_neither_stored_nor_refused():
    figures = twin_stack.pull_store_figures(accepted=100, stored=80, refused={"duplicates": 5, "malformed": 1})
    assert figures == {"accepted": 100, "delivered": 86, "stored": 80, "backlog": 14, "already_counted": 5,
                       "malformed": 1}
    silent = twin_stack.pull_store_figures(accepted=100, stored=80, refused=None)  # the puller paused
    assert silent["backlog"] is None and silent["delivered"] is None and silent["stored"] == 80


def test_what_the_puller_refused_adds_up_over_its_restarts(tmp_path, monkeypatch):
    local = twin_stack.LocalStack(tmp_path)
    statuses = iter([{"duplicates": 3, "malformed": 1}, {"duplicates": 4, "malformed": 1},  # first process
                     {"duplicates": 2}, None])  # restarted: its counters start from 0; then paused
    pids = iter([101, 101, 202])
    monkeypatch.setattr(local, "store_status", lambda: next(statuses))
    monkeypatch.setattr(local, "instance_pid", lambda name: next(pids))
    assert local._puller_refused() == {"duplicates": 3, "malformed": 1}
    assert local._puller_refused() == {"duplicates": 4, "malformed": 1}
    assert local._puller_refused() == {"duplicates": 6, "malformed": 1}
    assert local._puller_refused() is None

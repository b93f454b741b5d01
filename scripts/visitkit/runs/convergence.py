"""After the load: waiting until the stored totals hold every visit Locust saw acknowledged (the
convergence wait), then the audit of every visit against the store."""
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from visitkit.results import analysis, arrivals, audit
from visitkit.results import folder as results
from visitkit.results.summary import model_for_load
from visitkit.runs.config import RunConfig
from visitkit.runs.progress import Progress
from visitkit.runs.state import RunState, Sampler
from visitkit.runs.targets import Target

SETTLE_POLLS = 5  # after converging, keep polling this many seconds to see duplicates arrive
MIN_CONVERGENCE_WAIT_S = 120


def convergence_wait(config: RunConfig, target: Target, load_seconds: float, model_seconds: float = 0) -> float:
    """--convergence-timeout, else the longest of a floor, 3 x the load, twice what the model says the
    store needs after this load (a run the model describes never times out; one it does not still ends)
    and the target's own minimum."""
    if config.convergence_timeout is not None:
        return config.convergence_timeout
    return max(MIN_CONVERGENCE_WAIT_S, 3 * load_seconds, 2 * model_seconds, target.min_convergence_wait)


def state_convergence_wait(state: RunState) -> float:
    """convergence_wait for a run whose load has ended, the model applied to the users Locust recorded (an
    open-model run: to the visits it started each second)."""
    history = analysis.aggregated_history(results.read_csv(state.folder / results.HISTORY))
    started = arrivals.rows(results.read_csv(state.folder / results.ARRIVALS))
    assert state.load_started is not None and state.load_ended is not None  # the load's step has run
    window = analysis.load_window(history)
    if window[0] is None:  # no per-second row from Locust: the load step's own clock
        window = (state.load_started, state.load_ended)
    model = model_for_load(state.record, history, *window, started)
    after_load = model.get("seconds_after_load") if model else None
    return convergence_wait(state.config, state.target, state.load_ended - state.load_started, after_load or 0)


def wait_for_convergence(target: Target, before: Mapping[str, int], acknowledged: Mapping[str, int],
                         path: str | Path, timeout: float, interval: float = 1.0, progress: Progress | None = None,
                         backlog: Callable[[], float | None] = lambda: None) -> bool:
    """Polls stored totals into a JSONL file until every page holds before + acknowledged (then a few
    more polls, so late duplicates show) or the timeout passes. True when it converged."""
    expected = {page: before.get(page, 0) + count for page, count in acknowledged.items()}
    started = time.monotonic()
    deadline, settle = started + timeout, None
    with open(path, "a") as out:
        while True:
            totals = target.totals()
            out.write(json.dumps({"time": time.time(), "totals": totals}) + "\n")
            out.flush()
            if progress is not None:
                progress.update(time.monotonic() - started, timeout, stored=sum(totals.values()) - sum(before.values()),
                                of=sum(acknowledged.values()), backlog=backlog())
            if settle is None and all(totals.get(p, 0) >= n for p, n in expected.items()):
                settle = SETTLE_POLLS
            if settle is not None:
                settle -= 1
                if settle <= 0:
                    return True
            if time.monotonic() > deadline:
                return settle is not None
            time.sleep(interval)


def converge(state: RunState) -> None:
    ledger = json.loads((state.folder / results.LEDGER).read_text())
    wait = state_convergence_wait(state)
    sampler = state.sampler
    if sampler is None:  # a resumed run whose load had finished
        sampler = state.sampler = Sampler(state.target, state.folder / results.SAMPLES)
        sampler.start()
    progress = Progress("convergence")
    try:
        converged = wait_for_convergence(state.target, state.record["before"], ledger.get("acknowledged", {}),
                                         state.folder / results.POLLS, wait, progress=progress,
                                         backlog=lambda: sampler.figure("store", "backlog"))
    finally:
        progress.close()
        sampler.stop()
    twin = state.target.twin_figures()
    if twin is not None:
        state.record["twin"] = twin
    state.converged = state.record["converged"] = converged
    if not converged:
        state.record["notes"].append(f"Counters had not converged {wait:.0f} s after the load (--convergence-timeout).")
    if sampler.errors:
        state.record["notes"].append(f"{sampler.errors} server samples failed (gaps in {results.SAMPLES}).")
    state.folder.save_run(state.record)


def audit_visits(state: RunState) -> None:
    """Reads the store's marker of every visit id in the ledger (or, per visitkit.results.audit, falls back
    to the totals), into audit.json."""
    ledger = json.loads((state.folder / results.LEDGER).read_text())
    # After a convergence, acknowledged visits the totals did not wait for may still be in a retry
    # backoff: the audit waits for them as long again. After none, it takes the store as it is.
    wait = state_convergence_wait(state) if state.converged else 0
    target = state.target
    record = audit.run(ledger, state.config.audit, target.stored_visits if target.reads_visits else None,
                       target.billed_region, totals=target.totals, wait_s=wait)
    state.folder.save_audit(record)
    if record["method"] != "totals":
        paid = f", about {record['read_cost_usd']:.4f} USD" if record["read_cost_usd"] is not None else ""
        sampled = " (a sample)" if record["method"] == "sample" else ""
        read = ("visit ids looked up in the pull store's batch documents" if "counted_twice" in record
                else "visit markers read")
        state.log(f"audit: {record['reads']:,} {read}{sampled}{paid}; {len(record['not_stored']):,} not stored"
                  + (f", {len(record['counted_twice']):,} counted twice" if record.get("counted_twice") else ""))
    else:
        state.log(f"audit: by the totals ({record['why']})")


def audit_words(requested: str, target: Target) -> str:
    if requested == "totals" or not target.reads_visits:
        return "compare each page's stored total with the visits' outcomes (5xx and unanswered stay ambiguous)"
    words = ("read the store's marker of every visit id in the ledger, in batches: each visit's fate is known (of "
             "a uniform sample of them when the run plans more visits than --ledger-ids)")
    if target.billed_region and requested == "auto":
        words += (f" (one billed read per visit; above {audit.EXACT_MAX_READS:,} visits by the totals instead, "
                  "unless --audit exact)")
    return words

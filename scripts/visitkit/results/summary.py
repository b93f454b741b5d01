"""RunData -> the summary of a run (summary.json): every figure the report, the verdict, the
plots' marks and compare read. Figures, and the headline's one rendering (headline_table); the
verdict is verdict.py's, the report's words report.py's. The summary is made as summary.json's data,
then read as its record (results/records.py, Summary), which checks its keys."""
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, TypeGuard

from visitkit.catalogue import CATALOGUE, FUNCTIONS, PAGES, PUSH_FUNCTION
from visitkit.cloud import monitoring
from visitkit.formatting import fmt, ms
from visitkit.model import cost
from visitkit.model.capacity import convergence_for_load
from visitkit.results import analysis, arrivals, audit, generator, overload, scaleout
from visitkit.results.folder import RunData
from visitkit.results.records import (
    FORMAT_VERSION,
    Audit,
    Breakpoint,
    Headline,
    LedgerFigures,
    ModelLoad,
    NoDeadLetterTopic,
    Platform,
    PlatformFunction,
    Store,
    Summary,
)
from visitkit.samples import Sample
from visitkit.settings import Settings, summary_line
from visitkit.twin import autoscaler, chaos, resources
from visitkit.twin.profile import load_profile


def summarize(data: RunData) -> Summary:
    run, ledger, samples = data.run, audit.upgraded(data.ledger), data.samples
    load_start, load_end = analysis.load_window(data.history)
    aggregated = data.stats[-1] if data.stats and data.stats[-1]["name"] == "Aggregated" else None
    before = run.get("before", {})
    after = data.polls[-1][1] if data.polls else before
    requests = aggregated["requests"] if aggregated else 0
    failures = aggregated["failures"] if aggregated else 0
    no_dead_letter = without_dead_letter_topic(run, data.settings)
    missing = data.missing_metrics  # RunData's metrics/missing.json (see folder.py)
    convergence = analysis.convergence(data.polls, before, ledger.get("acknowledged", {}), load_start, load_end)
    settled = audit.store_settled(data.audit, convergence["converged"])
    summary: dict[str, Any] = {
        "iteration": run["iteration"], "test": run["test"], "target": run["target"],
        "started": run.get("started"), "results_dir": data.name, "settings": run.get("settings"),
        "settings_line": summary_line(data.settings) if data.settings else None,
        "shape": run.get("shape"), "profile": run.get("profile"), "prediction": run.get("prediction"),
        "twin": run.get("twin"), "warm_up": run.get("warm_up"),
        "load": {"start": load_start, "end": load_end,
                 "seconds": (load_end - load_start) if load_start is not None and load_end is not None else None,
                 "max_users": max((s["users"] for s in data.history), default=0),
                 "requests": requests, "failures": failures,
                 "failure_ratio": failures / requests if requests else None,
                 "workers": run.get("workers", 0),
                 **({"arrival_rate": arrivals.figures(run, data.arrivals)} if run.get("load_model") == "open"
                    else {})},
        "breakpoint": breakpoint_figures(run, data),
        "percentiles": data.stats,
        "client": analysis.client_by_function(data.stats),
        "server": analysis.server_by_function(samples, load_start, load_end) if samples else {},
        "store": analysis.store_figures(samples, load_start, load_end) if samples else {},
        "convergence": convergence,
        "visits": with_dead_letters(visit_accounting(ledger, data.audit, before, after, settled),
                                    None if no_dead_letter else dead_lettered(samples), exact=is_exact(data.audit)),
        "audit": audit_figures(ledger, data.audit, load_start=load_start, load_end=load_end),
        "ledger": ledger_figures(ledger),
        "failures": data.failures[:10],
        "notes": [*run.get("notes", []), *data.notes],
        "server_source": samples[0].get("source") if samples else None,
        "metrics_files": [f"{name}.csv" for name in data.metrics],
        "missing_metrics": missing,
        "no_dead_letter_topic": no_dead_letter,
    }
    on_platform = summary["server_source"] == "gcp-monitoring"
    summary["platform"] = platform_figures(samples, no_dead_letter) if on_platform else None
    summary["resources"], summary["cpu_ms_per_request"], summary["cost"] = resource_figures(
        samples, data.settings, load_start, load_end, on_platform, run.get("region"),
        missing={entry["metric"] for entry in missing})
    summary["machine"] = machine_figures(summary["breakpoint"], samples, (run.get("machine") or {}).get("cores"),
                                         on_platform)
    summary["chaos"] = (chaos.figures(run["chaos"], data.history, samples, summary["visits"]) if run.get("chaos")
                        else None)
    summary["overload"] = overload.figures(data.history, data.failures) if run["test"] == "spike" else None
    autoscaled = run["target"] == "local" and data.settings is not None and data.settings.scaling == "auto"
    if data.scaling_events or autoscaled:
        # a twin run with scaling "auto"; a fixed run's summary has no such key. A function without events was not
        # autoscaled (min_instances = max_instances): its instances started with the stack, none under load
        found = autoscaler.cold_start_figures(data.scaling_events, load_start, load_end)
        summary["cold_starts"] = {**found, **{name: autoscaler.no_cold_starts() for name in FUNCTIONS
                                              if autoscaled and name not in found}}
    if run["test"] == "spike" and data.settings is not None and data.settings.scaling == "auto":
        # min_instances = max_instances too (no autoscaled function, no events): the spike's run to set beside one
        cpu_ms = load_profile((run.get("profile") or {}).get("name") or "none").cpu_ms
        summary["scale_out"] = scaleout.figures(data.history, samples, data.settings, data.scaling_events or (), cpu_ms)
    knee = summary["breakpoint"]["knee"]
    summary["load_generator"] = generator.figures(data.health, knee["time"] if knee else None, run.get("workers", 0),
                                                  run.get("generator_watch"))
    summary["model_load"] = model_for_load(run, data.history, load_start, load_end, data.arrivals)
    summary["headline"] = headline(summary)
    return Summary.from_json({**summary, "format_version": FORMAT_VERSION})


def breakpoint_figures(run: Mapping[str, Any], data: RunData) -> Breakpoint:
    """Where the run stopped keeping up: in users, or for an open-model run in visits/s (its knee's moment)."""
    found = analysis.find_breakpoint(data.history, per_second=data.per_second)
    if run.get("load_model") != "open":
        return found
    return analysis.with_rate_breakpoint(found, analysis.find_rate_breakpoint(data.arrivals, data.history))


def model_for_load(run: Mapping[str, Any], history: Sequence[Mapping[str, Any]], load_start: float | None,
                   load_end: float | None, arrivals: Sequence[Mapping[str, Any]] = ()) -> ModelLoad | None:
    """The run's recorded prediction applied to the users it actually ran (predict.convergence_for_load), or for
    an open-model run to the visits it started each second (`arrivals`: arrivals.csv's rows)."""
    prediction = run.get("prediction")
    # load_window gives both ends or neither
    if not prediction or load_start is None or load_end is None or not prediction.get("drain_per_s"):
        return None
    if run.get("load_model") == "open":
        started = [(float(row["time"]), float(row["started"])) for row in arrivals]
        return convergence_for_load(prediction, started, run.get("target"), open_model=True) if started else None
    series = [(s["time"], s["users"]) for s in history if load_start <= s["time"] <= load_end]
    found: ModelLoad = convergence_for_load(prediction, series, run.get("target"))
    return found


def machine_figures(breakpoint: Breakpoint, samples: Sequence[Sample], cores: int | None,
                    on_platform: bool) -> dict[str, dict[str, Any] | None] | None:
    """The local machine's CPU at the knee and at the peak RPS ({"knee": .., "peak": ..}), or None on
    Google Cloud: where the machine was busy, the knee or the peak is the machine's, not the system's."""
    if on_platform or not samples:
        return None
    knee, peak = breakpoint["knee"], breakpoint["peak_rps"]
    return {"knee": resources.machine_at(samples, knee["time"], cores) if knee else None,
            "peak": resources.machine_at(samples, peak["time"], cores) if peak else None}


def served(samples: Sequence[Sample], start: float | None = None, end: float | None = None) -> dict[str, int]:
    """Requests each function served in the window (the platform's cumulative counts, differenced)."""
    window = analysis.during(samples, start, end) or list(samples)
    counts = {}
    for name in FUNCTIONS:
        first, last = analysis.fn_field(name, "requests")(window[0]), analysis.fn_field(name, "requests")(window[-1])
        if first is not None and last is not None:
            counts[name] = last - first
    return counts


# What a Cloud Monitoring query that could not be read leaves out of the resources and the cost.
CPU_QUERIES = {"billable_instance_time", "cpu_utilizations"}
MEMORY_QUERIES = {"billable_instance_time", "memory_utilizations"}
COST_QUERIES = {"request_count", "billable_instance_time", "firestore_reads", "firestore_writes", "firestore_deletes"}


def resource_figures(samples: Sequence[Sample], settings: Settings | None, load_start: float | None,
                     load_end: float | None, on_platform: bool, region: str | None = None,
                     missing: Set[str] = frozenset()) -> tuple[dict[str, dict[str, Any]], dict[str, float],
                                                                dict[str, Any] | None]:
    """(resources per component, CPU ms per request per function, estimated cost or None).
    Locally over the load, from the processes; on Google Cloud over the window, from Cloud Run, at
    the prices of the run's region (runs recorded before regions were: the infra's default).
    settings: the run's Settings, None if they did not parse (then no figures on Google Cloud).
    missing: the Cloud Monitoring queries that could not be read: their figures are None, and the
    cost counts them as 0 and says so."""
    if not samples:
        return {}, {}, None
    if not on_platform:
        figures = resources.summarize(samples, load_start, load_end)
        return figures, resources.cpu_ms_per_request(figures, served(samples, load_start, load_end)), None
    if settings is None:
        return {}, {}, None
    figures = resources.platform_summary(samples, settings)
    for row in figures.values():
        if missing & CPU_QUERIES:
            row.update(cpu_seconds=None, cpu_percent_mean=None, cpu_percent_peak=None)
        if missing & MEMORY_QUERIES:
            row["memory_peak_mb"] = None
    requests = served(samples)
    last = samples[-1]
    usage = {"functions": {name: {"billable_instance_s": analysis.fn_field(name, "billable_instance_s")(last),
                                  "requests": requests.get(name)} for name in FUNCTIONS},
             **{f"firestore_{kind}": analysis.store_field(f"firestore_{kind}")(last)
                for kind in ("reads", "writes", "deletes")},
             "pubsub_messages": (analysis.store_field("accepted")(last) or 0) + (requests.get(PUSH_FUNCTION) or 0)}
    estimate = cost.estimate(usage, settings, cost.load_prices(), region or cost.DEFAULT_REGION)
    estimate["left_out"] += [f"{name}: its Cloud Monitoring metric could not be read, counted as 0"
                             for name in sorted(missing & COST_QUERIES)]
    return figures, resources.cpu_ms_per_request(figures, requests), estimate


def ledger_figures(ledger: Mapping[str, Any]) -> LedgerFigures:
    """Whether the ledger holds every visit by id, and which workers' final ledgers did not arrive."""
    workers = ledger.get("workers") or {}
    return {"complete": ledger.get("complete", True), "workers": len(workers),
            "missing_workers": sorted(name for name, entry in workers.items() if not entry.get("final")),
            "untracked": sum((ledger.get("untracked") or {}).values())}


def is_exact(audit_record: Mapping[str, Any] | None) -> TypeGuard[Mapping[str, Any]]:
    if not audit_record:
        return False
    return audit_record["method"] == "exact"


def visit_accounting(ledger: Mapping[str, Any], audit_record: Mapping[str, Any] | None, before: Mapping[str, int],
                     after: Mapping[str, int], settled: bool = True) -> dict[str, dict[str, Any]]:
    """Each visit's fate from the exact audit (with the totals read together with the markers; where the store
    had not `settled`, what it could not say, audit.exact_accounting), or the pages' totals (ambiguous 5xx and
    unanswered; the visits that gave up, never published, counted apart from the refused ones). `ledger`: as
    audit.upgraded reads it."""
    if is_exact(audit_record):
        return audit.exact_accounting(ledger, audit_record, before, audit_record.get("totals") or after, settled)
    gave_up = ledger["gave_up"]  # audit.upgraded: an older ledger has none
    if gave_up:  # never published, as refused visits: the totals read them among those, then apart
        ledger = {**ledger, "refused": {page: (ledger.get("refused") or {}).get(page, 0) + gave_up.get(page, 0)
                                        for page in PAGES}}
    rows = analysis.visit_accounting(ledger, before, after)
    for page in PAGES:
        rows[page]["gave_up"] = gave_up.get(page, 0)
        rows[page]["refused"] -= rows[page]["gave_up"]
    rows["total"]["gave_up"] = sum(rows[page]["gave_up"] for page in PAGES)
    rows["total"]["refused"] -= rows["total"]["gave_up"]
    return rows


def audit_figures(ledger: Mapping[str, Any], audit_record: Mapping[str, Any] | None, shown: int = 10,
                  load_start: float | None = None, load_end: float | None = None) -> Audit:
    """How the visits were audited, and the first acknowledged visits not stored (to look up); for a
    sample, its fate across the load (`load_start`..`load_end`) and the loss rate it rules out."""
    if not audit_record:
        return {"method": "totals", "why": "the run was recorded before audits", "reads": 0, "read_cost_usd": None,
                "lost_ids": []}
    acknowledged = {visit_id for visit_id, (_, outcome) in audit.visit_ids(ledger).items()
                    if outcome == "acknowledged"}
    lost = [visit_id for visit_id in audit_record["not_stored"] if visit_id in acknowledged]
    figures: Audit = {"method": audit_record["method"], "why": audit_record["why"], "reads": audit_record["reads"],
                      "read_cost_usd": audit_record["read_cost_usd"], "lost_ids": lost[:shown]}
    if audit_record["method"] == "sample":
        figures["sample"] = audit.sample_figures(ledger, audit_record, load_start, load_end)
    return figures


def dead_lettered(samples: Sequence[Sample]) -> int | None:
    """Visits the platform moved to the dead-letter topic during the run (the last cumulative
    figure: the store's on Google Cloud, the push delivery's locally), or None if not measured."""
    for sample in reversed(samples):
        for section in (sample.get("store"), sample.get("push")):
            value = section.get("dead_lettered") if section else None
            if value is not None:
                return value
    return None


def with_dead_letters(visits: dict[str, dict[str, Any]], count: int | None,
                      exact: bool = False) -> dict[str, dict[str, Any]]:
    """A dead-lettered visit is neither stored nor lost: it waits in the dead-letter subscription.
    Only the total is known (the metric has no page), so only the total row changes, and from the
    pages' own lost visits: one page's duplicates must not hide another's losses. An exact audit
    names each lost visit, while the count is of messages (a second message of a stored visit, one
    of a 5xx'd visit): there it is shown beside the lost ones, never taken from them."""
    total = visits["total"]
    total["dead_lettered"] = count
    if count and not exact:
        total["lost"] = max(0, sum(row["lost"] for page, row in visits.items() if page != "total") - count)
    return visits


def without_dead_letter_topic(run: Mapping[str, Any], settings: Settings | None) -> NoDeadLetterTopic | None:
    """For a Google Cloud run deployed with `dead_letter: false` (no dead-letter topic: a delivery that
    always fails is retried until its message expires, and nothing is counted as dead-lettered),
    {"message_retention_seconds": ..} (None if the settings did not parse); otherwise None."""
    if run.get("target") != "gcp" or (run.get("settings") or {}).get("dead_letter", True) is not False:
        return None
    return {"message_retention_seconds": settings.subscription.message_retention_seconds if settings else None}


def platform_figures(samples: Sequence[Sample], no_dead_letter: NoDeadLetterTopic | None = None) -> Platform:
    """Cloud Monitoring's figures over the whole window (load and convergence): per function the
    requests, 429s and 5xx that reached it, its worst minute's p50 and p95 and its most instances;
    the subscription's and Firestore's peaks. Counters in the samples count from the window's start.
    dead_lettered is None without a dead-letter topic (no_dead_letter: without_dead_letter_topic's)."""
    def values(get: Callable[[Sample], Any]) -> list[Any]:
        return [v for v in (get(sample) for sample in samples) if v is not None]

    def function(name: str) -> PlatformFunction:
        last = {key: analysis.fn_field(name, key)(samples[-1])
                for key in ("requests", "responses_429", "responses_429_logged", "responses_5xx")}
        worst = {key: max(values(analysis.fn_field(name, field)), default=None)
                 for key, field in (("p50_ms_max", "service_ms"), ("p95_ms_max", "service_ms_p95"),
                                    ("instances_max", "instances"))}
        return {"requests": last["requests"], "responses_429": last["responses_429"],
                "responses_429_logged": last["responses_429_logged"], "responses_5xx": last["responses_5xx"],
                "p50_ms_max": worst["p50_ms_max"], "p95_ms_max": worst["p95_ms_max"],
                "instances_max": worst["instances_max"]}

    functions = {name: function(name) for name in FUNCTIONS}
    writes = [rate for _, rate in analysis.counter_rate(samples, analysis.store_field("firestore_writes"))
              if rate is not None]
    return {"functions": functions,
            "undelivered_peak": max(values(analysis.store_field("backlog")), default=None),
            "oldest_unacked_peak_s": max(values(analysis.store_field("oldest_unacked_s")), default=None),
            "firestore_writes": analysis.store_field("firestore_writes")(samples[-1]),
            "firestore_writes_peak_per_min": max(writes) * 60 if writes else None,
            "deliveries": {outcome: analysis.store_field(outcome)(samples[-1])
                           for outcome in monitoring.DELIVERY_OUTCOMES},
            "dead_lettered": None if no_dead_letter else analysis.store_field("dead_lettered")(samples[-1])}


def headline(summary: Mapping[str, Any]) -> Headline:
    """The flat figures checks and comparisons use (names are stable: READMEs refer to them). `summary`:
    summary.json's data, as summarize makes it."""
    bp, conv, visits = summary["breakpoint"], summary["convergence"], summary["visits"]["total"]
    pick = lambda d, key: d[key] if d else None  # noqa: E731
    figures: Headline = {
        "users_max": summary["load"]["max_users"], "requests": summary["load"]["requests"],
        "failure_ratio": summary["load"]["failure_ratio"],
        "rps_peak": pick(bp["peak_rps"], "rps"), "knee_users": pick(bp["knee"], "users"),
        "knee_rps": pick(bp["knee"], "rps"), "first_failure_users": pick(bp["first_failure"], "users"),
        "first_failure_rps": pick(bp["first_failure"], "rps"), "p95_ceiling_ms": pick(bp["p95_ceiling"], "p95_ms"),
        "convergence_s": conv["seconds_after_load"], "extra_min_per_min": conv["extra_minutes_per_minute"],
        "visits.acknowledged": visits["acknowledged"], "visits.stored": visits["stored"],
        "visits.lost": visits["lost"], "visits.duplicated": visits["duplicated"],
        "visits.refused": visits["refused"], "visits.gave_up": visits["gave_up"],
        "visits.dead_lettered": visits.get("dead_lettered"),
    }
    if "not_stored_yet" in visits:  # the store had not settled: lost and duplicated are not known (None)
        figures["visits.not_stored_yet"] = visits["not_stored_yet"]
        figures["visits.stored_while_moving"] = visits["stored_while_moving"]
    rate = bp.get("arrivals")
    if rate is not None:  # an open-model run's breakpoint, in visits/s
        figures["knee_visits_per_s"] = pick(rate["knee"], "offered")
        figures["first_failure_visits_per_s"] = pick(rate["first_failure"], "offered")
        figures["served_peak_visits_per_s"] = pick(rate["peak_served"], "served")
    arrival = summary["load"].get("arrival_rate")
    if arrival is not None:  # an open-model run's: what it asked, started and could not start
        for key in ("target", "achieved", "not_started"):
            figures[f"arrival_rate.{key}"] = arrival[key]
    machine = (summary.get("machine") or {}).get("knee")
    figures["knee_machine_busy"] = machine["busy"] if machine else None
    locust_health = summary.get("load_generator") or {}
    if locust_health.get("watch") is not None:  # a watched run's: a knee after a warning is Locust's, not the system's
        figures["knee_generator_warned"] = generator.knee_warned(locust_health, bool(bp["knee"]))
    client = summary["client"]
    if client:
        figures["slowest_function"] = max(client, key=lambda name: client[name]["p95_ms"] or 0)
    for name, row in client.items():
        figures[f"p50_ms.{name}"], figures[f"p95_ms.{name}"] = row["p50_ms"], row["p95_ms"]
        figures[f"failures.{name}"] = row["failures"]
    for name, row in summary["server"].items():
        figures[f"service_ms.{name}"] = row["service_ms"]
        figures[f"responses_429.{name}"] = row["responses_429"]
    for key, value in summary["store"].items():
        if not key.endswith(("_time", "_of")):
            figures[f"store.{key}"] = value
    for name, row in (summary.get("cold_starts") or {}).items():  # a twin run with scaling "auto"
        figures[f"cold_starts.{name}"] = row["during_load"]
        figures[f"cold_start_ms_max.{name}"] = row["under_load_ms_max"]
    for name, row in ((summary.get("scale_out") or {}).get("functions") or {}).items():  # a spike with scaling "auto"
        figures[f"scale_out_lag_s.{name}"] = row["lag_s"]
    return figures


def headline_names() -> list[str]:
    """Every name headline() gives (a --threshold naming another is refused before its run), read off
    headline() itself so that the list cannot drift from it: its figures for a summary in which the client
    saw every public function, the server every function, the store every figure, every optional section is
    there (an open-model run's arrival rate...), and nothing was measured."""
    public = [name for name in FUNCTIONS if CATALOGUE[name].public]  # the client reaches these alone
    probe = _Unmeasured(load=_Unmeasured(arrival_rate=_Unmeasured()),  # as an open-model run's
                        visits=_Unmeasured(total=_Unmeasured(not_stored_yet=None)),  # a store not settled
                        breakpoint=_Unmeasured(arrivals=_Unmeasured()),
                        load_generator=_Unmeasured(watch=_Unmeasured()),  # a watched run's
                        client={name: _Unmeasured() for name in public},
                        server={name: _Unmeasured() for name in FUNCTIONS},
                        store=dict.fromkeys(Store.__annotations__),
                        cold_starts={name: _Unmeasured() for name in FUNCTIONS},  # an autoscaled twin run's
                        scale_out=_Unmeasured(functions={name: _Unmeasured() for name in FUNCTIONS}))
    return list(headline(probe))


class _Unmeasured(dict[str, Any]):
    """A summary section where nothing was measured: every key headline() reads of it is another such section,
    empty and so falsy, which it reads as "not reached" or "n/a" (an optional section is read with get(): the
    probe gives it, as headline_names does the arrival rate)."""

    def __missing__(self, key: str) -> "_Unmeasured":
        return _Unmeasured()


@dataclass(frozen=True)
class HeadlineCell:
    """One column of the headline's rendering: its heading, its text, and the figures the text shows in order
    (a comparison of two runs divides them)."""
    heading: str
    text: str
    figures: tuple[Any, ...]
    align: str = "---:"  # Markdown's: numbers to the right, pairs and words to the left


def headline_cells(h: Mapping[str, Any]) -> list[HeadlineCell]:
    """The run's headline (its `headline` figures) as the columns headline_table shows."""
    unit = lambda text, suffix: text if text == "n/a" else f"{text} {suffix}"  # noqa: E731 (no "n/a ms")
    # an open-model run's knee and first failure are rates (visits/s offered), a closed-model run's users
    rate = "knee_visits_per_s" in h
    by, knee, first = (("visits/s", h["knee_visits_per_s"], h["first_failure_visits_per_s"]) if rate
                       else ("users", h["knee_users"], h["first_failure_users"]))
    digits = 1 if rate else 0
    fates = tuple(h[f"visits.{fate}"] for fate in ("acknowledged", "stored", "lost", "duplicated"))
    return [
        HeadlineCell(f"knee ({by} / RPS)", f"{fmt(knee, digits)} / {fmt(h['knee_rps'])}", (knee, h["knee_rps"]), "---"),
        HeadlineCell(f"first failure ({by} / RPS)", f"{fmt(first, digits)} / {fmt(h['first_failure_rps'])}",
                     (first, h["first_failure_rps"]), "---"),
        HeadlineCell("peak RPS", fmt(h["rps_peak"]), (h["rps_peak"],)),
        HeadlineCell("p95 ceiling", unit(ms(h["p95_ceiling_ms"]), "ms"), (h["p95_ceiling_ms"],)),
        HeadlineCell("slowest", h.get("slowest_function", "n/a"), (h.get("slowest_function"),), "---"),
        HeadlineCell("converged after load", unit(fmt(h["convergence_s"], 0), "s"), (h["convergence_s"],)),
        HeadlineCell("extra min per min", fmt(h["extra_min_per_min"], 2), (h["extra_min_per_min"],)),
        HeadlineCell("acked / stored / lost / dup", " / ".join(fmt(count) for count in fates), fates, "---")]


def headline_table(h: Mapping[str, Any]) -> list[str]:
    """The run's headline (its `headline` figures) as a Markdown table: the one rendering of it."""
    cells = headline_cells(h)
    return ["| " + " | ".join(cell.heading for cell in cells) + " |",
            "|" + "|".join(cell.align for cell in cells) + "|",
            "| " + " | ".join(cell.text for cell in cells) + " |"]

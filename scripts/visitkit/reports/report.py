"""A run's summary -> report.md, for a person deciding how to scale: one function per section."""
from collections.abc import Collection, Mapping, Sequence

from visitkit.catalogue import FUNCTIONS, PAGES, PUSH_FUNCTION
from visitkit.cloud.monitoring import MISSING, PULL_QUERIES, QUERIES
from visitkit.errors import GATES_FAILED
from visitkit.formatting import fmt, ms, percent
from visitkit.model.capacity import figure_to_measure, first_429_visits_per_s
from visitkit.results import analysis, generator, thresholds
from visitkit.results import folder as results
from visitkit.results.audit import one_in
from visitkit.results.records import (
    ArrivalRate,
    GeneratorWatch,
    Headline,
    Heartbeats,
    Saturation,
    Store,
    Summary,
    Verdict,
    VisitRow,
)
from visitkit.results.summary import headline_table

MAX_PROCESS_ROWS = 8  # the busiest of a fleet's processes


def render(summary: Summary, plots: Collection[str] = ()) -> str:
    """The whole report; `plots`: the names of the plots written beside it (results.PLOTS' keys)."""
    sections = (title_section, headline_section, thresholds_section, prediction_section, plots_section,
                percentiles_section, functions_section, resources_section, generator_section, platform_section,
                cost_section, chaos_section, overload_section, scaling_section, scale_out_section, visits_section,
                errors_section,
                run_section)
    lines = []
    for section in sections:
        lines += section(summary, plots)
    return "\n".join(lines) + "\n"


def title_section(s: Summary, _plots: Collection[str]) -> list[str]:
    load = s.load
    return [f"# {s.iteration}: {s.test} test ({s.target})", "",
            f"Run {s.results_dir}; {fmt(load['seconds'], 0)} s of load, up to {load['max_users']:,} users, "
            f"{load['requests']:,} requests, {load['failures']:,} failed ({percent(load['failure_ratio'] or 0)}).", ""]


def verdict_lines(verdict: Verdict | None) -> list[str]:
    if not verdict:
        return []
    hypothesis = verdict.get("hypothesis")
    lines = [f"- **Verdict: {verdict['outcome']}**" + (f": {hypothesis}" if hypothesis else "")]
    words: dict[bool | None, str] = {True: "holds", False: "does not hold"}
    for check in verdict["checks"]:
        holds = words.get(check["holds"], "unknown")
        lines.append(f"  - `{check['check']}`: {holds} ({check['detail']})")
    return lines


def headline_section(s: Summary, _plots: Collection[str]) -> list[str]:
    """The headline table (knee: where RPS stops growing with users; p95 ceiling: the run's highest
    p95), then what only the report says of it."""
    bp, conv, start = s.breakpoint, s.convergence, s.load["start"]
    visits, store = s.visits["total"], s.store
    verdict = verdict_lines(s.verdict)
    lines = ["## Headline", "", *verdict, *([""] if verdict else []), *headline_table(s.headline), ""]
    if "arrival_rate" in s.load:
        lines.append(f"- Open model: {arrival_words(s.load['arrival_rate'])}")
    moments = (("knee", bp["knee"]), ("first failure", bp["first_failure"]), ("peak RPS", bp["peak_rps"]),
               ("p95 ceiling", bp["p95_ceiling"]))
    lines.append("- When, into the load: " + ", ".join(
        f"{label} {offset(point['time'], start) if point else 'not reached'}" for label, point in moments)
        + (f" ({bp['p95_ceiling']['users']:,} users)" if bp["p95_ceiling"] else ""))
    lines += [f"- At the {moment}: {words}" for moment in ("knee", "peak") if (words := machine_words(s, moment))]
    early = [found for found in (s.load_generator["saturated"] if s.load_generator else []) if found["before_knee"]]
    if early:
        lines.append(f"- **The load generator saturated first**: {saturation_words(early[0], start)}, before "
                     "the knee: the knee may be Locust's, not the system's (see Load generator)")
    watch = s.load_generator.get("watch") if s.load_generator else None
    warned = [found for found in (watch["warnings"] if watch else []) if found["before_knee"]]
    if s.headline.get("knee_generator_warned") and warned:
        lines.append(f"- **The knee is the load generator's, not the system's**: Locust warned first, "
                     f"{saturation_words(warned[0], start)}, before the knee (see Load generator)")
    if not conv["converged"]:
        lines.append(f"- Counters did **not** converge within {fmt(conv['waited_seconds'], 0)} s after the load")
    extras = visits_extras(visits, s.audit is not None and s.audit["method"] == "exact", id_record(s),
                           unsettled_why(s))
    if extras:
        lines.append(f"- Visits: {extras}")
    if store:
        lines.append(f"- Store: accepted (202) {fmt(store['accepted_per_s'])}/s, stored {fmt(store['writes_per_s'])}/s "
                     f"during the load; {fmt(store['throughput_per_s'])}/s {store['throughput_of']} while backlogged; "
                     f"backlog peak {fmt(store['backlog_peak'], 0)}, drained at {fmt(store['drain_per_s'])} msg/s")
    return lines + [""]


def thresholds_section(s: Summary, _plots: Collection[str]) -> list[str]:
    """The gates a CI run was given (--threshold, --expect), each with its figure, and whether the load was
    stopped early (--abort-on-fail)."""
    if not s.gates:
        return []
    passed = "all hold" if s.gates["passed"] else f"**one or more fail** (exit status {GATES_FAILED})"
    return ["## Thresholds", "", f"The gates this run was given: {passed}.", "", *thresholds.gate_lines(s.gates), ""]


def arrival_words(arrival: ArrivalRate) -> str:
    """An open-model run's target against what it achieved (results/arrivals.py defines the steady window),
    and the arrivals the generator could not start."""
    seconds, ramp = arrival["seconds"], arrival["ramp_per_s"]
    target, achieved = fmt(arrival["target"], 2), fmt(arrival["achieved"], 2)
    if ramp is not None:
        asked = (f"a ramp of +{fmt(ramp, 2)} visits/s each second, up to {target} visits/s; over its {seconds} full "
                 f"seconds {achieved} visits/s started against {fmt(arrival['window_target'], 2)} targeted")
    else:
        asked = (f"target {target} visits/s, achieved {achieved} visits/s started over the steady window ({seconds} "
                 "full seconds at the held rate)")
    ceiling = f", at most {arrival['users_max']:,} users" if arrival["users_max"] else ""
    return (f"{asked}; {arrival['not_started']:,} arrivals not started (no user free in time{ceiling}: the load "
            f"generator's limit, not the system's), of {arrival['started'] + arrival['not_started']:,}")


def id_record(s: Summary) -> str:
    """Where the store keeps a visit's id: a marker each (push), or its batch's document (a pull store)."""
    return "its batch's document" if (s.settings or {}).get("store_mode") == "pull" else "its marker"


def unsettled_why(s: Summary) -> str | None:
    """Why the audit's store had not settled (results/audit.py, store_settled), or None where it had."""
    if "not_stored_yet" not in s.visits["total"]:
        return None
    # converged, yet not settled: the audit's own totals kept moving
    return ("the counters had not converged" if not s.convergence["converged"] else
            "the stored totals never held still while the audit read the markers")


def visits_extras(visits: VisitRow, exact: bool, record: str = "its marker", unsettled: str | None = None) -> str:
    """What the headline table's acked / stored / lost / dup leaves out: dead letters, the visits that
    gave up (beside the refused and lost ones), what became of the visits with a 5xx or no answer, and
    why lost and duplicated are not known where the store had not settled (`unsettled`: why)."""
    landed, dead, gave_up = visits["stored_unacknowledged"], visits.get("dead_lettered"), visits.get("gave_up")
    words = [f"{dead:,} dead-lettered"] if dead else []
    if unsettled:
        words.append(f"**the store had not settled** ({unsettled}): {visits.get('not_stored_yet', 0):,} "
                     f"acknowledged not stored yet and {visits.get('stored_while_moving', 0):,} stored while it "
                     "still moved, so none is called lost or duplicated")
    if gave_up:
        lost = (f"{visits['lost']:,} lost" if visits["lost"] is not None else
                f"{visits.get('not_stored_yet', 0):,} not stored yet")
        words.append(f"{gave_up:,} gave up (a 429 at each of their tries), {visits['refused']:,} refused, {lost}")
    if exact:
        unknown, landed = visits["failed"] + visits["unanswered"], landed - visits["refused_stored"]
        words.append(f"of the {unknown:,} with a 5xx or no answer, {landed:,} were stored (every fate read from "
                     f"{record})" if unknown else f"every fate read from {record}")
    elif landed:
        words.append(f"{landed:,} stored after a 5xx or no answer (ambiguous, not duplicated)")
    return "; ".join(words)


def machine_words(s: Summary, moment: str) -> str:
    """What the local machine's CPU was at the knee or the peak: one it sets is the machine's, not the
    system's."""
    m = (s.machine["knee"] if moment == "knee" else s.machine["peak"]) if s.machine else None
    if not m:
        return ""
    if m["cores"] is None:
        return f"every part's CPU together: {m['cpu_percent']:.0f} % of one core"
    of = f"{m['cpu_percent']:.0f} % of its {m['cores'] * 100} %"
    if m["busy"]:
        return (f"**this machine's CPU was busy** ({of}): the {moment} is the machine's as much as the "
                "system's" + (", and its place depends on how far the ramp went (docs/local-twin.md)"
                              if moment == "knee" else ""))
    return f"this machine's CPU had room ({of})"


KEPT_UP_S = 10  # a backlog below this many seconds of accepted visits never made the store run flat out


def measured_drain(store: Store, headline: Headline) -> str:
    """How fast the backlog drained from its peak, or why that says nothing of the store's capacity:
    a backlog smaller than KEPT_UP_S seconds of accepted visits drained as fast as visits came."""
    peak, accepted = store.get("backlog_peak"), store.get("accepted_per_s")
    if peak is not None and accepted and peak < KEPT_UP_S * accepted:
        return f"n/a: kept up (backlog peak {fmt(peak, 0)})"
    return fmt(headline.get("store.drain_per_s"))


def prediction_section(s: Summary, _plots: Collection[str]) -> list[str]:
    """The capacity model's figures (visitkit/model/capacity.py) beside the run's."""
    p = s.prediction
    if not p:
        return []
    h = s.headline
    knee = {key: figure_to_measure(p, s.target, key)
            for key in ("knee_users", "knee_rps", "limited_by", "first_429_users", "knee_visits_per_s")}
    arrival = s.load.get("arrival_rate")  # an open-model run: its knee and first failure are visits/s offered
    if arrival is None:
        load = "users"
        knee_row = ("RPS knee: users", fmt(knee["knee_users"], 0), fmt(h.get("knee_users"), 0))
        first_row = ("first 429 / first failure: users", fmt(knee["first_429_users"], 0),
                     fmt(h.get("first_failure_users"), 0))
    else:
        load, rate = "arrivals", knee["knee_visits_per_s"]
        first = first_429_visits_per_s(rate, arrival["ramp_per_s"], arrival["target"]) if rate else None
        knee_row = ("knee: visits/s offered", fmt(rate), fmt(h.get("knee_visits_per_s")))
        first_row = ("first 429 / first failure: visits/s offered",
                     fmt(first) if first is not None or not rate else "none (held at or below the knee)",
                     fmt(h.get("first_failure_visits_per_s")))
    rows = [knee_row,
            ("RPS knee: RPS", fmt(knee["knee_rps"], 0), fmt(h.get("knee_rps"), 0)),
            ("limited by", knee["limited_by"], f"{h.get('slowest_function', 'n/a')} (slowest, client p95)"
             + ("; this machine's CPU busy" if h.get("knee_machine_busy") else "")),
            first_row,
            ("store drain (msg/s)", fmt(p["drain_per_s"]), measured_drain(s.store, h)),
            # the model's steady figure is the users' (a visit published at the knee's pace): not an arrivals' run's
            *([("extra min per min of load, past the knee", fmt(p["extra_min_per_min"], 2), "-")] if not arrival
              else []),
            (f"extra min per min of load, for this run's {load}",
             fmt(s.model_load["extra_min_per_min"] if s.model_load else None, 2), fmt(h.get("extra_min_per_min"), 2))]
    return ["## Predicted vs measured", "",
            f"The capacity model (`scripts/predict`, docs/local-twin.md) from the settings and the `{p['profile']}` "
            "profile's service times, before the run.", "",
            "| figure | predicted | measured |", "|---|---:|---:|",
            *(f"| {label} | {predicted} | {measured} |" for label, predicted, measured in rows), ""]


def plots_section(_s: Summary, plots: Collection[str]) -> list[str]:
    captions = {"load": "users, RPS, failures, p95", "server": "backlog, visits/s, queues, 429s"}
    return [line for key in ("load", "server") if key in plots
            for line in (f"![{captions[key]}]({results.PLOTS[key]})", "")]


def percentiles_section(s: Summary, _plots: Collection[str]) -> list[str]:
    lines = ["## Response times per endpoint (client side, ms)", "",
             "| Method | Name | # reqs | # fails | 50% | 60% | 70% | 80% | 90% | 95% |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in s.percentiles:
        bold = "**" if row["name"] == "Aggregated" else ""
        lines.append(f"| {row['method']} | {bold}{row['name']}{bold} | {row['requests']:,} | {row['failures']:,} | "
                     + " | ".join(ms(row[p]) for p in analysis.STUDY_PERCENTILES) + " |")
    return lines + [""]


def functions_section(s: Summary, _plots: Collection[str]) -> list[str]:
    lines = ["## Client side vs server side, per function", "",
             "Client: as Locust saw it (worst page's p50/p95). Server: time in the function (local: HAProxy's mean; "
             "Google Cloud: the platform's p50), and time waiting in the platform's queue for a free instance "
             "(local only); the gap is the queue the study suspected.", "",
             "| Function | client mean | client p50 | client p95 | server service | server queue | most queued | "
             "429s | client failures |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in FUNCTIONS:
        c, sv = s.client.get(name), s.server.get(name)
        lines.append(f"| {name} | {ms(c['mean_ms'] if c else None)} | {ms(c['p50_ms'] if c else None)} | "
                     f"{ms(c['p95_ms'] if c else None)} | {ms(sv['service_ms'] if sv else None)} | "
                     f"{ms(sv['queue_ms'] if sv else None)} | {fmt(sv['max_queued'] if sv else None, 0)} | "
                     f"{fmt(sv['responses_429'] if sv else None, 0)} | {fmt(c['failures'], 0) if c else 'n/a'} |")
    return lines + [""]


def resources_section(s: Summary, plots: Collection[str]) -> list[str]:
    """CPU and memory per function and platform part: what each consumed, and per request served."""
    figures = s.resources
    if not figures:
        return []
    per_request: dict[str, float] = s.cpu_ms_per_request
    on_platform = s.server_source == "gcp-monitoring"
    lines = ["## Resources", "",
             ("Cloud Run's own figures over the window: CPU seconds are billed instance-seconds x vCPU x mean "
              "utilization; memory is the p95 utilization of the allocated memory." if on_platform else
              "Sampled every second from the processes (psutil) during the load: CPU in % of one core, summed over "
              "a function's instances; memory is resident memory. On 2 shared cores a function near 100 % is "
              "CPU-bound; one far below it while its queue grows is waiting on something else."), "",
             "| Part | CPU s | CPU % mean | CPU % peak | memory peak (MB) | CPU ms per request |",
             "|---|---:|---:|---:|---:|---:|"]
    ordered = [name for name in FUNCTIONS if name in figures] + sorted(set(figures) - set(FUNCTIONS))
    for name in ordered:
        row = figures[name]
        lines.append(f"| {name} | {fmt(row['cpu_seconds'])} | {fmt(row['cpu_percent_mean'])} | "
                     f"{fmt(row['cpu_percent_peak'])} | {fmt(row['memory_peak_mb'], 0)} | "
                     f"{fmt(per_request.get(name), 2)} |")
    if per_request:
        costliest = max(per_request, key=per_request.__getitem__)
        lines += ["", f"Most CPU per request: {costliest} ({fmt(per_request[costliest], 2)} ms)."]
    if "resources" in plots:
        lines += ["", f"![CPU and memory per function over time, with the load]({results.PLOTS['resources']})"]
    return lines + [""]


def offset(moment: float | None, load_start: float | None) -> str:
    """Seconds into the load of a moment that came ("-" if it did not); its time unknown without the load's start."""
    if moment is None:
        return "-"
    return f"{moment - load_start:.0f} s" if load_start is not None else "time unknown"


def saturation_words(found: Saturation, load_start: float | None) -> str:
    offset = f" at {found['time'] - load_start:.0f} s" if load_start is not None else ""
    return f"{found['process']} ({found['why']}){offset}, {found['users']:,} users"


def watch_lines(watch: GeneratorWatch | None, start: float | None) -> list[str]:
    """A watched run's warnings (results/generator.py, Watch), as the runner showed them."""
    if not watch:
        return []
    when = "in the terminal as each came" if watch["live"] else "once the fleet's files came, not live"
    source = watch["source"] or "none found: Locust's own warning"
    head = (f"- Watched: a load process (a worker, or the only one) at or above {watch['cpu_percent']:g} % CPU "
            f"(where the load-generator benchmark's latency holds: {source}) or its loop "
            f"{generator.LAG_SATURATED_MS:g} ms late for {generator.HOLD_S} s running, a worker's heartbeat "
            f"{generator.HEARTBEAT_LATE_S:g} s late or missing")
    if not watch["warnings"]:
        return [f"{head}: no warning."]
    return [f"{head}; warned {when}:", *(f"  - **Warned**: {saturation_words(item, start)}"
                                         + (" — before the knee" if item["before_knee"] else " — after the knee")
                                         for item in watch["warnings"])]


def heartbeat_lines(beats: Heartbeats | None, workers: int, start: float | None) -> list[str]:
    """The master's view of its workers' heartbeats (health.csv's worker columns)."""
    if beats is None:
        return (["- Workers' heartbeats, the master's view: unknown (a health.csv from before the master recorded "
                 "them)"] if workers else [])
    missing = (f"**{beats['missing_max']} missing** at worst, from {offset(beats['missing_at'], start)}"
               if beats["missing_max"] else "none missing")
    return [f"- Workers' heartbeats, the master's view: {beats['expected']} expected, {missing}; a heartbeat at most "
            f"{fmt(beats['heartbeat_late_max_s'], 0)} s late; users rebalanced {beats['rebalances']} times (a worker "
            "lost or back)"]


def generator_section(s: Summary, _plots: Collection[str]) -> list[str]:
    """Locust's own processes: was the load generator the limit?"""
    found = s.load_generator
    if not found:
        return []
    start = s.load["start"]
    spread = (f"a master and {found['workers']} workers" if found["workers"] else "one process")
    lines = ["## Load generator", "",
             f"Locust ran as {spread}; each process's CPU (% of one core) and its event loop's lag (how late a "
             f"0.1 s sleep woke) every second, in health.csv. Saturated: CPU at or above "
             f"{generator.CPU_SATURATED:g} % or the loop {generator.LAG_SATURATED_MS:g} ms late, for "
             f"{generator.HOLD_S} s running.", ""]
    if found["saturated"]:
        lines += [f"- **Saturated**: {saturation_words(item, start)}"
                  + (" — before the knee" if item["before_knee"] else " — after the knee")
                  for item in found["saturated"]]
    else:
        lines.append("- No process saturated: the figures are the system's, not Locust's.")
    lines += watch_lines(found.get("watch"), start) + heartbeat_lines(found.get("heartbeats"), found["workers"], start)
    ledger = s.ledger
    if ledger and ledger["missing_workers"]:
        lines.append(f"- **The visit ledger is incomplete**: {', '.join(ledger['missing_workers'])} sent no final "
                     "ledger (stopped or lost): their latest visits are unknown by id, and may show as stored beyond "
                     "the ids")
    if ledger and ledger["untracked"]:
        lines.append(f"- The ledger counted {ledger['untracked']:,} visits beyond Locust's `--ledger-ids` without "
                     "keeping their ids: the audit goes by the totals")
    busiest = sorted(found["per_process"].items(), key=lambda item: -item[1]["cpu_max"])[:MAX_PROCESS_ROWS]
    lines += ["", "| Process | CPU max (%) | Loop lag max (ms) | Saturated at |", "|---|---:|---:|---:|",
              *(f"| {name} | {fmt(p['cpu_max'], 0)} | {fmt(p['lag_max_ms'], 0)} | {offset(p['saturated_at'], start)} |"
                for name, p in busiest)]
    if len(found["per_process"]) > MAX_PROCESS_ROWS:
        lines.append(f"| ({len(found['per_process']) - MAX_PROCESS_ROWS} less busy processes) | | | |")
    return lines + [""]


def overload_section(s: Summary, _plots: Collection[str]) -> list[str]:
    found = s.overload
    if not found:
        return []
    visits = s.visits["total"]
    recovered = ("**had not come back** by the end of the load" if found["recovery_s"] is None else
                 f"came back {fmt(found['recovery_s'], 0)} s after the spike ended")
    return ["## Overload and recovery", "",
            f"- Spike: {found['spike_users']:,} users for {fmt(found['spike_s'], 0)} s; p95 before it "
            f"{ms(found['baseline_p95_ms'])} ms, during it up to {ms(found['spike_p95_ms'])} ms",
            f"- The front end answered: {found['refused_429']:,} refusals (429, the platform's queue full) and "
            f"{found['other_errors']:,} other errors (timeouts, connection errors, 5xx)",
            f"- Latency {recovered} (p95 within 1.5 x its level before the spike, no failure, for 5 s)",
            (f"- Every acknowledged visit stored: {'yes' if visits['lost'] == 0 else 'NO'} ({visits['lost']:,} lost, "
             f"{fmt(visits['duplicated'])} duplicated)" if visits["lost"] is not None else
             f"- Every acknowledged visit stored: not known, the store had not settled "
             f"({visits.get('not_stored_yet', 0):,} not stored yet)")
            + (f"; {visits['gave_up']:,} visits gave up (a 429 at each of their tries), {visits['refused']:,} "
               "were refused" if visits.get("gave_up") else ""), ""]


def scaling_section(s: Summary, _plots: Collection[str]) -> list[str]:
    """An autoscaled twin run's cold starts (twin/autoscaler.py); its instances over time are the server plot's."""
    found = s.cold_starts
    if not found:
        return []
    lines = ["## Instances and cold starts", "",
             "The twin's autoscaler started and stopped these functions' instances (scaling \"auto\", "
             "docs/local-twin.md); the server plot shows their instances each second. A start is under load when "
             "requests were in flight or waiting as it began (its imports then compete with them for this machine's "
             "cores), quiet otherwise; its time runs from the launch to the instance listening, what a request "
             "routed to it waited at most beyond its own service. A function at min_instances = max_instances is "
             "not autoscaled: its instances start with the stack, none under load, their quiet starts not recorded "
             "(n/a).", "",
             "| Function | cold starts in the load | under load | median / slowest (ms) | quiet "
             "| median / slowest (ms) |", "|---|---:|---:|---:|---:|---:|"]
    for name, row in found.items():
        lines.append(f"| {name} | {row['during_load']:,} | {row['under_load_count']:,} | "
                     f"{ms(row['under_load_ms_median'])} / {ms(row['under_load_ms_max'])} | "
                     f"{fmt(row['quiet_count'])} | {ms(row['quiet_ms_median'])} / {ms(row['quiet_ms_max'])} |")
    return [*lines, ""]


def scale_out_section(s: Summary, _plots: Collection[str]) -> list[str]:
    """A spike's scale-out on the twin with scaling "auto" (results/scaleout.py)."""
    from visitkit.results.scaleout import EARLY_S, STEADY_SHARE

    found = s.scale_out
    if not found:
        return []
    into = found["start"] - (s.load["start"] or found["start"])
    lines = ["## Scale-out at the spike", "",
             f"From the load's first step up ({fmt(into, 0)} s into the load) to the spike's end "
             f"({fmt(found['end'] - found['start'], 0)} s later), per function: how long its requests still waited for "
             f"an instance (until HAProxy's queue was empty with as many instances up as the spike needs at full "
             f"concurrency; n/a: still waiting at the spike's end), its instances, and its worst page's p95 in the "
             f"spike's first {EARLY_S} s and steady (the median over the spike's last {STEADY_SHARE:.0%}). Beside the "
             "lag, the capacity model's (`model/scaleout.py`, the same rules) given this run's traffic, its instances "
             "at the step, their starts there and the service time meanwhile (n/a: it wants an instance the run did "
             "not start).", "",
             "| Function | scale-out lag | model's | instances at the step / end / most | p95 first / steady (ms) "
             "| requests/s before / during |", "|---|---:|---:|---:|---:|---:|"]
    for name, row in found["functions"].items():
        lines.append(f"| {name} | {unit(fmt(row['lag_s'], 1), 's')} | {unit(fmt(row.get('model_lag_s'), 1), 's')} | "
                     f"{fmt(row['instances_at_start'])} / "
                     f"{fmt(row['instances_end'])} / {fmt(row['instances_max'])} | {ms(row['p95_first_ms'])} / "
                     f"{ms(row['p95_steady_ms'])} | {fmt(row['rps_before'], 1)} / {fmt(row['rps_spike'], 1)} |")
    return [*lines, ""]


def unit(text: str, suffix: str) -> str:
    """A figure with its unit, and "n/a" without one."""
    return text if text == "n/a" else f"{text} {suffix}"


def chaos_section(s: Summary, _plots: Collection[str]) -> list[str]:
    found = s.chaos
    if not found:
        return []
    visits, start = found["visits"], s.load["start"] or 0
    lines = ["## Chaos", "", f"Faults during the load: {found['plan']}. Marked on the plots as dotted lines.", "",
             f"- Visits: {fmt(visits['acknowledged'], 0)} acknowledged, {fmt(visits['stored'], 0)} stored, "
             f"**{fmt(visits['lost'], 0)} lost, {fmt(visits['duplicated'], 0)} duplicated**, "
             f"{fmt(visits.get('dead_lettered'), 0)} dead-lettered",
             (f"- Messages the pull store refused, their visit already counted (and changed nothing): "
              f"{fmt(found['deliveries_already_counted'], 0)}" if id_record(s) != "its marker" else
              f"- Redeliveries by the push delivery: {fmt(found['redeliveries'], 0)}; deliveries that found their "
              f"visit already counted (and changed nothing): {fmt(found['deliveries_already_counted'], 0)}"), "",
             "| at (s) | fault | target | lasted (s) | 5xx by function (event to 10 s after) | recovered after (s) |",
             "|---:|---|---|---:|---|---:|"]
    for event in found["events"]:
        errors = ", ".join(f"{name} {count}" for name, count in (event.get("server_errors") or {}).items() if count)
        recovered = "not by the end" if event.get("recovery_s") is None else fmt(event["recovery_s"], 0)
        lines.append(f"| {event['time'] - start:.0f} | {event['action']} | "
                     f"{event.get('target') or event.get('error')} | "
                     f"{fmt(event.get('seconds'))} | {errors or 'none'} | {recovered} |")
    return lines + ["", "Recovered: the first moment after the fault ended from which the client saw no failure "
                        "for 5 s.", ""]


def cost_section(s: Summary, _plots: Collection[str]) -> list[str]:
    estimate = s.cost
    if not estimate:
        return []
    where = (f"in {estimate['region']} (Cloud Run Tier {estimate['tier']})" if estimate.get("region")
             else "in a Tier 1 region")
    lines = ["## Estimated cost", "",
             f"An estimate, not a bill: what the platform reported, at list prices of {estimate['as_of']} {where} "
             "(scripts/visitkit/model/prices.json: sources), without free tiers.", "",
             f"| Item | Usage | {estimate['currency']} |", "|---|---|---:|"]
    lines += [f"| {item} | {usage} | {usd:,.4f} |" for item, usage, usd in estimate["lines"]]
    lines.append(f"| **Total** | | **{estimate['total']:,.4f}** |")
    acknowledged = s.visits["total"]["acknowledged"]
    if acknowledged:  # what scripts/predict --cost-per-million models, as this run was billed
        lines.append(f"| **Per million visits** | {acknowledged:,} visits acknowledged | "
                     f"**{estimate['total'] / acknowledged * 1e6:,.2f}** |")
    if estimate.get("left_out"):
        lines += ["", "Left out: " + "; ".join(estimate["left_out"]) + "."]
    return lines + [""]


# The report's figures a Cloud Monitoring query leaves empty (n/a) when it cannot be read.
EMPTIED = {
    "request_count": "requests, 429s (request_count) and 5xx per function, the store's accepted and delivered "
                     "visits, and the cost's requests and Pub/Sub messages",
    "request_latencies": "p50 and p95 per function (the server side's service time)",
    "instance_count": "most instances per function",
    "undelivered_messages": "the subscription's undelivered messages (backlog peak, drain)",
    "oldest_unacked_age": "the oldest unacked message peak",
    "firestore_writes": "Firestore document writes, and their cost",
    "billable_instance_time": "CPU seconds, CPU % and memory per function, and the cost's Cloud Run instance time",
    "cpu_utilizations": "CPU seconds and CPU % per function",
    "memory_utilizations": "memory peak per function",
    "firestore_reads": "the cost's Firestore reads",
    "firestore_deletes": "the cost's Firestore deletes",
    "dead_lettered": "dead-lettered visits",
    "requests_429_logged": "429s (request logs) per function",
    "store_deliveries": f"{PUSH_FUNCTION}'s deliveries by outcome (counted, already counted, malformed, failed)",
    "store_batch_counted": "the pull store's counted visits, and the visits it acknowledged (the store's throughput)",
    "store_batch_duplicates": "the pull store's visits already counted, and the visits it acknowledged",
    "store_batch_malformed": "the pull store's malformed messages, and the visits it acknowledged",
    "store_batch_nacked": "the visits of the pull store's failed batches (sent back to Pub/Sub)",
}


def missing_lines(s: Summary) -> list[str]:
    """One line per Cloud Monitoring query that could not be read: why, and what it leaves empty."""
    lines = []
    for entry in s.missing_metrics:
        error = " ".join(str(part) for part in (entry["error"], entry.get("code")) if part is not None)
        lines.append(f"- Missing: {entry['metric']} ({entry['metric_type']}): {error} {entry['reason']} — "
                     f"leaves empty: {EMPTIED.get(entry['metric'], 'its figures')}")
    return lines


def platform_section(s: Summary, plots: Collection[str]) -> list[str]:
    """The Google Cloud metrics: the plot of metrics/*.csv, the queries that could not be read, and
    the platform's figures."""
    if not s.metrics_files and not s.missing_metrics:
        return []
    lines = ["## Google Cloud metrics", "",
             "Cloud Monitoring's own figures, per minute, over the load and the convergence wait. Latency is "
             "the time spent in the function, without the queue in front of busy instances; requests are those "
             "that reached an instance, so 429s refused at the maximum instance count may be missing "
             "(Locust's count is the reference).", ""]
    if "gcp" in plots:
        lines += ["![latency p50/p95, requests by code class, instances, backlog, Firestore writes]"
                  f"({results.PLOTS['gcp']})", ""]
    missing = missing_lines(s)
    if missing:
        lines += [f"Queries that could not be read (listed in `metrics/{MISSING}`); the figures they "
                  "leave empty show n/a, never 0:", "", *missing, ""]
    no_dead_letter = s.no_dead_letter_topic
    if no_dead_letter:
        retention = no_dead_letter["message_retention_seconds"]
        lines += ["- Deployed with `dead_letter: false`: no dead-letter topic: a delivery that always fails is "
                  "retried until its message expires (message_retention_seconds"
                  + (f", {retention:,} s" if retention is not None else "")
                  + ") and is not counted as dead-lettered; dead-lettered: n/a (not applicable)", ""]
    platform = s.platform
    if platform:
        lines += ["429s: Locust's count (the client side table above) is the reference; `request_count` counts "
                  "only requests that reached an instance, and the request logs (a log-based metric) count "
                  "those refused at the maximum instance count too.", "",
                  "| Function | requests | 429s (request_count) | 429s (request logs) | 5xx | p50, worst minute (ms) "
                  "| p95, worst minute (ms) | most instances |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for name, f in platform["functions"].items():
            lines.append(f"| {name} | {fmt(f['requests'], 0)} | {fmt(f['responses_429'], 0)} | "
                         f"{fmt(f.get('responses_429_logged'), 0)} | {fmt(f['responses_5xx'], 0)} | "
                         f"{ms(f['p50_ms_max'])} | {ms(f['p95_ms_max'])} | {fmt(f['instances_max'], 0)} |")
        deliveries = platform["deliveries"]
        lines += ["", f"- Subscription: undelivered messages peak {fmt(platform['undelivered_peak'], 0)}, "
                      f"oldest unacked message peak {fmt(platform['oldest_unacked_peak_s'], 0)} s",
                  f"- Firestore document writes: {fmt(platform['firestore_writes'], 0)} "
                  f"(peak {fmt(platform['firestore_writes_peak_per_min'], 0)}/min; "
                  + ("a batch's shards and its batch document)" if id_record(s) != "its marker" else
                     "two per stored visit: the shard and the dedup marker)"),
                  (f"- {PUSH_FUNCTION}'s batches, from its logs: {fmt(deliveries.get('counted'), 0)} visits counted, "
                   f"{fmt(deliveries.get('already_counted'), 0)} already counted (refused, changed nothing), "
                   f"{fmt(deliveries.get('malformed'), 0)} malformed, {fmt(deliveries.get('failed'), 0)} in batches "
                   "that failed (sent back to Pub/Sub); " if id_record(s) != "its marker" else
                   f"- {PUSH_FUNCTION}'s deliveries, from its logs: {fmt(deliveries.get('counted'), 0)} counted, "
                   f"{fmt(deliveries.get('already_counted'), 0)} already counted (redeliveries, changed nothing), "
                   f"{fmt(deliveries.get('malformed'), 0)} malformed, {fmt(deliveries.get('failed'), 0)} failed (500: "
                   "delivered again); ")
                  + ("no dead-letter topic (dead-lettered: n/a)" if no_dead_letter else
                     f"{fmt(platform.get('dead_lettered'), 0)} moved to the dead-letter topic"), ""]
    metric_types = {query.name: query.metric_type for query in (*QUERIES, *PULL_QUERIES)}
    if s.metrics_files:
        lines.append("Series: " + ", ".join(f"`metrics/{name}` ({metric_types.get(name.rsplit('.', 1)[0], '?')})"
                                            for name in s.metrics_files))
    return lines + [""]


def visits_section(s: Summary, _plots: Collection[str]) -> list[str]:
    exact = s.audit is not None and s.audit["method"] == "exact"
    lines = exact_visit_lines(s) if exact else totals_visit_lines(s)
    dead = s.visits["total"].get("dead_lettered")
    if dead is not None and exact:
        lines.append(f"Dead-lettered: {dead:,} messages reached the dead-letter topic after the subscription's maximum "
                     "delivery attempts; they wait in its pull subscription. A lost visit may be among them.")
    elif dead is not None:
        lines.append(f"Dead-lettered: {dead:,} visits reached the dead-letter topic after the subscription's maximum "
                     "delivery attempts; they wait in its pull subscription, so the total's `lost` leaves them out "
                     "(lost = the pages' lost - dead-lettered).")
    return lines + [""]


EXACT_COLUMNS = (("sent", "sent"), ("retried", "retried"), ("acknowledged, stored", "acknowledged_stored"),
                 ("acknowledged, **not stored** (lost)", "lost"), ("not acknowledged, stored", "stored_unacknowledged"),
                 ("not acknowledged, not stored", "neither"), ("stored beyond the ids (duplicated)", "duplicated"))
UNSETTLED_COLUMNS = (*EXACT_COLUMNS[:3], ("acknowledged, not stored yet", "not_stored_yet"), *EXACT_COLUMNS[4:6],
                     ("stored beyond the ids while the store still moved", "stored_while_moving"))
TOTALS_COLUMNS = (("sent", "sent"), ("acknowledged (2xx)", "acknowledged"), ("refused (4xx, 429)", "refused"),
                  ("gave up (429 each try)", "gave_up"), ("failed (5xx)", "failed"), ("no answer", "unanswered"),
                  ("stored", "stored"), ("lost", "lost"), ("duplicated", "duplicated"))


def visits_table(visits: Mapping[str, Mapping[str, object]], columns: Sequence[tuple[str, str]]) -> list[str]:
    """One row per page and the total: (header, key) per column."""
    return ["| Page | " + " | ".join(header for header, _ in columns) + " |",
            "|---|" + "---:|" * len(columns),
            *(f"| {page} | " + " | ".join(f"{visits[page].get(key, 0):,}" for _, key in columns) + " |"
              for page in (*PAGES, "total"))]


def exact_visit_lines(s: Summary) -> list[str]:
    audit, total, unsettled = s.audit, s.visits["total"], unsettled_why(s)
    assert audit is not None  # visits_section: an exact audit
    paid = f", about {audit['read_cost_usd']:.4f} USD of reads" if audit["read_cost_usd"] is not None else ""
    lines = ["## Visits: every visit's fate", "",
             (f"Audited exactly: the store's batch documents were read for each of the {audit['reads']:,} visit "
              f"ids{paid}." if id_record(s) != "its marker" else
              f"Audited exactly: the store's marker of each of the {audit['reads']:,} visit ids was read{paid}."), "",
             *visits_table(s.visits, UNSETTLED_COLUMNS if unsettled else EXACT_COLUMNS),
             "", f"Not acknowledged: {total['refused']:,} refused (4xx, the platform's 429 included), "
                  f"{total.get('gave_up', 0):,} gave up (a 429 at each of their tries), "
                  f"{total['failed']:,} failed (5xx), {total['unanswered']:,} with no answer. Retried: posted again "
                  "with the same visit id (--retry-visits: after a 429, a 5xx or no answer), stored once however "
                  "often it was posted. Stored beyond the ids: a page's "
                  "total grown by more than its stored visit ids, a visit counted twice or one from outside the "
                  "run's ledger (a warm-up visit with a 5xx that landed late)."]
    if unsettled:
        lines.append(f"**The store had not settled** when the audit read it ({unsettled}): an acknowledged visit "
                     "without its marker may still have been on its way (queued in Pub/Sub, or in a retry), and the "
                     "shards, read apart from the markers, may hold visits stored in between, so none is called "
                     "lost or duplicated: a run whose store settles before its audit would tell."
                     + (f" {total['duplicated']:,} visits were counted twice all the same (an id in two batch "
                        "documents)." if total["duplicated"] else ""))
    if total.get("refused_stored"):
        lines.append(f"**{total['refused_stored']:,} refused visits were stored**: a 4xx must publish nothing.")
    if audit["lost_ids"]:
        lines.append(("First visit ids not stored yet: " if unsettled else "First lost visit ids: ")
                     + ", ".join(f"`{visit_id}`" for visit_id in audit["lost_ids"]))
    return lines


def totals_visit_lines(s: Summary) -> list[str]:
    audit = s.audit
    lines = ["## Visits: acknowledged vs stored", "",
             f"Audited by the totals: {audit['why'] if audit else 'the run was recorded before audits'}.", "",
             *visits_table(s.visits, TOTALS_COLUMNS),
             "", "Lost: acknowledged but never stored. Refused visits were never published, nor were those that "
                  "gave up (--retry-visits: a 429 at each try). Failed (5xx) and "
                  "'no answer' visits are ambiguous: they may or may not be stored. Duplicated: stored beyond "
                  "acknowledged + ambiguous."]
    return lines + sample_lines(s)


def sample_lines(s: Summary) -> list[str]:
    """The audit of the ledger's sample of visit ids across the load, and the loss rate it rules out."""
    sample = s.audit.get("sample") if s.audit else None
    if not sample:
        return []
    n, lost = sample["acknowledged"], sample["lost"]
    bound = sample["loss_rate_bound"]
    confidence = f"{sample['confidence']:.0%}"
    verdict = (f"none of the {n:,} acknowledged was lost: the run rules out a loss rate above "
               f"**{percent(bound)}** ({confidence}, one-sided: 1 - {1 - sample['confidence']:.2f}^(1/{n:,}), "
               "about 3/n)" if bound is not None else
               f"**{lost:,} of the {n:,} acknowledged were lost** (a loss rate near "
               f"{percent(lost / n if n else None)})")
    planned = sample["planned_visits"]
    return ["", "### The sample of visit ids, across the load", "",
            f"The ledger kept {one_in(sample['fraction'])} visit ids, a share set before the run from its plan"
            + (f" of {planned:,} visits" if planned else "")
            + f" (an id is kept when its sha256 falls below that fraction, alike in every worker): "
            f"{sample['sampled']:,} visits, each audited by its marker; {verdict}. "
            f"{sample['stored_unacknowledged']:,} not acknowledged were stored (a 5xx or no answer whose publish "
            "landed). A visit id is stored at most once by its marker, so duplicates show only in the totals above.",
            "", "| Load (s) | visits/s (sampled / fraction) | sampled | acknowledged | lost "
                "| not acknowledged, stored |", "|---|---:|---:|---:|---:|---:|",
            *(f"| {part['start_s']:g}-{part['end_s']:g} | {fmt(part['visits_per_s'])} | {part['sampled']:,} | "
              f"{part['acknowledged']:,} | {part['lost']:,} | {part['stored_unacknowledged']:,} |"
              for part in sample["parts"])]


def errors_section(s: Summary, _plots: Collection[str]) -> list[str]:
    if not s.failures:
        return []
    return ["## Most frequent errors", "", "| Endpoint | Error | Occurrences |", "|---|---|---:|",
            *(f"| {name} | {error} | {count:,} |" for name, error, count in s.failures), ""]


def run_section(s: Summary, _plots: Collection[str]) -> list[str]:
    lines = ["## Run", ""]
    if s.settings_line:
        lines.append(f"- Settings: {s.settings_line}")
    if s.shape:
        lines.append(f"- Shape: {s.shape}")
    profile = s.profile
    if profile:
        latency = ", ".join(f"{backend} +{ms:g} ms" for backend, ms in profile["latency_ms"].items())
        lines.append(f"- Latency profile: {profile['name']} ({latency} per round trip; {profile['source']})")
    twin = s.twin
    if twin:
        restarts = twin["restarts"] or {}
        push = twin["push"]
        lines.append(f"- Instance restarts: {sum(restarts.values())}"
                     + (" (" + ", ".join(f"{n} {c}" for n, c in restarts.items()) + ")" if restarts else ""))
        if push:
            lines.append(f"- Push delivery: {push.get('deliveries', 0):,} requests, "
                         f"{push.get('retries', 0):,} retries, "
                         f"{push.get('dead_lettered', 0):,} dead-lettered; window peak {push.get('window_peak')}, "
                         f"shrunk {push.get('window_shrinks', 0)} times")
    warm = s.warm_up
    if warm:
        lines.append(f"- Warm-up before the test: {warm['users']:,} users for {warm['seconds']:g} s, "
                     f"{warm['acknowledged']:,} visits acknowledged, all stored before the totals were read "
                     "(files in warm-up/)")
    lines.append(f"- Server figures: {s.server_source or 'none'}")
    lines += [f"- {note}" for note in s.notes]
    files = [results.STATS, f"{results.HISTORY} (full history)", results.LOCUST_HTML, results.LEDGER, results.HEALTH,
             results.PER_SECOND, results.SAMPLES, results.POLLS, results.AUDIT, results.SUMMARY, results.LOCUST_LOG]
    if s.load.get("workers"):
        files.append(f"{results.RUN_CONF} (the options master and workers read)")
    lines.append(f"- Files: {', '.join(files)}")
    return lines

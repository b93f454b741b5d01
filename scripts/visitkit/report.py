"""A run's summary -> report.md, for a person deciding how to scale: one function per section."""
from visitkit import analysis
from visitkit.catalogue import FUNCTIONS, PAGES
from visitkit.formatting import fmt, ms, percent, when
from visitkit.monitoring import QUERIES

PLOTS = {"load": "load.png", "server": "server.png", "gcp": "gcp-metrics.png"}


def render(summary, plots=()):
    """The whole report; `plots`: the names of the plots written beside it (PLOTS' keys)."""
    sections = (title_section, headline_section, plots_section, percentiles_section, functions_section,
                platform_section, visits_section, errors_section, run_section)
    lines = []
    for section in sections:
        lines += section(summary, plots)
    return "\n".join(lines) + "\n"


def title_section(s, _plots):
    load = s["load"]
    return [f"# {s['iteration']}: {s['test']} test ({s['target']})", "",
            f"Run {s['results_dir']}; {fmt(load['seconds'], 0)} s of load, up to {load['max_users']:,} users, "
            f"{load['requests']:,} requests, {load['failures']:,} failed ({percent(load['failure_ratio'] or 0)}).", ""]


def verdict_lines(verdict):
    if not verdict:
        return []
    hypothesis = verdict.get("hypothesis")
    lines = [f"- **Verdict: {verdict['outcome']}**" + (f": {hypothesis}" if hypothesis else "")]
    for check in verdict["checks"]:
        holds = {True: "holds", False: "does not hold"}.get(check["holds"], "unknown")
        lines.append(f"  - `{check['check']}`: {holds} ({check['detail']})")
    return lines


def headline_section(s, _plots):
    h, bp, conv, start = s["headline"], s["breakpoint"], s["convergence"], s["load"]["start"]
    visits, store = s["visits"]["total"], s["store"]
    lines = ["## Headline", "", *verdict_lines(s.get("verdict")),
             f"- RPS stops growing with users (knee): {when(bp['knee'], start)}",
             f"- First failure: {when(bp['first_failure'], start)}",
             f"- Peak RPS: {when(bp['peak_rps'], start)}"]
    if bp["p95_ceiling"]:
        lines.append(f"- p95 ceiling (highest p95 of the run): {ms(h['p95_ceiling_ms'])} ms, first reached with "
                     f"{bp['p95_ceiling']['users']:,} users")
    else:
        lines.append("- p95 ceiling: n/a")
    lines.append(f"- Slowest function for the client (p95): {h.get('slowest_function', 'n/a')}")
    if conv["converged"]:
        lines.append(f"- Counters converged {fmt(conv['seconds_after_load'], 0)} s after the load ended: "
                     f"{fmt(conv['extra_minutes_per_minute'], 2)} extra minutes per minute of load")
    else:
        lines.append(f"- Counters did **not** converge within {fmt(conv['waited_seconds'], 0)} s after the load")
    unanswered = visits["stored_unacknowledged"]
    lines.append(f"- Visits: {visits['acknowledged']:,} acknowledged, {visits['stored']:,} stored, "
                 f"{visits['lost']:,} lost, {visits['duplicated']:,} duplicated"
                 + (f", {unanswered:,} stored without an answer to the client" if unanswered else ""))
    if store:
        lines.append(f"- Store: accepted (202) {fmt(store['accepted_per_s'])}/s, stored {fmt(store['writes_per_s'])}/s "
                     f"during the load; {fmt(store['throughput_per_s'])}/s {store['throughput_of']} while backlogged; "
                     f"backlog peak {fmt(store['backlog_peak'], 0)}, drained at {fmt(store['drain_per_s'])} msg/s")
    return lines + [""]


def plots_section(_s, plots):
    captions = {"load": "users, RPS, failures, p95", "server": "backlog, visits/s, queues, 429s"}
    return [line for key in ("load", "server") if key in plots for line in (f"![{captions[key]}]({PLOTS[key]})", "")]


def percentiles_section(s, _plots):
    lines = ["## Response times per endpoint (client side, ms)", "",
             "| Method | Name | # reqs | # fails | 50% | 60% | 70% | 80% | 90% | 95% |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in s["percentiles"]:
        bold = "**" if row["name"] == "Aggregated" else ""
        lines.append(f"| {row['method']} | {bold}{row['name']}{bold} | {row['requests']:,} | {row['failures']:,} | "
                     + " | ".join(ms(row[p]) for p in analysis.STUDY_PERCENTILES) + " |")
    return lines + [""]


def functions_section(s, _plots):
    lines = ["## Client side vs server side, per function", "",
             "Client: as Locust saw it (worst page's p50/p95). Server: time in the function (local: HAProxy's mean; "
             "Google Cloud: the platform's p50), and time waiting in the platform's queue for a free instance "
             "(local only); the gap is the queue the study suspected.", "",
             "| Function | client mean | client p50 | client p95 | server service | server queue | most queued | "
             "429s | client failures |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in FUNCTIONS:
        c, sv = s["client"].get(name, {}), s["server"].get(name, {})
        lines.append(f"| {name} | {ms(c.get('mean_ms'))} | {ms(c.get('p50_ms'))} | {ms(c.get('p95_ms'))} | "
                     f"{ms(sv.get('service_ms'))} | {ms(sv.get('queue_ms'))} | {fmt(sv.get('max_queued'), 0)} | "
                     f"{fmt(sv.get('responses_429'), 0)} | {fmt(c.get('failures'), 0) if c else 'n/a'} |")
    return lines + [""]


def platform_section(s, plots):
    """The Google Cloud metrics: the plot of metrics/*.csv and the platform's figures."""
    if not s.get("metrics_files"):
        return []
    lines = ["## Google Cloud metrics", "",
             "Cloud Monitoring's own figures, per minute, over the load and the convergence wait. Latency is "
             "the time spent in the function, without the queue in front of busy instances; requests are those "
             "that reached an instance, so 429s refused at the maximum instance count may be missing "
             "(Locust's count is the reference).", ""]
    if "gcp" in plots:
        lines += [f"![latency p50/p95, requests by code class, instances, backlog, Firestore writes]({PLOTS['gcp']})",
                  ""]
    platform = s.get("platform")
    if platform:
        lines += ["| Function | requests | 429s | 5xx | p50, worst minute (ms) | p95, worst minute (ms) | "
                  "most instances |", "|---|---:|---:|---:|---:|---:|---:|"]
        for name, f in platform["functions"].items():
            lines.append(f"| {name} | {fmt(f['requests'], 0)} | {fmt(f['responses_429'], 0)} | "
                         f"{fmt(f['responses_5xx'], 0)} | {ms(f['p50_ms_max'])} | {ms(f['p95_ms_max'])} | "
                         f"{fmt(f['instances_max'], 0)} |")
        lines += ["", f"- Subscription: undelivered messages peak {fmt(platform['undelivered_peak'], 0)}, "
                      f"oldest unacked message peak {fmt(platform['oldest_unacked_peak_s'], 0)} s",
                  f"- Firestore document writes: {fmt(platform['firestore_writes'], 0)} "
                  f"(peak {fmt(platform['firestore_writes_peak_per_min'], 0)}/min; two per stored visit: "
                  "the shard and the dedup marker)", ""]
    metric_types = {query.name: query.metric_type for query in QUERIES}
    lines.append("Series: " + ", ".join(f"`metrics/{name}` ({metric_types.get(name.rsplit('.', 1)[0], '?')})"
                                        for name in s["metrics_files"]))
    return lines + [""]


def visits_section(s, _plots):
    lines = ["## Visits: acknowledged vs stored", "",
             "| Page | sent | acknowledged (2xx) | rejected | no answer | stored | lost | duplicated |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for page in (*PAGES, "total"):
        v = s["visits"][page]
        lines.append(f"| {page} | {v['sent']:,} | {v['acknowledged']:,} | {v['rejected']:,} | {v['unanswered']:,} | "
                     f"{v['stored']:,} | {v['lost']:,} | {v['duplicated']:,} |")
    return lines + ["", "Lost: acknowledged but never stored. Duplicated: stored beyond what was acknowledged or "
                        "left without an answer. 'No answer' visits (timeouts) may or may not be stored.", ""]


def errors_section(s, _plots):
    if not s["failures"]:
        return []
    return ["## Most frequent errors", "", "| Endpoint | Error | Occurrences |", "|---|---|---:|",
            *(f"| {name} | {error} | {count:,} |" for name, error, count in s["failures"]), ""]


def run_section(s, _plots):
    lines = ["## Run", ""]
    settings = s.get("settings") or {}
    if settings:
        instances = ", ".join(f"{n} {f.get('max_instances', '?')}x{f.get('concurrency', 1)}"
                              for n, f in (settings.get("functions") or {}).items())
        lines.append(f"- Settings: {settings.get('shards_per_page')} shards/page, get-counter cache "
                     f"{settings.get('cache_ttl_seconds')} s; instances x concurrency: {instances}")
    if s.get("shape"):
        lines.append(f"- Shape: {s['shape']}")
    lines.append(f"- Server figures: {s.get('server_source') or 'none'}")
    lines += [f"- {note}" for note in s["notes"]]
    lines.append("- Files: locust_stats.csv, locust_stats_history.csv (full history), locust.html, ledger.json, "
                 "server-samples.jsonl, convergence.jsonl, summary.json, locust.log")
    return lines

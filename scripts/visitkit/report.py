"""A results folder -> summary.json (figures) -> report.md (for a person deciding how to scale).

Everything is computed from the folder's own files, so a report can be rebuilt later:
run.json, ledger.json, locust_stats.csv, locust_stats_history.csv, locust_failures.csv,
server-samples.jsonl, convergence.jsonl (and, for a Google Cloud run, metrics/*.csv).
"""
import json
import operator
import re
from pathlib import Path

from visitkit import analysis
from visitkit.monitoring import QUERIES
from visitkit.settings import FUNCTIONS, PAGES

LATEST_START = "<!-- latest-local-results:start (written by scripts/run-iteration) -->"
LATEST_END = "<!-- latest-local-results:end -->"
CHECK_PATTERN = re.compile(r"\*\*Check:\*\*\s*`([^`]+)`")
OPERATORS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
             "<": operator.lt, ">": operator.gt}


# ---- figures --------------------------------------------------------------------------------------
def summarize(results_dir):
    results_dir = Path(results_dir)
    run = json.loads((results_dir / "run.json").read_text())
    ledger = json.loads((results_dir / "ledger.json").read_text()) if (results_dir / "ledger.json").exists() else {}
    table = analysis.percentile_table(analysis.read_csv(results_dir / "locust_stats.csv"))
    history = analysis.aggregated_history(analysis.read_csv(results_dir / "locust_stats_history.csv"))
    failures_file = results_dir / "locust_failures.csv"
    failures = analysis.first_failures(analysis.read_csv(failures_file)) if failures_file.exists() else []
    samples = analysis.read_jsonl(results_dir / "server-samples.jsonl")
    polls = [(p["time"], p["totals"]) for p in analysis.read_jsonl(results_dir / "convergence.jsonl")]

    load_start, load_end = analysis.load_window(history)
    aggregated = table[-1] if table and table[-1]["name"] == "Aggregated" else None
    after = polls[-1][1] if polls else run.get("before", {})
    summary = {
        "iteration": run["iteration"], "test": run["test"], "target": run["target"],
        "started": run.get("started"), "results_dir": results_dir.name, "settings": run.get("settings"),
        "shape": run.get("shape"),
        "load": {"start": load_start, "end": load_end,
                 "seconds": (load_end - load_start) if load_start is not None else None,
                 "max_users": max((s["users"] for s in history), default=0),
                 "requests": aggregated["requests"] if aggregated else 0,
                 "failures": aggregated["failures"] if aggregated else 0},
        "breakpoint": analysis.find_breakpoint(history),
        "percentiles": table,
        "client": analysis.client_by_function(table),
        "server": analysis.server_by_function(samples, load_start, load_end) if samples else {},
        "store": analysis.store_figures(samples, load_start, load_end) if samples else {},
        "convergence": analysis.convergence(polls, run.get("before", {}), ledger.get("acknowledged", {}),
                                            load_start, load_end),
        "visits": analysis.visit_accounting(ledger, run.get("before", {}), after),
        "failures": failures[:10],
        "notes": run.get("notes", []),
        "server_source": samples[0].get("source") if samples else None,
        "metrics_files": sorted(path.name for path in (results_dir / "metrics").glob("*.csv")),
    }
    summary["platform"] = (platform_figures(samples) if summary["server_source"] == "gcp-monitoring"
                           else None)
    load = summary["load"]
    load["failure_ratio"] = load["failures"] / load["requests"] if load["requests"] else None
    summary["headline"] = headline(summary)
    return summary


def platform_figures(samples):
    """Cloud Monitoring's figures over the whole window (load and convergence): per function the
    requests, 429s and 5xx that reached it, its worst minute's p50 and p95 and its most instances;
    the subscription's and Firestore's peaks. Counters in the samples count from the window's start."""
    def values(get):
        return [v for v in (get(sample) for sample in samples) if v is not None]

    functions = {}
    for name in FUNCTIONS:
        functions[name] = {key: analysis.fn_field(name, key)(samples[-1])
                           for key in ("requests", "responses_429", "responses_5xx")}
        for key, field in (("p50_ms_max", "service_ms"), ("p95_ms_max", "service_ms_p95"),
                           ("instances_max", "instances")):
            functions[name][key] = max(values(analysis.fn_field(name, field)), default=None)
    writes = [rate for _, rate in analysis.counter_rate(samples, analysis.store_field("firestore_writes"))
              if rate is not None]
    return {"functions": functions,
            "undelivered_peak": max(values(analysis.store_field("backlog")), default=None),
            "oldest_unacked_peak_s": max(values(analysis.store_field("oldest_unacked_s")), default=None),
            "firestore_writes": analysis.store_field("firestore_writes")(samples[-1]),
            "firestore_writes_peak_per_min": max(writes) * 60 if writes else None}


def headline(summary):
    """The flat figures checks and comparisons use (names are stable: READMEs refer to them)."""
    bp, conv, visits = summary["breakpoint"], summary["convergence"], summary["visits"]["total"]
    pick = lambda d, key: d[key] if d else None  # noqa: E731
    figures = {
        "users_max": summary["load"]["max_users"], "requests": summary["load"]["requests"],
        "failure_ratio": summary["load"]["failure_ratio"],
        "rps_peak": pick(bp["peak_rps"], "rps"), "knee_users": pick(bp["knee"], "users"),
        "knee_rps": pick(bp["knee"], "rps"), "first_failure_users": pick(bp["first_failure"], "users"),
        "first_failure_rps": pick(bp["first_failure"], "rps"), "p95_ceiling_ms": pick(bp["p95_ceiling"], "p95_ms"),
        "convergence_s": conv["seconds_after_load"], "extra_min_per_min": conv["extra_minutes_per_minute"],
        "visits.acknowledged": visits["acknowledged"], "visits.stored": visits["stored"],
        "visits.lost": visits["lost"], "visits.duplicated": visits["duplicated"],
    }
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
        if not key.endswith("_time"):
            figures[f"store.{key}"] = value
    return figures


# ---- the verdict ---------------------------------------------------------------------------------
def hypothesis_checks(readme_text):
    return CHECK_PATTERN.findall(readme_text or "")


def evaluate_check(expression, figures, other_figures):
    """'store.throughput_per_s >= 1.8 x iteration-2' -> (True/False/None, explanation).

    other_figures(name) gives another iteration's latest headline figures (or None)."""
    match = re.fullmatch(r"\s*([\w.\-]+)\s*(<=|>=|==|!=|<|>)\s*([\w.\-]+)(?:\s*x\s*([\w\-]+))?\s*", expression)
    if not match:
        return None, f"cannot read check `{expression}`"
    metric, op, right, baseline_name = match.groups()
    value = figures.get(metric)
    if value is None:
        return None, f"{metric} was not measured"
    if baseline_name:
        baseline = (other_figures(baseline_name) or {}).get(metric)
        if baseline is None:
            return None, f"no {metric} from {baseline_name} to compare with (run it first)"
        threshold = float(right) * baseline
        return OPERATORS[op](value, threshold), f"{metric} = {fmt(value)} vs {right} x {fmt(baseline)} ({baseline_name}) = {fmt(threshold)}"
    try:
        threshold = float(right)
    except ValueError:
        threshold = right
    return OPERATORS[op](value, threshold), f"{metric} = {fmt(value)}, wanted {op} {right}"


def verdict(summary, readme_text, other_figures):
    checks = [(expr, *evaluate_check(expr, summary["headline"], other_figures))
              for expr in hypothesis_checks(readme_text)]
    if not checks:
        outcome = "no check stated"
    elif any(ok is None for _, ok, _ in checks):
        outcome = "undetermined"
    else:
        outcome = "supported" if all(ok for _, ok, _ in checks) else "not supported"
    return {"outcome": outcome, "checks": [{"check": e, "holds": ok, "detail": d} for e, ok, d in checks]}


def hypothesis_text(readme_text):
    """The README's '## Hypothesis' section, first paragraph."""
    match = re.search(r"^## Hypothesis\s*\n+(.+?)(?:\n\s*\n|\Z)", readme_text or "", re.S | re.M)
    return " ".join(match.group(1).split()) if match else None


def latest_summary(iteration_dir, target="local"):
    """The newest results/*/summary.json of an iteration for a target, or None."""
    found = []
    for path in Path(iteration_dir).glob("results/*/summary.json"):
        data = json.loads(path.read_text())
        if data.get("target") == target or target is None:
            found.append((data.get("started") or "", path, data))
    return max(found)[2] if found else None


# ---- rendering -----------------------------------------------------------------------------------
def fmt(value, digits=1):
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if abs(value) < 1000 or digits else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ms(value):
    return "n/a" if value is None else f"{value:,.0f}"


def when(summary, point):
    if not point:
        return "not reached"
    start = summary["load"]["start"]
    offset = f" at {point['time'] - start:.0f} s" if start is not None else ""
    return f"{point['users']:,} users, {fmt(point['rps'])} RPS{offset}"


def render(summary, verdict_result=None, hypothesis=None):
    s, h, bp, conv = summary, summary["headline"], summary["breakpoint"], summary["convergence"]
    visits = s["visits"]["total"]
    lines = [f"# {s['iteration']}: {s['test']} test ({s['target']})", "",
             f"Run {s['results_dir']}; {fmt(s['load']['seconds'], 0)} s of load, up to {s['load']['max_users']:,} users, "
             f"{s['load']['requests']:,} requests, {s['load']['failures']:,} failed "
             f"({fmt((s['load']['failure_ratio'] or 0) * 100)} %).", "", "## Headline", ""]
    if verdict_result:
        lines.append(f"- **Verdict: {verdict_result['outcome']}**" + (f": {hypothesis}" if hypothesis else ""))
        lines += [f"  - `{c['check']}`: {'holds' if c['holds'] else 'does not hold' if c['holds'] is False else 'unknown'} ({c['detail']})"
                  for c in verdict_result["checks"]]
    lines += [
        f"- RPS stops growing with users (knee): {when(s, bp['knee'])}",
        f"- First failure: {when(s, bp['first_failure'])}",
        f"- Peak RPS: {when(s, bp['peak_rps'])}",
        f"- p95 ceiling (highest p95 of the run): {ms(h['p95_ceiling_ms'])} ms, first reached with {bp['p95_ceiling']['users']:,} users"
        if bp["p95_ceiling"] else "- p95 ceiling: n/a",
        f"- Slowest function for the client (p95): {h.get('slowest_function', 'n/a')}",
        f"- Counters converged {fmt(conv['seconds_after_load'], 0)} s after the load ended: "
        f"{fmt(conv['extra_minutes_per_minute'], 2)} extra minutes per minute of load"
        if conv["converged"] else
        f"- Counters did **not** converge within {fmt(conv['waited_seconds'], 0)} s after the load",
        f"- Visits: {visits['acknowledged']:,} acknowledged, {visits['stored']:,} stored, "
        f"{visits['lost']:,} lost, {visits['duplicated']:,} duplicated"
        + (f", {visits['stored_unacknowledged']:,} stored without an answer to the client" if visits["stored_unacknowledged"] else ""),
    ]
    store = s["store"]
    if store:
        lines.append(f"- Store: published {fmt(store['published_per_s'])}/s, stored {fmt(store['writes_per_s'])}/s during "
                     f"the load; {fmt(store['throughput_per_s'])}/s while backlogged; backlog peak {fmt(store['backlog_peak'], 0)}, "
                     f"drained at {fmt(store['drain_per_s'])} msg/s")
    lines += ["", "![users, RPS, failures, p95](load.png)", ""]
    if s["server"]:
        lines += ["![backlog, writes/s, queues, 429s](server.png)", ""]

    lines += ["## Response times per endpoint (client side, ms)", "",
              "| Method | Name | # reqs | # fails | 50% | 60% | 70% | 80% | 90% | 95% |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in s["percentiles"]:
        bold = "**" if row["name"] == "Aggregated" else ""
        lines.append(f"| {row['method']} | {bold}{row['name']}{bold} | {row['requests']:,} | {row['failures']:,} | "
                     + " | ".join(ms(row[p]) for p in analysis.STUDY_PERCENTILES) + " |")

    lines += ["", "## Client side vs server side, per function", "",
              "Client: as Locust saw it (worst page's p50/p95). Server: time in the function (local: HAProxy's mean; "
              "Google Cloud: the platform's p50), and time waiting in the platform's queue for a free instance "
              "(local only); the gap is the queue the study suspected.", "",
              "| Function | client mean | client p50 | client p95 | server service | server queue | most queued | 429s | client failures |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in FUNCTIONS:
        c, sv = s["client"].get(name, {}), s["server"].get(name, {})
        lines.append(f"| {name} | {ms(c.get('mean_ms'))} | {ms(c.get('p50_ms'))} | {ms(c.get('p95_ms'))} | "
                     f"{ms(sv.get('service_ms'))} | {ms(sv.get('queue_ms'))} | {fmt(sv.get('max_queued'), 0)} | "
                     f"{fmt(sv.get('responses_429'), 0)} | {fmt(c.get('failures'), 0) if c else 'n/a'} |")

    lines += platform_section(s)

    lines += ["", "## Visits: acknowledged vs stored", "",
              "| Page | sent | acknowledged (2xx) | rejected | no answer | stored | lost | duplicated |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for page in (*PAGES, "total"):
        v = s["visits"][page]
        lines.append(f"| {page} | {v['sent']:,} | {v['acknowledged']:,} | {v['rejected']:,} | {v['unanswered']:,} | "
                     f"{v['stored']:,} | {v['lost']:,} | {v['duplicated']:,} |")
    lines += ["", "Lost: acknowledged but never stored. Duplicated: stored beyond what was acknowledged or left "
              "without an answer. 'No answer' visits (timeouts) may or may not be stored."]

    if s["failures"]:
        lines += ["", "## Most frequent errors", "", "| Endpoint | Error | Occurrences |", "|---|---|---:|"]
        lines += [f"| {name} | {error} | {count:,} |" for name, error, count in s["failures"]]

    lines += ["", "## Run", ""]
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
    lines += ["- Files: locust_stats.csv, locust_stats_history.csv (full history), locust.html, ledger.json, "
              "server-samples.jsonl, convergence.jsonl, summary.json, locust.log"]
    return "\n".join(lines) + "\n"


def platform_section(s):
    """The Google Cloud metrics section: the plot of metrics/*.csv and the platform's figures."""
    if not s.get("metrics_files"):
        return []
    lines = ["", "## Google Cloud metrics", "",
             "Cloud Monitoring's own figures, per minute, over the load and the convergence wait. Latency is "
             "the time spent in the function, without the queue in front of busy instances; requests are those "
             "that reached an instance, so 429s refused at the maximum instance count may be missing "
             "(Locust's count is the reference).", "",
             f"![latency p50/p95, requests by code class, instances, backlog, Firestore writes](gcp-metrics.png)", ""]
    platform = s.get("platform")
    if platform:
        lines += ["| Function | requests | 429s | 5xx | p50, worst minute (ms) | p95, worst minute (ms) | most instances |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
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
    lines.append("Series: " + ", ".join(
        f"`metrics/{name}` ({metric_types.get(Path(name).stem, '?')})" for name in s["metrics_files"]))
    return lines


def latest_block(summary, verdict_result):
    """The README block that points at an iteration's latest local results."""
    h, link = summary["headline"], f"results/{summary['results_dir']}"
    return "\n".join([
        LATEST_START,
        f"Latest local run: [{summary['test']} {summary['results_dir']}]({link}/report.md) "
        f"— verdict: **{verdict_result['outcome']}**", "",
        "| knee (users / RPS) | first failure (users / RPS) | peak RPS | p95 ceiling | slowest | converged after load | extra min per min | acked / stored / lost / dup |",
        "|---|---|---:|---:|---|---:|---:|---|",
        f"| {fmt(h['knee_users'], 0)} / {fmt(h['knee_rps'])} | {fmt(h['first_failure_users'], 0)} / {fmt(h['first_failure_rps'])} | "
        f"{fmt(h['rps_peak'])} | {ms(h['p95_ceiling_ms'])} ms | {h.get('slowest_function', 'n/a')} | "
        f"{fmt(h['convergence_s'], 0)} s | {fmt(h['extra_min_per_min'], 2)} | "
        f"{h['visits.acknowledged']} / {h['visits.stored']} / {h['visits.lost']} / {h['visits.duplicated']} |", "",
        f"![load]({link}/load.png)", "",
        LATEST_END])


def update_readme(readme_path, block):
    """Replaces the latest-results block (or appends one)."""
    path = Path(readme_path)
    text = path.read_text() if path.exists() else ""
    if LATEST_START in text and LATEST_END in text:
        head, rest = text.split(LATEST_START, 1)
        text = head + block + rest.split(LATEST_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def write_report(results_dir, iteration_dir, update_iteration_readme=False):
    """summary.json and report.md for a results folder; returns the summary (with its verdict)."""
    results_dir, iteration_dir = Path(results_dir), Path(iteration_dir)
    summary = summarize(results_dir)
    readme = iteration_dir / "README.md"
    readme_text = readme.read_text() if readme.exists() else ""

    def other(name):
        found = latest_summary(iteration_dir.parent / name, summary["target"])
        return found["headline"] if found else None

    summary["verdict"] = verdict(summary, readme_text, other)
    summary["hypothesis"] = hypothesis_text(readme_text)
    (results_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    (results_dir / "report.md").write_text(render(summary, summary["verdict"], summary["hypothesis"]))
    if update_iteration_readme and readme.exists():
        update_readme(readme, latest_block(summary, summary["verdict"]))
    return summary

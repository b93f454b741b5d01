"""The report's PNGs: load.png (users, RPS, failures, p95), server.png (backlog, writes/s,
queued requests and 429s per function) and, for a Google Cloud run, gcp-metrics.png (the
platform's per-minute series from metrics/*.csv). x axis: seconds since the load started."""
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from visitkit.catalogue import FUNCTIONS, function_of_service  # noqa: E402
from visitkit.results import analysis  # noqa: E402
from visitkit.results.folder import PLOTS, ResultsFolder, RunData  # noqa: E402
from visitkit.results.records import Breakpoint, ChaosEvent, Summary  # noqa: E402
from visitkit.samples import Sample  # noqa: E402

CODE_CLASSES = {"2xx": "tab:green", "4xx (not 429)": "tab:orange", "429": "tab:red", "5xx": "black"}


def _mark_load(axes: Sequence[Axes], load_start: float, load_end: float | None) -> None:
    if load_end is not None:
        for ax in axes:
            ax.axvline(load_end - load_start, color="grey", linestyle="--", linewidth=1)
        axes[0].annotate("load ends", (load_end - load_start, 1), xycoords=("data", "axes fraction"),
                         xytext=(3, -12), textcoords="offset points", fontsize=8, color="grey")


def _mark_events(axes: Sequence[Axes], events: list[ChaosEvent] | None, start: float) -> None:
    """The chaos faults, as dotted lines on every panel and their names on the first."""
    for event in events or []:
        x = event["time"] - start
        for ax in axes:
            ax.axvline(x, color="tab:purple", linestyle=":", linewidth=1)
        axes[0].annotate(event["action"], (x, 0.98), xycoords=("data", "axes fraction"), rotation=90,
                         fontsize=6, color="tab:purple", va="top")


def _finish(fig: Figure, axes: Sequence[Axes], path: Path, title: str) -> None:
    axes[-1].set_xlabel("seconds since the load started")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_load(history: list[dict[str, Any]], path: Path, title: str, breakpoint: Breakpoint | None = None,
              events: list[ChaosEvent] | None = None) -> None:
    start, end = analysis.load_window(history)
    start = start if start is not None else (history[0]["time"] if history else 0)
    t = [s["time"] - start for s in history]
    fig, axes = plt.subplots(4, 1, figsize=(10, 9), sharex=True)
    axes[0].plot(t, [s["users"] for s in history], color="tab:blue")
    axes[0].set_ylabel("users")
    axes[1].plot(t, [s["rps"] for s in history], color="tab:green", label="requests/s")
    axes[1].set_ylabel("RPS")
    axes[2].plot(t, [s["failures_per_s"] for s in history], color="tab:red")
    axes[2].set_ylabel("failures/s")
    axes[3].plot(t, [s["p95_ms"] for s in history], color="tab:purple", label="p95")
    axes[3].plot(t, [s["p50_ms"] for s in history], color="tab:purple", alpha=0.4, label="p50")
    axes[3].set_ylabel("response time (ms)")
    axes[3].legend(loc="upper left", fontsize=8)
    moments: tuple[tuple[Literal["knee", "first_failure"], str, str], ...] = (
        ("knee", "tab:orange", "RPS knee"), ("first_failure", "tab:red", "first failure"))
    for key, colour, label in moments:
        point = breakpoint.get(key) if breakpoint else None
        if point:
            for ax in axes:
                ax.axvline(point["time"] - start, color=colour, linewidth=1, alpha=0.7)
            axes[1].annotate(f"{label}: {point['users']} users", (point["time"] - start, 0.05),
                             xycoords=("data", "axes fraction"), xytext=(3, 0), textcoords="offset points",
                             fontsize=8, color=colour)
    _mark_load(axes, start, end)
    _mark_events(axes, events, start)
    _finish(fig, axes, path, title)


def plot_server(samples: list[Sample], path: Path, title: str, load_start: float | None,
                load_end: float | None, events: list[ChaosEvent] | None = None,
                scaling_events: list[dict[str, Any]] | None = None) -> bool:
    """The store's backlog and rates, each function's queue and 429s; with the autoscaler's events (an autoscaled
    twin run), each function's instances each second with its cold starts marked where they became ready."""
    if not samples:
        return False
    series = analysis.server_series(samples)
    start = load_start if load_start is not None else samples[0]["time"]
    t = [x - start for x in series["time"]]
    fig, axes = plt.subplots(5 if scaling_events else 4, 1, figsize=(10, 11 if scaling_events else 9), sharex=True)
    if scaling_events:
        _draw_instances(axes[4], samples, scaling_events, start)
    axes[0].plot(t, series["backlog"], color="tab:brown")
    axes[0].set_ylabel("backlog\n(undelivered)")
    for key, colour, label in (("accepted_per_s", "tab:blue", "accepted (202)/s"),
                               ("writes_per_s", "tab:green", "stored (Firestore)/s")):
        axes[1].plot([x - start for x, _ in series[key]], [v for _, v in series[key]], color=colour, label=label)
    axes[1].set_ylabel("visits/s")
    axes[1].legend(loc="upper left", fontsize=8)
    for name in FUNCTIONS:
        fn = series["functions"][name]
        axes[2].plot(t, fn["queued"], label=name)
        axes[3].plot([x - start for x, _ in fn["r429_per_s"]], [v for _, v in fn["r429_per_s"]], label=name)
    axes[2].set_ylabel("queued requests")
    axes[3].set_ylabel("429s/s")
    axes[2].legend(loc="upper left", fontsize=8)
    _mark_load(axes, start, load_end)
    _mark_events(axes, events, start)
    _finish(fig, axes, path, title)
    return True


def _draw_instances(ax: Any, samples: list[Sample], scaling_events: list[dict[str, Any]], start: float) -> None:
    for i, name in enumerate(FUNCTIONS):
        points = [(s["time"] - start, s["functions"][name]["instances"]) for s in samples if name in s["functions"]]
        ax.step([x for x, _ in points], [v for _, v in points], where="post", color=f"C{i}", label=name)
        ready = [e["time"] - start for e in scaling_events if e["event"] == "ready" and e["function"] == name]
        counts = [next((v for x, v in points if x >= r), points[-1][1] if points else 0) for r in ready]
        ax.scatter(ready, counts, marker="^", color=f"C{i}", zorder=3)
    ax.set_ylabel("instances\n(^ cold start)")
    ax.legend(loc="upper left", fontsize=8)


def _per_minute(rows: list[dict[str, str]], key_of: Callable[[dict[str, str]], str | None],
                value_of: Callable[[dict[str, str]], float | None]) -> dict[str, tuple[list[float], list[float]]]:
    """{key: ([times], [values])} summing the rows that share a key and a minute; rows whose key is
    None are left out."""
    sums: dict[str, dict[float, float]] = {}
    for row in rows:
        key, value = key_of(row), value_of(row)
        if key is not None and value is not None:
            by_time = sums.setdefault(key, {})
            by_time[float(row["time"])] = by_time.get(float(row["time"]), 0) + value
    return {key: (sorted(by_time), [by_time[t] for t in sorted(by_time)]) for key, by_time in sorted(sums.items())}


def _code_class(row: dict[str, str]) -> str:
    code = int(row["response_code"])
    return "429" if code == 429 else "4xx (not 429)" if code // 100 == 4 else f"{code // 100}xx"


def _draw(ax: Axes, series: dict[str, tuple[list[float], list[float]]], start: float,
          styles: dict[str, dict[str, Any]] | None = None, **common: Any) -> None:
    """One line per key of a _per_minute result; 'no data' when there is none."""
    for key, (times, values) in series.items():
        ax.plot([t - start for t in times], values, marker=".", **common, **(styles or {}).get(key, {"label": key}))
    if series:
        ax.legend(loc="best", fontsize=7, ncol=2)
    else:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="grey")


def plot_gcp_metrics(metrics: dict[str, list[dict[str, str]]], path: Path, title: str, load_start: float | None,
                     load_end: float | None) -> bool:
    """Cloud Monitoring's per-minute series (points at the end of their minute), one panel each:
    latency p50/p95 per function, requests by code class, instances, the subscription's backlog and
    oldest unacked message, Firestore writes. metrics: {metric name: rows}. False when there is
    nothing to plot."""
    if not metrics:
        return False
    service = lambda row: function_of_service(row.get("service_name"))  # noqa: E731
    value = lambda key: lambda row: analysis.number(row.get(key))  # noqa: E731
    rows = {name: metrics.get(name, []) for name in (
        "request_latencies", "request_count", "instance_count", "undelivered_messages", "oldest_unacked_age",
        "firestore_writes")}
    times = [float(r["time"]) for series in rows.values() for r in series]
    start = load_start if load_start is not None else min(times, default=0)
    colours = {name: f"C{i}" for i, name in enumerate(FUNCTIONS)}

    fig, axes = plt.subplots(5, 1, figsize=(10, 11), sharex=True)
    for key, line in (("p95", "-"), ("p50", ":")):
        series = _per_minute(rows["request_latencies"], service, value(key))
        _draw(axes[0], series, start, {name: {"label": f"{name} {key}", "color": colours[name]} for name in series},
              linestyle=line)
    axes[0].set_ylabel("latency in the\nfunction (ms)")
    _draw(axes[1], _per_minute(rows["request_count"], _code_class, value("value")), start,
          {cls: {"label": cls, "color": colour} for cls, colour in CODE_CLASSES.items()})
    axes[1].set_ylabel("requests/min\n(all functions)")
    series = _per_minute(rows["instance_count"], service, value("value"))
    _draw(axes[2], series, start, {name: {"label": name, "color": colours[name]} for name in series})
    axes[2].set_ylabel("instances\n(active + idle)")
    backlog = _per_minute(rows["undelivered_messages"], lambda row: "undelivered messages", value("value"))
    _draw(axes[3], backlog, start, {"undelivered messages": {"label": "undelivered messages", "color": "tab:brown"}})
    axes[3].set_ylabel("undelivered\nmessages")
    age_axis = axes[3].twinx()
    age = _per_minute(rows["oldest_unacked_age"], lambda row: "oldest unacked", value("value"))
    for times_, values in age.values():
        age_axis.plot([t - start for t in times_], values, marker=".", color="tab:grey", linestyle="--",
                      label="oldest unacked message (s, right)")
        age_axis.legend(loc="lower right", fontsize=7)
    age_axis.set_ylabel("oldest unacked (s)")
    age_axis.set_ylim(bottom=0)
    writes = _per_minute(rows["firestore_writes"], lambda row: "document writes", value("value"))
    _draw(axes[4], writes, start, {"document writes": {"label": "document writes", "color": "tab:green"}})
    axes[4].set_ylabel("Firestore\nwrites/min")
    _mark_load(axes, start, load_end)
    _finish(fig, axes, path, f"{title}: Cloud Monitoring, per minute")
    return True


def _use(sample: Sample, component: str, key: Literal["cpu_percent", "rss_mb"]) -> float | None:
    """A component's figure in a sample with resources; None when the sample has none of the component."""
    use = sample["resources"].get(component)
    return use.get(key) if use else None


def plot_resources(samples: list[Sample], history: list[dict[str, Any]], path: Path, title: str,
                   load_start: float | None, load_end: float | None) -> bool:
    """CPU % and memory per function (and platform part) over time, under the load's RPS and
    failures on the same time axis. False when no sample has resources."""
    with_resources = [s for s in samples if s.get("resources")]
    if not with_resources:
        return False
    start = load_start if load_start is not None else with_resources[0]["time"]
    components = [c for c in FUNCTIONS if any(c in s["resources"] for s in with_resources)]
    components += sorted({c for s in with_resources for c in s["resources"]} - set(components))
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    t_load = [h["time"] - start for h in history]
    axes[0].plot(t_load, [h["rps"] for h in history], color="tab:green", label="RPS")
    axes[0].plot(t_load, [h["failures_per_s"] for h in history], color="tab:red", label="failures/s")
    axes[0].set_ylabel("load")
    axes[0].legend(loc="upper left", fontsize=8)
    t = [s["time"] - start for s in with_resources]
    for component in components:
        style = {"linestyle": "-" if component in FUNCTIONS else ":"}
        axes[1].plot(t, [_use(s, component, "cpu_percent") for s in with_resources], label=component, **style)
        axes[2].plot(t, [_use(s, component, "rss_mb") for s in with_resources], label=component, **style)
    axes[1].set_ylabel("CPU (% of one core)")
    axes[2].set_ylabel("memory (MB)")
    axes[1].legend(loc="upper left", fontsize=7, ncol=3)
    _mark_load(axes, start, load_end)
    _finish(fig, axes, path, f"{title}: resources")
    return True


def write_plots(folder: ResultsFolder, data: RunData, summary: Summary) -> set[str]:
    """The run's plots beside its report; returns the PLOTS keys of those written."""
    title = f"{summary.iteration} {summary.test} ({summary.target})"
    start, end = summary.load["start"], summary.load["end"]
    events = summary.chaos["events"] if summary.chaos else None
    plot_load(data.history, folder / PLOTS["load"], title, summary.breakpoint, events)
    written = {"load"}
    if plot_server(data.samples, folder / PLOTS["server"], title, start, end, events, data.scaling_events):
        written.add("server")
    if plot_gcp_metrics(data.metrics, folder / PLOTS["gcp"], title, start, end):
        written.add("gcp")
    if plot_resources(data.samples, data.history, folder / PLOTS["resources"], title, start, end):
        written.add("resources")
    return written

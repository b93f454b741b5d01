"""The report's PNGs: load.png (users, RPS, failures, p95) and server.png (backlog, writes/s,
queued requests and 429s per function). x axis: seconds since the load started."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from visitkit import analysis  # noqa: E402
from visitkit.settings import FUNCTIONS  # noqa: E402


def _mark_load(axes, load_start, load_end):
    if load_end is not None:
        for ax in axes:
            ax.axvline(load_end - load_start, color="grey", linestyle="--", linewidth=1)
        axes[0].annotate("load ends", (load_end - load_start, 1), xycoords=("data", "axes fraction"),
                         xytext=(3, -12), textcoords="offset points", fontsize=8, color="grey")


def _finish(fig, axes, path, title):
    axes[-1].set_xlabel("seconds since the load started")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_load(history, path, title, breakpoint=None):
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
    for key, colour, label in (("knee", "tab:orange", "RPS knee"), ("first_failure", "tab:red", "first failure")):
        point = (breakpoint or {}).get(key)
        if point:
            for ax in axes:
                ax.axvline(point["time"] - start, color=colour, linewidth=1, alpha=0.7)
            axes[1].annotate(f"{label}: {point['users']} users", (point["time"] - start, 0.05),
                             xycoords=("data", "axes fraction"), xytext=(3, 0), textcoords="offset points",
                             fontsize=8, color=colour)
    _mark_load(axes, start, end)
    _finish(fig, axes, path, title)


def plot_server(samples, path, title, load_start, load_end):
    if not samples:
        return False
    series = analysis.server_series(samples)
    start = load_start if load_start is not None else samples[0]["time"]
    t = [x - start for x in series["time"]]
    fig, axes = plt.subplots(4, 1, figsize=(10, 9), sharex=True)
    axes[0].plot(t, series["backlog"], color="tab:brown")
    axes[0].set_ylabel("backlog\n(published - stored)")
    for key, colour, label in (("published_per_s", "tab:blue", "published/s"), ("writes_per_s", "tab:green", "stored (Firestore writes)/s")):
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
    _finish(fig, axes, path, title)
    return True


def write_plots(results_dir, summary):
    from pathlib import Path

    results_dir = Path(results_dir)
    history = analysis.aggregated_history(analysis.read_csv(results_dir / "locust_stats_history.csv"))
    title = f"{summary['iteration']} {summary['test']} ({summary['target']})"
    plot_load(history, results_dir / "load.png", title, summary.get("breakpoint"))
    samples = analysis.read_jsonl(results_dir / "server-samples.jsonl")
    plot_server(samples, results_dir / "server.png", title, summary["load"]["start"], summary["load"]["end"])

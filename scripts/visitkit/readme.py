"""The block of an iteration's README that points at its latest local results."""
from pathlib import Path

from visitkit.formatting import fmt, ms

LATEST_START = "<!-- latest-local-results:start (written by scripts/run-iteration) -->"
LATEST_END = "<!-- latest-local-results:end -->"


def latest_block(summary):
    h, link = summary["headline"], f"results/{summary['results_dir']}"
    return "\n".join([
        LATEST_START,
        f"Latest local run: [{summary['test']} {summary['results_dir']}]({link}/report.md) "
        f"— verdict: **{summary['verdict']['outcome']}**", "",
        "| knee (users / RPS) | first failure (users / RPS) | peak RPS | p95 ceiling | slowest | converged after load "
        "| extra min per min | acked / stored / lost / dup |",
        "|---|---|---:|---:|---|---:|---:|---|",
        f"| {fmt(h['knee_users'], 0)} / {fmt(h['knee_rps'])} | {fmt(h['first_failure_users'], 0)} / "
        f"{fmt(h['first_failure_rps'])} | {fmt(h['rps_peak'])} | {ms(h['p95_ceiling_ms'])} ms | "
        f"{h.get('slowest_function', 'n/a')} | {fmt(h['convergence_s'], 0)} s | {fmt(h['extra_min_per_min'], 2)} | "
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

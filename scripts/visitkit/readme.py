"""The "Latest local run" block of an iteration's README: a `<!-- figures run: ... -->` block (visitkit.docs)
that the runner points at each new run, and `visitkit docs` writes from that run's summary.json."""
import re
from pathlib import Path

from visitkit.formatting import fmt, ms

SECTION = "## Latest local run"
START = "<!-- figures run: {link} -->"
END = "<!-- /figures -->"
BLOCK = re.compile(r"<!-- figures run: [^\n]*-->\n.*?" + re.escape(END), re.S)


def run_table(summary, link):
    """A run's headline as Markdown, its links relative to the doc that shows it (`link`: the results folder)."""
    h = summary["headline"]
    return "\n".join([
        f"[{summary['test']} {summary['results_dir']}]({link}/report.md) — verdict: **{summary['verdict']['outcome']}**",
        "",
        "| knee (users / RPS) | first failure (users / RPS) | peak RPS | p95 ceiling | slowest | converged after load "
        "| extra min per min | acked / stored / lost / dup |",
        "|---|---|---:|---:|---|---:|---:|---|",
        f"| {fmt(h['knee_users'], 0)} / {fmt(h['knee_rps'])} | {fmt(h['first_failure_users'], 0)} / "
        f"{fmt(h['first_failure_rps'])} | {fmt(h['rps_peak'])} | {ms(h['p95_ceiling_ms'])} ms | "
        f"{h.get('slowest_function', 'n/a')} | {fmt(h['convergence_s'], 0)} s | {fmt(h['extra_min_per_min'], 2)} | "
        f"{h['visits.acknowledged']} / {h['visits.stored']} / {h['visits.lost']} / {h['visits.duplicated']} |",
        "",
        f"![load]({link}/load.png)"])


def latest_block(summary):
    link = f"results/{summary['results_dir']}"
    return f"{START.format(link=link)}\n{run_table(summary, link)}\n{END}"


def update_readme(readme_path, block):
    """Points the README's latest-run block at a new run (or appends the section)."""
    path = Path(readme_path)
    text = path.read_text() if path.exists() else ""
    if BLOCK.search(text):
        text = BLOCK.sub(lambda _: block, text, count=1)
    else:
        text = text.rstrip("\n") + f"\n\n{SECTION}\n\n{block}\n"
    path.write_text(text)

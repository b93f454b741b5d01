"""The "Latest local run" block of an iteration's README: a `<!-- figures run: ... -->` block (visitkit.reports.docs)
that the runner points at each new run, and `visitkit docs` writes from that run's summary.json."""
from pathlib import Path

from visitkit.reports import docs
from visitkit.results.records import Summary

SECTION = "## Latest local run"


def latest_block(summary: Summary) -> str:
    link = f"results/{summary.results_dir}"
    return f"<!-- figures run: {link} -->\n{docs.run_table(summary, link)}\n{docs.END}"


def update_readme(readme_path: str | Path, block: str) -> None:
    """Points the run block under the README's SECTION at a new run (the section is added if missing)."""
    path = Path(readme_path)
    text = path.read_text() if path.exists() else ""
    at = text.find(SECTION)
    if at < 0:
        path.write_text(text.rstrip("\n") + f"\n\n{SECTION}\n\n{block}\n")
        return
    latest = [found for found in docs.blocks(path) if found.head.startswith("run:") and found.match.start() > at]
    if latest:
        start, end = latest[0].match.span()
    else:
        start = end = text.find("\n", at) + 1 or len(text)
        block = f"\n{block}\n"
    path.write_text(text[:start] + block + text[end:])

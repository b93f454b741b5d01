"""The "Latest local run" block of an iteration's README: a `<!-- figures run: ... -->` block (visitkit.docs)
that the runner points at each new run, and `visitkit docs` writes from that run's summary.json."""
import re
from pathlib import Path

from visitkit import results
from visitkit.summary import headline_table

SECTION = "## Latest local run"
START = "<!-- figures run: {link} -->"
END = "<!-- /figures -->"
BLOCK = re.compile(r"<!-- figures run: [^\n]*-->\n.*?" + re.escape(END), re.S)


def run_table(summary, link):
    """A run's headline as Markdown, its links relative to the doc that shows it (`link`: the results folder)."""
    return "\n".join([
        f"[{summary['test']} {summary['results_dir']}]({link}/{results.REPORT}) — verdict: "
        f"**{summary['verdict']['outcome']}**", "",
        *headline_table(summary["headline"]), "",
        f"![load]({link}/{results.PLOTS['load']})"])


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

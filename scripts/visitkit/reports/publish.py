"""Everything a results folder shows, rebuilt from the folder alone: summary.json with its
verdict (and the gates a CI run was given, judged again), the plots, then report.md (which links
them), and optionally the iteration README's latest-results block."""
from pathlib import Path
from typing import Any

from visitkit.reports import plots, readme, report, verdict
from visitkit.results import folder as results
from visitkit.results import summary as summaries
from visitkit.results import thresholds
from visitkit.results.records import Summary


def publish(folder: results.ResultsFolder | str | Path, update_readme: bool = False) -> Summary:
    """`folder`: a ResultsFolder or its path. Returns the summary."""
    folder = folder if isinstance(folder, results.ResultsFolder) else results.ResultsFolder(folder)
    data = folder.load()
    summary = summaries.summarize(data)
    iteration_dir = folder.iteration_dir
    readme_path = iteration_dir / "README.md"
    readme_text = readme_path.read_text() if readme_path.exists() else ""

    def other_figures(name: str) -> dict[str, Any] | None:
        found = results.latest_summary(iteration_dir.parent / name, like=summary)  # compare like with like
        return found.headline if found else None

    summary.verdict = verdict.judge(summary.headline, readme_text, other_figures)
    summary.gates = thresholds.judge_gates(data.run, summary.headline, summary.verdict["outcome"], other_figures)
    folder.save_summary(summary)
    written = plots.write_plots(folder, data, summary)
    (folder / results.REPORT).write_text(report.render(summary, written))
    if update_readme and readme_path.exists():
        readme.update_readme(readme_path, readme.latest_block(summary))
    return summary

"""What is shown of results: a run's verdict, the report, plots, comparisons, the study beside a run,
publishing them, and the docs' figures written from committed results."""

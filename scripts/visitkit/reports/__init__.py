"""A run's results: the folder model, its figures and verdict, the report, plots, comparisons, and the docs' figures written from committed results."""

"""The benchmarks: each writes a results folder under benchmarks/ that docs cite."""

"""A run's results folder and its records, which runs write and reports read: the folder model (folder.py), the
summary's record (records.py), the figures of a run (summary, analysis, the audit of its visits, overload, the load
generator's health)."""

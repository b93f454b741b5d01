"""The kit's harness: settings, the local stack, load runs, results and reports.

One command, `visitkit`, with subcommands (see `visitkit --help`); the scripts in scripts/ call it.
"""
__version__ = "0.2.0"

"""Shared code of the kit's scripts: settings, the local stack, load runs and reports."""

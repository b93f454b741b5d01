"""Test fixture: stands in for locust/node.py, which the kit stages (never run)."""

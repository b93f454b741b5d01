"""A run: its plan of steps, its targets and its progress (the steps themselves, the Locust suite as the kit drives it and settling are the package's base: steps.py, suite.py, settle.py)."""

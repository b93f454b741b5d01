"""A run: its plan of steps, its targets, the Locust suite as the kit drives it, progress and settling."""

"""A run, by stage: its configuration, the load (here or on a fleet), the convergence wait and the audit,
the runner that plans and runs the steps, its targets and progress."""

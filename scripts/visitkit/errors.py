"""The kit's errors: library code raises them; only the command line turns them into one-line
messages and exit codes."""

# The command's exit status when a run (or a rebuilt report) fails a gate it was given, a --threshold or the
# --expect'ed verdict; 2 is the kit's own errors (a VisitkitError).
GATES_FAILED = 3


class VisitkitError(Exception):
    """Something the user can fix; the message says what and how."""


class SettingsError(VisitkitError):
    pass


class StackError(VisitkitError):
    pass


class GcpError(VisitkitError):
    pass


class RunError(VisitkitError):
    pass

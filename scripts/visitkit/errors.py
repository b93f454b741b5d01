"""The kit's errors: library code raises them; only the command line turns them into one-line
messages and exit codes."""


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

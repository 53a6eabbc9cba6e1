"""The CLI's one error type, apart so every subcommand module can raise it without importing main.py."""


class CommandError(Exception):
    """A user-facing failure: printed without a traceback, exit code 2."""

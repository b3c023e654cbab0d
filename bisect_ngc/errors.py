"""Errors that reach the user as one sentence and a hint."""
from __future__ import annotations

# Exit codes of the CLI, documented in `bisect-ngc bisect --help`.
EXIT_FOUND = 0
EXIT_BAD_INPUT = 2
EXIT_INVALID_ENDPOINTS = 3
EXIT_AMBIGUOUS = 4
EXIT_NOT_IN_COMMITS = 5
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """Bad input or a missing prerequisite: exit 2 with one sentence and a hint."""

    def __init__(self, message: str, hint: str = "", code: int = EXIT_BAD_INPUT,
                 **facts: object):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code
        self.facts = facts      # more for `--json` (the session an interruption kept)

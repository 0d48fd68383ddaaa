"""The one exception type that reaches users as a one-line message."""

from __future__ import annotations


class DocauditError(Exception):
    """A problem with the user's input or setup; the CLI prints it on one line and exits non-zero."""

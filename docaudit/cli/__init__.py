"""The ``docaudit`` command line: a thin click layer over ``docaudit.api`` (``main`` is the entry point).

``root.py`` holds the group, ``command.py`` what every command shares, ``options.py`` the options built from the
configuration's fields, and one module per command or family of commands."""

from docaudit.cli.options import FORMATS
from docaudit.cli.root import main

__all__ = ["FORMATS", "main"]

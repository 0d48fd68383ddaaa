"""The ``docaudit`` command line: a thin click layer over ``docaudit.api``. ``guard.main`` is the entry point: it
runs the group (``root.main``) in a watched child process.

``root.py`` holds the group, ``command.py`` what every command shares, ``options.py`` the options built from the
configuration's fields, and one module per command or family of commands. ``main`` and ``FORMATS`` are loaded on
first use, so the guard's process never imports the commands."""

__all__ = ["FORMATS", "main"]


def __getattr__(name: str):
    if name == "main":
        from docaudit.cli.root import main

        return main
    if name == "FORMATS":
        from docaudit.cli.options import FORMATS

        return FORMATS
    raise AttributeError(f"module 'docaudit.cli' has no attribute {name!r}")

"""``python -m docaudit.cli``: the ``docaudit`` command line."""

from docaudit.cli.main import main

main()

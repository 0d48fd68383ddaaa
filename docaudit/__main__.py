"""``python -m docaudit``: the ``docaudit`` command line."""

from docaudit.cli.main import main

main()

"""``python -m docaudit``: the ``docaudit`` command line."""

from docaudit.cli.root import main

main()

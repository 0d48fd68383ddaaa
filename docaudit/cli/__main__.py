"""``python -m docaudit.cli``: the ``docaudit`` command line."""

from docaudit.cli.root import main

main()

"""``python -m docaudit``: the ``docaudit`` command line, watched for crashes in native code."""

from docaudit.cli.guard import main

main("python -m docaudit")

"""``python -m docaudit.cli``: the ``docaudit`` command line in this process (what the guard runs, watched)."""

from docaudit.cli.guard import prog_name, watch_me

watch_me()

from docaudit.cli.root import main  # noqa: E402 (after the fault handler, so a crash while importing is caught)

main(prog_name=prog_name("python -m docaudit.cli"))

"""What every command shares: ``--config FILE`` and ``--quiet``, one-line errors, progress bars only on a terminal,
and help grouped into sections (inputs, model, query, method, output, and the OpenAI-compatible backend's own)."""

from __future__ import annotations

import functools
import logging
import os
import re
import sys

import click

from docaudit.cli.config_file import ConfigError, config_defaults, config_path, section_path
from docaudit.errors import BROKEN_PIPE, DEBUG_KEY, report_error
from docaudit.run import RunContext

QUIET_KEY = "docaudit.quiet"
SECTION_TITLES = {
    "inputs": "Inputs",
    "model": "Model",
    "query": "Query",
    "method": "Method",
    "target": "Target model",
    "traps": "Traps",
    "output": "Output",
    None: "Options",
    "openai": "OpenAI-compatible backend (--backend openai)",
}


def quiet_libraries() -> None:
    """Library warnings and progress bars off, without importing the libraries (so bad input is answered at once)."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        import transformers

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    # int8 matmuls cast their inputs to float16 by design; bitsandbytes says so on every call
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)


def friendly_errors(func):
    """Turn DocauditError into a one-line message and a non-zero exit; interruption keeps the cache."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except BrokenPipeError:  # the reader of stdout is gone (``docaudit cache info | head``): stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more is flushed into the pipe
            sys.exit(BROKEN_PIPE)
        except Exception as e:  # every failure: docaudit.errors gives its line and exit status
            _close_progress_bars()
            sys.exit(report_error(e, click.get_current_context().meta.get(DEBUG_KEY, False)))
        except KeyboardInterrupt:
            _close_progress_bars()
            click.echo("interrupted: finished documents are cached; run the same command again to resume", err=True)
            sys.exit(130)

    return wrapper


def _close_progress_bars() -> None:
    """End unfinished progress bars so the error message starts on its own line."""
    from tqdm import tqdm

    for bar in list(getattr(tqdm, "_instances", [])):
        bar.close()


def is_quiet() -> bool:
    """Whether ``--quiet`` was given to the running command."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.meta.get(QUIET_KEY, False)


def show_progress() -> bool:
    """Progress bars only on a terminal and without ``--quiet``."""
    return not is_quiet() and sys.stderr.isatty()


def _set_quiet(ctx, _param, value) -> None:
    """Record ``--quiet`` where every command's context sees it (``ctx.meta`` is shared)."""
    ctx.meta[QUIET_KEY] = ctx.meta.get(QUIET_KEY, False) or value


class SectionOption(click.Option):
    """An option shown under ``section`` of its command's help (a key of ``SECTION_TITLES``; None: Options)."""

    def __init__(self, *args, section: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.section = section


def option(*decls, section: str | None, **kwargs):
    """``click.option`` for an option shown under ``section`` of the help."""
    return click.option(*decls, cls=SectionOption, section=section, **kwargs)


QUIET_OPTION = click.Option(
    ["--quiet", "-q"],
    is_flag=True,
    expose_value=False,
    help="No progress bars (also off when stderr is not a terminal).",
    callback=_set_quiet,
)
CONFIG_OPTION = click.Option(
    ["--config", "config_file"],
    type=click.Path(dir_okay=False),
    expose_value=False,
    is_eager=True,
    help="TOML or YAML file of option values: the section named after the command (e.g. [report], [data.check]) "
    "maps option names to values, the OpenAI-compatible backend's also in [openai]; options given on the command "
    "line win.",
)


_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)\.\s+(?=[A-Z])")


def first_sentence(command: click.Command, limit: int = 45) -> str:
    """A command's line in its group's help: its ``short_help``, else the first sentence of its help, whole (click
    would cut it at ``limit`` characters, mid-sentence)."""
    if command.short_help:
        return command.short_help
    text = " ".join((command.help or "").split())
    return _SENTENCE_END.split(text, 1)[0].rstrip(".") + "." if text else ""


class ConfigCommand(click.Command):
    """A command with ``--config FILE`` and ``--quiet``: the file's section for this command becomes click's
    ``default_map`` (keys: option names, with dashes or underscores; arguments by their name), so every option,
    including those added later, can come from a file. Its help lists the options by section."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        taken = {p.name for p in self.params}
        self.params += [o for o in (CONFIG_OPTION, QUIET_OPTION) if o.name not in taken]

    def make_context(self, info_name, args, parent=None, **extra):
        extra.setdefault("obj", ["docaudit", *section_path(parent, info_name), *args])  # the command line
        path = config_path(args)
        if path is not None and CONFIG_OPTION in self.params and "default_map" not in extra:
            extra["default_map"] = config_defaults(self, section_path(parent, info_name), path)
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:  # a missing or unknown option: one line, like every user error
            raise ConfigError(
                f"{e.format_message()} (see {' '.join(['docaudit', *section_path(parent, info_name)])} --help)"
            ) from None

    get_short_help_str = first_sentence

    def format_options(self, ctx, formatter) -> None:
        """The options under their sections' titles, in the order of ``SECTION_TITLES``."""
        sections: dict = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None and not isinstance(param, click.Argument):
                section = getattr(param, "section", None)
                sections.setdefault(section if section in SECTION_TITLES else None, []).append(record)
        for key, title in SECTION_TITLES.items():
            if key in sections:
                with formatter.section(title):
                    formatter.write_dl(sections[key])


class DocauditGroup(click.Group):
    """Commands of this group (and of its subgroups) read ``--config`` and ``--quiet``."""

    command_class = ConfigCommand
    group_class = type
    get_short_help_str = first_sentence

    def list_commands(self, ctx) -> list[str]:
        """In the order the commands were added (the order of the work), not alphabetically."""
        return list(self.commands)


def command(*args, **kwargs):
    """``click.command`` making a ``ConfigCommand``."""
    return click.command(*args, cls=ConfigCommand, **kwargs)


def group(*args, **kwargs):
    """``click.group`` making a ``DocauditGroup``."""
    return click.group(*args, cls=DocauditGroup, **kwargs)


def run_context(ray=None, seed: int | None = None) -> RunContext:
    """The run context of the running command: its progress (none with ``--quiet`` or off a terminal), its
    command line (written into its outputs' provenance), ``ray`` and ``seed`` (None: the default)."""
    seeded = {} if seed is None else {"seed": seed}
    return RunContext(progress=show_progress(), command=click.get_current_context().obj, ray=ray, **seeded)

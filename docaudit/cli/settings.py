"""``config show``: every option of a command with the value it would take, as a config file."""

from __future__ import annotations

import json

import click

from docaudit.cli.command import friendly_errors, group
from docaudit.cli.config_file import config_defaults, option_key
from docaudit.cli.echo import echo_csv, echo_json, say
from docaudit.cli.options import format_option
from docaudit.errors import DocauditError


@group("config")
def config_group():
    """See the configuration a command would run with."""


@config_group.command("show")
@click.argument("command", nargs=-1, required=True)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The TOML or YAML file the command would read (its section for COMMAND).",
)
@format_option
@friendly_errors
def config_show(command, config_file, fmt):
    """Print every option of COMMAND (e.g. `report`, `data check`) with the value it would take: from --config
    FILE, else its default. The table form is TOML: save it and pass it back with --config."""
    ctx = click.get_current_context()
    root = target = ctx.find_root().command
    path = []
    for name in command:
        if not isinstance(target, click.Group) or name not in target.commands:
            raise DocauditError(f"no command '{' '.join(command)}' (commands: {', '.join(root.commands)})")
        target = target.commands[name]
        path.append(name)
    defaults = config_defaults(target, path, config_file) if config_file else {}
    values, param_required = {}, {}
    for param in target.params:
        if not param.expose_value or param.name in ("config_file",) or getattr(param, "hidden", False):
            continue
        value = defaults[param.name] if param.name in defaults else param.get_default(ctx, call=True)
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, (str, int, float, list)):  # None, or click's marker of an option without default
            value = None
        key = option_key(param)
        values[key] = value
        param_required[key] = param.required
    if fmt == "json":
        echo_json({".".join(path): values})
    elif fmt == "csv":
        echo_csv([{"option": k, "value": v} for k, v in values.items()])
    else:
        say(f"[{'.'.join(path)}]")
        for key, value in values.items():
            if value is None or value == []:
                say(f"# {key} = ({'required' if param_required[key] else 'not set'})")
            else:
                say(f"{key} = {_toml_value(value)}")


def _toml_value(value) -> str:
    """A value in TOML syntax (strings as JSON strings, which TOML reads the same)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))

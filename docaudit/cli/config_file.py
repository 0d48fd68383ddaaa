"""``--config FILE``: a TOML or YAML file of option values, read within bounds and checked as the command line is.

A file maps sections named after commands (``[report]``, ``[data.check]``) to option values; a file without
sections is the section of every command. The options that only the OpenAI-compatible backend reads may also sit in
their own section: ``[openai]`` at the top (for every command that has them) or ``[COMMAND.openai]`` (for one), in
TOML, and ``openai:`` in YAML. An option in the command's own section wins over the top-level ``[openai]``."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import click

from docaudit.cli.config_shape import ShapeError, check_yaml_depth, toml_shape_problem
from docaudit.config import CONFIG_YAML_CHARACTERS, READ_LIMITS
from docaudit.untrusted import TooLarge, read_untrusted_text

GRANTS = ("trust_remote_code", "use_card_backend")  # confirmations a config file cannot give (only the command line)
BACKEND_SECTION = "openai"  # the section of the options only the OpenAI-compatible backend reads


class ConfigError(click.ClickException):
    """A bad ``--config`` file or command line, printed on one line like every user error."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {self.message}", err=True)


def config_path(args) -> str | None:
    """The value of ``--config`` among a command's raw arguments (None when absent)."""
    args = [str(a) for a in args]
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--config" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def section_path(parent, info_name) -> list[str]:
    """``["data", "check"]`` for ``docaudit data check``: the command's names below the root."""
    names = [info_name]
    while parent is not None and parent.parent is not None:
        names.insert(0, parent.info_name)
        parent = parent.parent
    return names


def read_config_file(path) -> dict:
    """A TOML (``.toml``) or YAML (``.yaml``, ``.yml``) file as a mapping, read within bounds: at most
    ``READ_LIMITS["config"]`` bytes, its keys' dotted parts and its nesting bounded before parsing (``config_shape``),
    a UTF-8 byte-order mark ignored, YAML within ``CONFIG_YAML_CHARACTERS`` (its parser is pure Python), without
    aliases (``*name``: a few nested ones expand to billions of nodes) and with only the safe loader's plain
    types."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise ConfigError(f"--config {path}: use a .toml, .yaml or .yml file")
    try:
        text = read_untrusted_text(path, "config")
    except FileNotFoundError:
        raise ConfigError(f"--config {path}: cannot read it (no such file)") from None
    except TooLarge:
        limit = READ_LIMITS["config"]
        raise ConfigError(f"--config {path}: over {limit} bytes; a config file is a few lines") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"--config {path}: cannot read it ({e})") from None
    if suffix == ".toml" and (problem := toml_shape_problem(text)):
        raise ConfigError(f"--config {path}: {problem}")
    if suffix != ".toml" and len(text) > CONFIG_YAML_CHARACTERS:
        raise ConfigError(
            f"--config {path}: over {CONFIG_YAML_CHARACTERS:,} characters of YAML (parsed in pure Python, about a "
            "second per 60 KB); a config file is a few lines"
        )
    try:
        if suffix == ".toml":
            from docaudit.io import tomllib

            data = tomllib.loads(text)
        else:
            import yaml

            data = yaml.load(text, Loader=_yaml_loader()) or {}
    except ShapeError as e:
        raise ConfigError(f"--config {path}: {e}") from None
    except Exception as e:  # the parsers' own errors, on one line
        problem = (str(e).splitlines() or [type(e).__name__])[0]
        raise ConfigError(f"--config {path}: not valid {suffix[1:].upper()} ({problem})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected a mapping of sections or options")
    return data


@functools.cache
def _yaml_loader():
    """PyYAML's safe loader refusing aliases and nodes nested past ``CONFIG_MAX_DEPTH``."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):
            mark = self.peek_event().start_mark
            if self.check_event(yaml.AliasEvent):
                raise yaml.composer.ComposerError(
                    None, None, f"aliases (*name) are not accepted in a config file (line {mark.line + 1})", mark
                )
            self.depth += 1
            try:
                check_yaml_depth(self.depth, mark.line + 1)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return NoAliasLoader


def _config_value(path, where: str, key, param: click.Parameter, value):
    """A config file's value for ``param``, checked as the command line would check it: one value (a list only
    for an option taking several), each a string, number or boolean, a number finite, converted by the option's
    type; anything else is a one-line error. The value itself is returned (click converts it again)."""
    several = getattr(param, "multiple", False) or param.nargs == -1
    values = value if several and isinstance(value, list) else [value]
    for item in values:
        if isinstance(item, float) and not math.isfinite(item):
            raise ConfigError(f"--config {path}: [{where}] {key} = {item}: not a finite number")
        if not isinstance(item, (str, int, float, bool)):
            kind = "a list" if isinstance(item, list) else type(item).__name__
            raise ConfigError(f"--config {path}: [{where}] {key}: expected a single value, not {kind}")
        if expected := _wrong_type(param, item):
            raise ConfigError(f"--config {path}: [{where}] {key} = {item!r}: expected {expected}")
        try:
            param.type.convert(item, param, None)
        except click.BadParameter as e:
            raise ConfigError(f"--config {path}: [{where}] {key}: {e.format_message()}") from None
        except Exception as e:  # conversions outside click's own checks (e.g. an integer too large)
            raise ConfigError(f"--config {path}: [{where}] {key} = {item!r}: {type(e).__name__}: {e}") from None
    return value


def _wrong_type(param: click.Parameter, item) -> str | None:
    """What ``param`` takes when the file's ``item`` is of another kind (a number for a flag, a boolean for a
    count, a number for a name), else None; a string is left to the option's own conversion, as on the command
    line."""
    kind = param.type
    if isinstance(item, str):
        return None
    if getattr(param, "is_flag", False) or isinstance(kind, click.types.BoolParamType):
        return None if isinstance(item, bool) else "true or false"
    if isinstance(kind, click.types.IntParamType):
        whole = isinstance(item, int) or (isinstance(item, float) and item.is_integer())  # 1e3 is 1000
        return None if whole and not isinstance(item, bool) else "a whole number"
    if isinstance(kind, click.types.FloatParamType):
        return None if isinstance(item, (int, float)) and not isinstance(item, bool) else "a number"
    return "a quoted string"


def option_key(param: click.Parameter) -> str:
    """The name a config file uses for a parameter: its long option without dashes, or its argument name."""
    return next((o.lstrip("-") for o in param.opts if o.startswith("--")), param.name.replace("_", "-"))


def _backend_values(data: dict, section: list[str], path) -> tuple[dict, dict, dict]:
    """The command's own values, the values of its ``[COMMAND.openai]`` section and of the top-level ``[openai]``
    (a flat file without command sections is the section of every command)."""
    where = ".".join(section)
    shared = data.get(BACKEND_SECTION)
    shared = shared if isinstance(shared, dict) else {}
    values = data
    for name in section:
        values = values.get(name) if isinstance(values, dict) else None
    if values is None:
        commands = {k: v for k, v in data.items() if not (k == BACKEND_SECTION and isinstance(v, dict))}
        if any(isinstance(v, dict) for v in commands.values()):
            raise ConfigError(f"--config {path}: no [{where}] section (found: {', '.join(map(str, data))})")
        return commands, {}, shared
    if not isinstance(values, dict):
        raise ConfigError(f"--config {path}: [{where}] must map option names to values")
    own = values.get(BACKEND_SECTION)
    if isinstance(own, dict):
        values = {k: v for k, v in values.items() if k != BACKEND_SECTION}
        return values, own, shared
    return values, {}, shared


def config_defaults(command: click.Command, section: list[str], path) -> dict:
    """The ``default_map`` of ``command`` from the file's section ``section`` (see the module docstring); an
    unknown option is an error naming the known ones."""
    values, own, shared = _backend_values(read_config_file(path), section, path)
    where = ".".join(section)
    params = {}
    for p in command.params:
        if p.name and (p.expose_value or p.name == "quiet"):
            for name in (p.name, *(o.lstrip("-") for o in p.opts)):
                params[name.replace("_", "-")] = (p, False)
            for o in getattr(p, "secondary_opts", ()):
                params[o.lstrip("-")] = (p, True)
    backend = {k: v for k, v in params.items() if getattr(v[0], "section", None) == BACKEND_SECTION}
    defaults, nested = {}, set()
    for key, value in (shared if backend else {}).items():
        param, value = _default(path, BACKEND_SECTION, key, value, backend)
        defaults[param.name] = value
    for key, value in own.items():
        param, value = _default(path, f"{where}.{BACKEND_SECTION}", key, value, backend)
        defaults[param.name] = value
        nested.add(param.name)
    for key, value in values.items():
        param, value = _default(path, where, key, value, params)
        if param.name in nested:
            raise ConfigError(f"--config {path}: [{where}] {key} is also given in [{where}.{BACKEND_SECTION}]")
        defaults[param.name] = value
    return defaults


def _default(path, where: str, key, value, params: dict) -> tuple[click.Parameter, object]:
    """The parameter a file's ``key`` names among ``params`` and its default-map value, checked."""
    if str(key).replace("_", "-") not in params:
        known = ", ".join(sorted({option_key(p) for p, _ in params.values() if not getattr(p, "hidden", False)}))
        raise ConfigError(f"--config {path}: [{where}] has no option '{key}' (options: {known or 'none'})")
    param, negated = params[str(key).replace("_", "-")]
    value = _config_value(path, where, key, param, value)
    if param.name in GRANTS and param.type.convert(value, param, None) is not negated:
        raise ConfigError(
            f"--config {path}: [{where}] {key}: a config file cannot turn this on; give "
            f"--{param.name.replace('_', '-')} on the command line"
        )
    if negated:
        value = not value
    if (getattr(param, "multiple", False) or param.nargs == -1) and not isinstance(value, list):
        value = [value]
    return param, value

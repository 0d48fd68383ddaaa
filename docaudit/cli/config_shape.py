"""The shape of a ``--config`` file, bounded before its parser sees it. ``tomllib`` takes time and memory quadratic
in the parts of a dotted key, and both parsers recurse once per level of nesting, so a few kilobytes can cost
minutes and gigabytes. TOML is scanned as tokens (comments and every kind of string skipped whole): every chain of
bare words and strings joined by dots outside strings (a key in any spelling: bare or quoted parts, inside an
inline table, a table header or an array-of-tables header; a number's or time's one dot counts too) holds at most
``CONFIG_MAX_KEY_PARTS`` parts, and brackets and braces open at once are at most ``CONFIG_MAX_DEPTH``. A YAML
document is refused when its nodes nest deeper than ``CONFIG_MAX_DEPTH`` (YAML's keys have no dotted parts), as the
loader builds them. The scan is one regular-expression pass: linear in the file, whose size is bounded first."""

from __future__ import annotations

import re

from docaudit.config import CONFIG_MAX_DEPTH, CONFIG_MAX_KEY_PARTS

_TOKEN = re.compile(
    r"""
    (?P<skip>[ \t\r\n]+|\#[^\n]*)
    |(?P<part>"{3}(?:[^"\\]|\\.|"(?!""))*"{3,5}|'{3}(?:[^']|'(?!''))*'{3,5}|"(?:[^"\\\n]|\\[^\n])*"|'[^'\n]*'
        |[A-Za-z0-9_+:-]+)
    |(?P<dot>\.)
    |(?P<open>[\[{])
    |(?P<close>[\]}])
    |(?P<open_string>["'])
    |(?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def toml_shape_problem(text: str) -> str | None:
    """Why the TOML ``text`` is refused before parsing, in words with its line, or None. A string left open ends
    the scan: the parser refuses it where it starts, after the part scanned."""
    parts, after_dot, depth = 0, False, 0
    for token in _TOKEN.finditer(text):
        kind = token.lastgroup
        if kind == "skip":
            continue
        if kind == "part":
            parts = parts + 1 if after_dot else 1
            after_dot = False
            if parts > CONFIG_MAX_KEY_PARTS:
                return f"line {_line(text, token)} holds a key of more than {CONFIG_MAX_KEY_PARTS} dotted parts"
            continue
        if kind == "dot":
            after_dot = True
            continue
        if kind == "open_string":
            return None
        parts, after_dot = 0, False
        if kind == "open":
            depth += 1
            if depth > CONFIG_MAX_DEPTH:
                return f"line {_line(text, token)} nests tables or arrays more than {CONFIG_MAX_DEPTH} deep"
        elif kind == "close":
            depth = max(depth - 1, 0)
    return None


def _line(text: str, token: re.Match) -> int:
    return text.count("\n", 0, token.start()) + 1


class ShapeError(ValueError):
    """A config file's structure beyond its bounds, in words with its line."""


def check_yaml_depth(depth: int, line: int) -> None:
    """:class:`ShapeError` for a YAML node at ``depth`` (the document's top node at 1), starting on ``line``, past
    ``CONFIG_MAX_DEPTH``."""
    if depth > CONFIG_MAX_DEPTH:
        raise ShapeError(f"line {line} nests mappings or lists more than {CONFIG_MAX_DEPTH} deep")

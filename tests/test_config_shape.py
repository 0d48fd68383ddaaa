"""A config file's shape bounded before its parser sees it, in every spelling TOML and YAML have for a deep or long
key: quoted parts, inline tables (nested too), table and array-of-tables headers, spaces around the dots, nested
brackets and braces, YAML's nested flow and block nodes. Each is refused in one line (exit 2) within seconds;
the same keys one part or level shorter are read, checked against what ``tomllib`` makes of them."""

from __future__ import annotations

import random

import pytest
from conftest import within
from test_cli import assert_clean_error, run

from docaudit.cli.config_file import ConfigError, read_config_file
from docaudit.cli.config_shape import toml_shape_problem
from docaudit.config import CONFIG_MAX_DEPTH, CONFIG_MAX_KEY_PARTS
from docaudit.errors import USAGE
from docaudit.io import tomllib

HANG_GUARD = 30  # seconds: a guard that turns a hang into a failure
PARTS = ("a", '"="', "'x.y'", '"a.b"', "_-9", '""')


def key(parts: int, rng: random.Random) -> str:
    """A dotted key of ``parts`` parts in mixed spellings, with or without spaces around its dots."""
    return "".join((rng.choice((".", " . ", "\t.")) if i else "") + rng.choice(PARTS) for i in range(parts))


SPELLINGS = {
    "bare": "{key} = 1\n",
    "inline table": "x = {{{key} = 1}}\n",
    "nested inline tables": "x = {{ y = {{ z = {{{key} = 1}} }} }}\n",
    "table header": "[{key}]\nv = 1\n",
    "array of tables": "[[{key}]]\nv = 1\n",
    "after strings": "s = 'a.b.c'\nm = '''\n\"\"\"a.b\n'''\n# c.d.e\n{key} = 1.5\n",
}


def nesting(value) -> int:
    """How deep the mappings of ``value`` go (lists of tables included)."""
    if isinstance(value, dict):
        return 1 + max((nesting(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((nesting(v) for v in value), default=0)
    return 0


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_a_long_key_is_bounded_at_the_same_count(spelling):
    """A key of exactly the bound is read, and ``tomllib`` nests it that deep (the independent reference: the
    scanner counted what the parser builds); one more part is refused."""
    rng = random.Random(spelling)
    for _ in range(5):
        at_bound = SPELLINGS[spelling].format(key=key(CONFIG_MAX_KEY_PARTS, rng))
        assert toml_shape_problem(at_bound) is None, at_bound
        assert nesting(tomllib.loads(at_bound)) >= CONFIG_MAX_KEY_PARTS
        over = SPELLINGS[spelling].format(key=key(CONFIG_MAX_KEY_PARTS + 1, rng))
        tomllib.loads(over)  # valid TOML: refused for its shape only
        assert "more than 32 dotted parts" in toml_shape_problem(over)


@pytest.mark.parametrize(
    "name, text",
    [
        ("quoted first part", '"="' + ".a" * 40_000 + " = 1\n"),
        ("inline table", "x = {a" + ".a" * 40_000 + " = 1}\n"),
        ("table header", '["="' + ".a" * 40_000 + "]\n"),
        ("array of tables", "[[a" + " . a" * 40_000 + "]]\n"),
        ("nested inline tables", "x = " + "{a = " * 20_000 + "1" + "}" * 20_000 + "\n"),
        ("nested arrays", "x = " + "[" * 20_000 + "1" + "]" * 20_000 + "\n"),
    ],
)
def test_deep_or_long_keys_are_refused_in_one_line_before_parsing(tmp_path, name, text):
    """``"=".a.a… = 1`` of 40,000 parts ran past 90 s and 4 GB in ``tomllib``."""
    config = tmp_path / "settings.toml"
    config.write_text(text)
    result = within(HANG_GUARD, run, "config", "show", "score", "--config", config)
    assert result.exit_code == USAGE, result.output
    deep = name.startswith("nested")
    assert_clean_error(result, "line 1 " + ("nests tables or arrays more than 32" if deep else "holds a key of more"))


def test_nesting_is_bounded_at_its_depth_in_toml():
    inside = "x = " + "[" * CONFIG_MAX_DEPTH + "1" + "]" * CONFIG_MAX_DEPTH
    assert toml_shape_problem(inside) is None and nesting(tomllib.loads(inside)) == 1
    assert "nests tables or arrays more than 32 deep" in toml_shape_problem("x = [" + inside[4:] + "]")
    tables = "x = " + "{a = " * CONFIG_MAX_DEPTH + "1" + "}" * CONFIG_MAX_DEPTH
    assert toml_shape_problem(tables) is None and nesting(tomllib.loads(tables)) == CONFIG_MAX_DEPTH + 1
    assert toml_shape_problem("[[t]]\n" + tables) is None  # a header's brackets close before its keys
    assert "nests tables or arrays more than 32 deep" in toml_shape_problem(tables.replace("{", "{b = {", 1))


def test_ordinary_values_are_not_mistaken_for_keys():
    """Floats, times, URLs and dotted strings of every kind are read as before."""
    text = (
        "[score]\n"
        'model = "https://a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.e.f.g.h/v1"\n'
        "alpha = 0.05\nwhen = 1979-05-27T07:32:00.999Z\nnote = '''a.b.c\n" + "x." * 100 + "'''\n"
        'escaped = "\\"' + ".a" * 100 + '"\n'
    )
    assert toml_shape_problem(text) is None
    assert tomllib.loads(text)["score"]["alpha"] == 0.05


@pytest.mark.parametrize(
    "text",
    ["x: " + "{a: " * 20_000 + "1" + "}" * 20_000, "x: " + "[" * 20_000 + "1" + "]" * 20_000]
    + ["".join("  " * i + f"k{i}:\n" for i in range(40)) + "  " * 40 + "v: 1\n"],
    ids=["flow mappings", "flow lists", "block mappings"],
)
def test_deep_yaml_is_refused_in_one_line(tmp_path, text):
    config = tmp_path / "settings.yaml"
    config.write_text(text)
    with pytest.raises(ConfigError, match="nests mappings or lists more than 32 deep"):
        within(HANG_GUARD, read_config_file, config)
    result = within(HANG_GUARD, run, "config", "show", "score", "--config", config)
    assert result.exit_code == USAGE
    assert_clean_error(result, "nests mappings or lists more than 32 deep")


def test_yaml_within_the_depth_is_read(tmp_path):
    config = tmp_path / "settings.yaml"
    config.write_text("".join("  " * i + f"k{i}:\n" for i in range(CONFIG_MAX_DEPTH - 2)) + "  " * 30 + "v: 1\n")
    assert nesting(read_config_file(config)) == CONFIG_MAX_DEPTH - 1


def test_a_yaml_file_past_its_own_bound_is_refused_before_parsing(tmp_path):
    """PyYAML parses in pure Python: a 1 MiB flow list took 15 s, flow mappings nested 29 deep 30 s."""
    from docaudit.config import CONFIG_YAML_CHARACTERS

    config = tmp_path / "settings.yaml"
    config.write_text("x: [" + "1, " * (CONFIG_YAML_CHARACTERS // 3) + "1]\n")
    with pytest.raises(ConfigError, match="over 131,072 characters of YAML"):
        within(HANG_GUARD, read_config_file, config)
    config.write_text("score:\n  context: 16\n" + "# note\n" * ((CONFIG_YAML_CHARACTERS - 30) // 7))
    assert read_config_file(config) == {"score": {"context": 16}}

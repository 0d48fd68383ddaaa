"""scripts/checks/check_architecture.py: the checkout has no import circle, no module over 500 lines and no function
over 8 parameters outside the command line; and the checker finds each kind of offence in small packages made here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "checks" / "check_architecture.py"


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_architecture", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checker = _load_checker()


def test_the_checkout_passes():
    found = checker.offences(ROOT)
    assert not found, "\n".join(found)


def make_tree(root: Path, files: dict[str, str]) -> Path:
    """A checkout at ``root``: ``docaudit/...`` and ``scripts/...`` files with the given texts (every folder of the
    package with an ``__init__.py``)."""
    (root / "docaudit").mkdir(parents=True)
    (root / "scripts").mkdir()
    (root / "docaudit" / "__init__.py").write_text("")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in path.relative_to(root).parents:
            if folder.parts and folder.parts[0] == "docaudit" and not (root / folder / "__init__.py").exists():
                (root / folder / "__init__.py").write_text("")
        path.write_text(text)
    return root


def test_a_clean_package_has_no_offence(tmp_path):
    """Imports one way only (function-level and TYPE_CHECKING included), 500 lines, 8 parameters plus self."""
    root = make_tree(
        tmp_path,
        {
            "docaudit/a.py": "def f():\n    from docaudit import b\n",
            "docaudit/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from docaudit import c\n",
            "docaudit/c.py": "class C:\n    def m(self, a, b, c, d, e, f, g, h):\n        pass\n",
            "scripts/long.py": "x = 1\n" * 500,
        },
    )
    assert checker.offences(root) == []
    assert checker.main(["--root", str(root)]) == 0


def test_a_circle_through_an_import_inside_a_function(tmp_path):
    root = make_tree(
        tmp_path,
        {
            "docaudit/sub/a.py": "from docaudit.sub.b import g\n\ndef f():\n    return g()\n",
            "docaudit/sub/b.py": "def g():\n    from docaudit.sub import a\n    return a\n",
        },
    )
    (line,) = checker.offences(root)
    assert line.startswith("import circle among docaudit.sub.a, docaudit.sub.b: ")
    assert "docaudit.sub.a (line 1) -> docaudit.sub.b (line 2) -> docaudit.sub.a" in line


def test_a_circle_under_type_checking_and_through_relative_imports(tmp_path):
    root = make_tree(
        tmp_path,
        {
            "docaudit/p/x.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .y import Y\n",
            "docaudit/p/y.py": "from . import z\n",
            "docaudit/p/z.py": "import docaudit.p.x\n",
        },
    )
    (line,) = checker.offences(root)
    assert line.startswith("import circle among docaudit.p.x, docaudit.p.y, docaudit.p.z: ")


def test_from_package_import_name_is_an_edge_to_the_package_and_the_module(tmp_path):
    """``from docaudit.p import m`` depends on ``docaudit.p`` (its ``__init__``) and on ``docaudit.p.m``."""
    root = make_tree(
        tmp_path,
        {
            "docaudit/p/__init__.py": "from docaudit.p.m import VALUE\n",
            "docaudit/p/m.py": "from docaudit.p import n\n",
            "docaudit/p/n.py": "",
        },
    )
    graph = checker.import_graph(root / "docaudit")
    assert set(graph["docaudit.p.m"]) == {"docaudit.p", "docaudit.p.n"}
    (line,) = checker.circles(root / "docaudit")
    assert "docaudit.p, docaudit.p.m" in line


def test_a_module_over_500_lines_in_the_package_or_the_scripts(tmp_path):
    root = make_tree(tmp_path, {"docaudit/big.py": "x = 1\n" * 501, "scripts/tool/run.py": "y = 2\n" * 600})
    assert checker.offences(root) == [
        "long module: docaudit/big.py has 501 lines (at most 500)",
        "long module: scripts/tool/run.py has 600 lines (at most 500)",
    ]


@pytest.mark.parametrize(
    "signature, count",
    [
        ("def f(a, b, c, d, e, f, g, h, i):", 9),
        ("def f(a, b, c, d, e, f, g, *args, **kwargs):", 9),
        ("def f(a, /, b, c, d, e, *, f, g, h, i):", 9),
        ("async def f(a, b, c, d, e, f, g, h, i=1):", 9),
        ("class K:\n    def f(self, a, b, c, d, e, f, g, h, i):", 9),
        ("def outer():\n    def f(self, a, b, c, d, e, f, g, h):", 9),  # not a method: self counts
    ],
)
def test_a_function_over_8_parameters(tmp_path, signature, count):
    root = make_tree(tmp_path, {"docaudit/m.py": f"{signature}\n        pass\n"})
    (line,) = checker.offences(root)
    assert line.startswith("long parameter list: docaudit/m.py:") and line.endswith(f"has {count} (at most 8)")


def test_the_command_line_may_take_more_parameters(tmp_path):
    many = "def command(a, b, c, d, e, f, g, h, i, j):\n    pass\n"
    root = make_tree(tmp_path, {"docaudit/cli.py": many, "docaudit/cli/group.py": many, "docaudit/client.py": many})
    (line,) = checker.offences(root)
    assert line.startswith("long parameter list: docaudit/client.py:")


def test_the_script_lists_each_offence_and_fails(tmp_path):
    root = make_tree(
        tmp_path,
        {
            "docaudit/a.py": "import docaudit.b\n",
            "docaudit/b.py": "def f():\n    import docaudit.a\n",
            "docaudit/c.py": "def f(a, b, c, d, e, f, g, h, i):\n    pass\n" + "x = 1\n" * 500,
        },
    )
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "import circle among docaudit.a, docaudit.b",
        "long module",
        "long parameter list",
    ]


TYPED = "from pathlib import Path\n\n\ndef run(request: Path, *, quiet: bool = False) -> int:\n    return 0\n"


@pytest.mark.parametrize("api_path", ["docaudit/api.py", "docaudit/api/commands.py"])
def test_a_typed_api_has_no_offence(tmp_path, api_path):
    """Annotated public functions and methods (``self`` need not be), private helpers free, ``*`` alone allowed."""
    text = (
        TYPED + "\n\nclass Result:\n    def to_json(self) -> dict:\n        return {}\n\n\ndef _helper(x):\n    pass\n"
    )
    root = make_tree(tmp_path, {api_path: text, "docaudit/other.py": "def f(*args, **kwargs):\n    pass\n"})
    assert checker.offences(root) == []


@pytest.mark.parametrize(
    "text, offence",
    [
        ("def score(*paths: str) -> list:\n    pass\n", "score takes *paths"),
        ("def score(paths: list, **options: object) -> list:\n    pass\n", "score takes **options"),
        ("def _take(options, *args):\n    pass\n", "_take takes *args"),  # a private helper too
        ("def score(paths, model: str) -> list:\n    pass\n", "score does not annotate paths"),
        ("def score(paths: list):\n    pass\n", "score does not annotate return"),
        ("class R:\n    def write(self, out) -> None:\n        pass\n", "write does not annotate out"),
        ("class R:\n    def to_frame(self):\n        pass\n", "to_frame does not annotate return"),
    ],
)
def test_an_untyped_api_function(tmp_path, text, offence):
    root = make_tree(tmp_path, {"docaudit/api/commands.py": text})
    (line,) = checker.offences(root)
    assert line.startswith("untyped API: docaudit/api/commands.py:") and line.endswith(offence)


def test_one_seed_field_across_the_dataclasses(tmp_path):
    """One dataclass field named ``seed`` is the rule; a second one, in any module and whatever the decorator's
    form, is an offence naming both; a seed outside a dataclass is not a field."""
    one = "from dataclasses import dataclass\n\n\n@dataclass(frozen=True)\nclass RunContext:\n    seed: int = 0\n"
    other = "class Plain:\n    seed: int = 0\n\n\ndef f(seed: int = 0):\n    pass\n"
    root = make_tree(tmp_path, {"docaudit/run.py": one, "docaudit/plain.py": other})
    assert checker.offences(root) == []
    second = (
        "import dataclasses\n\n\n@dataclasses.dataclass\nclass MetaConfig:\n    trees: int = 5\n    seed: int = 1\n"
    )
    (root / "docaudit" / "config.py").write_text(second)
    assert checker.offences(root) == [
        "seed field: docaudit/config.py:7 MetaConfig.seed (2 dataclass fields named seed, at most 1)",
        "seed field: docaudit/run.py:6 RunContext.seed (2 dataclass fields named seed, at most 1)",
    ]

"""Every file docaudit reads goes through the one checked reader (``docaudit/untrusted.py``): a lint over the
package's source that fails on any other read of a file, so a new kind of file cannot bring back a read that hangs
on a FIFO or reads a link to ``/dev/zero`` until memory runs out."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "docaudit"
READER = PACKAGE / "untrusted.py"

READ_METHODS = {"read_text", "read_bytes"}  # pathlib's whole-file reads
# module.function calls that read a file given to them (a path or an open file)
FILE_READERS = {
    ("json", "load"),
    ("np", "load"),
    ("numpy", "load"),
    ("np", "fromfile"),
    ("np", "loadtxt"),
    ("np", "genfromtxt"),
    ("np", "memmap"),
    ("torch", "load"),
    ("tomllib", "load"),
    ("pickle", "load"),
    ("sio", "load"),
    ("yaml", "safe_load_all"),
    ("io", "open"),
    ("gzip", "open"),
    ("bz2", "open"),
    ("lzma", "open"),
    ("tarfile", "open"),
    ("zipfile", "ZipFile"),
    ("Image", "open"),
    ("os", "fdopen"),
}
OPENERS = {"open_untrusted"}  # what the file objects handed to a reader above must come from
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT"}


def _name(node: ast.AST) -> tuple[str, str] | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


def _mode(call: ast.Call) -> str:
    args = [*call.args[1:2], *(k.value for k in call.keywords if k.arg == "mode")]
    return args[0].value if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str) else "r"


def _opened_names(tree: ast.AST) -> set[str]:
    """Names bound to a file opened by the checked reader (``with open_untrusted(...) as f``, ``f = ...``), or to
    bytes wrapped in memory (``io.BytesIO``): what a reader of an open file may be handed."""
    names = set()
    for node in ast.walk(tree):
        pairs = []
        if isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            pairs.append((node.context_expr, node.optional_vars.id))
        if isinstance(node, (ast.Assign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            pairs += [(node.value, t.id) for t in targets if isinstance(t, ast.Name)]
        for value, name in pairs:
            if _checked_source(value, set()):
                names.add(name)
    return names


def _checked_source(node: ast.AST, opened: set[str]) -> bool:
    """Whether ``node`` is a file or bytes the checked reader gave: its call, a name bound to one, bytes in memory
    (``io.BytesIO``) or a text wrapper of one."""
    if isinstance(node, ast.Name):
        return node.id in opened
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if called in OPENERS or called == "BytesIO":
        return True
    return called == "TextIOWrapper" and bool(node.args) and _checked_source(node.args[0], opened)


def unchecked_reads(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for every read of a file in ``source`` that does not go through the checked reader."""
    tree = ast.parse(source)
    opened = _opened_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func, name = node.func, _name(node.func)
        if isinstance(func, ast.Attribute) and func.attr in READ_METHODS:
            found.append((node.lineno, f".{func.attr}()"))
        elif isinstance(func, ast.Name) and func.id == "open" and not set(_mode(node)) & set("wax+"):
            found.append((node.lineno, "open() for reading"))
        elif name == ("os", "open"):
            flags = {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)} if node.args[1:] else set()
            if not flags & WRITE_FLAGS:
                found.append((node.lineno, "os.open() for reading"))
        elif name in FILE_READERS:
            if name == ("os", "fdopen") and set(_mode(node)) & set("wax+"):
                continue
            if not (node.args and _checked_source(node.args[0], opened)):
                found.append((node.lineno, f"{name[0]}.{name[1]}()"))
        elif name is not None and name[0] in ("pd", "pandas") and name[1].startswith("read_"):
            if not (node.args and _checked_source(node.args[0], opened)):
                found.append((node.lineno, f"{name[0]}.{name[1]}()"))
    return sorted(found)


def test_every_read_of_a_file_goes_through_the_checked_reader():
    problems = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != READER
        for line, what in unchecked_reads(path.read_text(encoding="utf-8"))
    ]
    assert not problems, "read these through docaudit.untrusted (read_untrusted, open_untrusted):\n" + "\n".join(
        problems
    )


@pytest.mark.parametrize(
    "code",
    [
        "import json\njson.loads(Path(p).read_text())",
        "data = path.read_bytes()",
        "with open(p) as f:\n    f.read()",
        "with open(p, 'rb') as f:\n    f.read()",
        "import os\nfd = os.open(p, os.O_RDONLY)",
        "import numpy as np\nnp.load(p)",
        "import json\nwith something(p) as f:\n    json.load(f)",
        "import pandas as pd\npd.read_csv(p)",
        "import torch\ntorch.load(p, weights_only=True)",
        "import zipfile\nzipfile.ZipFile(p)",
    ],
)
def test_the_lint_finds_each_kind_of_unchecked_read(code):
    assert unchecked_reads(code), code


@pytest.mark.parametrize(
    "code",
    [
        "with open(p, 'w') as f:\n    f.write('x')",
        "import os\nfd = os.open(p, os.O_WRONLY | os.O_CREAT)",
        "import numpy as np\nwith open_untrusted(p, 'statistics') as f:\n    np.load(f)",
        "import io, pandas as pd\npd.read_csv(io.BytesIO(data))",
        "import io, json\nwith io.TextIOWrapper(open_untrusted(p, 'manifest')) as fh:\n    json.load(fh)",
        "data = read_untrusted(p, 'card')",
    ],
)
def test_the_lint_lets_checked_reads_and_writes_pass(code):
    assert not unchecked_reads(code), code

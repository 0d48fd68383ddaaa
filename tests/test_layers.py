"""The package's layers: a module may import its own layer and the ones below it, never one above.

The order is the data path (see docs/architecture.md): foundation (configuration, errors, safe file writing,
output folders, metrics) → corpus (documents) → query (models, windows, TokenStats, cache) → methods (scores from
TokenStats and texts) → audit (evaluations, contamination rates, tests) → report (tables, plots, output files) →
lab (controlled experiments) → api → cli. Every import counts, including those inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "docaudit"

LAYERS = {
    "config": 0,
    "errors": 0,
    "io": 0,
    "net": 0,
    "untrusted": 0,
    "outputs": 0,
    "folders": 0,
    "provenance": 0,
    "metrics": 0,
    "inference": 0,
    "run": 0,
    "seeds": 0,
    "corpus": 1,
    "query": 2,
    "methods": 3,
    "audit": 4,
    "report": 5,
    "lab": 6,
    "api": 7,
    "cli": 8,
    "__main__": 8,
}
# beyond the order: the methods work on TokenStats and texts, never on documents or their files
FORBIDDEN = {"methods": {"corpus"}}


def top_part(module: str) -> str | None:
    """The layer a dotted module name inside the package belongs to (``None`` for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "docaudit" else None


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every ``docaudit.*`` module ``path`` imports, with its line number (relative imports resolved)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            if not node.module:  # "from . import x": each name is a module
                found += [(node.lineno, f"{target}.{a.name}") for a in node.names]
    return [(line, m) for line, m in found if m == "docaudit" or m.startswith("docaudit.")]


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    unknown = {top_part(module_name(p)) for p in MODULES} - set(LAYERS) - {None}
    assert not unknown, f"modules outside the known layers: {sorted(unknown)}; add them to LAYERS and the docs"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down_the_layers(path):
    own = top_part(module_name(path))
    if own is None:
        return
    bad = []
    for line, target in imported_modules(path):
        other = top_part(target)
        if other is None or other == own:
            continue
        if other not in LAYERS:
            bad.append(f"line {line}: {target} is in no layer")
        elif LAYERS[other] > LAYERS[own] or other in FORBIDDEN.get(own, ()):
            bad.append(f"line {line}: {own} may not import {target}")
    assert not bad, "\n".join(bad)


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """A module of the query layer importing the methods layer, inside a function, is caught."""
    probe = tmp_path / "docaudit" / "query" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("def f():\n    from ..methods import scaling\n")
    monkeypatch.setattr("test_layers.PACKAGE", tmp_path / "docaudit")
    with pytest.raises(AssertionError, match="query may not import docaudit.methods"):
        test_imports_go_down_the_layers(probe)

"""Check the package's shape: no import circles, no long modules, no long parameter lists.

- An import circle is a cycle in the graph of the package's modules, where every import counts: at module level,
  inside a function, under ``TYPE_CHECKING``. ``import a.b`` is an edge to ``a.b``; ``from a import b`` an edge to
  ``a`` and, when ``a.b`` is a module, to ``a.b`` too.
- A module is long when it has more than ``MAX_LINES`` lines (the package and ``scripts/``).
- A function's parameter list is long when it has more than ``MAX_PARAMETERS`` parameters (``self``/``cls`` not
  counted, ``*args`` and ``**kwargs`` one each), in the package outside its command-line layer.
- The Python API (``docaudit/api.py`` or the package ``docaudit/api/``) is typed: no function there takes
  ``*args`` or ``**kwargs`` (a reader, an IDE or a type checker can follow each setting to the code that reads it),
  and every public function and public method of a public class annotates each parameter and its return.
- One seed: at most ``MAX_SEEDS`` field named ``seed`` across the package's dataclasses (``RunContext.seed``).

Prints each offence on one line and exits 1 when there is any, 0 otherwise.

    python scripts/checks/check_architecture.py [--root DIR]
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import deque
from pathlib import Path

MAX_LINES = 500
MAX_PARAMETERS = 8
MAX_SEEDS = 1
PACKAGE = "docaudit"
SCRIPTS = "scripts"
# the command line's functions mirror its options; their parameters are checked where the options are declared
PARAMETERS_EXEMPT = ("cli",)


def module_names(package_dir: Path) -> dict[str, Path]:
    """Every module of the package under ``package_dir`` by dotted name (a package by its own name)."""
    names = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports(path: Path, name: str) -> list[tuple[int, str, list[str]]]:
    """Every import in ``path`` (module ``name``), anywhere in the file: (line, module, names imported from it)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target, [alias.name for alias in node.names]))
    return found


def import_graph(package_dir: Path) -> dict[str, dict[str, int]]:
    """module → {module it imports: line of the first such import}, within the package."""
    modules = module_names(package_dir)
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for name, path in modules.items():
        for line, target, names in imports(path, name):
            for other in [target] + [f"{target}.{n}" for n in names]:
                if other in modules and other != name:
                    graph[name].setdefault(other, line)
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def shortest_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, staying inside the component."""
    start, inside = component[0], set(component)
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child == start:
                cycle = [node]
                while cycle[-1] != start:
                    cycle.append(parent[cycle[-1]])
                return [start] + cycle[::-1][1:] + [start]
            if child in inside and child not in parent:
                parent[child] = node
                queue.append(child)
    raise AssertionError("a strongly connected component without a cycle")


def circles(package_dir: Path) -> list[str]:
    """One line per import circle: the modules in it, and one shortest cycle with the line of each import."""
    graph = import_graph(package_dir)
    lines = []
    for component in strongly_connected(graph):
        cycle = shortest_cycle(graph, component)
        steps = " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"
        lines.append(f"import circle among {', '.join(component)}: {steps}")
    return lines


def long_modules(root: Path, folders: tuple[str, ...] = (PACKAGE, SCRIPTS)) -> list[str]:
    """One line per Python file in ``folders`` (under ``root``) with more than ``MAX_LINES`` lines."""
    lines = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            count = len(path.read_text(encoding="utf-8").splitlines())
            if count > MAX_LINES:
                lines.append(f"long module: {path.relative_to(root)} has {count} lines (at most {MAX_LINES})")
    return lines


def parameter_count(function: ast.FunctionDef | ast.AsyncFunctionDef, in_class: bool) -> int:
    """Parameters of ``function``: ``self``/``cls`` of a method not counted, ``*args`` and ``**kwargs`` one each."""
    a = function.args
    positional = [*a.posonlyargs, *a.args]
    if in_class and positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    return len(positional) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)


def long_signatures(package_dir: Path, exempt: tuple[str, ...] = PARAMETERS_EXEMPT) -> list[str]:
    """One line per function of the package (outside the ``exempt`` subpackages or modules) with more than
    ``MAX_PARAMETERS`` parameters."""
    lines = []
    for name, path in module_names(package_dir).items():
        if any(name == f"{package_dir.name}.{e}" or name.startswith(f"{package_dir.name}.{e}.") for e in exempt):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        classes = {id(f) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for f in node.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                count = parameter_count(node, id(node) in classes)
                if count > MAX_PARAMETERS:
                    where = f"{path.relative_to(package_dir.parent)}:{node.lineno}"
                    lines.append(f"long parameter list: {where} {node.name} has {count} (at most {MAX_PARAMETERS})")
    return lines


def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def api_modules(package_dir: Path) -> dict[str, Path]:
    """The modules of the Python API: ``<package>/api.py`` or every module of ``<package>/api/``."""
    prefix = f"{package_dir.name}.api"
    return {n: p for n, p in module_names(package_dir).items() if n == prefix or n.startswith(prefix + ".")}


def _public_functions(tree: ast.Module) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """The module's public functions and the public methods of its public classes: (function, is a method)."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
            found.append((node, False))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            found += [
                (f, True)
                for f in node.body
                if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and not f.name.startswith("_")
            ]
    return found


def untyped_api(package_dir: Path) -> list[str]:
    """One line per function of the API taking ``*args`` or ``**kwargs``, and per public function or method of it
    with a parameter or its return not annotated."""
    lines = []
    for path in api_modules(package_dir).values():
        tree = _parsed(path)
        where = path.relative_to(package_dir.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for star, arg in (("*", node.args.vararg), ("**", node.args.kwarg)):
                    if arg is not None:
                        lines.append(f"untyped API: {where}:{node.lineno} {node.name} takes {star}{arg.arg}")
        for function, method in _public_functions(tree):
            a = function.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
            if method and params and params[0].arg in ("self", "cls"):
                params = params[1:]
            missing = [p.arg for p in params if p.annotation is None]
            missing += ["return"] if function.returns is None else []
            if missing:
                lines.append(
                    f"untyped API: {where}:{function.lineno} {function.name} does not annotate {', '.join(missing)}"
                )
    return lines


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name == "dataclass":
            return True
    return False


def seed_fields(package_dir: Path) -> list[str]:
    """Every field named ``seed`` of a dataclass in the package, as ``path:line Class.seed``."""
    found = []
    for path in module_names(package_dir).values():
        for node in ast.walk(_parsed(path)):
            if isinstance(node, ast.ClassDef) and _is_dataclass(node):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and getattr(item.target, "id", None) == "seed":
                        found.append(f"{path.relative_to(package_dir.parent)}:{item.lineno} {node.name}.seed")
    return found


def extra_seeds(package_dir: Path) -> list[str]:
    """One line per seed field when the package's dataclasses have more than ``MAX_SEEDS`` of them."""
    found = seed_fields(package_dir)
    if len(found) <= MAX_SEEDS:
        return []
    return [f"seed field: {f} ({len(found)} dataclass fields named seed, at most {MAX_SEEDS})" for f in found]


def offences(root: Path) -> list[str]:
    """Every offence in the checkout at ``root``."""
    package_dir = root / PACKAGE
    return (
        circles(package_dir)
        + long_modules(root)
        + long_signatures(package_dir)
        + untyped_api(package_dir)
        + extra_seeds(package_dir)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2], help="the checkout")
    args = parser.parse_args(argv)
    found = offences(args.root)
    for line in found:
        print(line)
    if not found:
        print("architecture: no import circles, long modules, long parameter lists, untyped API or second seed")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

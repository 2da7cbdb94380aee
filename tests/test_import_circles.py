"""No import circle anywhere in the package, function-level imports included.

import-linter's contracts (pyproject.toml) order the layers and the connection's modules; a circle
made by an import inside a function (which runs late, so nothing fails at import time) slips past
a reading of the module-level imports alone. This test reads every module's syntax tree for every
``import`` and ``from ... import`` wherever it is (functions, ``TYPE_CHECKING`` blocks, ``try``), and
fails naming each circle it finds.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "kubectl_kvdtype"


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules ``name`` imports, anywhere in its text."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:  # a submodule by its name, else a name of the module
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    edges = set()
    for target in targets:
        while target and target not in modules:  # ``import a.b.c`` of a name: its nearest module
            target = target.rpartition(".")[0]
        if target.startswith(PACKAGE) and target != name:
            edges.add(target)
    return edges


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
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
                    work.append((child, iter(sorted(graph.get(child, ())))))
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
                    found.append(sorted(component))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_the_package_has_no_import_circle():
    circles = _circles(_graph())
    assert circles == [], "import circles (function-level imports included): " + "; ".join(
        " <-> ".join(circle) for circle in circles)


def test_the_circle_finder_finds_a_circle_made_by_a_function_level_import(tmp_path):
    """The finder itself: a module graph with a circle through an import inside a function."""
    (tmp_path / "a.py").write_text("import json\n\ndef f():\n    from kubectl_kvdtype import b\n")
    (tmp_path / "b.py").write_text("from kubectl_kvdtype.a import f\n")
    modules = {"kubectl_kvdtype.a": tmp_path / "a.py", "kubectl_kvdtype.b": tmp_path / "b.py"}
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert graph == {"kubectl_kvdtype.a": {"kubectl_kvdtype.b"}, "kubectl_kvdtype.b": {"kubectl_kvdtype.a"}}
    assert _circles(graph) == [["kubectl_kvdtype.a", "kubectl_kvdtype.b"]]

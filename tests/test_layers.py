"""The package's layers: which module may import which, and what the fast paths import.

``LAYERS`` is the map: a module may import modules of a lower layer, or of its own layer (except
the subcommands, which import no other subcommand); never a higher one. Every import counts,
module-level or inside a function. A module missing from the map fails the test, so that a new
module is placed on purpose.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from _support import EXAMPLES, ROOT

pytestmark = pytest.mark.version_sensitive  # argparse, the argv reader, completion or the man page (test_tiers.py)

PACKAGE = ROOT / "kubectl_kvdtype"

#: Lowest first. The name of each layer says what its modules are for.
LAYER_NAMES = ("ground", "data", "sources", "judgement", "subcommands", "command line")
LAYERS: dict[str, str] = {
    # ground: the version, exit codes and their errors, the finding-codes registry, the streams
    "kubectl_kvdtype": "ground", "_status": "ground", "_codes": "ground", "_env": "ground", "_progress": "ground",
    "_display": "ground",
    # data: plain objects and rules over them, nothing that reads a cluster
    "_report": "data", "_render": "data", "_junit": "data", "_sarif": "data", "_flags": "data", "_engines": "data",
    "_argv": "data", "_engine_records": "data", "_model": "data", "_sources": "data", "_journal": "data",
    "_yamlread": "data", "_names": "data",
    # sources: where the objects come from, and what a subcommand is given
    "_cluster": "sources", "_manifests": "sources", "_positions": "sources", "_command": "sources",
    # judgement shared by the subcommands
    "_judgement": "judgement", "_setting": "judgement", "_lease": "judgement", "_rebind": "judgement",
    "_fix": "judgement", "_upgrade": "judgement", "_flagged": "judgement", "_restore": "judgement",
    # one module per subcommand
    "preflight": "subcommands", "check": "subcommands", "find_flags": "subcommands", "verify": "subcommands",
    "escape": "subcommands", "completion": "subcommands",
    # the registry (names subcommands by module path), the completion engine, main, fleet runs
    "_registry": "command line", "_complete": "command line", "_cli": "command line", "_fleet": "command line",
    "__main__": "command line",
}


def _module_name(path: Path) -> str:
    return "kubectl_kvdtype" if path.name == "__init__.py" else path.stem


def _imports(path: Path) -> set[str]:
    """Every module of the package ``path`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "kubectl_kvdtype":
            if node.module == "kubectl_kvdtype":  # from kubectl_kvdtype import _model, __version__
                names = [a.name for a in node.names]
                found |= {n for n in names if (PACKAGE / f"{n}.py").exists()}
                if any(not (PACKAGE / f"{n}.py").exists() for n in names):
                    found.add("kubectl_kvdtype")
            else:
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "kubectl_kvdtype":
                    found.add(parts[1] if len(parts) > 1 else "kubectl_kvdtype")
    return found


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) - {_module_name(p)} for p in sorted(PACKAGE.glob("*.py"))}


def test_every_module_is_placed_in_a_layer():
    modules = set(_graph())
    assert modules - set(LAYERS) == set(), "place the new module(s) in LAYERS"
    assert set(LAYERS) - modules == set(), "LAYERS names a module that no longer exists"
    assert set(LAYERS.values()) <= set(LAYER_NAMES)


def test_no_module_imports_a_higher_layer_and_no_subcommand_imports_another():
    rank = {name: index for index, name in enumerate(LAYER_NAMES)}
    wrong = []
    for module, imported in _graph().items():
        for other in imported:
            if rank[LAYERS[other]] > rank[LAYERS[module]]:
                wrong.append(f"{module} ({LAYERS[module]}) imports {other} ({LAYERS[other]})")
            elif LAYERS[module] == LAYERS[other] == "subcommands":
                wrong.append(f"subcommand {module} imports subcommand {other}")
    assert wrong == []


def test_the_import_graph_has_no_cycle():
    graph = _graph()
    state: dict[str, str] = {}
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for other in sorted(graph.get(module, ())):
            if state.get(other) == "open":
                cycles.append(path[path.index(other):] + [other] if other in path else [module, other])
            elif other not in state:
                visit(other, path + [other])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_the_walk_sees_a_cycle_and_an_upward_import(tmp_path):
    """The checks above can fail: the same walk over two modules that break both rules."""
    (tmp_path / "_model.py").write_text("from kubectl_kvdtype.check import CheckCommand\n")
    (tmp_path / "check.py").write_text("def f():\n    from kubectl_kvdtype import _model\n")
    graph = {_module_name(p): _imports(p) for p in tmp_path.glob("*.py")}
    assert graph == {"_model": {"check"}, "check": {"_model"}}
    rank = {name: index for index, name in enumerate(LAYER_NAMES)}
    assert rank[LAYERS["check"]] > rank[LAYERS["_model"]]  # _model -> check is upward


def test_the_registry_names_every_subcommand_by_module_path():
    from kubectl_kvdtype._registry import COMMANDS

    subcommands = {m for m, layer in LAYERS.items() if layer == "subcommands"}
    assert {info.module.split(".")[-1] for info in COMMANDS} == subcommands
    for info in COMMANDS:
        command = info.load()
        assert command.name == info.name and type(command).__name__ == info.class_name


def _imported_by(*args: str) -> set[str]:
    """The modules a whole process imports to run ``kubectl-kvdtype ARGS``."""
    code = ("import sys, runpy; sys.argv = ['kubectl-kvdtype', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('kubectl_kvdtype', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(' '.join(sorted(sys.modules)), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
    return set(result.stderr.strip().splitlines()[-1].split())


SUBCOMMAND_MODULES = {f"kubectl_kvdtype.{m}" for m, layer in LAYERS.items() if layer == "subcommands"}


@pytest.mark.e2e  # runs the plugin in a fresh interpreter
@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_import_no_subcommand_nor_yaml_nor_the_client(args):
    modules = _imported_by(*args)
    assert "kubectl_kvdtype._cli" in modules  # the probe ran the plugin
    assert modules & SUBCOMMAND_MODULES == set()
    assert {m.split(".")[0] for m in modules} & {"yaml", "kubernetes", "tabulate", "urllib3"} == set()
    assert "kubectl_kvdtype._judgement" not in modules and "kubectl_kvdtype._engines" not in modules


@pytest.mark.e2e  # runs the plugin in a fresh interpreter
def test_a_run_imports_only_the_subcommand_it_runs():
    modules = _imported_by("find-flags", "-f", str(EXAMPLES), "-o", "json")
    assert modules & SUBCOMMAND_MODULES == {"kubectl_kvdtype.find_flags"}
    # The position-keeping parse and the SARIF writer are -o sarif's alone.
    assert {"kubectl_kvdtype._positions", "kubectl_kvdtype._sarif"} & modules == set()
    assert {"kubectl_kvdtype._positions", "kubectl_kvdtype._sarif"} <= _imported_by(
        "find-flags", "-f", str(EXAMPLES), "-o", "sarif")

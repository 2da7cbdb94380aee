"""The package's layers: import-linter's contract (pyproject.toml, ``[tool.importlinter]``) is the
one statement of them; these tests check that it holds, that it can fail, that the package root
holds only the public face, and what the fast paths import.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _support import EXAMPLES, ROOT, imported_by, roots

pytestmark = pytest.mark.version_sensitive  # the registry builds the parser (test_tiers.py)

PACKAGE = ROOT / "kubectl_kvdtype"
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def _contract_layers() -> list[str]:
    """The contract's layers, highest first, as pyproject.toml writes them (one string each)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = text.split("[tool.importlinter]", 1)[1].split("layers = [", 1)[1].split("]", 1)[0]
    return re.findall(r'"([^"]+)"', block)


#: How many contracts pyproject.toml states (the package's layers first, then orders inside a layer).
CONTRACTS = (ROOT / "pyproject.toml").read_text(encoding="utf-8").count("[[tool.importlinter.contracts]]")
#: The subcommand modules: the contract's one line of independent siblings.
SUBCOMMANDS = {name.strip() for line in _contract_layers() if "|" in line for name in line.split("|")}
SUBCOMMAND_MODULES = {f"kubectl_kvdtype.{name}" for name in SUBCOMMANDS}


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.e2e  # runs lint-imports
def test_the_layers_contract_holds():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{CONTRACTS} kept, 0 broken" in result.stdout


@pytest.mark.e2e  # runs lint-imports
@pytest.mark.parametrize(("module", "injected"), [
    # a lower layer imports up (the lowest of _sources: a higher one there breaks its own order too, through _kits)
    ("_kits/report.py", "from kubectl_kvdtype._sources import kinds as _kinds\n"),
    ("_sources/kubeconfig.py", "def f():\n    from kubectl_kvdtype._sources import direct\n"),  # the connection's order
    ("check.py", "def f():\n    from kubectl_kvdtype import verify\n"),  # a subcommand imports another
    ("_changes/rebind/steps.py", "from kubectl_kvdtype._changes.rebind import plan as _plan\n"),  # within a layer
    ("_engines/records.py", "def f():\n    from kubectl_kvdtype._engines import verdicts\n"),  # the engine wing
    ("_engines/tables.py", "from kubectl_kvdtype._engines import rewrites as _rewrites\n"),  # its siblings
    ("_judging/flags.py", "import kubernetes\n"),  # the client outside _sources
    ("_sources/cluster.py", "from kubernetes.client import ApiClient\n"),  # a _sources module that does not own it
    ("_sources/direct.py", "import urllib3\n"),  # urllib3 in the direct transport
    ("_judging/flags.py", "from dataclasses import dataclass\n"),  # records not declared by _kits.records
])
def test_an_upward_import_breaks_the_contract(tmp_path, module, injected):
    """The same contract over a copy of the package with one wrong import added fails."""
    shutil.copytree(PACKAGE, tmp_path / "kubectl_kvdtype", ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "kubectl_kvdtype" / module
    target.write_text(target.read_text(encoding="utf-8") + "\n" + injected, encoding="utf-8")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout and f"{CONTRACTS - 1} kept, 1 broken" in result.stdout, result.stdout


def _contained_layers() -> dict[str, set[str]]:
    """Per layers contract over a package inside ours (``containers``), the modules its layers name."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    found = {}
    for container, layers in re.findall(r'containers = \["kubectl_kvdtype\.([\w.]+)"\]\s*layers = \[([^\]]*)\]', text):
        found[container] = {name.strip() for layer in re.findall(r'"([^"]+)"', layers) for name in layer.split("|")}
    return found


def test_each_package_with_its_own_order_places_every_module_in_it():
    """A module added to ``_engines`` (or a package of one module per job) is placed in its
    contract's order, not left outside it, where import-linter would let it import anything."""
    contained = _contained_layers()
    assert {"_engines", "_changes.rebind", "_changes.fix"} <= set(contained)
    for container, named in contained.items():
        package = PACKAGE.joinpath(*container.split("."))
        assert named == {p.stem for p in package.glob("*.py") if p.stem != "__init__"}, container


def test_the_package_root_holds_the_public_face_only():
    """Subcommand modules, __init__, __main__ and the layer subpackages (each in the contract)."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert modules == SUBCOMMANDS | {"__init__", "__main__"}
    layered = {line for line in _contract_layers() if "|" not in line} - {"__main__"}
    assert packages == layered
    assert all(name.startswith("_") for name in packages)


def test_the_registry_names_every_subcommand_by_module_path():
    from kubectl_kvdtype._cli.registry import COMMANDS

    assert {info.module.split(".")[-1] for info in COMMANDS} == SUBCOMMANDS
    for info in COMMANDS:
        command = info.load()
        assert command.name == info.name and type(command).__name__ == info.class_name


@pytest.mark.e2e  # runs the plugin in a fresh interpreter
@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_import_no_subcommand_nor_yaml_nor_the_client(args):
    _, modules = imported_by(args)
    assert "kubectl_kvdtype._cli.main" in modules  # the probe ran the plugin
    assert modules & SUBCOMMAND_MODULES == set()
    assert roots(modules) & {"yaml", "kubernetes", "tabulate", "urllib3"} == set()
    assert "kubectl_kvdtype._judging.bindings" not in modules and "kubectl_kvdtype._engines.verdicts" not in modules
    # Nor what only a run past the parse uses: the Context, the report and the source's kinds, the
    # name rules, the progress line, the file and JSON readers (a kubeconfig's), a bug's traceback.
    later = {"_commands.command", "_kits.report", "_sources.kinds", "_sources.names", "_kits.progress", "_kits.files",
             "_kits.bounded"}
    assert modules & ({f"kubectl_kvdtype.{name}" for name in later} | {"json", "traceback"}) == set()


@pytest.mark.e2e  # runs the plugin in a fresh interpreter
def test_a_run_imports_only_the_subcommand_it_runs():
    _, modules = imported_by(["find-flags", "-f", str(EXAMPLES), "-o", "json"])
    assert modules & SUBCOMMAND_MODULES == {"kubectl_kvdtype.find_flags"}
    # The position-keeping parse and the SARIF writer are -o sarif's alone.
    assert {"kubectl_kvdtype._sources.positions", "kubectl_kvdtype._output.sarif"} & modules == set()
    assert "kubectl_kvdtype._engines.tables" not in modules  # the validation of an added engine table file
    assert {"dataclasses", "inspect"} & modules == set()  # records are _kits.records' (cheaper to define)
    assert {"kubectl_kvdtype._sources.positions", "kubectl_kvdtype._output.sarif"} <= imported_by(
        ["find-flags", "-f", str(EXAMPLES), "-o", "sarif"])[1]


@pytest.mark.e2e  # runs the plugin in a fresh interpreter
def test_building_the_command_line_and_an_engine_parser_measures_no_terminal():
    """argparse makes a formatter per argument (to check its metavar), each measuring the terminal
    through shutil; the plugin's parsers and the recorded engine parsers (which check examples/'
    refused dtypes) build with one formatter of a fixed width, so a run that prints no help
    imports no shutil; ``--help`` still measures the terminal."""
    assert "shutil" not in imported_by(["check", "-f", str(EXAMPLES), "-o", "json"])[1]
    assert "shutil" in imported_by(["check", "--help"])[1]

"""Docs that cannot drift from the code: the layout names every module, the package docstring
every subcommand, and README states no suite counts or timings."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path
from typing import Optional

import pytest

import kubectl_kvdtype
from _support import ROOT

pytestmark = pytest.mark.version_sensitive  # the registry (test_tiers.py)

PACKAGE = ROOT / "kubectl_kvdtype"
LAYOUT = (ROOT / "docs" / "development.md").read_text(encoding="utf-8").split("## Layout", 1)[1].split("\n## ", 1)[0]


def _modules() -> dict[str, set[str]]:
    """Per layer subpackage, its modules (``__init__`` aside) and its own packages (``_changes.rebind``)."""
    return {package.name: {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
            | {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
            for package in PACKAGE.iterdir() if (package / "__init__.py").is_file()}


def _layout_rows() -> dict[str, set[str]]:
    """Per layer row of development.md's Layout table, the modules it names (backticked words)."""
    rows = {}
    for line in LAYOUT.splitlines():
        match = re.match(r"\| `(_\w+)`[^|]*\| (.+) \|$", line)
        if match:
            rows[match.group(1)] = set(re.findall(r"`(\w+)` \(", match.group(2)))
    return rows


def _writer_modules() -> set[str]:
    """The modules of ``_output`` that the formats table's rows name for their writers."""
    from kubectl_kvdtype._output.render import FORMATS, Lazily

    return {value.module for row in FORMATS for value in vars(row).values() if isinstance(value, Lazily)}


def test_the_layout_names_every_module_and_nothing_that_is_gone():
    """Every module, as the Layout table names it; a writer of ``_output`` may be named by its row
    of ``FORMATS`` instead, so that a new format is its module and its row."""
    rows, modules = _layout_rows(), _modules()
    assert _writer_modules() <= modules["_output"]
    rows["_output"] |= _writer_modules()
    assert rows == modules


def test_the_package_docstring_names_every_subcommand_in_the_registry():
    from kubectl_kvdtype._cli.registry import COMMANDS

    doc = kubectl_kvdtype.__doc__ or ""
    assert {info.module.split(".")[-1] for info in COMMANDS} <= set(re.findall(r"``(\w+)``", doc))


def test_readme_states_no_suite_counts_nor_timings():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert not re.search(r"\b\d[\d,]* (tests|in-process tests)\b", readme)
    assert not re.search(r"\b(ran|took) in \d|\b\d+ (s|minutes) (wall|of CPU)", readme)


#: Backticked names in the docs that begin with an underscore and are not the package's modules:
#: PyInstaller's one-folder directory, the tests' helpers, argparse's internals the docs discuss.
NOT_OURS = {"_internal", "_support", "_actions", "_option_string_actions"}


def _docs() -> dict[str, str]:
    return {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
            for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}


def test_the_docs_name_only_package_files_and_modules_that_exist():
    """A module moved (as the layers moved them into subpackages) leaves no doc pointing at its old
    place: every path under the package exists, and every name of ours resolves, whole
    (``_engines.verdicts.read_flag``, ``kubectl_kvdtype._sources.cluster``, ``_cli/registry.py``)."""
    names = {p.stem for p in PACKAGE.rglob("*.py")} | {p.name for p in PACKAGE.rglob("*") if p.is_dir()}
    gone = []
    for doc, text in _docs().items():
        gone += [f"{doc}: {path}" for path in re.findall(r"kubectl_kvdtype/[\w/.]*\w", text)
                 if not (ROOT / path).exists()]
        gone += [f"{doc}: {name}" for name in re.findall(r"`(_[a-z]\w*)", text) if name not in names | NOT_OURS]
        gone += [f"{doc}: {name} ({why})" for name, why in _stale_names(text)]
    assert gone == []


def _defined(path: Path) -> set[str]:
    """The names a module defines or imports at its top level."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def unresolved(name: str) -> Optional[str]:
    """Why ``name`` (``_engines.verdicts.read_flag``, ``kubectl_kvdtype._sources.cluster``,
    ``_cli/registry.py``, ``_engines/data``) names nothing in the package; None when it resolves:
    its packages and module exist and the module defines its next part."""
    relative = re.sub(r"^kubectl_kvdtype[./]", "", name)
    if (PACKAGE / relative).exists():
        return None  # a file or directory named by its path
    if relative.endswith(".py"):
        return f"no file {relative}"
    parts = re.split(r"[./]", relative.removesuffix(".py"))
    here = PACKAGE
    for index, part in enumerate(parts):
        if (here / part / "__init__.py").is_file():
            here = here / part
        elif (here / f"{part}.py").is_file():
            rest = parts[index + 1:]
            module = here / f"{part}.py"
            return None if not rest or rest[0] in _defined(module) else f"{part} has no {rest[0]}"
        elif here != PACKAGE and part in _defined(here / "__init__.py"):
            return None
        else:
            return f"no module {'.'.join(parts[:index + 1])}"
    return None


#: A name of ours in backticks, dotted or as a path, from its first part on (``_cli.main.parse``).
_OURS = re.compile(r"`+((?:kubectl_kvdtype[./])?_[a-z]\w*(?:[./]\w+)*)")
#: A module of the flat layout named without backticks (a comment's "read by _complete").
_BARE = re.compile(r"(?<![\w.`/])(_[a-z]\w*(?:\.\w+)*)")


def _stale_names(text: str, bare: bool = False) -> list[tuple[str, str]]:
    """The names in ``text`` that start like one of the package's (a layer, ``kubectl_kvdtype``, or
    an underscore and a module's name, as the flat layout called them: ``_argv``, ``_status``) and
    resolve to nothing, with why."""
    layers = set(_modules())
    stems = {p.stem for p in PACKAGE.rglob("*.py")} - {"__init__"}
    found = [match.group(1) for match in _OURS.finditer(text)]
    if bare:
        found += [match.group(1) for match in _BARE.finditer(text)]
    stale = []
    for name in found:
        first = re.split(r"[./]", re.sub(r"^kubectl_kvdtype[./]", "", name))[0]
        if name.startswith("kubectl_kvdtype") or first in layers or first[1:] in stems:
            why = unresolved(name)
            if why:
                stale.append((name, why))
    return stale


def _docstrings_and_comments(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    texts = [ast.get_docstring(node, clean=False) or "" for node in ast.walk(ast.parse(source))
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    texts += [token.string for token in tokenize.generate_tokens(io.StringIO(source).readline)
              if token.type == tokenize.COMMENT]
    return texts


def test_the_package_docstrings_and_comments_name_only_modules_that_exist():
    """A docstring naming a module of the flat layout (``_engines.py``'s ``_engines.judge``,
    ``_argv``, ``_registry``) sends a reader to a file that is gone."""
    stale = [f"{path.relative_to(ROOT)}: {name} ({why})" for path in sorted(PACKAGE.rglob("*.py"))
             for text in _docstrings_and_comments(path) for name, why in _stale_names(text, bare=True)]
    assert stale == []


@pytest.mark.parametrize("name", ["_engines.judge", "_argv", "_status.ExitStatus", "_cli.py", "_model",
                                  "kubectl_kvdtype._sources.clusters", "_cli/registry.py.COMMANDS", "_kits.codes.NOPE"])
def test_a_stale_name_fails(name):
    assert _stale_names(f"see ``{name}``")
    assert _stale_names(f"# read by {name}", bare=True) or not re.fullmatch(r"_[\w.]+", name)


@pytest.mark.parametrize("name", ["_engines.verdicts.read_flag", "kubectl_kvdtype._sources.cluster", "_cli/registry.py",
                                  "_engines/data", "_cli.main.parse", "_kits", "_output.render.FORMATS"])
def test_a_name_that_exists_passes(name):
    assert _stale_names(f"see ``{name}``", bare=True) == []


def test_every_layer_says_what_it_is():
    assert {package: (PACKAGE / package / "__init__.py").read_text(encoding="utf-8").count("TODO")
            for package in _modules()} == {package: 0 for package in _modules()}
    assert all(len((PACKAGE / package / "__init__.py").read_text(encoding="utf-8")) > 80 for package in _modules())


#: A path into one machine's own files (a home, a workspace, a file in /tmp): a doc naming one does
#: not travel. Paths every machine has alike (``/tmp`` as a mount, ``/usr/bin/time``, ``/dev/zero``)
#: and JSON pointers (``/metadata/resourceVersion``) are not of one machine.
_ONE_MACHINE = re.compile(r"(?<![\w.:/~-])/(?:(?:root|work|home|Users|mnt|srv|workspace)\b|tmp/\S)[^\s`'\")]*")


def test_the_docs_name_paths_relative_to_the_repository_or_the_home_directory():
    found = [f"{doc}: {path}" for doc, text in _docs().items() for path in _ONE_MACHINE.findall(text)]
    assert found == []


@pytest.mark.parametrize(("text", "machine"), [
    ("scripts/engine-tables --cache /work/engine-cache", True), ("saved to /home/me/kvdtype-backup-x/", True),
    ("in `/root/.cache`", True), ("a file /tmp/kvdtype-1/log", True), ("(/Users/me/dump.yaml)", True),
    ("where `/tmp` is mounted noexec", False), ("`/usr/bin/time -v`", False), ("~/kvdtype-backup-x/", False),
    ("../engine-cache", False), ("https://example.com/home/x", False), ('"path": "/metadata/name"', False),
])
def test_a_path_of_one_machine_is_found(text, machine):
    assert bool(_ONE_MACHINE.findall(text)) is machine


def test_the_docs_list_the_output_formats_of_the_formats_table():
    """README's tour and the reference write ``-o`` as the list of every format a run takes without
    another flag (``-o patch`` goes with ``find-flags --fix`` and is documented there): one list,
    ``FORMATS``'s, so a new row fails this until the docs name it."""
    from kubectl_kvdtype._output.render import FORMATS

    listed = "|".join(form.name for form in FORMATS if form.needs is None)
    for doc in (ROOT / "README.md", ROOT / "docs" / "reference.md"):
        text = " ".join(doc.read_text(encoding="utf-8").split())
        written = re.findall(r"-o(?:/--output)? (table\|[a-z|]+)", text)
        assert written and set(written) == {listed}, (doc.name, written, listed)

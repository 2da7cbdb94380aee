"""Docs that cannot drift from the code: the layout names every module, the package docstring
every subcommand, and README states no suite counts or timings."""

from __future__ import annotations

import re

import pytest

import kubectl_kvdtype
from _support import ROOT

pytestmark = pytest.mark.version_sensitive  # the registry (test_tiers.py)

PACKAGE = ROOT / "kubectl_kvdtype"
LAYOUT = (ROOT / "docs" / "development.md").read_text(encoding="utf-8").split("## Layout", 1)[1].split("\n## ", 1)[0]


def _modules() -> dict[str, set[str]]:
    """Per layer subpackage, its modules (``__init__`` aside)."""
    return {package.name: {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
            for package in PACKAGE.iterdir() if (package / "__init__.py").is_file()}


def _layout_rows() -> dict[str, set[str]]:
    """Per layer row of development.md's Layout table, the modules it names (backticked words)."""
    rows = {}
    for line in LAYOUT.splitlines():
        match = re.match(r"\| `(_\w+)`[^|]*\| (.+) \|$", line)
        if match:
            rows[match.group(1)] = set(re.findall(r"`(\w+)` \(", match.group(2)))
    return rows


def test_the_layout_names_every_module_and_nothing_that_is_gone():
    assert _layout_rows() == _modules()


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
    """A module moved (as the layers moved them into subpackages) leaves no doc pointing at its old place."""
    names = {p.stem for p in PACKAGE.rglob("*.py")} | {p.name for p in PACKAGE.rglob("*") if p.is_dir()}
    gone = []
    for doc, text in _docs().items():
        gone += [f"{doc}: {path}" for path in re.findall(r"kubectl_kvdtype/[\w/.]*\w", text)
                 if not (ROOT / path).exists()]
        gone += [f"{doc}: {name}" for name in re.findall(r"`(_[a-z]\w*)", text) if name not in names | NOT_OURS]
    assert gone == []


def test_every_layer_says_what_it_is():
    assert {package: (PACKAGE / package / "__init__.py").read_text(encoding="utf-8").count("TODO")
            for package in _modules()} == {package: 0 for package in _modules()}
    assert all(len((PACKAGE / package / "__init__.py").read_text(encoding="utf-8")) > 80 for package in _modules())

"""One job per room (issue 39): a subcommand module at the package root keeps its ``Command``, its
flags, its typed options and one call down, so it stays short; no module anywhere grows into
several jobs. The bounds are the issue's acceptance; a module that outgrows one is split along
its jobs (as ``_changes.rebind`` and ``_changes.fix`` were), not the bound raised."""

from __future__ import annotations

from _support import ROOT

PACKAGE = ROOT / "kubectl_kvdtype"
#: The most lines a subcommand module at the package root may have.
ROOT_MODULE_LINES = 250
#: The most lines any module may have.
MODULE_LINES = 650


def _lines(path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_subcommand_modules_at_the_root_are_short():
    long = {p.name: _lines(p) for p in PACKAGE.glob("*.py") if _lines(p) > ROOT_MODULE_LINES}
    assert long == {}


def test_no_module_is_several_rooms():
    long = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if _lines(p) > MODULE_LINES}
    assert long == set()

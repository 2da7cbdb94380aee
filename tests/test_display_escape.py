"""Every string that reaches a terminal goes through the one display escape (``_kits/display.shown``).

Two checks, in process: every ``print(...)`` and ``<stream>.write(...)`` of the package is one of a
few known places, each either escaping what it writes (it calls ``shown``) or writing what is no
terminal text (the rendered result, whose writers escape; a file; the shell's completion protocol);
and the table writers, single run and fleet, turn hostile strings in every field (context names,
errors, headlines, cells, findings) into escapes, never raw control, format or bidi characters."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from kubectl_kvdtype._kits.report import FleetMember, FleetReport, ObjectRef, Report
from kubectl_kvdtype._kits.status import ExitStatus
from kubectl_kvdtype._output.render import render, render_fleet

PACKAGE = Path(__file__).resolve().parent.parent / "kubectl_kvdtype"

#: Where the package may print or write to a stream: (module, function) -> why that is safe.
ESCAPING = {  # each calls shown on what it writes
    ("_kits/env.py", "progress"), ("_kits/env.py", "live"), ("_kits/env.py", "ask"),
    ("_kits/progress.py", "_draw"), ("_cli/main.py", "internal_error"), ("_cli/main.py", "_fail"),
    ("_sources/requestlog.py", "klog"),
}
CONSTANT = {  # writes only fixed text: a line end, an erase sequence
    ("_kits/env.py", "end_live"), ("_kits/progress.py", "_erase"),
}
NOT_TERMINAL_TEXT = {
    ("_cli/main.py", "_write"): "the rendered result: the table writers escape each cell and line (below), "
                                "JSON, YAML, JUnit and SARIF their own way",
    ("_cli/complete.py", "complete"): "completion candidates for the shell's protocol (names a cluster validated)",
    ("_changes/journal.py", "_write_atomically"): "a file in the backup directory",
    ("_sources/direct.py", "_write_all"): "a client certificate's data, to the file ssl loads it from",
}

HOSTILE = "a\x1b[2J\x07b\rc\nFleet verdict: GO\u202ed\u200be"


def _writes() -> dict[tuple[str, str], list[ast.Call]]:
    """Every print(...) and x.write(...) call in the package, by (module, enclosing function)."""
    found: dict[tuple[str, str], list[ast.Call]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = str(path.relative_to(PACKAGE))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                name = node.func.id if isinstance(node.func, ast.Name) else (
                    node.func.attr if isinstance(node.func, ast.Attribute) else "")
                if name == "print" or (name == "write" and isinstance(node.func, ast.Attribute)):
                    found.setdefault((module, function.name), []).append(node)
    return found


def _calls_shown(module: str, function: str) -> bool:
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    (node,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "shown"
               for c in ast.walk(node))


def test_every_print_and_write_is_a_known_place():
    sites = set(_writes())
    unknown = sites - ESCAPING - CONSTANT - set(NOT_TERMINAL_TEXT)
    assert not unknown, (f"{sorted(unknown)} print or write to a stream: say it through Environment.progress/warn "
                         "(which escape it), or add the place here with why it is safe")
    assert sites >= ESCAPING | CONSTANT | set(NOT_TERMINAL_TEXT), "a listed place no longer writes: drop it here"


def test_each_escaping_place_calls_the_escape():
    assert [site for site in sorted(ESCAPING) if not _calls_shown(*site)] == []


def test_the_constant_places_write_only_constants():
    for site in CONSTANT:
        for call in _writes()[site]:
            assert all(isinstance(arg, ast.Constant) for arg in call.args), site


def _assert_safe(text: str) -> None:
    raw = sorted({c for c in text if not c.isprintable() and c != "\n"})
    assert raw == [], (raw, text)


def _hostile_report() -> Report:
    ref = ObjectRef("KVCachePoolBinding", HOSTILE, HOSTILE)
    report = Report("CheckReport", judged=[ref], headline=[HOSTILE, f"second {HOSTILE}"], lead=HOSTILE)
    from kubectl_kvdtype._kits.report import Column

    report.columns = [Column("NAME", "name"), Column("VERDICT", "verdict", status=True)]
    report.items = [{"name": HOSTILE, "verdict": HOSTILE}, {"name": "ok", "verdict": "ok"}]
    report.add("dtype-unknown", ref, HOSTILE)
    return report


def test_a_single_report_table_escapes_every_field():
    for output in ("table", "wide"):
        for color in (False, True):
            text = render(_hostile_report(), output, color=color)
            _assert_safe(re.sub(r"\x1b\[[0-9]+m", "", text))  # the colours _paint adds, and only those
            assert text.count("Fleet verdict: GO") == text.count("\\nFleet verdict: GO")


def test_a_fleet_table_escapes_every_context_error_and_line():
    fleet = FleetReport("preflight", [
        FleetMember(HOSTILE, ExitStatus.OK, report=_hostile_report()),
        FleetMember(f"down {HOSTILE}", ExitStatus.INCOMPLETE, error=HOSTILE),
    ])
    for output in ("table", "wide"):
        text = render_fleet(fleet, output)
        _assert_safe(text)
        verdicts = [line for line in text.splitlines() if line.startswith("Fleet verdict")]
        assert len(verdicts) == 1 and verdicts[0].startswith("Fleet verdict: INCOMPLETE"), text

"""A format carries its behaviour (issue 39): nothing outside ``_output`` asks a format's name, and
what a run does for a format (the empty message, the file lines, the writer it calls) follows
from its row, so a throwaway row added in-process is treated as its row says."""

from __future__ import annotations

import ast
import io

import pytest

from _support import EXAMPLES, ROOT
from kubectl_kvdtype._kits.env import Environment
from kubectl_kvdtype._kits.records import replace

pytestmark = pytest.mark.version_sensitive  # argparse: the runs parse a command line (test_tiers.py)

PACKAGE = ROOT / "kubectl_kvdtype"


def _strings(node: ast.AST) -> set[str]:
    """The string literals ``node`` is, or holds as a tuple, list or set (``in ("table", "wide")``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_strings(element) for element in node.elts))
    return set()


def _reads_the_output_flag(node: ast.AST) -> bool:
    """``node`` reads the ``-o`` value: anything called ``output`` (``options.output``, ``common.output``)."""
    return any(isinstance(n, ast.Name) and n.id == "output" or isinstance(n, ast.Attribute) and n.attr == "output"
               for n in ast.walk(node))


def _asks_a_format_name(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """Where ``tree`` asks which format a run has: a comparison with a format's name, or of the
    ``-o`` value with anything; a ``match`` on the ``-o`` value; a table looked up by it."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_strings(o) & names for o in operands) or any(_reads_the_output_flag(o) for o in operands):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Match) and _reads_the_output_flag(node.subject):
            found.append((node.lineno, f"match {ast.unparse(node.subject)}"))
        elif isinstance(node, ast.Subscript) and _reads_the_output_flag(node.slice):
            found.append((node.lineno, ast.unparse(node)))
    return found


def _format_names() -> set[str]:
    from kubectl_kvdtype._output.render import FORMATS

    return {f.name for f in FORMATS}


def test_no_module_outside_the_output_layer_asks_a_format_name():
    names = _format_names()
    asking = [f"{path.relative_to(PACKAGE)}:{line}: {text}"
              for path in sorted(PACKAGE.rglob("*.py")) if path.parent.name != "_output"
              for line, text in _asks_a_format_name(ast.parse(path.read_text(encoding="utf-8")), names)]
    assert asking == []


@pytest.mark.parametrize("source", [
    'if options.output == "sarif": pass',
    'shown = common.output in ("table", "wide")',
    'if "json" != output: pass',
    'match options.output:\n    case _: pass',
    'writer = WRITERS[options.output]',
    'if form.name in ["yaml", "json"]: pass',
])
def test_the_check_finds_each_way_of_asking(source):
    assert _asks_a_format_name(ast.parse(source), _format_names())


def test_the_check_lets_other_comparisons_be():
    source = 'if step.action == SETTING_OFF or kind in ("Pod", "Job"): verb = "patch"'
    assert _asks_a_format_name(ast.parse(source), _format_names()) == []


def _run(*args: str, formats) -> tuple[int, str, str]:
    from kubectl_kvdtype._cli.main import run

    out, err = io.StringIO(), io.StringIO()
    return run(list(args), Environment(stdout=out, stderr=err, environ={}), formats=formats), out.getvalue(), \
        err.getvalue()


def _with(row) -> tuple:
    from kubectl_kvdtype._output.render import FORMATS

    return (*FORMATS, row)


def test_every_row_writes_through_its_own_writer():
    """Each row's writer is found (the lazily imported modules and functions exist) and writes a
    report of a subcommand that takes the format."""
    from kubectl_kvdtype._cli.registry import judging
    from kubectl_kvdtype._output.format import EVERY, JUDGING
    from kubectl_kvdtype._output.render import FORMATS

    for form in FORMATS:
        command = [judging()[0]] if form.takes in (EVERY, JUDGING) else [form.takes]
        flags = [form.needs[1]] if form.needs else []
        status, out, err = _run(*command, *flags, "-f", str(EXAMPLES), "-o", form.name, formats=FORMATS)
        assert status == 1 and out.strip(), (form.name, err)


def test_a_tabular_row_says_an_empty_result_on_stderr_and_another_does_not(tmp_path):
    from kubectl_kvdtype._output.format import Format

    empty = tmp_path / "empty.yaml"
    empty.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    plain = Format("made-up", "a throwaway format", lambda report, _how: f"{len(report.items)} rows\n")
    for row, said in ((plain, False), (replace(plain, tabular=True), True)):
        status, out, err = _run("check", "-f", str(empty), "-o", "made-up", formats=_with(row))
        assert (status, out) == (0, "0 rows\n")
        assert ("No KVCachePoolBindings found" in err) is said, err


def test_a_row_that_locates_gets_the_file_and_line_of_each_finding():
    from kubectl_kvdtype._output.format import Format

    def lines(report, how) -> str:
        places = [how.locate(f) if how.locate else None for f in report.findings]
        return "".join(f"{p.path}:{p.line}\n" if p else "-\n" for p in places)

    row = Format("lines", "file:line per finding", lines)
    _, unlocated, _ = _run("check", "-f", str(EXAMPLES), "-o", "lines", formats=_with(row))
    assert set(unlocated.split()) == {"-"}
    _, located, err = _run("check", "-f", str(EXAMPLES), "-o", "lines", formats=_with(replace(row, locates=True)))
    places = located.split()
    assert places and all(p.split(":")[0].endswith(".yaml") and int(p.split(":")[1]) >= 1 for p in places), err

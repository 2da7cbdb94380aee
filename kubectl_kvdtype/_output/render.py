"""The one place that turns a ``Report`` into text: tables, wide tables, JSON and YAML (and, through
``_junit`` and ``_sarif``, JUnit XML and SARIF).

``FORMATS`` is the one table of the output formats: each row's name, writers, which subcommands
take it and its help. The ``-o`` help and choices (``_flags``), the check of which subcommand takes
which format (``_cli.main``), completion (``_cli.complete``) and the man page derive from it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from kubectl_kvdtype._kits.display import shown
from kubectl_kvdtype._kits.report import Column, FleetReport, Report

if TYPE_CHECKING:
    from kubectl_kvdtype._kits.report import Locate


@dataclass(frozen=True)
class Rendering:
    """How a report is written beyond its format: what every writer may read."""

    no_headers: bool = False
    all_namespaces: bool = True
    color: bool = False
    #: The subcommand that made the report (JUnit's testsuite, SARIF's rules).
    command: str = ""
    #: ``-o sarif`` with ``-f``: where each finding's object is in the files (None: no file lines).
    locate: Optional["Locate"] = None


#: ``Format.takes``: every subcommand, or the subcommands that judge objects (``_registry.judging``).
EVERY = "every"
JUDGING = "judging"


@dataclass(frozen=True)
class Format:
    """One ``-o`` format."""

    name: str
    #: What ``-o`` help says of it after its name (empty: the name alone says it).
    help: str
    #: The report as text.
    writer: Callable[[Report, Rendering], str]
    #: A fleet run (``--contexts``) as one document; None: a fleet run never takes it.
    fleet_writer: Optional[Callable[[FleetReport, Rendering], str]] = None
    #: ``EVERY``, ``JUDGING`` or one subcommand's name.
    takes: str = EVERY
    #: A flag of that subcommand (its dest, and as typed) without which the format is refused.
    needs: Optional[tuple[str, str]] = None
    #: The usage error's reason when refused (after ``-o NAME``).
    why: str = ""

    def taken_by(self, command: Optional[str], judging: Sequence[str], given: Callable[[str], bool]) -> bool:
        """Whether ``command`` (None: not named yet) takes this format, ``given`` saying which flags were."""
        if self.takes == JUDGING and command is not None and command not in judging:
            return False
        if self.takes not in (EVERY, JUDGING) and command != self.takes:
            return False
        return self.needs is None or given(self.needs[0])

    def users(self, judging: Sequence[str]) -> str:
        """Who takes it, as a usage error and ``-o`` help say it: ``check, find-flags`` or ``find-flags --fix``."""
        if self.takes == EVERY:
            return "every subcommand"
        names = ", ".join(judging) if self.takes == JUDGING else self.takes
        return f"{names} {self.needs[1]}" if self.needs else names


_RESET = "\033[0m"
_COLOURS = {
    "red": "\033[31m", "yellow": "\033[33m", "green": "\033[32m", "cyan": "\033[36m",
}
#: Words that carry a judgement get a colour on a terminal; everything else stays plain.
_WORD_COLOURS = {
    "error": "red", "rejected": "red", "missing": "red", "mismatch": "red", "flag": "red",
    "warning": "yellow", "unknown": "yellow", "auto": "yellow", "pending": "yellow",
    "not-judged": "yellow", "unmanaged": "cyan",
    "info": "cyan", "unused": "cyan", "ok": "green",
}


def render(report: Report, output: str, *, no_headers: bool = False, all_namespaces: bool = True,
           color: bool = False, command: str = "", locate: Optional["Locate"] = None,
           formats: Optional[Sequence[Format]] = None) -> str:
    """The report as the text printed on stdout (the result, and only the result), by ``output``'s
    writer in ``formats`` (default ``FORMATS``).

    ``command`` names the subcommand that made it (JUnit's testsuite, SARIF's rules); ``locate``, for
    ``-o sarif``, says where each finding's object is in the ``-f`` files (``_positions``; None: no file lines).
    """
    if report.text is not None:
        return report.text
    rendering = Rendering(no_headers=no_headers, all_namespaces=all_namespaces, color=color, command=command,
                          locate=locate)
    return format_named(output, formats).writer(report, rendering)


def render_fleet(fleet: FleetReport, output: str, *, no_headers: bool = False, all_namespaces: bool = True,
                 color: bool = False, formats: Optional[Sequence[Format]] = None) -> str:
    """A fleet run (``FleetReport``) as the text printed on stdout: one document for json, yaml,
    junit and sarif; tables with a CONTEXT column first, a line per context, then the fleet's."""
    writer = format_named(output, formats).fleet_writer
    if writer is None:
        raise ValueError(f"-o {output} has no form for a fleet run")
    return writer(fleet, Rendering(no_headers=no_headers, all_namespaces=all_namespaces, color=color))


def format_named(name: str, formats: Optional[Sequence[Format]] = None) -> Format:
    """The row of ``formats`` (default ``FORMATS``) called ``name``."""
    return next(f for f in (FORMATS if formats is None else formats) if f.name == name)


def _tables(report: Report, how: Rendering, wide: bool = False) -> str:
    return _render_tables(report, wide=wide, no_headers=how.no_headers, all_namespaces=how.all_namespaces,
                          color=how.color)


def _fleet_tables_of(fleet: FleetReport, how: Rendering, wide: bool = False) -> str:
    return _fleet_tables(fleet, wide=wide, no_headers=how.no_headers, all_namespaces=how.all_namespaces,
                         color=how.color)


def _yaml(report: Report, _how: Rendering) -> str:
    import yaml  # only this output pays for it

    if report.manifests:
        return yaml.safe_dump_all(report.manifests, sort_keys=False, default_flow_style=False)
    return yaml.dump(report.to_dict(), Dumper=_plain_dumper(yaml), sort_keys=False, default_flow_style=False)


def _fleet_yaml(fleet: FleetReport, _how: Rendering) -> str:
    import yaml

    return yaml.dump(fleet.to_dict(), Dumper=_plain_dumper(yaml), sort_keys=False, default_flow_style=False)


def _junit(report: Report, how: Rendering) -> str:
    from kubectl_kvdtype._output.junit import to_junit  # only this output pays for ElementTree

    return to_junit(report, how.command)


def _fleet_junit(fleet: FleetReport, _how: Rendering) -> str:
    from kubectl_kvdtype._output.junit import fleet_to_junit

    return fleet_to_junit(fleet)


def _sarif(report: Report, how: Rendering) -> str:
    from kubectl_kvdtype._output.sarif import to_sarif  # only this output pays for it

    return to_sarif(report, how.command, how.locate)


def _fleet_sarif(fleet: FleetReport, _how: Rendering) -> str:
    from kubectl_kvdtype._output.sarif import fleet_to_sarif

    return fleet_to_sarif(fleet)


def _patches(report: Report, _how: Rendering) -> str:
    """find-flags --fix: the JSON patches, one per object, for GitOps or kubectl patch."""
    return json.dumps(report.patches or [], indent=2) + "\n"


#: Every ``-o`` format, in the order ``-o`` help and completion list them; the first is the default.
FORMATS: tuple[Format, ...] = (
    Format("table", "", _tables, _fleet_tables_of),
    Format("wide", "", lambda r, how: _tables(r, how, wide=True), lambda f, how: _fleet_tables_of(f, how, wide=True)),
    Format("json", "", lambda r, _how: to_json(r.to_dict()), lambda f, _how: _fleet_json(f)),
    Format("yaml", "", _yaml, _fleet_yaml),
    Format("junit", "JUnit XML for CI test reports", _junit, _fleet_junit, takes=JUDGING,
           why="reports what a judging subcommand judged"),
    Format("sarif", "SARIF 2.1.0; with -f, file and line", _sarif, _fleet_sarif, takes=JUDGING,
           why="reports what a judging subcommand judged"),
    Format("patch", "the JSON patches", _patches, takes="find-flags", needs=("fix", "--fix"),
           why="prints the JSON patches that find-flags --fix plans"),
)


def _fleet_json(fleet: FleetReport) -> str:
    """Indented, or, past ``PRETTY_JSON_ENTRIES`` items and findings, each context's entry on one
    line; a report kept as its JSON text (``FleetMember.encode``) is written as that text."""
    document = fleet.to_dict()
    if not any(member.encoded is not None for member in fleet.members):
        entries = sum(len(entry.get("report", {}).get(key) or []) for entry in document["contexts"]
                      for key in ("items", "findings"))
        return json.dumps(document, indent=2) + "\n" if entries <= PRETTY_JSON_ENTRIES else to_json(document)
    contexts = []
    for member, entry in zip(fleet.members, document["contexts"], strict=True):
        fields = [f"{json.dumps(key)}: {json.dumps(value)}" for key, value in entry.items() if key != "report"]
        if member.encoded is not None:  # JSON text holds no raw line break: re-indenting it is safe
            fields.append('"report": ' + member.encoded.rstrip("\n").replace("\n", "\n      "))
        contexts.append("    {\n      " + ",\n      ".join(fields) + "\n    }")
    head = "".join(f"  {json.dumps(key)}: {json.dumps(document[key])},\n" for key in ("kind", "command"))
    summary = json.dumps(document["summary"], indent=2).replace("\n", "\n  ")
    return "{\n" + head + '  "contexts": [\n' + ",\n".join(contexts) + f'\n  ],\n  "summary": {summary}\n}}\n'


def _fleet_tables(fleet: FleetReport, *, wide: bool, no_headers: bool, all_namespaces: bool, color: bool) -> str:
    """Each of the subcommand's tables once, every context's rows in it (CONTEXT first, in the
    order the contexts were named), then one line per context and the fleet's."""
    checked = [m for m in fleet.members if m.report is not None]
    blocks = []
    first = checked[0].report if checked else None
    if first is not None:
        for index, section in enumerate(first.sections):
            if wide or not section.wide:
                rows = [(m.context, m.report.sections[index].rows) for m in checked
                        if m.report is not None and index < len(m.report.sections)]
                blocks.append(_context_table(section.columns, rows, wide, no_headers, all_namespaces, color))
        blocks.append(_context_table(first.columns, [(m.context, m.report.items) for m in checked
                                                     if m.report is not None],
                                     wide, no_headers, all_namespaces, color))
        if first.findings_table:
            findings = [[m.context, _paint(f.severity, color), f.code, str(f.object), f.message]
                        for m in checked if m.report is not None for f in m.report.findings]
            if findings:
                blocks.append(table(["CONTEXT", "SEVERITY", "CODE", "OBJECT", "MESSAGE"], findings, no_headers))
    blocks = [block for block in blocks if block]
    if not no_headers:
        blocks.append("".join(_context_lines(m.context, m.report.headline if m.report else f"error: {m.error}")
                              for m in fleet.members) + fleet.headline() + "\n")
    return "\n".join(blocks)


def _context_table(columns: list[Column], rows: list[tuple[str, list[dict]]], wide: bool, no_headers: bool,
                   all_namespaces: bool, color: bool) -> str:
    shown = _shown(columns, wide, all_namespaces)
    cells = [[context, *_row(shown, item, color)] for context, items in rows for item in items]
    return table(["CONTEXT"] + [c.header for c in shown], cells, no_headers) if cells else ""


def _context_lines(context: str, text: str) -> str:
    """A context's summary: its name, then its headline (a line each, indented under the first)."""
    lines = text.splitlines() or [""]
    indent = " " * (len(context) + 2)
    return f"{context}: {lines[0]}\n" + "".join(f"{indent}{line}\n" for line in lines[1:])


#: Up to this many items and findings a JSON report is indented throughout, like kubectl's. Past
#: it, each item and finding is one line: Python's indenting encoder is pure Python and ~8x
#: slower than the C one, which dominated big reports. Both are the same JSON to a parser.
PRETTY_JSON_ENTRIES = 1000


#: One encoder for every entry: ``json.dumps`` with separators builds a new one per call.
_ENTRY_ENCODER = json.JSONEncoder(separators=(", ", ": "))


def to_json(document: dict) -> str:
    """The JSON document: indented, or one entry per line when the report is large."""
    lists = [value for value in document.values() if isinstance(value, list)]
    if sum(len(value) for value in lists) <= PRETTY_JSON_ENTRIES:
        return json.dumps(document, indent=2) + "\n"
    encode = _ENTRY_ENCODER.encode
    fields = []
    for key, value in document.items():
        if isinstance(value, list) and value:
            entries = ",\n".join(["    " + encode(entry) for entry in value])
            fields.append(f"  {json.dumps(key)}: [\n{entries}\n  ]")
        else:
            fields.append(f"  {json.dumps(key)}: {encode(value)}")
    return "{\n" + ",\n".join(fields) + "\n}\n"


def _plain_dumper(yaml: Any) -> Any:
    """libyaml's emitter when PyYAML has it (the same text, several times faster on 10,000 items),
    never writing anchors and aliases: a report shares lists between an item and its finding (the
    occurrences), which a reader of ``-o yaml`` should see written out, as ``-o json`` has them."""
    base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    dumper: Any = type("PlainDumper", (base,), {"ignore_aliases": lambda self, data: True})
    dumper.add_representer(str, _str_without_surrogates)
    return dumper


_SURROGATE = re.compile("[\ud800-\udfff]")


def _str_without_surrogates(dumper: Any, text: str) -> Any:
    """A string as YAML, a lone surrogate (``"\\ud800"`` in a JSON manifest: no UTF-8 can carry
    it, and libyaml's emitter fails on it) written as its backslash escape, as tables show it."""
    if _SURROGATE.search(text):
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return dumper.represent_str(text)


def _render_tables(report: Report, *, wide: bool, no_headers: bool, all_namespaces: bool, color: bool) -> str:
    blocks = []
    for section in report.sections:
        if section.rows and (wide or not section.wide):
            blocks.append(_items_table(section.columns, section.rows, wide, no_headers, all_namespaces, color))
    if report.items:
        blocks.append(_items_table(report.columns, report.items, wide, no_headers, all_namespaces, color))
    if report.findings and report.findings_table:
        rows = [[_paint(f.severity, color), f.code, str(f.object), f.message] for f in report.findings]
        blocks.append(table(["SEVERITY", "CODE", "OBJECT", "MESSAGE"], rows, no_headers))
    if report.headline and not no_headers:
        # The headline is the subcommand's own lines (preflight's verdict has several): each is shown safely.
        blocks.append("\n".join(shown(line) for line in report.headline.split("\n")) + "\n")
    return "\n".join(blocks)


def _items_table(columns: list[Column], items: list[dict], wide: bool, no_headers: bool, all_namespaces: bool,
                 color: bool) -> str:
    shown = _shown(columns, wide, all_namespaces)
    return table([c.header for c in shown], [_row(shown, item, color) for item in items], no_headers)


def _shown(columns: list[Column], wide: bool, all_namespaces: bool) -> list[Column]:
    return [c for c in columns if (wide or not c.wide) and (all_namespaces or not c.namespace)]


def _row(shown: list[Column], item: dict, color: bool) -> list:
    return [_paint(c.cell(item), color) if c.status else c.cell(item) for c in shown]


def table(headers: list[str], rows: list[list], no_headers: bool = False) -> str:
    """A kubectl-style table: upper-case headers, left-aligned, columns three spaces apart.

    The same text as tabulate's "plain" format (which this falls back to for what it alone gets
    right: cells with line breaks, or characters whose printed width is not one column), written
    directly: tabulate's type sniffing of every cell took ~10 s of a 40,000-row table.
    """
    cells = [[_cell_text(value) for value in row] for row in rows]
    widths = _plain_widths([] if no_headers else headers, cells)
    if widths is None:
        return _tabulated(headers, cells, no_headers)
    lines = [] if no_headers else [_plain_line(headers, [len(h) for h in headers], widths)]
    lines += [_plain_line(row, [_visible_width(c) for c in row], widths) for row in cells]
    if lines and not lines[-1]:
        lines.pop()  # as tabulate's text read line by line: a blank last row leaves no line
    return "".join(line + "\n" for line in lines) or "\n"


#: What a cell may hold for ``table`` to lay it out itself: printable ASCII, plus the colour codes
#: ``_paint`` adds (``\033[31m``), which take no room on the terminal.
_COLOUR_CODE = re.compile(r"\x1b\[[0-9;]*m")


def _cell_text(value: object) -> str:
    # tabulate's rules with number parsing off: None is blank, the rest str(), outer blanks dropped;
    # then made safe to show (a newline in a dtype must not forge a row), unless _paint did that.
    if isinstance(value, _Painted):
        return value
    return "" if value is None else shown(str(value).strip())


def _visible_width(text: str) -> int:
    return len(_COLOUR_CODE.sub("", text)) if "\x1b" in text else len(text)


def _plain_widths(headers: list[str], rows: list[list[str]]) -> Optional[list[int]]:
    """Each column's width as tabulate's "plain" computes it (a header counts two more than its
    text), or None when a cell is not plain ASCII text."""
    columns = max([len(headers)] + [len(row) for row in rows])
    widths = [len(h) + 2 for h in headers] + [0] * (columns - len(headers))
    for row in rows:
        if len(row) != columns:
            return None
        for index, text in enumerate(row):
            visible = _COLOUR_CODE.sub("", text) if "\x1b" in text else text
            if not (visible.isascii() and visible.isprintable()):
                return None
            if len(visible) > widths[index]:
                widths[index] = len(visible)
    return widths


def _plain_line(cells: list[str], lengths: list[int], widths: list[int]) -> str:
    """One line: each cell padded to its column, two spaces between, no trailing blanks. The header
    line may have fewer cells than there are columns (``_plain_widths``): it ends at its last one."""
    padded = (cell + " " * (width - length) for cell, length, width in zip(cells, lengths, widths, strict=False))
    return "  ".join(padded).rstrip()


def _tabulated(headers: list[str], rows: list[list], no_headers: bool) -> str:
    from tabulate import tabulate

    text = tabulate(rows, headers=() if no_headers else headers, tablefmt="plain",
                    disable_numparse=True, stralign="left")
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


class _Painted(str):
    """A cell already made safe to show, with the colour codes ``_paint`` added around it."""


def _paint(value: object, color: bool) -> object:
    colour: Optional[str] = _WORD_COLOURS.get(str(value)) if color else None
    return _Painted(f"{_COLOURS[colour]}{shown(str(value).strip())}{_RESET}") if colour else value

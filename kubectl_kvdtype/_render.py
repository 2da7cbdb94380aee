"""The one place that turns a ``Report`` into text: tables, wide tables, JSON and YAML (and, through
``_junit`` and ``_sarif``, JUnit XML and SARIF)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Optional

from kubectl_kvdtype._display import shown
from kubectl_kvdtype._report import Column, Report

if TYPE_CHECKING:
    from kubectl_kvdtype._sarif import Locate

OUTPUTS = ("table", "wide", "json", "yaml", "junit", "sarif", "patch")

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
           color: bool = False, command: str = "", locate: Optional["Locate"] = None) -> str:
    """The report as the text printed on stdout (the result, and only the result).

    ``command`` names the subcommand that made it (JUnit's testsuite, SARIF's rules); ``locate``, for
    ``-o sarif``, says where each finding's object is in the ``-f`` files (``_positions``; None: no file lines).
    """
    if report.text is not None:
        return report.text
    if output == "json":
        return to_json(report.to_dict())
    if output == "junit":
        from kubectl_kvdtype._junit import to_junit  # only this output pays for ElementTree

        return to_junit(report, command)
    if output == "sarif":
        from kubectl_kvdtype._sarif import to_sarif  # only this output pays for it

        return to_sarif(report, command, locate)
    if output == "patch":  # find-flags --fix: the JSON patches, one per object, for GitOps or kubectl patch
        return json.dumps(report.patches or [], indent=2) + "\n"
    if output == "yaml":
        import yaml  # only this output pays for it

        if report.manifests:
            return yaml.safe_dump_all(report.manifests, sort_keys=False, default_flow_style=False)
        return yaml.dump(report.to_dict(), Dumper=_plain_dumper(yaml), sort_keys=False, default_flow_style=False)
    return _render_tables(report, wide=output == "wide", no_headers=no_headers,
                          all_namespaces=all_namespaces, color=color)


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
    return type("PlainDumper", (base,), {"ignore_aliases": lambda self, data: True})


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
    shown = [c for c in columns if (wide or not c.wide) and (all_namespaces or not c.namespace)]
    rows = [[_paint(c.cell(item), color) if c.status else c.cell(item) for c in shown] for item in items]
    return table([c.header for c in shown], rows, no_headers)


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

"""``-o table`` and ``-o wide``: a report as kubectl-style tables for a person, coloured on a
terminal; a fleet run's with a CONTEXT column first, then a line per context and the fleet's."""

from __future__ import annotations

import re
from typing import Optional

from kubectl_kvdtype._kits.display import shown
from kubectl_kvdtype._kits.report import Column, FleetReport, Report
from kubectl_kvdtype._output.format import Rendering

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


def write_table(report: Report, how: Rendering) -> str:
    return _render_tables(report, how, wide=False)


def write_wide(report: Report, how: Rendering) -> str:
    return _render_tables(report, how, wide=True)


def write_fleet_table(fleet: FleetReport, how: Rendering) -> str:
    return _fleet_tables(fleet, how, wide=False)


def write_fleet_wide(fleet: FleetReport, how: Rendering) -> str:
    return _fleet_tables(fleet, how, wide=True)


def _fleet_tables(fleet: FleetReport, how: Rendering, wide: bool) -> str:
    """Each of the subcommand's tables once, every context's rows in it (CONTEXT first, in the
    order the contexts were named), then one line per context and the fleet's."""
    no_headers, all_namespaces, color = how.no_headers, how.all_namespaces, how.color
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
        blocks.append("".join(_context_lines(m.context, m.report.summary_lines() if m.report else [f"error: {m.error}"])
                              for m in fleet.members) + shown(fleet.headline()) + "\n")
    return "\n".join(blocks)


def _context_table(columns: list[Column], rows: list[tuple[str, list[dict]]], wide: bool, no_headers: bool,
                   all_namespaces: bool, color: bool) -> str:
    shown = _shown(columns, wide, all_namespaces)
    cells = [[context, *_row(shown, item, color)] for context, items in rows for item in items]
    return table(["CONTEXT"] + [c.header for c in shown], cells, no_headers) if cells else ""


def _context_lines(context: str, lines: list[str]) -> str:
    """A context's summary: its name, then its headline (a line each, indented under the first),
    every string shown safely: a context's name or a cluster's message is one line, whatever it holds."""
    name = shown(context)
    lines = [shown(line) for line in lines] or [""]
    indent = " " * (len(name) + 2)
    return f"{name}: {lines[0]}\n" + "".join(f"{indent}{line}\n" for line in lines[1:])


def _render_tables(report: Report, how: Rendering, wide: bool) -> str:
    no_headers, all_namespaces, color = how.no_headers, how.all_namespaces, how.color
    blocks = []
    for section in report.sections:
        if section.rows and (wide or not section.wide):
            blocks.append(_items_table(section.columns, section.rows, wide, no_headers, all_namespaces, color))
    if report.items:
        blocks.append(_items_table(report.columns, report.items, wide, no_headers, all_namespaces, color))
    if report.findings and report.findings_table:
        rows = [[_paint(f.severity, color), f.code, str(f.object), f.message] for f in report.findings]
        blocks.append(table(["SEVERITY", "CODE", "OBJECT", "MESSAGE"], rows, no_headers))
    lines = report.summary_lines()
    if lines and not no_headers:
        # The headline is the subcommand's own lines (preflight's verdict has several): each is shown safely,
        # a line break inside one (a cluster's string) escaped, never a line of its own.
        blocks.append("".join(shown(line) + "\n" for line in lines))
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

"""The block YAML that kubectl writes, read without PyYAML.

Nearly every kubeconfig is YAML, and kubectl, kind, minikube and the clouds' CLIs write it the
same plain way: block mappings and sequences of plain or quoted strings, a few booleans and nulls,
``{}``. Reading one costs a few hundred microseconds; importing PyYAML to read it costs about
fifteen milliseconds of every run. :func:`loads_block_mapping` reads that plain subset and gives
exactly what the YAML reader (``_sources/yamlread``, PyYAML's safe loader) gives; for any text it
is not sure of, it gives None and the YAML reader reads it, with its errors in its own words.

Not sure of means: anything but spaces, printable ASCII and line breaks; a second document, a
directive, an anchor, alias, tag, block or flow scalar (``|``, ``>``, ``[a]``), a plain scalar
YAML 1.1 could read as something else than a string (``yes``, ``010``, ``1:20``, ``2024-01-01``,
anything starting with a digit, a sign or an indicator), a scalar over more than one line, a
quoted key, a repeated key, an indentation it cannot follow, or nesting deeper than ``limit``.
``tests/test_blockyaml.py`` compares it with the YAML reader on generated documents.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from kubectl_kvdtype._kits.bounded import MAX_DEPTH

#: The plain scalars PyYAML's resolver reads as booleans and nulls (YAML 1.1); other plain words
#: starting with a letter are strings (its int, float, timestamp, merge and value rules all need
#: a digit, a sign, a dot, ``<`` or ``=`` first).
_WORDS: dict[str, Any] = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
    **dict.fromkeys(("null", "Null", "NULL"), None),
}
#: A plain scalar read as a string: a letter or ``/`` first, or a dash then a letter or dash
#: (``--region``: never a number); no ``: `` or `` #`` inside (a mapping, a comment).
_PLAIN = re.compile(r"(?:[A-Za-z/]|-[-A-Za-z])[ -~]*")
#: A mapping key as kubeconfigs write them.
_KEY = re.compile(r"([A-Za-z][-A-Za-z0-9_./]*):(?: +(.*))?")
#: A single-quoted scalar on one line (``''`` is a quote), then nothing or a comment.
_SINGLE = re.compile(r"'((?:[^']|'')*)'(?: +#.*)?")
#: A double-quoted scalar on one line without escapes, then nothing or a comment.
_DOUBLE = re.compile(r'"([^"\\]*)"(?: +#.*)?')
_EMPTY_FLOW = {"{}": dict, "[]": list}


class _Unsure(Exception):
    """Text outside the subset: the YAML reader reads it instead."""


def loads_block_mapping(text: str, limit: int = MAX_DEPTH) -> Optional[dict[str, Any]]:
    """The one mapping ``text`` holds, as the YAML reader reads it; None where it is not sure."""
    if not text.isascii() or not (text.replace("\n", "")).isprintable():
        return None
    try:
        lines = _significant(text)
        if not lines or lines[0][0] != 0 or _is_entry(lines[0][1]):
            return None  # nothing, an indented top level, a sequence
        reader = _Reader(lines, limit)
        document = reader.block(0, 1)
        if reader.at != len(lines):
            return None
    except _Unsure:
        return None
    return document if isinstance(document, dict) else None


def _significant(text: str) -> list[tuple[int, str]]:
    """(indent, content) of each line that is neither blank nor a comment; a leading ``---`` dropped."""
    lines = []
    for number, raw in enumerate(text.split("\n")):
        content = raw.lstrip(" ")
        if not content or content.startswith("#"):
            continue
        if number == 0 and content.rstrip() == "---" and raw == content:
            continue
        if content.startswith(("---", "...", "%")) and raw == content:
            raise _Unsure()  # another document, its end, a directive
        lines.append((len(raw) - len(content), content.rstrip(" ")))
    return lines


def _is_entry(content: str) -> bool:
    return content == "-" or content.startswith("- ")


class _Reader:
    """A cursor over the significant lines; each method reads one node at an indentation."""

    def __init__(self, lines: list[tuple[int, str]], limit: int) -> None:
        self.lines, self.limit, self.at = lines, limit, 0

    def block(self, indent: int, depth: int) -> Any:
        if depth > self.limit:
            raise _Unsure()
        if _is_entry(self.lines[self.at][1]):
            return self.sequence(indent, depth)
        return self.mapping(indent, depth)

    def mapping(self, indent: int, depth: int) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        while self.at < len(self.lines) and self.lines[self.at][0] == indent:
            content = self.lines[self.at][1]
            if _is_entry(content):
                break
            match = _KEY.fullmatch(content)
            if match is None or match.group(1) in _WORDS or match.group(1) in mapping:
                raise _Unsure()
            self.at += 1
            mapping[match.group(1)] = self.value(match.group(2), indent, depth)
        self.check_dedent(indent)
        return mapping

    def sequence(self, indent: int, depth: int) -> list[Any]:
        sequence = []
        while self.at < len(self.lines) and self.lines[self.at][0] == indent and _is_entry(self.lines[self.at][1]):
            rest = self.lines[self.at][1][1:]
            inline = rest.lstrip(" ")
            if _is_entry(inline) or (inline and _KEY.fullmatch(inline)):
                # "- key: value", "- - item": a mapping or a sequence lined up after the dash
                self.lines[self.at] = (indent + 1 + len(rest) - len(inline), inline)
                sequence.append(self.block(self.lines[self.at][0], depth + 1))
                continue
            self.at += 1
            sequence.append(self.value(inline or None, indent, depth, in_sequence=True))
        self.check_dedent(indent)
        return sequence

    def value(self, text: Optional[str], indent: int, depth: int, in_sequence: bool = False) -> Any:
        """A key's or an entry's value: ``text`` on its own line, else the block below it."""
        if text is not None and not text.startswith("#"):
            scalar = _scalar(text)
            if self.at < len(self.lines) and self.lines[self.at][0] > indent:
                raise _Unsure()  # the scalar goes on over the next line
            return scalar
        if self.at < len(self.lines):
            below, content = self.lines[self.at]
            if below > indent or (below == indent and _is_entry(content) and not in_sequence):
                return self.block(below, depth + 1)
        return None

    def check_dedent(self, indent: int) -> None:
        """The node at ``indent`` ended: what follows is less indented, or the end."""
        if self.at < len(self.lines) and self.lines[self.at][0] > indent:
            raise _Unsure()


def _scalar(text: str) -> Any:
    """A scalar on one line: quoted, ``{}``/``[]``, or a plain word or string."""
    if text in _EMPTY_FLOW:
        return _EMPTY_FLOW[text]()
    if text[0] == "'":
        single = _SINGLE.fullmatch(text)
        if single is None:
            raise _Unsure()
        return single.group(1).replace("''", "'")
    if text[0] == '"':
        double = _DOUBLE.fullmatch(text)
        if double is None:
            raise _Unsure()
        return double.group(1)
    plain = text.split(" #", 1)[0].rstrip(" ")
    if plain in _WORDS:
        return _WORDS[plain]
    if not _PLAIN.fullmatch(plain) or ": " in plain or plain.endswith(":"):
        raise _Unsure()
    return plain

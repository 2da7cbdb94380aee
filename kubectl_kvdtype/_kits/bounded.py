"""The one bounded reader of structured text: JSON no deeper than ``MAX_DEPTH``.

Every structure the plugin parses comes from someone else: a manifest, an API answer or error
body, a kubeconfig, an engine table file, a journal, an annotation holding JSON. Nested deep
enough, it ends Python's own parser in ``RecursionError`` (``json`` recurses in C per level), or,
parsed, whatever walks it (a copy, a YAML dump of a backup, a comparison). So it is refused
before it is parsed: JSON text is scanned for its nesting first (:func:`too_deep`), without
recursion and in a few passes of C-speed byte operations, and YAML is checked on its parse
events (``_sources/yamlread``, with the alias-expansion limit). Past the limit: one sentence
(:class:`TooDeep`, a ``ValueError`` so that every reader's "cannot be read" handling applies),
said by the caller with what it was reading, and its exit status.

A Kubernetes object nests about 10 levels, a CRD's schema a few dozen: ``MAX_DEPTH`` leaves room
for both, and keeps what walks a parsed object far from Python's recursion limit.

JSON is YAML: :func:`loads_as_yaml` reads a JSON object as the YAML reader would, by the JSON
parser, and leaves to the YAML reader whatever the two could read differently.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional, Union

#: The deepest nesting of mappings and lists read, in any input.
MAX_DEPTH = 100

_KEPT = b'"[]{}'
_OTHER_BYTES = bytes(b for b in range(256) if b not in _KEPT)
#: What can follow a backslash in JSON text (``\\"``, ``\\\\``, ``\\/``, ``\\n``, ``\\u00e9``...): kept
#: through the first reduction of a text with escapes, the letters as ``_``, so that each escape
#: stays a pair (a backslash and what it escapes) while the rest of the text is dropped.
_ESCAPED = b"/bfnrtu"
_MARK_ESCAPED = bytes.maketrans(_ESCAPED, b"_" * len(_ESCAPED))
_OTHER_THAN_ESCAPES = bytes(b for b in range(256) if b not in _KEPT + b"\\" + _ESCAPED)


class TooDeep(ValueError):
    """Structured text nested deeper than the limit: ``str()`` is the sentence to show."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"it is nested more than {limit} levels deep, deeper than any Kubernetes object")
        self.limit = limit


def too_deep(text: Union[str, bytes], limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON ``text`` nests mappings and lists more than ``limit`` levels deep
    (brackets inside strings do not count). Linear and cheap: no Python loop over the text.

    The text is reduced to its structure: escaped backslashes and quotes removed, then every byte
    but quotes and brackets, then every string (a pair of quotes and the brackets between), so
    that only the brackets outside strings remain; each pass then removes every innermost pair,
    and more than ``limit`` passes mean deeper than ``limit``. Text that is not JSON gets an
    answer too (the parser then refuses it in its own words)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if len(data) < 64 * limit and data.count(b"[") + data.count(b"{") <= limit:  # an annotation, an error body
        return False
    if b"\\" in data:  # escapes undone on the text reduced to them and the structure: a small share of it
        data = data.translate(_MARK_ESCAPED, _OTHER_THAN_ESCAPES)
        data = data.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    structure = data.translate(None, _OTHER_BYTES).replace(b'""', b"")
    if b'"' in structure:  # strings holding brackets (a JSON document inside an annotation): drop them
        structure = b"".join(structure.split(b'"')[::2])
    structure = structure.replace(b"{", b"[").replace(b"}", b"]")
    if b"[" * (limit + 1) in structure:  # the plain case of a hostile input, found in one search
        return True
    for _ in range(limit):
        shorter = structure.replace(b"[]", b"")
        if not shorter or len(shorter) == len(structure):  # done, or brackets that never close: not JSON
            return False
        structure = shorter
    return bool(structure)


def loads(text: Union[str, bytes], limit: int = MAX_DEPTH, **hooks: Any) -> Any:
    """``json.loads(text, **hooks)``, refusing text nested deeper than ``limit`` (:class:`TooDeep`)."""
    if too_deep(text, limit):
        raise TooDeep(limit)
    try:
        return json.loads(text, **hooks)
    except RecursionError:  # cannot happen after the scan; kept so that it can never be a traceback
        raise TooDeep(limit) from None


#: A JSON object's text, from its first non-blank character.
_JSON_OBJECT = re.compile(r"[ \t\n\r]*\{")
#: What in JSON text libyaml reads otherwise than ``json`` does, or refuses: a character it refuses
#: (DEL, C1 controls, a lone surrogate, U+FFFE, U+FFFF) or reads as a line break (NEL, LS, PS); a
#: surrogate's escape (libyaml refuses one, ``json`` joins a pair into one character); a key parted
#: from its colon by a line break, or by 100 blanks (a YAML key ends at its line, and at 1024
#: characters: with keys of at most ``_LONGEST_KEY`` characters, fewer blanks keep within it).
_READ_OTHERWISE = re.compile(r"[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]"
                             r'|\\u[dD][89a-fA-F]|"[ \t]*[\r\n][ \t\r\n]*:|[ \t]{100}')
#: The longest key read as JSON: escaped, at most six times as long in the text (``\u00e9``).
_LONGEST_KEY = 150


class _ReadOtherwise(ValueError):
    """A value YAML reads otherwise: a number with an exponent (YAML 1.1 reads ``1e5`` as a string),
    ``NaN``, ``Infinity`` (``json``'s own extension), or a key too long for a YAML key."""


def _fraction(token: str) -> float:
    if "e" in token or "E" in token:
        raise _ReadOtherwise(token)
    return float(token)


def _constant(token: str) -> Any:
    raise _ReadOtherwise(token)


def _mapping(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if any(len(key) > _LONGEST_KEY for key, _ in pairs):
        raise _ReadOtherwise("a long key")
    return dict(pairs)  # a repeated key: its first place, its last value, as YAML reads it


def loads_as_yaml(text: str, limit: int = MAX_DEPTH) -> Optional[dict[str, Any]]:
    """The JSON object ``text`` exactly as the YAML reader (``_sources/yamlread``) reads it, without
    importing PyYAML (~20 ms): JSON is YAML, and a kubeconfig or a manifest is often JSON (``kubectl
    config view -o json``, generated ones). None for any text that is not a JSON object or that
    YAML could read otherwise (see ``_READ_OTHERWISE``, ``_ReadOtherwise``): nested too deep or not
    JSON, the YAML reader then reads it, and says what is wrong in its own words."""
    if not _JSON_OBJECT.match(text) or _READ_OTHERWISE.search(text):
        return None
    try:
        document = loads(text, limit, parse_float=_fraction, parse_constant=_constant, object_pairs_hook=_mapping)
    except ValueError:  # not JSON (JSONDecodeError), TooDeep, _ReadOtherwise
        return None
    return document if isinstance(document, dict) else None


class ExcessiveAliasing(ValueError):
    """YAML whose aliases expand it far beyond its own size (a "billion laughs" document), or an
    anchor holding an alias to itself: refused as kubectl refuses it, in its words."""

    def __init__(self, anchor: str = "") -> None:
        super().__init__(f"anchor {anchor!r} value contains itself" if anchor else
                         "document contains excessive aliasing (its YAML aliases would expand it far beyond its "
                         "own size)")


def _allowed_alias_ratio(decoded: int) -> float:
    """The share of a document's nodes that may come from aliases, by its size: go-yaml's rule
    (``allowedAliasRatio``), which kubectl applies: 99% for a small document, down to 10% past 4
    million nodes."""
    low, high = 400_000, 4_000_000
    if decoded <= low:
        return 0.99
    if decoded >= high:
        return 0.10
    return 0.99 - 0.89 * (decoded - low) / (high - low)


def excessive_aliasing(decoded: int, aliased: int) -> bool:
    """Whether a document that decoded ``decoded`` nodes, ``aliased`` of them through aliases, is
    refused (go-yaml's test, run at every node: kubectl's ``document contains excessive aliasing``)."""
    return aliased > 100 and decoded > 1000 and aliased / decoded > _allowed_alias_ratio(decoded)

"""Where the objects read with ``-f`` are in their files: the line each starts on, and the line of
a field in it. Only ``-o sarif`` asks (a result points at a file and a line).

The ordinary ``-f`` read (``_sources.manifests``) keeps no positions: it loads JSON with ``json`` and YAML
with libyaml's loader, the fastest way there is. This is a second read, made only for ``-o sarif``
and only of the files that hold an object a finding is about. YAML is composed by the same loader
(its nodes carry start and end marks), and each object identified from its own nodes, building
only its apiVersion, kind and metadata. A file ``-f`` read as JSON is walked with ``json``'s own
decoder (libyaml refuses some valid JSON: an escaped surrogate pair, a raw C1 control character),
and an object's nodes are built by a small scanner only when a finding asks about it. Objects are
identified as ``_sources.manifests`` identifies them, ``kind: List`` items each on their own, and the copy
read last is the one judged, so a line is always the judged copy's. Lines count from 1 and break at
newlines only, as editors and code-scanning views count them.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Callable, Iterator, Optional

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kubectl_kvdtype._kits.report import FieldPath, Finding, ObjectRef, Place
from kubectl_kvdtype._kits.status import ManifestError
from kubectl_kvdtype._sources import manifests as _manifests
from kubectl_kvdtype._sources.manifests import ManifestSource, ObjectKey

__all__ = ["Locator", "ObjectSpan", "field_line", "object_spans"]

_STDIN = "-"


class ObjectSpan:
    """One object in a file: its first and last line (1-based) and its node, for its fields (a
    JSON object's node is built when first asked for: most objects are never asked about)."""

    __slots__ = ("key", "line", "end_line", "_node", "_build")

    def __init__(self, key: ObjectKey, line: int, end_line: int, node: Optional[Node] = None,
                 build: Optional[Callable[[], Node]] = None) -> None:
        self.key, self.line, self.end_line = key, line, end_line
        self._node, self._build = node, build

    @property
    def node(self) -> Node:
        if self._node is None:
            assert self._build is not None
            self._node = self._build()
        return self._node


class Locator:
    """``locator(ref, field_path)``: the Place of a finding's object in the ``-f`` input, or None
    (the object came from standard input, or from no file). Files are parsed once, when first
    asked about; a file that cannot be parsed again is named without a line, and said once."""

    def __init__(self, source: ManifestSource) -> None:
        self._source = source
        self._files: dict[str, Optional[dict[ObjectKey, ObjectSpan]]] = {}
        #: Said on stderr: files whose lines could not be found.
        self.warnings: list[str] = []

    def __call__(self, ref: ObjectRef, field_path: Optional[FieldPath] = None) -> Optional[Place]:
        where = self._source.origin(ref.kind, ref.namespace, ref.name)
        if not where or where == _STDIN:
            return None
        spans = self._spans(where)
        if spans is None:
            return Place(where)
        span = spans.get((ref.kind, ref.namespace or "", ref.name)) or spans.get((ref.kind, "", ref.name))
        if span is None:
            return Place(where)
        return Place(where, span.line, span.end_line, field_line(span.node, field_path) if field_path else None)

    def locate(self, finding: Finding) -> Optional[Place]:
        return self(finding.object, finding.field_path)

    def _spans(self, path: str) -> Optional[dict[ObjectKey, ObjectSpan]]:
        if path not in self._files:
            try:
                content = _manifests.read_text(path, self._source.max_file_bytes)
                self._files[path] = {span.key: span for span in object_spans(content)}
            except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError, RecursionError, ManifestError) as error:
                self.warnings.append(f"cannot find the lines of the objects in {path} again ({_reason(error)}): "
                                     "its SARIF results name the file without a line")
                self._files[path] = None
        return self._files[path]


def _reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or getattr(error, "problem", None) or str(error) or type(error).__name__


# --- Objects and their spans ----------------------------------------------------------------

def object_spans(content: str) -> Iterator[ObjectSpan]:
    """Every object of a manifest's text, in order, as ``_sources.manifests`` reads it (List items unrolled;
    a later copy of an object in the same text comes later, so a dict of them keeps the last)."""
    if _manifests.looks_like_json(content):
        try:
            spans = _JsonObjects(content).spans()
        except ValueError:
            pass  # not JSON after all: -f reads it as YAML too
        else:
            yield from spans
            return
    yield from _yaml_spans(content)


# --- YAML -----------------------------------------------------------------------------------

def _yaml_spans(content: str) -> Iterator[ObjectSpan]:
    """Each document composed into nodes; an object is identified from its own nodes, building
    only its apiVersion, kind and metadata (as the loader would build them)."""
    content = content[1:] if content.startswith("\ufeff") else content  # so that marks count from the text's start
    lines = _Lines(content) if any(c in content for c in _YAML_ONLY_BREAKS) else None
    loader = _manifests.YAML_LOADER(content)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # check_node said there is one; never None
                break
            if lines is not None:
                lines.remark(node)
            yield from _yaml_objects(loader, node)
    finally:
        loader.dispose()


#: Characters YAML counts as line breaks (so do PyYAML's marks) where editors and code-scanning
#: views count only "\n" (the text is read with universal newlines: a CRLF is one "\n").
_YAML_ONLY_BREAKS = "\x85\u2028\u2029"
_IDENTITY = ("apiVersion", "kind", "metadata")


def _yaml_objects(loader: Any, node: Node) -> Iterator[ObjectSpan]:
    """``_sources.manifests._objects`` over a document's node: a ``kind: *List`` unrolled, an object
    kept when it has a kind."""
    if not isinstance(node, MappingNode) or node.tag != _MAP:
        return  # the loader makes no dict of it
    if any(key.tag == _MERGE for key, _ in node.value):
        # Building it merges the ``<<`` entries into the node itself, the way this PyYAML merges
        # (which has changed between versions): then its own entries are all there is to read.
        loader.construct_document(node)
    pairs = {name: _entry(node, name, depth=0) for name in _IDENTITY}
    identity = loader.construct_document(MappingNode(_MAP, [pair for pair in pairs.values() if pair]))
    items = _entry(node, "items", depth=0)
    if items is not None and isinstance(items[1], SequenceNode) and str(identity.get("kind", "")).endswith("List"):
        if items[1].tag == _SEQ:  # (an !!omap or !!pairs list holds no objects)
            for item in items[1].value:
                yield from _yaml_objects(loader, item)
    elif pairs["kind"] is not None:
        key = _manifests.object_key(identity)
        if key is not None:
            yield ObjectSpan(key, node.start_mark.line + 1, _end_line(node), node)


def _end_line(node: Node) -> int:
    """The last line (1-based) a node's text is on. A block collection's end mark is where the next
    token starts, lines later perhaps, so its last entry's end is read instead; an entry that is an
    alias (its text elsewhere, earlier) ends with its key."""
    first = node.start_mark.line
    while isinstance(node, (MappingNode, SequenceNode)) and not node.flow_style and node.value:
        last = node.value[-1]
        if isinstance(node, MappingNode):
            key, value = last
            node = key if value.start_mark.line < key.start_mark.line else value
        elif last.start_mark.line >= node.start_mark.line:
            node = last
        else:
            break
    mark = node.end_mark
    # An end mark at a line's start (a block scalar's final line break) ends on the line before.
    end = mark.line if mark.column == 0 and mark.line > node.start_mark.line else mark.line + 1
    return max(end, first + 1)


# --- Fields ---------------------------------------------------------------------------------

def field_line(node: Node, path: FieldPath) -> Optional[int]:
    """The line (1-based) of the field at ``path`` under ``node``: a scalar's own line, the key's
    line for a mapping or list. When the path goes further than the object does, the line of the
    deepest part that exists; None when not even its first step does."""
    line = None
    for step in path:
        found = _child(node, step)
        if found is None:
            break
        node, line = found
    return None if line is None else line + 1


def _child(node: Node, step: object) -> Optional[tuple[Node, int]]:
    """(child node, 0-based line that shows it), or None."""
    if isinstance(node, SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
        child = node.value[step]
        return child, child.start_mark.line
    if isinstance(node, MappingNode) and isinstance(step, str):
        pair = _entry(node, step, depth=0)
        if pair is not None:
            key, value = pair
            return value, (value if isinstance(value, ScalarNode) else key).start_mark.line
    return None


def _entry(node: MappingNode, key: str, depth: int) -> Optional[tuple[Node, Node]]:
    """The (key, value) nodes of ``key``: the last one written (the loader keeps the last), else
    one merged in with ``<<``."""
    for key_node, value in reversed(node.value):
        if isinstance(key_node, ScalarNode) and key_node.value == key and key_node.tag != _MERGE:
            return key_node, value
    if depth > 20:
        return None
    for key_node, value in reversed(node.value):
        if isinstance(key_node, ScalarNode) and key_node.tag == _MERGE:
            for merged in (value.value if isinstance(value, SequenceNode) else [value]):
                pair = _entry(merged, key, depth + 1) if isinstance(merged, MappingNode) else None
                if pair is not None:
                    return pair
    return None


_MERGE = "tag:yaml.org,2002:merge"


# --- JSON -------------------------------------------------------------------------------------

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


class _Mark(yaml.Mark):
    """The part of a YAML mark the walk reads (line and column; the rest of a ``yaml.Mark`` is for
    the loader's error messages, which a JSON node built here never gives)."""

    def __init__(self, line: int, column: int) -> None:  # no super().__init__: nothing else is read
        self.line = line
        self.column = column


class _Lines:
    """Line and column of a position in a text, lines counted by "\n" only.

    Asked in text order (as the walks below ask), it counts each stretch of the text once, so a
    big dump costs one pass and no table of its line breaks; asked backwards, it counts again from
    where it was anchored (the start of the text, or of one object)."""

    def __init__(self, text: str, index: int = 0, line: int = 0, column: int = 0) -> None:
        self._text = text
        self._anchor = (index, line, index - column)
        self._index, self._line, self._line_start = self._anchor

    def mark(self, index: int) -> _Mark:
        if index < self._index:
            self._index, self._line, self._line_start = self._anchor if index >= self._anchor[0] else (0, 0, 0)
        text = self._text
        self._line += text.count("\n", self._index, index)
        last_break = text.rfind("\n", self._index, index)
        if last_break >= 0:
            self._line_start = last_break + 1
        self._index = index
        return _Mark(self._line, index - self._line_start)

    def remark(self, root: Node) -> None:
        """Replace the marks of every node under ``root`` (an alias's node once) by "\n"-counted
        ones, for a YAML text whose marks also counted other line breaks."""
        nodes: dict[int, Node] = {}
        pending = [root]
        while pending:
            node = pending.pop()
            if id(node) in nodes:
                continue
            nodes[id(node)] = node
            if isinstance(node, MappingNode):
                pending += [part for pair in node.value for part in pair]
            elif isinstance(node, SequenceNode):
                pending += node.value
        indexes = sorted({m.index for node in nodes.values() for m in (node.start_mark, node.end_mark)})
        marks = {index: self.mark(index) for index in indexes}  # in text order: one pass
        for node in nodes.values():
            node.start_mark, node.end_mark = marks[node.start_mark.index], marks[node.end_mark.index]


class _JsonObjects:
    """The objects of JSON text with their spans, read as ``json.loads`` reads it (its own C
    decoder reads every value), walking by hand only the ``kind: *List`` objects around them.
    An item is identified as soon as it is read, then dropped: a big dump is not held twice."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._lines = _Lines(text)
        self._decode = json.JSONDecoder().raw_decode
        self._scanstring = json.decoder.scanstring  # type: ignore[attr-defined]

    def spans(self) -> list[ObjectSpan]:
        start = self._skip(0)
        items: Optional[list] = None
        if self._text.startswith("{", start):
            document, end, items = self._mapping(start)
        else:
            document, end = self._decode(self._text, start)
        if self._skip(end) != len(self._text):
            raise ValueError(f"extra data at offset {end}")
        return self._objects(document, start, end, items)

    def _objects(self, document: object, start: int, end: int, items: Optional[list]) -> list[ObjectSpan]:
        """``_sources.manifests._objects`` over one value; ``items``: the spans of each entry of its
        ``items`` array when already walked."""
        if not isinstance(document, dict):
            return []
        if isinstance(document.get("items"), list) and str(document.get("kind", "")).endswith("List"):
            if items is None:  # a List inside a List: walk it too
                _, _, items = self._mapping(start)
            return [span for entry in items or [] for span in entry]
        if "kind" not in document:
            return []
        key = _manifests.object_key(document)
        if key is None:
            return []
        first = self._lines.mark(start)
        return [ObjectSpan(key, first.line + 1, self._lines.mark(end - 1).line + 1,
                           build=functools.partial(self._node, start, first))]

    def _node(self, start: int, mark: _Mark) -> Node:
        return JsonScanner(self._text, _Lines(self._text, start, mark.line, mark.column)).node_at(start)

    def _skip(self, index: int) -> int:
        return _WHITESPACE.match(self._text, index).end()  # type: ignore[union-attr]

    def _mapping(self, start: int) -> tuple[dict, int, Optional[list]]:
        """An object's value, its end, and when its last ``items`` is an array, the spans each of
        its entries holds (an ``items`` value is kept only as a list of as many)."""
        text = self._text
        found: dict = {}
        items: Optional[list] = None
        index = self._skip(start + 1)
        if text.startswith("}", index):
            return found, index + 1, None
        while True:
            if not text.startswith('"', index):
                raise ValueError(f"a JSON object key expected at offset {index}")
            key, index = self._scanstring(text, index + 1)
            index = self._skip(index)
            if not text.startswith(":", index):
                raise ValueError(f"':' expected at offset {index}")
            index = self._skip(index + 1)
            if key == "items" and text.startswith("[", index):
                items, index = self._items(index)
                value: object = [None] * len(items)
            else:
                value, index = self._decode(text, index)
                items = None if key == "items" else items
            found[key] = value  # the last of a repeated key, as json.loads keeps it
            index = self._skip(index)
            if text.startswith(",", index):
                index = self._skip(index + 1)
            elif text.startswith("}", index):
                return found, index + 1, items
            else:
                raise ValueError(f"',' or '}}' expected at offset {index}")

    def _items(self, start: int) -> tuple[list[list[ObjectSpan]], int]:
        """The spans of each entry of an ``items`` array, and the array's end."""
        text = self._text
        entries: list[list[ObjectSpan]] = []
        index = self._skip(start + 1)
        if text.startswith("]", index):
            return entries, index + 1
        while True:
            value, end = self._decode(text, index)
            entries.append(self._objects(value, index, end, None))
            index = self._skip(end)
            if text.startswith(",", index):
                index = self._skip(index + 1)
            elif text.startswith("]", index):
                return entries, index + 1
            else:
                raise ValueError(f"',' or ']' expected at offset {index}")


class JsonScanner:
    """JSON text as YAML nodes with marks: keys hold their text, other scalars none.

    Exactly the JSON ``json.loads`` reads (its own string and value decoders do the scalars).
    """

    def __init__(self, text: str, lines: Optional[_Lines] = None) -> None:
        self._text = text
        self._mark = (lines or _Lines(text)).mark
        self._decode = json.JSONDecoder().raw_decode
        self._scanstring = json.decoder.scanstring  # type: ignore[attr-defined]

    def document(self) -> Node:
        return self.node_at(self._skip(0))

    def node_at(self, start: int) -> Node:
        """The node of the value starting at ``start``."""
        node, _ = self._value(start)
        return node

    def _skip(self, index: int) -> int:
        return _WHITESPACE.match(self._text, index).end()  # type: ignore[union-attr]

    def _value(self, start: int) -> tuple[Node, int]:
        char = self._text[start:start + 1]
        if char == "{":
            return self._object(start)
        if char == "[":
            return self._array(start)
        first = self._mark(start)
        _, end = self._decode(self._text, start)
        return ScalarNode(_STR, "", first, self._mark(end), style="\""), end

    def _object(self, start: int) -> tuple[Node, int]:
        pairs: list[tuple[Node, Node]] = []
        first = self._mark(start)  # marks are asked in text order: counted in one pass
        index = self._skip(start + 1)
        if self._text.startswith("}", index):
            return MappingNode(_MAP, pairs, first, self._mark(index + 1), flow_style=True), index + 1
        while True:
            key_start = index
            if not self._text.startswith('"', index):
                raise ValueError(f"a JSON object key expected at offset {index}")
            key, index = self._scanstring(self._text, index + 1)
            key_node = ScalarNode(_STR, key, self._mark(key_start), self._mark(index))
            index = self._skip(index)
            if not self._text.startswith(":", index):
                raise ValueError(f"':' expected at offset {index}")
            value, index = self._value(self._skip(index + 1))
            pairs.append((key_node, value))
            index, closed = self._next_item(index, "}")
            if closed:
                return MappingNode(_MAP, pairs, first, self._mark(index), flow_style=True), index

    def _array(self, start: int) -> tuple[Node, int]:
        items: list[Node] = []
        first = self._mark(start)
        index = self._skip(start + 1)
        if self._text.startswith("]", index):
            return SequenceNode(_SEQ, items, first, self._mark(index + 1), flow_style=True), index + 1
        while True:
            value, index = self._value(index)
            items.append(value)
            index, closed = self._next_item(index, "]")
            if closed:
                return SequenceNode(_SEQ, items, first, self._mark(index), flow_style=True), index

    def _next_item(self, index: int, close: str) -> tuple[int, bool]:
        """After an item of an object or array: (where the next item starts, False) after a comma,
        or (just past ``close``, True) at the end."""
        index = self._skip(index)
        if self._text.startswith(",", index):
            return self._skip(index + 1), False
        if self._text.startswith(close, index):
            return index + 1, True
        raise ValueError(f"',' or '{close}' expected at offset {index}")

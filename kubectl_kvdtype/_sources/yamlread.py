"""YAML documents exactly as PyYAML's safe loader reads them, built straight from libyaml's events.

PyYAML's C loader parses in C, but then composes a node object for every value and constructs
every Python object in Python: ~10x slower than ``json`` on a kubectl dump, and for a ``kind:
List`` dump every node of the whole List is held at once (1.2 GB for 10,000 ModelDeployments).
:func:`load_all` builds the objects in one pass from the same parser's events (``yaml.CParser``),
with no nodes. What a scalar means is still PyYAML's to say: a plain scalar's tag comes from
PyYAML's own resolver (the YAML 1.1 rules: ``yes`` is true, ``010`` is 8, ``1:20`` is 80) and any
scalar that is not a string is made by PyYAML's own constructor for its tag. Anything else (an
anchor or alias, a merge key, a tag other than the standard ones, a collection as a mapping key,
any error) sends the whole text to PyYAML's safe loader instead, which then decides and words
the error as it always did. ``tests/test_yamlread.py`` compares the two on generated documents.

Both paths are bounded (``_kits/bounded``): nesting deeper than ``MAX_DEPTH`` is refused as the
events arrive, and before PyYAML's loader builds anything the events are walked once more
(:func:`check_structure`) for what anchors and aliases would make: a "billion laughs" document,
small as text and huge once its aliases are expanded, is refused by go-yaml's own rule (the one
kubectl refuses it by), as is an anchor that holds an alias to itself, and an alias that nests
a deep anchor deeper than the limit.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from kubectl_kvdtype._kits.bounded import MAX_DEPTH, ExcessiveAliasing, TooDeep, excessive_aliasing

#: libyaml's parser as PyYAML wraps it, or None when PyYAML was built without libyaml (its
#: pure-Python loader then does everything).
CParser: Optional[type]
try:
    from yaml._yaml import CParser
except ImportError:
    CParser = None

#: What ``load_all`` falls back to, and what it reads like: libyaml's loader when PyYAML has it.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_STR = "tag:yaml.org,2002:str"
#: Tags that a mapping or a sequence may carry and still be a plain dict or list.
_MAPPING_TAGS = (None, "!", "tag:yaml.org,2002:map")
_SEQUENCE_TAGS = (None, "!", "tag:yaml.org,2002:seq")
#: Scalars PyYAML gives a meaning only as mapping keys (``<<: *base``, ``=``): its loader decides.
_KEY_ONLY_TAGS = ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value")
_NO_KEY = object()


class _Unusual(Exception):
    """Something this reader leaves to PyYAML's loader."""


def load_all(text: str) -> list:
    """Every document of ``text``, as ``list(yaml.load_all(text, Loader=SAFE_LOADER))`` gives them.

    Raises ``TooDeep`` or ``ExcessiveAliasing`` (both ``ValueError``) for what is refused."""
    if CParser is not None:
        try:
            return _Reader(text).documents()
        except TooDeep:
            raise
        except Exception:  # noqa: BLE001 - anything unusual, errors included: PyYAML's loader decides
            pass
    check_structure(text)
    return list(yaml.load_all(text, Loader=SAFE_LOADER))


#: A scalar's bytes count as this many nodes, so that an alias of a long string weighs what it
#: costs once expanded (go-yaml counts nodes only; a Python reader copies what it expands).
_BYTES_PER_NODE = 64


def check_structure(text: str, limit: int = MAX_DEPTH) -> None:
    """Walk the parse events of ``text`` as PyYAML's loader would expand them, without building
    anything: ``TooDeep`` past ``limit`` (an alias counting as the depth of its anchor's value),
    ``ExcessiveAliasing`` for aliases expanding a document beyond go-yaml's ratio of its nodes or
    for an anchor holding an alias to itself. A text the parser refuses is left to the loader."""
    try:
        for _ in _documents_checked(yaml.parse(text, Loader=SAFE_LOADER), limit):
            pass
    except yaml.YAMLError:
        return  # the loader says what is wrong, in its words


def _documents_checked(events: Any, limit: int) -> Any:
    """One item per document, each checked (see ``check_structure``)."""
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (nodes once expanded, height)
    stack: list[list] = []  # per open collection: [anchor, nodes, height]
    decoded = aliased = 0
    for event in events:
        kind = event.__class__
        if kind is DocumentStartEvent:
            sizes, decoded, aliased = {}, 1, 0
            continue
        if kind is DocumentEndEvent:
            yield decoded
            continue
        if kind is MappingStartEvent or kind is SequenceStartEvent:
            decoded += 1
            stack.append([event.anchor, 1, 0])
            if len(stack) > limit:
                raise TooDeep(limit)
            continue
        if kind is MappingEndEvent or kind is SequenceEndEvent:
            anchor, nodes, height = stack.pop()
            node = (nodes, height + 1)
        elif kind is ScalarEvent:
            decoded += 1
            anchor, node = event.anchor, (1 + len(event.value) // _BYTES_PER_NODE, 0)
        elif kind is AliasEvent:
            if any(open_[0] == event.anchor for open_ in stack):
                raise ExcessiveAliasing(event.anchor)
            if event.anchor not in sizes:
                return  # an undefined alias: the loader's error
            anchor, node = None, sizes[event.anchor]
            decoded += 1 + node[0]
            aliased += node[0]
            if len(stack) + node[1] > limit:
                raise TooDeep(limit)
        else:
            continue
        if excessive_aliasing(decoded, aliased):
            raise ExcessiveAliasing()
        if anchor is not None:
            sizes[anchor] = node
        if stack:
            stack[-1][1] += node[0]
            stack[-1][2] = max(stack[-1][2], node[1])


class _Reader:
    """One pass over the events of one text, keeping what each distinct scalar turned out to be."""

    def __init__(self, text: str) -> None:
        assert CParser is not None
        self._next_event: Callable[[], Any] = CParser(text).get_event
        self._resolver = Resolver()
        # Plain scalars whose first character no implicit resolver looks at are strings: most are.
        resolvers = Resolver.yaml_implicit_resolvers
        self._resolved_first = None if None in resolvers else frozenset(resolvers)
        self._constructor = yaml.constructor.SafeConstructor()
        # Scalars repeat (ports, "true", replica counts): each distinct one is resolved and made once.
        # Sharing the object is safe: what the constructors make of a scalar is immutable.
        self._plain: dict[str, Any] = {}  # plain scalar -> object
        self._tagged: dict[tuple[str, str], Any] = {}  # (explicit tag, scalar) -> object

    def documents(self) -> list:
        self._next_event()  # StreamStartEvent
        documents = []
        while not isinstance(self._next_event(), StreamEndEvent):  # DocumentStartEvent
            documents.append(self._document())
        return documents

    def _document(self) -> Any:
        """The object of one document, from the event after its start to its end.

        One loop with the common case inline (a plain or quoted string scalar): it runs once per
        event, millions of times for a big dump.
        """
        next_event = self._next_event
        scalar = self._scalar
        plain = self._plain
        resolved_first = self._resolved_first or ()
        every_first = self._resolved_first is None
        stack: list[tuple[Any, Any, bool]] = []
        limit = MAX_DEPTH
        container: Any = None  # the dict or list being filled; None at the document's top
        in_list = False
        key: Any = _NO_KEY  # in a mapping, the key waiting for its value
        document = None
        while True:
            event = next_event()
            kind = event.__class__
            if kind is ScalarEvent:
                if event.tag is None and event.anchor is None:
                    value = event.value
                    if event.implicit[0] and (every_first or not value or value[0] in resolved_first):
                        value = plain[value] if value in plain else scalar(event)
                else:
                    value = scalar(event)
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                if event.anchor is not None or (key is _NO_KEY and container is not None and not in_list):
                    raise _Unusual  # an anchor, or a collection as a mapping key
                if event.tag not in (_MAPPING_TAGS if kind is MappingStartEvent else _SEQUENCE_TAGS):
                    raise _Unusual
                if len(stack) >= limit:
                    raise TooDeep(limit)
                stack.append((container, key, in_list))
                in_list = kind is SequenceStartEvent
                container, key = ([] if in_list else {}), _NO_KEY
                continue
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                value = container
                container, key, in_list = stack.pop()
            elif kind is DocumentEndEvent:
                return document
            else:  # AliasEvent: the composer shares the anchored object; PyYAML's loader does that
                raise _Unusual
            if in_list:
                container.append(value)
            elif key is not _NO_KEY:
                container[key] = value
                key = _NO_KEY
            elif container is None:
                document = value
            else:
                key = value

    def _scalar(self, event: ScalarEvent) -> Any:
        """What PyYAML's composer and safe constructor make of one scalar event."""
        if event.anchor is not None:
            raise _Unusual
        value = event.value
        tag = event.tag
        if tag is None or tag == "!":  # the composer resolves these (Resolver.resolve)
            if not event.implicit[0]:
                return value  # quoted or block scalars, and "! x": strings
            if value and self._resolved_first is not None and value[0] not in self._resolved_first:
                return value  # no implicit resolver for this first character: a string
            try:
                return self._plain[value]
            except KeyError:
                tag = self._resolver.resolve(ScalarNode, value, event.implicit)
                made = self._plain[value] = value if tag == _STR else self._construct(tag, value)
                return made
        if tag == _STR:
            return value
        try:
            return self._tagged[(tag, value)]
        except KeyError:
            made = self._tagged[(tag, value)] = self._construct(tag, value)
            return made

    def _construct(self, tag: str, value: str) -> Any:
        if tag in _KEY_ONLY_TAGS:
            raise _Unusual
        node = ScalarNode(tag, value)
        made = self._constructor.construct_object(node, deep=True)  # a wrong scalar raises: PyYAML words it
        self._constructor.constructed_objects.pop(node, None)
        return made

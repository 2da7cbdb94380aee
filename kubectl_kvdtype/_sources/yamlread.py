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
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import yaml
from yaml.events import (
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

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
    """Every document of ``text``, as ``list(yaml.load_all(text, Loader=SAFE_LOADER))`` gives them."""
    if CParser is not None:
        try:
            return _Reader(text).documents()
        except Exception:  # noqa: BLE001 - anything unusual, errors included: PyYAML's loader decides
            pass
    return list(yaml.load_all(text, Loader=SAFE_LOADER))


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

"""A JSON List's text read an object at a time as it arrives (:class:`ItemSplitter`): the objects
of its ``items`` each decoded as soon as its text is complete, and its text let go, so that a
reader of a big List holds what it keeps and one object's text, never the whole text or every
object at once (``_sources.lists`` reads an unpaged LIST's answer so).

What is split is untrusted: each object (and the List's other members together) is bounded in
size (``MAX_ITEM_CHARS``) and nesting (``_kits.bounded.MAX_DEPTH``), the text must be UTF-8 JSON,
and the List's own members may come in any order (a built-in kind's List writes its ``metadata``
before ``items``, a custom resource's after). What is not so is one sentence (:class:`Unreadable`).
"""

from __future__ import annotations

import codecs
import json
import os
import re
from typing import Any, Optional

from kubectl_kvdtype._kits import bounded as _bounded

#: The most characters one listed object's JSON may take, and the List's other members together:
#: etcd stores at most 1.5 MiB of an object, which its JSON rarely doubles.
MAX_ITEM_CHARS = 32 * 1024 * 1024
#: The longest JSON word or number an object's text may end inside (``-Infinity``, ``1.5e-07``).
_WORD = 32

_DECODE = json.JSONDecoder().raw_decode
_BLANKS = re.compile(r"[ \t\n\r]*")
#: How much of an object's text is compared with the next one's (``_separator``).
_HEAD_CHARS = 256


def _common_start(first: str, second: str) -> str:
    """What two objects' text begins with alike, up to the last key or value begun in both
    (``{"apiVersion":"worker.gpustack.ai/v1","kind":"ModelDeployment","metadata":{"creationTimestamp":``,
    or a built-in kind's ``{"metadata":{"name":``), which an object nested in one rarely begins
    with. Only one that holds a key (``{"`` and more) is looked for: a quote outside a string is
    what makes it a place only an object's start can be, since inside a string every quote is
    escaped."""
    same = os.path.commonprefix([first, second])
    return same[:max(0, same.rfind('"'))]


class Unreadable(ValueError):
    """Text that is not a List's JSON, or breaks a bound: ``str()`` says why, as a clause."""


class _More(Exception):
    """The text so far ends before the next value does: wait for more."""


class ItemSplitter:
    """A List's JSON text, fed a piece at a time (``feed``): the objects of its ``items`` as each
    is complete, and once it has ended (``end``) the rest of them and its other members
    (``envelope``)."""

    def __init__(self, max_chars: int = MAX_ITEM_CHARS) -> None:
        self._max = max_chars
        self._text_of = codecs.getincrementaldecoder("utf-8")()
        self._text, self._at = "", 0
        self._ended = False
        #: Where the List's text is: before its "{", between members, in its items, or past its "}".
        self._state = "start"
        self._key: Optional[str] = None
        self._first_item = True
        #: What the objects taken one at a time all began with (``_learn_start``), and after a comma:
        #: where a later object begins (``_items_at_once``).
        self._head = ""
        self._separator = ""
        self._tried_at_once = False
        #: The List's members other than ``items``, and their text's length together (bounded).
        self.envelope: dict[str, Any] = {}
        self._envelope_chars = 0
        #: Whether ``items`` was there: a list (streamed out), or null (a Go server's empty list).
        self.items_seen = False
        #: The text length at the last attempt that found a value incomplete (retried once doubled).
        self._waited = 0

    def feed(self, data: bytes) -> list[Any]:
        """The objects that ``data`` completes, in order."""
        try:
            text = self._text_of.decode(data)
        except UnicodeDecodeError:
            raise Unreadable("it is not UTF-8 text") from None
        self._text = self._text[self._at:] + text
        self._at, self._tried_at_once = 0, False
        if len(self._text) < 2 * self._waited and len(self._text) <= self._max:
            return []  # a value longer than what came since it was found incomplete: tried again once doubled
        return self._parse()

    def end(self) -> list[Any]:
        """The objects left once the List's whole text has come (a value ``feed`` waited to
        complete); its other members are then ``envelope``."""
        try:
            self._text = self._text[self._at:] + self._text_of.decode(b"", final=True)
        except UnicodeDecodeError:
            raise Unreadable("it is not UTF-8 text") from None
        self._at, self._ended, self._tried_at_once = 0, True, False
        if self._state == "start" and not self._text.strip():  # no body: no List
            return []
        left = self._parse()
        if self._state != "done":
            raise Unreadable("it ends before its JSON does")
        return left

    def _parse(self) -> list[Any]:
        found: list[Any] = []
        self._waited = 0
        step_at = self._at
        try:
            while self._state != "done":
                step_at = self._at
                self._step(found)
            if self._text[self._skip():]:
                raise Unreadable("more text follows its JSON")
        except _More:  # the step begins again once more has come: what it took is given back
            self._at = step_at
            self._waited = len(self._text) - self._at
        return found

    def _step(self, found: list[Any]) -> None:
        """One token of the List's own structure, or one value: where it was, the next is taken."""
        state = self._state
        if state == "start":
            if self._peek() != "{":  # some other JSON value (null, a list): read whole, it is no List
                self._value(self._max)
                self._state = "done"
                return
            self._at += 1
            self._state = "key"
        elif state == "key":
            if self._peek() == "}":
                self._at += 1
                self._state = "done"
                return
            key = self._value(self._max)
            if not isinstance(key, str):
                raise Unreadable("it is not a JSON object of named members")
            self._key = key
            self._expect(":")
            self._state = "value"
        elif state == "value":
            self._member()
        elif state == "items":
            self._item(found)
        else:  # "next": after a member
            self._state = "key" if self._expect(",}") == "," else "done"

    def _member(self) -> None:
        key = self._key or ""
        if key == "items" and self.items_seen:
            raise Unreadable("it names its items twice")
        if key == "items" and self._peek() == "[":
            self._at += 1
            self.items_seen, self._first_item, self._state = True, True, "items"
            return
        start = self._at
        value = self._value(self._max - self._envelope_chars)
        self._envelope_chars += self._at - start
        if key == "items":
            self.items_seen = value is None
            if value is not None:  # not a list: kept, so that the List's check says what it is
                self.envelope[key] = value
        else:
            self.envelope[key] = value
        self._state = "next"

    def _item(self, found: list[Any]) -> None:
        if self._peek() == "]":
            self._at += 1
            self._state = "next"
            return
        if not self._first_item:
            if self._separator and not self._tried_at_once and self._items_at_once(found):
                return
            self._expect(",")
        start = self._skip()
        found.append(self._value(self._max))
        self._learn_start(self._text[start:min(self._at, start + _HEAD_CHARS)])
        self._first_item = False

    def _learn_start(self, head: str) -> None:
        """What every object taken one at a time has begun with so far (the first's start, then
        what each later one shares with it): once two have, the separator ``_items_at_once`` looks for."""
        if self._first_item:
            self._head = head
        elif not head.startswith(self._head) or not self._separator:
            self._head = _common_start(self._head, head)
            self._separator = "," + self._head if self._head.startswith('{"') and len(self._head) >= 8 else ""

    def _items_at_once(self, found: list[Any]) -> bool:
        """Every complete object of the text so far but the last, decoded in one call (``json``
        shares the key strings of the objects it decodes in one call, as a page's objects share
        them): the text up to the last place where an object begins as the first one began
        (``_separator``, which only the start of an object can be). Each object found so is
        complete, since no object's text is a part of another's; a place that was not an object's
        start after all (an object nested in one, begun alike) leaves the text unparsed, and its
        objects are taken one at a time. True when some were found."""
        self._tried_at_once = True  # once a piece: each try searches, and may parse, all the text held
        text, at = self._text, self._at
        cut = text.rfind(self._separator, at + 1)
        if cut < 0 or not text.startswith(",", at):
            return False
        batch = text[at + 1:cut]
        if len(batch) > self._max:  # one at a time: each is then bounded, and said so
            return False
        try:  # nested past the bound, or no objects after all: one at a time, each then said so
            objects = _bounded.loads(f"[{batch}]", _bounded.MAX_DEPTH + 1)  # (the list around them a level)
        except ValueError:
            return False
        found.extend(objects)
        self._at = cut
        return True

    def _value(self, most: int) -> Any:
        """The JSON value at the text's next non-blank character, no longer than ``most`` characters."""
        start = self._skip()
        text = self._text
        try:
            value, end = _DECODE(text, start)
        except RecursionError:
            raise Unreadable(str(_bounded.TooDeep())) from None
        except json.JSONDecodeError as error:
            if len(text) - start > most:
                raise Unreadable(_longer(most)) from None
            cut_short = error.pos >= len(text) or error.msg.startswith("Unterminated string")
            if not self._ended and (cut_short or error.pos >= len(text) - _WORD):  # (``tr`` of ``true``)
                raise _More() from None
            raise Unreadable("it ends before its JSON does" if cut_short else "it is not JSON") from None
        if not self._ended and len(text) - end < _WORD and isinstance(value, (int, float)):
            raise _More()  # a number may go on in the next piece (``-12`` of ``-12.5``)
        if end - start > most:
            raise Unreadable(_longer(most))
        if isinstance(value, (dict, list)) and _bounded.too_deep(text[start:end]):
            raise Unreadable(str(_bounded.TooDeep()))
        self._at = end
        return value

    def _expect(self, allowed: str) -> str:
        """The next non-blank character, taken: one of ``allowed``, or the text is no List."""
        found = self._peek()
        if found not in allowed:
            raise Unreadable("it is not the JSON of a List")
        self._at += 1
        return found

    def _peek(self) -> str:
        """The next non-blank character, not taken (the blanks before it are)."""
        at = self._skip()
        if at == len(self._text):
            if self._ended:
                raise Unreadable("it ends before its JSON does")
            raise _More()
        self._at = at
        return self._text[at]

    def _skip(self) -> int:
        match = _BLANKS.match(self._text, self._at)
        return match.end() if match else self._at


def _longer(most: int) -> str:
    bound = f"{most >> 20} MiB" if most >= 1 << 20 else f"{most:,} characters"
    return f"one of its objects, or its other members together, is longer than {bound}"

"""A List's text, as the cluster source reads it (``_sources.cluster``): a page decoded whole, or
one unpaged answer decoded an object at a time as its bytes arrive (``read_streamed``, with
``_kits.jsonsplit``).

The streamed read is why the direct transport's LISTs are one request each: paged, a big LIST
was a round trip per page on a link tens of milliseconds away, and kube-apiserver reads a
continue page from etcd once its watch cache no longer holds the revision the list began at,
where an unpaged LIST is served from the cache (docs/development.md, "Speed on big clusters").
Decoded whole, one answer of 20,000 Pods held its text and every Pod at once, hundreds of MB;
split, each object is decoded, cut to what judging reads (``Collector``) and its text let go,
so a run holds what it keeps and one object's text.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Iterator, Optional

from kubectl_kvdtype._kits import settings as _settings
from kubectl_kvdtype._kits.jsonsplit import ItemSplitter, Unreadable
from kubectl_kvdtype._kits.report import Finding
from kubectl_kvdtype._kits.status import ClusterError
from kubectl_kvdtype._sources import names as _names
from kubectl_kvdtype._sources.kinds import Kind, Projection
from kubectl_kvdtype._sources.transport import first_line

_DECODE = json.JSONDecoder().raw_decode


class Collector:
    """The objects of one LIST, kept as they come: those whose names the API server refuses set
    aside as findings (``_sources.names.listed_refusals``), the rest cut to what judging reads
    (``project``)."""

    def __init__(self, kind: Kind, project: Optional[Projection]) -> None:
        self.kind, self._project = kind, project
        self.items: list[dict] = []
        self.findings: list[Finding] = []

    def take(self, objects: Iterable[object]) -> None:
        kept, refused = _names.listed_refusals(self.kind, objects, f"the cluster's list of {self.kind.resource}")
        self.findings += refused  # a proxy or a server that answers otherwise: the object is not judged
        self.items.extend(map(self._project, kept) if self._project else kept)


def read_streamed(pieces: Iterator[bytes], collector: Collector, what: str, most: int) -> Optional[str]:
    """An unpaged LIST's answer, its body's ``pieces`` (decoded from gzip) split into objects
    handed to ``collector`` as each piece completes them; its continue token, if the answer names
    one (a server may page what was not asked in pages: it is followed, as client-go's pager
    follows it). ``most``: the objects one LIST may hold before it is abandoned as endless."""
    splitter, count = ItemSplitter(), 0
    try:
        for piece in pieces:
            count = _handed(collector, splitter.feed(piece), count, what, most)
        count = _handed(collector, splitter.end(), count, what, most)
    except Unreadable as error:
        raise ClusterError(f"{what}: the API server's answer cannot be read: {error}") from None
    page = splitter.envelope
    list_items({**page, "items": []} if splitter.items_seen else page, collector.kind, what)
    return continue_token(page)


def _handed(collector: Collector, objects: list[Any], count: int, what: str, most: int) -> int:
    count += len(objects)
    if count > most:
        raise endless(what, f"{most:,} objects")
    collector.take(objects)
    return count


def endless(what: str, reached: str) -> ClusterError:
    """The sentence of a LIST past what one may take (``reached``: ``1000 pages``, ``500,000
    objects``), paged or read in one request: the setting that allows more is the same."""
    return ClusterError(f"{what}: still not complete after {reached}, the most one LIST may take "
                        f"(set {_settings.MAX_PAGES.name} for more)")


def list_items(page: dict, kind: Kind, what: str) -> list:
    """A LIST page's items; an answer that is not a List of ``kind`` is no answer (an empty one
    would read as "none exist": every consumer told its Binding is missing). A List of ``kind``
    whose ``items`` is null is empty: a Go server encodes an empty list so (a nil slice)."""
    items = page.get("items")
    if items is None and "items" in page and page.get("kind") == f"{kind.name}List":
        return []
    if page.get("kind") != f"{kind.name}List" or not isinstance(items, list):
        answered = page.get("kind")
        shown = f"kind {first_line(answered)[:60]!r}" if isinstance(answered, str) and answered else "no kind"
        listed = "" if isinstance(items, list) else ", no list of items"
        raise ClusterError(f"{what}: the API server's answer is not a {kind.name}List ({shown}{listed})")
    return items


def continue_token(page: dict) -> Optional[str]:
    """The continue token a List's metadata names: a string, not empty (an empty one ends the list)."""
    metadata = page.get("metadata")
    token = metadata.get("continue") if isinstance(metadata, dict) else None
    return token if isinstance(token, str) and token else None


#: Where an API server writes a List's metadata: first after ``kind`` and ``apiVersion`` (a built-in
#: kind's List), or last, after ``items`` and ``kind`` (a custom resource's, keys in order).
_HEAD_METADATA = re.compile(rb'\s*\{\s*"kind"\s*:\s*"[A-Za-z0-9]*"\s*,\s*"apiVersion"\s*:\s*"[^"\\]*"\s*,'
                            rb'\s*"metadata"\s*:\s*')
_TAIL_METADATA = re.compile(rb'"metadata"\s*:\s*')
#: How far from either end of a page its metadata is looked for (a continue token is a few hundred bytes).
_PEEK = 4096


def peek_continue(data: bytes) -> Optional[str]:
    """The continue token a LIST page's text names, read from the metadata at its start or its
    end without decoding its items; None when it names none there. A guess to ask the next page
    with: the decoded page is what counts."""
    head = _HEAD_METADATA.match(data, 0, _PEEK)
    if head is not None:
        metadata = _object_at(data[head.end():head.end() + _PEEK])
    else:
        tail = data[-_PEEK:]
        found = list(_TAIL_METADATA.finditer(tail))
        metadata = _object_at(tail[found[-1].end():], last=True) if found else None
    return continue_token({"metadata": metadata})


def _object_at(text: bytes, last: bool = False) -> Any:
    """The JSON object ``text`` starts with (``last``: followed only by the page's closing brace)."""
    decoded = text.decode("utf-8", "replace")
    try:
        found, end = _DECODE(decoded)
    except (ValueError, RecursionError):  # not JSON there, or nested past the interpreter's limit
        return None
    if last and decoded[end:].strip() != "}":
        return None
    return found


"""A LIST read in one request, its objects decoded as its bytes arrive (``_kits.jsonsplit``,
``_sources.lists``, the direct transport's ``stream``): split anywhere (a UTF-8 character, an
object, gzip's blocks), the objects are the ones the whole text holds; what is not a List's
JSON, or breaks a bound, or ends early, is one sentence; and the first object is decoded while
the rest is still on its way.

The real server's answers are read so in tests/test_real_paging.py; these are the answers a real
server will not give on demand (cut, crafted, held back), from a socket this test writes."""

from __future__ import annotations

import gzip
import json
import socket
import threading
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _forwardproxy import _Server, read_head
from _support import assert_one_clean_line, kvdtype, seed, write_kubeconfig
from kubectl_kvdtype._kits.jsonsplit import ItemSplitter, Unreadable
from kubectl_kvdtype._kits.status import ClusterError
from kubectl_kvdtype._sources.connection import ConnectionOptions
from kubectl_kvdtype._sources.kinds import BINDING
from kubectl_kvdtype._sources.wire import gunzip_pieces

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_VALUE = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
                      max_leaves=8)
_LIST = st.fixed_dictionaries({
    "items": st.lists(st.dictionaries(_TEXT, _VALUE, max_size=4) | _VALUE, max_size=6),
    "extra": st.dictionaries(st.sampled_from(["metadata", "z", "n"]), _VALUE, max_size=2),
    "style": st.sampled_from(["go-typed", "go-custom", "indented"]),
})


def _list_text(case: dict) -> bytes:
    """A List as the servers the plugin meets write one: a built-in kind's (metadata first, compact),
    a custom resource's (keys in order: ``items`` before ``kind`` and ``metadata``), or indented."""
    document = {"kind": "ThingList", "apiVersion": "example/v1", **case["extra"], "items": case["items"]}
    if case["style"] == "go-typed":
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    if case["style"] == "go-custom":
        return json.dumps(document, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
    return json.dumps(document, indent=2, ensure_ascii=False).encode()


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(data)) for cut in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def _streamed(pieces: list[bytes], max_chars: Optional[int] = None) -> tuple[list, dict]:
    splitter = ItemSplitter(*([max_chars] if max_chars else []))
    items = [item for piece in pieces for item in splitter.feed(piece)]
    return items + splitter.end(), splitter.envelope


@settings(max_examples=300, deadline=None)
@given(_LIST, st.lists(st.integers(0, 4000), max_size=12))
def test_a_list_split_anywhere_gives_the_objects_and_members_the_whole_text_holds(case, cuts):
    data = _list_text(case)
    whole = json.loads(data)
    items, envelope = _streamed(_split(data, cuts))
    assert items == whole.pop("items") and envelope == whole


#: Objects as an API server writes them, all beginning alike, some holding a list of objects that
#: begin as they do (a place that looks like an object's start, nested in one).
_ALIKE = st.recursive(
    st.fixed_dictionaries({"apiVersion": st.just("v1"), "kind": st.just("Thing"),
                           "metadata": st.fixed_dictionaries({"name": _TEXT})}),
    lambda inner: st.fixed_dictionaries({"apiVersion": st.just("v1"), "kind": st.just("Thing"),
                                         "metadata": st.fixed_dictionaries({"name": _TEXT}),
                                         "nested": st.lists(inner, max_size=3), "n": _VALUE}),
    max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALIKE, max_size=30), st.lists(st.integers(0, 6000), max_size=12))
def test_objects_that_begin_alike_are_taken_many_at_once_and_are_the_same(items, cuts):
    """Many objects decoded in one call where the text shows where each begins
    (``ItemSplitter._items_at_once``): the same objects, even where one nested in another begins alike."""
    data = json.dumps({"apiVersion": "v1", "items": items, "kind": "ThingList", "metadata": {}},
                      separators=(",", ":"), ensure_ascii=False).encode()
    assert _streamed(_split(data, cuts)) == (items, {"apiVersion": "v1", "kind": "ThingList", "metadata": {}})


def test_objects_taken_many_at_once_share_their_key_strings_as_a_pages_do():
    """What the many-at-once decoding is for: a big LIST's kept objects hold one copy of each key,
    as ``json`` gives the objects of one page, not one per object (a tenth of a run's memory)."""
    items = [{"apiVersion": "v1", "kind": "Thing", "metadata": {"name": f"t{i}", "labels": {"tier": "x"}},
              "nested": [{"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "inner"}}] * (i % 3)}
             for i in range(200)]
    data = json.dumps({"kind": "ThingList", "apiVersion": "v1", "metadata": {}, "items": items},
                      separators=(",", ":")).encode()
    decoded, _ = _streamed(_split(data, list(range(4096, len(data), 4096))))
    assert decoded == items
    label_keys = {id(next(iter(item["metadata"]["labels"]))) for item in decoded}
    assert len(label_keys) < len(items) // 10  # one per call, and the calls take many objects each


@settings(max_examples=100, deadline=None)
@given(_LIST, st.lists(st.integers(0, 400), max_size=8))
def test_a_gzip_coded_list_split_anywhere_decodes_to_the_same_objects(case, cuts):
    data = _list_text(case)
    items, envelope = _streamed(list(gunzip_pieces(iter(_split(gzip.compress(data), cuts)))))
    assert (items, envelope) == _streamed([data])


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300) | st.builds(lambda n: b'{"items":[' + b"[" * n, st.integers(0, 3000)),
       st.lists(st.integers(0, 300), max_size=4))
def test_any_text_is_objects_or_one_sentence(data, cuts):
    try:
        items, envelope = _streamed(_split(data, cuts))
    except Unreadable as error:  # a clause of the one sentence the cluster source says (no traceback, one line)
        assert str(error) and "\n" not in str(error) and str(error).isprintable()
    else:
        assert isinstance(items, list) and isinstance(envelope, dict)


@pytest.mark.parametrize("data, said", [
    (b'{"items":[{"a":1},{"b":"x', "it ends before its JSON does"),
    (b'{"items":[{"a":1}', "it ends before its JSON does"),
    (b'{"items":[{"a":tru}]}', "it is not JSON"),
    (b'{"items":[]} {}', "more text follows its JSON"),
    (b'{"items":[],"items":[]}', "it names its items twice"),
    (b'{"items":[' + b"[" * 150 + b"]" * 150 + b"]}", "nested more than 100 levels deep"),
    (b'{"items":[' + b"[" * 5000 + b"]" * 5000 + b"]}", "nested more than 100 levels deep"),
    (b'{"items":[{"a":"' + b"x" * 2000 + b'"}]}', "one of its objects, or its other members together, is longer "
                                                   "than 1,000 characters"),
    (b'{"metadata":{"a":"' + b"x" * 2000 + b'"},"items":[]}', "is longer than 1,000 characters"),
    (b'{"items":["\xff"]}', "it is not UTF-8 text"),
], ids=["cut-in-an-object", "cut-after-an-object", "not-json", "text-after", "items-twice", "deep",
        "deeper-than-python", "a-long-object", "long-members", "not-utf-8"])
def test_what_is_not_a_lists_json_or_breaks_a_bound_is_one_sentence(data, said):
    most = 1000 if len(data) < 5000 else 100_000  # (nested 5,000 deep: within the size bound, so depth is what is said)
    for size in (1, 7, len(data)):  # the same, however it arrives
        with pytest.raises(Unreadable) as raised:
            _streamed(_split(data, list(range(size, len(data), size))), max_chars=most)
        assert said in str(raised.value)


def test_an_object_that_never_ends_is_refused_once_past_the_bound_not_later():
    """Text held while an object is incomplete stays within the bound (and one piece more): a
    server that sends one endless object is refused then, however small its pieces."""
    splitter = ItemSplitter(1000)
    splitter.feed(b'{"items":[{"a":"')
    fed = 16
    with pytest.raises(Unreadable, match="longer than 1,000 characters"):
        while fed < 100_000:
            splitter.feed(b"x" * 100)
            fed += 100
    assert fed <= 1000 + 100 + 16


# --- The direct transport, over a socket that writes what a test says --------------------------

_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n")


class _Scripted(_Server):
    """A server whose every connection is answered ``head`` then each of ``chunks`` as a chunk of
    its own, waiting on ``release`` (if set) after the first; ``end``: the last chunk, closing the body."""

    threaded = True

    def __init__(self, chunks: list[bytes], end: bool = True, release: Optional[threading.Event] = None) -> None:
        self._chunks, self._end, self._release = chunks, end, release
        self.sent_all = threading.Event()  # every chunk written (the last one's end too, if any)
        super().__init__()
        self.url = f"http://127.0.0.1:{self.port}"

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            if not read_head(conn).endswith(b"\r\n\r\n"):
                return
            conn.sendall(_HEAD)
            for number, chunk in enumerate(self._chunks):
                conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                if number == 0 and self._release is not None:
                    self._release.wait(10)
            if self._end:
                conn.sendall(b"0\r\n\r\n")
            self.sent_all.set()


def _source(tmp_path: Path, server: _Scripted):
    from kubectl_kvdtype._sources.cluster import ClusterSource

    config = write_kubeconfig(tmp_path / "kc", {"server": server.url}, {"token": "t"})
    return ClusterSource(ConnectionOptions(request_timeout=20), environ={"KUBECONFIG": str(config)})


def _bindings(count: int) -> list[dict]:
    return [{"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
             "metadata": {"name": f"b{i:04d}", "namespace": "ns", "annotations": {"note": "é€😀" * 3}},
             "spec": {"domain": {"dtype": "bfloat16"}}} for i in range(count)]


def _custom_list_text(items: list[dict]) -> bytes:
    """A custom resource's List as kube-apiserver writes it: keys in order, so ``metadata`` after ``items``."""
    return json.dumps({"apiVersion": "worker.gpustack.ai/v1", "items": items, "kind": "KVCachePoolBindingList",
                       "metadata": {"resourceVersion": "9"}}, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.e2e  # a socket server
def test_a_gzip_coded_chunked_answer_cut_at_every_awkward_place_is_read_whole(tmp_path):
    """Chunks of 1 to 13 bytes of the gzip stream: every UTF-8 character, object and gzip block split."""
    items = _bindings(40)
    coded = gzip.compress(_custom_list_text(items))
    chunks, at, size = [], 0, 1
    while at < len(coded):
        chunks.append(coded[at:at + size])
        at, size = at + size, size % 13 + 1
    with _Scripted(chunks) as server:
        assert _source(tmp_path, server).list(BINDING, "ns") == items


@pytest.mark.e2e  # a socket server
def test_an_answer_cut_in_an_object_is_one_sentence_naming_the_request(tmp_path):
    text = gzip.compress(_custom_list_text(_bindings(40)))
    with _Scripted([text[: len(text) // 2]], end=False) as server:
        with pytest.raises(ClusterError) as raised:
            _source(tmp_path, server).list(BINDING, "ns")
    assert str(raised.value).startswith(f"cannot reach the cluster at {server.url}: ")


@pytest.mark.e2e  # a socket server
def test_an_answer_of_another_kind_is_not_taken_for_an_empty_list(tmp_path):
    text = _custom_list_text([]).replace(b"KVCachePoolBindingList", b"StatusList")
    with _Scripted([gzip.compress(text)]) as server:
        with pytest.raises(ClusterError) as raised:
            _source(tmp_path, server).list(BINDING, "ns")
    assert "the API server's answer is not a KVCachePoolBindingList (kind 'StatusList')" in str(raised.value)


@pytest.mark.e2e  # a socket server
def test_the_first_object_is_decoded_while_the_rest_is_still_on_its_way(tmp_path):
    """The server sends the first half of the body and holds the rest until the plugin has decoded
    the first objects (those the first piece completes: ``_sources.lists``): read whole, the answer
    would never have been decoded before it ended."""
    items = _bindings(1500)
    coded = gzip.compress(_custom_list_text(items))
    release = threading.Event()
    rest_sent_by_the_first: list[bool] = []
    server = _Scripted([coded[: len(coded) // 2], coded[len(coded) // 2:]], release=release)

    def project(obj: dict) -> dict:
        if not release.is_set():
            rest_sent_by_the_first.append(server.sent_all.is_set())
            release.set()
        return obj

    with server:
        assert _source(tmp_path, server).list(BINDING, "ns", project=project) == items
    assert rest_sent_by_the_first == [False]


def test_a_list_past_its_objects_bound_is_one_sentence(fake, kube_env):
    """KUBECTL_KVDTYPE_MAX_PAGES bounds a LIST in one request too: 500 objects for each page."""
    seed(fake, [{**binding, "metadata": {"name": binding["metadata"]["name"], "namespace": "team-a"}}
                for binding in _bindings(501)])
    result = kvdtype(dict(kube_env, KUBECTL_KVDTYPE_MAX_PAGES="1"), "check", "-A")
    assert result.returncode == 3 and result.stdout == ""
    assert_one_clean_line(result.stderr)
    assert "list kvcachepoolbindings.worker.gpustack.ai in all namespaces: still not complete after 500 objects" \
        in result.stderr
    assert kvdtype(kube_env, "check", "-A").returncode in (0, 1)

"""LISTs on the real API server: a LIST of thousands of Bindings read in one request, its gzip-coded
chunked answer decoded as it comes, and (KUBECTL_KVDTYPE_PAGED_LISTS) in the plugin's pages, every
object judged once; and, in pages, an expired continue token, the real one, made by compacting etcd between two pages
of the plugin's own LIST (a proxy between the plugin and the server runs the compaction once the
first page is answered, before the plugin reads it): the LIST is read again from its first page, as
docs/reference.md says, and a token that expires every time ends the run in one sentence."""

from __future__ import annotations

import json

import pytest

from _proxy import ApiProxy
from _support import assert_one_clean_line, paged
from kubectl_kvdtype._sources.cluster import MAX_PAGE_SIZE, PAGE_SIZE, next_limit
from kubectl_kvdtype._sources.lists import peek_continue

pytestmark = pytest.mark.real

#: More than a first page of the plugin's 500 (kubectl_kvdtype._sources.cluster.PAGE_SIZE) and
#: more than the first page of Bindings measures for the next (``next_limit``): three pages, the
#: last one short, so the page count shows the server ended the list, not the plugin.
BINDINGS = 5600
LISTS = r"/kvcachepoolbindings$"


def _binding(index: int) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding", "metadata": {"name": f"b{index:04d}"},
            "spec": {"poolRef": {"name": "shared-dram"},
                     "domain": {"name": f"d{index:04d}", "blockSize": 64, "dtype": "bfloat16"}}}


@pytest.fixture(scope="module")
def crowded(control_plane):
    """A namespace of BINDINGS Bindings, created once for the module (concurrently)."""
    namespace = control_plane.namespace("paging")
    control_plane.create_all([_binding(i) for i in range(BINDINGS)], namespace)
    try:
        yield namespace
    finally:
        control_plane.drop("KVCachePoolBinding", namespace)  # clean()'s DELETE of them takes seconds


@pytest.fixture
def proxy(control_plane):
    with ApiProxy(control_plane.url) as running:
        yield running


def _pages(proxy: ApiProxy) -> list:
    return proxy.exchanges("GET", LISTS)


def _names(result) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [item["name"] for item in json.loads(result.stdout)["items"]]


#: What asks for pages: the plugin's LISTs are otherwise one request each.
PAGED = paged({})


def test_a_list_of_thousands_is_read_in_one_request_as_it_comes_and_each_object_judged_once(real, crowded, proxy):
    """One unpaged LIST, straight to the server (its answer gzip-coded, decoded as it comes) and
    through the proxy (which sends it on whole, with its length): the same report as the pages'."""
    result = real.kvdtype("check", "-n", crowded, "-o", "json", user="reader", extra={"KUBECTL_KVDTYPE_DEBUG": "1"})
    assert sorted(_names(result)) == [f"b{i:04d}" for i in range(BINDINGS)]
    through = real.kvdtype("check", "-n", crowded, "-o", "json", user="reader", server=proxy.url)
    assert through.stdout == result.stdout
    [whole] = _pages(proxy)
    assert "limit" not in whole.query and whole.status == 200 and len(whole.json["items"]) == BINDINGS
    assert ("Content-Encoding", "gzip") in whole.headers  # asked for, as kubectl asks
    in_pages = real.kvdtype("check", "-n", crowded, "-o", "json", user="reader", extra=PAGED)
    assert in_pages.stdout == result.stdout


def test_a_list_of_thousands_is_read_in_the_plugins_pages_and_each_object_judged_once(real, crowded, proxy):
    names = _names(real.kvdtype("check", "-n", crowded, "-o", "json", user="reader", server=proxy.url, extra=PAGED))
    assert sorted(names) == [f"b{i:04d}" for i in range(BINDINGS)]
    pages = _pages(proxy)
    assert [p.status for p in pages] == [200] * 3
    # The first page is kubectl's chunk; each later one as big as the page before it measures
    # its objects to fit in PAGE_BYTES, up to MAX_PAGE_SIZE.
    limits = [PAGE_SIZE]
    for page in pages[:-1]:
        limits.append(next_limit(limits[-1], len(page.body)))
    assert [p.query.get("limit") for p in pages] == [str(limit) for limit in limits]
    assert PAGE_SIZE < limits[1] < MAX_PAGE_SIZE and limits[2] == limits[1]
    assert [len(p.json["items"]) for p in pages] == [*limits[:2], BINDINGS - sum(limits[:2])]  # the server's own
    # Each page after the first continues from the token the previous one carried; the last carries none.
    assert "continue" not in pages[0].query
    assert [p.query["continue"] for p in pages[1:]] == [p.json["metadata"]["continue"] for p in pages[:-1]]
    assert not pages[-1].json["metadata"].get("continue")
    # The next page is asked for before a page is decoded, with the token read off the page's text
    # where the real server writes it (a custom resource's List: its metadata last).
    assert [peek_continue(p.body) for p in pages] == [p.json["metadata"].get("continue") or None for p in pages]
    assert pages[0].body.startswith(b'{"apiVersion":"worker.gpustack.ai/v1","items":[')  # its metadata last


def test_a_built_in_kinds_page_names_its_token_where_it_is_read_ahead(real):
    """A built-in kind's List (Pods are one, read by every subcommand) carries its metadata first:
    the token read off its text is the decoded page's, on the real server."""
    real.apply([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}} for i in range(2)])
    answer = real.plane.request("GET", f"/api/v1/namespaces/{real.namespace}/configmaps?limit=1")
    assert answer.status == 200 and answer.text.startswith('{"kind":"ConfigMapList"')
    token = answer.body["metadata"]["continue"]
    assert token and peek_continue(answer.text.encode()) == token


def test_a_continue_token_expired_by_compaction_mid_list_restarts_the_list(real, crowded, proxy):
    """etcd is compacted once the first page is answered: the server answers the plugin's next page
    410 Expired, and the plugin reads the list again from the start, judging each object once."""
    plane = real.plane
    proxy.after(lambda exchange: plane.compact(), "GET", LISTS, when=lambda e: "continue" not in e.query)
    names = _names(real.kvdtype("check", "-n", crowded, "-o", "json", user="reader", server=proxy.url, extra=PAGED))
    assert sorted(names) == [f"b{i:04d}" for i in range(BINDINGS)]
    pages = _pages(proxy)
    assert [p.status for p in pages] == [200, 410] + [200] * 3
    assert pages[1].json["reason"] == "Expired"  # the server's own answer, not the proxy's
    assert "continue" in pages[1].query and "continue" not in pages[2].query


def test_a_list_whose_continue_token_expires_every_time_ends_in_one_sentence(real, crowded, proxy):
    plane = real.plane
    proxy.after(lambda exchange: plane.compact(), "GET", LISTS, when=lambda e: "continue" not in e.query,
                times=None)
    result = real.kvdtype("check", "-n", crowded, "-o", "json", user="reader", server=proxy.url, extra=PAGED)
    assert result.returncode == 3 and result.stdout == ""
    assert_one_clean_line(result.stderr)
    assert "kvcachepoolbindings.worker.gpustack.ai" in result.stderr and "410 Expired" in result.stderr
    assert [p.status for p in _pages(proxy)] == [200, 410] * 3

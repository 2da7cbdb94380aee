"""A read-only Kubernetes API server for the benchmark, written apart from the tests' fake.

The tests' fake (tests/fakekube.py) keeps every object pre-rendered as JSON text and answers a
LIST by joining those strings: cheap for the server, so it flatters a client. This server behaves
the way the benchmark needs a real apiserver to behave:

- a LIST is served in O(page), like the apiserver's watch cache: objects are kept sorted by
  (namespace, name), a page starts with a binary search for the continue token's key;
- every response is encoded with ``json`` on each request, as a real apiserver serialises the
  objects it holds for every LIST;
- HTTPS on loopback with the tests' embedded test CA (the kubeconfig carries it), HTTP/1.1
  keep-alive, the discovery documents kubectl needs, label selectors (equality and existence).

It only reads: the benchmark never writes. Standard library only.
"""

from __future__ import annotations

import base64
import bisect
import json
import os
import ssl
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable, Optional
from urllib.parse import parse_qsl, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fakekube import TEST_CA_PEM, TEST_CERT_PEM, TEST_KEY_PEM  # noqa: E402  (the test CA only)

Key = tuple[str, str]

#: kind -> (group, version, plural, namespaced, short name)
TYPES: dict[str, tuple[str, str, str, bool, str]] = {
    "Pod": ("", "v1", "pods", True, "po"),
    "Namespace": ("", "v1", "namespaces", False, "ns"),
    "Deployment": ("apps", "v1", "deployments", True, "deploy"),
    "StatefulSet": ("apps", "v1", "statefulsets", True, "sts"),
    "DaemonSet": ("apps", "v1", "daemonsets", True, "ds"),
    "Job": ("batch", "v1", "jobs", True, ""),
    "CronJob": ("batch", "v1", "cronjobs", True, "cj"),
    "KVCachePoolBinding": ("worker.gpustack.ai", "v1", "kvcachepoolbindings", True, "kvcpb"),
    "KVCachePool": ("worker.gpustack.ai", "v1", "kvcachepools", False, "kvcp"),
    "ModelDeployment": ("worker.gpustack.ai", "v1", "modeldeployments", True, "md"),
    "Setting": ("gpustack.ai", "v1", "settings", True, "set"),
}
GROUPS = ("apps", "batch", "worker.gpustack.ai", "gpustack.ai")


class NotServed(Exception):
    def __init__(self, code: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.code, self.reason = code, reason


class Collection:
    """The objects of one resource, sorted by (namespace, name) as the watch cache keeps them."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.group, self.version, self.plural, self.namespaced, self.short = TYPES[kind]
        self.keys: list[Key] = []
        self.objects: dict[Key, dict] = {}

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def load(self, objects: Iterable[dict]) -> None:
        for obj in objects:
            meta = obj["metadata"]
            self.objects[(meta.get("namespace", "") if self.namespaced else "", meta["name"])] = obj
        self.keys = sorted(self.objects)

    def span(self, namespace: str) -> tuple[int, int]:
        if not namespace:
            return 0, len(self.keys)
        return (bisect.bisect_left(self.keys, (namespace, "")),
                bisect.bisect_left(self.keys, (namespace + "\0", "")))


def selector_matcher(selector: str) -> Callable[[dict], bool]:
    """Label selectors in the equality (=, ==, !=) and existence (k, !k) forms."""
    tests: list[Callable[[dict], bool]] = []
    for term in (t.strip() for t in selector.split(",") if t.strip()):
        if "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif term.startswith("!"):
            key = term[1:].strip()
            tests.append(lambda labels, k=key: k not in labels)
        elif " " in term:
            raise NotServed(400, f"unsupported label selector {term!r}", "BadRequest")
        else:
            tests.append(lambda labels, k=term: k in labels)
    return lambda obj: all(test((obj.get("metadata") or {}).get("labels") or {}) for test in tests)


def _token(rv: str, key: Key) -> str:
    return base64.urlsafe_b64encode(json.dumps({"rv": rv, "start": list(key)}).encode()).decode()


def _untoken(token: str) -> tuple[str, Key]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return str(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError):
        raise NotServed(400, "continue key is not valid", "BadRequest") from None


class BenchApiServer:
    """Start with ``with BenchApiServer(objects) as server:``; ``server.write_kubeconfig(path)``."""

    RESOURCE_VERSION = "1000"

    def __init__(self, objects: Iterable[dict]) -> None:
        self.collections = {kind: Collection(kind) for kind in TYPES}
        by_kind: dict[str, list[dict]] = {kind: [] for kind in TYPES}
        for number, obj in enumerate(objects):
            if obj.get("kind") in by_kind:
                meta = obj.setdefault("metadata", {})
                meta.setdefault("uid", f"00000000-0000-4000-8000-{number:012d}")
                meta.setdefault("resourceVersion", str(number + 1))
                meta.setdefault("creationTimestamp", "2025-01-01T00:00:00Z")
                by_kind[obj["kind"]].append(obj)
        for kind, found in by_kind.items():
            self.collections[kind].load(found)
        self.by_path = {(c.group, c.version, c.plural): c for c in self.collections.values()}
        self.request_count = 0
        self.list_count = 0
        self._counting = threading.Lock()
        self._httpd: Optional[ThreadingHTTPServer] = None

    # --- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> "BenchApiServer":
        handler = type("Handler", (_Handler,), {"api": self})
        self._httpd = _TLSServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_: Any) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"https://127.0.0.1:{self._httpd.server_address[1]}"

    def clear_log(self) -> None:
        with self._counting:
            self.request_count = self.list_count = 0

    def write_kubeconfig(self, path: Path) -> Path:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "bench",
            "clusters": [{"name": "bench", "cluster": {
                "server": self.url,
                "certificate-authority-data": base64.b64encode(TEST_CA_PEM.encode()).decode()}}],
            "users": [{"name": "bench", "user": {"token": "bench-token"}}],
            "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
        }
        Path(path).write_text(json.dumps(config, indent=2), encoding="utf-8")
        return Path(path)

    # --- answering ---------------------------------------------------------------------------

    def answer(self, method: str, target: str) -> tuple[int, bytes]:
        split = urlsplit(target)
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        with self._counting:
            self.request_count += 1
            self.list_count += method == "GET" and "limit" in query
        try:
            if method != "GET":
                raise NotServed(405, f"the benchmark's server only reads (not {method})", "MethodNotAllowed")
            return 200, json.dumps(self.route([p for p in split.path.split("/") if p], query)).encode()
        except NotServed as error:
            status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": str(error), "reason": error.reason, "code": error.code}
            return error.code, json.dumps(status).encode()

    def route(self, parts: list[str], query: dict[str, str]) -> dict:
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if parts == ["apis"]:
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group(g) for g in GROUPS]}
        if parts == ["version"]:
            return {"major": "1", "minor": "33", "gitVersion": "v1.33.0", "platform": "linux/amd64"}
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) == 2 and parts[1] in GROUPS:
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group(parts[1])}
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise NotServed(404, "the server could not find the requested resource", "NotFound")
        if not rest:
            return self._resources(group, version)
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        collection = self.by_path.get((group, version, rest[0]))
        if collection is None or len(rest) > 2:
            raise NotServed(404, "the server could not find the requested resource", "NotFound")
        if len(rest) == 2:
            return self._get(collection, namespace, rest[1])
        return self._list(collection, namespace, query)

    def _group(self, group: str) -> dict:
        version = {"groupVersion": f"{group}/v1", "version": "v1"}
        return {"name": group, "versions": [version], "preferredVersion": version}

    def _resources(self, group: str, version: str) -> dict:
        found = [c for c in self.collections.values() if c.group == group and c.version == version]
        if not found:
            raise NotServed(404, "the server could not find the requested resource", "NotFound")
        resources = []
        for c in found:
            resources.append({"name": c.plural, "singularName": c.kind.lower(), "namespaced": c.namespaced,
                              "kind": c.kind, "verbs": ["get", "list"],
                              **({"shortNames": [c.short]} if c.short else {})})
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": resources}

    def _get(self, collection: Collection, namespace: str, name: str) -> dict:
        found = collection.objects.get((namespace if collection.namespaced else "", name))
        if found is None:
            raise NotServed(404, f'{collection.plural} "{name}" not found', "NotFound")
        return found

    def _list(self, collection: Collection, namespace: str, query: dict[str, str]) -> dict:
        """One page: a binary search to where the last page stopped, then at most `limit` matches."""
        matches = selector_matcher(query.get("labelSelector", ""))
        limit = int(query.get("limit") or 0)
        lo, hi = collection.span(namespace)
        rv, start = self.RESOURCE_VERSION, lo
        if query.get("continue"):
            rv, last = _untoken(query["continue"])
            start = max(lo, bisect.bisect_right(collection.keys, last, lo, hi))
        items, i = [], start
        while i < hi and not (limit and len(items) >= limit):
            obj = collection.objects[collection.keys[i]]
            i += 1
            if matches(obj):
                items.append(obj)
        meta: dict = {"resourceVersion": rv}
        if limit and len(items) >= limit and i < hi:
            meta["continue"] = _token(rv, collection.keys[i - 1])
            if "labelSelector" not in query:
                meta["remainingItemCount"] = hi - i
        return {"kind": f"{collection.kind}List", "apiVersion": collection.api_version,
                "metadata": meta, "items": items}


class _TLSServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type) -> None:
        super().__init__(address, handler)
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        descriptor, pem = tempfile.mkstemp(suffix=".pem")
        try:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(TEST_CERT_PEM + TEST_KEY_PEM)
            self.tls.load_cert_chain(pem)
        finally:
            os.unlink(pem)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """The TLS handshake runs in the connection's thread, never in the accepting one."""
        request.settimeout(10)
        connection = self.tls.wrap_socket(request, server_side=True)
        try:
            connection.settimeout(None)
            super().finish_request(connection, client_address)
        finally:
            connection.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up mid-request


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    api: BenchApiServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        status, body = self.api.answer(self.command, self.path)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

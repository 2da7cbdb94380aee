"""HTTP: the TLS server, the request entry point and log, authentication, routing, discovery,
SelfSubjectAccessReview, and the kubeconfig that points a client here.
"""
from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Iterable, Optional
from urllib.parse import parse_qsl, urlsplit

from .resources import (
    BUILTIN_GROUPS,
    DEFAULT_GROUPS,
    JSON,
    RESOURCE_TYPES,
    ApiError,
    ResourceType,
    bad_request,
    find_type,
)
from .tls import TEST_CA_PEM, _peer_common_name, _server_ssl_context
from .wire import PROTOBUF, _Response, _Target, _try_json, ssar_from_protobuf

if TYPE_CHECKING:
    from . import FakeKube

#: The version of the exec credential protocol a kubeconfig's exec plugin speaks here.
EXEC_API_VERSION = "client.authentication.k8s.io/v1"


@dataclass
class RequestRecord:
    method: str
    path: str
    query: dict[str, str]
    content_type: Optional[str]
    body: Any
    status: Optional[int]
    time: float  # time.monotonic() at arrival
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""
    #: Every header line in order (``headers`` keeps only the last of a repeated name).
    header_lines: list[tuple[str, str]] = field(default_factory=list)
    #: The TLS server name the client asked for (SNI), and the CN of the verified client
    #: certificate it presented (None: none presented).
    sni: Optional[str] = None
    client_cert: Optional[str] = None
    #: Which TCP connection carried it (1, 2, ... in the order accepted), and whether that socket
    #: sends without Nagle's delay: what keep-alive and a prompt answer depend on, told without a clock.
    connection: int = 0
    nodelay: bool = False
    #: The request target exactly as sent (path and query, percent-encoding kept).
    target: str = ""

    def header_values(self, name: str) -> list[str]:
        """Every value of a (repeatable) header, e.g. ``Impersonate-Group``."""
        return [v for k, v in self.header_lines if k.lower() == name.lower()]


def _nodelay(conn: socket.socket) -> bool:
    """Whether the socket has Nagle's algorithm off (TCP_NODELAY), so a small answer is sent at once."""
    try:
        return bool(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    except OSError:
        return False


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """A request's body, as Content-Length or chunked transfer coding says (also tests/_proxy.py's)."""
    if "chunked" not in (handler.headers.get("Transfer-Encoding") or "").lower():
        length = int(handler.headers.get("Content-Length") or 0)
        return handler.rfile.read(length) if length else b""
    out = bytearray()
    while True:
        size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return bytes(out)
        out += handler.rfile.read(size)
        handler.rfile.readline()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    fake: "FakeKube"
    ssl_context: Optional[ssl.SSLContext] = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Runs in the connection's own thread, so a TLS handshake never blocks accept()."""
        if self.ssl_context is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(10)
        conn = self.ssl_context.wrap_socket(request, server_side=True)
        try:
            conn.settimeout(None)
            super().finish_request(conn, client_address)
        finally:
            conn.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # handshake failures, clients hanging up mid-request


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def setup(self) -> None:
        super().setup()
        self.connection_number = self.server.fake._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, False)

    def _dispatch(self) -> None:
        self.server.fake._serve(self, self.command)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch

    def read_body(self) -> bytes:
        return read_body(self)

    def send(self, status: int, body: bytes, content_type: str,
             headers: dict[str, str], pace: float = 0.0) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command == "HEAD":
            return
        if not pace:
            self.wfile.write(body)
            return
        for index in range(len(body)):  # dribble: until the client gives up
            try:
                self.wfile.write(body[index:index + 1])
                self.wfile.flush()
            except OSError:
                return
            time.sleep(pace)


class ServerMixin:
    """Serving HTTP: lifecycle, the request path up to the verb, discovery and SSAR."""

    # -- lifecycle
    @staticmethod
    def _served_groups(overrides: Optional[dict[str, Optional[Iterable[str]]]]
                       ) -> dict[str, tuple[str, ...]]:
        groups = {**BUILTIN_GROUPS, **DEFAULT_GROUPS}
        for group, versions in (overrides or {}).items():
            groups[group] = tuple(versions or ())
        return {g: v for g, v in groups.items() if v}

    def start(self) -> "FakeKube":
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        server.ssl_context = _server_ssl_context() if self.tls else None
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fakekube",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            self._release_silence()
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server = None

    def __enter__(self) -> "FakeKube":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "FakeKube not started"
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    @property
    def ca_pem(self) -> str:
        """PEM of the CA that signed the server certificate (for clients not using kubeconfig)."""
        return TEST_CA_PEM

    def _track(self, conn: socket.socket, add: bool) -> int:
        """Count a connection opened (its number) or forget one closed."""
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)
            self._connections_accepted += add
            return self._connections_accepted

    def request_log(self) -> list[tuple[str, str, dict[str, str]]]:
        """(method, path, query) of every request so far, in arrival order: what a test asserts
        was, and was not, asked (``RequestRecord.target`` keeps the raw request target)."""
        with self._log_lock:
            return [(r.method, r.path, dict(r.query)) for r in self.requests]

    def clear_log(self) -> None:
        with self._log_lock:
            self.requests.clear()

    def write_kubeconfig(self, path: Any, context: str = "fake",
                         namespace: Optional[str] = None, token: Optional[str] = None,
                         user: str = "fake-user", exec_command: Optional[list[str]] = None
                         ) -> Any:
        """Write a kubeconfig (JSON, which is YAML) pointing at this server; returns path."""
        if exec_command:
            creds: JSON = {"exec": {
                "apiVersion": EXEC_API_VERSION,
                "command": exec_command[0], "args": list(exec_command[1:]),
                "interactiveMode": "Never", "provideClusterInfo": False}}
        else:
            creds = {"token": token if token is not None else (self.token or "")}
        ctx: JSON = {"cluster": context, "user": user}
        if namespace:
            ctx["namespace"] = namespace
        cluster: JSON = {"server": self.url}
        if self.tls:
            cluster["certificate-authority-data"] = base64.b64encode(
                TEST_CA_PEM.encode()).decode()
        config = {"apiVersion": "v1", "kind": "Config", "preferences": {},
                  "clusters": [{"name": context, "cluster": cluster}],
                  "users": [{"name": user, "user": creds}],
                  "contexts": [{"name": context, "context": ctx}],
                  "current-context": context}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(config, fh, indent=2)
        return path

    # -- request entry point
    def _serve(self, handler: _Handler, method: str) -> None:
        raw = handler.read_body()
        split = urlsplit(handler.path)
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        ctype = handler.headers.get("Content-Type")
        record = RequestRecord(method, split.path, query, ctype, _try_json(raw), None,
                               time.monotonic(), dict(handler.headers.items()), raw,
                               list(handler.headers.items()), getattr(handler.connection, "fake_sni", None),
                               _peer_common_name(handler.connection), getattr(handler, "connection_number", 0),
                               _nodelay(handler.connection), handler.path)
        with self._log_lock:
            self.requests.append(record)
        if self._dropped_kept(method, getattr(handler, "answered", False), handler.path):
            handler.close_connection = True  # and no byte of answer
            return
        handler.answered = True
        self._agent.value = handler.headers.get("User-Agent")  # the write's field manager by default
        try:
            resp = self._respond(method, split.path, query, handler, raw)
        except ApiError as err:
            resp = _Response(err.code, err.raw if err.raw is not None else err.body(), headers=err.headers)
        except Exception as err:  # pragma: no cover - a bug in the fake
            resp = _Response(500, ApiError(500, f"fake apiserver bug: {err!r}").body())
        record.status = resp.status
        handler.send(resp.status, resp.encode(), resp.content_type, resp.headers, resp.pace)

    def _respond(self, method: str, path: str, query: dict[str, str], handler: _Handler,
                 raw: bytes) -> _Response:
        self._hold_if_silent(method, path)
        answer, pace, warnings = self._apply_rules(method, path)
        response = _Response(200, answer) if answer is not None else \
            self._answer(method, path, query, handler, raw)
        response.pace = pace
        if warnings:
            quoted = (text.replace("\\", "\\\\").replace('"', '\\"') for text in warnings)
            response.headers["Warning"] = ", ".join(f'299 - "{text}"' for text in quoted)
        return response

    def _answer(self, method: str, path: str, query: dict[str, str], handler: _Handler,
                raw: bytes) -> _Response:
        self._reap()
        if path in ("/version", "/version/"):
            return _Response(200, self.server_version)
        if path in ("/healthz", "/livez", "/readyz"):
            return _Response(200, b"ok", "text/plain; charset=utf-8")
        self._check_auth(handler.headers.get("Authorization"), _peer_common_name(handler.connection))
        return self._route(method, path, query, handler.headers.get("Content-Type") or "", raw)

    def _check_auth(self, header: Optional[str], client_cert: Optional[str]) -> None:
        """The bearer token, a verified client certificate, or a user of ``passwords``. The scheme
        is case-insensitive, as the apiserver's: the client's in-cluster loader sends "bearer"."""
        scheme, _, credential = (header or "").partition(" ")
        if self.token is None or (scheme.lower() == "bearer" and credential == self.token) or client_cert:
            return
        if header and header.startswith("Basic ") and self.passwords:
            try:
                user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                user, password = "", None
            if self.passwords.get(user) == password:
                return
        raise ApiError(401, "Unauthorized")

    # -- routing
    def _route(self, method: str, path: str, query: dict[str, str], ctype: str,
               raw: bytes) -> _Response:
        parts = [p for p in path.split("/") if p]
        if parts == ["api"]:
            return _Response(200, self._api_versions())
        if parts == ["apis"]:
            return _Response(200, self._group_list())
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) == 2 and parts[1] in self._groups:
            return _Response(200, self._group_doc(parts[1]))
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "the server could not find the requested resource")
        if version not in self._groups.get(group, ()):
            raise ApiError(404, "the server could not find the requested resource")
        if not rest:
            return _Response(200, self._resource_list(group, version))
        target = self._parse_target(group, version, rest)
        return self._dispatch(method, target, query, ctype, raw)

    def _parse_target(self, group: str, version: str, rest: list[str]) -> _Target:
        namespace = ""
        if rest[0] == "namespaces" and len(rest) > 2 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise ApiError(404, "the server could not find the requested resource")
        try:
            rt = find_type(rest[0], group)
        except KeyError:
            rt = None
        if rt is None or rt.plural != rest[0] or (rest[2:] and not rt.has_status) \
                or rest[2:] not in ([], ["status"]):
            raise ApiError(404, "the server could not find the requested resource")
        if (namespace and not rt.namespaced) or (rt.namespaced and not namespace
                                                 and len(rest) > 1):
            raise ApiError(404, "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else ""
        return _Target(rt, version, namespace, name, rest[2] if len(rest) > 2 else "")

    @staticmethod
    def _verb(method: str, target: _Target, query: dict[str, str]) -> str:
        if method in ("GET", "HEAD"):
            if query.get("watch") in ("true", "1"):
                return "watch"
            return "get" if target.name else "list"
        if method == "DELETE":
            return "delete" if target.name else "deletecollection"
        return {"POST": "create", "PUT": "update", "PATCH": "patch"}[method]

    def _dispatch(self, method: str, target: _Target, query: dict[str, str], ctype: str,
                  raw: bytes) -> _Response:
        verb = self._verb(method, target, query)
        rt = target.rt
        if verb not in rt.verbs or (verb == "create" and target.name) \
                or (target.sub and verb not in ("get", "update", "patch")):
            raise ApiError(405, "the server does not allow this method on the requested "
                                "resource")
        self._authorize(verb, target)
        if verb == "watch":
            raise ApiError(405, "watch is not supported by the fake API server")
        dry = self._dry_run(query)
        body = None
        if verb in ("create", "update"):
            body = self._decode_body(rt, ctype, raw)
        with self._lock:
            self._settle(rt)
            if rt.plural == "selfsubjectaccessreviews":
                return self._access_review(body, dry)
            handler = getattr(self, f"_do_{verb}")
            return handler(target, query, body=body, ctype=ctype, raw=raw, dry=dry)

    @staticmethod
    def _dry_run(query: dict[str, str]) -> bool:
        value = query.get("dryRun")
        if not value:
            return False
        if value != "All":
            raise bad_request(f'Invalid dry run value "{value}": supported values: "All"')
        return True

    def _decode_body(self, rt: ResourceType, ctype: str, raw: bytes) -> Any:
        if ctype.startswith(PROTOBUF):
            if rt.plural != "selfsubjectaccessreviews":
                raise ApiError(415, f"the fake API server only decodes {PROTOBUF} for "
                                    "SelfSubjectAccessReview; send application/json")
            return ssar_from_protobuf(raw)
        return self._parse_body(raw)

    @staticmethod
    def _parse_body(raw: bytes) -> Any:
        try:
            return json.loads(raw or b"null")
        except ValueError as err:
            raise bad_request(f"the body of the request could not be decoded as JSON: {err}") from err

    # -- discovery
    def _api_versions(self) -> JSON:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": self.url.split("//", 1)[1]}]}

    def _group_doc(self, group: str) -> JSON:
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in self._groups[group]]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions,
                "preferredVersion": versions[0]}

    def _group_list(self) -> JSON:
        groups = [self._group_doc(g) for g in self._groups if g]
        for g in groups:
            del g["kind"], g["apiVersion"]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _resource_list(self, group: str, version: str) -> JSON:
        resources: list[JSON] = []
        for rt in RESOURCE_TYPES:
            if rt.group != group:
                continue
            entry: JSON = {"name": rt.plural, "singularName": rt.singular,
                           "namespaced": rt.namespaced, "kind": rt.kind, "verbs": list(rt.verbs)}
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            if rt.categories:
                entry["categories"] = list(rt.categories)
            resources.append(entry)
            if rt.has_status:
                resources.append({"name": f"{rt.plural}/status", "singularName": "",
                                  "namespaced": rt.namespaced, "kind": rt.kind,
                                  "verbs": ["get", "patch", "update"]})
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                "resources": resources}

    # -- SelfSubjectAccessReview
    def _access_review(self, body: Any, dry: bool) -> _Response:
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        attrs = (body.get("spec") or {}).get("resourceAttributes")
        allowed = True
        if isinstance(attrs, dict):
            resource = (attrs.get("resource") or "") + \
                (f"/{attrs['subresource']}" if attrs.get("subresource") else "")
            allowed = self.is_allowed(attrs.get("verb") or "", attrs.get("group") or "",
                                      resource, attrs.get("namespace") or "", attrs.get("name") or "")
        status: JSON = {"allowed": allowed}  # RBAC gives no reason, so kubectl says "no"
        out = {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
               **{k: v for k, v in body.items() if k not in ("kind", "apiVersion")},
               "status": status}
        out.setdefault("metadata", {})
        out["metadata"].setdefault("creationTimestamp", None)
        return _Response(201, out)

"""A TLS proxy between a client (the plugin, kubectl) and an API server, real or fake: it logs
every exchange, can hold a request until the test has acted, and can run a hook after the
server answered and before the client hears it (standard library only).

It changes nothing in what passes: what the client is answered is what the server answered. So
a test reaches a moment no client option exposes (between the first and the second page of a
LIST, between the GET that checks an object and the write that follows) and acts there on the
server itself: compacts etcd, edits the object. Both answers are then the server's own.

    proxy = ApiProxy(upstream_url)               # the upstream's certificate is the test CA's
    with proxy:                                  # or proxy.start() ... proxy.stop()
        proxy.url                                # "https://127.0.0.1:<port>" (the test certificate)
        proxy.log                                # [Exchange], in the order the answers came
                                                 # (.request_headers, .headers: as sent; .body decoded)
        proxy.exchanges(method=None, path=None)  # those matching (path: a regex searched in it)
        proxy.hold(method=None, path=None, when=None, times=1) -> Hold
                                                 # matching requests wait, unsent, until release()
        proxy.after(hook, method=None, path=None, when=None, times=1)
                                                 # hook(exchange) once the server has answered;
                                                 # what the hook returns is ignored
        proxy.fail(status, method=None, path=None, when=None, times=1, message=None)
                                                 # answer a Status of ``status`` instead of sending
        proxy.clear()                            # the log emptied, holds released, hooks dropped

``when`` is a predicate of the ``Exchange`` (its ``method``, ``path``, ``query``; ``status`` and
``body`` are not known yet). Requests are sent upstream over a connection per client connection,
kept alive, so the upstream sees the client's own pace.
"""

from __future__ import annotations

import gzip
import http.client
import json
import re
import socket
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable, Optional
from urllib.parse import parse_qsl, urlsplit

from fakekube.server import _Server as _TLSServer
from fakekube.server import read_body
from fakekube.tls import TEST_CA_PEM, _server_ssl_context

#: Headers that belong to one hop, never passed on.
_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                  "upgrade", "content-length", "host"})


@dataclass
class Exchange:
    """One request and, once answered, its answer."""

    method: str
    path: str
    query: dict[str, str]
    request_body: bytes = b""
    status: Optional[int] = None
    #: The answer's body, decoded when the server gzip-coded it (the client is sent it as it came).
    body: bytes = b""
    #: The request's header lines as the client sent them, and the answer's as the server sent them.
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    headers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def json(self) -> Any:
        return _parsed(self.body)

    @property
    def request_json(self) -> Any:
        return _parsed(self.request_body)


def _parsed(data: bytes) -> Any:
    """JSON, or None when there is none."""
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None


@dataclass
class _Rule:
    method: Optional[str]
    path: Optional[re.Pattern[str]]
    when: Optional[Callable[[Exchange], bool]]
    times: Optional[int]

    def take(self, exchange: Exchange) -> bool:
        """Whether the rule applies to ``exchange`` (counting it when it does)."""
        if self.times is not None and self.times <= 0:
            return False
        if self.method and self.method.upper() != exchange.method:
            return False
        if self.path is not None and not self.path.search(exchange.path):
            return False
        if self.when is not None and not self.when(exchange):
            return False
        if self.times is not None:
            self.times -= 1
        return True


class Hold:
    """``proxy.hold(...)``: matching requests wait before they are sent upstream until
    ``release``. ``arrived`` is set once one is waiting; ``held`` is it."""

    def __init__(self, rule: _Rule) -> None:
        self.rule = rule
        self.arrived = threading.Event()
        self.released = threading.Event()
        self.held: Optional[Exchange] = None

    def release(self) -> None:
        self.released.set()

    def wait_arrived(self, timeout: float = 30) -> Exchange:
        if not self.arrived.wait(timeout):
            raise AssertionError(f"no request matching the hold arrived within {timeout}s")
        assert self.held is not None
        return self.held


@dataclass
class _Hook:
    rule: _Rule
    hook: Callable[[Exchange], Any]


@dataclass
class _Failure:
    rule: _Rule
    status: int
    message: str


@dataclass
class _State:
    log: list[Exchange] = field(default_factory=list)
    holds: list[Hold] = field(default_factory=list)
    hooks: list[_Hook] = field(default_factory=list)
    failures: list[_Failure] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class ApiProxy:
    """See the module docstring."""

    def __init__(self, upstream: str, ca_pem: str = TEST_CA_PEM) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "https" or not parts.hostname or not parts.port:
            raise ValueError(f"an https://host:port upstream is needed, not {upstream!r}")
        self.upstream = (parts.hostname, parts.port)
        self._client_ssl = ssl.create_default_context(cadata=ca_pem)
        self._lock = threading.RLock()  # a ``when`` predicate may read the log
        self._state = _State()
        self._server: Optional[_Server] = None
        self._thread: Optional[threading.Thread] = None
        self.url = ""

    # --- Life cycle -------------------------------------------------------------------------

    def start(self) -> "ApiProxy":
        server = _Server(("127.0.0.1", 0), _Handler)
        server.proxy = self
        server.ssl_context = _server_ssl_context()
        self._server = server
        self.url = f"https://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(target=server.serve_forever, name="api-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.clear()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "ApiProxy":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- What a test asks for ----------------------------------------------------------------

    @property
    def log(self) -> list[Exchange]:
        with self._lock:
            return list(self._state.log)

    @property
    def errors(self) -> list[str]:
        """Failures to reach the upstream (each also answered 502 to the client)."""
        with self._lock:
            return list(self._state.errors)

    def exchanges(self, method: Optional[str] = None, path: Optional[str] = None) -> list[Exchange]:
        pattern = re.compile(path) if path else None
        return [e for e in self.log if (method is None or e.method == method.upper())
                and (pattern is None or pattern.search(e.path))]

    def hold(self, method: Optional[str] = None, path: Optional[str] = None,
             when: Optional[Callable[[Exchange], bool]] = None, times: Optional[int] = 1) -> Hold:
        hold = Hold(_rule(method, path, when, times))
        with self._lock:
            self._state.holds.append(hold)
        return hold

    def after(self, hook: Callable[[Exchange], Any], method: Optional[str] = None, path: Optional[str] = None,
              when: Optional[Callable[[Exchange], bool]] = None, times: Optional[int] = 1) -> None:
        with self._lock:
            self._state.hooks.append(_Hook(_rule(method, path, when, times), hook))

    def fail(self, status: int, method: Optional[str] = None, path: Optional[str] = None,
             when: Optional[Callable[[Exchange], bool]] = None, times: Optional[int] = 1,
             message: Optional[str] = None) -> None:
        with self._lock:
            self._state.failures.append(_Failure(_rule(method, path, when, times), status,
                                                 message or f"injected by the test proxy: HTTP {status}"))

    def clear(self) -> None:
        with self._lock:
            for hold in self._state.holds:
                hold.release()
            self._state = _State()

    # --- The path of a request -----------------------------------------------------------------

    def _serve(self, handler: "_Handler") -> None:
        target = urlsplit(handler.path)
        exchange = Exchange(handler.command, target.path, dict(parse_qsl(target.query, keep_blank_values=True)),
                            handler.read_body(), request_headers=list(handler.headers.items()))
        with self._lock:
            hold = next((h for h in self._state.holds if h.rule.take(exchange)), None)
            failure = next((f for f in self._state.failures if f.rule.take(exchange)), None)
        if hold is not None:
            hold.held = exchange
            hold.arrived.set()
            hold.released.wait()
        if failure is not None:
            status, headers, body = failure.status, [("Content-Type", "application/json")], _status(failure)
        else:
            try:
                status, headers, body = self._forward(handler, exchange)
            except (OSError, http.client.HTTPException) as error:
                with self._lock:
                    self._state.errors.append(f"{exchange.method} {exchange.path}: {error!r}")
                status, headers, body = 502, [("Content-Type", "text/plain")], f"proxy: {error!r}".encode()
        exchange.status, exchange.headers = status, headers
        gzipped = any(k.lower() == "content-encoding" and v.lower() == "gzip" for k, v in headers)
        exchange.body = gzip.decompress(body) if gzipped else body
        with self._lock:
            hooks = [h for h in self._state.hooks if h.rule.take(exchange)]
        for hook in hooks:
            hook.hook(exchange)
        with self._lock:
            self._state.log.append(exchange)
        handler.answer(status, headers, body)

    def _forward(self, handler: "_Handler", exchange: Exchange) -> tuple[int, list[tuple[str, str]], bytes]:
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
        if exchange.request_body:
            headers["Content-Length"] = str(len(exchange.request_body))
        for attempt in (1, 2):  # the upstream may have closed a kept-alive connection meanwhile
            conn = handler.upstream_connection()
            try:
                conn.request(exchange.method, handler.path, body=exchange.request_body or None, headers=headers)
                response = conn.getresponse()
                body = response.read()
                return response.status, [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP], body
            except (http.client.RemoteDisconnected, http.client.CannotSendRequest, BrokenPipeError,
                    ConnectionResetError):
                handler.drop_upstream()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def _rule(method: Optional[str], path: Optional[str], when: Optional[Callable[[Exchange], bool]],
          times: Optional[int]) -> _Rule:
    return _Rule(method, re.compile(path) if path else None, when, times)


def _status(failure: _Failure) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": failure.message, "code": failure.status}).encode()


class _Server(_TLSServer):
    """The fake API server's threaded TLS server (a handshake in each connection's own thread)."""

    proxy: ApiProxy


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def setup(self) -> None:
        super().setup()
        self._upstream: Optional[http.client.HTTPSConnection] = None

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.drop_upstream()

    def upstream_connection(self) -> http.client.HTTPSConnection:
        if self._upstream is None:
            host, port = self.server.proxy.upstream
            self._upstream = http.client.HTTPSConnection(host, port, context=self.server.proxy._client_ssl,
                                                         timeout=120)
        return self._upstream

    def drop_upstream(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None

    def _dispatch(self) -> None:
        self.server.proxy._serve(self)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _dispatch

    def read_body(self) -> bytes:
        return read_body(self)

    def answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        try:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (OSError, socket.timeout):
            self.close_connection = True

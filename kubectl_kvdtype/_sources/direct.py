"""The direct transport: requests over a socket, ``ssl`` and ``_sources.wire`` alone
(``_sources.transport`` says when it serves), with urllib3's behaviour where the cluster source
relies on it: a pool of kept-alive connections shared by parallel requests, a kept connection the
server has closed replaced before it is used, one more try of a connection that failed to open,
and none of a request whose answer may have been lost (a write's)."""

from __future__ import annotations

import json
import os
import select
import socket
import ssl
import threading
from contextlib import contextmanager
from typing import Any, Callable, ContextManager, Iterator, Optional, Protocol, TypeVar, Union
from urllib.parse import urlsplit

from kubectl_kvdtype._kits.records import replace
from kubectl_kvdtype._kits.status import ClusterError, RequestTimeout
from kubectl_kvdtype._sources import tunnel
from kubectl_kvdtype._sources.kubeconfig import DirectSettings
from kubectl_kvdtype._sources.proxy import Proxy, target_of
from kubectl_kvdtype._sources.transport import Clock, Cut, Exchange, HeaderLines, tls_failure, unreachable
from kubectl_kvdtype._sources.wire import Broken, Closed, Wire

_Done = TypeVar("_Done")


class Credential(Protocol):
    """What gives each request its Authorization header (``credentials.ExecCredential``)."""

    def authorization(self) -> Optional[str]:
        """The header's value for the next request, None for none."""


def open_direct(settings: DirectSettings, timeout: Optional[float] = None) -> Optional[DirectTransport]:
    """The direct transport of ``settings``; None when its TLS settings do not load (a CA or
    client certificate that is no certificate): the client's transport then says what is wrong, in
    the words it always has. An exec plugin runs here, once the TLS settings have loaded (so that
    it never runs twice), for at most ``timeout`` seconds; its failure is the run's."""
    try:
        context = _tls_context(settings) if settings.tls else None
    except (ssl.SSLError, OSError, ValueError):
        return None
    credential = None
    if settings.exec_plugin is not None:
        # An exec user's plugin, run as client-go runs it (imported only for such a user).
        from kubectl_kvdtype._sources.credentials import ExecCredential, ExecPlugin

        plugin = ExecPlugin(settings.exec_plugin, settings.exec_cluster or {}, settings.exec_dir, settings.exec_user,
                            settings.exec_preferences)
        credential = ExecCredential(plugin, timeout)
        if credential.certificate is not None and context is not None:
            # The client certificate and key it returned instead of a token, loaded as the kubeconfig's own.
            cert, key = credential.certificate
            try:
                _load_client_certificate(context, replace(settings, cert_file=None, key_file=None, cert_data=cert,
                                                          key_data=key))
            except (ssl.SSLError, OSError, ValueError) as error:
                raise credential.certificate_refused(error) from None
    return DirectTransport(settings, context, credential)


def _tls_context(settings: DirectSettings) -> ssl.SSLContext:
    """The kubeconfig's CA (else the system's, as urllib3 loads them), verification and client certificate."""
    context = ssl.create_default_context(cafile=settings.ca_file, cadata=settings.ca_data)
    if not settings.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if settings.cert_file or settings.cert_data:
        _load_client_certificate(context, settings)
    return context


def _load_client_certificate(context: ssl.SSLContext, settings: DirectSettings) -> None:
    """``ssl`` loads a certificate and key from files only: a ``*-data`` setting is handed over as
    an anonymous memory file where the system has them (``_in_memory``), else written to a
    private directory (mode 0700) for the moment of loading, and removed at once (``_in_directory``)."""
    if not (settings.cert_data or settings.key_data):
        context.load_cert_chain(str(settings.cert_file), settings.key_file)
        return
    try:
        _load_placed(context, settings, _in_memory())
    except _NoMemoryFiles:
        _load_placed(context, settings, _in_directory())


#: Where a ``*-data`` setting is put for ``ssl`` to open: ``place(content, name)`` gives the path.
_Place = Callable[[bytes, str], str]


def _load_placed(context: ssl.SSLContext, settings: DirectSettings, places: ContextManager[_Place]) -> None:
    """The pair loaded, each ``*-data`` setting put where ``places`` puts it (a file setting first,
    as the client's loader takes it), and gone again once loaded."""
    with places as place:

        def put(content: Optional[bytes], name: str) -> Optional[str]:
            return None if content is None else place(content, name)

        cert = settings.cert_file or put(settings.cert_data, "client.crt")
        key = settings.key_file or put(settings.key_data, "client.key")
        context.load_cert_chain(str(cert), key)


#: Where a process's open files are named by number (Linux): an anonymous memory file is read through it.
_OWN_FILES = "/proc/self/fd"


class _NoMemoryFiles(Exception):
    """The system has no anonymous memory files, or refuses them (a sandbox's filter)."""


@contextmanager
def _in_memory() -> Iterator[_Place]:
    """Linux: each setting in an anonymous memory file (``memfd_create``), named for ``ssl`` under
    /proc/self/fd and closed once loaded. The key never enters a directory, not even for a moment,
    and nothing is left behind if the process is killed."""
    if not hasattr(os, "memfd_create") or not os.path.isdir(_OWN_FILES):
        raise _NoMemoryFiles()
    opened: list[int] = []

    def place(content: bytes, name: str) -> str:
        try:
            descriptor = os.memfd_create("kubectl-kvdtype", os.MFD_CLOEXEC)
        except OSError:
            raise _NoMemoryFiles() from None
        opened.append(descriptor)
        _write_all(descriptor, content)
        return f"{_OWN_FILES}/{descriptor}"

    try:
        yield place
    finally:
        for descriptor in opened:
            os.close(descriptor)


def _write_all(descriptor: int, content: bytes) -> None:
    """``content`` written whole to the file open as ``descriptor``."""
    view = memoryview(content)
    while view:
        view = view[os.write(descriptor, view):]


@contextmanager
def _in_directory() -> Iterator[_Place]:
    """Each setting in a file of a new private directory (mode 0700), removed with it once loaded."""
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="kubectl-kvdtype-")

    def place(content: bytes, name: str) -> str:
        path = os.path.join(directory, name)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            _write_all(descriptor, content)
        finally:
            os.close(descriptor)
        return path

    try:
        yield place
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class DirectTransport:
    """Requests to one API server over a pool of kept-alive connections (thread-safe)."""

    def __init__(self, settings: DirectSettings, context: Optional[ssl.SSLContext],
                 credential: Optional[Credential] = None) -> None:
        self.host = settings.host
        self._settings = settings
        self._context = context
        self._credential = credential
        self._base = urlsplit(settings.host).path  # a server URL's own path (a proxying gateway's) leads every request
        #: An http server behind an http(s) proxy: each request sent to the proxy, its URL whole
        #: (absolute form) and the proxy's credentials beside it, as Go sends it; no tunnel.
        self._forwarded = bool(settings.proxy and not settings.tls and settings.proxy.scheme in ("http", "https"))
        self._via: HeaderLines = []
        if self._forwarded and settings.proxy is not None:
            self._base = settings.host
            authorization = settings.proxy.authorization()
            self._via = [("Proxy-Authorization", authorization)] if authorization else []
        host = f"[{settings.hostname}]" if ":" in settings.hostname else settings.hostname  # an IPv6 address
        default = 443 if settings.tls else 80
        self._host_header = host if settings.port == default else f"{host}:{settings.port}"
        self._idle: list[Wire] = []
        self._pool = threading.Lock()

    def authorization(self) -> Optional[str]:
        if self._credential is not None:  # an exec plugin's token, renewed when due
            return self._credential.authorization()
        return self._settings.authorization  # a kubeconfig's token or basic auth: fixed for the run

    def exchange(self, method: str, path: str, headers: HeaderLines, body: Any, clock: Clock) -> Exchange:
        encoded = None if body is None else json.dumps(body).encode("utf-8")  # as the client encodes a JSON body
        headers = headers + self._via
        return self._on_a_connection(clock, lambda wire, kept: self._exchange_on(
            wire, kept, method, self._base + path, headers, encoded, clock))

    def _on_a_connection(self, clock: Clock, request: Callable[[Wire, bool], _Done]) -> _Done:
        """``request(wire, kept)`` on a kept connection if there is one, else on a new one; once
        more on a new one when the server had closed the kept one under it (``_Again``)."""
        kept = self._take()
        if kept is not None:
            try:
                return request(kept, True)
            except _Again:
                pass  # the server closed it under us: once more, on a new connection
        return request(self._connect(clock), False)

    def send_ahead(self, path: str, headers: HeaderLines, clock: Clock) -> Optional[SentAhead]:
        """A GET of ``path`` sent now, its answer read later (``Ahead.answer``, within ``clock``):
        the next page of a LIST, asked for while this one is decoded. None when it could not be
        sent (the request is then made as any other, and meets what went wrong there)."""
        target = self._base + path
        headers = headers + self._via
        kept = self._take()
        try:
            wire = kept or self._connect(clock)
            self._on(wire, clock, "GET", lambda: wire.send("GET", target, headers, None), kept is not None)
        except (ClusterError, _Again):
            return None
        return SentAhead(self, wire, kept is not None, target, headers, clock)

    def _exchange_on(self, wire: Wire, kept: bool, method: str, target: str, headers: HeaderLines,
                     body: Optional[bytes], clock: Clock) -> Exchange:
        """One request on ``wire`` (``kept``: one that has carried a request before), put back in
        the pool after it unless the answer closes it. ``_Again``: a kept connection the server
        closed before any answer to a read."""
        self._on(wire, clock, method, lambda: wire.send(method, target, headers, body), kept)
        return self._answer_on(wire, kept, method, clock)

    def stream(self, path: str, headers: HeaderLines, clock: Clock,
               read: Callable[[Iterator[bytes]], _Done]) -> tuple[Exchange, Optional[_Done]]:
        """A GET whose successful answer's body is handed to ``read`` a piece at a time as it comes,
        with no bound on its size (``read`` bounds what it keeps), and what ``read`` made of it;
        another answer is read whole, as ``exchange`` reads it (its data, and None)."""
        target, headers = self._base + path, headers + self._via
        return self._on_a_connection(clock, lambda wire, kept: self._stream_on(
            wire, kept, target, headers, clock, read))

    def _stream_on(self, wire: Wire, kept: bool, target: str, headers: HeaderLines, clock: Clock,
                   read: Callable[[Iterator[bytes]], _Done]) -> tuple[Exchange, Optional[_Done]]:
        self._on(wire, clock, "GET", lambda: wire.send("GET", target, headers, None), kept)
        head = self._on(wire, clock, "GET", lambda: wire.head("GET"), kept)
        if head.status >= 300:
            data = self._on(wire, clock, "GET", lambda: wire.whole(head), kept)
            self._release(wire, head.keep)
            return Exchange(head.status, head.retry_after, data, head.warning), None
        try:  # not tried again once the body has begun: ``read`` may have handed some of it on
            result = self._on(wire, clock, "GET", lambda: read(wire.body(head, None)), False)
        except BaseException:  # ``read`` refused what came: the rest of the body is unread
            wire.close()
            raise
        self._release(wire, head.keep)
        return Exchange(head.status, head.retry_after, b"", head.warning), result

    def _answer_on(self, wire: Wire, kept: bool, method: str, clock: Clock) -> Exchange:
        """The answer to the request sent on ``wire``; the connection put back in the pool after it
        unless the answer closes it."""
        answer = self._on(wire, clock, method, lambda: wire.answer(method), kept)
        self._release(wire, answer.keep)
        return Exchange(answer.status, answer.retry_after, answer.data, answer.warning)

    def _release(self, wire: Wire, keep: bool) -> None:
        """A connection whose answer has been read: kept for the next request, or closed."""
        if keep:
            with self._pool:
                self._idle.append(wire)
        else:
            wire.close()

    def _on(self, wire: Wire, clock: Clock, method: str, step: Callable[[], _Done], kept: bool) -> _Done:
        """``step`` (a request's sending or its answer's reading) on ``wire`` within ``clock``: a
        failure closes the connection and is said as the timeout or the unreachable server it is;
        ``_Again``: a kept connection the server closed before any answer to a read."""
        try:
            clock.attach(wire)
            wire.sock.settimeout(clock.remaining())
            return step()
        except Cut:
            wire.close()
            raise clock.timed_out() from None
        except (OSError, Closed, Broken) as error:
            wire.close()
            clock.check_timeout(isinstance(error, TimeoutError))
            if kept and method == "GET" and isinstance(error, _CLOSED_UNDER_US):
                raise _Again() from None
            raise ClusterError(unreachable(self.host, _detail(error))) from None

    def _connect(self, clock: Clock) -> Wire:
        """A new connection, TLS set up; tried twice, as urllib3 tries a connection that failed to open."""
        settings = self._settings
        if settings.proxy is not None:
            return self._tunnelled(settings.proxy, clock)
        for attempt in (1, 2):
            try:
                address = (_ascii(settings.hostname), settings.port)  # getaddrinfo takes bytes, typeshed says str
                sock = socket.create_connection(address, clock.remaining())  # type: ignore[arg-type]
            except OSError as error:
                clock.check_timeout(isinstance(error, TimeoutError))
                if attempt == 2:
                    raise ClusterError(unreachable(self.host, _detail(error))) from None
                continue
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request is sent at once, whole
                if self._context is not None:
                    name = _ascii(settings.server_name or settings.hostname)
                    sock = self._context.wrap_socket(sock, server_hostname=name)
            except ssl.SSLError as error:
                sock.close()
                clock.check_timeout(False)
                raise ClusterError(tls_failure(self.host, str(error))) from None
            except OSError as error:
                sock.close()
                clock.check_timeout(isinstance(error, TimeoutError))
                raise ClusterError(unreachable(self.host, _detail(error))) from None
            return Wire(sock, self._host_header)
        raise AssertionError("unreachable")

    def _tunnelled(self, proxy: Proxy, clock: Clock) -> Wire:
        """A new connection through ``proxy`` (``_sources.tunnel``; tried once, as Go tries it), TLS
        to the server set up through it; the proxy's failure is said as the proxy's."""
        settings = self._settings
        sock = None
        try:
            host, port = target_of(settings.host)  # as Go names it to the proxy: the case kept
            sock = tunnel.open_through(proxy, host, port, self._context, clock.remaining, connect=not self._forwarded)
            if self._context is not None:
                name = _ascii(settings.server_name or settings.hostname)
                sock = self._context.wrap_socket(sock, server_hostname=name)
        except (ssl.SSLError, OSError, RequestTimeout) as error:
            if sock is not None:
                sock.close()
            try:
                clock.check_timeout(isinstance(error, (TimeoutError, RequestTimeout)))
            except RequestTimeout as timed_out:
                if sock is not None:  # the tunnel was up: the server took the time
                    raise
                raise RequestTimeout(f"{timed_out.message}: the proxy {proxy.shown} had not opened the way to it") \
                    from None
            if isinstance(error, ssl.SSLError):
                raise ClusterError(tls_failure(self.host, str(error))) from None
            raise ClusterError(unreachable(self.host, f"through the proxy {proxy.shown}: {_detail(error)}")) from None
        return Wire(sock, self._host_header)

    def _take(self) -> Optional[Wire]:
        """A kept connection the server has not closed, if there is one."""
        with self._pool:
            while self._idle:
                wire = self._idle.pop()
                if not _closed(wire):
                    return wire
                wire.close()
        return None


class SentAhead:
    """A GET sent before its answer is wanted (``DirectTransport.send_ahead``; ``transport.Ahead``)."""

    def __init__(self, transport: DirectTransport, wire: Wire, kept: bool, target: str, headers: HeaderLines,
                 clock: Clock) -> None:
        self.clock = clock
        self._transport, self._wire, self._kept = transport, wire, kept
        self._target, self._headers = target, headers

    def answer(self) -> Exchange:
        """Its answer, read now within its clock (the caller watches it: ``Clock.watching``); a
        kept connection the server had closed carries it again on a new one, as ``exchange`` does."""
        transport = self._transport
        try:
            return transport._answer_on(self._wire, self._kept, "GET", self.clock)
        except _Again:
            return transport._exchange_on(transport._connect(self.clock), False, "GET", self._target,
                                          self._headers, None, self.clock)

    def drop(self) -> None:
        """Not wanted after all: its connection, whose answer is unread, is closed."""
        self._wire.close()


class _Again(Exception):
    """A kept connection closed under a read before any answer: the read goes again, on a new one."""


#: How a kept connection the server closed as it was taken fails before any answer.
_CLOSED_UNDER_US = (Closed, ConnectionResetError, BrokenPipeError)


def _closed(wire: Wire) -> bool:
    """Whether an idle kept connection has been closed by the server (it reads as readable), as
    urllib3 tests a pooled connection before it reuses it."""
    try:
        return bool(select.select([wire.sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _ascii(name: str) -> Union[str, bytes]:
    """A host name as ``socket`` and ``ssl`` take it: an ASCII one as bytes, taken as it is, where a
    ``str`` makes them import the IDNA codec (to encode a name that needs no encoding)."""
    return name.encode("ascii") if name.isascii() else name


def _detail(error: BaseException) -> str:
    """What failed, in the operating system's words where it has some (``Connection refused``)."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__

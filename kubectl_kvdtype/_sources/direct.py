"""The direct transport: requests over ``http.client`` and ``ssl`` alone (``_sources.transport``
says when it serves), with urllib3's behaviour where the cluster source relies on it: a pool of
kept-alive connections shared by parallel requests, a kept connection the server has closed
replaced before it is used, one more try of a connection that failed to open, and none of a
request whose answer may have been lost."""

from __future__ import annotations

import http.client
import json
import os
import select
import ssl
import threading
from typing import Any, Optional, Union
from urllib.parse import urlsplit

from kubectl_kvdtype._kits.status import ClusterError
from kubectl_kvdtype._sources.kubeconfig import DirectSettings
from kubectl_kvdtype._sources.transport import Clock, Cut, Exchange, HeaderLines, tls_failure, unreachable

_Connection = Union[http.client.HTTPConnection, http.client.HTTPSConnection]


class _TLSConnection(http.client.HTTPSConnection):
    """An HTTPS connection whose certificate is checked against ``server_name`` (the kubeconfig's
    ``tls-server-name``, else the server's host), as urllib3's ``server_hostname`` does."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext, server_name: Optional[str]) -> None:
        super().__init__(host, port, context=context)
        self._server_name = server_name or host

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)  # the TCP connection, TCP_NODELAY set
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_name)  # type: ignore[attr-defined]


def open_direct(settings: DirectSettings) -> Optional[DirectTransport]:
    """The direct transport of ``settings``; None when its TLS settings do not load (a CA or
    client certificate that is no certificate): the client's transport then says what is wrong, in
    the words it always has."""
    try:
        context = _tls_context(settings) if settings.tls else None
    except (ssl.SSLError, OSError, ValueError):
        return None
    return DirectTransport(settings, context)


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
    """``ssl`` loads a certificate and key from files only: a ``*-data`` setting is written to a
    private directory (mode 0700) for the moment of loading, and removed at once."""
    if not (settings.cert_data or settings.key_data):
        context.load_cert_chain(str(settings.cert_file), settings.key_file)
        return
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="kubectl-kvdtype-")
    try:
        cert = settings.cert_file or _written(os.path.join(directory, "client.crt"), settings.cert_data)
        key = settings.key_file or _written(os.path.join(directory, "client.key"), settings.key_data)
        context.load_cert_chain(str(cert), key)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _written(path: str, content: Optional[bytes]) -> Optional[str]:
    if content is None:
        return None
    with open(path, "wb") as handle:
        handle.write(content)
    return path


class DirectTransport:
    """Requests to one API server over a pool of kept-alive connections (thread-safe)."""

    def __init__(self, settings: DirectSettings, context: Optional[ssl.SSLContext]) -> None:
        self.host = settings.host
        self._settings = settings
        self._context = context
        self._base = urlsplit(settings.host).path  # a server URL's own path (a proxying gateway's) leads every request
        self._idle: list[_Connection] = []
        self._pool = threading.Lock()

    def authorization(self) -> Optional[str]:
        return self._settings.authorization  # a kubeconfig's token or basic auth: fixed for the run

    def exchange(self, method: str, path: str, headers: HeaderLines, body: Any, clock: Clock) -> Exchange:
        encoded = None if body is None else json.dumps(body).encode("utf-8")  # as the client encodes a JSON body
        for _ in (1, 2):  # a second time only after _Again, on a new connection (which never raises it)
            connection = self._take()
            try:
                clock.attach(connection)
                return self._exchange_on(connection, method, self._base + path, headers, encoded, clock)
            except _Again:
                continue
            except Cut:
                connection.close()
                raise clock.timed_out() from None
        raise AssertionError("unreachable")

    def _exchange_on(self, connection: _Connection, method: str, target: str, headers: HeaderLines,
                     body: Optional[bytes], clock: Clock) -> Exchange:
        fresh = connection.sock is None
        self._open(connection, clock)
        try:
            connection.putrequest(method, target, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            if body is not None:
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            clock.check_timeout(isinstance(error, TimeoutError))
            if not fresh and method == "GET" and isinstance(error, _CLOSED_UNDER_US):
                raise _Again() from None  # the server closed a kept connection as it was taken
            raise ClusterError(unreachable(self.host, _detail(error))) from None
        if response.will_close:
            connection.close()
        else:
            with self._pool:
                self._idle.append(connection)
        return Exchange(response.status, response.getheader("Retry-After"), data)

    def _open(self, connection: _Connection, clock: Clock) -> None:
        """Connect a new connection (tried twice, as urllib3 tries a connection that failed to
        open), or give a kept one what is left of the time."""
        if connection.sock is not None:
            connection.sock.settimeout(clock.remaining())
            return
        for attempt in (1, 2):
            connection.timeout = clock.remaining()
            try:
                connection.connect()
                return
            except ssl.SSLError as error:
                connection.close()
                clock.check_timeout(False)
                raise ClusterError(tls_failure(self.host, str(error))) from None
            except OSError as error:
                connection.close()
                clock.check_timeout(isinstance(error, TimeoutError))
                if attempt == 2:
                    raise ClusterError(unreachable(self.host, _detail(error))) from None

    def _take(self) -> _Connection:
        """A kept connection the server has not closed, else a new one (not yet connected)."""
        with self._pool:
            while self._idle:
                connection = self._idle.pop()
                if not _closed(connection):
                    return connection
                connection.close()
        if self._context is None:
            return http.client.HTTPConnection(self._settings.hostname, self._settings.port)
        return _TLSConnection(self._settings.hostname, self._settings.port, self._context, self._settings.server_name)


class _Again(Exception):
    """A kept connection closed under a read before any answer: the read goes again, on a new one."""


#: How a kept connection the server closed as it was taken fails before any answer.
_CLOSED_UNDER_US = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


def _closed(connection: _Connection) -> bool:
    """Whether an idle kept connection has been closed by the server (it reads as readable), as
    urllib3 tests a pooled connection before it reuses it."""
    sock = connection.sock
    if sock is None:
        return True
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _detail(error: BaseException) -> str:
    """What failed, in the operating system's words where it has some (``Connection refused``)."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__

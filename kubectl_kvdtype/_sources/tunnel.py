"""A connection to the API server through a proxy, as Go's ``net/http`` makes one for kubectl: an
``http://`` proxy asked to ``CONNECT``, an ``https://`` one the same after a TLS handshake with the
proxy itself (verified as the server is, with the proxy's name), a ``socks5://`` one through
SOCKS5 (no authentication, or a user and password, RFC 1929). The proxy URL's user and password
are sent as Go sends them: ``Proxy-Authorization: Basic``, or SOCKS5's user and password.

What a proxy answers is read bounded (a line, the header lines, the bytes of an answer before the
tunnel is up), and each failure is said in one sentence that names the proxy (its password hidden)
as the cause, with what it answered: the server behind it is never blamed for it.

Which proxy, if any, is ``_sources.proxy``'s decision; ``_sources.direct`` opens the tunnel here,
then speaks TLS and HTTP through it as it would to the server itself.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
from typing import Callable, Optional

from kubectl_kvdtype._kits import threads
from kubectl_kvdtype._kits.status import ClusterError
from kubectl_kvdtype._sources.proxy import Proxy

#: The longest line, and the most header lines, of a proxy's answer to CONNECT (``_sources.wire``'s bounds).
MAX_LINE = 65536
MAX_HEADERS = 100
#: SOCKS5's answers to CONNECT (RFC 1928, 6), as Go's SOCKS client words them.
_SOCKS_REPLIES = {1: "general SOCKS server failure", 2: "connection not allowed by ruleset",
                  3: "network unreachable", 4: "host unreachable", 5: "connection refused", 6: "TTL expired",
                  7: "command not supported", 8: "address type not supported"}


class ProxyFailure(ClusterError):
    """The proxy could not be reached, or would not or could not connect to the server (exit 3)."""


#: The time left for the request (``Clock.remaining``), asked before each read: it raises once spent.
_Timeout = Callable[[], Optional[float]]


def open_through(proxy: Proxy, host: str, port: int, context: Optional[ssl.SSLContext],
                 timeout: _Timeout, connect: bool = True) -> socket.socket:
    """A socket to ``host:port`` through ``proxy``, ready for the server's TLS (or HTTP).
    ``context``: how an https proxy is verified (the server's, as Go's transport uses one for
    both); ``timeout``: the time left, asked before each step; ``connect``: False for an http
    server behind an http(s) proxy, whose requests go to the proxy itself (no tunnel). A timeout
    raises ``TimeoutError`` (the caller says it as the request's); anything else ``ProxyFailure``."""
    if proxy.scheme not in ("http", "https", "socks5", "socks5h"):
        raise ProxyFailure(f"the proxy {proxy.shown} is not one the plugin can use: its scheme must be http, https "
                           f"or socks5 (not {proxy.scheme!r})")
    if not proxy.hostname:
        raise ProxyFailure(f"the proxy {proxy.shown} names no host")
    try:
        sock = socket.create_connection(proxy.address, timeout())
    except TimeoutError:
        raise
    except OSError as error:
        raise ProxyFailure(f"cannot reach the proxy {proxy.shown}: "
                           f"{error.strerror or error}") from None
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request is sent at once, whole
        sock.settimeout(timeout())
        if proxy.scheme == "https":
            sock = _tls_to_proxy(sock, proxy, context)
        if proxy.scheme.startswith("socks5"):
            _socks5(sock, proxy, host, port, timeout)
        elif connect:
            _connect(sock, proxy, host, port, timeout)
        if proxy.scheme == "https" and connect:
            return _bridged(sock)  # the server's TLS goes inside the proxy's
        return sock
    except BaseException:
        sock.close()
        raise


def _bridged(outer: socket.socket) -> socket.socket:
    """A plain socket whose bytes travel through ``outer`` (the TLS connection to an https proxy):
    ``ssl`` cannot run the server's TLS over a TLS socket, so it runs over one end of a socket
    pair, and a thread relays the other end to and from the proxy until either side closes. The
    server's connection is then a real socket, which the pool tests and a request's clock cuts."""
    near, far = socket.socketpair()
    outer.settimeout(None)  # the request's clock bounds the near end; the relay waits on both
    threads.start(threading.Thread(target=_relay, args=(outer, far), name="kvdtype-proxy-tls", daemon=True))
    return near


def _relay(outer: socket.socket, far: socket.socket) -> None:
    import selectors

    try:
        with selectors.DefaultSelector() as selector:
            selector.register(outer, selectors.EVENT_READ)
            selector.register(far, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    source = key.fileobj
                    data = source.recv(1 << 16)  # type: ignore[union-attr]
                    if not data:
                        return
                    (far if source is outer else outer).sendall(data)
                    while source is outer and isinstance(outer, ssl.SSLSocket) and outer.pending():
                        far.sendall(outer.recv(outer.pending()))  # decrypted already: select would not see it
    except (OSError, ValueError):
        return
    finally:
        outer.close()
        far.close()


def _target(host: str, port: int) -> str:
    """host:port as CONNECT names it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _tls_to_proxy(sock: socket.socket, proxy: Proxy, context: Optional[ssl.SSLContext]) -> ssl.SSLSocket:
    try:
        return (context or ssl.create_default_context()).wrap_socket(sock, server_hostname=proxy.hostname)
    except ssl.SSLError as error:
        raise ProxyFailure(f"TLS failure talking to the proxy {proxy.shown}: {error}") from None


def _connect(sock: socket.socket, proxy: Proxy, host: str, port: int, timeout: _Timeout) -> None:
    """HTTP CONNECT, as Go asks for it (its own User-Agent, where Go's is ``Go-http-client/1.1``); the
    tunnel is up on a 200, anything else names the proxy's answer."""
    from kubectl_kvdtype import __version__

    target = _target(host, port)
    lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}", f"User-Agent: kubectl-kvdtype/{__version__}"]
    authorization = proxy.authorization()
    if authorization:
        lines.append(f"Proxy-Authorization: {authorization}")
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8"))
        status = _answer_head(sock, proxy, timeout)
    except TimeoutError:
        raise
    except OSError as error:
        raise ProxyFailure(f"the proxy {proxy.shown} broke off the connection to {target}: "
                           f"{error.strerror or error}") from None
    version, _, rest = status.partition(" ")
    if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
        raise ProxyFailure(f"the proxy {proxy.shown} answered CONNECT with something that is not "
                           "HTTP/1.x")
    if rest[:3] != "200":
        raise ProxyFailure(f"the proxy {proxy.shown} refused to connect to {target}: {_shown(status)}")


def _answer_head(sock: socket.socket, proxy: Proxy, timeout: _Timeout) -> str:
    """The status line of the proxy's answer, its header lines read and dropped, no byte past them
    (the server's TLS follows on the same socket)."""
    status = _line(sock, proxy, timeout)
    for _ in range(MAX_HEADERS + 1):
        if _line(sock, proxy, timeout) in ("", "\r\n", "\n"):
            return status.strip()
    raise ProxyFailure(f"the proxy {proxy.shown}'s answer to CONNECT has more than {MAX_HEADERS} header lines")


def _line(sock: socket.socket, proxy: Proxy, timeout: _Timeout) -> str:
    line = bytearray()
    while not line.endswith(b"\n"):
        sock.settimeout(timeout())  # what is left of the request's time: a proxy that dribbles cannot stretch it
        byte = sock.recv(1)
        if not byte:
            if not line:
                raise ProxyFailure(f"the proxy {proxy.shown} closed the connection without answering "
                                   "CONNECT")
            break
        line += byte
        if len(line) > MAX_LINE:
            raise ProxyFailure(f"the proxy {proxy.shown}'s answer to CONNECT has a line longer than {MAX_LINE} bytes")
    return line.decode("latin-1")


def _shown(text: str) -> str:
    from kubectl_kvdtype._kits.display import cut, shown

    return cut(shown(text))


# --- SOCKS5 (RFC 1928), with a user and password (RFC 1929) ---------------------------------------

def _socks5(sock: socket.socket, proxy: Proxy, host: str, port: int, timeout: _Timeout) -> None:
    """The tunnel through a SOCKS5 proxy: the methods Go offers (none, and a user and password when
    the URL has a user), then CONNECT to the server by name (the proxy resolves it) or address."""
    target = _target(host, port)
    try:
        methods = b"\x00\x02" if proxy.username is not None else b"\x00"
        sock.sendall(b"\x05" + bytes([len(methods)]) + methods)
        version, method = _exactly(sock, 2, proxy, timeout)
        if version != 5:
            raise ProxyFailure(f"the proxy {proxy.shown} does not speak SOCKS5")
        if method == 2 and proxy.username is not None:
            _socks5_login(sock, proxy, timeout)
        elif method != 0:
            raise ProxyFailure(f"the SOCKS5 proxy {proxy.shown} accepts none of the authentication "
                               "methods offered" + ("" if proxy.username is not None else " (the URL has no user)"))
        sock.sendall(b"\x05\x01\x00" + _socks5_address(host) + port.to_bytes(2, "big"))
        _, reply, _, kind = _exactly(sock, 4, proxy, timeout)
        if reply != 0:
            said = _SOCKS_REPLIES.get(reply, f"unknown reply {reply}")
            raise ProxyFailure(f"the SOCKS5 proxy {proxy.shown} refused to connect to {target}: {said}")
        length = {1: 4, 4: 16}.get(kind) or _exactly(sock, 1, proxy, timeout)[0]
        _exactly(sock, length + 2, proxy, timeout)  # the address it connected from, and its port
    except TimeoutError:
        raise
    except OSError as error:
        raise ProxyFailure(f"the SOCKS5 proxy {proxy.shown} broke off the connection to {target}: "
                           f"{error.strerror or error}") from None


def _socks5_login(sock: socket.socket, proxy: Proxy, timeout: _Timeout) -> None:
    user = (proxy.username or "").encode("utf-8", "surrogateescape")
    password = (proxy.password or "").encode("utf-8", "surrogateescape")
    if not (0 < len(user) < 256 and len(password) < 256):
        raise ProxyFailure(f"the SOCKS5 proxy {proxy.shown}'s user and password must each be 1 to 255 bytes")
    sock.sendall(b"\x01" + bytes([len(user)]) + user + bytes([len(password)]) + password)
    if _exactly(sock, 2, proxy, timeout)[1] != 0:
        raise ProxyFailure(f"the SOCKS5 proxy {proxy.shown} refused the user and password")


def _socks5_address(host: str) -> bytes:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        name = host.encode("idna") if not host.isascii() else host.encode("ascii")
        if len(name) > 255:
            raise ProxyFailure(f"the host name {host[:64]}... is too long for SOCKS5") from None
        return b"\x03" + bytes([len(name)]) + name
    return (b"\x01" if address.version == 4 else b"\x04") + address.packed


def _exactly(sock: socket.socket, size: int, proxy: Proxy, timeout: _Timeout) -> bytes:
    data = b""
    while len(data) < size:
        sock.settimeout(timeout())
        piece = sock.recv(size - len(data))
        if not piece:
            raise ProxyFailure(f"the SOCKS5 proxy {proxy.shown} closed the connection mid-answer")
        data += piece
    return data

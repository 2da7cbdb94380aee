"""Real forward proxies for the tests, on loopback: tinyproxy (HTTP CONNECT, Debian's package) and
microsocks (SOCKS5, Debian's package), each started in the foreground and stopped after, and a
recording listener for a proxy that answers as a test says (refuses, or closes).

    with Tinyproxy(directory, auth=("alice", "s3cret")) as proxy:
        proxy.url                      # "http://127.0.0.1:<port>"
        proxy.connects()               # ["LOCALHOST:6443", ...]: each CONNECT it was asked, from its log
    with Microsocks(auth=("bob", "pw")) as socks:
        socks.url                      # "socks5://127.0.0.1:<port>"
    with Listener(b"HTTP/1.1 403 Forbidden\\r\\n\\r\\n") as listener:
        listener.url; listener.heard   # what each connection sent before the answer (bytes)
    with TlsTunnel() as proxy:         # an https:// proxy: TLS with the tests' certificate, then CONNECT
        proxy.url; proxy.connects      # "https://127.0.0.1:<port>"; ["host:port", ...]

``.ci/run`` installs tinyproxy and microsocks like its other tools.
"""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from _controlplane import free_port
from fakekube.tls import _server_ssl_context


def _wait_listening(port: int, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} ended at start: {process.stdout.read() if process.stdout else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port}")


class _Process:
    process: Optional[subprocess.Popen] = None

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)


class Tinyproxy(_Process):
    def __init__(self, directory: Path, auth: Optional[tuple[str, str]] = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = directory / f"tinyproxy-{self.port}.log"
        self.config = directory / f"tinyproxy-{self.port}.conf"
        lines = [f"Port {self.port}", "Listen 127.0.0.1", "Timeout 60", "LogLevel Connect", f'LogFile "{self.log}"',
                 "Allow 127.0.0.1", "MaxClients 50"]
        if auth:
            lines.append(f"BasicAuth {auth[0]} {auth[1]}")
        self.config.write_text("\n".join(lines) + "\n")

    def __enter__(self) -> "Tinyproxy":
        self.process = subprocess.Popen(["tinyproxy", "-d", "-c", str(self.config)], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        _wait_listening(self.port, self.process, "tinyproxy")
        return self

    def connects(self) -> list[str]:
        """host:port of each CONNECT tinyproxy was asked for, in order."""
        text = self.log.read_text() if self.log.exists() else ""
        return re.findall(r"Request \(file descriptor \d+\): CONNECT (\S+) HTTP", text)

    def requests(self) -> list[str]:
        """Each request line it was sent (CONNECT, or a request in absolute form)."""
        text = self.log.read_text() if self.log.exists() else ""
        return re.findall(r"Request \(file descriptor \d+\): (.+)", text)


class Microsocks(_Process):
    def __init__(self, auth: Optional[tuple[str, str]] = None) -> None:
        self.port = free_port()
        self.auth = auth
        user = f"{auth[0]}:{auth[1]}@" if auth else ""
        self.url = f"socks5://{user}127.0.0.1:{self.port}"

    def __enter__(self) -> "Microsocks":
        argv = ["microsocks", "-i", "127.0.0.1", "-p", str(self.port)]
        if self.auth:
            argv += ["-u", self.auth[0], "-P", self.auth[1]]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        _wait_listening(self.port, self.process, "microsocks")
        return self


class _Server:
    """A TCP server on loopback that hands each connection to ``_handle`` (in a thread of its own when
    ``threaded``) until closed."""

    threaded = False

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._socket.close()
        held = getattr(self, "_held", None)
        if held is not None:
            held.set()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return
            if self.threaded:
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
            else:
                self._handle(conn)

    def _handle(self, conn: socket.socket) -> None:
        raise NotImplementedError


def read_head(conn: socket.socket, piece: int = 65536) -> bytes:
    """What a client sent up to the blank line that ends a request's head (less, if it closed first)."""
    heard = b""
    while b"\r\n\r\n" not in heard:
        got = conn.recv(piece)
        if not got:
            break
        heard += got
    return heard


class Listener(_Server):
    """A server on loopback that answers every connection with ``answer`` once it has heard a blank
    line, then closes it (at once when ``answer`` is None), recording what it heard: a proxy that
    refuses, or a server whose answer is not HTTP."""

    def __init__(self, answer: Optional[bytes], hold: bool = False) -> None:
        self._answer = answer
        self.heard: list[bytes] = []
        #: hold: no answer, the connection kept open until the listener closes (a silent proxy).
        self._held = threading.Event() if hold else None
        self.threaded = hold
        super().__init__()
        self.url = f"http://127.0.0.1:{self.port}"

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            heard = read_head(conn) if self._answer is not None else b""
            self.heard.append(heard)
            if self._held is not None:
                self._held.wait(60)
            elif self._answer is not None:
                conn.sendall(self._answer)


class TlsTunnel(_Server):
    """An https:// forward proxy (TLS with the test certificate, 127.0.0.1 and localhost, of the
    tests' CA), which tinyproxy is not: it answers CONNECT with 200 and relays both ways."""

    threaded = True

    def __init__(self) -> None:
        self.connects: list[str] = []
        self._context = _server_ssl_context()
        super().__init__()
        self.url = f"https://127.0.0.1:{self.port}"

    def _handle(self, conn: socket.socket) -> None:
        try:
            client = self._context.wrap_socket(conn, server_side=True)
            head = read_head(client, 1)  # a byte at a time: what follows the head is the tunnel's
            if not head.endswith(b"\r\n\r\n"):
                return
            target = head.split(b" ")[1].decode()
            self.connects.append(target)
            host, port = target.rsplit(":", 1)
            upstream = socket.create_connection((host.strip("[]"), int(port)))
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        except (OSError, ssl.SSLError, IndexError, ValueError):
            conn.close()
            return
        threading.Thread(target=relay, args=(upstream, client), daemon=True).start()
        relay(client, upstream)


def relay(source: socket.socket, sink: socket.socket, counted: Optional[Callable[[int], None]] = None) -> None:
    """What ``source`` sends, to ``sink`` (each piece's size to ``counted``), until either closes."""
    try:
        while True:
            data = source.recv(1 << 16)
            if not data:
                break
            if counted is not None:
                counted(len(data))
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            try:
                end.close()
            except OSError:
                pass


def dead_port() -> int:
    """A loopback port nothing listens on."""
    return free_port()

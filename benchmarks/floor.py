"""The least a Python kubectl plugin does: LIST what it judges over TLS, decode it, print one line.

benchmarks/bench.py runs it as the kubectl plugin `kubectl floor PATH...` (a generated
`kubectl-floor` beside a compiled copy of this file, the shape of a console script), through the
same interpreter as the timed kubectl-kvdtype, as a yardstick for the plugin's fixed cost: no
argparse, no HTTP library, no YAML, no kubernetes client, only the modules below, most of which
ssl imports anyway.

It reads the JSON kubeconfig named by $KUBECONFIG as bench.py writes it (the current context's
server, certificate-authority-data and bearer token, nothing else), opens one TLS connection per
API path, each in its own thread, sends `GET PATH` (unpaged), reads the whole answer
(Content-Length, chunked, or up to the close), decodes it with `json`, and prints the number of
items per path as one JSON line. Every read is bounded: a line, the headers, the body
(MAX_BODY), and each socket wait (TIMEOUT). Exit 1 with a message on stderr if any LIST fails.
"""

import base64
import json
import os
import socket
import ssl
import sys
import threading

#: The most bytes of one answer's body read, as the plugin bounds its own (1 GiB).
MAX_BODY = 1 << 30
#: The longest status line, header line or chunk-size line read, and the most header lines.
MAX_LINE = 64 * 1024
MAX_HEADERS = 200
#: Seconds the connection and each read on it may wait.
TIMEOUT = 60.0
#: Bytes asked of the socket at a time: TLS hands over at most a record (16 KiB) per read anyway,
#: and a read allocates what it asks for.
PIECE = 64 * 1024


class Answer:
    """One HTTP/1.1 answer read off a socket, every read bounded."""

    def __init__(self, connection: ssl.SSLSocket) -> None:
        self.connection, self.buffer = connection, bytearray()

    def fill(self) -> bool:
        """Read one more piece; False at the end of the stream."""
        piece = self.connection.recv(PIECE)
        self.buffer += piece
        return bool(piece)

    def line(self) -> bytes:
        """The next line, without its CRLF."""
        while (end := self.buffer.find(b"\r\n")) < 0:
            if len(self.buffer) > MAX_LINE or not self.fill():
                raise ValueError("a line of the answer is too long or cut short")
        found = bytes(self.buffer[:end])
        del self.buffer[: end + 2]
        return found

    def exactly(self, size: int) -> bytearray:
        """The next ``size`` bytes."""
        while len(self.buffer) < size:
            if not self.fill():
                raise ValueError(f"the answer ended {size - len(self.buffer)} bytes short")
        found = self.buffer[:size]
        del self.buffer[:size]
        return found

    def headers(self) -> dict[str, str]:
        """The status (200 only) and the header lines, names lower-cased."""
        status = self.line()
        if status.split(b" ", 2)[1:2] != [b"200"]:
            raise ValueError(f"the server answered {status.decode('latin-1')!r}")
        found: dict[str, str] = {}
        for _ in range(MAX_HEADERS):
            line = self.line()
            if not line:
                return found
            name, _, value = line.decode("latin-1").partition(":")
            found[name.strip().lower()] = value.strip()
        raise ValueError(f"more than {MAX_HEADERS} header lines")

    def body(self, headers: dict[str, str]) -> bytearray:
        """The body, as the headers frame it: chunked, Content-Length, or up to the close."""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return self.chunked()
        if "content-length" in headers:
            size = int(headers["content-length"])
            if not 0 <= size <= MAX_BODY:
                raise ValueError(f"a body of {size} bytes (at most {MAX_BODY} are read)")
            return self.exactly(size)
        while self.fill():
            if len(self.buffer) > MAX_BODY:
                raise ValueError(f"a body over {MAX_BODY} bytes")
        return self.buffer

    def chunked(self) -> bytearray:
        """A chunked body, its chunks joined; the trailer lines are read and dropped."""
        found = bytearray()
        while size := int(self.line().split(b";", 1)[0], 16):
            if len(found) + size > MAX_BODY:
                raise ValueError(f"a body over {MAX_BODY} bytes")
            found += self.exactly(size)
            if self.line():
                raise ValueError("a chunk not followed by CRLF")
        for _ in range(MAX_HEADERS):
            if not self.line():
                return found
        raise ValueError(f"more than {MAX_HEADERS} trailer lines")


def cluster() -> tuple[str, int, ssl.SSLContext, str]:
    """(host, port, a TLS context trusting the cluster's CA, the bearer token) of the current context."""
    with open(os.environ["KUBECONFIG"], encoding="utf-8") as handle:
        config = json.load(handle)
    context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
    server = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    scheme, _, address = server["server"].partition("://")
    if scheme != "https":
        raise ValueError(f"only https servers are read, not {server['server']!r}")
    host, _, port = address.rstrip("/").rpartition(":")
    authority = base64.b64decode(server["certificate-authority-data"]).decode("ascii")
    return host, int(port), ssl.create_default_context(cadata=authority), user["token"]


def get(host: str, port: int, tls: ssl.SSLContext, token: str, path: str) -> dict:
    """One LIST over its own TLS connection: the decoded answer."""
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
               "Accept: application/json\r\nConnection: close\r\n\r\n")
    with socket.create_connection((host, port), timeout=TIMEOUT) as raw:
        with tls.wrap_socket(raw, server_hostname=host) as connection:
            connection.sendall(request.encode("latin-1"))
            answer = Answer(connection)
            return json.loads(answer.body(answer.headers()))


def main() -> int:
    host, port, tls, token = cluster()
    found: dict[str, object] = {}

    def one(path: str) -> None:
        try:
            found[path] = len(get(host, port, tls, token, path).get("items") or [])
        except Exception as error:  # any failure is reported as one line, never a thread's traceback
            found[path] = error

    threads = [threading.Thread(target=one, args=(path,)) for path in sys.argv[1:]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = {path: error for path, error in found.items() if isinstance(error, Exception)}
    for path, error in failed.items():
        print(f"kubectl-floor: GET {path}: {error}", file=sys.stderr)
    print(json.dumps({path: found[path] for path in sys.argv[1:] if path not in failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

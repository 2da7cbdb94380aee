"""HTTP/1.1 as the direct transport speaks it (``_sources.direct``): a request written whole, an
answer read bounded. ``http.client`` would do the same, but importing it imports the ``email``
package (to parse headers), which costs a small run as much as the TLS module; the API server's
answers need far less: a status line, a few headers, and a body framed by Content-Length, chunked
transfer coding, or the connection's end.

Every line read is bounded (``MAX_LINE``), and so is the number of header lines (``MAX_HEADERS``),
as ``http.client`` bounds them, and a body's bytes (``MAX_BODY``, read a piece at a time)."""

from __future__ import annotations

import socket
from typing import NamedTuple, Optional

#: The longest status, header or chunk-size line read (``http.client``'s bound), and the most header lines.
MAX_LINE = 65536
MAX_HEADERS = 100
#: The most bytes one answer's body may hold, on either transport: a LIST page is 500 objects, a
#: few MB, and even 500 objects at etcd's 1.5 MiB limit on one would fit.
MAX_BODY = 1 << 30
#: A body is read a piece at a time: a length the server claims is never allocated before it comes.
_PIECE = 1 << 20


def too_large() -> str:
    """What an answer past ``MAX_BODY`` is said as (both transports say it)."""
    return f"the server's answer holds more than {MAX_BODY >> 20} MiB, the most read of one answer"


class Closed(Exception):
    """The connection ended before any byte of an answer: the server closed it (a kept connection
    it had let go), or it was cut."""


class Broken(Exception):
    """An answer that is not HTTP/1.x, breaks a bound, or ends before its body does."""


class Answer(NamedTuple):
    status: int
    retry_after: Optional[str]
    data: bytes
    #: Whether the connection may carry another request (HTTP/1.1 without ``Connection: close``).
    keep: bool
    #: The Warning header's value (its repeated lines joined by commas), if any.
    warning: Optional[str] = None


class Wire:
    """One connection to the server (``sock``: what a request's clock cuts when time is up)."""

    def __init__(self, sock: socket.socket, host: str) -> None:
        self.sock = sock
        self._host = host
        self._reader = sock.makefile("rb")
        self._left = MAX_BODY  # of the answer being read

    def close(self) -> None:
        self._reader.close()
        self.sock.close()

    def send(self, method: str, target: str, headers: list[tuple[str, str]], body: Optional[bytes]) -> None:
        """The request, whole: its lines are Latin-1 (header values were checked to be)."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host}", *(f"{n}: {v}" for n, v in headers)]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))

    def answer(self, method: str) -> Answer:
        """The answer to the request sent (an interim 1xx answer skipped)."""
        while True:
            version, status, headers = self._head()
            if not 100 <= status < 200:
                break
        keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        self._left = MAX_BODY
        if method == "HEAD" or status in (204, 304):
            data = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            data = self._chunked()
        elif "content-length" in headers:
            data = self._exactly(_number(headers["content-length"], 10))
        else:  # framed by the connection's end
            data, keep = self._exactly(MAX_BODY + 1, to_the_end=True), False
        if data and headers.get("content-encoding", "").lower() == "gzip":  # (a 204 says gzip of nothing)
            data = gunzipped(data)
        return Answer(status, headers.get("retry-after"), data, keep, headers.get("warning"))

    def _head(self) -> tuple[str, int, dict[str, str]]:
        line = self._line()
        if not line:
            raise Closed("Remote end closed connection without response")
        version, _, rest = line.decode("latin-1").strip().partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not (code.isdigit() and len(code) == 3):
            raise Broken("the server's answer is not HTTP/1.x")
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            line = self._line()
            if line in (b"\r\n", b"\n", b""):
                return version, int(code), headers
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip()
            if name == "warning" and name in headers:  # repeated lines, one list (RFC 9110 5.3)
                value = f"{headers[name]}, {value}"
            headers[name] = value  # else the last of a repeated name: none the plugin reads repeats
        raise Broken(f"the server's answer has more than {MAX_HEADERS} header lines")

    def _chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = _number(self._line().split(b";", 1)[0].strip().decode("latin-1"), 16)
            if size == 0:
                while self._line() not in (b"\r\n", b"\n", b""):  # trailer lines, if any
                    pass
                return b"".join(parts)
            parts.append(self._exactly(size))
            self._line()  # the chunk's CRLF

    def _exactly(self, size: int, to_the_end: bool = False) -> bytes:
        """``size`` bytes of the body, within what is left of ``MAX_BODY``; ``to_the_end``: as many
        as come before the connection's end (``size`` is then a bound, not a length)."""
        if size > self._left and not to_the_end:
            raise Broken(too_large())
        parts = []
        wanted = size
        while wanted:
            piece = self._reader.read(min(wanted, _PIECE))
            if not piece:
                if to_the_end:
                    break
                raise Broken(f"the server's answer ended {wanted} bytes short of its length")
            parts.append(piece)
            wanted -= len(piece)
        read = size - wanted
        if read > self._left:
            raise Broken(too_large())
        self._left -= read
        return b"".join(parts)

    def _line(self) -> bytes:
        line = self._reader.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise Broken(f"the server's answer has a line longer than {MAX_LINE} bytes")
        return line


def gunzipped(data: bytes, limit: int = MAX_BODY) -> bytes:
    """A gzip-coded body decoded (as kubectl asks for it: ``Accept-Encoding: gzip``), no more of it
    than ``limit`` (``MAX_BODY``): a small body that decodes to more (a hostile server's gzip bomb)
    is refused once the bound is passed, decoded a piece at a time until then, so that it costs no
    more memory than the largest answer read."""
    import zlib

    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip's header and trailer
    parts, size, rest = [], 0, data
    try:
        while not decoder.eof:
            part = decoder.decompress(rest, _PIECE)
            rest = decoder.unconsumed_tail
            if not part and not rest:
                break
            size += len(part)
            if size > limit:
                raise Broken(too_large())
            parts.append(part)
    except zlib.error as error:
        raise Broken(f"the server's gzip-coded answer does not decode ({error})") from None
    if not decoder.eof:
        raise Broken("the server's gzip-coded answer ends before its data does")
    return b"".join(parts)


_DIGITS = {10: frozenset("0123456789"), 16: frozenset("0123456789abcdefABCDEF")}


def _number(text: str, base: int) -> int:
    """A length as HTTP writes one: digits only (``int`` alone would take a sign, blanks or ``_``)."""
    if not text or not set(text) <= _DIGITS[base]:
        raise Broken("the server's answer ended early, or frames its body with something that is not a length")
    return int(text, base)

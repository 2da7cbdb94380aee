"""HTTP/1.1 as the direct transport speaks it (``_sources.direct``): a request written whole, an
answer read bounded. ``http.client`` would do the same, but importing it imports the ``email``
package (to parse headers), which costs a small run as much as the TLS module; the API server's
answers need far less: a status line, a few headers, and a body framed by Content-Length, chunked
transfer coding, or the connection's end.

Every line read is bounded (``MAX_LINE``), and so is the number of header lines (``MAX_HEADERS``),
as ``http.client`` bounds them, and a body's bytes (``MAX_BODY``, read a piece at a time), unless
its reader takes it a piece at a time as it comes (``Wire.body``) and bounds what it keeps itself:
an unpaged LIST's objects (``_sources.lists``)."""

from __future__ import annotations

import socket
from typing import Iterator, NamedTuple, Optional

#: The longest status, header or chunk-size line read (``http.client``'s bound), and the most header lines.
MAX_LINE = 65536
MAX_HEADERS = 100
#: The most bytes one answer's body may hold when it is read whole, on either transport: a LIST
#: page is 500 objects, a few MB, and even 500 objects at etcd's 1.5 MiB limit on one would fit.
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


class Head(NamedTuple):
    """An answer's status line and headers: what it says, and how its body is framed."""

    status: int
    retry_after: Optional[str]
    #: Whether the connection may carry another request once the body is read.
    keep: bool
    warning: Optional[str]
    #: How the body ends: ``none`` (there is none), ``chunked``, ``length`` (``length`` bytes), ``end``
    #: (the connection's end).
    framing: str
    length: int
    gzip: bool


class Wire:
    """One connection to the server (``sock``: what a request's clock cuts when time is up)."""

    def __init__(self, sock: socket.socket, host: str) -> None:
        self.sock = sock
        self._host = host
        self._reader = sock.makefile("rb")

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
        """The answer to the request sent (an interim 1xx answer skipped), its body read whole."""
        head = self.head(method)
        return Answer(head.status, head.retry_after, self.whole(head), head.keep, head.warning)

    def head(self, method: str) -> Head:
        """The status line and headers of the answer to the request sent (an interim 1xx skipped)."""
        while True:
            version, status, headers = self._head()
            if not 100 <= status < 200:
                break
        keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        framing, length = "end", 0
        if method == "HEAD" or status in (204, 304):
            framing = "none"
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            framing = "chunked"
        elif "content-length" in headers:
            framing, length = "length", _number(headers["content-length"], 10)
        else:  # framed by the connection's end
            keep = False
        gzip = headers.get("content-encoding", "").lower() == "gzip"
        return Head(status, headers.get("retry-after"), keep, headers.get("warning"), framing, length, gzip)

    def body(self, head: Head, limit: Optional[int] = MAX_BODY) -> Iterator[bytes]:
        """The body of the answer ``head`` began, a piece at a time as it comes, decoded from gzip
        if it is coded so; no more of it than ``limit`` bytes, coded and decoded (None: no bound,
        for a reader that bounds what it keeps itself). Read to its end, the connection is ready
        for the next request."""
        raw = self._raw(head, limit)
        return gunzip_pieces(raw, limit) if head.gzip else raw

    def whole(self, head: Head) -> bytes:
        """The body of the answer ``head`` began, read whole (``MAX_BODY`` at most) and decoded."""
        return b"".join(self.body(head))

    def _raw(self, head: Head, limit: Optional[int]) -> Iterator[bytes]:
        left = [limit]  # what is left of the bound, shared by the framing's reads
        if head.framing == "chunked":
            yield from self._chunked(left)
        elif head.framing == "length":
            yield from self._exactly(head.length, left)
        elif head.framing == "end":
            yield from self._exactly(None, left)

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

    def _chunked(self, left: list[Optional[int]]) -> Iterator[bytes]:
        while True:
            size = _number(self._line().split(b";", 1)[0].strip().decode("latin-1"), 16)
            if size == 0:
                while self._line() not in (b"\r\n", b"\n", b""):  # trailer lines, if any
                    pass
                return
            yield from self._exactly(size, left)
            self._line()  # the chunk's CRLF

    def _exactly(self, size: Optional[int], left: list[Optional[int]]) -> Iterator[bytes]:
        """``size`` bytes of the body (None: as many as come before the connection's end), a piece
        at a time, within what is ``left`` of the answer's bound: a length the server claims is
        never allocated before it comes."""
        if size is not None and left[0] is not None and size > left[0]:
            raise Broken(too_large())
        wanted = size
        while wanted is None or wanted:
            # what has come, at once (``read1``): a streamed body is decoded while the rest is on its way
            piece = self._reader.read1(_PIECE if wanted is None else min(wanted, _PIECE))
            if not piece:
                if wanted is None:
                    return
                raise Broken(f"the server's answer ended {wanted} bytes short of its length")
            if left[0] is not None:
                left[0] -= len(piece)
                if left[0] < 0:
                    raise Broken(too_large())
            if wanted is not None:
                wanted -= len(piece)
            yield piece

    def _line(self) -> bytes:
        line = self._reader.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise Broken(f"the server's answer has a line longer than {MAX_LINE} bytes")
        return line


def gunzip_pieces(pieces: Iterator[bytes], limit: Optional[int] = MAX_BODY) -> Iterator[bytes]:
    """A gzip-coded body decoded as its pieces come (as kubectl asks for it: ``Accept-Encoding:
    gzip``), no more of it than ``limit`` (``MAX_BODY``; None: no bound): a small body that decodes
    to more (a hostile server's gzip bomb) is refused once the bound is passed, decoded a piece at
    a time until then, so that it costs no more memory than the largest answer read."""
    import zlib

    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip's header and trailer
    size, fed = 0, False
    try:
        for rest in pieces:
            fed = fed or bool(rest)
            while not decoder.eof:
                part = decoder.decompress(rest, _PIECE)
                rest = decoder.unconsumed_tail
                size += len(part)
                if limit is not None and size > limit:
                    raise Broken(too_large())
                if part:
                    yield part
                if not rest and len(part) < _PIECE:  # all of it decoded: zlib holds nothing back
                    break
    except zlib.error as error:
        raise Broken(f"the server's gzip-coded answer does not decode ({error})") from None
    if fed and not decoder.eof:  # (a 204 says gzip of nothing)
        raise Broken("the server's gzip-coded answer ends before its data does")


_DIGITS = {10: frozenset("0123456789"), 16: frozenset("0123456789abcdefABCDEF")}


def _number(text: str, base: int) -> int:
    """A length as HTTP writes one: digits only (``int`` alone would take a sign, blanks or ``_``)."""
    if not text or not set(text) <= _DIGITS[base]:
        raise Broken("the server's answer ended early, or frames its body with something that is not a length")
    return int(text, base)

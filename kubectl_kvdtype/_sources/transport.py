"""How a request reaches the API server, and the time it may take.

Two transports carry the cluster source's requests (``_sources.cluster``), chosen per kubeconfig
by ``_sources.chooser.connect``:

- ``_sources.direct``: a socket and ``ssl`` of the standard library, speaking the HTTP/1.1 of
  ``_sources.wire``, for a kubeconfig that needs nothing more (a token or basic auth, client
  certificates, an exec credential plugin alone, a CA, the in-cluster service account, a proxy:
  ``_sources.tunnel``): most kubeconfigs, and the cheapest start a small run can have, since
  importing urllib3 and the kubernetes client costs about as much as two kubectl listings of a
  small cluster;
- ``_sources.client_transport``: the kubernetes client over urllib3, for what only it does (auth
  providers, an exec plugin beside another credential).

Both answer an :class:`Exchange` and fail in the same sentences; the request timeout bounds a
whole request on both, through the :class:`Clock` here.
"""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NamedTuple, Optional, Protocol

from kubectl_kvdtype._kits import threads
from kubectl_kvdtype._kits.status import RequestTimeout
from kubectl_kvdtype._sources.kubeconfig import Headers

#: A header line as sent: a repeated name (Impersonate-Group) is a line each.
HeaderLines = list[tuple[str, str]]


class Exchange(NamedTuple):
    """One answered request: the status, the Retry-After it gave (if any) and the whole body."""

    status: int
    retry_after: Optional[str]
    data: bytes
    #: The Warning header, if any (``_sources.server_warnings`` reads it).
    warning: Optional[str] = None


class Transport(Protocol):
    """What the cluster source asks of a transport."""

    #: The server's URL, no trailing slash: a request's URL is this and the request path.
    host: str

    def authorization(self) -> Optional[str]:
        """The Authorization header's value for the next attempt (None: none is sent)."""

    def exchange(self, method: str, url: str, headers: HeaderLines, body: Optional[bytes],
                 clock: Clock) -> Exchange:
        """Send one request and read its whole answer within ``clock``; a failure to reach the
        server raises ``ClusterError`` (``RequestTimeout`` when it is the time running out)."""


class Ahead(Protocol):
    """A GET sent before its answer is wanted: a transport that can send one has
    ``send_ahead(path, headers, clock) -> Optional[Ahead]`` (the direct one; the client's cannot)."""

    #: The time the request may take, from when it was sent.
    clock: Clock

    def answer(self) -> Exchange:
        """Its answer, read now (inside ``clock.watching()``)."""

    def drop(self) -> None:
        """Not wanted after all: its connection, whose answer is unread, is closed."""


class Connected(NamedTuple):
    """A kubeconfig made into a transport: what the cluster source needs of it."""

    transport: Transport
    namespace: str
    description: str
    impersonation: Headers


# --- The request timeout, for the whole request ----------------------------------------------
#
# A socket timeout bounds each socket operation: a server that sends its headers or body a byte
# at a time never lets one expire, and holds the request as long as it likes. So while a request
# runs (``Clock.watching``), the connection it was given is cut (its socket shut down) when the
# time is up, and the failure that follows is said as the timeout it is. A transport tells the
# request's clock which connection it took (``Clock.attach``; the client's pools find the clock in
# ``IN_FLIGHT``).

IN_FLIGHT = threading.local()  # .clock: the Clock of the request this thread is making


class Cut(Exception):
    """The clock ran out before a transport took a connection: not sent again. Not an urllib3
    exception, so urllib3 does not catch it."""


class Clock:
    """The time one request (all its attempts) may take: the request timeout and any deadline."""

    def __init__(self, timeout: Optional[float], deadline: Optional[float], what: str, host: str) -> None:
        self.start = time.monotonic()
        self.timeout = timeout
        ends = [t for t in (timeout and self.start + timeout, deadline) if t]
        self.end: Optional[float] = min(ends) if ends else None
        self.by_deadline = deadline is not None and self.end == deadline
        self.what = what
        self.host = host
        self._lock = threading.Lock()
        self._connection: Any = None
        self.cut = False

    def remaining(self) -> Optional[float]:
        """Seconds left for the next attempt (None: no limit); a spent budget fails now."""
        if self.end is None:
            return None
        left = self.end - time.monotonic()
        if left <= 0:
            raise self.timed_out()
        return left

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Inside, this thread's request loses its connection when the time is up."""
        left = self.remaining()
        if left is None:
            yield
            return
        IN_FLIGHT.clock = self
        watched = _WATCHDOG.watch(time.monotonic() + left, self._cut_connection)
        try:
            yield
        finally:
            _WATCHDOG.forget(watched)
            IN_FLIGHT.clock = None
            with self._lock:
                self._connection = None

    def attach(self, connection: Any) -> None:
        """The connection the transport took for this request (again, on a retry)."""
        with self._lock:
            if self.cut:
                raise Cut()
            self._connection = connection

    def _cut_connection(self) -> None:
        with self._lock:
            self.cut = True
            sock = getattr(self._connection, "sock", None)
        if sock is not None:
            try:  # socket.socket's own: an SSLSocket's would drop its TLS state under the reading thread
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def sleep(self, seconds: float) -> None:
        """Back off before a retry, unless the wait would outlast the budget."""
        left = self.remaining()
        if left is not None and seconds >= left:
            raise self.timed_out()
        time.sleep(seconds)

    def check_timeout(self, timed_out: bool) -> None:
        """A failure that is the time running out (a socket timeout, or the cut) is said as that."""
        if self.cut or timed_out:
            raise self.timed_out() from None

    def timed_out(self) -> RequestTimeout:
        if self.by_deadline:
            return RequestTimeout(f"{self.what}: the cluster at {self.host} did not answer before the --wait deadline")
        return RequestTimeout(f"{self.what}: the cluster at {self.host} did not answer within "
                              f"{seconds(self.timeout or 0)} (--request-timeout; 0 waits without limit)")


class _Watchdog:
    """One thread that cuts each watched request's connection when its time is up (``Clock.watching``).

    A thread per request did the same, but starting a thread waits until the new one holds the
    interpreter lock, and a parallel LIST holds it while it decodes a page: a big run's requests
    spent a few hundred milliseconds all told just starting their timers. Here a request only
    files its end time; the one thread, started with the first, sleeps until the earliest."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._due: list[list[Any]] = []  # heap of [end, order, cut], cut None once forgotten
        self._order = itertools.count()
        self._running = False

    def watch(self, end: float, cut: Callable[[], None]) -> list[Any]:
        """``cut()`` at ``end`` (``time.monotonic()``) unless forgotten before; what ``forget`` takes."""
        entry = [end, next(self._order), cut]
        with self._changed:
            heapq.heappush(self._due, entry)
            if not self._running:
                try:  # the system may refuse it (its limit on threads): the request is then refused in a sentence
                    threads.start(threading.Thread(target=self._run, name="kvdtype-watchdog", daemon=True),
                                  "the request timeout's watch")
                except threads.NoThread:
                    entry[2] = None  # forgotten: a later request starts the watch again
                    raise
                self._running = True
            self._changed.notify()
        return entry

    def forget(self, entry: list[Any]) -> None:
        with self._changed:
            entry[2] = None  # left in the heap, dropped when its time comes

    def _run(self) -> None:
        while True:
            with self._changed:
                while self._due and self._due[0][2] is None:
                    heapq.heappop(self._due)
                left = self._due[0][0] - time.monotonic() if self._due else None
                if left is None or left > 0:
                    self._changed.wait(left)
                    continue
                cut = heapq.heappop(self._due)[2]
            cut()  # outside the lock: a cut takes the clock's own


_WATCHDOG = _Watchdog()


def start_watchdog() -> None:
    """The watchdog's thread started now, before a fleet's contexts take every thread the system
    allows (``_kits.threads.NoThread`` if it cannot be had); a request starts it otherwise."""
    entry = _WATCHDOG.watch(time.monotonic(), lambda: None)
    _WATCHDOG.forget(entry)


def seconds(value: float) -> str:
    return f"{value:g}s"


def first_line(text: object) -> str:
    """The line of an error's text that says what happened (its last non-blank one)."""
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown error"


def unreachable(host: str, detail: str) -> str:
    """The sentence of a server that could not be reached, on either transport."""
    return f"cannot reach the cluster at {host}: {detail or 'connection failed'}"


def tls_failure(host: str, detail: str) -> str:
    """The sentence of a TLS handshake or certificate that failed, on either transport."""
    return f"TLS failure talking to {host}: {detail}"

"""kubectl's ``-v``: from level 6, a line on stderr for each request, as kubectl 1.37 writes it.

kubectl (client-go's ``round_trippers.go``, through klog) writes, for each request at ``-v=6``::

    I1207 12:11:40.297708   12854 round_trippers.go:632] "Response" verb="GET" url="https://..."
    status="200 OK" milliseconds=1

(one line), after ``Config loaded from file:  PATH`` for each kubeconfig file read (``config_loaded``).

klog's header (severity and date, time to the microsecond, the process id, the source), then the
structured message: the method, the URL asked, the status line (``""`` when no answer came) and the
whole request's time. The plugin writes the same line, its own source named, from the one place
every request goes through whatever its transport (:class:`Logged`, which wraps the transport a
``ClusterSource`` sends through). What kubectl shows that is a credential never is: no header is
written, and a password in the server's URL is shown as ``user:***`` (kubectl shows it whole).
Levels above 6 write nothing more (kubectl's 7 adds the request headers, 8 and 9 the bodies: a
credential and the cluster's objects). The line is written once the request has ended, at once
(``--log-flush-frequency`` has nothing to wait for).
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable, Optional, TextIO

from kubectl_kvdtype._kits.display import shown
from kubectl_kvdtype._kits.secrets import without_password
from kubectl_kvdtype._sources.transport import Clock, Exchange, HeaderLines, Transport

#: kubectl's level from which each request is logged.
REQUESTS = 6
#: The source the lines name, where klog names the Go file and line that wrote them.
SOURCE = "requestlog.py:1"


def logged(transport: Transport, verbosity: int, stream: Optional[TextIO]) -> Transport:
    """``transport`` itself below level 6 (or with no stream), else the same transport logging each request."""
    if verbosity < REQUESTS or stream is None:
        return transport
    return (LoggedAhead if hasattr(transport, "send_ahead") else Logged)(transport, stream)


class Logged:
    """A transport (``transport.Transport``) whose every request, the pages of a LIST asked ahead
    included, is written to ``stream`` once it has ended (``Line``)."""

    def __init__(self, inner: Transport, stream: TextIO) -> None:
        self._inner = inner
        self.host = inner.host
        self._log = Line(stream, without_password(inner.host))

    def authorization(self) -> Optional[str]:
        return self._inner.authorization()

    def exchange(self, method: str, url: str, headers: HeaderLines, body: Optional[Any], clock: Clock) -> Exchange:
        return self._log.around(method, url, time.monotonic(),
                                lambda: self._inner.exchange(method, url, headers, body, clock))

    def __getattr__(self, name: str) -> Any:
        """Whatever else the transport offers, as it offers it (``send_ahead`` aside: ``LoggedAhead``)."""
        return getattr(self._inner, name)


class LoggedAhead(Logged):
    """``Logged`` of a transport that sends a GET ahead and streams one (the direct one): the
    cluster source looks for ``send_ahead`` and ``stream``, so only this one has them."""

    def send_ahead(self, path: str, headers: HeaderLines, clock: Clock) -> Optional[Any]:
        started = time.monotonic()
        sent = self._inner.send_ahead(path, headers, clock)  # type: ignore[attr-defined]
        return None if sent is None else _LoggedAhead(sent, self._log, path, started)


    def stream(self, path: str, headers: HeaderLines, clock: Clock, read: Any) -> tuple[Exchange, Any]:
        """A LIST read as it comes (``DirectTransport.stream``), logged once its body has been read."""
        streamed: list[Any] = []  # what ``read`` made of the body

        def exchange() -> Exchange:
            answer, result = self._inner.stream(path, headers, clock, read)  # type: ignore[attr-defined]
            streamed.append(result)
            return answer

        return self._log.around("GET", path, time.monotonic(), exchange), streamed[0]


class _LoggedAhead:
    """A GET sent ahead (``transport.Ahead``), logged when its answer is read (its time from the sending)."""

    def __init__(self, inner: Any, log: Line, path: str, started: float) -> None:
        self.clock = inner.clock
        self._inner, self._log, self._path, self._started = inner, log, path, started

    def answer(self) -> Exchange:
        return self._log.around("GET", self._path, self._started, self._inner.answer)

    def drop(self) -> None:
        self._inner.drop()


class Line:
    """Writes one request's line, klog's header first; whole lines, from any thread."""

    def __init__(self, stream: TextIO, host: str) -> None:
        self._stream, self._host = stream, host
        self._lock = threading.Lock()

    def around(self, method: str, target: str, started: float, exchange: Callable[[], Exchange]) -> Exchange:
        """``exchange()``'s answer, its line written once it has ended (an empty status if none came)."""
        status = None
        try:
            answer = exchange()
            status = answer.status
            return answer
        finally:
            self.record(method, target, status, started)

    def record(self, method: str, target: str, status: Optional[int], started: float) -> None:
        milliseconds = int((time.monotonic() - started) * 1000)
        fields = (f'verb={_quoted(method)} url={_quoted(self._host + target)} '
                  f'status={_quoted(status_line(status))} milliseconds={milliseconds}')
        with self._lock:
            klog(self._stream, f'"Response" {fields}')


def klog(stream: TextIO, message: str) -> None:
    """``message`` as one line of klog's at level info: severity, date and time to the
    microsecond, the process id, the source, then the message, escaped into one line."""
    now = time.time()
    stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1_000_000):06d}"
    try:
        stream.write(shown(f"I{stamp} {os.getpid():>7} {SOURCE}] {message}") + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass  # stderr itself is gone: the run goes on


def config_loaded(paths: list[str], verbosity: int, stream: TextIO) -> None:
    """kubectl's first line at -v=6, for each kubeconfig file read (none in a cluster's pod)."""
    if verbosity >= REQUESTS:
        for path in paths:
            klog(stream, f"Config loaded from file:  {path}")


def status_line(status: Optional[int]) -> str:
    """The status as Go's ``Response.Status`` says it (``200 OK``); "" when no answer came."""
    if status is None:
        return ""
    import http

    try:
        return f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _quoted(text: str) -> str:
    """A value quoted as klog quotes one (Go's ``strconv.Quote``, which JSON's quoting matches for these)."""
    return json.dumps(text)

"""What the process is doing right now, shown on a terminal once it has taken a while.

Slow work (a page of a big LIST, a large ``-f`` dump, a ``--wait`` poll) calls ``note`` with a
few words; that costs an assignment. A wait made of many short requests says what it waits for
with ``during``, shown whenever none of its requests is under way. ``Ticker``, started by ``_cli`` only when stderr is a
terminal, redraws the latest note on one stderr line from a daemon thread once the run is older
than ``DELAY`` seconds, so quick runs, files and pipes never see it.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator, Mapping, Optional, TextIO

from kubectl_kvdtype._kits import settings as _settings
from kubectl_kvdtype._kits import threads
from kubectl_kvdtype._kits.display import shown

#: Seconds of silence before the first progress line.
DELAY: float = _settings.PROGRESS_DELAY.default
#: A test-only setting (docs/development.md, "Test-only settings"): the delay in seconds, so a test
#: sees the display on a run of any length instead of on a run slower than ``DELAY`` on its machine.
DELAY_VARIABLE = _settings.PROGRESS_DELAY.name
#: Seconds between redraws.
INTERVAL = 0.25

#: Per thread: (since when, what) it is doing; parallel LISTs each have one.
_notes: dict[int, tuple[float, str]] = {}
#: Per thread: (since when, what) it is waiting for (``during``), under its notes.
_waits: dict[int, tuple[float, str]] = {}
_status = ""
#: The running display (None: stderr is not a terminal), and how many questions wait for an answer.
_ticker: Optional["Ticker"] = None
_asking = 0


def note(text: str) -> None:
    """Say what this thread is doing now; the display shows the longest-running thread's note."""
    _notes[threading.get_ident()] = (time.monotonic(), text)


def done() -> None:
    """This thread's work is over (its note no longer shows)."""
    _notes.pop(threading.get_ident(), None)


@contextmanager
def during(text: str) -> Iterator[None]:
    """What this thread is waiting for while inside (``waiting until ... is gone``): shown between
    the requests of the wait, each of which says itself with ``note``."""
    key = threading.get_ident()
    previous = _waits.get(key)
    _waits[key] = (time.monotonic(), text)
    try:
        yield
    finally:
        if previous is None:
            _waits.pop(key, None)
        else:
            _waits[key] = previous


def status(text: str) -> None:
    """Another display owns the line (``Environment.live``: ``verify --wait``'s count of passing
    Pods): the ticker stops drawing, and leaves that line alone when it stops."""
    global _status
    _status = text


@contextmanager
def line() -> Iterator[None]:
    """Write a line of stderr inside (a step, a warning): the progress line is erased first and not
    redrawn meanwhile, so the line starts clean and the progress follows it."""
    ticker = _ticker
    if ticker is None:
        yield
        return
    with ticker.erased():
        yield


@contextmanager
def asking() -> Iterator[None]:
    """A question waits for an answer on the terminal inside: nothing is drawn over it."""
    global _asking
    _asking += 1
    try:
        with line():
            pass
        yield
    finally:
        _asking -= 1


def current() -> str:
    """The longest-running thread's note; else the longest wait's; else nothing."""
    for entries in (_notes, _waits):
        active = [entry for entry in list(entries.values()) if entry[1]]
        if active:
            return min(active)[1]
    return ""


def delay(environ: Mapping[str, str]) -> float:
    """``DELAY``, or the test-only override when it is a number of seconds it can take (a bad
    one is the default here: the run's start says it, ``_kits.settings.check``)."""
    return float(_settings.value_or_default(environ, _settings.PROGRESS_DELAY))


class Ticker:
    """A one-line display on a terminal's stderr of the newest ``note`` and the time taken."""

    def __init__(self, stream: TextIO, delay: float = DELAY, interval: float = INTERVAL) -> None:
        self._stream = stream
        self._delay = delay
        self._interval = interval
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._shown = False
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "Ticker":
        global _ticker
        _notes.clear()
        _waits.clear()
        status("")
        _ticker = self
        self._thread = threading.Thread(target=self._run, name="kvdtype-progress", daemon=True)
        try:
            threads.start(self._thread, "the progress line")
        except threads.NoThread:
            self._thread = None  # no progress line: the run itself goes on
        return self

    def _run(self) -> None:
        if self._stop.wait(self._delay):
            return
        while not self._stop.is_set():
            self._draw()
            self._stop.wait(self._interval)

    def _draw(self) -> None:
        text = shown(current()) or "working"
        elapsed = time.monotonic() - self._start
        with self._lock:
            if self._stop.is_set() or _status or _asking:
                return
            try:
                self._stream.write(f"\r\033[K{text} ({elapsed:.0f}s)")
                self._stream.flush()
            except (OSError, ValueError):
                return
            self._shown = True

    @contextmanager
    def erased(self) -> Iterator[None]:
        """The line erased, and nothing drawn until the block ends."""
        with self._lock:
            self._erase()
            yield

    def _erase(self) -> None:
        if self._shown and not _status:
            try:
                self._stream.write("\r\033[K")
                self._stream.flush()
            except (OSError, ValueError):
                pass
            self._shown = False

    def stop(self) -> None:
        """Erase the line (the result or an error follows on a clean terminal)."""
        global _ticker
        self._stop.set()
        with self._lock:
            self._erase()
        if _ticker is self:
            _ticker = None

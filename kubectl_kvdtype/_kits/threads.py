"""Helper threads that leave the plugin's signals to the main thread.

Python runs signal handlers in the main thread only, but the kernel gives a signal sent to the
process to any one of its threads that does not block it. One given to a helper thread (a
request's timer, a parallel LIST, the progress line) is acted on only when the main thread next
runs Python code: while the main thread waits in a socket read, Ctrl-C would wait for the
server's answer or the request timeout, forever against a silent server with
``--request-timeout 0``. So every thread the plugin starts blocks the signals it handles: they
can only reach the main thread, and interrupt its read at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from kubectl_kvdtype._kits.status import SIGNAL_STATUS

#: The signals the plugin acts on: Ctrl-C, and those that end a run as it does.
HANDLED_SIGNALS = ("SIGINT", *SIGNAL_STATUS)


def _handled() -> set[signal.Signals]:
    return {getattr(signal, name) for name in HANDLED_SIGNALS if hasattr(signal, name)}  # Windows: no SIGHUP


@contextmanager
def signals_left_to_main() -> Iterator[None]:
    """Threads started inside block ``HANDLED_SIGNALS`` (a thread starts with the signal mask of
    the thread that starts it). One that arrives meanwhile waits, and reaches the main thread
    when the block ends. A helper thread's own threads inherit its mask already."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _handled())
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def start(thread: threading.Thread) -> threading.Thread:
    """``thread.start()``, the thread blocking ``HANDLED_SIGNALS``."""
    with signals_left_to_main():
        thread.start()
    return thread

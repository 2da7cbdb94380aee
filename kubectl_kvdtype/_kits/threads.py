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
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kubectl_kvdtype._kits.status import SIGNAL_STATUS, KvdtypeError

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


class NoThread(KvdtypeError):
    """The system would not start another thread (its limit on threads or processes, or on the
    memory a thread's stack takes, as under ``ulimit -v``): said in one sentence, exit 3, where
    the work cannot be done in a thread it has already."""

    def __init__(self, what: str) -> None:
        super().__init__(f"cannot start a thread for {what}: the system's limit on threads or memory is reached")


def start(thread: threading.Thread, what: str = "the run") -> threading.Thread:
    """``thread.start()``, the thread blocking ``HANDLED_SIGNALS``; ``NoThread`` (naming ``what``
    it was for) when the system refuses one, instead of ``RuntimeError``."""
    with signals_left_to_main():
        try:
            thread.start()
        except RuntimeError as error:  # "can't start new thread": threading's word for EAGAIN and ENOMEM
            raise NoThread(what) from error
    return thread


#: Helper threads a whole run may have at once for requests side by side (``_sources.kinds``'
#: parallel LISTs), whatever the number of contexts: a fleet's contexts each run in their own
#: thread already, and each one's LISTs take helpers from this one budget, or run in that thread
#: when none is left. Enough for the default fleet's contexts to each have their reads side by side
#: (``--parallel``'s default times ``list_many``'s helpers; a test ties the three): on a link tens of
#: milliseconds away, a read left to its context's own thread is a round trip more.
MAX_HELPERS = 64
_HELPERS = threading.BoundedSemaphore(MAX_HELPERS)


def helper(target: Callable[[], None], name: str) -> bool:
    """A daemon thread running ``target``, started if the run's budget of helpers
    (``MAX_HELPERS``) and the system allow one; False, with nothing started, when either does not
    (the caller does the work itself)."""
    if not _HELPERS.acquire(blocking=False):
        return False

    def run() -> None:
        try:
            target()
        finally:
            _HELPERS.release()

    try:
        start(threading.Thread(target=run, name=name, daemon=True))
    except NoThread:
        _HELPERS.release()
        return False
    return True

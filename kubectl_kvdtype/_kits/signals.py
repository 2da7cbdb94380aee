"""How SIGTERM and SIGHUP end a run: at once, unless what is under way must end as Ctrl-C does.

A signal (a CI cancel, ``timeout``, a closed terminal) that arrives while the plugin only reads ends
the process at once and quietly, with the signal's exit status: there is nothing to resume or to
say, and no parallel LIST to wait for. A write must not be cut off half way: it ends as on
Ctrl-C, its step journaled and its message saying what is done and how to resume. So the code
that writes says so, rather than the command line being guessed from: each write enters
``in_progress`` for as long as it writes (a rebind's steps and its lease, a restore's creates, a
fix's patches, the Setting's switch and its wait), whatever flag asked for it, and while one is
open the handler raises ``Signalled`` in the main thread instead, which the write's own ``except
KeyboardInterrupt`` words. A fleet run enters it too, to say which contexts finished.

One handler for the whole process, installed by the command line (``_cli.main``) in the main
thread, where Python runs handlers; a second signal while a write ends is ignored.
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from typing import Iterator

from kubectl_kvdtype._kits.status import SIGNAL_STATUS, Signalled

#: What is under way that must end as on Ctrl-C (innermost last): ``in_progress`` keeps it.
_OPEN: list[str] = []


@contextmanager
def in_progress(what: str) -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise ``Signalled`` where the main thread is, so that the
    block ends as on Ctrl-C; ``what`` names it (``under_way``). Nested blocks stack."""
    _OPEN.append(what)
    try:
        yield
    finally:
        _OPEN.remove(what)


def under_way() -> tuple[str, ...]:
    """What is in progress now, outermost first (empty: a signal ends the run at once)."""
    return tuple(_OPEN)


def install() -> None:
    """SIGTERM and SIGHUP go to ``_handler`` (the main thread only: Python runs handlers there)."""
    for name in SIGNAL_STATUS:
        if hasattr(signal, name):  # Windows has no SIGHUP
            signal.signal(getattr(signal, name), _handler)


def _handler(number: int, _frame: object) -> None:
    status = SIGNAL_STATUS[signal.Signals(number).name]
    if not _OPEN:
        os._exit(int(status))
    for name in SIGNAL_STATUS:  # the write is ending: a second signal does not cut that short
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    raise Signalled(status)

"""The one reader of every file the plugin opens: bounded in size, in time, and in what it is.

A path comes from a flag, a kubeconfig or the environment, and may name anything: ``/dev/zero``
(endless), a FIFO nobody writes to (``open`` alone waits forever), a 1 GiB file. So every file
(manifests, kubeconfigs, token files, certificate files, engine tables, journals and backups) is
opened here without blocking, looked at (``fstat``) before a byte is read, and read by its
``FileRule``: a directory, a character or block device is refused; a FIFO (a named pipe, or the
``/dev/fd/63`` of ``--kubeconfig <(...)``) is read to its end where kubectl reads one (a kubeconfig,
``-f``), within ``wait`` seconds when given, and refused where it does not (a token file: kubectl
hangs on one); a regular file is read up to the rule's limit, and one bigger is refused without
reading it. Each refusal is an ``Unreadable``: one predicate the caller completes with what it
was reading (``the kubeconfig /x is a character device, not a kubeconfig file``).
"""

from __future__ import annotations

import os
import select
import stat
import threading
import time
from typing import Any, Optional, Sequence

from kubectl_kvdtype._kits import bounded as _bounded
from kubectl_kvdtype._kits.records import record_type

#: ``FileRule.pipes``: a FIFO is read to its end, or refused.
READ = "read"
REFUSE = "refuse"


@record_type(frozen=True)
class FileRule:
    """How one kind of file is read."""

    #: What the file should be, as a refusal says it: "a kubeconfig file".
    noun: str
    #: The most bytes read; a file holding more is refused.
    limit: int
    #: What the limit is, as a refusal says it: "the most -f reads of one input".
    bound: str
    #: How to read more, said after the bound: "set KUBECTL_KVDTYPE_MAX_FILE_MB to read bigger ones".
    hint: str = ""
    pipes: str = REFUSE
    #: What is read instead, said when a special file is refused: "-f reads files, directories and pipes".
    reads: str = ""
    #: A FIFO's content is kept for the process: a kubeconfig is read again (a fleet, each context).
    remember: bool = False

    def with_limit(self, limit: int, hint: Optional[str] = None) -> "FileRule":
        return FileRule(self.noun, limit, self.bound, self.hint if hint is None else hint, self.pipes, self.reads,
                        self.remember)


class Unreadable(OSError):
    """A file refused by its rule; ``predicate`` completes a sentence naming it ("... is a FIFO")."""

    def __init__(self, predicate: str) -> None:
        super().__init__(f"it {predicate}")
        self.predicate = predicate


#: A journal or a backup the plugin wrote (``escape rebind``, ``find-flags --fix``): its directory
#: may be shared, so what is read there is bounded like any input.
JOURNAL = FileRule("a journal or backup file", 64 << 20, "the most read of one journal or backup (the plugin "
                   "writes a few kB per object)")

_PIPES: dict[str, bytes] = {}  # FIFOs read with ``remember``: path -> content
_PIPES_LOCK = threading.Lock()


def read_bytes(path: str, rule: FileRule, wait: Optional[float] = None) -> bytes:
    """The content of ``path`` by ``rule``; ``wait``: the most seconds a FIFO may take (None: no limit).

    Raises ``Unreadable`` for what the rule refuses, ``OSError`` when it cannot be opened or read."""
    if rule.remember:
        with _PIPES_LOCK:  # parallel contexts of a fleet read the same kubeconfig
            if path in _PIPES:
                return _PIPES[path]
            return _read(path, rule, wait)
    return _read(path, rule, wait)


def read_text(path: str, rule: FileRule, wait: Optional[float] = None) -> str:
    """``read_bytes`` as UTF-8 text with universal newlines (a CRLF is one line break), as
    ``open(path, encoding="utf-8")`` reads it. A bad byte raises ``UnicodeDecodeError``."""
    text = read_bytes(path, rule, wait).decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def read_json(path: Any, rule: FileRule = JOURNAL) -> Any:
    """The JSON document in ``path`` (a ``str`` or ``Path``), read by ``rule`` and parsed by the
    bounded reader: ``OSError`` (``Unreadable`` too) or ``ValueError`` (``TooDeep`` too) when it
    cannot be."""
    return _bounded.loads(read_bytes(os.fspath(path), rule))


def is_pipe(path: str) -> bool:
    """Whether ``path`` names a FIFO (``--kubeconfig <(...)``), which ``os.path.isfile`` says is no file."""
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def refused(mode: int, rule: FileRule) -> Optional[str]:
    """The predicate refusing a file of this ``st_mode`` by ``rule``; None when it is read."""
    reads = f": {rule.reads}" if rule.reads else ""
    if stat.S_ISDIR(mode):
        return f"is a directory, not {rule.noun}{reads}"
    if stat.S_ISCHR(mode):
        return f"is a character device, not {rule.noun}{reads}"
    if stat.S_ISBLK(mode):
        return f"is a block device, not {rule.noun}{reads}"
    if stat.S_ISFIFO(mode) and rule.pipes == REFUSE:
        return f"is a FIFO (a named pipe), not {rule.noun}{reads}"
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        return f"is not a regular file, so not {rule.noun}{reads}"
    return None


def too_big(rule: FileRule) -> Unreadable:
    hint = f" ({rule.hint})" if rule.hint else ""
    return Unreadable(f"holds more than {_size(rule.limit)}, {rule.bound}{hint}")


def _read(path: str, rule: FileRule, wait: Optional[float]) -> bytes:
    # O_NONBLOCK: opening a FIFO that has no writer returns at once instead of waiting for one.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        refusal = refused(mode, rule)
        if refusal is not None:
            raise Unreadable(refusal)
        if stat.S_ISFIFO(mode):
            data = _read_pipe(fd, rule, wait)
            if rule.remember:
                _PIPES[path] = data
            return data
        os.set_blocking(fd, True)
        if os.fstat(fd).st_size > rule.limit:
            raise too_big(rule)  # without reading it: a 1 GiB file is refused at once
        chunks: list[bytes] = []
        size = 0
        while size <= rule.limit:  # /proc files say size 0: read up to the limit anyway
            chunk = os.read(fd, min(1 << 24, rule.limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > rule.limit:
            raise too_big(rule)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_pipe(fd: int, rule: FileRule, wait: Optional[float]) -> bytes:
    """A FIFO to its end (its writer closed it), within ``wait`` seconds when given."""
    try:
        (data,) = read_pipes([fd], rule.limit, None if not wait else time.monotonic() + wait)
    except PipeTimeout:
        raise Unreadable(f"is a pipe that did not end within {wait:g}s (its writer is still writing, or gone "
                         "without closing it)") from None
    except PipeOverflow:
        raise too_big(rule) from None
    return data


class PipeTimeout(Exception):
    """Pipes that had not ended by the deadline (``read_pipes``)."""


class PipeOverflow(Exception):
    """Pipes that held more than the limit (``read_pipes``)."""


def read_pipes(fds: Sequence[int], limit: int, deadline: Optional[float]) -> list[bytes]:
    """What each pipe held, read to its end (its writer closed it), all of them at once so that a
    writer filling one cannot wait on another; polled so that ``deadline`` (``time.monotonic()``;
    None: none) bounds the whole, and polled before each read, since a FIFO opened before its
    writer reads as ended (0 bytes) without a poll. ``PipeTimeout`` past the deadline,
    ``PipeOverflow`` once they hold more than ``limit`` bytes together: the caller says which in
    its own words (a FIFO given as a file, an exec plugin's output)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN | select.POLLHUP)
    chunks: dict[int, list[bytes]] = {fd: [] for fd in fds}
    writing, size = set(fds), 0
    while writing:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise PipeTimeout()
        for fd, _ in poller.poll(None if left is None else max(1, int(left * 1000))):
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                poller.unregister(fd)
                writing.discard(fd)
                continue
            chunks[fd].append(chunk)
            size += len(chunk)
            if size > limit:
                raise PipeOverflow()
    return [b"".join(chunks[fd]) for fd in fds]


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 and not limit % (1 << 20) else f"{limit} bytes"

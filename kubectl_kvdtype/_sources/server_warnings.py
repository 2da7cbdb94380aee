"""The API server's warnings (``Warning:`` response headers), read and shown as kubectl shows them.

An API server warns in a ``Warning`` header of RFC 7234's form, ``299 - "text"`` (a deprecated API
version, a field it dropped, an admission policy's warning). kubectl reads each header as
client-go's ``ParseWarningHeaders`` does (several warnings, comma-separated, in one header; a
quoted text with backslash escapes; an optional quoted date), prints the text of each code-299
warning once per run as ``Warning: TEXT`` on stderr, and with ``--warnings-as-errors`` fails once
any came. The plugin does the same through ``heard`` (every request of a run, the fleet's
contexts' too), the text escaped by ``_kits.display``, and ``count`` tells the run's end how many
it met. A header is read no longer than ``MAX_HEADER`` (the wire bounds its lines anyway).
"""

from __future__ import annotations

import re
import threading
from typing import Callable, Optional

#: The longest Warning header read; warnings past it are dropped (client-go's server side caps a
#: warning at 4 kB and all of a response's at 4 MB; a line is ``_sources.wire.MAX_LINE`` at most).
MAX_HEADER = 1 << 16

_CODE = re.compile(r"[0-9]{3}")
_lock = threading.Lock()
#: The texts shown this run, in order: each is shown once.
_shown: dict[str, None] = {}


def texts(header: str) -> list[str]:
    """The texts of the code-299 warnings of one Warning header (possibly several warnings,
    comma-separated), read as client-go reads them; a malformed one ends the reading, the ones
    before it kept."""
    found = []
    rest = header[:MAX_HEADER]
    while rest.strip():
        parsed = _one(rest)
        if parsed is None:
            break
        code, text, rest = parsed
        if code == 299 and text:
            found.append(text)
    return found


def _one(header: str) -> Optional[tuple[int, str, str]]:
    """(code, text, the rest) of the first warning of ``header``, or None where it is malformed."""
    parts = header.strip().split(" ", 2)
    if len(parts) != 3 or not _CODE.fullmatch(parts[0]) or not parts[1] or _controls(parts[1]) or not parts[2]:
        return None
    quoted = _quoted(parts[2])
    if quoted is None:
        return None
    text, rest = quoted
    try:  # a header's bytes were read as Latin-1; the text is UTF-8, or the warning is dropped
        text = text.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return None
    if _controls(text):
        return None
    if rest.startswith('"'):  # a date: anything up to the next quote
        end = rest.find('"', 1)
        if end < 0:
            return None
        rest = rest[end + 1:].strip()
    if rest and not rest.startswith(","):
        return None
    return int(parts[0]), text, rest[1:].strip()


def _quoted(text: str) -> Optional[tuple[str, str]]:
    """A quoted string with backslash escapes at the start of ``text``: (its content, the rest trimmed)."""
    if not text.startswith('"'):
        return None
    content: list[str] = []
    escaping = False
    for i, c in enumerate(text[1:], 1):
        if c == '"' and not escaping:
            return "".join(content), text[i + 1:].strip()
        if c == "\\" and not escaping:
            escaping = True
            continue
        content.append(c)
        escaping = False
    return None


def _controls(text: str) -> bool:
    """Go's ``unicode.IsControl`` of any character (C0, DEL and C1): such a warning is dropped."""
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)


def heard(header: Optional[str], show: Callable[[str], None]) -> None:
    """The warnings of a response's Warning header: each text not shown before this run handed to
    ``show`` (which prints ``Warning: TEXT``, escaped)."""
    if not header:
        return
    for text in texts(header):
        with _lock:
            if text in _shown:
                continue
            _shown[text] = None
        show(text)


def forget() -> None:
    """A new run: no warning shown yet."""
    with _lock:
        _shown.clear()


def count() -> int:
    """How many distinct warnings this run has shown."""
    with _lock:
        return len(_shown)


def received() -> str:
    """The sentence of a run that ends on ``--warnings-as-errors`` (kubectl's words)."""
    number = count()
    return f"{number} warning{'' if number == 1 else 's'} received (--warnings-as-errors)"

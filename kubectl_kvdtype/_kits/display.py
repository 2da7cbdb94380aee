"""The one function that makes a string from the cluster, a manifest or a flag safe to show.

Tenants write a Binding's dtype, an engine's name, extraArgs and annotations: free strings that
reach tables, messages, to-do lists, progress and warnings. Printed raw, an ESC sequence could
hide text or retitle the terminal, a newline could forge a table row, and a bidi or zero-width
character could reorder one. ``shown`` writes every character Python does not call printable
(controls, format and bidi characters, line and paragraph separators, unassigned code points) as
its visible escape (``\\x1b``, ``\\n``, ``\\u202e``). JSON, YAML, JUnit and SARIF keep their own
encodings and do not use it.
"""

from __future__ import annotations


def shown(text: str) -> str:
    """``text`` with each character that is not printable written as its escape."""
    if text.isprintable():  # the common case, at C speed
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


#: The most characters of one value a message shows: a value typed or answered may be 100 kB.
SHOWN_AT_MOST = 120


def cut(text: str, limit: int = SHOWN_AT_MOST) -> str:
    """``text``, or its first ``limit`` characters and how long it was: the one way a message
    shortens a value (a flag's, a setting's, a file's or a cluster's)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def cut_words(message: str, limit: int = SHOWN_AT_MOST) -> str:
    """``message`` with every run of non-blank characters longer than ``limit`` cut (``cut``): an
    error names what was typed or answered, and a 100 kB value must not fill the terminal."""
    if len(message) <= limit or all(len(word) <= limit for word in message.split()):
        return message
    return " ".join(cut(word, limit) for word in message.split(" "))

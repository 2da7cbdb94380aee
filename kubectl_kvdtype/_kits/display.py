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

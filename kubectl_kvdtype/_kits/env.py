"""The process environment the plugin talks through, so tests can swap every stream."""

from __future__ import annotations

import os
import sys
from typing import Mapping, TextIO

from kubectl_kvdtype._kits.display import shown
from kubectl_kvdtype._kits.records import field, record_type


@record_type
class Environment:
    """Standard streams and variables, read once at start.

    ``stdout`` carries the result only; ``stderr`` carries progress, warnings and errors.
    """

    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    @property
    def stdout_isatty(self) -> bool:
        return _isatty(self.stdout)

    @property
    def stderr_isatty(self) -> bool:
        return _isatty(self.stderr)

    @property
    def stdin_isatty(self) -> bool:
        return _isatty(self.stdin)

    @property
    def color(self) -> bool:
        """Colour only on a terminal, and never when NO_COLOR is set (no-color.org) or the terminal
        says it has none (TERM=dumb)."""
        return self.stdout_isatty and not self.environ.get("NO_COLOR") and self.environ.get("TERM") != "dumb"

    def warn(self, message: str) -> None:
        """One line on stderr, prefixed like kubectl's own warnings."""
        self.progress(f"Warning: {message}")

    def progress(self, message: str) -> None:
        """One line on stderr, on a line of its own (never after a progress display's text)."""
        from kubectl_kvdtype._kits import progress as _progress

        with _progress.line():
            print(shown(message), file=self.stderr)

    def live(self, line: str) -> None:
        """Rewrite one status line in place on a terminal; say nothing to a file or a pipe.
        While it is in use, it owns the line (``_kits.progress`` draws nothing over it)."""
        if self.stderr_isatty:
            from kubectl_kvdtype._kits import progress as _progress

            line = shown(line)
            _progress.status(line)
            self.stderr.write("\r\033[K" + line)
            self.stderr.flush()

    def end_live(self) -> None:
        """Leave the terminal on a fresh line after ``live``."""
        if self.stderr_isatty:
            self.stderr.write("\n")
            self.stderr.flush()

    def ask(self, question: str) -> str:
        """Ask on stderr (stdout carries results only) and read one answer from stdin; no progress
        display draws over the question while it waits."""
        from kubectl_kvdtype._kits import progress as _progress

        with _progress.asking():
            self.stderr.write(f"{shown(question)} ")
            self.stderr.flush()
            return self.stdin.readline().strip()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False

"""The process environment the plugin talks through, so tests can swap every stream."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Mapping, TextIO


@dataclass
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
        """Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
        return self.stdout_isatty and not self.environ.get("NO_COLOR")

    def warn(self, message: str) -> None:
        """One line on stderr, prefixed like kubectl's own warnings."""
        print(f"Warning: {message}", file=self.stderr)

    def progress(self, message: str) -> None:
        print(message, file=self.stderr)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False

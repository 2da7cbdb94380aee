"""The progress line, in process: when ``Ticker`` draws, what it draws, and the test-only delay.

A thread draws the line, so a test waits for what it expects to appear (bounded, never a sleep of
a fixed length) and asserts what appeared, not how long it took.
"""

from __future__ import annotations

import io
import threading
import time

import pytest

from kubectl_kvdtype._kits import progress as _progress


class _Terminal(io.StringIO):
    """A stream the ticker's thread writes to while the test reads it."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            return super().write(text)

    def seen(self) -> str:
        with self.lock:
            return self.getvalue()


def _until(condition, within: float = 10.0) -> bool:
    """Poll ``condition`` until it holds or ``within`` seconds pass (a loaded machine is slow)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@pytest.mark.parametrize(("value", "expected"), [
    (None, _progress.DELAY), ("0", 0.0), ("0.5", 0.5), ("2", 2.0),
    ("", _progress.DELAY), ("soon", _progress.DELAY), ("-1", _progress.DELAY), ("inf", _progress.DELAY),
    ("nan", _progress.DELAY),
])
def test_the_delay_is_the_default_unless_the_test_setting_says_a_number(value, expected):
    environ = {} if value is None else {_progress.DELAY_VARIABLE: value}
    assert _progress.delay(environ) == expected


def test_with_no_delay_the_latest_note_is_drawn_and_erased_at_the_end():
    terminal = _Terminal()
    ticker = _progress.Ticker(terminal, delay=0, interval=0.01).start()
    try:
        _progress.note("reading dump.yaml")
        assert _until(lambda: "reading dump.yaml (" in terminal.seen()), terminal.seen()
        _progress.note("listing pods in all namespaces")
        assert _until(lambda: "listing pods in all namespaces (" in terminal.seen()), terminal.seen()
    finally:
        _progress.done()
        ticker.stop()
    drawn = terminal.seen()
    assert drawn.startswith("\r\x1b[K") and drawn.endswith("\r\x1b[K")  # each draw, and the end, erase the line
    assert "\n" not in drawn  # one line, redrawn in place


def test_nothing_is_drawn_before_the_delay():
    terminal = _Terminal()
    ticker = _progress.Ticker(terminal, delay=3600, interval=0.01).start()
    _progress.note("reading dump.yaml")
    ticker.stop()
    _progress.done()
    assert terminal.seen() == ""  # a run shorter than the delay never sees the line, nor its erasure


def test_a_question_is_never_drawn_over():
    terminal = _Terminal()
    ticker = _progress.Ticker(terminal, delay=0, interval=0.01).start()
    try:
        _progress.note("reading dump.yaml")
        assert _until(lambda: "reading" in terminal.seen())
        with _progress.asking():
            before = terminal.seen()
            time.sleep(0.1)  # ten redraw intervals: none may draw while the question waits
            assert terminal.seen() == before
    finally:
        _progress.done()
        ticker.stop()

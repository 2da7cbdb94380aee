"""Signals owned by the write, not guessed from the flags (issue 39).

Whether SIGTERM or SIGHUP may end a run at once was once decided from the command line (``--apply``,
``escape off``/``on``): a writing subcommand without ``--apply`` would have been killed mid-write.
Now every write enters ``_kits.signals.in_progress`` for as long as it writes, and only then does
a signal raise where the main thread is, for the write to end as on Ctrl-C; outside, the run
ends at once. A throwaway subcommand shows both, and each write of the package is seen to enter it.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _support import ROOT, signal_state
from kubectl_kvdtype._kits import signals
from kubectl_kvdtype._kits.status import SIGNAL_STATUS, ExitStatus, Signalled

PACKAGE = ROOT / "kubectl_kvdtype"

#: A script that adds two throwaway subcommands to the registry and runs the plugin's own ``main``
#: (which installs the handler, as the console script does): ``scribble`` writes, with no
#: ``--apply`` in sight, and ``peek`` only reads. Each says it has started in the file it is given,
#: then waits to be signalled; ``scribble`` says how its write ended there too.
SCRIPT = '''
import sys, time
from pathlib import Path

from kubectl_kvdtype._cli import registry
from kubectl_kvdtype._cli.main import main
from kubectl_kvdtype._commands.command import Command
from kubectl_kvdtype._kits import signals
from kubectl_kvdtype._kits.report import Report
from kubectl_kvdtype._kits.status import Interrupted, interrupted_status


class Scribble(Command):
    name = "scribble"

    def add_arguments(self, parser):
        parser.add_argument("path")

    def run(self, context):
        with signals.in_progress("a scribble"):
            try:
                say(context, "half a line")
                time.sleep(60)  # mid-write
            except KeyboardInterrupt as stop:
                say(context, "half a line, then said so")
                raise Interrupted("scribble stopped half way: run it again", interrupted_status(stop)) from None
        return Report(kind="Scribble")


class Peek(Scribble):
    name = "peek"

    def run(self, context):
        say(context, "reading")
        time.sleep(60)
        return Report(kind="Peek")


def say(context, text):
    """The marker, whole or not at all (the test signals once it exists)."""
    marker = Path(context.options.path)
    Path(f"{marker}.new").write_text(text)
    Path(f"{marker}.new").replace(marker)


registry.COMMANDS = (*registry.COMMANDS,
                     registry.CommandInfo("scribble", "__main__", "Scribble", "write (a throwaway subcommand)"),
                     registry.CommandInfo("peek", "__main__", "Peek", "read (a throwaway subcommand)"))
sys.exit(main())
'''


def _started(tmp_path: Path, subcommand: str) -> tuple[subprocess.Popen, Path]:
    script, marker = tmp_path / "throwaway.py", tmp_path / f"{subcommand}.marker"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen([sys.executable, str(script), subcommand, str(marker)], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(1500):
        if marker.exists() or process.poll() is not None:
            break
        time.sleep(0.02)
    assert marker.exists(), process.communicate()
    return process, marker


@pytest.mark.e2e  # the plugin's main in a subprocess, signalled
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_write_with_no_apply_flag_ends_as_on_ctrl_c_and_a_read_ends_at_once(tmp_path, number):
    status = SIGNAL_STATUS[signal.Signals(number).name]
    process, marker = _started(tmp_path, "scribble")
    process.send_signal(number)
    out, err = process.communicate(timeout=30)
    assert process.returncode == status, signal_state(process.pid) + err
    assert marker.read_text() == "half a line, then said so"  # its own except ran: not killed mid-write
    assert out == "" and err == "error: scribble stopped half way: run it again\n"

    reading, marker = _started(tmp_path, "peek")
    started = time.monotonic()
    reading.send_signal(number)
    out, err = reading.communicate(timeout=30)
    assert reading.returncode == status and (out, err) == ("", "")  # at once, quietly
    assert time.monotonic() - started < 10 and marker.read_text() == "reading"


def test_the_handler_raises_only_while_something_is_in_progress(monkeypatch):
    exits: list[int] = []

    class Exited(Exception):
        pass

    def exit_(code: int) -> None:
        exits.append(code)
        raise Exited

    monkeypatch.setattr(signals.os, "_exit", exit_)
    with pytest.raises(Exited):
        signals._handler(signal.SIGHUP, None)
    assert exits == [int(ExitStatus.HANGUP)] and signals.under_way() == ()
    saved = {name: signal.getsignal(getattr(signal, name)) for name in SIGNAL_STATUS}
    try:
        with signals.in_progress("a fleet run"), signals.in_progress("a write"):
            assert signals.under_way() == ("a fleet run", "a write")
            with pytest.raises(Signalled) as raised:
                signals._handler(signal.SIGTERM, None)
            assert raised.value.status == ExitStatus.TERMINATED and exits == [int(ExitStatus.HANGUP)]
            assert all(signal.getsignal(getattr(signal, name)) == signal.SIG_IGN for name in SIGNAL_STATUS)
        assert signals.under_way() == ()
    finally:
        for name, handler in saved.items():
            signal.signal(getattr(signal, name), handler)


def _unit(path: Path) -> Path:
    """A module, or the package of a layer it is part of (a rebind's steps run inside its entry's block)."""
    relative = path.relative_to(PACKAGE)
    return PACKAGE.joinpath(*relative.parts[:2]) if len(relative.parts) > 2 else path


def _enters_in_progress(unit: Path) -> bool:
    files = sorted(unit.rglob("*.py")) if unit.is_dir() else [unit]
    return any(isinstance(node, ast.Attribute) and node.attr == "in_progress"
               for file in files for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))))


def test_every_module_that_writes_enters_in_progress_and_the_command_line_guesses_nothing():
    """A module (or package) that writes through ``Context.writable_source``, the one door to a
    write, enters ``in_progress`` itself, whatever flag asked for the write."""
    units = {_unit(path) for path in PACKAGE.rglob("*.py") if path.parent.name != "_commands"
             and "writable_source" in path.read_text(encoding="utf-8")}
    assert len(units) >= 4, units  # a rebind, a restore, a fix, the Setting's switch
    assert [unit.relative_to(PACKAGE) for unit in sorted(units) if not _enters_in_progress(unit)] == []
    assert "apply" not in (PACKAGE / "_cli" / "main.py").read_text(encoding="utf-8")

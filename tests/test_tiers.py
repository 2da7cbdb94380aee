"""The two tiers hold: e2e fixtures mark a test e2e, and the fast tier cannot leave the process."""

from __future__ import annotations

import ast
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import HARNESS_THREAD, _FastTierGuard

pytestmark = pytest.mark.version_sensitive  # argparse, the argv reader, completion or the man page (test_tiers.py)


def test_the_fast_tier_refuses_a_socket_and_a_subprocess(request):
    assert request.node.get_closest_marker("e2e") is None
    with pytest.raises(RuntimeError, match="is not marked e2e"):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
    with pytest.raises(RuntimeError, match="is not marked e2e"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    assert _FastTierGuard.events == ["socket.bind", "subprocess.Popen"]
    _FastTierGuard.events.clear()  # refused as intended: do not fail this test for it


def _bind_in_a_thread(harness: bool) -> list[BaseException]:
    """Bind a socket in another thread (marked as the harness's or not); what it raised."""
    raised: list[BaseException] = []

    def bind() -> None:
        try:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
        except RuntimeError as error:
            raised.append(error)

    thread = threading.Thread(target=bind)
    if harness:
        setattr(thread, HARNESS_THREAD, True)
    thread.start()
    thread.join()
    return raised


def test_the_harness_threads_sockets_are_not_a_fast_tier_tests_but_any_other_threads_are():
    # The real control plane's Setting follower reconnects its watch whenever the server ends it,
    # beside whichever fast-tier test the worker runs then: that test did not open the socket.
    assert _bind_in_a_thread(harness=True) == []
    assert _FastTierGuard.events == []
    # A thread the code under test starts (the LIST pool) is still the test's.
    assert [str(e) for e in _bind_in_a_thread(harness=False)] == [
        f"{_FastTierGuard.test} runs socket.bind but is not marked e2e"]
    assert _FastTierGuard.events == ["socket.bind"]
    _FastTierGuard.events.clear()  # refused as intended: do not fail this test for it


def test_a_test_using_the_fake_api_server_is_e2e(request, fake):
    assert request.node.get_closest_marker("e2e") is not None
    assert fake.url.startswith("https://127.0.0.1:")


TESTS = Path(__file__).resolve().parent
#: The engine wing, every module of it: its parsers are argparse's, rebuilt from the recorded
#: tables, and the rest of it is read through them (a module added there is a subject too).
ENGINE_MODULES = frozenset(f"kubectl_kvdtype._engines.{path.stem}"
                           for path in (TESTS.parent / "kubectl_kvdtype" / "_engines").glob("*.py")
                           if path.stem != "__init__")
#: What makes a test module's outcome depend on the Python running it: it imports argparse or the
#: code built on it and on CPython's own parsing (the engine wing, the flag parser, completion) or
#: checks the man page. CI runs such modules on every supported Python, the rest on two
#: (noxfile.py); such a module carries ``pytestmark`` with ``version_sensitive``. This is the floor:
#: a module may carry the marker for another reason (test_cli.py: help and usage errors).
VERSION_SENSITIVE_SUBJECTS = frozenset({
    "argparse", *ENGINE_MODULES,
    "kubectl_kvdtype._cli.complete", "kubectl_kvdtype.completion", "kubectl_kvdtype._commands.flags",
    "kubectl_kvdtype._cli.registry", "kubectl_kvdtype._cli.main.parse",
})
MAN_PAGE = "kubectl-kvdtype.1"


def _subjects(source: str) -> set[str]:
    """The version-sensitive subjects a test module's source imports or reads (nested imports too)."""
    found = {MAN_PAGE} if MAN_PAGE in source else set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names} & VERSION_SENSITIVE_SUBJECTS
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
            found |= names & VERSION_SENSITIVE_SUBJECTS
    return found


def _marked(source: str) -> bool:
    """Whether the module's ``pytestmark`` names ``version_sensitive``."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            return "version_sensitive" in ast.unparse(node.value)
    return False


def test_every_test_of_argparse_the_argv_reader_completion_or_the_man_page_is_version_sensitive():
    unmarked = {path.name: sorted(_subjects(path.read_text())) for path in sorted(TESTS.glob("test_*.py"))
                if _subjects(path.read_text()) and not _marked(path.read_text())}
    assert unmarked == {}, "add pytest.mark.version_sensitive to their pytestmark"


@pytest.mark.parametrize(("source", "needs_marker"), [
    ("import argparse\n", True),
    ("def test_x():\n    from kubectl_kvdtype._engines.argv import read\n", True),
    ("from kubectl_kvdtype._cli import complete as _complete\n", True),
    ("MAN = ROOT / 'man' / 'kubectl-kvdtype.1'\n", True),
    ("from kubectl_kvdtype._engines import shell as _shell\n", True),
    ("from kubectl_kvdtype._kits.report import Report\n", False),
])
def test_the_rule_finds_a_version_sensitive_module(source, needs_marker):
    assert bool(_subjects(source)) is needs_marker
    assert not _marked(source)
    assert _marked(source + "pytestmark = [pytest.mark.e2e, pytest.mark.version_sensitive]\n")

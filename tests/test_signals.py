"""Signals reach the main thread, wherever the plugin is waiting.

Python acts on a signal in the main thread only; the kernel gives a signal sent to a process to any
thread that does not block it. A Ctrl-C given to a request's timer thread or a parallel LIST's
worker used to wait for the server's answer (a 3.11 run of test_escape_rebind's Ctrl-C test waited
out the 30 s request timeout). So every thread the plugin starts blocks the signals it acts on.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from _support import (
    EXAMPLES,
    ROOT,
    SYSTEM,
    documents,
    ignores,
    proc_status,
    seed,
    signal_mask,
    signal_state,
    with_ctrl_c,
)
from conftest import kubectl_path
from kubectl_kvdtype._kits import threads
from kubectl_kvdtype._kits.status import SIGNAL_STATUS, KvdtypeError
from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, POD, SETTING, Get, Query, list_many

#: How signals reach threads, and what a pool does on Ctrl-C, are the interpreter's own (test_tiers.py).
pytestmark = pytest.mark.version_sensitive

PACKAGE = ROOT / "kubectl_kvdtype"
HANDLED = {getattr(signal, name) for name in threads.HANDLED_SIGNALS}


def _blocked_in_new_thread(start) -> set[signal.Signals]:
    """The signal mask of a thread started by ``start``, read inside it."""
    seen: list[set[signal.Signals]] = []
    thread = threading.Thread(target=lambda: seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
    start(thread)
    thread.join()
    return seen[0]


def test_the_handled_signals_are_ctrl_c_and_those_that_end_a_run_as_it_does():
    assert threads.HANDLED_SIGNALS == ("SIGINT", *SIGNAL_STATUS)


def test_a_thread_the_plugin_starts_blocks_the_handled_signals_and_the_main_thread_keeps_its_mask():
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert not HANDLED & before  # as the plugin's main thread starts
    assert HANDLED <= _blocked_in_new_thread(threads.start)
    assert not HANDLED & _blocked_in_new_thread(threading.Thread.start)  # what it would be otherwise
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


def test_a_signal_that_arrives_while_a_thread_is_started_reaches_the_main_thread_after():
    got: list[int] = []
    previous = signal.signal(signal.SIGHUP, lambda number, _frame: got.append(number))
    try:
        with threads.signals_left_to_main():
            # To this thread: one sent to the process could go to another thread here (pytest-xdist's).
            signal.pthread_kill(threading.get_ident(), signal.SIGHUP)
            assert got == []  # held while the mask is on
        assert got == [signal.SIGHUP]
    finally:
        signal.signal(signal.SIGHUP, previous)


def _offenders(path: Path) -> list[str]:
    """In a module that makes a Thread or Timer, any ``x.start()``; anywhere, a pool's work
    submitted outside ``signals_left_to_main``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    makes_threads = any(ast.unparse(call.func).split(".")[-1] in ("Thread", "Timer") for call in calls)
    masked = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.With)
              and any("signals_left_to_main" in ast.unparse(item.context_expr) for item in node.items)
              for inner in ast.walk(node)}
    found = []
    for call in calls:
        if not isinstance(call.func, ast.Attribute):
            continue
        if makes_threads and call.func.attr == "start" and not call.args:
            found.append(f"{path.relative_to(ROOT)}:{call.lineno}: {ast.unparse(call)}")
        if call.func.attr in ("submit", "map") and ast.unparse(call.func.value) == "pool" and id(call) not in masked:
            found.append(f"{path.relative_to(ROOT)}:{call.lineno}: {ast.unparse(call)}")
    return found


def test_every_thread_in_the_package_is_started_with_the_signals_left_to_the_main_thread():
    """Threads start through ``_kits.threads``; a pool's threads start as work is submitted to it."""
    assert [o for path in PACKAGE.rglob("*.py") if path.name != "threads.py" for o in _offenders(path)] == []


# --- through kubectl, mid-request -------------------------------------------------------------------

#: The kernel's flags of a task (include/linux/sched.h): one that has begun to exit; one whose
#: address space is laid out at random (every process, while randomize_va_space is not 0).
PF_EXITING = 0x4
PF_RANDOMIZE = 0x400000


def _flags(pid: int, tid: int) -> int:
    """The kernel's flags of thread ``tid`` of ``pid``: the ninth field of its /proc stat (after
    the parenthesised name, which may hold spaces)."""
    return int(Path(f"/proc/{pid}/task/{tid}/stat").read_text().rpartition(")")[2].split()[6])


def _exiting(pid: int, tid: int) -> bool:
    """Whether thread ``tid`` of ``pid`` has begun to exit."""
    return bool(_flags(pid, tid) & PF_EXITING)


def _masks(pid: int) -> dict[int, set[int]]:
    """Per thread of ``pid``, the signals /proc says it blocks. A thread that ends meanwhile, as a
    LIST's worker does once the queries run out, is left out: the kernel gives no signal sent to
    the process to a thread that has begun to exit, and its mask, read then, was seen empty (a CI
    run on 3.10). The flag is read after the mask, so a mask read as the thread exits is known."""
    masks = {}
    for tid in map(int, os.listdir(f"/proc/{pid}/task")):
        try:
            blocked = signal_mask(proc_status(pid, tid)["SigBlk"])
            if not _exiting(pid, tid):
                masks[tid] = blocked
        except (FileNotFoundError, ProcessLookupError):
            continue
    return masks


def test_a_live_thread_is_not_read_as_exiting():
    """The flag ``_masks`` leaves exiting threads out by is not set on a thread that runs on; the
    field read is the flags (it holds ``PF_RANDOMIZE`` exactly when the kernel randomizes)."""
    flags = _flags(os.getpid(), threading.get_native_id())
    randomized = Path("/proc/sys/kernel/randomize_va_space").read_text().strip() != "0"
    assert bool(flags & PF_RANDOMIZE) is randomized
    assert not _exiting(os.getpid(), threading.get_native_id())
    assert os.getpid() in _masks(os.getpid())


@pytest.mark.e2e
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the threads' signal masks from /proc")
def test_ctrl_c_mid_list_ends_a_read_at_once_and_only_the_main_thread_takes_signals(fake, kube_env):
    """check -A lists its kinds in parallel: held mid-LIST, each worker and each request's timer
    blocks the signals, and Ctrl-C ends the run without waiting for the held answer."""
    seed(fake, documents(EXAMPLES))
    held = fake.hold("GET", r"/pods$")
    process = subprocess.Popen(with_ctrl_c([kubectl_path(), "kvdtype", "check", "-A"]), env=kube_env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        held.wait_arrived()
        masks = _masks(process.pid)
        handled = {int(s) for s in HANDLED}
        assert not handled & masks.pop(process.pid)  # the main thread takes them
        assert masks, "a parallel LIST runs in threads"
        assert {tid: handled - blocked for tid, blocked in masks.items()} == {tid: set() for tid in masks}
        assert not ignores(process.pid, signal.SIGINT), signal_state(process.pid)
        process.send_signal(signal.SIGINT)  # env and kubectl exec: this pid is the plugin
        try:
            _, stderr = process.communicate(timeout=20)  # the held answer would come in 60 s
        except subprocess.TimeoutExpired:
            pytest.fail(f"Ctrl-C went unanswered; the plugin's signals: {signal_state(process.pid)}")
    finally:
        held.release()
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert stderr.strip() == "error: interrupted"


class _CountingSource:
    """A parallel source whose every read notes how many of list_many's helper threads are alive, and
    whose Pods read fails (an error to carry back) or raises a bug (to be raised in the caller)."""

    parallel = True

    def __init__(self, pods: BaseException) -> None:
        self.alive_at_reads: list[int] = []
        self._pods = pods

    def list(self, kind, namespace, selector="", project=None):
        self.alive_at_reads.append(sum(t.name == "kvdtype-list" for t in threading.enumerate()))
        if kind is POD:
            raise self._pods
        return [{"kind": kind.name}]

    def get(self, kind, namespace, name):
        self.alive_at_reads.append(sum(t.name == "kvdtype-list" for t in threading.enumerate()))
        return {"kind": kind.name, "name": name}


def test_list_many_sends_nothing_until_every_worker_has_started_and_keeps_the_query_order():
    """Each worker's start blocks the main thread's signals for a moment (``threads.start``): no
    read may be under way then, or a Ctrl-C could not cut it short. The answers come back in
    query order; a read's KvdtypeError is returned, anything else raised in the caller."""
    queries = [Query(BINDING, None), Get(SETTING, SYSTEM, "s"), Query(DEPLOYMENT, None), Query(POD, None)]
    source = _CountingSource(KvdtypeError("pods refused"))
    results = list_many(source, queries)
    assert source.alive_at_reads == [len(queries) - 1] * len(queries)  # helpers, the calling thread the last worker
    assert results[:3] == [[{"kind": "KVCachePoolBinding"}], [{"kind": "Setting", "name": "s"}],
                           [{"kind": "ModelDeployment"}]]
    assert isinstance(results[3], KvdtypeError) and str(results[3]) == "pods refused"
    with pytest.raises(ZeroDivisionError):
        list_many(_CountingSource(ZeroDivisionError()), queries)

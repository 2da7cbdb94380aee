"""Fleet runs: one judging subcommand on several kubeconfig contexts (``--contexts``, ``--all-contexts``).

Part of the command line, beside ``_cli.main``: the subcommands never learn of fleets. Each context
gets its own copy of the parsed flags with ``--context`` set to it, its own ``Context`` (so its
own ``ClusterSource``), and runs the subcommand exactly as ``kubectl kvdtype CMD --context NAME``
would; the reports are gathered into one ``FleetReport``, in the order the contexts were named.

Contexts run in threads of this process, at most ``--parallel`` at once. That keeps each
context's client configuration apart because nothing here uses the client's process-wide
defaults: every ``ClusterSource`` builds its own ``Configuration`` from its own kubeconfig entry
(never ``load_kube_config``/``Configuration.set_default``, the shared default a loop over contexts
keeps talking through), its own REST pool, token refresh hook and exec provider, and its own
credential lock; on the direct transport, its own connections and exec credential
(``credentials.ExecCredential``, with its own lock). The exec plugins' bounds are per thread
(``credentials._EXEC``), and a plugin handed the terminal runs alone
(``credentials._INTERACTIVE_PLUGIN``). Threads rather than processes: the
reports stay objects every output renders, and the interpreter and client are loaded once, not
once per context (the fixed ~0.5 s of CPU a single run pays).

Ctrl-C, SIGTERM or SIGHUP stop the fleet: no context starts after it, the error line says which
contexts had finished, and ``main`` ends the process without waiting for requests still under way.
The fleet is in progress as a write is (``_kits.signals.in_progress``), so that a signal raises in
its wait instead of ending the process before it says so.
"""

from __future__ import annotations

import argparse
import copy
import fnmatch
import io
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional, TextIO, cast

from kubectl_kvdtype._kits import signals as _signals
from kubectl_kvdtype._kits import threads
from kubectl_kvdtype._kits.env import Environment
from kubectl_kvdtype._kits.status import OUT_OF_MEMORY, ExitStatus, KvdtypeError, UsageError, interrupted_status
from kubectl_kvdtype._output.render import format_named

# Only a fleet run imports this module (``_commands.flags.fleet_requested`` says which run is one);
# what it needs of the run's own machinery is imported in ``run``.
if TYPE_CHECKING:
    from kubectl_kvdtype._commands.command import Context
    from kubectl_kvdtype._kits.report import FleetMember, FleetReport, Report

#: Flags that say which cluster or who for one context, or read manifests: a fleet takes each
#: context's own from the kubeconfig, so they are refused (dest, as typed).
REFUSED = (
    ("context", "--context"), ("cluster", "--cluster"), ("user", "--user"), ("server", "--server"),
    ("token", "--token"), ("certificate_authority", "--certificate-authority"),
    ("client_certificate", "--client-certificate"), ("client_key", "--client-key"),
    ("insecure_skip_tls_verify", "--insecure-skip-tls-verify"), ("tls_server_name", "--tls-server-name"),
    ("username", "--username"), ("password", "--password"), ("filename", "-f/--filename"),
)


def validate(options: argparse.Namespace) -> None:
    """What a fleet run refuses, as usage errors (exit 2)."""
    if options.contexts and options.all_contexts:
        raise UsageError("--contexts and --all-contexts cannot be used together")
    given = [flag for dest, flag in REFUSED if getattr(options, dest, None)]
    if given:
        raise UsageError(f"{given[0]} cannot be used with --contexts/--all-contexts: each context's cluster and "
                         "user come from the kubeconfig")
    if getattr(options, "fix", False):
        raise UsageError("find-flags --fix writes to one cluster: run it with --context, not on a fleet")
    if options.command == "guard" and getattr(options, "apply", False):
        raise UsageError("guard --apply writes to one cluster: run it with --context, not on a fleet")


def select(options: argparse.Namespace, available: list[str]) -> list[str]:
    """The contexts to run, in the order named (a glob's matches sorted), each once;
    ``--all-contexts``: all of them, sorted. A literal name not in the kubeconfig is kept: it
    fails as it would alone, in its own row."""
    if options.all_contexts:
        if not available:
            raise KvdtypeError("the kubeconfig has no context")
        return sorted(available)
    chosen: dict[str, None] = {}
    for given in options.contexts:
        for pattern in (p.strip() for p in given.split(",")):
            if not pattern:
                continue
            if not any(c in pattern for c in "*?["):
                chosen.setdefault(pattern)
                continue
            matches = sorted(name for name in available if fnmatch.fnmatchcase(name, pattern))
            if not matches:
                raise UsageError(f"--contexts {pattern}: no context of the kubeconfig matches")
            for name in matches:
                chosen.setdefault(name)
    if not chosen:
        raise UsageError("--contexts: name at least one context")
    return list(chosen)


def _selectable(names: list[str]) -> list[str]:
    """A context named "" cannot be run on its own (kubectl reads --context "" as the current one)."""
    if "" in names:
        raise UsageError('the kubeconfig has a context named "", which --context cannot select (kubectl reads '
                         '--context "" as no context at all): rename it to run it in a fleet')
    return names


#: Runs one context's subcommand and returns its report (``_cli.main.judge``).
Judge = Callable[["Context"], "Report"]


class FleetInterrupted(KvdtypeError):
    """Ctrl-C or SIGTERM during a fleet run: which contexts finished is the message."""

    status = ExitStatus.INTERRUPTED


#: Says a bug met in one context in one line (``_cli.main.internal_error``).
Describe = Callable[[Exception, Environment], str]


def run(options: argparse.Namespace, env: Environment, judge: Judge, internal_error: Describe) -> FleetReport:
    """Every selected context judged, at most ``--parallel`` at once; the fleet's report."""
    from kubectl_kvdtype._kits.report import FleetReport
    from kubectl_kvdtype._sources.kubeconfig import context_names  # read as kubectl reads them, no client

    names = _selectable(select(options, context_names(options.kubeconfig, dict(env.environ))))
    started = time.monotonic()  # verify --wait: one deadline for the whole fleet
    members: list[Optional[FleetMember]] = [None] * len(names)
    pending = list(range(len(names)))
    lock, finished, stop = threading.Lock(), threading.Condition(), threading.Event()
    encoder = format_named(options.output).context_encoder

    def work() -> None:
        while not stop.is_set():
            with lock:
                if not pending:
                    return
                index = pending.pop(0)
            member = _one(names[index], options, env, judge, internal_error, started)
            if encoder is not None:
                member.encode(encoder)  # its objects go now, not when the whole fleet is printed
            with finished:
                members[index] = member
                finished.notify_all()

    from kubectl_kvdtype._sources.transport import start_watchdog

    start_watchdog()  # every context's requests need it: its thread first, before theirs take them all
    with _signals.in_progress("a fleet run"):
        try:
            if not _workers(work, min(options.parallel, len(names))):
                work()  # no thread to be had: this one judges the contexts, one after another
            with finished:
                while any(m is None for m in members):
                    finished.wait(0.2)  # a short wait, so Ctrl-C and SIGTERM are seen promptly
        except KeyboardInterrupt as interrupt:
            stop.set()
            raise _interrupted(names, members, interrupt) from None
    return FleetReport(options.command, [m for m in members if m is not None], exit_zero=options.exit_zero)


def _workers(work: Callable[[], None], wanted: int) -> int:
    """Up to ``wanted`` threads running ``work``, as many as the system starts: how many started.
    Fewer than asked is no failure: the contexts wait for a thread that has finished one."""
    for count in range(wanted):
        try:
            threads.start(threading.Thread(target=work, name=f"kvdtype-context-{count}", daemon=True),
                          "a fleet's context")
        except threads.NoThread:
            return count
    return wanted


def _one(name: str, options: argparse.Namespace, env: Environment, judge: Judge,
         internal_error: Describe, started: float) -> FleetMember:
    """One context, isolated: whatever stops it is its own row with the status it would have alone."""
    from kubectl_kvdtype._commands.command import CommonOptions, Context
    from kubectl_kvdtype._kits.report import FleetMember

    mine = copy.copy(options)
    mine.context = name
    mine.contexts, mine.all_contexts = [], False
    context = Context(options=mine, common=CommonOptions.of(mine), env=_context_env(env, name), started=started)
    try:
        report = judge(context)
    except KvdtypeError as error:
        return FleetMember(name, error.status, error=error.message)
    except MemoryError:  # the process's memory (ulimit -v) spent while this context was judged
        return FleetMember(name, ExitStatus.INCOMPLETE, error=OUT_OF_MEMORY)
    except BaseException as error:  # noqa: BLE001 - a bug in one context: its row says it, the others go on
        if isinstance(error, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
            raise  # Ctrl-C or a signal, met while the main thread judges a context itself (``_workers``)
        # (BaseException too: a worker that ended without its row would leave the fleet waiting.)
        bug = error if isinstance(error, Exception) else RuntimeError(repr(error))
        return FleetMember(name, ExitStatus.INCOMPLETE, error=internal_error(bug, env))
    return FleetMember(name, report.exit_status(options.exit_zero), report=report)


def _context_env(env: Environment, name: str) -> Environment:
    """A context's streams: nothing to read (a fleet never asks), stdout unused (subcommands never
    print), and stderr lines prefixed with the context, never a live status line (not a terminal)."""
    return Environment(stdin=io.StringIO(""), stdout=io.StringIO(), stderr=cast(TextIO, _Prefixed(env, name)),
                       environ=env.environ)


class _Prefixed(io.TextIOBase):
    """Lines written to it go to the run's stderr as ``[context] line``."""

    def __init__(self, env: Environment, name: str) -> None:
        super().__init__()
        self._env, self._name, self._partial = env, name, ""

    def write(self, text: str) -> int:
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._env.progress(f"[{self._name}] {line}")
        return len(text)

    def isatty(self) -> bool:
        return False


def _interrupted(names: list[str], members: list[Optional[FleetMember]],
                 interrupt: KeyboardInterrupt) -> FleetInterrupted:
    done = [name for name, member in zip(names, members, strict=True) if member is not None]
    rest = [name for name, member in zip(names, members, strict=True) if member is None]
    status = interrupted_status(interrupt)
    what = _STOPPED_BY.get(status, "interrupted")
    error = FleetInterrupted(f"{what}: {len(done)} of {len(names)} context(s) finished"
                             f"{' (' + ', '.join(done) + ')' if done else ''}; not finished: {', '.join(rest)}")
    error.status = status
    return error


#: How the fleet's error line says what stopped it (Ctrl-C: "interrupted").
_STOPPED_BY = {ExitStatus.TERMINATED: "terminated (SIGTERM)", ExitStatus.HANGUP: "hung up (SIGHUP)"}



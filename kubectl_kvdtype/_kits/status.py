"""The single source of exit codes, and the errors that carry one.

Every way the plugin can end maps to one ``ExitStatus``; nothing else in the package returns or
raises a bare number.
"""

from __future__ import annotations

import enum


class ExitStatus(enum.IntEnum):
    """What the process exit code means: ``--help``, the man page and README.md are written from
    ``EXIT_MEANINGS`` (tests/test_robustness.py checks README's table against it)."""

    OK = 0
    FINDINGS = 1
    USAGE = 2
    INCOMPLETE = 3
    PARTIAL = 4
    HANGUP = 129
    INTERRUPTED = 130
    TERMINATED = 143

    @property
    def meaning(self) -> str:
        return EXIT_MEANINGS[self]


#: One line per exit status, the only place its meaning is written.
EXIT_MEANINGS = {
    ExitStatus.OK: "completed, no finding that fails the run: no error finding, nor warning finding with --fail-on "
                   "warning (after --ignore; --exit-zero always gives 0 when complete, never instead of 3 or 4)",
    ExitStatus.FINDINGS: "completed, at least one error finding (or warning finding, with --fail-on warning)",
    ExitStatus.USAGE: "usage error (unknown flag, bad value, unknown --ignore code, a flag that needs another)",
    ExitStatus.INCOMPLETE: "could not complete: unreachable or silent cluster (a request timed out), TLS failure, "
                           "bad kubeconfig or context, 401, a 403 on a kind the run cannot do without, the "
                           "operator's API (worker.gpustack.ai) not served, an unreadable manifest, a deployment "
                           "or Binding that does not exist, a refused escape, an answer that is not a list of the "
                           "kind asked for, a result that could not be written (a full disk, a closed stdout or "
                           "pipe), an internal error",
    ExitStatus.PARTIAL: "completed, but could not read everything the verdict depends on: a kind that could change "
                        "it was refused (403, or 404 on a served group; a warning finding names it), so "
                        "preflight's verdict is INCOMPLETE, never GO; it goes before 1, and neither --exit-zero nor "
                        "--ignore makes it 0",
    ExitStatus.HANGUP: "ended by SIGHUP (the terminal closed); a write ends as on Ctrl-C, its message also "
                       "written into the backup directory",
    ExitStatus.INTERRUPTED: "interrupted (Ctrl-C); during escape rebind --apply the message says how to resume",
    ExitStatus.TERMINATED: "ended by SIGTERM (a CI cancel, timeout); a write ends as on Ctrl-C, its message also "
                           "written into the backup directory; a read-only run ends quietly",
}

#: The signals besides SIGINT that end a run as Ctrl-C does, and the exit status each gives.
SIGNAL_STATUS = {"SIGTERM": ExitStatus.TERMINATED, "SIGHUP": ExitStatus.HANGUP}


def exit_codes_epilog() -> str:
    """The "Exit codes" paragraph of ``--help``."""
    return "Exit codes: " + "; ".join(f"{int(s)} {s.meaning}" for s in ExitStatus) + "."


class Signalled(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the main thread is, so that a write ends exactly as on
    Ctrl-C (the same ``except KeyboardInterrupt`` says how to resume); ``status`` is its exit code."""

    def __init__(self, status: ExitStatus) -> None:
        super().__init__(status.name.lower())
        self.status = status


def interrupted_status(error: BaseException) -> ExitStatus:
    """The exit status of a KeyboardInterrupt: Ctrl-C's, or the signal's that raised it."""
    return error.status if isinstance(error, Signalled) else ExitStatus.INTERRUPTED


#: A run (or a fleet's context) that met ``MemoryError``: an input bigger than the memory the
#: process may use (``ulimit -v``), not a bug.
OUT_OF_MEMORY = "ran out of memory: an input (a manifest, an API answer) holds more than this process may use"


class KvdtypeError(Exception):
    """A failure the user can act on: one sentence, one exit status, never a traceback."""

    status = ExitStatus.INCOMPLETE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Interrupted(KvdtypeError):
    """A write stopped by Ctrl-C, SIGTERM or SIGHUP: said like any failure, with how to resume,
    and the signal's exit status."""

    def __init__(self, message: str, status: ExitStatus = ExitStatus.INTERRUPTED) -> None:
        super().__init__(message)
        self.status = status


class UsageError(KvdtypeError):
    """The command line asks for something that cannot be done as written."""

    status = ExitStatus.USAGE


class ClusterError(KvdtypeError):
    """The cluster could not be reached or refused to answer."""

    @property
    def transient(self) -> bool:
        """Whether trying again later may succeed: a timeout, a dropped connection, 5xx or 429 may
        pass; a refusal (401, 403) or a missing object (404) will not. Polls retry the former."""
        return True


class NotServed(ClusterError):
    """The cluster does not serve a kind's API group (its CRD is not installed): said as that, so a
    reader of an optional kind (an Argo CD Application) can tell it from a refusal."""

    @property
    def transient(self) -> bool:
        return False


class RequestTimeout(ClusterError):
    """A request got no (complete) answer within the request timeout or a --wait deadline."""


class ApiError(ClusterError):
    """The API server answered a request with an error status."""

    def __init__(self, message: str, code: int, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason

    @property
    def transient(self) -> bool:
        return self.code not in (401, 403, 404)


class NotFound(ApiError):
    """The API server answered 404 for one object."""


class Conflict(ApiError):
    """The API server answered 409: the object changed or already exists."""


class ManifestError(KvdtypeError):
    """A manifest given with -f could not be read."""

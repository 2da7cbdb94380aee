"""The single source of exit codes, and the errors that carry one.

Every way the plugin can end maps to one ``ExitStatus``; nothing else in the package returns or
raises a bare number.
"""

from __future__ import annotations

import enum


class ExitStatus(enum.IntEnum):
    """What the process exit code means (documented in README.md)."""

    OK = 0  # completed, no error finding (after --ignore)
    FINDINGS = 1  # completed, at least one error finding
    USAGE = 2  # bad command line, or a question that could not be asked
    INCOMPLETE = 3  # could not complete: cluster, credentials, API, manifests
    INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT


class KvdtypeError(Exception):
    """A failure the user can act on: one sentence, one exit status, never a traceback."""

    status = ExitStatus.INCOMPLETE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(KvdtypeError):
    """The command line asks for something that cannot be done as written."""

    status = ExitStatus.USAGE


class ClusterError(KvdtypeError):
    """The cluster could not be reached or refused to answer."""


class ApiError(ClusterError):
    """The API server answered a request with an error status."""

    def __init__(self, message: str, code: int, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class NotFound(ApiError):
    """The API server answered 404 for one object."""


class Conflict(ApiError):
    """The API server answered 409: the object changed or already exists."""


class ManifestError(KvdtypeError):
    """A manifest given with -f could not be read."""

"""The Setting ``model-deployment-kv-cache-dtype-owned``: reading it, writing it, waiting for it.

Both halves of ``escape`` touch the Setting: ``escape off``/``on`` flip it, and ``escape rebind``
turns it off before the move and back on after. Kept apart from either so that neither has to
import the other; ``blockers_of`` is here for the same reason (both ask which Bindings would keep
an engine from starting once the Setting is on).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import ContextManager, Iterator, Optional

from kubectl_kvdtype._kits import progress as _progress
from kubectl_kvdtype._kits.codes import DTYPE_REJECTED
from kubectl_kvdtype._kits.report import Report
from kubectl_kvdtype._kits.status import (
    ApiError,
    ClusterError,
    Conflict,
    Interrupted,
    KvdtypeError,
    NotFound,
    RequestTimeout,
    interrupted_status,
)
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import DEPLOYMENT, SETTING, Source, WritableSource, bounded

ON, OFF = "true", "false"
POLL_SECONDS = 0.5
#: Seconds a request may run past a wait's deadline before it is cut off (a poll started just
#: before the deadline still gets a chance to answer); the whole wait ends within this of it.
WAIT_GRACE = 2.0


class WaitClock:
    """``escape off|on --wait``'s time, counted from the command's first request, so that the whole
    command (reads, write and polls) ends within ``WAIT_GRACE`` of it whatever the server does.
    The time a person takes to answer the confirmation question is not counted. Without --wait
    (``seconds`` None) it bounds nothing: each request has the request timeout only."""

    def __init__(self, seconds: Optional[float]) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds if seconds else None

    def bounding(self, source: Source) -> ContextManager[None]:
        """Requests made inside are cut off ``WAIT_GRACE`` after the deadline."""
        return bounded(source, self.deadline + WAIT_GRACE if self.deadline is not None else None)

    def remaining(self) -> float:
        """Seconds to the deadline (negative once past it; infinite without --wait)."""
        return self.deadline - time.monotonic() if self.deadline is not None else float("inf")

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside (a question on the terminal) moves the deadline back by as much."""
        started = time.monotonic()
        try:
            yield
        finally:
            if self.deadline is not None:
                self.deadline += time.monotonic() - started


# --- The Setting: reading and writing -------------------------------------------------------------

def require_setting(source: Source, namespace: str) -> dict:
    """The Setting, or one sentence on why there is none (exit 3)."""
    setting = source.get(SETTING, namespace, _model.SETTING_NAME)
    if setting is None:
        raise KvdtypeError(
            f"the Setting {namespace}/{_model.SETTING_NAME} does not exist: the operator is older than this "
            "feature (nothing renders the dtype, so there is nothing to switch), or it runs in another "
            "namespace (--system-namespace)")
    return setting


def attached_counts(source: Source) -> tuple[Optional[int], Optional[int], Optional[str]]:
    """(pool-attached ModelDeployments, their managed replicas) in the whole cluster, or why not."""
    try:
        deployments = source.list(DEPLOYMENT, None)
    except ApiError as error:
        return None, None, error.message
    return (*_model.rollout_counts(deployments), None)


def write_setting(source: WritableSource, namespace: str, setting: dict, value: str, dry_run: bool = False) -> dict:
    """A JSON merge patch of ``spec.value`` guarded by the resourceVersion read: never a blind write."""
    patch = {"metadata": {"resourceVersion": _model.dig(setting, "metadata", "resourceVersion")},
             "spec": {"value": value}}
    try:
        return source.merge_patch(SETTING, namespace, _model.SETTING_NAME, patch, dry_run=dry_run)
    except KeyboardInterrupt as signal:  # Ctrl-C, SIGTERM, SIGHUP with the PATCH sent: it may be applied
        raise Interrupted(f'interrupted while the write of spec.value "{value}" was in flight: it may or may not have '
                          "been applied (kubectl kvdtype escape status shows which; the same command again makes "
                          "sure)", interrupted_status(signal)) from None
    except Conflict:
        raise KvdtypeError(
            f"the Setting {namespace}/{_model.SETTING_NAME} changed after it was read (409 Conflict), so nothing "
            "was written: run the command again to act on its new value") from None
    except NotFound:
        raise KvdtypeError(f"the Setting {namespace}/{_model.SETTING_NAME} disappeared before the write; "
                           "nothing was written") from None
    except ApiError as error:
        raise KvdtypeError(f"{error.message}; nothing was changed") from None
    except RequestTimeout as error:  # sent, and no answer came: it may have been applied
        if dry_run:
            raise KvdtypeError(f"{error.message}; nothing was changed (a dry run)") from None
        raise KvdtypeError(f"{error.message}: the write may or may not have been applied (kubectl kvdtype escape "
                           "status shows which)") from None


def wait_for_setting(source: Source, namespace: str, value: str, clock: WaitClock) -> dict:
    """Poll until ``status.value`` follows ``spec.value`` (the operator applies it with a lag), until
    ``clock``'s deadline. A poll that fails for a reason a later one may not meet (a timeout, 5xx)
    is tried again while time remains; at the deadline the error names the last one."""
    with _progress.during(f'waiting for the operator to apply spec.value "{value}" (status.value follows it)'):
        try:
            return _poll_setting(source, namespace, value, clock)
        except KeyboardInterrupt as signal:  # Ctrl-C, SIGTERM, SIGHUP: the write stands, only the wait ends
            raise Interrupted(f'interrupted while waiting: the write is done (spec.value "{value}"), the operator '
                              "applies it on its own; kubectl kvdtype escape status shows when it is in force (the "
                              "same command with --wait waits again)", interrupted_status(signal)) from None


def _poll_setting(source: Source, namespace: str, value: str, clock: WaitClock) -> dict:
    """``wait_for_setting``'s loop: one read of the Setting per poll."""
    in_force: Optional[str] = None
    failure: Optional[ClusterError] = None  # the last poll's, when it failed
    while True:
        try:
            with clock.bounding(source):  # a silent server cannot stretch --wait
                setting = require_setting(source, namespace)
        except ClusterError as error:
            if not error.transient:
                raise _wait_failed(value, error) from None
            failure = error
        else:
            failure, in_force = None, _model.setting_values(setting)[1]
            if in_force == value:
                return setting
        remaining = clock.remaining()
        if remaining <= 0 and failure is not None:
            raise _wait_failed(value, failure)
        if remaining <= 0:
            raise KvdtypeError(
                f'the write is done (spec.value "{value}") but status.value still says "{in_force}" after '
                f"{clock.seconds:g}s: the operator has not applied it yet (is it running?); "
                "see kubectl kvdtype escape status")
        time.sleep(min(POLL_SECONDS, remaining))


def _wait_failed(value: str, error: ClusterError) -> KvdtypeError:
    """The write is done; only the wait for it to be applied failed (naming its request)."""
    return KvdtypeError(f'the write is done (spec.value "{value}") but waiting for status.value to follow it '
                        f"failed: {error.message}; see kubectl kvdtype escape status")


def blockers_of(report: Report) -> list[str]:
    """The Bindings check finds rejected by an engine, as ``namespace/name``."""
    return list(dict.fromkeys(f"{f.object.namespace}/{f.object.name}" for f in report.findings
                              if f.code == DTYPE_REJECTED))

"""The Setting ``model-deployment-kv-cache-dtype-owned``: reading it, writing it, waiting for it.

Both halves of ``escape`` touch the Setting: ``escape off``/``on`` flip it, and ``escape rebind``
turns it off before the move and back on after. Kept apart from either so that neither has to
import the other; ``blockers_of`` is here for the same reason (both ask which Bindings would keep
an engine from starting once the Setting is on).
"""

from __future__ import annotations

import time
from typing import Optional

from kubectl_kvdtype import _model
from kubectl_kvdtype._codes import DTYPE_REJECTED
from kubectl_kvdtype._report import Report
from kubectl_kvdtype._sources import DEPLOYMENT, SETTING, Source, WritableSource, bounded
from kubectl_kvdtype._status import ApiError, Conflict, KvdtypeError, NotFound

ON, OFF = "true", "false"
POLL_SECONDS = 0.5
#: Seconds a poll may run past the --wait deadline before its request is cut off.
WAIT_GRACE = 2.0


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
    except Conflict:
        raise KvdtypeError(
            f"the Setting {namespace}/{_model.SETTING_NAME} changed after it was read (409 Conflict), so nothing "
            "was written: run the command again to act on its new value") from None
    except NotFound:
        raise KvdtypeError(f"the Setting {namespace}/{_model.SETTING_NAME} disappeared before the write; "
                           "nothing was written") from None
    except ApiError as error:
        raise KvdtypeError(f"{error.message}; nothing was changed") from None


def wait_for_setting(source: Source, namespace: str, value: str, timeout: float) -> dict:
    """Poll until ``status.value`` follows ``spec.value``; the operator applies it with a lag."""
    deadline = time.monotonic() + timeout
    while True:
        with bounded(source, deadline + WAIT_GRACE):  # a silent server cannot stretch --wait
            setting = require_setting(source, namespace)
        in_force = _model.setting_values(setting)[1]
        if in_force == value:
            return setting
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise KvdtypeError(
                f'the write is done (spec.value "{value}") but status.value still says "{in_force}" after '
                f"{timeout:g}s: the operator has not applied it yet (is it running?); see kubectl kvdtype escape "
                "status")
        time.sleep(min(POLL_SECONDS, remaining))


def blockers_of(report: Report) -> list[str]:
    """The Bindings check finds rejected by an engine, as ``namespace/name``."""
    return list(dict.fromkeys(f"{f.object.namespace}/{f.object.name}" for f in report.findings
                              if f.code == DTYPE_REJECTED))

"""Whether the rollout is done: ``verify``'s one read and judgement, or its polls until every
judged Pod passes (``--wait``), all within one deadline whatever the server does."""

from __future__ import annotations

import time
from typing import Optional

from kubectl_kvdtype._commands.command import Context
from kubectl_kvdtype._judging.managed import index, name_managers, read_owners_early, reader_for
from kubectl_kvdtype._judging.replicas import NOT_DONE, PodInventory, build_verify_report, headline, progress_line
from kubectl_kvdtype._kits.codes import REPLICA_NOT_ROLLED
from kubectl_kvdtype._kits.report import Report
from kubectl_kvdtype._kits.status import ClusterError
from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, POD, bounded
from kubectl_kvdtype._sources.managers import ManagerReader

#: Seconds a poll's requests may run past the --wait deadline (a poll started just before it
#: still gets a chance to answer); the whole wait ends within this of its deadline.
DEADLINE_GRACE = 2.0
#: Seconds between polls unless --poll-interval says otherwise: short waits poll more often.
MAX_POLL_INTERVAL = 2.0
MIN_POLL_INTERVAL = 0.05


def verify(context: Context, name: Optional[str], wait: Optional[float], poll_interval: Optional[float]) -> Report:
    """``verify``: one read and its report, or with ``wait`` (seconds) polls until every judged Pod
    passes or the time is up, every ``poll_interval`` seconds (by default a twentieth of the wait,
    between ``MIN_POLL_INTERVAL`` and ``MAX_POLL_INTERVAL``)."""
    if wait is None:
        return _poll(context, name)
    return _wait(context, name, wait, poll_interval or _interval(wait))


def _interval(wait: float) -> float:
    """Poll often enough to end soon after the last Pod passes, without hammering the server."""
    return min(MAX_POLL_INTERVAL, max(MIN_POLL_INTERVAL, wait / 20))


def _poll(context: Context, name: Optional[str], reader: Optional[ManagerReader] = None) -> Report:
    """One read and its report; ``reader`` (who manages what) is kept across the polls of a --wait."""
    reader = reader or reader_for(context.source, context.offline)
    if name:
        inventory = PodInventory.read_named(context.source, context.namespace, name, context.system_namespace)
    else:
        # The owners of the injected Pods the report will name, read while the deployments and their
        # replicas are still coming: what verify says of one rests on it, its Binding and the Setting.
        inventory = PodInventory.read_all(
            context.source, context.namespace, context.system_namespace, early=None if context.offline else
            lambda injected: read_owners_early(build_verify_report(injected), reader, injected.injected))
    report = build_verify_report(inventory, offline=context.offline)
    reader.known = index((DEPLOYMENT.name, inventory.deployments), (BINDING.name, inventory.bindings.values()),
                         (POD.name, inventory.replicas), (POD.name, inventory.injected))
    name_managers(report, reader, item_kind=POD.name)
    return report


def _wait(context: Context, name: Optional[str], wait: float, interval: float) -> Report:
    """Poll (one read of the inventory per poll) until every judged Pod passes or time is up."""
    deadline = context.started + wait  # from the run's start (one deadline for a whole fleet)
    polls, report, skipped = 0, None, []
    reader = reader_for(context.source, context.offline)
    try:
        while True:
            polls += 1
            try:
                with bounded(context.source, deadline + DEADLINE_GRACE):
                    report = _poll(context, name, reader)
            except ClusterError as error:
                if report is None or not error.transient:
                    raise  # the first poll, or an answer that waiting will not change
                skipped.append(error.message)
            else:
                _progress(context, report)
            passing = not _failing(report)
            remaining = deadline - time.monotonic()
            if passing or remaining <= 0:
                break
            time.sleep(min(interval, remaining))
    finally:  # also on Ctrl-C or a failed poll: leave the terminal on a fresh line
        _end_progress(context, polls)
    report.summary["wait"] = {"seconds": wait, "polls": polls, "timedOut": not passing}
    if skipped:
        report.warnings.append(f"{len(skipped)} poll(s) failed and were retried; the last: {skipped[-1]}")
    if not passing:
        _pending_become_errors(report)
        report.warnings.append(f"gave up waiting after {_show_seconds(wait)}: {progress_line(report)}")
    return report


def _pending_become_errors(report: Report) -> None:
    """When --wait gives up, a replica still not rolled is a failure: the exit says so."""
    report.escalate(REPLICA_NOT_ROLLED)
    report.headline = headline


def _failing(report: Report) -> list:
    """What keeps --wait waiting: failing Pods, and roles whose Pods are not all there yet."""
    return [item for item in report.items if item["verdict"] in NOT_DONE] + report.summary.get("pending", [])


def _progress(context: Context, report: Report) -> None:
    """A one-line live display on a terminal; nothing when stderr is a file or a pipe."""
    context.env.live(progress_line(report))


def _end_progress(context: Context, polls: int) -> None:
    if polls:
        context.env.end_live()


def _show_seconds(seconds: float) -> str:
    """``10m``, ``1m30s``, ``3s``: a duration as it was probably written."""
    minutes, rest = divmod(seconds, 60)
    if not minutes:
        return f"{rest:g}s"
    return f"{minutes:g}m" + (f"{rest:g}s" if rest else "")

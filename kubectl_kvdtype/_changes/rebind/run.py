"""``escape rebind``'s one entry, ``rebind``: plan by default; with ``--apply`` back up, journal
and execute (or resume a journal found where the command puts it)."""

from __future__ import annotations

import socket
from pathlib import Path

from kubectl_kvdtype._changes import managed as _managed
from kubectl_kvdtype._changes.journal import Journal, default_directory, identity_of
from kubectl_kvdtype._changes.rebind.checks import check_journal
from kubectl_kvdtype._changes.rebind.execute import check_access, execute, last_look, leased
from kubectl_kvdtype._changes.rebind.plan import SOURCE_HINT, make_plan, step_writes, validate_names
from kubectl_kvdtype._changes.rebind.report import plan_report
from kubectl_kvdtype._changes.rebind.resume import find_journal, refuse_under_way_elsewhere, resume
from kubectl_kvdtype._changes.rebind.steps import JOURNAL_ANNOTATION, NEW_BINDING_ID, Action, Plan, RebindOptions
from kubectl_kvdtype._commands.command import Context
from kubectl_kvdtype._kits import signals as _signals
from kubectl_kvdtype._kits.report import Report
from kubectl_kvdtype._kits.status import UsageError


def rebind(context: Context, options: RebindOptions) -> Report:
    """Plan by default; with --apply, back up, journal and execute (or resume a journal)."""
    if options.all_namespaces:
        raise UsageError("escape rebind works on one Binding in one namespace: use -n, not -A")
    namespace = context.namespace or "default"
    validate_names(options)
    journal = find_journal(options, namespace)  # only where this command or the default directory puts it
    if journal is not None:
        check_journal(context, journal, namespace, options.binding)  # before any step runs, or is shown
        return resume(context, journal, options)
    refuse_under_way_elsewhere(context, namespace, options)
    plan = make_plan(context, namespace, options)
    deletes = [s for s in plan.steps if s.action is Action.DELETE]
    managed = _managed.managed_writes(context, step_writes(plan, deletes))
    _managed.note(plan.report, managed, options.force_managed)
    if options.dry_run == "server":
        check_access(context.writable_source, plan.steps)
        execute(context, plan, None, dry_run=True)
    elif options.apply and options.dry_run == "none":
        _managed.refuse(context, managed, options.force_managed, SOURCE_HINT)
        plan.managed = _managed.record(managed)
        last_look(context, plan, "Carry out this plan?")
        check_access(context.writable_source, plan.steps)
        directory = Path(options.backup_dir) if options.backup_dir else default_directory(namespace, plan.binding)
        _record_location(plan, directory)
        with _signals.in_progress("escape rebind --apply"):  # a signal ends it as Ctrl-C does: journaled
            journal = Journal.create(directory, _header(context, plan), [s.to_journal() for s in plan.steps],
                                     plan.originals)  # the backups before any write, the lease included
            with leased(context, plan, journal, discard=True):
                context.env.progress(f"Saved {len(plan.originals)} object(s) and the journal to {journal.directory}/")
                execute(context, plan, journal)
    return plan_report(context, plan, journal, options)


def _header(context: Context, plan: Plan) -> dict:
    """What the journal says of itself besides its steps: the Binding it moves (and its uid) and the
    cluster it was written for, all checked before it is carried on (``check_journal``)."""
    old = next((s.expect for s in plan.steps if s.id == NEW_BINDING_ID and s.expect), None) or {}
    return {"namespace": plan.namespace, "binding": plan.binding, "uid": old.get("uid"),
            "cluster": identity_of(context.source), "options": plan.names.to_dict(),
            "blockers": plan.blockers, "manifests": plan.manifests,
            "findings": [f.to_dict() for f in plan.report.findings], "managers": plan.managed}


def _record_location(plan: Plan, directory: Path) -> None:
    """Mark the new Binding with where the journal is, before the journal is written with it."""
    location = f"{socket.gethostname()}:{directory.resolve()}"
    for step in plan.steps:
        if step.id == NEW_BINDING_ID:
            step.body["metadata"]["annotations"][JOURNAL_ANNOTATION] = location

"""Carrying on an unfinished rebind from its journal.

The journal is looked for only where the command (``--backup-dir``) or the default directory puts
it, never where a cluster's annotation says (that place is only named, with the command that
resumes it from there). The plan is rebuilt from the journal, which the cluster has already
outgrown, and the steps not yet done are carried out.
"""

from __future__ import annotations

import shlex
import socket
from pathlib import Path
from typing import Optional

from kubectl_kvdtype._changes import managed as _managed
from kubectl_kvdtype._changes.journal import JOURNAL, Journal, unfinished
from kubectl_kvdtype._changes.lease import held_refusal, running_holder
from kubectl_kvdtype._changes.rebind.execute import check_access, execute, last_look, leased
from kubectl_kvdtype._changes.rebind.plan import SOURCE_HINT, binding_copy, deployment_copy, step_writes
from kubectl_kvdtype._changes.rebind.report import plan_report
from kubectl_kvdtype._changes.rebind.steps import (
    DTYPE_SPELLING,
    JOURNAL_ANNOTATION,
    KINDS_BY_NAME,
    REBIND_ANNOTATION,
    Action,
    Names,
    Plan,
    RebindOptions,
    Step,
    expectation,
)
from kubectl_kvdtype._commands.command import Context
from kubectl_kvdtype._kits import signals as _signals
from kubectl_kvdtype._kits.report import ObjectRef, Report
from kubectl_kvdtype._kits.status import KvdtypeError, UsageError
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, Kind


def find_journal(options: RebindOptions, namespace: str) -> Optional[Journal]:
    """The unfinished journal of this rebind: in --backup-dir, else in the current directory."""
    if options.backup_dir:
        directory = Path(options.backup_dir)
        if not (directory / JOURNAL).is_file():
            return None
        journal = Journal.read(directory)
        if not journal.matches(namespace, options.binding):
            raise UsageError(f"{directory} holds the journal of a rebind of {journal.data.get('namespace')}/"
                             f"{journal.data.get('binding')}, not {namespace}/{options.binding}")
        return journal
    found = unfinished(Path.cwd(), namespace, options.binding)
    if len(found) > 1:
        raise UsageError(f"several unfinished rebinds of {namespace}/{options.binding} here "
                         f"({', '.join(map(str, found))}): pick one with --backup-dir")
    return Journal.read(found[0]) if found else None


def refuse_under_way_elsewhere(context: Context, namespace: str, options: RebindOptions) -> None:
    """The cluster's own record of a rebind under way: a Binding rebound from this one while this
    one still exists. Its journal is never looked for where the annotation says (anyone who may
    create a Binding here writes that annotation): the refusal names the place, escaped when
    shown, and the command that resumes it from there, where the journal is checked like any."""
    source, old = context.source, options.binding
    origin = f"{namespace}/{old}"
    rebound = [b for b in source.list(BINDING, namespace)
               if _model.annotations_of(b).get(REBIND_ANNOTATION) == origin]
    if not rebound or source.get(BINDING, namespace, old) is None:
        return
    held = running_holder(source, namespace, old)
    if held is not None:  # the run that journals it is still at work: wait for it
        raise KvdtypeError(held_refusal(namespace, old, held))
    new = rebound[0]
    host, path = _journal_location(_model.annotations_of(new).get(JOURNAL_ANNOTATION))
    dtype = _model.binding_dtype(new) or ""
    dtype = dtype if DTYPE_SPELLING.match(dtype) else "<the dtype it moves to>"
    where = f"journaled on {host} in {path}/" if path else "journaled elsewhere (its Binding does not say where)"
    directory = shlex.quote(path) if path else "<its backup directory>"
    resume = f"kubectl kvdtype escape rebind {old} -n {namespace} --dtype {dtype} --backup-dir {directory} --apply"
    on = "" if host == socket.gethostname() else \
        f" on {host or 'the machine that started it'} (or here, once the directory is copied here)"
    raise KvdtypeError(
        f"a rebind of {origin} to {namespace}/{_model.name_of(new)} is under way ({where}), and a journal is only "
        f"carried on from the current directory or --backup-dir, never from where a cluster says it is: resume it "
        f"with {resume}{on}, or put back what it deleted with kubectl kvdtype escape restore {directory}; nothing "
        "was changed")
#: The longest journal location an annotation may give to be named in a message.
_LOCATION_LIMIT = 4096


def _journal_location(value: object) -> tuple[str, str]:
    """(host, absolute path) an annotation ``<host>:<path>`` names; ("", "") for anything else. Only
    ever said, never opened."""
    if not isinstance(value, str) or len(value) > _LOCATION_LIMIT or "\0" in value:
        return "", ""
    host, _, path = value.partition(":")
    return (host, path) if path.startswith("/") else ("", "")


def check_same_options(options: RebindOptions, names: Names, journal: Journal) -> None:
    """The names given again are the journal's (each said by its JSON name, as the journal has it)."""
    recorded = names.to_dict()
    given = {"dtype": options.dtype, "newName": options.new_name, "domainName": options.domain_name,
             "strategy": options.strategy.value if options.strategy else None, "suffix": options.suffix}
    for key, value in given.items():
        if value is not None and value != recorded.get(key):
            raise UsageError(f"the unfinished rebind in {journal.directory}/ was started with {key} "
                             f"{recorded.get(key)!r}, not {value!r}: rerun it with the same options to resume, "
                             f"or put back what it changed with kubectl kvdtype escape restore {journal.directory}")


def resume(context: Context, journal: Journal, options: RebindOptions) -> Report:
    """Rebuild the plan from the journal (the cluster has already changed) and carry on."""
    names = Names.from_dict(journal.options)
    check_same_options(options, names, journal)
    data = journal.data
    plan = Plan(data["namespace"], data["binding"], names, [Step.from_journal(s) for s in journal.steps],
                manifests=data.get("manifests") or [], blockers=data.get("blockers") or [])
    for finding in data.get("findings") or []:
        obj = finding["object"]
        extra = {k: v for k, v in finding.items() if k not in ("code", "severity", "object", "message")}
        plan.report.add(finding["code"], ObjectRef(obj["kind"], obj["namespace"], obj["name"]),
                        finding["message"], **extra)
    if journal.finished:
        return plan_report(context, plan, journal, options)
    remaining = [s for s in plan.steps if s.id not in journal.done]
    if options.apply and options.dry_run == "none":
        next_step = len(plan.steps) - len(remaining) + 1
        last_look(context, plan, f"Resume the rebind journaled in {journal.directory}/ at step {next_step}?",
                  remaining)
        context.env.progress(f"Resuming the rebind journaled in {journal.directory}/: "
                             f"{len(plan.steps) - len(remaining)} of {len(plan.steps)} step(s) already done")
        check_access(context.writable_source, remaining)
        _refuse_managed_remaining(context, plan, journal, remaining, options)
        with _signals.in_progress("escape rebind --apply, resumed"), leased(context, plan, journal):
            _accept_changes(context, plan, journal)
            execute(context, plan, journal)
    return plan_report(context, plan, journal, options)


def _refuse_managed_remaining(context: Context, plan: Plan, journal: Journal, remaining: list[Step],
                              options: RebindOptions) -> None:
    """A resumed rebind asks again about what it has still to delete or recreate, as they are now."""
    deletes = [s for s in remaining if s.action is Action.DELETE]
    deleted = {(d.kind, d.name) for d in plan.steps if d.id in journal.done and d.action is Action.DELETE}
    recreates = [s for s in remaining if s.action is Action.CREATE and (s.kind, s.name) in deleted]
    managed = _managed.managed_writes(context, step_writes(plan, deletes, context.source) +
                                      step_writes(plan, recreates))
    _managed.refuse(context, managed, options.force_managed, SOURCE_HINT)
    if managed:
        journal.data["managers"] = (journal.data.get("managers") or []) + _managed.record(managed)
        journal.save()


def _accept_changes(context: Context, plan: Plan, journal: Journal) -> None:
    """The objects an earlier run stopped at because they changed since the plan: the user ran
    the command again, so they move as they are now. Each one's expectation, backup and (when not
    yet created) copy are made again from it; one that left the Binding cannot move."""
    changed = journal.data.get("changed") or {}
    for step_id, name in list(changed.items()):
        step = next((s for s in plan.steps if s.id == step_id), None)
        if step is None:
            continue
        kind = KINDS_BY_NAME[step.kind]
        current = context.source.get(kind, step.namespace, name)
        if current is None:
            raise KvdtypeError(f"{step.kind} {step.namespace}/{name} was deleted since the plan: this rebind cannot "
                               f"move it; put back what it changed with kubectl kvdtype escape restore "
                               f"{journal.directory}")
        if kind is DEPLOYMENT and _model.deployment_binding(current) != plan.binding:
            raise KvdtypeError(f"ModelDeployment {step.namespace}/{name} no longer uses the Binding {plan.binding} "
                               f"(it names {_model.deployment_binding(current)}): this rebind cannot move it; put "
                               f"back what it changed with kubectl kvdtype escape restore {journal.directory}")
        _remake_from(context, plan, journal, kind, current)
        del changed[step_id]
        context.env.progress(f"{step.kind} {step.namespace}/{name} changed since the plan: moving it as it is now")
    journal.save()


def _remake_from(context: Context, plan: Plan, journal: Journal, kind: Kind, current: dict) -> None:
    """Every step that depends on ``current`` now expects it as it is; a copy not yet created is
    made from it again, and its backup saved again."""
    name, origin = _model.name_of(current), f"{plan.namespace}/{plan.binding}"
    journal.save_original(current)
    for index, step in enumerate(plan.steps):
        if step.kind != kind.name:
            continue
        if step.expect and step.expect.get("name") == name:
            step.expect = expectation(current)
        if step.action is Action.CREATE and step.origin == name and step.id not in journal.done:
            if kind is BINDING:
                body = binding_copy(context.source, current, plan.names)
                body["metadata"]["annotations"][JOURNAL_ANNOTATION] = \
                    step.body["metadata"]["annotations"].get(JOURNAL_ANNOTATION, "")
            else:
                body = deployment_copy(context.source, current, step.name, plan.names.new_name, origin)
            step.body = body
            plan.manifests = [body if (m.get("kind"), _model.name_of(m)) == (kind.name, step.name) else m
                              for m in plan.manifests]
        journal.steps[index] = step.to_journal()
    journal.data["manifests"] = plan.manifests

"""``escape rebind``'s writes: the access check, the last look, and each step carried out in order.

``run_step`` hands a step to its action's runner (``RUNNERS``); each is idempotent, so a rerun after
an unknown outcome finds the work done and moves on, and a failure says what is done and how to
resume (``_changes.rebind.resume``).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from kubectl_kvdtype._changes.journal import Journal
from kubectl_kvdtype._changes.lease import Lease
from kubectl_kvdtype._changes.rebind.plan import read_inventory
from kubectl_kvdtype._changes.rebind.steps import (
    KINDS_BY_NAME,
    REBIND_ANNOTATION,
    Action,
    Changed,
    Plan,
    Step,
    Strategy,
    changes,
    key_of,
    shown_name,
)
from kubectl_kvdtype._changes.setting import POLL_SECONDS, WAIT_GRACE, blockers_of, require_setting, write_setting
from kubectl_kvdtype._commands.command import Context, confirm
from kubectl_kvdtype._judging.bindings import BindingInventory, build_check_report
from kubectl_kvdtype._kits import progress as _progress
from kubectl_kvdtype._kits.codes import WARNING
from kubectl_kvdtype._kits.records import replace
from kubectl_kvdtype._kits.status import ApiError, Conflict, Interrupted, KvdtypeError, NotFound, interrupted_status
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, Kind, Source, WritableSource, bounded

#: How long ``--strategy replace`` waits for a deleted ModelDeployment to be gone before recreating it.
GONE_TIMEOUT = 300.0
SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
#: How often a DELETE is tried again when its resourceVersion precondition failed because only
#: what the plan does not depend on (a controller's status write) changed in between.
_PRECONDITION_ATTEMPTS = 5


@contextmanager
def leased(context: Context, plan: Plan, journal: Journal, discard: bool = False) -> Iterator[None]:
    """The Binding's lease, held while the block writes and given back however it ends. A new
    journal (``discard``) is removed when the lease is not taken, whatever stopped it (a refusal,
    Ctrl-C): that run changed nothing, and leaves nothing behind."""
    try:
        plan.lease = Lease(context.writable_source, plan.namespace, plan.binding, journal.directory).acquire()
    except BaseException:
        if discard:
            journal.discard()
        raise
    try:
        yield
    finally:
        plan.lease.release()
        plan.lease = None


def last_look(context: Context, plan: Plan, question: str, steps: Optional[list[Step]] = None) -> None:
    """On a terminal, show the steps and ask (``confirm``: --yes skips it; without a terminal,
    --apply is the consent)."""
    env = context.env

    def show() -> None:
        for index, step in enumerate(plan.steps, 1):
            if steps is None or step in steps:
                env.progress(f"  {index}. {step.label()}: {step.detail}")
        for finding in plan.report.findings:
            if finding.severity == WARNING:
                env.warn(f"{finding.code}: {finding.message}")

    confirm(context, question, show=show)


def check_access(source: WritableSource, steps: list[Step]) -> None:
    """Every verb the plan needs, asked up front with SelfSubjectAccessReview: refuse before any write.

    Asked once per verb, kind and namespace; where that is refused, once per object the steps
    name: a role may grant a verb on named objects only (RBAC's ``resourceNames``, as
    ``kvdtype-writer`` grants ``patch`` on the one Setting), which a review naming no object is
    refused. A create names no object to RBAC, so it is asked without one."""
    needed: dict[tuple[str, str, str], list[str]] = {}
    for step in steps:
        names = needed.setdefault((step.action.verb, step.kind, step.namespace), [])
        if step.action is not Action.CREATE and step.name not in names:
            names.append(step.name)
    denied = []
    try:
        for (verb, kind_name, namespace), names in needed.items():
            kind = KINDS_BY_NAME[kind_name]
            if _allowed(source, verb, kind, namespace):
                continue
            refused = [n for n in names if not _allowed(source, verb, kind, namespace, n)]
            if len(refused) < len(names):  # some named objects only: say which
                denied += [f"{verb} {kind.resource} {n} in namespace {namespace}" for n in refused]
            else:
                denied.append(f"{verb} {kind.resource} in namespace {namespace}")
    except ApiError:
        return  # cannot ask: each write then fails on its own 403, journaled
    if denied:
        raise KvdtypeError(f"you may not {'; nor '.join(denied)} (SelfSubjectAccessReview), which the plan needs; "
                           "nothing was changed")


def _allowed(source: WritableSource, verb: str, kind: Kind, namespace: str, name: str = "") -> bool:
    """One SelfSubjectAccessReview: may this user ``verb`` ``kind`` (the object ``name``) in ``namespace``?"""
    attributes = {"namespace": namespace, "verb": verb, "group": kind.group, "resource": kind.plural}
    if name:
        attributes["name"] = name
    answer = source.post(SSAR_PATH, {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                                     "spec": {"resourceAttributes": attributes}})
    return bool(_model.dig(answer, "status", "allowed"))


def execute(context: Context, plan: Plan, journal: Optional[Journal], dry_run: bool = False) -> None:
    """Each step not yet journaled, in order; a failure says what is done and how to resume (and
    leaves that message in the backup directory too: after SIGHUP no terminal reads it)."""
    done = journal.done if journal is not None else {}
    total = len(plan.steps)
    for index, step in enumerate(plan.steps, 1):
        if step.id in done:
            continue
        context.env.progress(f"[{index}/{total}] {step.label()}{' (dry run)' if dry_run else ''}")
        try:
            if plan.lease is not None:
                plan.lease.renew()
            outcome = run_step(context, plan, step, dry_run, journal)
            if journal is not None:
                journal.mark(step.id, outcome)
            else:
                done[step.id] = outcome
        except Changed as changed:
            raise _stopped(journal, KvdtypeError(_changed_failure(plan, journal, index, step, changed))) from None
        except Interrupted as interrupted:  # a signal inside a step that words its own in-flight write
            raise _stopped(journal, Interrupted(_failure(plan, journal, index, step, interrupted.message),
                                                interrupted.status)) from None
        except KvdtypeError as error:
            raise _stopped(journal, KvdtypeError(_failure(plan, journal, index, step, error.message))) from None
        except KeyboardInterrupt as signal:  # the step may be done but not journaled: repeating it is safe
            raise _stopped(journal, Interrupted(_failure(plan, journal, index, step, "interrupted"),
                                                interrupted_status(signal))) from None
    plan.report.summary["outcomes"] = dict(done)
    if journal is not None:
        journal.cleared()


def _stopped(journal: Optional[Journal], error: KvdtypeError) -> KvdtypeError:
    if journal is not None:
        journal.note_stop(error.message)
    return error


def _failure(plan: Plan, journal: Optional[Journal], index: int, step: Step, why: str) -> str:
    if journal is None:
        return f"dry run: step {index} ({step.label()}) failed: {why}; nothing was changed"
    finished = [s.label() for s in plan.steps if s.id in journal.done]
    only_saved = [s for s in plan.steps if s.action is Action.DELETE and s.id in journal.done and s.kind == step.kind
                  and s.name == step.name and step.action is Action.CREATE]
    said = (f" Until then {step.kind} {step.namespace}/{step.name} may exist only in the backup."
            if only_saved else "")
    return (f"step {index} of {len(plan.steps)} ({step.label()}) failed: {why}. Done so far: "
            f"{'; '.join(finished) or 'nothing'}.{said} The originals and the journal are in {journal.directory}/: "
            f"run the same command again (with --apply) to resume from step {index}, or put back what it deleted "
            f"with kubectl kvdtype escape restore {journal.directory}")


def _changed_failure(plan: Plan, journal: Optional[Journal], index: int, step: Step, changed: Changed) -> str:
    """Stopped before touching an object edited since the plan: the edit is kept; say how to go on."""
    if journal is None:
        return f"dry run: step {index} ({step.label()}) stopped: {changed.message}; nothing was changed"
    journal.data.setdefault("changed", {})[step.id] = changed.name
    journal.save()
    copies = [s for s in plan.steps if s.action is Action.CREATE and s.origin == changed.name and s.id in journal.done
              and s.kind == step.kind]
    finished = [s.label() for s in plan.steps if s.id in journal.done]
    how = (f"its copy {copies[0].kind} {copies[0].namespace}/{copies[0].name} was created before the edit: make the "
           "same change to it, then run the same command again with --apply to carry on" if copies else
           "to move it as it is now, run the same command again with --apply (its copy and its backup are made "
           "again from it)")
    return (f"step {index} of {len(plan.steps)} ({step.label()}) stopped before touching it: {changed.message}; "
            f"its edit is kept. Done so far: {'; '.join(finished) or 'nothing'}. {how[0].upper()}{how[1:]}; or put "
            f"back what this run changed with kubectl kvdtype escape restore {journal.directory}")


def _refuse_changed(step: Step, current: Optional[dict], plan: Plan) -> None:
    """Stop before the write when the object the step depends on is not what the plan read."""
    expect = step.expect
    if not expect:
        return
    what = f"{step.kind} {step.namespace}/{expect['name']}"
    if current is None:
        raise Changed(f"{what} was deleted since the plan", expect["name"])
    found = changes(expect, current)
    if found:
        raise Changed(f"{what} changed since the plan ({'; '.join(found)})", expect["name"])
#: Carries out one step: (the run's context, the plan, the step, a dry run?, the journal) -> its outcome.
Runner = Callable[[Context, Plan, Step, bool, Optional[Journal]], str]


def run_step(context: Context, plan: Plan, step: Step, dry_run: bool, journal: Optional[Journal] = None) -> str:
    """One step, idempotent: a rerun after an unknown outcome finds the work done and moves on. Its
    action's runner carries it out (``RUNNERS``); an action with none is refused, never taken for
    another (a fall-through once deleted whatever a step named)."""
    runner = RUNNERS.get(step.action)
    if runner is None:
        raise KvdtypeError(f"step {step.id} has an action this version cannot carry out "
                           f"({shown_name(step.action)}): nothing was written for it")
    return runner(context, plan, step, dry_run, journal)


def _setting_off(context: Context, plan: Plan, step: Step, dry_run: bool, journal: Optional[Journal]) -> str:
    return _set(context.writable_source, step, dry_run)


def _create_step(context: Context, plan: Plan, step: Step, dry_run: bool, journal: Optional[Journal]) -> str:
    """A copy is made only from the object as the plan read it (``_refuse_changed``)."""
    source, kind = context.writable_source, KINDS_BY_NAME[step.kind]
    if step.expect:
        _refuse_changed(step, source.get(kind, step.namespace, step.expect["name"]), plan)
    return _create(source, kind, step, plan, dry_run)


def _delete_step(context: Context, plan: Plan, step: Step, dry_run: bool, journal: Optional[Journal]) -> str:
    return _delete(context.writable_source, KINDS_BY_NAME[step.kind], step, plan, dry_run, journal)


def _set(source: WritableSource, step: Step, dry_run: bool) -> str:
    setting = require_setting(source, step.namespace)
    if _model.setting_values(setting)[0] == step.body and not dry_run:  # a dry run changed nothing before
        return f'already "{step.body}"'
    write_setting(source, step.namespace, setting, step.body, dry_run=dry_run)
    return f'set to "{step.body}"' + (" (dry run)" if dry_run else "")


def _setting_on(context: Context, plan: Plan, step: Step, dry_run: bool, journal: Optional[Journal]) -> str:
    """Step 5: judge the cluster as it is now, exactly as check does; turn on only if nothing breaks."""
    if dry_run:
        blockers = plan.blockers
    else:
        inventory, cluster_wide = read_inventory(context.source, plan.namespace, context.system_namespace)
        blockers = blockers_of(build_check_report(_alive(inventory, plan), context.system_namespace))
        if not cluster_wide:
            blockers.append("(other namespaces: not readable with your permissions)")
    plan.blockers = blockers
    if blockers:
        return f"left off: {', '.join(blockers)} would still break an engine"
    return _set(context.writable_source, step, dry_run)


def _alive(inventory: BindingInventory, plan: Plan) -> BindingInventory:
    """The cluster as it stands once deletions complete: objects being deleted (a finalizer still
    holds them) and objects this plan deleted are nobody's consumers and no Binding to judge."""
    created = {(s.kind, s.namespace, s.name) for s in plan.steps if s.action is Action.CREATE}
    deleted = {(s.kind, s.namespace, s.name) for s in plan.steps if s.action is Action.DELETE} - created

    def gone(kind: str, obj: dict) -> bool:
        return bool(_model.dig(obj, "metadata", "deletionTimestamp")) or (kind, *key_of(obj)) in deleted

    dead = {key_of(d) for d in inventory.deployments if gone(DEPLOYMENT.name, d)}
    return replace(
        inventory,
        bindings=[b for b in inventory.bindings if not gone(BINDING.name, b)],
        deployments=[d for d in inventory.deployments if key_of(d) not in dead],
        consumers=[c for c in inventory.consumers if c.kind != DEPLOYMENT.name or (c.namespace, c.name) not in dead])


def _create(source: WritableSource, kind: Kind, step: Step, plan: Plan, dry_run: bool) -> str:
    try:
        source.create(kind, step.namespace, step.body, dry_run=dry_run)
        return "created (dry run)" if dry_run else "created"
    except Conflict:
        existing = source.get(kind, step.namespace, step.name)
    if existing is not None and not dry_run and _model.dig(existing, "metadata", "deletionTimestamp"):
        _wait_gone(source, kind, step, plan.lease)  # the old object is still terminating (a resumed replace)
        return _create(source, kind, step, plan, dry_run)
    if existing is not None and _is_ours(existing, step, plan):
        return "already created"
    if dry_run and existing is not None and plan.names.strategy is Strategy.REPLACE and kind is DEPLOYMENT:
        return "not created (dry run: the name is still held by the deployment the real run deletes first)"
    raise KvdtypeError(f"{kind.name} {step.namespace}/{step.name} already exists and is not the one this rebind "
                       "creates: move it away or rename it, then resume")


def _is_ours(existing: dict, step: Step, plan: Plan) -> bool:
    origin = _model.annotations_of(existing).get(REBIND_ANNOTATION)
    if step.kind == BINDING.name:
        return origin == f"{plan.namespace}/{plan.binding}" and _model.binding_dtype(existing) == plan.names.dtype
    return _model.deployment_binding(existing) == plan.names.new_name


def _delete(source: WritableSource, kind: Kind, step: Step, plan: Plan, dry_run: bool,
            journal: Optional[Journal] = None) -> str:
    """DELETE with the uid and the resourceVersion of a GET made just before, once the GET shows
    the object as planned: an edit made since the plan, or between the GET and the DELETE, is
    never deleted (the server answers 409 to the latter, and the object is read again)."""
    sent = journal.data.get("sent") if journal is not None else None
    for _ in range(_PRECONDITION_ATTEMPTS):
        current = source.get(kind, step.namespace, step.name)
        if current is None:
            if sent is not None and step.id not in sent and not dry_run:
                _refuse_changed(step, None, plan)  # deleted by someone else: what follows would revive it
            return "already gone"
        terminating = bool(_model.dig(current, "metadata", "deletionTimestamp"))
        if not (terminating and sent is not None and step.id in sent):  # not the deletion this run asked for
            _refuse_changed(step, current, plan)
        if not terminating:
            if journal is not None and not dry_run:
                journal.note_sent(step.id)
            try:
                source.delete(kind, step.namespace, step.name, dry_run=dry_run,
                              preconditions={"uid": _model.dig(current, "metadata", "uid"),
                                             "resourceVersion": _model.dig(current, "metadata", "resourceVersion")})
            except NotFound:
                return "already gone"
            except Conflict:
                continue  # written between the GET and the DELETE: read it again
        if dry_run:
            return "deleted (dry run)"
        if kind is DEPLOYMENT and plan.names.strategy is Strategy.REPLACE:
            _wait_gone(source, kind, step, plan.lease)
        return "deleted"
    raise KvdtypeError(f"{step.kind} {step.namespace}/{step.name} changed between each read and its DELETE "
                       f"({_PRECONDITION_ATTEMPTS} times): nothing was deleted; run the command again")


def _wait_gone(source: Source, kind: Kind, step: Step, lease: Optional[Lease] = None) -> None:
    """The same name is created next: wait until the old object's finalizers have let it go. Each
    poll has the request timeout, and none outlives the wait's deadline (a silent server). The
    lease is renewed meanwhile: the wait can outlast it."""
    deadline = time.monotonic() + GONE_TIMEOUT
    with _progress.during(f"waiting until {kind.name} {step.namespace}/{step.name} is gone (a finalizer holds it)"):
        while _still_there(source, kind, step, deadline):
            if time.monotonic() > deadline:
                raise KvdtypeError(f"{kind.name} {step.namespace}/{step.name} was deleted but is still there after "
                                   f"{GONE_TIMEOUT:g}s (a finalizer holds it)")
            if lease is not None:
                lease.renew()
            time.sleep(POLL_SECONDS)


def _still_there(source: Source, kind: Kind, step: Step, deadline: float) -> bool:
    with bounded(source, deadline + WAIT_GRACE):
        return source.get(kind, step.namespace, step.name) is not None
#: Each action's runner: ``run_step`` dispatches through this table only.
RUNNERS: dict[Action, Runner] = {
    Action.SETTING_OFF: _setting_off,
    Action.CREATE: _create_step,
    Action.DELETE: _delete_step,
    Action.SETTING_ON: _setting_on,
}

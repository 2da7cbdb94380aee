"""A rebind journal, checked before any step runs or is shown.

A journal found where the user's command or the default directory put it is still a file anyone
may have written there (a shared /tmp): its shape, the Binding it claims, the cluster it was
written for, and every step against the plan for that Binding. ``escape restore`` checks the same
(``check_shape``).
"""

from __future__ import annotations

from kubectl_kvdtype._changes.journal import JOURNAL, Journal
from kubectl_kvdtype._changes.rebind.steps import (
    DTYPE_SPELLING,
    KINDS_BY_NAME,
    REBIND_ANNOTATION,
    Action,
    Names,
    Step,
    Strategy,
    is_dns_label,
    shown_name,
    suffixed,
)
from kubectl_kvdtype._changes.setting import OFF, ON
from kubectl_kvdtype._commands.command import Context
from kubectl_kvdtype._kits import codes as _codes
from kubectl_kvdtype._kits.records import fields
from kubectl_kvdtype._kits.status import KvdtypeError
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, SETTING

#: The fields a journal's step may have (``Step``'s).
_STEP_FIELDS = {f.name for f in fields(Step)}


def check_journal(context: Context, journal: Journal, namespace: str, binding: str) -> None:
    """A journal found where the user's command or the default directory put it is still a file
    anyone may have written there (a shared /tmp): before any step runs it must be a rebind of this
    Binding (namespace, name, the uid it recorded) on this cluster (server and context), and every
    step one the plan for this Binding would make. Otherwise one sentence, exit 3, nothing written."""
    where = f"{journal.directory}/"
    check_shape(journal)
    if not journal.matches(namespace, binding):
        raise KvdtypeError(f"the journal in {where} is of a rebind of {journal.data['namespace']}/"
                           f"{journal.data['binding']}, not of {namespace}/{binding}; nothing was changed")
    journal.check_cluster(context.source, "run the command against that cluster, or pass another --backup-dir")
    steps = [Step.from_journal(dict(entry)) for entry in journal.steps]
    names = Names.from_dict(journal.options)
    _check_uid(context, journal, steps, namespace, binding)
    for index, step in enumerate(steps, 1):
        problem = _outside_the_plan(context, journal, names, steps, step)
        if problem:
            raise KvdtypeError(f"the journal in {where} holds a step this rebind of {namespace}/{binding} would not "
                               f"make: step {index} ({step.label()}) {problem}; nothing was changed")
    for step_id, name in (journal.data.get("changed") or {}).items():
        changed = next((s for s in steps if s.id == step_id), None)
        if changed is None or not changed.expect or changed.expect.get("name") != name:
            raise KvdtypeError(f"the journal in {where} records a change to {name!r} that none of its steps "
                               "depends on; nothing was changed")


def check_shape(journal: Journal) -> None:
    """What the resumption reads of the journal, each of the type it needs (a hand-edited or planted
    file would otherwise end in an internal error half-way)."""
    data, recorded = journal.data, journal.data.get("options")
    problems = []
    if not isinstance(recorded, dict):
        problems.append("no options")
        recorded = {}
    if not (isinstance(data.get("namespace"), str) and isinstance(data.get("binding"), str)):
        problems.append("no namespace and binding")
    if not (isinstance(recorded.get("dtype"), str) and DTYPE_SPELLING.match(recorded["dtype"])):
        problems.append("no dtype a Binding may have")
    if not all(isinstance(recorded.get(key), str) and is_dns_label(recorded[key])
               for key in ("newName", "domainName", "suffix")):
        problems.append("a new name, domain or suffix that is no DNS label")
    if recorded.get("strategy") not in {strategy.value for strategy in Strategy}:
        problems.append("no strategy")
    steps = journal.steps
    if not all(isinstance(e, dict) and set(e) <= _STEP_FIELDS and all(isinstance(e.get(k), str) for k in (
            "id", "action", "kind", "namespace", "name")) and e["kind"] in KINDS_BY_NAME
            and isinstance(e.get("expect") or {}, dict) and isinstance(e.get("origin", ""), str)
            and isinstance(e.get("detail", ""), str) for e in steps):
        problems.append("a step that is none of the Setting's, a KVCachePoolBinding's or a ModelDeployment's")
    elif any(Action.from_journal(e["action"]) is None for e in steps):
        unknown = next(e["action"] for e in steps if Action.from_journal(e["action"]) is None)
        problems.append(f"a step of an action this version does not know ({shown_name(unknown)})")
    elif len({e["id"] for e in steps}) != len(steps):
        problems.append("two steps of one id")
    for key in ("done", "sent", "changed"):
        if not isinstance(data.get(key) or {}, dict):
            problems.append(f"a {key} that is no mapping")
    if not all(isinstance(f, dict) and isinstance(f.get("object"), dict) and f.get("code") in _codes.BY_CODE
               and isinstance(f.get("message"), str) and {"kind", "namespace", "name"} <= set(f["object"])
               for f in _list(data.get("findings"))):
        problems.append("a finding of no known code")
    if not all(isinstance(m, dict) for m in _list(data.get("manifests"))) or \
            not all(isinstance(b, str) for b in _list(data.get("blockers"))):
        problems.append("manifests or blockers of another shape")
    if problems:
        raise KvdtypeError(f"{journal.directory / JOURNAL} is not a journal this version of kubectl-kvdtype can "
                           f"carry on ({'; '.join(problems)}); nothing was changed")


def _list(value: object) -> list:
    """A journal's list ([] when absent); anything else, as one entry no check of entries passes."""
    return value if isinstance(value, list) else [] if value is None else [None]


def _check_uid(context: Context, journal: Journal, steps: list[Step], namespace: str, binding: str) -> None:
    """The Binding the journal moves is the one it read (its uid), while it still exists."""
    recorded = journal.data.get("uid") or next(
        (s.expect.get("uid") for s in steps if s.expect and s.expect.get("name") == binding and s.kind == BINDING.name),
        None)
    if not recorded:
        return
    current = context.source.get(BINDING, namespace, binding)
    uid = _model.dig(current, "metadata", "uid") if current is not None else None
    if current is not None and uid != recorded:
        raise KvdtypeError(f"the journal in {journal.directory}/ is of the KVCachePoolBinding {namespace}/{binding} "
                           f"of uid {recorded}, and the one there now is another (uid {uid}): it was deleted and "
                           "created again since; put back what that rebind changed with kubectl kvdtype escape "
                           f"restore {journal.directory}, or pass another --backup-dir; nothing was changed")


def _outside_the_plan(context: Context, journal: Journal, names: Names, steps: list[Step], step: Step) -> str:
    """Why ``step`` is no step of the plan for the journal's Binding ("" when it is one): the Setting
    switched off and on, the new Binding created, the old one deleted, the ModelDeployments that use
    it deleted, and their copies (naming the new Binding) created."""
    namespace, old = journal.data["namespace"], journal.data["binding"]
    switches = (Action.SETTING_OFF, Action.SETTING_ON)
    if step.kind == SETTING.name:
        if step.action not in switches or (step.namespace, step.name) != (
                context.system_namespace, _model.SETTING_NAME):
            return (f"writes the Setting {step.namespace}/{step.name}; the plan only switches "
                    f"{context.system_namespace}/{_model.SETTING_NAME} (pass the --system-namespace it was run with)")
        return "" if step.body == (OFF if step.action is Action.SETTING_OFF else ON) else "writes another value"
    if step.action in switches:
        return "writes the Setting's value to another kind"
    if step.namespace != namespace:
        return f"is in namespace {step.namespace}, and the plan writes in {namespace} only"
    if step.kind == BINDING.name:
        return _outside_for_binding(step, namespace, old, names)
    return _outside_for_deployment(context, journal, names, steps, step)


def _outside_for_binding(step: Step, namespace: str, old: str, names: Names) -> str:
    expected = old if step.action is Action.DELETE else names.new_name
    if step.name != expected:
        verb = step.action.value
        return f"{verb}s the KVCachePoolBinding {namespace}/{step.name}, and the plan {verb}s {expected}"
    if step.expect and step.expect.get("name") != old:
        return f"depends on {step.expect.get('name')!r}, not the Binding moved"
    if step.action is Action.CREATE:
        body = step.body if isinstance(step.body, dict) else {}
        if not _is_copy(body, step, namespace, old) or _model.binding_dtype(body) != names.dtype:
            return "creates another Binding than the new one of the journal's dtype"
    return ""


def _outside_for_deployment(context: Context, journal: Journal, names: Names, steps: list[Step], step: Step) -> str:
    namespace, old = journal.data["namespace"], journal.data["binding"]
    moved = {s.name for s in steps if s.kind == DEPLOYMENT.name and s.action is Action.DELETE}
    if step.action is Action.CREATE:
        expected = step.origin if names.strategy is Strategy.REPLACE else suffixed(step.origin, names.suffix)
        body = step.body if isinstance(step.body, dict) else {}
        if step.origin not in moved or step.name != expected or not _is_copy(body, step, namespace, old) or \
                _model.deployment_binding(body) != names.new_name:
            return "moves no ModelDeployment this plan deletes onto the new Binding"
        if step.expect and step.expect.get("name") != step.origin:
            return f"depends on {step.expect.get('name')!r}, not the deployment it copies"
        return ""
    if step.expect and step.expect.get("name") != step.name:
        return f"depends on {step.expect.get('name')!r}, not the deployment it deletes"
    if step.id in journal.done:
        return ""
    current = context.source.get(DEPLOYMENT, namespace, step.name)
    if current is not None and _model.deployment_binding(current) != old and \
            not (step.id in (journal.data.get("sent") or {}) and _model.dig(current, "metadata", "deletionTimestamp")):
        return (f"deletes a ModelDeployment that does not use the Binding {old} (it names "
                f"{_model.deployment_binding(current) or 'none'})")
    return ""


def _is_copy(body: dict, step: Step, namespace: str, old: str) -> bool:
    """Whether a create step's body is the object its step names, marked as rebound from ``old``."""
    meta = body.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return (body.get("kind") == step.kind and meta.get("name") == step.name
            and meta.get("namespace") in (None, namespace)
            and _model.annotations_of(body).get(REBIND_ANNOTATION) == f"{namespace}/{old}")

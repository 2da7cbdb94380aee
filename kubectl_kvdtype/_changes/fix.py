"""``find-flags --fix``: remove the flags the upgrade will refuse, object by object, safely.

``find-flags`` says where a role, a Pod or a Pod template passes ``--kv-cache-dtype`` itself; this
layer turns those places into one JSON patch per object to change, and carries the patches out:

- a role's copies go from its ``extraArgs`` (the flag and its value, in whichever form);
- a workload's copies go from its Pod template's container ``command``/``args``; an injected Pod is
  fixed in the top controller of its owner chain (Pod -> ReplicaSet -> Deployment; StatefulSet,
  DaemonSet; Job -> CronJob). A Pod without an owner, a Job (its template cannot change) and a
  flag inside a shell string are manual steps: said, never guessed.

Every patch starts with a ``test`` of ``/metadata/resourceVersion``, so the server applies it only
to the version that was read (422 otherwise). What a role or Pod runs must not change by surprise:
a patch that changes the dtype in use is refused unless ``--accept-dtype-change``. Before the
first write every object is saved in a backup directory with a journal (``_changes.journal``), and
``escape restore DIR`` puts each one back through ``restore_fix`` here, only while its
resourceVersion is still the one this tool left.
"""

from __future__ import annotations

import copy
import json
import re
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from kubectl_kvdtype._changes import managed as _managed
from kubectl_kvdtype._changes.journal import (
    JOURNAL,
    Journal,
    RestoreOptions,
    backup_name,
    fix_directory,
    identity_of,
)
from kubectl_kvdtype._commands.command import Context, confirm
from kubectl_kvdtype._engines import verdicts as _engines
from kubectl_kvdtype._kits import signals as _signals
from kubectl_kvdtype._kits.codes import FIX_CONFLICT, FIX_MANUAL, FIX_REFUSED, RESTORE_CONFLICT
from kubectl_kvdtype._kits.report import Column, ObjectRef, Report
from kubectl_kvdtype._kits.status import ApiError, Interrupted, KvdtypeError, UsageError, interrupted_status
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources import names as _names
from kubectl_kvdtype._sources.kinds import DEPLOYMENT, POD, REPLICASET, SETTING, WORKLOADS, Kind
from kubectl_kvdtype._sources.managers import pointer_field

if TYPE_CHECKING:
    from kubectl_kvdtype._judging.flags import FlagInventory

#: The journal's ``operation`` for a fix (a rebind's journal has none).
OPERATION = "find-flags-fix"
_WORKLOAD = {k.name: k for k in WORKLOADS}
_KINDS = {k.name: k for k in (DEPLOYMENT, REPLICASET) + WORKLOADS}
#: Where each patchable kind keeps its Pod template.
_TEMPLATE_PATH = {"CronJob": "/spec/jobTemplate/spec/template"}
#: What a patched object does to its replicas, said in the plan.
_ROLLS = {
    "ModelDeployment": "the operator re-renders the role and recreates every replica of it",
    "Deployment": "a new Pod template: every replica is replaced (a rolling update)",
    "StatefulSet": "a new Pod template: every replica is replaced, one by one (OnDelete: as each is deleted)",
    "DaemonSet": "a new Pod template: the Pod on every node is replaced",
    "ReplicaSet": "a new Pod template: the Pods it creates from now on lose the flag; delete the running ones to "
                  "replace them",
    "CronJob": "the next Job it starts runs without the flag; a Job already running keeps its Pods",
}
PLANNED, REFUSED, MANUAL, PATCHED, CONFLICT, DRY = (
    "planned", "refused", "manual", "patched", "conflict", "accepted (dry run)")

COLUMNS = [
    Column("NAMESPACE", "namespace", namespace=True),
    Column("KIND", "kind"),
    Column("NAME", "name"),
    Column("REMOVES", lambda item: ", ".join(item["removes"])),
    Column("STATE", "state", status=True),
    Column("DETAIL", "detail"),
]


# --- The plan --------------------------------------------------------------------------------

@dataclass
class Target:
    """One object to patch (or to fix by hand), and why."""

    kind: Kind
    namespace: str
    name: str
    obj: Optional[dict] = None  # as read; None for a manual step on an object not read
    ops: list[dict] = field(default_factory=list)  # the removals, without the resourceVersion test
    revert: list[dict] = field(default_factory=list)  # what puts the original lists back
    after: list[dict] = field(default_factory=list)  # each patched list as the patch leaves it (path, value)
    removes: list[str] = field(default_factory=list)  # "spec.roles[0].extraArgs[1]: --kv-cache-dtype fp8"
    changes: list[str] = field(default_factory=list)  # dtype changes the patch makes
    manual: str = ""  # why this object is a manual step
    fixes: list[str] = field(default_factory=list)  # the find-flags objects this fixes
    state: str = PLANNED
    detail: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kind.name, self.namespace, self.name

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.kind.name, self.namespace, self.name)

    @property
    def as_read(self) -> dict:
        """``obj``, which every target has but a manual step on an object that was not read."""
        if self.obj is None:
            raise AssertionError(f"{self.ref} was not read")
        return self.obj

    @property
    def resource_version(self) -> str:
        return str(_model.dig(self.obj or {}, "metadata", "resourceVersion") or "")

    @property
    def patch(self) -> list[dict]:
        """What is sent: the removals, applied only to the version read (manifests carry none)."""
        guard = [{"op": "test", "path": "/metadata/resourceVersion", "value": self.resource_version}]
        return (guard if self.resource_version else []) + self.ops

    def patched(self) -> dict:
        """The object as the patch leaves it (``-o yaml``), without what the server sets."""
        obj = copy.deepcopy(self.obj or {})
        for op in self.ops:
            parent, last = _walk(obj, op["path"])
            del parent[int(last)]
        meta = obj.get("metadata") or {}
        for key in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
            meta.pop(key, None)
        obj.pop("status", None)
        return obj


@dataclass
class _Part:
    """The flag's copies in one argv list of an object: a JSON pointer and the tokens to drop."""

    path: str
    original: list
    drop: list[int]
    label: str  # "spec.roles[0].extraArgs" for humans


def plan(context: Context, inventory: FlagInventory, found: Report, setting_on: Optional[bool],
         setting_said: str, accept_dtype_change: bool = False) -> list[Target]:
    """One Target per object to patch or fix by hand, from ``find-flags``' report items."""
    targets: dict[tuple[str, str, str], Target] = {}
    dtypes = {(_model.namespace_of(b), _model.name_of(b)): _model.binding_dtype(b) for b in inventory.bindings}
    known = {(_model.namespace_of(b), _model.name_of(b)) for b in inventory.bindings}
    deployments = {(_model.namespace_of(d), _model.name_of(d)): d for d in inventory.deployments}
    workloads = {(k.name, _model.namespace_of(w), _model.name_of(w)): w for k, w in inventory.workloads}
    pods = {(_model.namespace_of(p), _model.name_of(p)): p for p in inventory.pods}
    judge = _Judge(setting_on, setting_said, dtypes, known)
    for item in found.items:
        where = f"{item['kind']} {item['namespace']}/{item['name']}"
        if item["kind"] == DEPLOYMENT.name:
            deployment = deployments.get((item["namespace"], item["name"]))
            if deployment is None:  # not in the inventory the report was built from
                _manual(targets, DEPLOYMENT, item, f"{where} could not be read again")
                continue
            target = _target(targets, DEPLOYMENT, deployment)
            _role(target, item, judge)
        else:
            if item["kind"] == POD.name:
                kind, obj, why = _top_controller(context, pods.get((item["namespace"], item["name"])), workloads)
            else:
                kind, obj, why = _workload(item, workloads)
            if why or kind is None or obj is None:  # no kind or object comes with a why
                _manual(targets, _WORKLOAD.get(item["kind"]) or POD, item, why)
                continue
            target = _target(targets, kind, obj)
            if target.state == PLANNED and not (target.ops or target.manual or target.removes):
                _template(target, judge)
        if where not in target.fixes:
            target.fixes.append(where)
    result = list(targets.values())
    for target in result:
        _settle(target, accept_dtype_change)
    return result


def _target(targets: dict, kind: Kind, obj: dict) -> Target:
    key = (kind.name, _model.namespace_of(obj), _model.name_of(obj))
    if key not in targets:
        obj = copy.deepcopy(obj)
        group = f"{kind.group}/" if kind.group else ""
        obj.setdefault("apiVersion", f"{group}{kind.versions[0]}")  # LIST items of built-in kinds carry none
        obj.setdefault("kind", kind.name)
        targets[key] = Target(kind, key[1], key[2], obj)
    return targets[key]


def _manual(targets: dict, kind: Kind, item: dict, why: str) -> None:
    key = (kind.name, item["namespace"], item["name"])
    target = targets.setdefault(key, Target(kind, item["namespace"], item["name"], None, state=MANUAL, manual=why,
                                                 detail=why))
    target.removes += [f"{o.get('field')}[{o.get('index')}]: {o.get('token')}" for o in item["occurrences"]]
    target.fixes.append(f"{item['kind']} {item['namespace']}/{item['name']}")


# --- Roles -----------------------------------------------------------------------------------

def _role(target: Target, item: dict, judge: "_Judge") -> None:
    roles = _model.as_list(_model.dig(target.obj, "spec", "roles"))
    index = next((i for i, r in enumerate(roles) if isinstance(r, dict) and _model.role_name(r) == item["role"]), None)
    if index is None:
        target.manual = f"role {item['role']} is no longer in the deployment"
        return
    raw = roles[index].get("extraArgs")
    label = f"spec.roles[{index}].extraArgs"
    if not isinstance(raw, list) or any(not isinstance(a, str) for a in raw):
        target.manual = f"{label} is not a plain list of strings: remove the flag by hand"
        return
    occurrences = item["occurrences"]
    _add_part(target, _Part(f"/spec/roles/{index}/extraArgs", raw, _drops(occurrences, {"extraArgs": raw}, "extraArgs"),
                            label), occurrences)
    change = judge.change(item["value"], item["binding"] or "", target.namespace)
    if change:
        target.changes.append(f"role {item['role']}: {change}")


# --- Pods and Pod templates -----------------------------------------------------------------

def _workload(item: dict, workloads: dict) -> tuple[Optional[Kind], Optional[dict], str]:
    kind = _WORKLOAD.get(item["kind"])
    obj = workloads.get((item["kind"], item["namespace"], item["name"]))
    if kind is None or obj is None:
        return kind, None, f"{item['kind']} {item['name']} could not be read again"
    if kind.name == "Job":
        return kind, None, ("a Job's Pod template cannot be changed: delete the Job and create it again without "
                            "the flag")
    return kind, obj, ""


def _top_controller(context: Context, pod: Optional[dict],
                    workloads: dict) -> tuple[Optional[Kind], Optional[dict], str]:
    """The object whose template makes this Pod: Pod -> ReplicaSet -> Deployment, Job -> CronJob."""
    if pod is None:
        return None, None, "the Pod could not be read again"
    reference = _model.controller_of(pod)
    if reference is None:
        return None, None, "it has no owner: delete it and create it again without the flag"
    kind, obj, why = _owner(context, pod, reference, workloads)
    if why or kind is None or obj is None:
        return kind, obj, why
    above = _model.controller_of(obj)
    parent = {"ReplicaSet": "Deployment", "Job": "CronJob"}.get(kind.name)
    if above is not None and parent and _model.text(above.get("kind")) == parent:
        return _owner(context, obj, above, workloads)
    if kind.name == "Job":
        return kind, None, (f"its owner Job {_model.name_of(obj)}'s Pod template cannot be changed: delete the Job "
                            "and create it again without the flag")
    return kind, obj, ""


def _owner(context: Context, child: dict, reference: dict,
           workloads: dict) -> tuple[Optional[Kind], Optional[dict], str]:
    name, kind_name = _model.text(reference.get("name")) or "", _model.text(reference.get("kind")) or ""
    kind = _KINDS.get(kind_name)
    namespace = _model.namespace_of(child)
    if kind is None or kind is DEPLOYMENT:
        return None, None, f"its owner {kind_name} {name} is not a workload this tool patches: fix the owner by hand"
    obj = workloads.get((kind.name, namespace, name))
    if obj is None:
        try:
            obj = context.source.get(kind, namespace, name)
        except KvdtypeError as error:
            return kind, None, f"its owner {kind_name} {name} could not be read ({error.message})"
    if obj is None:
        return kind, None, f"its owner {kind_name} {name} was not found"
    return kind, obj, ""


def _template(target: Target, judge: "_Judge") -> None:
    """The flag's own copies in the target's Pod template, read again from the template itself
    (a Pod also carries the webhook's copy, which its template does not)."""
    base = _TEMPLATE_PATH.get(target.kind.name, "/spec/template")
    template = _model.dig(target.obj, *base.strip("/").split("/"))
    template = template if isinstance(template, dict) else {}
    spec = _model.pod_spec(template)
    container = _model.target_container(template, spec)
    if container is None:
        target.manual = "its Pod template has no container the webhook targets"
        return
    index = next(i for i, c in enumerate(_model.as_list(spec.get("containers"))) if c is container)
    engine = _model.pod_engine(template)
    every = _model.container_flags(container, engine)
    webhook = _model.webhook_copy(template, every)
    found = [o for o in every if o is not webhook]
    if not found:
        target.state, target.detail = "nothing to do", "its Pod template no longer passes the flag"
        return
    if any(o.in_shell for o in found):
        target.manual = "the flag is inside a shell command string: edit the script by hand"
        return
    occurrences = [o.to_dict() for o in found]
    fields = {}
    for name in ("command", "args"):
        raw = container.get(name)
        if raw is not None and (not isinstance(raw, list) or any(not isinstance(a, str) for a in raw)):
            target.manual = f"the container's {name} is not a plain list of strings: remove the flag by hand"
            return
        fields[name] = raw or []
    drops = {name: _drops(occurrences, fields, name) for name in fields}
    for name, drop in drops.items():
        if drop:
            path = f"{base}/spec/containers/{index}/{name}"
            label = path.strip("/").replace("/", ".").replace(f"containers.{index}", f"containers[{index}]")
            _add_part(target, _Part(path, fields[name], drop, label), occurrences)
    reading = _model.container_reading(container, engine)
    change = judge.change(reading.value if reading.runs else None, _model.pod_binding(template) or "", target.namespace,
                          injected=True)
    if change:
        target.changes.append(f"container {_model.text(container.get('name'))}: {change}")


# --- Removing tokens -------------------------------------------------------------------------

def _drops(occurrences: list[dict], fields: dict[str, list], name: str) -> list[int]:
    """Indices in field ``name`` to drop: each occurrence, and its value when it is the next entry
    (which may be the first of ``args`` for a flag ending ``command``)."""
    order = list(fields)
    drop: set[int] = set()
    for o in occurrences:
        where, index = o.get("field") or name, o["index"]
        separate = "=" not in o["token"] and o.get("value") is not None and o.get("spelling") != _engines.SPACED
        if where == name:
            drop.add(index)
            if separate and index + 1 < len(fields[name]):
                drop.add(index + 1)
        elif separate and where in order and order.index(where) + 1 == order.index(name) \
                and index + 1 >= len(fields[where]) and fields[name]:
            drop.add(0)
    return sorted(drop)


def _add_part(target: Target, part: _Part, occurrences: list[dict]) -> None:
    if not part.drop:
        return
    for index in sorted(part.drop, reverse=True):  # from the end: earlier indices stay valid
        target.ops.append({"op": "remove", "path": f"{part.path}/{index}"})
    target.revert.append({"op": "replace", "path": part.path, "value": list(part.original)})
    target.after.append({"path": part.path, "value": [t for i, t in enumerate(part.original) if i not in part.drop]})
    target.removes.append(f"{part.label}[{','.join(map(str, part.drop))}]: "
                          f"{' '.join(part.original[i] for i in part.drop)}")


def _walk(obj: dict, pointer: str) -> tuple[list, str]:
    """The list a ``remove`` op's pointer ends in, and the index in it."""
    parts = pointer.strip("/").split("/")
    node: Any = obj  # dicts and lists down to that list
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, parts[-1]


# --- What the role or container runs after the patch -----------------------------------------

@dataclass
class _Judge:
    setting_on: Optional[bool]
    setting_said: str
    dtypes: dict
    known: set

    def change(self, value: Optional[str], binding: str, namespace: str = "", injected: bool = False) -> str:
        """Why removing the flag changes the dtype in use ("" when it does not).

        A role's own copy comes after the operator's and wins, so removing it hands the role its
        Binding's dtype. An injected Pod's own copy comes before the webhook's, which wins while the
        Setting is on: removing it then changes nothing."""
        if value is None:
            return ""  # the flag is not read as a value today: the process fails anyway
        if injected and self.setting_on is True:
            return ""
        dtype = next((d for (ns, name), d in self.dtypes.items()
                      if name == binding and (not namespace or ns == namespace)), None)
        if self.setting_on is not True and value != "auto":
            after = f", then {dtype} once the operator enforces it" if dtype else ""
            return (f"{self.setting_said}, so no dtype is rendered before the upgrade: after removal it runs its "
                    f"engine's default (auto) instead of {value}{after}")
        if dtype is None:
            missing = "does not exist" if not any(name == binding for _, name in self.known) else "declares no dtype"
            return (f"its Binding {binding!r} {missing}: after removal it runs its engine's default (auto) instead "
                    f"of {value}")
        if dtype == value or dtype in _engines.equivalents(value):
            return ""
        return f"it runs {value} today; after removal it runs its Binding {binding}'s {dtype}"


def setting_state(context: Context) -> tuple[Optional[bool], str]:
    """(whether the operator renders the dtype now, how to say it when it does not)."""
    try:
        setting = context.source.get(SETTING, context.system_namespace, _model.SETTING_NAME)
    except KvdtypeError as error:
        return None, f"the Setting cannot be read ({error.message})"
    if setting is None:
        return None, f"the Setting {context.system_namespace}/{_model.SETTING_NAME} is absent"
    on = _model.setting_is_on(setting)
    return on, "the Setting is off" if on is False else "the Setting's value in force is unknown"


def _settle(target: Target, accept_dtype_change: bool) -> None:
    """The state and detail of a planned target: manual, refused, or planned."""
    if target.state != PLANNED:
        return
    if target.manual:
        target.state, target.detail = MANUAL, target.manual
        return
    rolls = _ROLLS.get(target.kind.name, "")
    if target.changes and not accept_dtype_change:
        target.state = REFUSED
        target.detail = ("; ".join(target.changes) + ". Refused: pass --accept-dtype-change to patch it anyway "
                         f"({rolls})")
        return
    accepted = f"dtype change accepted: {'; '.join(target.changes)}. " if target.changes else ""
    target.detail = f"{accepted}Patching it rolls its replicas: {rolls}."


# --- The command ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class FixOptions:
    """``find-flags --fix``'s flags, typed: what the fix reads, taken by the subcommand from the
    parsed command line."""

    fix: bool
    apply: bool
    yes: bool
    #: ``none``, ``client`` or ``server``.
    dry_run: str
    accept_dtype_change: bool
    backup_dir: Optional[str]
    #: --force-managed: patch objects that Helm, Argo CD, Flux, a controller or a field manager manage.
    force_managed: bool = False


def fix(context: Context, inventory: FlagInventory, found: Report, options: FixOptions) -> Report:
    """Plan by default; --apply writes (after asking on a terminal); --dry-run=server sends with dryRun=All."""
    writing = options.apply or options.dry_run == "server"
    on, said = setting_state(context)
    targets = plan(context, inventory, found, on, said, options.accept_dtype_change)
    report = Report(kind="FindFlagsFix", columns=COLUMNS, empty_message="Nothing to fix: no role, Pod or Pod "
                    "template passes --kv-cache-dtype itself.")
    ready = [t for t in targets if t.state == PLANNED]
    managed = _managed.managed_writes(context, [_patch_write(t) for t in ready],
                                      inventory.managers_reader(context.source, context.offline))
    directory: Optional[Path] = None
    if writing and ready and options.dry_run != "client":
        if options.dry_run == "server":
            _write(context, ready, None, dry_run=True)
        else:
            _managed.refuse(context, managed, options.force_managed, _SOURCE_HINT)
            _confirm(context, ready)
            with _signals.in_progress("find-flags --fix --apply"):  # a signal ends it as Ctrl-C does: journaled
                directory = _backup(context, ready, options.backup_dir, _managed.record(managed))
                _write(context, ready, directory, dry_run=False)
    _fill(report, targets, found, directory, writing and options.dry_run != "client")
    _managed.note(report, managed, options.force_managed)
    return report


#: Where a refused fix's patched objects are, for the source (``_changes.managed.refuse``).
_SOURCE_HINT = "the plan's -o yaml prints the patched objects, and -o patch the JSON patches, to apply in the source"


def _patch_write(target: Target) -> _managed.Write:
    """A planned patch, as a write on the object read: the lists it changes are its fields."""
    fields = [pointer_field(target.as_read, revert["path"]) for revert in target.revert]
    return _managed.write_of(target.kind.name, target.as_read, _managed.PATCH, fields)


def check_options(context: Context, options: FixOptions) -> None:
    """Refuse what cannot be done before anything is read."""
    if not options.fix:
        given = [flag for flag, on in (("--apply", options.apply), ("--yes", options.yes),
                                       ("--dry-run", options.dry_run != "none"),
                                       ("--accept-dtype-change", options.accept_dtype_change),
                                       ("--backup-dir", options.backup_dir),
                                       (_managed.FORCE_MANAGED, options.force_managed)) if on]
        if given:
            raise UsageError(f"{given[0]} goes with --fix")
        return
    if context.offline and (options.apply or options.dry_run == "server"):
        raise UsageError("find-flags --fix writes to a live cluster only: with -f/--filename it plans (drop "
                         f"{'--apply' if options.apply else '--dry-run=server'}, or drop -f)")
    if options.apply and options.dry_run == "client":
        raise UsageError("--apply and --dry-run=client cannot be used together")


def _confirm(context: Context, ready: list[Target]) -> None:

    for target in ready:
        context.env.progress(f"patch {target.ref}: remove {'; '.join(target.removes)}. {target.detail}")
    confirm(context, f"Patch {len(ready)} object(s)?")


def _backup(context: Context, ready: list[Target], backup_dir: Optional[str], managers: list[dict]) -> Path:
    directory = Path(backup_dir) if backup_dir else fix_directory()
    steps = [_step(t) for t in ready]
    Journal.create(directory, {"operation": OPERATION, "managers": managers, "cluster": identity_of(context.source)},
                   steps, [t.as_read for t in ready])
    context.env.progress(f"saved {len(ready)} object(s) in {directory}/ (kubectl kvdtype escape restore {directory} "
                         "reverts the fix)")
    return directory


def _step(target: Target) -> dict:
    return {"id": "/".join(target.key), "kind": target.kind.name, "group": target.kind.group,
            "version": target.kind.versions[0], "plural": target.kind.plural, "namespace": target.namespace,
            "name": target.name, "patch": target.patch, "revert": target.revert, "after": target.after,
            "uid": _model.dig(target.obj or {}, "metadata", "uid"), "backup": backup_name(target.obj or {})}


def _write(context: Context, ready: list[Target], directory: Optional[Path], dry_run: bool) -> None:
    journal = Journal.read(directory) if directory else None
    done: list[str] = []
    for target in ready:
        context.env.progress(f"patch {target.ref}{' (dry run)' if dry_run else ''}")
        try:
            _patch_one(context, target, journal, dry_run)
        except ApiError as error:
            if error.code in (409, 422):
                _conflicted(context, target, error)
                continue
            raise _stopped(target, error, done, directory, journal) from None
        except KvdtypeError as error:
            raise _stopped(target, error, done, directory, journal) from None
        except KeyboardInterrupt as signal:  # the PATCH may have been applied: the journal says it was sent
            raise _stopped(target, Interrupted("interrupted", interrupted_status(signal)), done, directory,
                           journal) from None
        if target.state == PLANNED:
            target.state = DRY if dry_run else PATCHED
            done.append(str(target.ref))


def _patch_one(context: Context, target: Target, journal: Optional[Journal], dry_run: bool) -> None:
    """GET the object just before; if it is still as planned (uid, generation, the lists the
    patch removes from), record the PATCH in the journal, then send it guarded by that GET's
    resourceVersion. A change stops this object only, said as a conflict."""
    current = context.source.get(target.kind, target.namespace, target.name)
    changed = _changes(target, current)
    if changed:
        target.state, target.detail = CONFLICT, f"changed since it was read ({changed}): nothing was written there; " \
                                                 "run the command again"
        return
    version = str(_model.dig(current or {}, "metadata", "resourceVersion") or "")
    step_id = "/".join(target.key)
    if journal is not None:
        journal.data.setdefault("sent", {})[step_id] = version
        journal.save()
    guard = [{"op": "test", "path": "/metadata/resourceVersion", "value": version}]
    answer = context.writable_source.json_patch(target.kind, target.namespace, target.name, guard + target.ops,
                                                dry_run=dry_run)
    if journal is not None:
        journal.mark(step_id, str(_model.dig(answer, "metadata", "resourceVersion") or ""))


def _changes(target: Target, current: Optional[dict]) -> str:
    """What changed in ``current`` since the plan read the object ("" when nothing the patch depends on)."""
    if current is None:
        return "deleted"
    before = target.as_read
    found = []
    for field_ in ("uid", "generation"):
        old, new = _model.dig(before, "metadata", field_), _model.dig(current, "metadata", field_)
        if old is not None and old != new:
            found.append(f"metadata.{field_} {old} -> {new}")
    for revert in target.revert:
        if _at(current, revert["path"]) != revert["value"]:
            found.append(f"{revert['path']} is no longer as read")
    return "; ".join(found)


def _at(obj: Any, pointer: str) -> Any:
    """The value at a JSON pointer, or None where the path does not lead."""
    node = obj
    for part in pointer.strip("/").split("/"):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            return None
    return node


def _conflicted(context: Context, target: Target, error: ApiError) -> None:
    """409/422: changed since it was read (the test failed), or the server refused the patch."""
    try:
        now = context.source.get(target.kind, target.namespace, target.name)
    except KvdtypeError:
        now = None
    current = str(_model.dig(now or {}, "metadata", "resourceVersion") or "")
    target.state = CONFLICT
    if now is None or current != target.resource_version:
        target.detail = (f"changed since it was read (resourceVersion {target.resource_version} -> "
                         f"{current or 'gone'}): nothing was written there; run the command again")
    else:
        target.detail = f"the server refused the patch ({error.message}): nothing was written there"


def _stopped(target: Target, error: KvdtypeError, done: list[str], directory: Optional[Path],
             journal: Optional[Journal] = None) -> KvdtypeError:
    """One sentence: where it stopped, what is done, how to undo it; kept in the backup directory too."""
    so_far = "; ".join(done) or "nothing"
    where = (f"; the originals are in {directory}/ (kubectl kvdtype escape restore {directory} reverts what was "
             "patched, this one included if its PATCH was applied; run the same command again to carry on)"
             ) if directory else ""
    message = f"cannot patch {target.ref}: {error.message}. Patched so far: {so_far}{where}"
    if journal is not None:
        journal.note_stop(message)
    if isinstance(error, Interrupted):
        return Interrupted(message, error.status)
    return KvdtypeError(message)


def _fill(report: Report, targets: list[Target], found: Report, directory: Optional[Path], writing: bool) -> None:
    report.judged = [target.ref for target in targets]  # each object the fix would patch
    for target in targets:
        report.items.append({
            "namespace": target.namespace, "kind": target.kind.name, "name": target.name,
            "removes": target.removes, "state": target.state, "detail": target.detail, "fixes": target.fixes,
            "dtypeChanges": target.changes, "resourceVersion": target.resource_version or None,
            "patch": target.patch if target.ops else None,
        })
        code = {MANUAL: FIX_MANUAL, REFUSED: FIX_REFUSED, CONFLICT: FIX_CONFLICT}.get(target.state)
        if code:
            report.add(code, target.ref, f"{target.ref}: {target.detail}", fixes=target.fixes)
    shown = [t for t in targets if t.ops and t.state in (PLANNED, PATCHED, DRY)]
    report.manifests = [t.patched() for t in shown]
    report.patches = [{"apiVersion": t.as_read["apiVersion"], "kind": t.kind.name, "namespace": t.namespace,
                       "name": t.name, "patch": t.patch} for t in shown]
    report.warnings += found.warnings
    counts = {state: sum(1 for t in targets if t.state == state)
              for state in (PLANNED, PATCHED, DRY, REFUSED, MANUAL, CONFLICT)}
    report.summary = {"objects": len(targets), "backupDirectory": str(directory) if directory else None,
                      **{k.replace(" (dry run)", "DryRun"): v for k, v in counts.items()}}
    report.headline = _headline(counts, directory, writing)


def _headline(counts: dict, directory: Optional[Path], writing: bool) -> str:
    rest = []
    if counts[REFUSED]:
        rest.append(f"{counts[REFUSED]} refused (the dtype in use would change: --accept-dtype-change)")
    if counts[MANUAL]:
        rest.append(f"{counts[MANUAL]} manual step(s)")
    if counts[CONFLICT]:
        rest.append(f"{counts[CONFLICT]} changed meanwhile and left alone")
    tail = f"; {', '.join(rest)}." if rest else "."
    if counts[PATCHED]:
        return (f"Patched {counts[PATCHED]} object(s); each rolls its replicas{tail} Originals saved in {directory}/: "
                f"kubectl kvdtype escape restore {directory} reverts them.")
    if counts[DRY]:
        return f"Dry run, nothing was changed: the server accepted {counts[DRY]} patch(es){tail}"
    if writing:
        return f"Nothing was written{tail}"
    return (f"Plan only, nothing was changed: {counts[PLANNED]} object(s) would be patched, each rolling its "
            f"replicas{tail} Run again with --apply to write.")


# --- escape restore of a fix's backup directory ------------------------------------------------

def is_fix_backup(directory: Path) -> bool:
    try:
        data = json.loads((directory / JOURNAL).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("operation") == OPERATION


RESTORE_COLUMNS = [
    Column("OBJECT", "object"),
    Column("STATE", "state", status=True),
    Column("DETAIL", "detail"),
]


def restore_fix(context: Context, options: RestoreOptions) -> Report:
    """Put each patched object's lists back, only where its resourceVersion is the one the fix left."""
    directory = Path(options.directory)
    journal = Journal.read(directory)
    journal.check_cluster(context.source, "put it back on that cluster (--context)")
    for step in journal.steps:
        _check_fix_step(journal, step)
    report = Report(kind="RestorePlan", columns=RESTORE_COLUMNS)
    ready = []
    reverts: list[_managed.Write] = []  # what restoring patches, for who manages it
    for step in journal.steps:
        kind = _KINDS[step["kind"]]
        item = {"object": f"{step['kind']} {step['namespace']}/{step['name']}", "kind": step["kind"],
                "namespace": step["namespace"], "name": step["name"], "state": "", "detail": ""}
        report.items.append(item)
        left = journal.done.get(step["id"])
        sent = step["id"] in (journal.data.get("sent") or {})
        if not left and not sent:
            item.update(state="not patched", detail="the fix did not patch it: nothing to revert")
            continue
        existing = context.source.get(kind, step["namespace"], step["name"])
        if not left:  # its PATCH was sent and no answer recorded: the object itself tells whether it applied
            left = _in_flight(report, item, step, existing, directory)
            if not left:
                continue
        current = str(_model.dig(existing or {}, "metadata", "resourceVersion") or "")
        if existing is None:
            item.update(state="gone",
                        detail=f"deleted since the fix: left alone (its original is {directory / step['backup']})")
        elif current != left:
            _restore_conflict(report, item, step, left, current)
        else:
            item.update(state="planned", detail="unchanged since the fix: its flag is put back")
            ready.append((kind, step, item, left))
            reverts.append(_managed.write_of(step["kind"], existing, _managed.PATCH,
                                             [pointer_field(existing, r["path"]) for r in step["revert"]]))
    dry = options.dry_run == "server"
    managed = _managed.managed_writes(context, reverts)
    _managed.note(report, managed, options.force_managed)
    if ready and options.apply and not dry and options.dry_run != "client":
        _managed.refuse(context, managed, options.force_managed, "the backup directory holds the objects as they "
                                                                  "were before the fix, to apply in the source")
    if ready and (options.apply or dry) and options.dry_run != "client":
        with nullcontext() if dry else _signals.in_progress("escape restore --apply of a fix"):
            for kind, step, item, left in ready:
                _revert(context, kind, step, item, left, report, dry)
    reverted = sum(1 for i in report.items if i["state"] in ("restored", "restored (dry run)"))
    mode = "applied" if options.apply and options.dry_run == "none" else (
        f"dry-run-{options.dry_run}" if options.dry_run != "none" else "plan")
    report.summary = {"directory": str(directory.resolve()), "operation": OPERATION, "mode": mode,
                      "planned": len(ready), "restored": reverted}
    if mode == "plan":
        report.headline = (f"Plan only, nothing was changed: {len(ready)} object(s) patched by find-flags --fix would "
                           "be put back. Run again with --apply to restore them.")
    else:
        report.headline = (f"{'Dry run: ' if mode.startswith('dry') else ''}Restored {reverted} of "
                           f"{len(journal.steps)} object(s) the fix patched; each rolls its replicas again.")
    return report


#: The lists a fix patches (and its restore puts back), by kind: a role's extraArgs, a Pod template
#: container's command and args.
_PATCHED_LISTS = {
    DEPLOYMENT.name: re.compile(r"/spec/roles/\d+/extraArgs"),
    "CronJob": re.compile(r"/spec/jobTemplate/spec/template/spec/containers/\d+/(command|args)"),
}
_TEMPLATE_LISTS = re.compile(r"/spec/template/spec/containers/\d+/(command|args)")


def _check_fix_step(journal: Journal, step: object) -> None:
    """A step of a fix journal is a patch find-flags --fix makes: of a kind it patches, named as the
    API server names objects, putting back only the lists it removes the flag from. Anything else
    (a planted or hand-edited journal) is refused before the first write."""
    what = "a step that is no patch of a ModelDeployment or a workload"
    if isinstance(step, dict) and isinstance(step.get("kind"), str) and step["kind"] in _KINDS:
        kind = _KINDS[step["kind"]]
        what = f"{kind.name} {step.get('namespace')}/{step.get('name')}"
        lists = _PATCHED_LISTS.get(kind.name, _TEMPLATE_LISTS)
        problem = _fix_step_problem(step, kind, lists)
    else:
        problem = "is not of a kind find-flags --fix patches"
        if isinstance(step, dict):
            what = f"{step.get('kind')} {step.get('namespace')}/{step.get('name')}"
    if problem:
        raise KvdtypeError(f"{journal.directory / JOURNAL} holds a step find-flags --fix never writes: {what} "
                           f"{problem}; nothing was changed")


def _fix_step_problem(step: dict, kind: Kind, lists: "re.Pattern[str]") -> str:
    if (step.get("group"), step.get("plural")) != (kind.group, kind.plural):
        return f"names the resource {step.get('plural')}.{step.get('group')}"
    if not isinstance(step.get("id"), str) or _names.object_problem(kind, step.get("namespace"), step.get("name")):
        return "has no name the API server accepts"
    for field_name in ("revert", "after"):
        entries = step.get(field_name)
        if not isinstance(entries, list):
            return f"has no {field_name} list"
        for entry in entries:
            path = entry.get("path") if isinstance(entry, dict) else None
            if not isinstance(path, str) or not lists.fullmatch(path):
                return f"writes {path!r}, no list a fix changes"
            value = entry.get("value")
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or \
                    (field_name == "revert" and entry.get("op") != "replace"):
                return f"writes {path} with something else than a list of strings"
    return ""


def _in_flight(report: Report, item: dict, step: dict, existing: Optional[dict], directory: Path) -> str:
    """A PATCH the fix sent without recording an answer (interrupted): applied when every list is
    as the patch leaves it (then its resourceVersion now is the one to revert from), not applied
    when every list is as read; otherwise this cannot tell, and says so, naming the object."""
    if existing is None:
        item.update(state="gone",
                    detail=f"deleted since the fix: left alone (its original is {directory / step['backup']})")
        return ""
    if step.get("uid") and _model.dig(existing, "metadata", "uid") != step["uid"]:
        values = None
    else:
        values = [_at(existing, a["path"]) for a in step.get("after") or []]
    if values is not None and step.get("after") and values == [a["value"] for a in step["after"]]:
        return str(_model.dig(existing, "metadata", "resourceVersion") or "")
    if values is not None and values == [r["value"] for r in step["revert"]]:
        item.update(state="not patched", detail="its PATCH was interrupted and not applied: nothing to revert")
        return ""
    item.update(state="unknown", detail="its PATCH was interrupted and it has changed since: cannot tell whether "
                                        "the fix removed its flag; left alone")
    report.add(RESTORE_CONFLICT, ObjectRef(step["kind"], step["namespace"], step["name"]),
               f"{item['object']}: find-flags --fix was interrupted while patching it, and it changed since, so "
               "restore cannot tell whether the patch was applied: nothing was written there; compare it with its "
               f"backup {directory / step['backup']} and put the flag back by hand if needed")
    return ""


def _restore_conflict(report: Report, item: dict, step: dict, left: str, current: str) -> None:
    item.update(state="conflict", detail=f"changed since the fix (resourceVersion {left} -> {current}): left alone")
    report.add(RESTORE_CONFLICT, ObjectRef(step["kind"], step["namespace"], step["name"]),
               f"{item['object']} changed since find-flags --fix patched it (resourceVersion {left}, now {current}): "
               "nothing was written there; compare it with its backup and put the flag back by hand if needed")


def _revert(context: Context, kind: Kind, step: dict, item: dict, left: str, report: Report, dry: bool) -> None:
    patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": left}] + step["revert"]
    context.env.progress(f"restore {item['object']}{' (dry run)' if dry else ''}")
    try:
        context.writable_source.json_patch(kind, step["namespace"], step["name"], patch, dry_run=dry)
    except ApiError as error:
        if error.code not in (409, 422):
            raise KvdtypeError(f"cannot restore {item['object']}: {error.message}") from None
        now = context.source.get(kind, step["namespace"], step["name"])
        _restore_conflict(report, item, step, left, str(_model.dig(now or {}, "metadata", "resourceVersion") or "gone"))
        return
    item.update(state="restored (dry run)" if dry else "restored", detail="its flag is back, as before the fix")

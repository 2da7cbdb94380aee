"""``find-flags --fix``'s plan: one JSON patch per object to change, or why it is a manual step.

``find-flags`` says where a role, a Pod or a Pod template passes ``--kv-cache-dtype`` itself; this
turns those places into ``Target``s: a role's copies go from its ``extraArgs`` (the flag and its
value, in whichever form); a workload's from its Pod template's container ``command``/``args``; an
injected Pod is fixed in the top of its owner chain, climbed as who-manages-what climbs it
(``_sources.managers.ManagerReader.top_owner``: Pod -> ReplicaSet -> Deployment, StatefulSet,
DaemonSet, Job -> CronJob). A Pod without an owner, a Job (its template cannot change) and a flag
inside a shell string are manual steps: said, never guessed. A patch that changes the dtype in
use is refused unless ``--accept-dtype-change``.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Optional

from kubectl_kvdtype._commands.command import Context
from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._kits.records import field, record_type
from kubectl_kvdtype._kits.report import ObjectRef, Report
from kubectl_kvdtype._kits.status import KvdtypeError
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import DEPLOYMENT, POD, REPLICASET, SETTING, WORKLOADS, Kind
from kubectl_kvdtype._sources.managers import ManagerReader

if TYPE_CHECKING:
    from kubectl_kvdtype._judging.flags import FlagInventory
#: The journal's ``operation`` for a fix (a rebind's journal has none).
OPERATION = "find-flags-fix"
_WORKLOAD = {k.name: k for k in WORKLOADS}
KINDS = {k.name: k for k in (DEPLOYMENT, REPLICASET) + WORKLOADS}
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


@record_type
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


@record_type
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
    reader = inventory.managers_reader(context.source, context.offline)  # climbs a Pod's owners
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
                kind, obj, why = _template_owner(context, reader, pods.get((item["namespace"], item["name"])))
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


def _workload(item: dict, workloads: dict) -> tuple[Optional[Kind], Optional[dict], str]:
    kind = _WORKLOAD.get(item["kind"])
    obj = workloads.get((item["kind"], item["namespace"], item["name"]))
    if kind is None or obj is None:
        return kind, None, f"{item['kind']} {item['name']} could not be read again"
    if kind.name == "Job":
        return kind, None, ("a Job's Pod template cannot be changed: delete the Job and create it again without "
                            "the flag")
    return kind, obj, ""


def _template_owner(context: Context, reader: ManagerReader,
                    pod: Optional[dict]) -> tuple[Optional[Kind], Optional[dict], str]:
    """The object whose Pod template makes this Pod, or why it is a manual step: the top of its
    owner chain, climbed as who manages it is climbed (``ManagerReader.top_owner``, the one climb:
    ReplicaSet -> Deployment, Job -> CronJob, from what the run read before asking the cluster)."""
    if pod is None:
        return None, None, "the Pod could not be read again"
    if _model.controller_of(pod) is None:
        return None, None, "it has no owner: delete it and create it again without the flag"
    top = reader.top_owner(POD.name, pod)
    if top is None:  # the climb stopped at its first owner
        return None, None, _unclimbed(context, pod) or _not_patched(_model.controller_of(pod) or {})
    kind, obj = KINDS.get(top[0]), top[1]
    if kind is None or kind is DEPLOYMENT:
        return None, None, _not_patched({"kind": top[0], "name": _model.name_of(obj)})
    above = _model.controller_of(obj)
    why = _unclimbed(context, obj) if above is not None and _model.text(above.get("kind")) in KINDS else None
    if why:  # the climb stopped below an owner it could not read
        return kind, None, why
    if kind.name == "Job":
        return kind, None, (f"its owner Job {_model.name_of(obj)}'s Pod template cannot be changed: delete the Job "
                            "and create it again without the flag")
    return kind, obj, ""


def _unclimbed(context: Context, child: dict) -> Optional[str]:
    """Why the climb did not go past ``child`` to its controller (not found, could not be read), or
    None when that owner is there (a kind it does not climb)."""
    reference = _model.controller_of(child) or {}
    name, kind_name = _model.text(reference.get("name")) or "", _model.text(reference.get("kind")) or ""
    kind = KINDS.get(kind_name)
    if kind is None or kind is DEPLOYMENT:
        return None
    try:
        found = context.source.get(kind, _model.namespace_of(child), name)
    except KvdtypeError as error:
        return f"its owner {kind_name} {name} could not be read ({error.message})"
    return None if found is not None else f"its owner {kind_name} {name} was not found"


def _not_patched(reference: dict) -> str:
    name, kind_name = _model.text(reference.get("name")) or "", _model.text(reference.get("kind")) or ""
    return f"its owner {kind_name} {name} is not a workload this tool patches: fix the owner by hand"


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


def _drops(occurrences: list[dict], fields: dict[str, list], name: str) -> list[int]:
    """Indices in field ``name`` to drop: each occurrence, and its value when it is the next entry
    (which may be the first of ``args`` for a flag ending ``command``)."""
    order = list(fields)
    drop: set[int] = set()
    for o in occurrences:
        where, index = o.get("field") or name, o["index"]
        separate = "=" not in o["token"] and o.get("value") is not None and o.get("spelling") != _verdicts.SPACED
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


def at(obj: Any, pointer: str) -> Any:
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


@record_type
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
        if dtype == value or dtype in _records.equivalents(value):
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

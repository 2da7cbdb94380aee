"""``escape rebind``'s plan: read the cluster, refuse what cannot be done safely, build every write.

Nothing here writes: ``make_plan`` returns the ``Plan`` the plan-only run reports and ``--apply``
carries out (``_changes.rebind.execute``).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Optional

from kubectl_kvdtype._changes import managed as _managed
from kubectl_kvdtype._changes.journal import finished
from kubectl_kvdtype._changes.rebind.steps import (
    DTYPE_SPELLING,
    KINDS_BY_NAME,
    NEW_BINDING_ID,
    NOT_COPIED,
    OLD_BINDING_ID,
    REBIND_ANNOTATION,
    SETTING_OFF_ID,
    SETTING_ON_ID,
    Action,
    Names,
    Plan,
    RebindOptions,
    Step,
    Strategy,
    expectation,
    is_dns_label,
    key_of,
    suffixed,
)
from kubectl_kvdtype._changes.setting import OFF, ON, attached_counts, blockers_of
from kubectl_kvdtype._commands.command import Context
from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._judging.bindings import (
    BindingInventory,
    Consumer,
    build_check_report,
    consumer_verdict,
    read_setting,
)
from kubectl_kvdtype._kits.codes import DTYPE_REJECTED, DTYPE_UNKNOWN, MANUAL_STEP, NAME_CHANGE, SETTING_MISSING
from kubectl_kvdtype._kits.records import replace
from kubectl_kvdtype._kits.report import ObjectRef
from kubectl_kvdtype._kits.status import ApiError, KvdtypeError, UsageError
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, POD, POOL, SETTING, Kind, Source

_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink",
               "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers")


def validate_names(options: RebindOptions) -> None:
    """The given spellings, before the cluster is read: a usage error (exit 2), nothing written."""
    if not DTYPE_SPELLING.match(options.dtype):
        raise UsageError(f"--dtype {options.dtype!r} is not a dtype spelling: it starts with a letter or digit and "
                         "holds only letters, digits, '_', '.' and '-'")
    for flag, value in (("--new-name", options.new_name), ("--domain-name", options.domain_name),
                        ("--suffix", options.suffix)):
        if value is not None and not is_dns_label(value):
            raise UsageError(f"{flag} {value!r} is not a valid DNS label (at most 63 lower-case letters, digits "
                             "and '-', starting and ending with a letter or digit)")


def _validate_derived(names: Names, moved: list[dict]) -> None:
    """The names this tool makes up, before anything is planned: exit 3, naming the flag that fixes it."""
    derived = [("the new Binding's name", names.new_name, "--new-name"),
               ("the new domain name", names.domain_name, "--domain-name")]
    if names.strategy is Strategy.SIDE_BY_SIDE:
        derived += [(f"the side-by-side copy of {_model.name_of(d)}", suffixed(_model.name_of(d), names.suffix),
                     "a shorter --suffix") for d in moved]
    for what, value, fix in derived:
        if not is_dns_label(value):
            raise KvdtypeError(f"{what} would be {value!r}, which is not a valid DNS label (at most 63 lower-case "
                               f"letters, digits and '-'): pass {fix}; nothing was changed")


def make_plan(context: Context, namespace: str, options: RebindOptions) -> Plan:
    """Read the cluster, refuse what cannot be done safely, and build every step (no write)."""
    source, system = context.source, context.system_namespace
    binding = source.get(BINDING, namespace, options.binding)
    if binding is None:
        done = finished(Path.cwd(), namespace, options.binding)  # --backup-dir's journal resumes instead
        hint = f" (a finished rebind of it is journaled in {done[-1]}/)" if done else ""
        raise KvdtypeError(f"the KVCachePoolBinding {namespace}/{options.binding} does not exist{hint}; "
                           "nothing was changed")
    dtype = options.dtype
    _refuse_dtype(binding, dtype)
    inventory, cluster_wide = read_inventory(source, namespace, system)
    moved = [d for d in inventory.deployments
             if _model.namespace_of(d) == namespace and _model.deployment_binding(d) == options.binding]
    names = resolve_names(options, binding, dtype)
    _validate_derived(names, moved)
    new_binding = binding_copy(source, binding, names)
    _refuse_taken(source, inventory, binding, names, moved, namespace)
    plan = Plan(namespace, options.binding, names, [], force_unknown=bool(options.force_unknown_dtype))
    _judge_new_dtype(inventory, new_binding, moved, names, system, plan)
    pods = [p for p in source.list(POD, namespace, f"{_model.INJECT_LABEL}=true")
            if _model.pod_binding(p) == options.binding]
    setting, _ = read_setting(source, system)  # None also when the gpustack.ai group is not served
    _build_steps(plan, source, binding, new_binding, moved, pods, setting, system)
    _judge_setting_after(plan, inventory, new_binding, moved, system, cluster_wide, bool(pods))
    _manual_steps(plan, pods, names.new_name)
    return plan


def _refuse_dtype(binding: dict, dtype: str) -> None:
    if dtype == "auto":
        raise KvdtypeError("--dtype auto is refused on a new Binding while the Setting is on: name an explicit "
                           "dtype; nothing was changed")
    if dtype == _model.binding_dtype(binding):
        raise KvdtypeError(f"the Binding already has dtype {dtype}: there is nothing to correct; nothing was changed")


def read_inventory(source: Source, namespace: str, system: str) -> tuple[BindingInventory, bool]:
    """The whole cluster for step 5's judgement; only the namespace when listing more is forbidden."""
    try:
        return BindingInventory.read(source, None, system, whole=True), True  # the deployments moved are backed up
    except ApiError as error:
        if error.code != 403:
            raise
        return BindingInventory.read(source, namespace, system, whole=True), False


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "new"


def resolve_names(options: RebindOptions, binding: dict, dtype: str) -> Names:
    """What the flags name, or else what the old Binding and the dtype make up."""
    slug = _slug(dtype)
    return Names(dtype=dtype, new_name=options.new_name or suffixed(options.binding, slug),
                 domain_name=options.domain_name or suffixed(_model.binding_domain(binding), slug),
                 strategy=options.strategy or Strategy.REPLACE, suffix=options.suffix or slug,
                 keep_old_binding=bool(options.keep_old_binding))


def _api_version(source: Source, kind: Kind) -> str:
    served = getattr(source, "served_version", None)
    return f"{kind.group}/{served(kind) if served else kind.versions[0]}"


def _fresh_metadata(obj: dict, name: str, origin: str) -> dict:
    """The metadata a new copy may carry: no server-set field, no stale last-applied annotation."""
    meta = copy.deepcopy(obj.get("metadata") or {})
    for key in _SERVER_SET:
        meta.pop(key, None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in NOT_COPIED}
    annotations[REBIND_ANNOTATION] = origin
    meta.update(name=name, annotations=annotations)
    return meta


def binding_copy(source: Source, binding: dict, names: Names) -> dict:
    spec = copy.deepcopy(binding.get("spec") or {})
    domain = spec.get("domain")
    if not isinstance(domain, dict):
        domain = {}
    spec["domain"] = {**domain, "name": names.domain_name, "dtype": names.dtype}
    origin = f"{_model.namespace_of(binding)}/{_model.name_of(binding)}"
    return {"apiVersion": _api_version(source, BINDING), "kind": BINDING.name,
            "metadata": _fresh_metadata(binding, names.new_name, origin), "spec": spec}


def deployment_copy(source: Source, deployment: dict, name: str, binding_name: str, origin: str) -> dict:
    spec = copy.deepcopy(deployment.get("spec") or {})
    kv_cache = spec.get("kvCache")
    if not isinstance(kv_cache, dict):
        kv_cache = {}
    pool_ref = kv_cache.get("poolRef")
    if not isinstance(pool_ref, dict):
        pool_ref = {}
    spec["kvCache"] = {**kv_cache, "poolRef": {**pool_ref, "name": binding_name}}
    return {"apiVersion": _api_version(source, DEPLOYMENT), "kind": DEPLOYMENT.name,
            "metadata": _fresh_metadata(deployment, name, origin), "spec": spec}


def _refuse_taken(source: Source, inventory: BindingInventory, binding: dict, names: Names, moved: list[dict],
                  namespace: str) -> None:
    """A new name or domain already claimed: refuse before anything is written."""
    if source.get(BINDING, namespace, names.new_name) is not None:
        raise KvdtypeError(f"a KVCachePoolBinding {namespace}/{names.new_name} already exists: pass another "
                           "--new-name; nothing was changed")
    pool = _model.binding_pool(binding)
    claimed: set[Optional[str]] = {_model.binding_domain(b) for b in inventory.bindings
                                   if _model.binding_pool(b) == pool}
    try:  # the pool echoes every domain it holds; a user may not read cluster-scoped pools
        pool_obj = source.get(POOL, None, pool) if pool else None
    except ApiError:
        pool_obj = None
    claimed |= {_model.text(d.get("name")) for d in _model.as_list(_model.dig(pool_obj, "status", "domains"))
                if isinstance(d, dict)}
    if names.domain_name in claimed:
        raise KvdtypeError(f"the domain name {names.domain_name} is already claimed on the pool {pool}: pass "
                           "another --domain-name; nothing was changed")
    if names.strategy is Strategy.SIDE_BY_SIDE:
        for deployment in moved:
            new = suffixed(_model.name_of(deployment), names.suffix)
            if source.get(DEPLOYMENT, namespace, new) is not None:
                raise KvdtypeError(f"a ModelDeployment {namespace}/{new} already exists: pass another --suffix; "
                                   "nothing was changed")


def _moved_consumers(inventory: BindingInventory, moved: list[dict], binding_name: str) -> list[Consumer]:
    keys = {key_of(d) for d in moved}
    return [replace(c, binding=binding_name) for c in inventory.consumers
            if c.kind == DEPLOYMENT.name and (c.namespace, c.name) in keys]


def _judge_new_dtype(inventory: BindingInventory, new_binding: dict, moved: list[dict], names: Names, system: str,
                     plan: Plan) -> None:
    """check's judgement of the new Binding with its future consumers: refuse a rejected spelling."""
    trial = BindingInventory([new_binding], _moved_consumers(inventory, moved, names.new_name), [], None, None)
    judged = build_check_report(trial, system, offline=True)
    rejected = [f for f in judged.findings if f.code == DTYPE_REJECTED]
    if rejected:
        finding = rejected[0]
        users = ", ".join(f"md/{c['name']}" for c in finding.fields.get("consumers") or [])
        hint = f" (fix: {finding.fields['fix']})" if finding.fields.get("fix") else ""
        raise KvdtypeError(f"refusing the new dtype: {finding.message.split(', so ')[0]}, and {users} would run on "
                           f"it{hint}; nothing was changed")
    unknown = _unknown_to(trial.consumers, names.dtype)
    if unknown and not plan.force_unknown:
        raise KvdtypeError(f"refusing the new dtype: {names.dtype} is not in this tool's table for "
                           f"{', '.join(unknown)}, so it may stop those engines from starting; check their "
                           "documentation, then pass --force-unknown-dtype to use it anyway; nothing was changed")
    for finding in judged.findings:
        if finding.code == DTYPE_UNKNOWN:
            plan.report.add(DTYPE_UNKNOWN, finding.object, finding.message, **finding.fields)


def _unknown_to(consumers: list[Consumer], dtype: str) -> list[str]:
    """``<engine> <version> (md/<name>)`` for each moved deployment whose engine does not know ``dtype``."""
    found = []
    for consumer in consumers:
        engine = consumer.engine
        if engine.name is None or not consumer.receives_flag:
            continue
        judgement = consumer_verdict(engine.name, engine.version, dtype)
        if judgement.verdict == _records.UNKNOWN:
            found.append(f"{engine.name} {engine.version or '(reference version)'} (md/{consumer.name})")
    return found


def _build_steps(plan: Plan, source: Source, binding: dict, new_binding: dict, moved: list[dict],
                 pods: list[dict], setting: Optional[dict], system: str) -> None:
    names, namespace, old = plan.names, plan.namespace, plan.binding
    steps = plan.steps
    if setting is None:
        plan.report.add(SETTING_MISSING, ObjectRef(SETTING.name, system, _model.SETTING_NAME),
                        f"The Setting {system}/{_model.SETTING_NAME} is not there: the operator does not render "
                        "the dtype, so the plan does not switch it.")
    elif moved and _model.setting_values(setting) != (OFF, OFF):  # on, or on in force until the operator catches up
        steps.append(Step(SETTING_OFF_ID, Action.SETTING_OFF, SETTING.name, system, _model.SETTING_NAME,
                          f'spec.value -> "false": replicas stop receiving the broken flag; {_recreates(source)}', OFF))
        plan.originals.append(setting)
    steps.append(Step(NEW_BINDING_ID, Action.CREATE, BINDING.name, namespace, names.new_name,
                      f"same pool, quota and blockSize; dtype {names.dtype}, domain {names.domain_name}",
                      new_binding, expect=expectation(binding), origin=old))
    plan.originals.append(binding)
    plan.manifests.append(new_binding)
    origin = f"{namespace}/{old}"
    creates, deletes = [], []
    for deployment in moved:
        name = _model.name_of(deployment)
        new_name = name if names.strategy is Strategy.REPLACE else suffixed(name, names.suffix)
        body = deployment_copy(source, deployment, new_name, names.new_name, origin)
        plan.originals.append(deployment)
        plan.manifests.append(body)
        side_by_side = names.strategy is Strategy.SIDE_BY_SIDE  # the copy is made while the original still runs
        creates.append(Step(f"create-md:{new_name}", Action.CREATE, DEPLOYMENT.name, namespace, new_name,
                            f"copy of {name} with kvCache.poolRef.name {names.new_name}", body,
                            expect=expectation(deployment) if side_by_side else None, origin=name))
        deletes.append(Step(f"delete-md:{name}", Action.DELETE, DEPLOYMENT.name, namespace, name,
                            "the old deployment" + ("" if side_by_side else " (outage until it is created again)"),
                            expect=expectation(deployment)))
    if names.strategy is Strategy.REPLACE:
        for delete, create in zip(deletes, creates, strict=True):
            steps += [delete, create]
    else:
        steps += creates + deletes
        if moved:
            plan.report.add(NAME_CHANGE, ObjectRef(BINDING.name, namespace, old),
                            f"--strategy side-by-side renames every moved deployment to <name>-{names.suffix}: "
                            "anything addressing it by name (Services and routers selecting "
                            "app.kubernetes.io/instance=<name>, clients, dashboards, alerts, GitOps manifests) must "
                            "follow the new name.",
                            renamed={_model.name_of(d): suffixed(_model.name_of(d), names.suffix) for d in moved})
    if not names.keep_old_binding and not pods:
        steps.append(Step(OLD_BINDING_ID, Action.DELETE, BINDING.name, namespace, old,
                          "the old Binding; its deletion completes once nothing holds it", expect=expectation(binding)))
    if any(s.action is Action.SETTING_OFF for s in steps):  # turned back on only if this plan turned it off
        steps.append(Step(SETTING_ON_ID, Action.SETTING_ON, SETTING.name, system, _model.SETTING_NAME,
                          'spec.value -> "true", unless another Binding would still break an engine', ON))


def _recreates(source: Source) -> str:
    """What flipping the cluster-wide Setting recreates, counted as ``escape off`` counts it."""
    deployments, replicas, why = attached_counts(source)
    if why:
        return f"it recreates every pool-attached replica in the cluster (cannot count them: {why})"
    return f"it recreates {deployments} pool-attached ModelDeployment(s), {replicas} replica(s), cluster-wide"


def _judge_setting_after(plan: Plan, inventory: BindingInventory, new_binding: dict, moved: list[dict], system: str,
                         cluster_wide: bool, keeps_old: bool) -> None:
    """Step 5 as planned: check's judgement of the cluster as it will be after the move."""
    if not any(s.action is Action.SETTING_ON for s in plan.steps):
        return
    gone = (plan.namespace, plan.binding)
    bindings = [b for b in inventory.bindings if keeps_old or key_of(b) != gone] + [new_binding]
    moved_keys = {key_of(d) for d in moved}
    consumers = [c for c in inventory.consumers if (c.namespace, c.name) not in moved_keys or c.kind != DEPLOYMENT.name]
    moved_consumers = _moved_consumers(inventory, moved, plan.names.new_name)
    after = BindingInventory(bindings, consumers + moved_consumers, [], None, None)
    plan.blockers = blockers_of(build_check_report(after, system, offline=True))
    if not cluster_wide:
        plan.blockers.append("(other namespaces: not readable with your permissions)")
    step = next(s for s in plan.steps if s.action is Action.SETTING_ON)
    if plan.blockers:
        step.detail = f"leave it off: {', '.join(plan.blockers)} would still break an engine (judged again then)"


def _manual_steps(plan: Plan, pods: list[dict], new_name: str) -> None:
    """Injected Pods are created by their owners: this tool cannot move them safely."""
    by_owner: dict[str, list[str]] = {}
    for pod in pods:
        controller = _model.controller_of(pod)
        label = (f"{controller.get('kind')} {controller.get('name')}" if controller
                 else f"Pod {_model.name_of(pod)} (no owner)")
        by_owner.setdefault(label, []).append(_model.name_of(pod))
    for owner, pod_names in by_owner.items():
        plan.report.add(
            MANUAL_STEP, ObjectRef(BINDING.name, plan.namespace, plan.binding),
            f"{owner} runs injected Pod(s) {', '.join(pod_names)} naming this Binding: by hand, change the annotation "
            f"{_model.BINDING_ANNOTATION}: {plan.binding} to {new_name} in its Pod template (or on the Pod), let it "
            f"roll, then delete the old Binding (kubectl -n {plan.namespace} delete kvcachepoolbinding "
            f"{plan.binding}); this tool keeps the old Binding meanwhile.",
            owner=owner, pods=pod_names, annotation=_model.BINDING_ANNOTATION, to=new_name)
#: Where a refused rebind's new objects are, for the source (``_changes.managed.refuse``).
SOURCE_HINT = ("the plan's -o yaml prints the new Binding and ModelDeployments to put in the source in place of the "
                "old ones")


def step_writes(plan: Plan, steps: list[Step], source: Optional[Source] = None) -> list[_managed.Write]:
    """The objects ``steps`` delete (as the plan read them, or as ``source`` has them now) and the
    deployments they create again in their place (a replace): what others may manage."""
    originals = {(o.get("kind"), _model.namespace_of(o), _model.name_of(o)): o for o in plan.originals}
    writes = []
    for step in steps:
        again = any(s.action is Action.CREATE and (s.kind, s.name) == (step.kind, step.name) for s in plan.steps)
        if step.action is Action.DELETE:
            obj = source.get(KINDS_BY_NAME[step.kind], step.namespace, step.name) if source is not None else \
                originals.get((step.kind, step.namespace, step.name))
            verb = _managed.DELETE if again else _managed.DELETE_ONLY
        elif step.action is Action.CREATE and step.kind == DEPLOYMENT.name and step.origin == step.name:
            obj, verb = step.body, _managed.RECREATE  # its original is gone already (a resumed replace)
        else:
            continue
        if obj is not None:
            writes.append(_managed.write_of(step.kind, obj, verb))
    return writes

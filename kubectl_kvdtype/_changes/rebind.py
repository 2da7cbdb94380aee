"""``escape rebind``: move a Binding's workloads to a new Binding with a corrected dtype.

The plan (``Step``, ``Plan``, ``make_plan``: read the cluster, refuse what is unsafe, build every
write), the access check, the execution, the resumption from a journal, and the report. The
largest and most dangerous part of ``escape``, so it stands alone; the command line stays in
``escape``, the Setting's reads and writes come from ``_changes.setting``, the backup directory and the
journal from ``_changes.journal``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import shlex
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from kubectl_kvdtype._changes import managed as _managed
from kubectl_kvdtype._changes.journal import JOURNAL, Journal, default_directory, finished, identity_of, unfinished
from kubectl_kvdtype._changes.lease import LEASE_ANNOTATION, Lease, held_refusal, running_holder
from kubectl_kvdtype._changes.setting import (
    OFF,
    ON,
    POLL_SECONDS,
    WAIT_GRACE,
    attached_counts,
    blockers_of,
    require_setting,
    write_setting,
)
from kubectl_kvdtype._commands.command import Context, confirm
from kubectl_kvdtype._engines import verdicts as _engines
from kubectl_kvdtype._judging.judgement import (
    BindingInventory,
    Consumer,
    build_check_report,
    consumer_verdict,
    read_setting,
)
from kubectl_kvdtype._kits import codes as _codes
from kubectl_kvdtype._kits import progress as _progress
from kubectl_kvdtype._kits.codes import (
    DTYPE_REJECTED,
    DTYPE_UNKNOWN,
    MANUAL_STEP,
    NAME_CHANGE,
    SETTING_MISSING,
    SETTING_STAYS_OFF,
    WARNING,
)
from kubectl_kvdtype._kits.report import Column, ObjectRef, Report
from kubectl_kvdtype._kits.status import (
    ApiError,
    Conflict,
    Interrupted,
    KvdtypeError,
    NotFound,
    UsageError,
    interrupted_status,
)
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import (
    BINDING,
    DEPLOYMENT,
    POD,
    POOL,
    SETTING,
    Kind,
    Source,
    WritableSource,
    bounded,
)

#: How long ``--strategy replace`` waits for a deleted ModelDeployment to be gone before recreating it.
GONE_TIMEOUT = 300.0
REBIND_ANNOTATION = "kvdtype.gpustack.ai/rebound-from"
#: On the new Binding of an applied rebind: ``<host>:<absolute path>`` of its journal, so that any
#: run on any machine sees the rebind under way and resumes it, or names where it is.
JOURNAL_ANNOTATION = "kvdtype.gpustack.ai/journal"
SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


class Strategy(Enum):
    """How the moved ModelDeployments are recreated (``--strategy``)."""

    #: Keep each name: delete, then create (a short outage).
    REPLACE = "replace"
    #: Create ``<name>-<suffix>`` first, then delete (no outage, new names).
    SIDE_BY_SIDE = "side-by-side"


class Action(Enum):
    """What a step writes. The value is its name in the journal; ``run_step`` has one runner each."""

    SETTING_OFF = "setting-off"
    CREATE = "create"
    DELETE = "delete"
    SETTING_ON = "setting-on"

    @property
    def word(self) -> str:
        """The step's verb in the plan's table and messages ("turn off", "create")."""
        return _ACTION_WORDS.get(self, self.value)

    @property
    def verb(self) -> str:
        """The API verb the step needs (asked with SelfSubjectAccessReview)."""
        return "patch" if self in (Action.SETTING_OFF, Action.SETTING_ON) else self.value

    @classmethod
    def from_journal(cls, name: object) -> Optional["Action"]:
        """The action a journal names (journals of versions before 0.1.1 name SETTING_OFF
        "patch"); None for a name no version wrote."""
        if name == _OLD_SETTING_OFF:
            return cls.SETTING_OFF
        return next((action for action in cls if action.value == name), None)


_ACTION_WORDS = {Action.SETTING_OFF: "turn off", Action.SETTING_ON: "turn on"}
#: What journals written before 0.1.1 call SETTING_OFF; still read, so that they resume.
_OLD_SETTING_OFF = "patch"
#: The ids of the steps a plan has at most once (a deployment's are ``create-md:<name>``, ``delete-md:<name>``).
SETTING_OFF_ID, NEW_BINDING_ID, OLD_BINDING_ID, SETTING_ON_ID = (
    "setting-off", "create-binding", "delete-binding", "setting-on")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DTYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink",
               "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


#: Annotations that say nothing about what a copy runs: never copied, never "a change since the plan".
_NOT_COPIED = (_LAST_APPLIED, LEASE_ANNOTATION, JOURNAL_ANNOTATION)
#: How often a DELETE is tried again when its resourceVersion precondition failed because only
#: what the plan does not depend on (a controller's status write) changed in between.
_PRECONDITION_ATTEMPTS = 5


class Changed(KvdtypeError):
    """An object the plan depends on changed since the plan: the run stops before touching it."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


# --- escape rebind: the plan ----------------------------------------------------------------------

@dataclass
class Step:
    """One write of the plan; ``body`` is the object to create, or the Setting value to write."""

    id: str
    action: Action
    kind: str
    namespace: str
    name: str
    detail: str
    body: Any = None
    #: What the plan read of the object this step deletes or copies (``name``, ``uid``,
    #: ``generation``, ``fields``): checked just before the write.
    expect: Optional[dict] = None
    #: For a create: the name of the object its body was copied from.
    origin: str = ""

    @classmethod
    def from_journal(cls, entry: dict) -> "Step":
        """A step as a journal recorded it (``check_shape`` has checked its fields and action)."""
        action = Action.from_journal(entry.get("action"))
        if action is None:
            raise KvdtypeError(f"a journal step of no action this version knows ({_shown_name(entry.get('action'))})")
        return cls(**{**entry, "action": action})

    def to_journal(self) -> dict:
        """The step as the journal records it: JSON, its action by name."""
        return {**dataclasses.asdict(self), "action": self.action.value}

    def label(self) -> str:
        return f"{self.action.word} {self.kind} {self.namespace}/{self.name}"


#: How much of a name read from a journal a message repeats.
_NAME_SHOWN = 40


def _shown_name(value: object) -> str:
    """A name a journal gives, for a message: quoted, and cut short (a planted file can hold anything)."""
    text = repr(value)
    return text if len(text) <= _NAME_SHOWN else text[:_NAME_SHOWN] + "..."


@dataclass(frozen=True)
class Names:
    """What the rebind is to make, resolved once from the flags and the Binding (``resolve_names``)
    or read back from the journal, which records them as its ``options`` (``to_dict``)."""

    dtype: str
    #: The new Binding's name.
    new_name: str
    #: The new Binding's ``spec.domain.name``.
    domain_name: str
    strategy: Strategy
    #: The side-by-side copies' suffix.
    suffix: str
    keep_old_binding: bool

    def to_dict(self) -> dict:
        """The journal's ``options`` and the report's summary fields (their JSON names)."""
        return {"dtype": self.dtype, "newName": self.new_name, "domainName": self.domain_name,
                "strategy": self.strategy.value, "suffix": self.suffix, "keepOldBinding": self.keep_old_binding}

    @classmethod
    def from_dict(cls, recorded: dict) -> "Names":
        """A journal's ``options`` (``check_shape`` has checked each field's type)."""
        return cls(dtype=recorded["dtype"], new_name=recorded["newName"], domain_name=recorded["domainName"],
                   strategy=Strategy(recorded["strategy"]), suffix=recorded["suffix"],
                   keep_old_binding=bool(recorded.get("keepOldBinding")))


@dataclass
class Plan:
    """Everything ``rebind`` will do, decided before the first write."""

    namespace: str
    binding: str
    names: Names
    steps: list[Step]
    originals: list[dict] = field(default_factory=list)  # saved before the first write
    manifests: list[dict] = field(default_factory=list)  # the new objects, for -o yaml
    blockers: list[str] = field(default_factory=list)  # Bindings that keep the Setting off
    force_unknown: bool = False  # --force-unknown-dtype
    lease: Optional[Lease] = None  # held while --apply writes
    report: Report = field(default_factory=lambda: Report(kind="RebindPlan"))
    #: The objects others manage that --apply --force-managed writes, and who (``_changes.managed.record``).
    managed: list[dict] = field(default_factory=list)


KINDS_BY_NAME = {k.name: k for k in (BINDING, DEPLOYMENT, SETTING)}


@dataclass(frozen=True)
class RebindOptions:
    """``escape rebind``'s flags, typed: what the plan and its execution read, taken from the
    parsed command line by the subcommand (``escape``), never a namespace."""

    binding: str
    dtype: str
    new_name: Optional[str]
    domain_name: Optional[str]
    strategy: Optional[Strategy]
    suffix: Optional[str]
    keep_old_binding: bool
    force_unknown_dtype: bool
    apply: bool
    #: ``none``, ``client`` or ``server``.
    dry_run: str
    backup_dir: Optional[str]
    all_namespaces: bool
    #: --force-managed: write objects that Helm, Argo CD, Flux, a controller or a field manager manage.
    force_managed: bool = False


def rebind(context: Context, options: RebindOptions) -> Report:
    """Plan by default; with --apply, back up, journal and execute (or resume a journal)."""
    if options.all_namespaces:
        raise UsageError("escape rebind works on one Binding in one namespace: use -n, not -A")
    namespace = context.namespace or "default"
    _validate_names(options)
    journal = _find_journal(options, namespace)  # only where this command or the default directory puts it
    if journal is not None:
        check_journal(context, journal, namespace, options.binding)  # before any step runs, or is shown
        return _resume(context, journal, options)
    _refuse_under_way_elsewhere(context, namespace, options)
    plan = make_plan(context, namespace, options)
    deletes = [s for s in plan.steps if s.action is Action.DELETE]
    managed = _managed.managed_writes(context, _managed_writes(plan, deletes))
    _managed.note(plan.report, managed, options.force_managed)
    if options.dry_run == "server":
        check_access(context.writable_source, plan.steps)
        execute(context, plan, None, dry_run=True)
    elif options.apply and options.dry_run == "none":
        _managed.refuse(context, managed, options.force_managed, _SOURCE_HINT)
        plan.managed = _managed.record(managed)
        last_look(context, plan, "Carry out this plan?")
        check_access(context.writable_source, plan.steps)
        directory = Path(options.backup_dir) if options.backup_dir else default_directory(namespace, plan.binding)
        _record_location(plan, directory)
        journal = Journal.create(directory, _header(context, plan), [s.to_journal() for s in plan.steps],
                                 plan.originals)  # the backups before any write, the lease included
        with _leased(context, plan, journal, discard=True):
            context.env.progress(f"Saved {len(plan.originals)} object(s) and the journal to {journal.directory}/")
            execute(context, plan, journal)
    return _plan_report(context, plan, journal, options)


@contextmanager
def _leased(context: Context, plan: Plan, journal: Journal, discard: bool = False) -> Iterator[None]:
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


def is_dns_label(value: str) -> bool:
    """A DNS-1123 label: what Kubernetes accepts as these objects' names and a domain name."""
    return len(value) <= 63 and bool(_DNS_LABEL.match(value))


def _validate_names(options: RebindOptions) -> None:
    """The given spellings, before the cluster is read: a usage error (exit 2), nothing written."""
    if not _DTYPE.match(options.dtype):
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
        derived += [(f"the side-by-side copy of {_model.name_of(d)}", _label(_model.name_of(d), names.suffix),
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
    inventory, cluster_wide = _read_inventory(source, namespace, system)
    moved = [d for d in inventory.deployments
             if _model.namespace_of(d) == namespace and _model.deployment_binding(d) == options.binding]
    names = resolve_names(options, binding, dtype)
    _validate_derived(names, moved)
    new_binding = _new_binding(source, binding, names)
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


def _read_inventory(source: Source, namespace: str, system: str) -> tuple[BindingInventory, bool]:
    """The whole cluster for step 5's judgement; only the namespace when listing more is forbidden."""
    try:
        return BindingInventory.read(source, None, system), True
    except ApiError as error:
        if error.code != 403:
            raise
        return BindingInventory.read(source, namespace, system), False


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "new"


def _label(base: str, suffix: str) -> str:
    """``<base>-<suffix>``, never cut: a name shortened behind the user's back could collide, so a
    name too long is refused instead (``_validate_derived``)."""
    return f"{base}-{suffix}"


def resolve_names(options: RebindOptions, binding: dict, dtype: str) -> Names:
    """What the flags name, or else what the old Binding and the dtype make up."""
    slug = _slug(dtype)
    return Names(dtype=dtype, new_name=options.new_name or _label(options.binding, slug),
                 domain_name=options.domain_name or _label(_model.binding_domain(binding), slug),
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
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _NOT_COPIED}
    annotations[REBIND_ANNOTATION] = origin
    meta.update(name=name, annotations=annotations)
    return meta


def _new_binding(source: Source, binding: dict, names: Names) -> dict:
    spec = copy.deepcopy(binding.get("spec") or {})
    domain = spec.get("domain")
    if not isinstance(domain, dict):
        domain = {}
    spec["domain"] = {**domain, "name": names.domain_name, "dtype": names.dtype}
    origin = f"{_model.namespace_of(binding)}/{_model.name_of(binding)}"
    return {"apiVersion": _api_version(source, BINDING), "kind": BINDING.name,
            "metadata": _fresh_metadata(binding, names.new_name, origin), "spec": spec}


def _new_deployment(source: Source, deployment: dict, name: str, binding_name: str, origin: str) -> dict:
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
            new = _label(_model.name_of(deployment), names.suffix)
            if source.get(DEPLOYMENT, namespace, new) is not None:
                raise KvdtypeError(f"a ModelDeployment {namespace}/{new} already exists: pass another --suffix; "
                                   "nothing was changed")


def _key(obj: dict) -> tuple[str, str]:
    return _model.namespace_of(obj), _model.name_of(obj)


def _moved_consumers(inventory: BindingInventory, moved: list[dict], binding_name: str) -> list[Consumer]:
    keys = {_key(d) for d in moved}
    return [dataclasses.replace(c, binding=binding_name) for c in inventory.consumers
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
        if judgement.verdict == _engines.UNKNOWN:
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
        new_name = name if names.strategy is Strategy.REPLACE else _label(name, names.suffix)
        body = _new_deployment(source, deployment, new_name, names.new_name, origin)
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
                            renamed={_model.name_of(d): _label(_model.name_of(d), names.suffix) for d in moved})
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
    bindings = [b for b in inventory.bindings if keeps_old or _key(b) != gone] + [new_binding]
    moved_keys = {_key(d) for d in moved}
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


# --- escape rebind: permissions, execution, resumption ---------------------------------------------

def last_look(context: Context, plan: Plan, question: str, steps: Optional[list[Step]] = None) -> None:
    """On a terminal, show the steps and ask (``confirm``: --yes skips it). Without a terminal,
    --apply itself is the consent: scripts pass it already."""
    env = context.env

    def show() -> None:
        for index, step in enumerate(plan.steps, 1):
            if steps is None or step in steps:
                env.progress(f"  {index}. {step.label()}: {step.detail}")
        for finding in plan.report.findings:
            if finding.severity == WARNING:
                env.warn(f"{finding.code}: {finding.message}")

    confirm(context, question, show=show, consented=True)


def check_access(source: WritableSource, steps: list[Step]) -> None:
    """Every verb the plan needs, asked up front with SelfSubjectAccessReview: refuse before any write."""
    needed = dict.fromkeys((s.action.verb, s.kind, s.namespace) for s in steps)
    denied = []
    for verb, kind_name, namespace in needed:
        kind = KINDS_BY_NAME[kind_name]
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "group": kind.group,
                                                  "resource": kind.plural}}}
        try:
            answer = source.post(SSAR_PATH, review)
        except ApiError:
            return  # cannot ask: each write then fails on its own 403, journaled
        if not _model.dig(answer, "status", "allowed"):
            denied.append(f"{verb} {kind.resource} in namespace {namespace}")
    if denied:
        raise KvdtypeError(f"you may not {'; nor '.join(denied)} (SelfSubjectAccessReview), which the plan needs; "
                           "nothing was changed")


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


# --- What the plan read, and whether it still holds --------------------------------------------------

def expectation(obj: dict) -> dict:
    """What a step's write depends on: the object's identity, generation and copied fields."""
    return {"name": _model.name_of(obj), "uid": _model.dig(obj, "metadata", "uid"),
            "generation": _model.dig(obj, "metadata", "generation"), "fields": _depends_on(obj)}


def _depends_on(obj: dict) -> dict:
    """The fields a copy is made of (status and what the server sets are not)."""
    annotations = {k: v for k, v in _model.annotations_of(obj).items() if k not in _NOT_COPIED}
    return {"spec": obj.get("spec"), "labels": _model.labels_of(obj), "annotations": annotations}


def changes(expect: dict, current: dict) -> list[str]:
    """What differs between the plan's reading and ``current`` ([] when the plan still holds)."""
    found = []
    uid = _model.dig(current, "metadata", "uid")
    if expect.get("uid") and uid != expect["uid"]:
        return [f"it was deleted and created again (uid {expect['uid']} -> {uid})"]
    generation = _model.dig(current, "metadata", "generation")
    if expect.get("generation") is not None and generation != expect["generation"]:
        found.append(f"metadata.generation {expect['generation']} -> {generation}")
    fields = _depends_on(current)
    for name, before in (expect.get("fields") or {}).items():
        prefix = "metadata." + name if name != "spec" else "spec"
        found += _differences(before, fields.get(name), prefix)
    return list(dict.fromkeys(found))


def _differences(before: Any, after: Any, path: str, limit: int = 3) -> list[str]:
    """Up to ``limit`` paths where ``before`` and ``after`` differ, with the values when short."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        found: list[str] = []
        for key in sorted(set(before) | set(after), key=str):
            found += _differences(before.get(key), after.get(key), f"{path}.{key}", limit)
        return found[:limit]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        found = []
        for i, (old, new) in enumerate(zip(before, after, strict=True)):
            found += _differences(old, new, f"{path}[{i}]", limit)
        return found[:limit]
    old, new = json.dumps(before), json.dumps(after)
    return [f"{path} {old} -> {new}" if len(old) + len(new) < 80 else path]


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
                           f"({_shown_name(step.action)}): nothing was written for it")
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
        inventory, cluster_wide = _read_inventory(context.source, plan.namespace, context.system_namespace)
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
        return bool(_model.dig(obj, "metadata", "deletionTimestamp")) or (kind, *_key(obj)) in deleted

    dead = {_key(d) for d in inventory.deployments if gone(DEPLOYMENT.name, d)}
    return dataclasses.replace(
        inventory,
        bindings=[b for b in inventory.bindings if not gone(BINDING.name, b)],
        deployments=[d for d in inventory.deployments if _key(d) not in dead],
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


def _header(context: Context, plan: Plan) -> dict:
    """What the journal says of itself besides its steps: the Binding it moves (and its uid) and the
    cluster it was written for, all checked before it is carried on (``check_journal``)."""
    old = next((s.expect for s in plan.steps if s.id == NEW_BINDING_ID and s.expect), None) or {}
    return {"namespace": plan.namespace, "binding": plan.binding, "uid": old.get("uid"),
            "cluster": identity_of(context.source), "options": plan.names.to_dict(),
            "blockers": plan.blockers, "manifests": plan.manifests,
            "findings": [f.to_dict() for f in plan.report.findings], "managers": plan.managed}


#: Where a refused rebind's new objects are, for the source (``_changes.managed.refuse``).
_SOURCE_HINT = ("the plan's -o yaml prints the new Binding and ModelDeployments to put in the source in place of the "
                "old ones")


def _managed_writes(plan: Plan, steps: list[Step], source: Optional[Source] = None) -> list[_managed.Write]:
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


def _find_journal(options: RebindOptions, namespace: str) -> Optional[Journal]:
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


def _record_location(plan: Plan, directory: Path) -> None:
    """Mark the new Binding with where the journal is, before the journal is written with it."""
    location = f"{socket.gethostname()}:{directory.resolve()}"
    for step in plan.steps:
        if step.id == NEW_BINDING_ID:
            step.body["metadata"]["annotations"][JOURNAL_ANNOTATION] = location


def _refuse_under_way_elsewhere(context: Context, namespace: str, options: RebindOptions) -> None:
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
    dtype = dtype if _DTYPE.match(dtype) else "<the dtype it moves to>"
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


# --- escape rebind: a journal, checked before any step runs -----------------------------------------

#: The fields a journal's step may have (``Step``'s).
_STEP_FIELDS = {f.name for f in dataclasses.fields(Step)}


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
    if not (isinstance(recorded.get("dtype"), str) and _DTYPE.match(recorded["dtype"])):
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
        problems.append(f"a step of an action this version does not know ({_shown_name(unknown)})")
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
        expected = step.origin if names.strategy is Strategy.REPLACE else _label(step.origin, names.suffix)
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


def _check_same_options(options: RebindOptions, names: Names, journal: Journal) -> None:
    """The names given again are the journal's (each said by its JSON name, as the journal has it)."""
    recorded = names.to_dict()
    given = {"dtype": options.dtype, "newName": options.new_name, "domainName": options.domain_name,
             "strategy": options.strategy.value if options.strategy else None, "suffix": options.suffix}
    for key, value in given.items():
        if value is not None and value != recorded.get(key):
            raise UsageError(f"the unfinished rebind in {journal.directory}/ was started with {key} "
                             f"{recorded.get(key)!r}, not {value!r}: rerun it with the same options to resume, "
                             f"or put back what it changed with kubectl kvdtype escape restore {journal.directory}")


def _resume(context: Context, journal: Journal, options: RebindOptions) -> Report:
    """Rebuild the plan from the journal (the cluster has already changed) and carry on."""
    names = Names.from_dict(journal.options)
    _check_same_options(options, names, journal)
    data = journal.data
    plan = Plan(data["namespace"], data["binding"], names, [Step.from_journal(s) for s in journal.steps],
                manifests=data.get("manifests") or [], blockers=data.get("blockers") or [])
    for finding in data.get("findings") or []:
        obj = finding["object"]
        extra = {k: v for k, v in finding.items() if k not in ("code", "severity", "object", "message")}
        plan.report.add(finding["code"], ObjectRef(obj["kind"], obj["namespace"], obj["name"]),
                        finding["message"], **extra)
    if journal.finished:
        return _plan_report(context, plan, journal, options)
    remaining = [s for s in plan.steps if s.id not in journal.done]
    if options.apply and options.dry_run == "none":
        next_step = len(plan.steps) - len(remaining) + 1
        last_look(context, plan, f"Resume the rebind journaled in {journal.directory}/ at step {next_step}?",
                  remaining)
        context.env.progress(f"Resuming the rebind journaled in {journal.directory}/: "
                             f"{len(plan.steps) - len(remaining)} of {len(plan.steps)} step(s) already done")
        check_access(context.writable_source, remaining)
        _refuse_managed_remaining(context, plan, journal, remaining, options)
        with _leased(context, plan, journal):
            _accept_changes(context, plan, journal)
            execute(context, plan, journal)
    return _plan_report(context, plan, journal, options)


def _refuse_managed_remaining(context: Context, plan: Plan, journal: Journal, remaining: list[Step],
                              options: RebindOptions) -> None:
    """A resumed rebind asks again about what it has still to delete or recreate, as they are now."""
    deletes = [s for s in remaining if s.action is Action.DELETE]
    deleted = {(d.kind, d.name) for d in plan.steps if d.id in journal.done and d.action is Action.DELETE}
    recreates = [s for s in remaining if s.action is Action.CREATE and (s.kind, s.name) in deleted]
    managed = _managed.managed_writes(context, _managed_writes(plan, deletes, context.source) +
                                      _managed_writes(plan, recreates))
    _managed.refuse(context, managed, options.force_managed, _SOURCE_HINT)
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
                body = _new_binding(context.source, current, plan.names)
                body["metadata"]["annotations"][JOURNAL_ANNOTATION] = \
                    step.body["metadata"]["annotations"].get(JOURNAL_ANNOTATION, "")
            else:
                body = _new_deployment(context.source, current, step.name, plan.names.new_name, origin)
            step.body = body
            plan.manifests = [body if (m.get("kind"), _model.name_of(m)) == (kind.name, step.name) else m
                              for m in plan.manifests]
        journal.steps[index] = step.to_journal()
    journal.data["manifests"] = plan.manifests


# --- escape rebind: the report ------------------------------------------------------------------

REBIND_COLUMNS = [
    Column("STEP", "step"),
    Column("ACTION", "action"),
    Column("OBJECT", "object"),
    Column("STATE", "state", status=True),
    Column("DETAIL", "detail"),
]


def _plan_report(context: Context, plan: Plan, journal: Optional[Journal], options: RebindOptions) -> Report:
    report = plan.report
    report.columns = REBIND_COLUMNS
    if plan.blockers:
        report.add(SETTING_STAYS_OFF, ObjectRef(SETTING.name, context.system_namespace, _model.SETTING_NAME),
                   f"The Setting stays off after the move: {', '.join(plan.blockers)} would still break an engine "
                   "(kubectl kvdtype check -A says why); turn it on with kubectl kvdtype escape on once they are "
                   "fixed.",
                   blockedBy=plan.blockers)
    report.manifests = plan.manifests
    outcomes = journal.done if journal is not None else report.summary.get("outcomes", {})
    for index, step in enumerate(plan.steps, 1):
        outcome = outcomes.get(step.id)
        report.items.append({
            "step": index, "id": step.id, "action": step.action.word,
            "object": f"{step.kind} {step.namespace}/{step.name}", "kind": step.kind,
            "namespace": step.namespace, "name": step.name,
            "state": outcome or "planned", "detail": step.detail,
        })
    mode = _mode(options, journal)
    report.summary = {
        "mode": mode, "namespace": plan.namespace, "binding": plan.binding, **plan.names.to_dict(),
        "backupDir": str(journal.directory) if journal is not None else None,
        "settingBlockedBy": plan.blockers, "newObjects": plan.manifests,
        "done": sum(1 for s in plan.steps if s.id in outcomes), "steps": len(plan.steps),
    }
    report.headline = _rebind_headline(plan, journal, mode)
    return report


def _mode(options: RebindOptions, journal: Optional[Journal]) -> str:
    if options.dry_run != "none":
        return f"dry-run-{options.dry_run}"
    if journal is not None and journal.finished:
        return "applied"
    return "applied" if options.apply else ("half-done" if journal is not None else "plan")


def _rebind_headline(plan: Plan, journal: Optional[Journal], mode: str) -> str:
    moved = sum(1 for s in plan.steps if s.action is Action.CREATE and s.kind == DEPLOYMENT.name)
    what = (f"move {moved} ModelDeployment(s) from Binding {plan.namespace}/{plan.binding} to "
            f"{plan.names.new_name} (dtype {plan.names.dtype}, domain {plan.names.domain_name}, "
            f"strategy {plan.names.strategy.value})")
    if mode == "plan":
        return (f"Plan only, nothing was changed: {len(plan.steps)} step(s) to {what}. Run again with --apply to carry "
                f"it out; the originals are saved first to ./kvdtype-backup-{plan.namespace}-{plan.binding}-"
                "<UTC time>/ (or --backup-dir).")
    if mode.startswith("dry-run"):
        sent = "every write was sent with dryRun=All" if mode == "dry-run-server" else "no write was sent"
        return f"Dry run: {sent} and nothing was changed. The plan would {what}."
    if mode == "half-done" and journal is not None:  # _mode says half-done only with a journal
        return (f"Half done: {len(journal.done)} of {len(plan.steps)} step(s) journaled in {journal.directory}/. "
                "Run the same command with --apply to resume, or put back what it deleted with kubectl kvdtype escape "
                f"restore {journal.directory}.")
    setting = next((journal.done.get(s.id) for s in plan.steps if s.action is Action.SETTING_ON), None) \
        if journal else None
    return (f"Done: {what}. The originals and the journal are in {journal.directory}/." if journal else "Done.") + (
        f" The Setting was {setting}." if setting and setting.startswith("left off") else "")

"""Every Binding against the engines that consume it: ``check``'s judgement, shared with ``verify`` and ``escape``.

For each KVCachePoolBinding: its consumers (ModelDeployments naming it in
``spec.kvCache.poolRef.name``, injected Pods naming it in their binding annotation), a verdict per
consumer engine, the fix, and what the upgrade will roll. ``escape`` asks the same question before
it turns the Setting on (``blockers_of``), ``verify`` reads the Setting and words a missing Binding
the same way. A layer below the subcommands, so that none of them imports another.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable, Optional, Sequence, Union

from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._judging.managed import MANAGED_BY
from kubectl_kvdtype._kits.codes import (
    BINDING_MISSING,
    BINDING_UNUSED,
    DTYPE_AUTO,
    DTYPE_REJECTED,
    DTYPE_UNKNOWN,
    ENGINE_UNKNOWN,
    TABLE_ADDED,
    VERSION_UNRECORDED,
)
from kubectl_kvdtype._kits.records import field, record_type, replace
from kubectl_kvdtype._kits.report import Column, FieldPath, ObjectRef, Report
from kubectl_kvdtype._kits.status import KvdtypeError
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources import names as _names
from kubectl_kvdtype._sources.kinds import (
    BINDING,
    DEPLOYMENT,
    POD,
    SETTING,
    Get,
    Query,
    Source,
    list_early,
    list_many,
    unwrap,
)

OK, REJECTED, UNKNOWN, AUTO, UNUSED = "ok", "rejected", "unknown", "auto", "unused"
#: Every consumer runs an engine this tool cannot judge (neither vLLM nor SGLang).
NOT_JUDGED = "not-judged"


@record_type(frozen=True)
class Consumer:
    """A ModelDeployment or injected Pod that attaches a Binding."""

    kind: str
    namespace: str
    name: str
    binding: str
    engine: _model.EngineInfo
    replicas: int  # what the upgrade replaces: managed replicas of a deployment, 1 for a Pod
    #: False for a deployment whose every role is a take-over: the operator renders no flag there.
    receives_flag: bool = True
    #: Where the object declares its engine (an engine-unknown finding points there).
    engine_path: Optional[FieldPath] = None

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.kind, self.namespace, self.name)

    def to_item(self) -> dict:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name,
                "engine": self.engine.name or self.engine.declared, "engineVersion": self.engine.version}

    def label(self) -> str:
        return _short(self.kind, self.name)


@record_type
class BindingInventory:
    """The objects ``check`` judges (Bindings, their consumers, the Setting), read with one LIST per kind."""

    bindings: list[dict]
    consumers: list[Consumer]
    deployments: list[dict]
    setting: Optional[dict]
    setting_error: Optional[str]
    #: The injected Pods read (their consumers are in ``consumers``): who manages one is its owner's.
    pods: list[dict] = field(default_factory=list)
    #: What the ``beside`` GETs of ``read`` answered, in order (each a list or the error it met).
    beside: list[Union[list[dict], KvdtypeError]] = field(default_factory=list)

    @classmethod
    def read(cls, source: Source, namespace: Optional[str], system_namespace: str,
             whole: bool = False, beside: Sequence[Get] = (), early: Optional[Early] = None) -> "BindingInventory":
        """One LIST per kind, side by side; ``whole``: the Bindings and deployments as they come
        (a write backs them up), else without what judging never reads. ``beside``: GETs sent
        alongside (whether a guard is installed), answered in ``beside``, never raised. ``early``:
        called with the Bindings and the injected Pods once both are in, while the deployments,
        most of a big cluster's bytes, may still be coming: there a caller starts the reads that
        its findings about Pods will need (``check``'s owners)."""
        project = _model.judged_only(whole)
        queries: list[Union[Query, Get]] = [
            Query(BINDING, namespace, project=project), Query(DEPLOYMENT, namespace, project=project),
            Query(POD, namespace, f"{_model.INJECT_LABEL}=true", _model.slim_pod), setting_get(system_namespace),
            *beside]
        results = list_many(source, queries) if early is None else \
            list_early(source, queries, (0, 2), lambda read: early(*unwrap(read)))
        bindings, deployments, pods = unwrap(results[:3])
        setting, error = setting_of(results[3], system_namespace)
        return cls(bindings, consumers_of(deployments, pods), deployments, setting, error, pods, results[4:])


#: ``BindingInventory.read``'s ``early``: given the Bindings and the injected Pods as soon as both are in.
Early = Callable[[list[dict], list[dict]], None]


def pods_judged(bindings: list[dict], pods: list[dict], system_namespace: str) -> Report:
    """``check``'s report of the injected Pods and the Bindings they name, without the deployments.
    Each of its findings about a Pod, and each Pod a Binding's finding names as a consumer, is the
    whole report's too: what check says of a Pod is the Pod's own engine against its Binding's dtype
    (tests/test_early_owners.py ties the two). So ``check`` knows which Pods' owners it will read before
    the deployments have come in; the other Bindings are left to the whole report (most of a cluster's)."""
    consumers = consumers_of((), pods)
    named = {(consumer.namespace, consumer.binding) for consumer in consumers}
    return build_check_report(BindingInventory(
        [b for b in bindings if (_model.namespace_of(b), _model.name_of(b)) in named], consumers, [], None, None, pods),
        system_namespace)


def consumers_of(deployments: Iterable[dict], pods: Iterable[dict]) -> list[Consumer]:
    """Pool-attached deployments and opted-in Pods, each with the Binding it names."""
    found = [_deployment_consumer(d) for d in deployments if _model.is_pool_attached(d)]
    found += [
        Consumer(POD.name, _model.namespace_of(p), _model.name_of(p), _model.pod_binding(p) or "",
                 _model.pod_engine(p), 1, engine_path=_model.engine_path(p, is_pod=True))
        for p in pods if _model.opts_in(_model.labels_of(p))
    ]
    return found


def rollout_of(consumers: Iterable[Consumer]) -> tuple[int, int]:
    """What the upgrade rolls (``model.rollout_counts`` of the deployments ``consumers`` were made
    of, ``consumers_of``), read off them: each pool-attached deployment is one consumer, holding its
    managed replicas."""
    deployments = [consumer.replicas for consumer in consumers if consumer.kind == DEPLOYMENT.name]
    return len(deployments), sum(deployments)


def _deployment_consumer(deployment: dict) -> Consumer:
    replicas, takeover_only = _model.managed_roles(deployment)
    return Consumer(DEPLOYMENT.name, _model.namespace_of(deployment), _model.name_of(deployment),
                    _model.deployment_binding(deployment) or "", _model.deployment_engine(deployment), replicas,
                    not takeover_only, _model.engine_path(deployment, is_pod=False))


def read_setting(source: Source, system_namespace: str) -> tuple[Optional[dict], Optional[str]]:
    """The Setting, or None and why not: it is context for the report, never fatal to it."""
    return setting_of(list_many(source, [setting_get(system_namespace)])[0], system_namespace)


def setting_get(system_namespace: str) -> Get:
    """The Setting's GET, to read beside a judgement's LISTs (``list_many``)."""
    return Get(SETTING, system_namespace, _model.SETTING_NAME)


def setting_of(read: Union[list[dict], KvdtypeError], system_namespace: str) -> tuple[Optional[dict], Optional[str]]:
    """The Setting ``setting_get`` read, or None and why not (the error it met, or its absence)."""
    if isinstance(read, KvdtypeError):
        return None, read.message
    if not read:
        return None, f"Setting {system_namespace}/{_model.SETTING_NAME} not found"
    return read[0], None


def build_check_report(inventory: BindingInventory, system_namespace: str, offline: bool = False) -> Report:
    """The CheckReport of an inventory: pure, so live and offline runs judge alike."""
    report = Report(kind="CheckReport", columns=BINDING_COLUMNS, empty_message="No KVCachePoolBindings found.")
    # Judged: each Binding, and each consumer (its engine against the dtype, its Binding's existence).
    report.judged = [ObjectRef(BINDING.name, _model.namespace_of(b), _model.name_of(b)) for b in inventory.bindings]
    report.judged += [consumer.ref for consumer in inventory.consumers]
    by_binding: dict[tuple[str, str], list[Consumer]] = {}
    for consumer in inventory.consumers:
        by_binding.setdefault((consumer.namespace, consumer.binding), []).append(consumer)
    known = set()
    for binding in inventory.bindings:
        key = (_model.namespace_of(binding), _model.name_of(binding))
        known.add(key)
        report.items.append(_judge_binding(binding, by_binding.get(key, []), report))
    for (namespace, name), consumers in by_binding.items():
        if (namespace, name) not in known:
            for consumer in consumers:
                _missing_binding(consumer, report)
    _unknown_engines(inventory.consumers, report)
    _unrecorded_versions(inventory.consumers, report)
    report.summary = _summary(inventory, system_namespace, report)
    report.headline = _headline
    if inventory.setting_error and not offline:
        report.warnings.append(f"cannot read the Setting: {inventory.setting_error}")
    return report


def _judge_binding(binding: dict, consumers: list[Consumer], report: Report) -> dict:
    ref = ObjectRef(BINDING.name, _model.namespace_of(binding), _model.name_of(binding))
    dtype = _model.binding_dtype(binding) or ""
    verdicts = set()
    fix: Optional[_records.Remedy] = None
    if dtype == "auto":
        verdicts.add(AUTO)
        report.add(DTYPE_AUTO, ref,
                   f"{ref} says auto, which a new Binding may not declare once the upgrade is in: "
                   "it keeps working, but pin an explicit dtype when you next recreate it.", dtype=dtype,
                   field_path=_model.BINDING_DTYPE_PATH)
    if not dtype:
        verdicts.add(UNKNOWN)
        report.add(DTYPE_UNKNOWN, ref, f"{ref} declares no spec.domain.dtype, so this tool cannot judge it.",
                   dtype=None, engine=None, engineVersion=None)
    elif consumers:
        engine_verdicts, fix = _judge_engines(ref, dtype, consumers, report)
        verdicts |= engine_verdicts
    if consumers and not any(c.engine.name for c in consumers if c.receives_flag) and \
            any(c.receives_flag for c in consumers):
        verdicts.add(NOT_JUDGED)
    if not consumers:
        verdicts.add(UNUSED)
        report.add(BINDING_UNUSED, ref, f"{ref} has no ModelDeployment or injected Pod consuming it.")
    verdict = next((v for v in (REJECTED, UNKNOWN, NOT_JUDGED, AUTO, UNUSED) if v in verdicts), OK)
    return {
        "namespace": ref.namespace, "name": ref.name, "dtype": dtype or None,
        "pool": _model.binding_pool(binding), "domain": _model.binding_domain(binding),
        "consumers": [c.to_item() for c in consumers], "verdict": verdict,
        "suggestion": fix.spelling if fix and fix.kind == _records.REBIND and verdict == REJECTED else None,
        "fix": _fix(verdict, fix, consumers),
    }


def _judge_engines(ref: ObjectRef, dtype: str, consumers: list[Consumer],
                   report: Report) -> tuple[set[str], Optional[_records.Remedy]]:
    """One dtype-rejected finding per rejecting engine, one dtype-unknown per unsure engine.

    Also returns the fix, sought only once an engine rejects (most Bindings pass).
    """
    verdicts: set[str] = set()
    fix = None
    for engine in _records.ENGINES:
        users = [c for c in consumers if c.engine.name == engine and c.receives_flag]
        judged = [(c, consumer_verdict(engine, c.engine.version, dtype)) for c in users]
        rejecting = [(c, j) for c, j in judged if j.verdict == _records.REJECTED]
        unsure = [(c, j) for c, j in judged if j.verdict == _records.UNKNOWN]
        if rejecting:
            if fix is None:
                fix = _verdicts.remedy(dtype, [(c.engine.name, c.engine.version) for c in consumers
                                              if c.engine.name and c.receives_flag])
            verdicts.add(REJECTED)
            report.add(DTYPE_REJECTED, ref, _rejected_message(ref, dtype, rejecting, fix),
                       dtype=dtype, engine=engine, engineVersion=_versions(j for _, j in rejecting),
                       suggestion=fix.spelling if fix.kind == _records.REBIND else None,
                       fix=fix.text, consumers=[c.ref.to_dict() for c, _ in rejecting],
                       field_path=_model.BINDING_DTYPE_PATH)
        elif unsure:
            verdicts.add(UNKNOWN)
            report.add(DTYPE_UNKNOWN, ref,
                       f"{ref}: {unsure[0][1].reason}{_noted(unsure[0][1])}; check the {engine} documentation for "
                       f"{dtype!r} before upgrading.",
                       dtype=dtype, engine=engine, engineVersion=_versions(j for _, j in unsure),
                       field_path=_model.BINDING_DTYPE_PATH)
    return verdicts, fix


@functools.lru_cache(maxsize=4096)
def consumer_verdict(engine: str, version: Optional[str], dtype: str) -> _records.Judgement:
    """check's verdict on one consumer: what it does with the argv the upgrade renders for it
    (``_engines.verdicts.renders``: the operator's command with the Binding's dtype, never the role's own
    ``extraArgs``), in the words of the spelling's judgement. Memoized: a cluster has few distinct
    (engine, version, dtype) triples and many consumers."""
    reading = _verdicts.renders(engine, version, dtype)
    judged = _verdicts.judge(engine, version, dtype)
    if reading.state == _verdicts.FAILED:
        failure = "exits at argument parsing" if reading.stage == _verdicts.AT_PARSING else "fails at engine start"
        reason = judged.reason if judged.verdict == _records.REJECTED else \
            f"{engine} {judged.version} refuses it ({reading.error})"
        return replace(judged, verdict=_records.REJECTED, reason=reason, failure=failure)
    if reading.state == _verdicts.VALUE:
        return replace(judged, verdict=_records.ACCEPTED, failure="")
    return replace(judged, verdict=_records.UNKNOWN, reason=reading.reason or judged.reason, failure="")


def _noted(judged: _records.Judgement) -> str:
    """`` (vLLM 0.34.0 is newer than ...: ..., the argv read by vLLM 0.33.0's parser, ...)``: the parser
    that stood in, when one did."""
    return f" ({judged.note})" if judged.note else ""


def _versions(judgements: Iterable[_records.Judgement]) -> str:
    return ", ".join(dict.fromkeys(j.version for j in judgements))


def rebind_command(namespace: Optional[str], name: str, spelling: Optional[str]) -> Optional[str]:
    """The ``escape rebind`` command that fixes a Binding, ready to paste; None when its name or
    namespace is not one the API server accepts (a name must never shape a printed command; the
    spelling is the engine table's own)."""
    if _names.object_problem(BINDING, namespace, name) is not None:
        return None
    return f"kubectl kvdtype escape rebind {name} -n {namespace} --dtype {spelling}"


def _rejected_message(ref: ObjectRef, dtype: str, rejecting: list, fix: _records.Remedy) -> str:
    replicas = sum(c.replicas for c, _ in rejecting)
    names = ", ".join(c.label() for c, _ in rejecting[:3]) + (" ..." if len(rejecting) > 3 else "")
    command = rebind_command(ref.namespace, ref.name, fix.spelling) or "no command: its name is not valid"
    how = {
        _records.REBIND: f"move them to a Binding with dtype {fix.spelling}, which means the same ({command})",
        _records.UPGRADE: f"{fix.text}, from which {dtype} is accepted",
        _records.REBIND_DIFFERENT: (f"no spelling of {dtype} is accepted by every consumer, nor by a later engine "
                                    f"version: move them to a Binding with dtype {fix.spelling}, a different dtype "
                                    f"that changes the KV-cache precision ({command})"),
        _records.SPLIT: ("no dtype is accepted by every engine consuming it, so split its consumers by engine "
                         "onto Bindings of their own"),
    }.get(fix.kind, fix.text)
    first = rejecting[0][1]
    return (f"{first.reason}{_noted(first)}, so each of the {replicas} replica(s) of {names} {first.failure} once the "
            f"upgrade renders it; {how}.")


def _fix(verdict: str, fix: Optional[_records.Remedy], consumers: list[Consumer]) -> str:
    if verdict == REJECTED and fix is not None:
        return fix.text
    if verdict == UNKNOWN:
        return "confirm the spelling with the engine"
    if verdict == NOT_JUDGED:
        engines = ", ".join(dict.fromkeys(c.engine.declared or "an undeclared engine" for c in consumers))
        return f"confirm the spelling with {engines}"
    if verdict == AUTO:
        return "pin a dtype when recreated"
    return "none needed"


def _missing_binding(consumer: Consumer, report: Report) -> None:
    add_missing_binding(report, consumer.ref, consumer.binding)


def add_missing_binding(report: Report, consumer: ObjectRef, binding: str, consequence: str = "") -> None:
    """The binding-missing finding, as every subcommand that meets one words it."""
    named = f"Binding {binding!r}" if binding else "no Binding"
    report.add(BINDING_MISSING, consumer,
               f"{consumer} names {named}, which does not exist in namespace {consumer.namespace}{consequence}: "
               "create it or point the consumer at an existing Binding.",
               binding=binding or None,
               field_path=_model.POD_BINDING_PATH if consumer.kind == POD.name else _model.DEPLOYMENT_BINDING_PATH)


def _unknown_engines(consumers: list[Consumer], report: Report) -> None:
    for consumer in consumers:
        if consumer.engine.name is None:
            declared = consumer.engine.declared
            report.add(ENGINE_UNKNOWN, consumer.ref,
                       f"{consumer.ref} runs engine {declared!r}, which is neither vLLM nor SGLang, so its dtype "
                       "is not judged." if declared else
                       f"{consumer.ref} declares no engine, so its dtype is not judged.",
                       engine=declared, binding=consumer.binding or None, field_path=consumer.engine_path)


def _unrecorded_versions(consumers: list[Consumer], report: Report) -> None:
    """One info finding per consumer whose engine version no recorded parser is of: its verdict
    used the nearest one, and the preflight to-do list asks for a look."""
    for consumer in consumers:
        if consumer.engine.name is None or not consumer.receives_flag:
            continue
        basis = _verdicts.basis(consumer.engine.name, consumer.engine.version)
        if basis.note:
            report.add(VERSION_UNRECORDED, consumer.ref, f"{consumer.ref}: {basis.note}.",
                       engine=consumer.engine.name, engineVersion=consumer.engine.version, judgedAs=basis.table,
                       field_path=consumer.engine_path)
        if basis.added:
            add_table_added(report, consumer.ref, consumer.engine.name, consumer.engine.version, basis,
                            consumer.engine_path)


def add_table_added(report: Report, ref: ObjectRef, engine: str, version: object, basis: _verdicts.Basis,
                    field_path: Optional[FieldPath] = None) -> None:
    """The engine-table-added finding: a verdict about ``ref`` rests on a table added for the run."""
    report.add(TABLE_ADDED, ref, f"{ref}: {engine} {basis.at} is judged {basis.added_clause} "
                                 "(KUBECTL_KVDTYPE_ENGINE_TABLES).",
               engine=engine, engineVersion=version, judgedAs=basis.table, engineTables=basis.added,
               replacesShipped=basis.replaces, field_path=field_path)


def _summary(inventory: BindingInventory, system_namespace: str, report: Report) -> dict:
    rolling, replaced = rollout_of(inventory.consumers)
    requested, in_force = _model.setting_values(inventory.setting) if inventory.setting else (None, None)
    return {
        "bindings": len(inventory.bindings),
        "consumers": len(inventory.consumers),
        "upgrade": {
            "rollingDeployments": rolling,
            "replacedReplicas": replaced,
        },
        "setting": {"namespace": system_namespace, "name": _model.SETTING_NAME,
                    "value": in_force, "requested": requested},
    }


def _headline(report: Report) -> str:
    """Made when the report is shown: its counts are the final report's (``Report.summary_line``)."""
    summary = report.summary
    upgrade, setting = summary["upgrade"], summary["setting"]
    value = f'"{setting["value"]}"' if setting["value"] is not None else "unknown"
    return (f"{summary['bindings']} Binding(s), {summary['consumers']} consumer(s): {report.findings_line()}. "
            f"The upgrade rolls {upgrade['rollingDeployments']} pool-attached ModelDeployment(s) "
            f"({upgrade['replacedReplicas']} replica(s)); Setting {setting['name']} is {value}.")


def _engines_cell(item: dict) -> str:
    seen = dict.fromkeys(
        f"{c['engine'] or '?'}{' ' + c['engineVersion'] if c.get('engineVersion') else ''}" for c in item["consumers"]
    )
    return ", ".join(seen)


def _consumer_names(item: dict) -> str:
    return ",".join(_short(c["kind"], c["name"]) for c in item["consumers"])


def _short(kind: str, name: str) -> str:
    """``md/qwen-chat`` or ``pod/worker-0``: a consumer as kubectl's short names write it."""
    return f"{'md' if kind == DEPLOYMENT.name else 'pod'}/{name}"


#: The CheckReport's table: one row per Binding.
BINDING_COLUMNS = [
    Column("NAMESPACE", "namespace", namespace=True),
    Column("NAME", "name"),
    Column("DTYPE", "dtype"),
    Column("POOL", "pool"),
    Column("CONSUMERS", lambda item: str(len(item["consumers"]))),
    Column("ENGINES", _engines_cell),
    Column("VERDICT", "verdict", status=True),
    Column("FIX", "fix"),
    MANAGED_BY,
    Column("DOMAIN", "domain", wide=True),
    Column("CONSUMER NAMES", _consumer_names, wide=True),
]

"""``verify``'s judgement: what each replica and injected Pod really runs, against its Binding.

The guide greps ``containers[0].command`` for ``--kv-cache-dtype","``; this reads the engine
container's whole argv the way the engine does (``_engines.verdicts.read_flag``: every spelling,
every copy's value checked, so a refused copy fails the whole parse), says which copy is the
operator's or the webhook's, and judges each Pod against its Binding's dtype. ``PodInventory`` is
what one read of the cluster gives it (``_judging.rollout`` reads again for each poll of --wait).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._engines.argv import too_long
from kubectl_kvdtype._judging.bindings import add_missing_binding, add_table_added, setting_get, setting_of
from kubectl_kvdtype._judging.managed import MANAGED_BY
from kubectl_kvdtype._kits.codes import (
    ARGV_TOO_LONG,
    DTYPE_UNKNOWN,
    NOT_ATTACHED,
    POD_MISMATCH,
    POD_MISSING,
    POD_REJECTED,
    REPLICA_MISMATCH,
    REPLICA_MISSING,
    REPLICA_NOT_ROLLED,
    REPLICA_REJECTED,
    ROLE_UNMANAGED,
    VERSION_UNRECORDED,
)
from kubectl_kvdtype._kits.records import field, record_type
from kubectl_kvdtype._kits.report import Column, FieldPath, ObjectRef, Report
from kubectl_kvdtype._kits.status import KvdtypeError, UsageError
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
    not_readable,
    unwrap,
)

OK, MISSING, MISMATCH, UNMANAGED, UNKNOWN = "ok", "missing", "mismatch", "unmanaged", "unknown"
REJECTED, PENDING = "rejected", "pending"
#: Verdicts that are error findings, worst first; a Pod's verdict is the worst that applies.
FAILING = (REJECTED, MISSING, MISMATCH)
#: Verdicts --wait keeps waiting on: the failing ones, and replicas not rolled yet.
NOT_DONE = FAILING + (PENDING,)
INJECTED = "injected"
REPLICA_SELECTOR = f"{_model.REPLICA_NAME_LABEL}={_model.REPLICA_NAME_VALUE}"


@record_type
class PodInventory:
    """The objects one poll reads: deployments in scope, their Bindings, the Pods to judge."""

    deployments: list[dict]
    bindings: dict[tuple[str, str], dict]
    replicas: list[dict]
    injected: list[dict]
    setting: Optional[dict]
    setting_error: Optional[str]
    named: bool = False
    #: Where the Setting was asked for, when this user may not read it (``kinds.not_readable``):
    #: the verdicts then rest on its default, and the report is incomplete.
    setting_refused_in: Optional[str] = None

    @classmethod
    def read_named(cls, source: Source, namespace: Optional[str], name: str, system_namespace: str) -> "PodInventory":
        """One deployment: a GET (a LIST when the namespace is unknown), its Binding, its Pods."""
        deployment = _find_deployment(source, namespace, name)
        namespace = _model.namespace_of(deployment)
        binding_name = _model.deployment_binding(deployment)
        binding = source.get(BINDING, namespace, binding_name) if binding_name else None
        selector = f"{REPLICA_SELECTOR},{_model.REPLICA_INSTANCE_LABEL}={name}"
        setting, error, refused = _read_setting(source, system_namespace)
        # A name that is no label value can label no Pod (and must not shape a selector).
        labelled = _names.is_valid(name, _names.LABEL_VALUE)
        pods = source.list(POD, namespace, selector, _model.slim_pod) if labelled else []
        return cls([deployment], {(namespace, binding_name or ""): binding} if binding else {},
                   pods, [], setting, error, named=True, setting_refused_in=refused)

    @classmethod
    def read_all(cls, source: Source, namespace: Optional[str], system_namespace: str,
                 early: Optional[Callable[["PodInventory"], None]] = None) -> "PodInventory":
        """Everything in scope: one LIST per kind (two for Pods: replicas, injected). ``early``:
        given the inventory of the Bindings, the injected Pods and the Setting (no deployment, no
        replica) once those are in, while the deployments and their replicas, most of a big
        cluster's bytes, may still be coming: there a caller starts the reads that its findings
        about the injected Pods will need (``verify``'s owners)."""
        queries: list[Union[Query, Get]] = [
            Query(DEPLOYMENT, namespace, project=_model.without_status),  # judged only: verify writes nothing
            Query(BINDING, namespace, project=_model.without_status),
            Query(POD, namespace, REPLICA_SELECTOR, _model.slim_pod),
            Query(POD, namespace, f"{_model.INJECT_LABEL}=true", _model.slim_pod), setting_get(system_namespace)]
        answers = list_many(source, queries) if early is None else \
            list_early(source, queries, (1, 3, 4), lambda read: early(_injected_only(read, system_namespace)))
        listed, _, replicas, _ = unwrap(answers[:4])  # the first LIST that failed, in the order asked
        inventory = _injected_only([answers[1], answers[3], answers[4]], system_namespace)
        return cls([d for d in listed if _model.is_pool_attached(d)], inventory.bindings, replicas, inventory.injected,
                   inventory.setting, inventory.setting_error, setting_refused_in=inventory.setting_refused_in)


def _injected_only(answers: list[Union[list[dict], KvdtypeError]], system_namespace: str) -> PodInventory:
    """The inventory of the Bindings, the injected Pods and the Setting ``answers`` hold (raising
    the first failed read of the two LISTs)."""
    bindings, injected = unwrap(answers[:2])
    setting, error, refused = _setting_with_refusal(answers[2], system_namespace)
    by_key = {(_model.namespace_of(b), _model.name_of(b)): b for b in bindings}
    return PodInventory([], by_key, [], injected, setting, error, setting_refused_in=refused)


def _read_setting(source: Source, system_namespace: str) -> tuple[Optional[dict], Optional[str], Optional[str]]:
    """The Setting the verdicts depend on (with it off no flag is expected), why it is not there,
    and, when this user may not read it, the namespace it was asked in: judged by its default
    then, the report incomplete (``kinds.not_readable``, the rule every optional kind follows)."""
    return _setting_with_refusal(list_many(source, [setting_get(system_namespace)])[0], system_namespace)


def _setting_with_refusal(read: Union[list[dict], KvdtypeError],
                          system_namespace: str) -> tuple[Optional[dict], Optional[str], Optional[str]]:
    """``bindings.setting_of``, and the namespace asked in when this user may not read it."""
    setting, error = setting_of(read, system_namespace)
    return setting, error, system_namespace if not_readable(read) else None


def _find_deployment(source: Source, namespace: Optional[str], name: str) -> dict:
    if namespace is not None:
        found = source.get(DEPLOYMENT, namespace, name)
        if found is None:
            raise KvdtypeError(f'ModelDeployment "{name}" not found in namespace "{namespace}"')
        return found
    matches = [d for d in source.list(DEPLOYMENT, None) if _model.name_of(d) == name]
    if not matches:
        raise KvdtypeError(f'ModelDeployment "{name}" not found in any namespace')
    if len(matches) > 1:
        spaces = ", ".join(sorted(_model.namespace_of(d) for d in matches))
        raise UsageError(f'ModelDeployment "{name}" exists in several namespaces ({spaces}): pass -n NAMESPACE')
    return matches[0]


@record_type
class Judged:
    """One Pod's verdict, ready to become an item and perhaps a finding."""

    verdict: str
    expected: Optional[str]
    effective: Optional[str]
    occurrences: list[dict] = field(default_factory=list)
    message: str = ""
    error: Optional[str] = None  # the engine's own error text, for a rejected Pod
    #: The copy of the flag the verdict is about (the refused one, the one that wins), if any.
    culprit: Optional[_verdicts.FlagOccurrence] = None


def build_verify_report(inventory: PodInventory, offline: bool = False) -> Report:
    """The VerifyReport of one inventory: pure, so live and offline runs judge alike."""
    report = Report(kind="VerifyReport", columns=POD_COLUMNS,
                    empty_message="No replica or injected Pod to verify.")
    setting_on = _model.setting_is_on(inventory.setting)
    if inventory.setting_refused_in is not None:  # a half answer: the verdicts rest on a default
        report.not_examined(ObjectRef(SETTING.name, inventory.setting_refused_in, _model.SETTING_NAME),
                            SETTING.resource, inventory.setting_error or "it could not be read",
                            "every Pod is judged as if it is on (its default): with it off, a replica carrying the "
                            "flag is not rolled back yet")
    if setting_on is None:
        why = inventory.setting_error or f"Setting {_model.SETTING_NAME} has no readable value"
        if not offline or inventory.setting:
            report.warnings.append(f"{why}; judging as if it is on (its default)")
    on = setting_on is not False
    pods_by_deployment: dict[tuple[str, str], list[_Pod]] = {}
    for pod in inventory.replicas:
        namespace, name, labels = _identity(pod)
        key = (namespace, _model.text(labels.get(_model.REPLICA_INSTANCE_LABEL)) or "")
        pods_by_deployment.setdefault(key, []).append((pod, namespace, name, labels))
    pending: list[dict] = []
    verdicts = _Verdicts()
    for deployment in inventory.deployments:
        key = (_model.namespace_of(deployment), _model.name_of(deployment))
        pending += _deployment(deployment, pods_by_deployment.get(key, []), inventory, on, report, verdicts)
    for pod in inventory.injected:
        _injected(pod, inventory.bindings, on, report, verdicts)
    report.items.sort(key=_item_order)
    report.judged = [ObjectRef(POD.name, item["namespace"], item["name"]) for item in report.items]
    report.summary = {**_summary(report, inventory, setting_on), "pending": pending}
    report.headline = headline
    return report


def _expected(namespace: str, binding: str, bindings: dict, ref: ObjectRef, on: bool,
              report: Report) -> tuple[bool, Optional[str]]:
    """(judgeable, expected value): the Binding's dtype with the Setting on, no flag with it off."""
    found = bindings.get((namespace, binding))
    if found is None:
        add_missing_binding(report, ref, binding, ", so its Pods cannot be verified")
        return False, None
    dtype = _model.binding_dtype(found)
    if dtype is None and on:
        if any(f.code == DTYPE_UNKNOWN and f.object.name == binding and f.object.namespace == namespace
               for f in report.findings):
            return False, None
        report.add(DTYPE_UNKNOWN, ObjectRef(BINDING.name, namespace, binding),
                   f"{BINDING.name} {namespace}/{binding} declares no spec.domain.dtype, so the Pods of {ref} "
                   "cannot be verified.", dtype=None)
        return False, None
    return True, dtype if on else None
#: A replica Pod and what judging reads of its metadata: (Pod, namespace, name, labels).
_Pod = tuple[dict, str, str, dict]


def _identity(pod: dict) -> tuple[str, str, dict]:
    """(namespace, name, labels) of a Pod, its metadata read once (judging reads them for every Pod)."""
    metadata = pod.get("metadata")
    if not isinstance(metadata, dict):
        return "", "", {}
    labels = metadata.get("labels")
    return (_model.text(metadata.get("namespace")) or "", _model.text(metadata.get("name")) or "",
            labels if isinstance(labels, dict) else {})


def _item_order(item: dict) -> tuple[str, str]:
    return item["namespace"] or "", item["name"]


def _deployment(deployment: dict, pods: list[_Pod], inventory: PodInventory, on: bool, report: Report,
                verdicts: "_Verdicts") -> list[dict]:
    """Judge a deployment's replica Pods; return its roles still short of Pods."""
    ref = ObjectRef(DEPLOYMENT.name, _model.namespace_of(deployment), _model.name_of(deployment))
    if not _model.is_pool_attached(deployment):
        report.add(NOT_ATTACHED, ref,
                   f"{ref} is not pool-attached (no spec.kvCache): the operator renders no --kv-cache-dtype "
                   "for it, so there is nothing to verify.")
        return []
    judgeable, expected = _expected(ref.namespace or "", _model.deployment_binding(deployment) or "",
                                    inventory.bindings, ref, on, report)
    engine = _model.deployment_engine(deployment)
    note = _unrecorded(engine, ref, report)
    roles = {_model.role_name(r): r for r in _model.roles_of(deployment)}
    for role_name, role in roles.items():
        if _model.role_is_takeover(role):
            path = _model.role_path(deployment, role)
            report.add(ROLE_UNMANAGED, ref,
                       f"{ref} role {role_name} is a take-over role (command set): the operator adds no "
                       "--kv-cache-dtype to it, so its Pods are not judged.", role=role_name,
                       field_path=path + ("command",) if path else None)
    if not judgeable:
        expected = None
    # Besides a replica's own argv, what its verdict depends on: the same for every replica of a role.
    decided_by = {name: ("replica", engine.name, engine.declared, engine.version, tuple(_model.role_extra_args(role)),
                         _model.role_is_takeover(role), on, expected, judgeable) for name, role in roles.items()}
    seen: dict[str, int] = {}
    for pod, namespace, name, labels in pods:
        role_name = _model.text(labels.get(_model.REPLICA_COMPONENT_LABEL)) or ""
        pod_role = roles.get(role_name)
        if pod_role is None:
            continue  # router Pods share the instance label; only the roles' replicas are judged
        seen[role_name] = seen.get(role_name, 0) + 1
        container = _model.engine_container(pod)
        judged = verdicts.judge(container, decided_by[role_name], _judge_replica, container, pod_role, engine, on,
                                expected, judgeable)
        _record(report, pod, namespace, name, ref.name, role_name, container, judged, REPLICA_CODES, note)
    return _pending_replicas(ref, roles, seen)


def _unrecorded(engine: _model.EngineInfo, ref: ObjectRef, report: Report) -> str:
    """The note naming the recorded parser that stands in for an unrecorded engine version, once
    per object as an info finding; "" when the version is recorded (or the engine unknown)."""
    if engine.name is None:
        return ""
    basis = _verdicts.basis(engine.name, engine.version)
    if basis.note:
        report.add(VERSION_UNRECORDED, ref, f"{ref}: {basis.note}.", engine=engine.name,
                   engineVersion=engine.version, judgedAs=basis.table)
    if basis.added:
        add_table_added(report, ref, engine.name, engine.version, basis)
    return basis.note


class _Verdicts:
    """Verdicts already reached in this report, by everything that decides them.

    A verdict depends only on the engine container's argv (``command``, ``args``, and ``env`` when
    the argv refers to a variable) and on what the Pod is judged against (engine, version, the
    role's ``extraArgs``, the Setting, the expected dtype), none of it on the Pod's name: the
    replicas of a deployment, and often of many deployments, share all of it, so each argv is
    read and judged once per report instead of once per Pod.
    """

    def __init__(self) -> None:
        self._reached: dict[tuple, Judged] = {}

    def judge(self, container: Optional[dict], decided_by: tuple, judge: Callable[..., Judged], *args: Any) -> Judged:
        """``judge(*args)``, or the verdict it gave for the same argv and ``decided_by``."""
        key = _argv_key(container)
        if key is None:
            return judge(*args)
        key += decided_by
        try:
            judged = self._reached.get(key)
        except TypeError:  # an argv entry that is not a string (a list, a mapping): judged as it is
            return judge(*args)
        if judged is None:
            judged = self._reached[key] = judge(*args)
        return judged


def _argv_key(container: Optional[dict]) -> Optional[tuple]:
    """A container's ``command`` and ``args`` as a key; None when they refer to ``env`` (not memoized)."""
    if container is None:
        return (), ()
    command, args = container.get("command"), container.get("args")
    key = (tuple(command) if isinstance(command, list) else (), tuple(args) if isinstance(args, list) else ())
    if _model.refers_to_env(container):
        return None
    return key


def _pending_replicas(ref: ObjectRef, roles: dict[str, dict], seen: dict[str, int]) -> list[dict]:
    """Managed roles with fewer Pods than replicas: mid-rollout, so what is absent cannot pass yet.

    Not a finding (a dump without Pods would drown the report in them), but ``--wait`` keeps
    waiting while any remain, so it never ends between a replica's deletion and its successor.
    """
    return [
        {"namespace": ref.namespace, "deployment": ref.name, "role": role_name,
         "desired": _model.role_replicas(role), "found": seen.get(role_name, 0)}
        for role_name, role in roles.items()
        if not _model.role_is_takeover(role) and seen.get(role_name, 0) < _model.role_replicas(role)
    ]


def _judge_replica(container: Optional[dict], role: dict, engine: _model.EngineInfo, on: bool,
                   expected: Optional[str], judgeable: bool) -> Judged:
    reading = _model.container_reading(container or {}, engine)
    found = list(reading.occurrences)
    own = len(_verdicts.find_dtype_flags(_model.role_extra_args(role), engine.name, engine.version))
    origins = ["operator"] * max(len(found) - own, 0) + ["extraArgs"] * min(own, len(found))
    occurrences = [{**o.to_dict(), "origin": origin} for o, origin in zip(found, origins, strict=True)]
    effective = reading.value
    if _model.role_is_takeover(role):
        return Judged(UNMANAGED, None, effective, occurrences)
    if not judgeable:
        return Judged(UNKNOWN, None, effective, occurrences)
    operator = [o for o, origin in zip(found, origins, strict=True) if origin == "operator"]
    if not on:
        if reading.state == _verdicts.FAILED:
            return _rejected(reading, origins, None, occurrences, "replica")
        if operator:
            return Judged(MISMATCH, None, effective, occurrences,
                          f"not rolled back yet: the Setting is off, so the operator renders no flag, but "
                          f"this replica still carries the operator's {operator[-1].shown}; it is replaced at "
                          "the deployment's next reconcile", culprit=operator[-1])
        return Judged(OK, None, effective, occurrences)
    return _compare(reading, origins, expected, occurrences, "replica")


def _compare(reading: _verdicts.FlagReading, origins: list[str], expected: Optional[str],
             occurrences: list[dict], what: str) -> Judged:
    """Setting on: the engine must get past the flag and run the Binding's dtype.

    The worst that applies wins: rejected > missing > mismatch > pending > ok.
    """
    found = list(reading.occurrences)
    effective = reading.value
    if reading.state == _verdicts.FAILED:
        return _rejected(reading, origins, expected, occurrences, what)
    if reading.state == _verdicts.ABSENT:
        tokens = ", ".join(repr(o.token) for o in found)
        unread = f" (it passes {tokens}, which its engine does not read)" if found else ""
        why = ("it has not been replaced since the upgrade yet; the rollout replaces it at the deployment's next "
               "reconcile" if what == "replica" else "the webhook has not injected it; recreate the Pod")
        return Judged(MISSING, expected, None, occurrences,
                      f"no --kv-cache-dtype in its engine container{unread}, but its Binding says {expected}: {why}",
                      culprit=found[0] if found else None)
    if reading.state == _verdicts.UNSURE and effective in (None, expected):
        return Judged(UNKNOWN, expected, effective, occurrences)  # the engine or the value is not in the tables
    last = reading.culprit
    origin = origins[found.index(last)] if last in found else ""
    # The occurrence the value came from; a parser can read one that no occurrence names.
    shown = last.shown if last is not None else f"{_records.FLAG} {effective}"
    if effective == expected:
        if what == "replica" and "operator" not in origins:
            return Judged(PENDING, expected, effective, occurrences,
                          f"runs {expected}, but only from the role's own {shown}: it carries no operator "
                          "copy, so the rollout has not replaced it yet; it is replaced at the deployment's next "
                          "reconcile", culprit=last)
        return Judged(OK, expected, effective, occurrences)
    operator_copies = [o for o, g in zip(found, origins, strict=True) if g == "operator"]
    if origin == "extraArgs" and any(o.value == expected for o in operator_copies):
        detail = (f"the operator's copy is right ({expected}), but the role's own {shown} from extraArgs "
                  "comes later and wins: remove it from the role's extraArgs (see kubectl kvdtype find-flags)")
    elif origin == "pod":
        detail = (f"the Pod's own {shown} comes after the webhook's copy and wins: remove it from the "
                  "Pod's template")
    else:
        detail = f"runs {effective} ({shown}) while its Binding says {expected}"
        if what == "replica" and "operator" not in origins:
            detail += "; it carries no operator copy, so the rollout has not replaced it yet"
        elif what == "pod":
            detail += "; recreate the Pod so the webhook appends its Binding's dtype"
    return Judged(MISMATCH, expected, effective, occurrences, detail, culprit=last)


def _rejected(reading: _verdicts.FlagReading, origins: list[str], expected: Optional[str],
              occurrences: list[dict], what: str) -> Judged:
    """The engine refuses the argv: the process exits and never serves."""
    found = list(reading.occurrences)
    culprit = reading.culprit
    origin = origins[found.index(culprit)] if culprit in found else ""
    later = [o for o, g in zip(found[found.index(culprit) + 1:], origins[found.index(culprit) + 1:], strict=True)
             if g != origin] if culprit in found else []
    head = f"its engine exits at {reading.stage} ({reading.error}) on {culprit.shown if culprit else 'its argv'}"
    if origin in ("operator", "webhook"):
        source = "the operator's" if origin == "operator" else "the webhook's"
        tail = (f": {source} copy comes first and ends the process, although the later {later[-1].shown} is valid"
                if later else "")
        fix = "rebind to a dtype its engine accepts (see kubectl kvdtype check)"
        return Judged(REJECTED, expected, None, occurrences, f"{head}{tail}; it never serves: {fix}", reading.error,
                      culprit)
    whose = "the role's extraArgs" if origin == "extraArgs" else "the Pod's template"
    return Judged(REJECTED, expected, None, occurrences,
                  f"{head}; it never serves: remove the flag from {whose}", reading.error, culprit)


def _injected(pod: dict, bindings: dict, on: bool, report: Report, verdicts: _Verdicts) -> None:
    ref = ObjectRef(POD.name, _model.namespace_of(pod), _model.name_of(pod))
    judgeable, expected = _expected(ref.namespace or "", _model.pod_binding(pod) or "", bindings, ref, on, report)
    container = _model.target_container(pod, _model.pod_spec(pod))
    note = ""
    if container is None:
        judged = Judged(MISSING if judgeable else UNKNOWN, expected, None, [],
                        "no target container (several containers and no kvcache.gpustack.ai/container "
                        "annotation naming one of them), so the webhook cannot inject it")
    else:
        engine = _model.pod_engine(pod)
        note = _unrecorded(engine, ref, report)
        injected = _model.INJECTED_ANNOTATION in _model.annotations_of(pod)  # where the webhook's copy is
        judged = verdicts.judge(container, (INJECTED, engine.name, engine.declared, engine.version, injected, on,
                                            expected, judgeable),
                                _judge_injected, pod, container, engine, on, expected, judgeable)
    _record(report, pod, ref.namespace or "", ref.name, None, INJECTED, container, judged, POD_CODES, note)


def _judge_injected(pod: dict, container: dict, engine: _model.EngineInfo, on: bool, expected: Optional[str],
                    judgeable: bool) -> Judged:
    reading = _model.container_reading(container, engine)
    found = list(reading.occurrences)
    webhook = _model.webhook_copy(pod, found)
    origins = ["webhook" if o is webhook else "pod" for o in found]
    occurrences = [{**o.to_dict(), "origin": origin} for o, origin in zip(found, origins, strict=True)]
    effective = reading.value
    if not judgeable:
        return Judged(UNKNOWN, None, effective, occurrences)
    if reading.state == _verdicts.FAILED:
        return _rejected(reading, origins, expected if on else None, occurrences, "pod")
    if not on:
        if webhook is not None:
            return Judged(MISMATCH, None, effective, occurrences,
                          f"not rolled back yet: the Setting is off, but it still carries the webhook's "
                          f"{webhook.shown}; recreate the Pod", culprit=webhook)
        return Judged(OK, None, effective, occurrences)
    if not any(o.field == "args" for o in found):
        return Judged(MISSING, expected, effective, occurrences,
                      f"no --kv-cache-dtype in its target container's args, where the webhook appends "
                      f"{expected}: it was not injected since the upgrade; recreate the Pod")
    return _compare(reading, origins, expected, occurrences, "pod")


def _record(report: Report, pod_object: dict, namespace: str, pod: str, deployment: Optional[str], role: str,
            container: Optional[dict], judged: Judged, codes: dict[str, str], note: str = "") -> None:
    """One item per judged Pod, and its finding; ``pod_object`` is read only for a finding's field
    (the SARIF line), so a Pod with no finding costs nothing more.

    A verdict may be shared by many Pods (_Verdicts): each Pod's item gets its own occurrences."""
    occurrences = [dict(o) for o in judged.occurrences]
    name = _model.text((container or {}).get("name"))
    report.items.append({
        "namespace": namespace, "name": pod, "deployment": deployment, "role": role, "container": name,
        "expected": judged.expected, "effective": judged.effective, "occurrences": occurrences,
        "verdict": judged.verdict,
    })
    ref = ObjectRef(POD.name, namespace, pod)
    if judged.verdict == UNKNOWN:
        _unread(report, ref, container, name, deployment, role)
    code = codes.get(judged.verdict)
    if code is None:
        return
    whose = f"replica of ModelDeployment {deployment}, role {role}" if deployment else "injected Pod"
    noted = f" ({note})" if note else ""
    report.add(code, ref, f"{ref} ({whose}): {judged.message}{noted}.", deployment=deployment,
               role=role, container=name, expected=judged.expected, effective=judged.effective,
               occurrences=occurrences, **({"error": judged.error} if judged.error else {}),
               field_path=_culprit_path(pod_object, container, judged, injected=deployment is None))


def _unread(report: Report, ref: ObjectRef, container: Optional[dict], name: Optional[str],
            deployment: Optional[str], role: str) -> None:
    """A container whose argv is too long to read (so judged unknown): a warning finding, as
    find-flags gives for a role or a template."""
    argv = [word for key in ("command", "args") for word in _model.argv_of(container or {}, key)]
    why = too_long(argv)
    if why is not None:
        report.add(ARGV_TOO_LONG, ref, f"{ref}: whether container {name}'s command and args carry --kv-cache-dtype "
                                       f"is not known: it is {why}; look at it by hand.",
                   deployment=deployment, role=role, container=name)


def _culprit_path(pod: dict, container: Optional[dict], judged: Judged, injected: bool) -> Optional[FieldPath]:
    """The argv entry a verdict is about; else an injected Pod's container's ``args`` when the
    webhook's copy is missing there, or the container (its name)."""
    at = _model.container_path(_model.POD_SPEC_PATH, _model.pod_spec(pod), container)
    if judged.culprit is None:
        return at + ("args",) if at is not None and injected and judged.verdict == MISSING else _model.named(at)
    return _model.occurrence_path(at, container or {}, judged.culprit)
REPLICA_CODES = {REJECTED: REPLICA_REJECTED, MISSING: REPLICA_MISSING, MISMATCH: REPLICA_MISMATCH,
                 PENDING: REPLICA_NOT_ROLLED}
POD_CODES = {REJECTED: POD_REJECTED, MISSING: POD_MISSING, MISMATCH: POD_MISMATCH}


def _summary(report: Report, inventory: PodInventory, setting_on: Optional[bool]) -> dict:
    verdicts = [item["verdict"] for item in report.items]
    return {
        "deployments": len(inventory.deployments),
        "pods": len(report.items),
        "verdicts": {v: verdicts.count(v) for v in (OK, PENDING, REJECTED, MISSING, MISMATCH, UNMANAGED, UNKNOWN)},
        "setting": {"name": _model.SETTING_NAME,
                    "value": None if setting_on is None else ("true" if setting_on else "false")},
    }


def headline(report: Report) -> str:
    return f"{progress_line(report)}; {report.findings_line()}."


def progress_line(report: Report) -> str:
    """``7/12 replicas carry bfloat16``: what the one-line display and the time-up warning say."""
    judged = [item for item in report.items if item["verdict"] in (OK,) + NOT_DONE]
    passing = sum(1 for item in judged if item["verdict"] == OK)
    not_rolled = sum(1 for item in judged if item["verdict"] == PENDING)
    expected = sorted({item["expected"] for item in judged if item["expected"]})
    what = "replicas" if all(item["role"] != INJECTED for item in judged) else "Pods"
    absent = sum(p["desired"] - p["found"] for p in report.summary.get("pending", []))
    total = len(judged) + absent
    tail = "".join(f" ({count} {what})" for count, what in ((absent, "not created yet"), (not_rolled, "not rolled yet"))
                   if count)
    if not expected:
        return f"{passing}/{total} {what} pass (no flag expected){tail}"
    return f"{passing}/{total} {what} carry {', '.join(expected)}{tail}"


def _occurrences_cell(item: dict) -> str:
    return ",".join(f"{o['field']}[{o['index']}]={o['value']}" for o in item["occurrences"]) or "-"
#: The VerifyReport's table: one row per judged Pod.
POD_COLUMNS = [
    Column("NAMESPACE", "namespace", namespace=True),
    Column("POD", "name"),
    Column("ROLE", "role"),
    Column("CONTAINER", "container"),
    Column("EXPECTED", lambda item: item["expected"] or ("(no flag)" if item["verdict"] in (OK,) + NOT_DONE else None)),
    Column("EFFECTIVE", "effective"),
    Column("VERDICT", "verdict", status=True),
    MANAGED_BY,
    Column("DEPLOYMENT", "deployment", wide=True),
    Column("OCCURRENCES", _occurrences_cell, wide=True),
]

"""find-flags' judgement: the roles, injected Pods and Pod templates that pass ``--kv-cache-dtype``.

A layer module, so that ``find-flags`` and ``preflight`` share one judgement (subcommands import
layers, never each other). ``find_flags`` is the command; this is what it reports.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._engines.argv import too_long
from kubectl_kvdtype._engines.verdicts import FlagOccurrence
from kubectl_kvdtype._judging.bindings import setting_get
from kubectl_kvdtype._judging.managed import MANAGED_BY, reader_for
from kubectl_kvdtype._kits.codes import ARGV_TOO_LONG, POD_FLAG, ROLE_FLAG
from kubectl_kvdtype._kits.records import field, record_type
from kubectl_kvdtype._kits.report import Column, FieldPath, ObjectRef, Report
from kubectl_kvdtype._kits.status import KvdtypeError
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import (
    BINDING,
    DEPLOYMENT,
    POD,
    WORKLOADS,
    Get,
    Kind,
    Query,
    Source,
    list_many,
    not_readable,
    unwrap,
)
from kubectl_kvdtype._sources.managers import ManagerReader


@record_type
class FlagInventory:
    """What ``find-flags`` reads: one LIST per kind, nothing per object."""

    deployments: list[dict]
    bindings: list[dict]
    pods: list[dict]
    workloads: list[tuple[Kind, dict]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: (kind, why) of each optional kind that could not be read: a warning finding each.
    not_examined: list[tuple[Kind, str]] = field(default_factory=list)
    namespace: Optional[str] = None
    #: The Setting's read (``bindings.setting_of`` words it), when ``read`` was asked for it.
    setting_read: Union[list[dict], KvdtypeError, None] = None
    #: What the ``beside`` GETs of ``read`` answered, in order (each a list or the error it met).
    beside: list[Union[list[dict], KvdtypeError]] = field(default_factory=list)
    _reader: Optional[ManagerReader] = field(default=None, repr=False, compare=False)

    @classmethod
    def read(cls, source: Source, namespace: Optional[str], setting_in: Optional[str] = None,
             whole: bool = False, beside: Sequence[Get] = ()) -> "FlagInventory":
        """One LIST per kind, side by side; with ``setting_in`` (preflight's system namespace) the
        Setting's GET beside them. ``whole``: the deployments and Bindings as they come (``--fix``
        backs them up), else without what judging never reads. ``beside``: GETs sent alongside
        (whether a guard is installed), answered in ``beside``, never raised."""
        project = _model.judged_only(whole)
        queries: list[Union[Query, Get]] = [
            Query(DEPLOYMENT, namespace, project=project), Query(BINDING, namespace, project=project),
            Query(POD, namespace, f"{_model.INJECT_LABEL}=true"), *(Query(k, namespace) for k in WORKLOADS),
            *([setting_get(setting_in)] if setting_in is not None else [])]
        results = list_many(source, [*queries, *beside])
        results, beside_read = results[:len(queries)], results[len(queries):]
        deployments, bindings, pods = unwrap(results[:3])
        inventory = cls(deployments, bindings, pods, namespace=namespace,
                        setting_read=results[-1] if setting_in is not None else None, beside=beside_read)
        for kind, result in zip(WORKLOADS, results[3:3 + len(WORKLOADS)], strict=True):
            if not_readable(result):
                # Workload templates are a bonus over the guide (docs/reference.md, "Kinds that
                # cannot be read"): a user who may not list them still gets the roles and Pods,
                # a warning finding says what was not examined, and the run is incomplete.
                inventory.warnings.append(f"{kind.resource} not examined: {result.message}")
                inventory.not_examined.append((kind, result.message))
                continue
            (objects,) = unwrap([result])  # any other failure is the whole run's
            inventory.workloads += [(kind, obj) for obj in objects]
        return inventory

    def managers_reader(self, source: Source, offline: bool) -> ManagerReader:
        """Who manages what was read (``_judging.managed``), knowing every object read here: one per
        inventory, so that judging and ``--fix`` read each manager's object once."""
        if self._reader is None:
            self._reader = reader_for(source, offline, (DEPLOYMENT.name, self.deployments),
                                      (BINDING.name, self.bindings), (POD.name, self.pods),
                                      *((kind.name, [obj]) for kind, obj in self.workloads))
        return self._reader


def build_find_flags_report(inventory: FlagInventory) -> Report:
    """The FindFlagsReport of an inventory: pure, so live and offline runs agree."""
    report = Report(kind="FindFlagsReport", columns=FLAG_COLUMNS,
                    empty_message="No role, Pod or Pod template passes --kv-cache-dtype itself.")
    dtypes = {(_model.namespace_of(b), _model.name_of(b)): _model.binding_dtype(b) for b in inventory.bindings}
    report.judged = []  # what was examined, flag or not: summary.examined counts the same
    for deployment in inventory.deployments:
        if _model.is_pool_attached(deployment):
            report.judged.append(_ref(DEPLOYMENT.name, deployment))
            _deployment(deployment, dtypes, report)
    for pod in inventory.pods:
        report.judged.append(_ref(POD.name, pod))
        _pod_like(POD.name, pod, pod, _model.pod_spec(pod), dtypes, report, _model.POD_SPEC_PATH)
    for kind, workload in inventory.workloads:
        template = _model.pod_template(workload)
        if template is not None and _model.opts_in(_model.labels_of(template)):
            report.judged.append(_ref(kind.name, workload))
            _pod_like(kind.name, workload, template, _model.pod_spec(template), dtypes, report,
                      _model.template_spec_path(workload))
    for kind, why in inventory.not_examined:
        report.not_examined(not_examined_ref(kind, inventory.namespace), kind.resource, why,
                            "their Pod templates may pass --kv-cache-dtype unseen")
    report.warnings += inventory.warnings
    report.summary = _summary(inventory, report)
    report.headline = _headline

    return report


def _headline(report: Report) -> str:
    """Made when the report is shown: its counts are the final report's (``Report.summary_line``)."""
    return (f"{len(report.items)} place(s) pass --kv-cache-dtype themselves: {report.summary['roles']} role(s), "
            f"{report.summary['pods']} Pod(s), {report.summary['templates']} Pod template(s); "
            f"{report.findings_line()}.")


def not_examined_ref(kind: Kind, namespace: Optional[str]) -> ObjectRef:
    """What a ``kind-not-examined`` finding is about: every object of the kind in scope ("*")."""
    return ObjectRef(kind.name, namespace, "*")


def _ref(kind: str, obj: dict) -> ObjectRef:
    return ObjectRef(kind, _model.namespace_of(obj), _model.name_of(obj))


# --- Roles ---------------------------------------------------------------------------------

def _deployment(deployment: dict, dtypes: dict, report: Report) -> None:
    engine = _model.deployment_engine(deployment)
    namespace, binding = _model.namespace_of(deployment), _model.deployment_binding(deployment) or ""
    ref = ObjectRef(DEPLOYMENT.name, namespace, _model.name_of(deployment))
    for role in _model.roles_of(deployment):
        if _model.role_is_takeover(role):
            continue  # the operator adds nothing to a take-over role and refuses nothing there
        extra = _model.role_extra_args(role)
        role_name = _model.role_name(role)
        if _unread(report, ref, too_long(extra), f"role {role_name}'s extraArgs", role=role_name):
            continue
        today = _verdicts.read_role(extra, engine.name, engine.version)
        found = list(today.occurrences)
        if not found:
            continue
        known = (namespace, binding) in dtypes
        binding_dtype = dtypes.get((namespace, binding))
        value = today.value if today.runs else None
        after = (_verdicts.read_role(extra, engine.name, engine.version, operator_dtype=binding_dtype)
                 if binding_dtype else None)
        message = _role_message(ref, role_name, engine, today, after, binding, known, binding_dtype)
        report.add(ROLE_FLAG, ref, message[:-1] + (f" ({today.note})." if today.note else "."),
                   role=role_name, value=value, binding=binding or None, bindingDtype=binding_dtype,
                   engine=engine.name or engine.declared, occurrences=[o.to_dict() for o in found],
                   field_path=_model.occurrence_path(_model.role_path(deployment, role), role, found[0]))
        report.items.append(_item(ref, role_name, None, engine, found, value, binding, binding_dtype, None))


def _role_message(ref: ObjectRef, role: str, engine: _model.EngineInfo, today: _verdicts.FlagReading,
                  after: Optional[_verdicts.FlagReading], binding: str, known: bool,
                  binding_dtype: Optional[str]) -> str:
    found = list(today.occurrences)
    value = today.value
    head = f"{ref} role {role} passes {_where(found)}"
    # Not the flag to its engine: no copy is read, or the one the parse fails on is not (a copy the
    # engine reads but refuses the value of is the next case, in the engine's own words).
    unread = not any(o.read for o in found) or (
        today.state == _verdicts.FAILED and any(not o.read for o in found)
        and (today.culprit is None or not today.culprit.read))
    if unread or (value is None and today.state != _verdicts.FAILED):
        error = f" ({today.error})" if today.error else ""
        return (f"{head}, in a form {engine.name or 'its engine'} does not read as the flag "
                f"({_unread_note(found)}): the role fails at startup anyway{error}; remove it from extraArgs.")
    if today.state == _verdicts.FAILED:
        return (f"{head}: {engine.name} {engine.version or ''} refuses it ({today.error}), so the role fails at "
                f"{today.stage} today, whatever its Binding says; remove it from extraArgs.").replace("  ", " ")
    assert value is not None, "a reading that neither fails nor lacks a read copy has a value"
    if after is not None and after.state == _verdicts.FAILED and after.culprit is not None \
            and after.culprit.field == "operator":
        return (f"{head}: after the upgrade the operator renders its Binding {binding}'s {binding_dtype} first, "
                f"and its engine refuses it ({after.error}): the process exits at {after.stage} although the "
                f"role's own later copy ({value}) is valid, so the role's copy does not save it. Rebind to a "
                "dtype the engine accepts (kubectl kvdtype check) before upgrading, then remove the flag; its "
                "next edit is refused until the flag is gone from extraArgs.")
    if not known:
        return (f"{head} ({value}), and its Binding {binding!r} does not exist: remove the flag, and create "
                "the Binding or point the deployment at one (kubectl kvdtype check).")
    if binding_dtype is None:
        return (f"{head} ({value}); its Binding {binding} declares no dtype, so after removal the role "
                "runs none: give it a Binding with a dtype, then remove the flag.")
    refused = "its next edit is refused until the flag is gone from extraArgs"
    if value == binding_dtype:
        return (f"{head}: the same value as its Binding {binding} ({value}), so removing the flag changes "
                f"nothing; remove it, since {refused}.")
    same = (f" ({value} and {binding_dtype} are spellings of the same format)"
            if binding_dtype in _records.equivalents(value) else "")
    return (f"{head}: the role runs {value} today (its copy comes after the operator's and wins); after "
            f"removal it runs its Binding {binding}'s {binding_dtype}{same}. Remove it once {binding_dtype} is "
            f"what the role should run; {refused}.")


# --- Pods and Pod templates ----------------------------------------------------------------

def _pod_like(kind: str, obj: dict, pod_like: dict, spec: dict, dtypes: dict, report: Report,
              spec_path: FieldPath) -> None:
    """A Pod (``obj`` is ``pod_like``) or a workload and its template: the target container's own flag.
    ``spec_path``: where ``spec`` is in ``obj``."""
    container = _model.target_container(pod_like, spec)
    if container is None:
        return
    argv = _model.as_list(container.get("command")) + _model.as_list(container.get("args"))
    name = _model.text(container.get("name")) or ""
    ref = ObjectRef(kind, _model.namespace_of(obj), _model.name_of(obj))
    if _unread(report, ref, too_long(argv), f"container {name}'s command and args", container=name):
        return
    engine = _model.pod_engine(pod_like)
    found = _model.container_flags(container, engine)
    webhook = _model.webhook_copy(pod_like, found)
    own = [o for o in found if o is not webhook]
    if not own:
        return
    namespace = ref.namespace or ""
    binding = _model.pod_binding(pod_like) or ""
    binding_dtype = dtypes.get((namespace, binding))
    owner = _owner(obj) if kind == POD.name else None
    reading = _own_reading(container, engine, webhook)
    value = reading.value if reading.runs else None
    report.add(POD_FLAG, ref, _pod_message(ref, name, own, owner, reading),
               container=name, owner=owner, value=value, binding=binding or None, bindingDtype=binding_dtype,
               engine=engine.name or engine.declared, occurrences=[o.to_dict() for o in own],
               field_path=_model.occurrence_path(_model.container_path(spec_path, spec, container), container, own[0]))
    report.items.append(_item(ref, None, name, engine, own, value, binding, binding_dtype, owner))


def _own_reading(container: dict, engine: _model.EngineInfo,
                 webhook: Optional[FlagOccurrence]) -> _verdicts.FlagReading:
    """What the engine makes of the Pod's own copies, read without the webhook's."""
    fields = _model.container_fields(container)
    if webhook is not None:
        args = list(fields[1][1])
        del args[webhook.index:webhook.index + (1 if "=" in webhook.token or webhook.value is None else 2)]
        fields[1] = ("args", args)
    return _verdicts.read_flag(fields, engine.name, engine.version, container.get("env"))


def _unread(report: Report, ref: ObjectRef, why: Optional[str], what: str, **fields: Any) -> bool:
    """An argv too long to read (``why``): a warning finding instead of a judgement, and True."""
    if why is None:
        return False
    report.add(ARGV_TOO_LONG, ref, f"{ref}: whether {what} pass --kv-cache-dtype is not known: it is {why}; "
                                   "look at it by hand.", **fields)
    return True


def _owner(pod: dict) -> Optional[dict]:
    reference = _model.controller_of(pod)
    if reference is None:
        return None
    return {"kind": _model.text(reference.get("kind")), "name": _model.text(reference.get("name"))}


def _pod_message(ref: ObjectRef, container: str, own: list[FlagOccurrence], owner: Optional[dict],
                 reading: _verdicts.FlagReading) -> str:
    head = f"{ref} passes {_where(own)} itself, in container {container}"
    if not any(o.read for o in own):  # not the flag to its engine, so not to the webhook either
        fix = (f"fix its owner {owner['kind']} {owner['name']}" if ref.kind == POD.name and owner else
               "recreate it without it" if ref.kind == POD.name else "remove it from its Pod template")
        return (f"{head}, in a form its engine does not read as the flag ({_unread_note(own)}): the webhook "
                f"lets such a Pod through and its engine fails at startup; {fix}.")
    if reading.state == _verdicts.FAILED:
        unread = f" (its engine refuses it at {reading.stage}: {reading.error})"
    else:
        unread = ""
    if ref.kind == POD.name and owner:
        fix = (f"the webhook refuses such a Pod at creation, so its owner {owner['kind']} {owner['name']} reports "
               "FailedCreate for every new Pod until its template drops the flag: fix the owner")
    elif ref.kind == POD.name:
        fix = "the webhook refuses such a Pod at creation; it has no owner, so recreate it without the flag"
    else:
        fix = (f"the webhook refuses every Pod this {ref.kind} creates, which it reports as FailedCreate, "
               "until its Pod template drops the flag")
    return f"{head}{unread}; {fix}."


# --- Shared pieces -------------------------------------------------------------------------

def _where(found: list[FlagOccurrence]) -> str:
    """``--kv-cache-dtype fp8 at extraArgs[1]``, or the several places and which one wins."""
    places = [o.shown + (f" ({o.note})" if o.note and o.read else "") for o in found]
    if len(found) == 1:
        return places[0]
    return (f"the flag {len(found)} times ({'; '.join(places)}; the last one wins only when its engine "
            "accepts every copy)")


def _unread_note(found: list[FlagOccurrence]) -> str:
    return "; ".join(dict.fromkeys(o.note for o in found if not o.read and o.note))


def _item(ref: ObjectRef, role: Optional[str], container: Optional[str], engine: _model.EngineInfo,
          found: list[FlagOccurrence], value: Optional[str], binding: str, binding_dtype: Optional[str],
          owner: Optional[dict]) -> dict:
    return {
        "namespace": ref.namespace, "kind": ref.kind, "name": ref.name, "role": role, "container": container,
        "engine": engine.name or engine.declared, "value": value, "binding": binding or None,
        "bindingDtype": binding_dtype, "where": [o.where for o in found],
        "occurrences": [o.to_dict() for o in found], "owner": owner,
    }


def _summary(inventory: FlagInventory, report: Report) -> dict:
    kinds = [item["kind"] for item in report.items]
    return {
        "examined": {
            "poolAttachedDeployments": sum(1 for d in inventory.deployments if _model.is_pool_attached(d)),
            "injectedPods": len(inventory.pods),
            "optedInTemplates": sum(1 for _, w in inventory.workloads
                                    if _model.opts_in(_model.labels_of(_model.pod_template(w) or {}))),
        },
        "roles": kinds.count(DEPLOYMENT.name),
        "pods": kinds.count(POD.name),
        "templates": sum(1 for k in kinds if k not in (DEPLOYMENT.name, POD.name)),
    }


def _owner_cell(item: dict) -> Optional[str]:
    owner = item.get("owner")
    return f"{owner['kind']}/{owner['name']}" if owner else None


#: The FindFlagsReport's table: one row per role, Pod or template that passes the flag.
FLAG_COLUMNS = [
    Column("NAMESPACE", "namespace", namespace=True),
    Column("KIND", "kind"),
    Column("NAME", "name"),
    Column("ROLE/CONTAINER", lambda item: item["role"] or item["container"]),
    Column("VALUE", "value"),
    Column("BINDING DTYPE", "bindingDtype"),
    Column("WHERE", lambda item: ",".join(item["where"])),
    MANAGED_BY,
    Column("ENGINE", "engine", wide=True),
    Column("OWNER", _owner_cell, wide=True),
]

"""``kubectl kvdtype preflight``: may I upgrade now, and if not, what exactly do I do first?

One run gives what ``check``, ``find-flags`` and ``escape status`` give separately: their
judgements (their own report builders, not a copy of their rules), the Setting's state, and a
dry run of the upgrade per pool-attached role and per injected Pod (``_judging.upgrade``). From those it
builds an ordered to-do list, each item with the command to run, and one verdict: GO, or NO-GO
while any error finding remains (warnings too with ``--fail-on warning``), or INCOMPLETE, never
GO, when a kind that could change it could not be read (``Report.not_examined``).
"""

from __future__ import annotations

import re
import shlex
from typing import Iterable, Optional, Sequence

from kubectl_kvdtype._commands.command import Command, Context
from kubectl_kvdtype._engines import verdicts as _engines
from kubectl_kvdtype._judging import judgement as _judgement
from kubectl_kvdtype._judging import upgrade as _upgrade
from kubectl_kvdtype._judging.flagged import FlagInventory, build_find_flags_report
from kubectl_kvdtype._judging.managed import MANAGED_BY, name_managers, title_of
from kubectl_kvdtype._kits import codes as _codes
from kubectl_kvdtype._kits.codes import PREDICTED_DEPENDS, PREDICTED_FAILURE
from kubectl_kvdtype._kits.report import (
    ERROR,
    GO,
    INCOMPLETE,
    NO_GO,
    WARNING,
    Column,
    Finding,
    ObjectRef,
    Report,
    Section,
    fails,
)
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.managers import ManagerReader

#: To-do actions, in the order they are listed.
REBIND, UPGRADE_ENGINE, SPLIT, CREATE_BINDING, REMOVE_FLAG, INVESTIGATE, LOOK = (
    "rebind", "upgrade-engine", "split-binding", "fix-binding-ref", "remove-flag", "investigate", "look")
#: For objects someone else manages (``_send_to_sources``): stop its manager first, change its source,
#: and let it work again last.
PAUSE, CHANGE_SOURCE, RESUME = "pause-manager", "change-source", "resume-manager"
#: Warning codes worth a look, in the order listed; any other warning follows them.
_WARNING_ORDER = (_codes.DTYPE_AUTO, _codes.DTYPE_UNKNOWN, _codes.ENGINE_UNKNOWN, _codes.DUPLICATE_OBJECT,
                  _codes.VERSION_UNRECORDED)


class PreflightCommand(Command):
    name = "preflight"
    description = (
        "Runs the judgements of check and find-flags, reads the Setting (is the dtype enforced yet?), "
        "and dry-runs the upgrade: for every role of a pool-attached ModelDeployment and every Pod opted "
        "into injection, the argv the upgraded operator or webhook renders, parsed as that engine at that "
        "version parses it (-o wide shows each one's predicted outcome). Prints an ordered to-do list with "
        "the command for each item, then GO, or NO-GO while an error finding remains, or INCOMPLETE (never GO) "
        "when a kind that could change the verdict could not be read. Exit 0 GO, 1 NO-GO, 3 could not complete, "
        "4 INCOMPLETE; --exit-zero gives 0 for GO and NO-GO, never for 3 or 4."
    )
    examples = (
        ("start here: is the whole cluster ready for the upgrade?", "kubectl kvdtype preflight -A"),
        ("every role's predicted outcome, and warnings make it NO-GO too",
         "kubectl kvdtype preflight -n team-a -o wide --fail-on warning"),
        ("a CI gate over a dump, never failing the job", "kubectl kvdtype preflight -f dump.yaml -o json --exit-zero"),
    )

    def run(self, context: Context) -> Report:
        flags_inventory = FlagInventory.read(context.source, context.namespace)
        setting, setting_error = _judgement.read_setting(context.source, context.system_namespace)
        check_inventory = _judgement.BindingInventory(
            flags_inventory.bindings, _judgement.consumers_of(flags_inventory.deployments, flags_inventory.pods),
            flags_inventory.deployments, setting, setting_error)
        report = build_report(check_inventory, flags_inventory, context.system_namespace, offline=context.offline,
                              ignore=set(context.common.ignore), fail_on=context.common.fail_on or ERROR,
                              source_findings=getattr(context.source, "findings", []),
                              managers=flags_inventory.managers_reader(context.source, context.offline))
        named = context.common.connection.context
        if named:  # the to-do list's commands must reach the cluster judged, not the current context
            for item in report.items:
                if item["command"]:
                    item["command"] = in_context(item["command"], named)
        return report


#: Where a command names kubectl (or the plugin): its --context goes right after.
_KUBECTL = re.compile(r"\bkubectl(?: kvdtype)?(?= )")


def in_context(command: str, context_name: str) -> str:
    """``command`` with ``--context NAME`` after each kubectl (and ``kubectl kvdtype``) it runs;
    the name quoted for the shell, as it comes from the kubeconfig."""
    flag = f" --context {shlex.quote(context_name)}"
    return _KUBECTL.sub(lambda match: match.group() + flag, command)


def build_report(check_inventory: _judgement.BindingInventory, flags_inventory: FlagInventory, system_namespace: str,
                 offline: bool = False, ignore: Optional[set] = None, fail_on: str = "error",
                 source_findings: Iterable[Finding] = (), managers: Optional[ManagerReader] = None) -> Report:
    """The PreflightReport of the inventories: pure, so live and offline runs judge alike.

    ``source_findings`` (an object read twice from manifests) are added to the report by the
    command line after this; they count towards the verdict and the to-do list here. The verdict
    is the exit status's rule (``Report.exit_status``): INCOMPLETE exactly when the run exits 4,
    else NO-GO exactly when it exits 1 (``_kits.report.fails``). ``managers`` reads who manages the
    objects found (``_judging.managed``): their items go to their source.
    """
    ignore = ignore or set()
    checked = _judgement.build_check_report(check_inventory, system_namespace, offline=offline)
    flagged = build_find_flags_report(flags_inventory)
    predictions = _upgrade.predict(flags_inventory.deployments, flags_inventory.pods, flags_inventory.bindings)
    report = Report(kind="PreflightReport", columns=COLUMNS, findings_table=False,
                    empty_message="Nothing to do before the upgrade.", fail_on=fail_on)
    report.findings = checked.findings + flagged.findings
    _add_predicted_failures(predictions, report)
    report.ignore(ignore)
    if managers is not None:
        name_managers(report, managers)
    report.warnings = checked.warnings + flagged.warnings
    counted = report.findings + [f for f in source_findings if f.code not in ignore]
    report.items = _send_to_sources(_todo(counted, check_inventory.consumers))
    report.sections = [Section("predictions", PREDICTION_COLUMNS, [p.to_dict() for p in predictions], wide=True)]
    # What preflight judged is what check and find-flags judge (the dry run covers their objects).
    report.judged = list(dict.fromkeys((checked.judged or []) + (flagged.judged or [])))
    errors = [f for f in counted if f.severity == ERROR]
    warnings = [f for f in counted if f.severity == WARNING]
    no_go = any(fails(f.severity, fail_on) for f in counted)
    setting = _setting_state(check_inventory, system_namespace, offline)
    report.unread = checked.unread + flagged.unread  # what could change the verdict, not read: never GO
    report.summary = {
        "verdict": INCOMPLETE if report.unread else NO_GO if no_go else GO,
        "incomplete": list(report.unread),
        "reason": _reason(errors, warnings, fail_on, report.unread),
        "failOn": fail_on,
        "setting": setting,
        "dryRun": {"roles": sum(1 for p in predictions if p.kind == _upgrade.MODEL_DEPLOYMENT),
                   "pods": sum(1 for p in predictions if p.kind == _upgrade.POD),
                   "outcomes": _upgrade.counts(predictions)},
        "todo": len(report.items),
    }
    report.headline = [setting["line"], _dry_run_line(predictions),
                       f"{report.summary['verdict']}: {report.summary['reason']}"]
    return report


# --- Predictions the other judgements do not explain ---------------------------------------

def _add_predicted_failures(predictions: list[_upgrade.Prediction], report: Report) -> None:
    """A replica the dry run sees failing because of the upgrade, which no error finding names; one
    whose value depends on a variable the object does not set (a warning: a look item)."""
    covered = set()
    for finding in report.findings:
        if finding.severity == ERROR:
            covered.add((finding.object.kind, finding.object.namespace, finding.object.name))
            for consumer in finding.fields.get("consumers") or []:
                covered.add((consumer.get("kind"), consumer.get("namespace"), consumer.get("name")))
    for prediction in predictions:
        key = (prediction.kind, prediction.namespace, prediction.name)
        if prediction.outcome == _upgrade.UNSURE and "depends on" in prediction.text:
            ref = ObjectRef(prediction.kind, prediction.namespace, prediction.name)
            where = f" role {prediction.role}" if prediction.role else ""
            report.add(PREDICTED_DEPENDS, ref, f"{ref}{where}: after the upgrade it is {prediction.text}: what it "
                       "starts with is set outside the object.", role=prediction.role, container=prediction.container,
                       dtype=prediction.dtype, argv=list(prediction.argv), field_path=prediction.field_path)
        elif prediction.broken and not prediction.fails_anyway and key not in covered:
            ref = ObjectRef(prediction.kind, prediction.namespace, prediction.name)
            where = f" role {prediction.role}" if prediction.role else ""
            report.add(PREDICTED_FAILURE, ref,
                       f"{ref}{where}: after the upgrade it {prediction.text} (the argv the upgrade renders, read "
                       f"as {' '.join(filter(None, [prediction.engine, prediction.engine_version]))} reads it).",
                       role=prediction.role, container=prediction.container, dtype=prediction.dtype,
                       error=prediction.error or None, argv=list(prediction.argv), field_path=prediction.field_path)


# --- The to-do list --------------------------------------------------------------------------

def _todo(findings: list[Finding], consumers: list[_judgement.Consumer]) -> list[dict]:
    items: list[dict] = []
    rejected: dict[tuple, list[Finding]] = {}
    for finding in findings:
        if finding.code == _codes.DTYPE_REJECTED:
            rejected.setdefault((finding.object.namespace, finding.object.name), []).append(finding)
    for (namespace, name), group in rejected.items():
        items.append(_rebind_item(namespace, name, group, consumers))
    items += [_binding_item(f) for f in findings if f.code == _codes.BINDING_MISSING]
    items += [_remove_flag_item(f) for f in findings if f.code in (_codes.ROLE_FLAG, _codes.POD_FLAG)]
    items += [_todo_item(INVESTIGATE, f, None, f.message) for f in findings if f.code == PREDICTED_FAILURE]
    listed = {_codes.DTYPE_REJECTED, _codes.BINDING_MISSING, _codes.ROLE_FLAG, _codes.POD_FLAG,
              PREDICTED_FAILURE}
    other_errors = [f for f in findings if f.severity == ERROR and f.code not in listed]
    items += [_todo_item(INVESTIGATE, f, None, f.message) for f in other_errors]
    warnings = [f for f in findings if f.severity == WARNING or f.code == _codes.VERSION_UNRECORDED]
    rank = {code: i for i, code in enumerate(_WARNING_ORDER)}
    warnings.sort(key=lambda f: rank.get(f.code, len(rank)))
    items += [_todo_item(LOOK, f, _look_command(f), f.message) for f in warnings]
    for number, item in enumerate(items, 1):
        item["order"] = number
    return items


def _todo_item(action: str, finding: Finding, command: Optional[str], what: str, codes: Iterable[str] = ()) -> dict:
    item = {"order": 0, "action": action, "severity": finding.severity, "object": finding.object.to_dict(),
            "command": command, "what": what, "codes": list(dict.fromkeys([finding.code, *codes]))}
    managers = list(finding.fields.get("managedBy") or [])
    for consumer in finding.fields.get("consumers") or []:  # a rebind recreates its consumers too
        where = {key: consumer.get(key) for key in ("kind", "namespace", "name")}
        managers += [{**m, "object": m.get("object") or where} for m in consumer.get("managedBy") or []]
    if managers:
        item["managedBy"] = managers
    return item


def _rebind_item(namespace: str, name: str, group: list[Finding], consumers: list[_judgement.Consumer]) -> dict:
    """One item per rejected Binding: rebind (the same or a different dtype), upgrade, or split."""
    dtype = group[0].fields.get("dtype") or ""
    pairs = [(c.engine.name, c.engine.version) for c in consumers
             if (c.namespace, c.binding) == (namespace, name) and c.engine.name and c.receives_flag]
    fix = _engines.remedy(dtype, pairs)
    engines = " and ".join(f"{f.fields.get('engine')} {f.fields.get('engineVersion')}" for f in group)
    why = f"{engines} reject{'s' if len(group) == 1 else ''} {dtype}"
    if fix.kind in (_engines.REBIND, _engines.REBIND_DIFFERENT):
        command = _judgement.rebind_command(namespace, name, fix.spelling)
        what = f"{why}: move its consumers to a Binding with dtype {fix.spelling}" + (
            ", which means the same" if fix.kind == _engines.REBIND else
            " (a different dtype: it changes the KV-cache precision)")
        action = REBIND
    elif fix.kind in (_engines.UPGRADE, _engines.NO_FIX):
        names = ", ".join(f"{c.kind} {c.name}" for c in consumers
                          if (c.namespace, c.binding) == (namespace, name) and c.receives_flag)
        command = None
        what = f"{why}: {fix.text} (spec.engine.version of {names}, and the image it runs)"
        action = UPGRADE_ENGINE
    else:
        attached = [c for c in consumers if (c.namespace, c.binding) == (namespace, name) and c.receives_flag]
        command = None
        what = f"{why}, and no dtype suits every engine consuming it: split its consumers by engine onto " \
               f"Bindings of their own ({_split_plan(dtype, attached)})"
        action = SPLIT
    item = _todo_item(action, group[0], command, what)
    item.update(dtype=dtype, fix=fix.text, dtypeFix=fix.spelling)
    return item


def _split_plan(dtype: str, attached: list[_judgement.Consumer]) -> str:
    """Per engine: its consumers, and the fix for them alone ("vLLM: ModelDeployment a: rebind with fp8")."""
    by_engine: dict[str, list[_judgement.Consumer]] = {}
    for consumer in attached:
        by_engine.setdefault(consumer.engine.name or "", []).append(consumer)
    parts = []
    for engine, group in by_engine.items():
        pairs = [(engine, c.engine.version) for c in group]
        names = ", ".join(f"{c.kind} {c.name}" for c in group)
        if all(_judgement.consumer_verdict(e, v, dtype).verdict == _engines.ACCEPTED for e, v in pairs):
            parts.append(f"{engine}: {names}: can stay")
        else:
            parts.append(f"{engine}: {names}: {_engines.remedy(dtype, pairs).text}")
    return "; ".join(parts)


def _binding_item(finding: Finding) -> dict:
    ref = finding.object
    binding = finding.fields.get("binding")
    named = f"Binding {binding!r}" if binding else "no Binding"
    what = (f"{ref} names {named}, which does not exist: create it in namespace {ref.namespace}, or point the "
            f"consumer at an existing one (for a ModelDeployment that means recreating it: kvCache is an identity "
            f"field)")
    return _todo_item(CREATE_BINDING, finding, f"kubectl get kvcachepoolbindings -n {ref.namespace}", what)


def _remove_flag_item(finding: Finding) -> dict:
    """What to delete from which field (find-flags has no --fix yet), and the command to edit it."""
    ref, fields = finding.object, finding.fields
    tokens = _deleted_tokens(fields.get("occurrences") or [])
    if finding.code == _codes.ROLE_FLAG:
        field = f"spec.roles[name={fields.get('role')}].extraArgs"
        what = f"delete {tokens} from {field}"
        command = f"kubectl edit modeldeployment {ref.name} -n {ref.namespace}"
    elif ref.kind == "Pod":
        container = fields.get("container")
        owner = fields.get("owner")
        where = f"container {container}"
        if owner:
            what = (f"delete {tokens} from {where} of the Pod template of its owner {owner['kind']} {owner['name']} "
                    "(or of the workload that owns that)")
            command = f"kubectl edit {owner['kind'].lower()} {owner['name']} -n {ref.namespace}"
        else:
            what = f"recreate the Pod without {tokens} in {where} (it has no owner)"
            command = (f"kubectl get pod {ref.name} -n {ref.namespace} -o yaml > {ref.name}.yaml  "
                       f"# delete them, then: kubectl replace --force -f {ref.name}.yaml")
    else:
        template = "spec.jobTemplate.spec.template" if ref.kind == "CronJob" else "spec.template"
        what = f"delete {tokens} from {template}.spec.containers[name={fields.get('container')}]"
        command = f"kubectl edit {ref.kind.lower()} {ref.name} -n {ref.namespace}"
    item = _todo_item(REMOVE_FLAG, finding, command, what)
    item["delete"] = fields.get("occurrences") or []
    return item


def _deleted_tokens(occurrences: list[dict]) -> str:
    """``extraArgs[1] '--kv-cache-dtype' and extraArgs[2] 'fp8_e4m3'``: each entry to delete, located."""
    entries = []
    for occurrence in occurrences:
        field, index, token = occurrence.get("field", "argv"), occurrence.get("index", 0), occurrence.get("token")
        entries.append(f"{field}[{index}] {token!r}")
        separate = "=" not in str(token) and occurrence.get("value") is not None and \
            occurrence.get("spelling") != _engines.SPACED
        if separate:
            entries.append(f"{field}[{index + 1}] {occurrence['value']!r}")
    return ", ".join(entries[:-1]) + (" and " if len(entries) > 1 else "") + entries[-1] if entries else "the flag"


# --- Objects someone else manages: the change goes to their source --------------------------------

def _send_to_sources(items: list[dict]) -> list[dict]:
    """Items about objects Helm, Argo CD, Flux, a controller or a field manager manage go to their
    source: a rebind (which deletes and recreates them) pauses each manager that would put them back
    (first of all), puts the new objects in the source, then runs with --force-managed, and the
    managers resume last; a flag to remove is removed in the source, which the manager then applies."""
    pauses: dict[str, dict] = {}
    resumes: dict[str, dict] = {}
    listed: list[dict] = []
    for item in items:
        managers = item.get("managedBy") or []
        if not managers:
            listed.append(item)
            continue
        sources = "; ".join(dict.fromkeys(m["source"] for m in managers))
        if item["action"] == REBIND and item["command"]:
            for manager in managers:
                _pause_items(manager, item, pauses, resumes)
            plan = f"{item['command']} -o yaml > rebind-{item['object']['name']}.yaml"
            listed.append({**item, "action": CHANGE_SOURCE, "command": plan,
                           "what": f"put the new Binding and ModelDeployments (the plan's -o yaml, in this file) in "
                                   f"the source in place of the old ones, without syncing it yet: {sources}"})
            listed.append({**item, "command": f"{item['command']} --apply --force-managed",
                           "what": f"{item['what']}; with --force-managed, since they are managed by {_who(managers)}"})
        elif item["action"] == REMOVE_FLAG:
            listed.append({**item, "command": _source_command(managers),
                           "what": f"in the source, not the cluster: {item['what']} ({sources}); the source, once "
                                   "applied, removes it"})
        else:
            listed.append({**item, "what": f"{item['what']} (managed by {_who(managers)}: change it at its source: "
                                           f"{sources})"})
    result = list(pauses.values()) + listed + list(resumes.values())
    for number, item in enumerate(result, 1):
        item["order"] = number
    return result


def _pause_items(manager: dict, item: dict, pauses: dict[str, dict], resumes: dict[str, dict]) -> None:
    """The pause and resume items of one manager, once however many items it manages."""
    title = title_of(manager)
    if title in pauses or not manager.get("pause"):
        return
    target = {"kind": manager.get("kind"), "namespace": manager.get("namespace"), "name": manager.get("name")}
    flux = manager["manager"] == "Flux"
    verb = "suspend" if flux else "stop the automated sync of"
    also = f" (flux suspend {str(target['kind']).lower()} {target['name']} -n {target['namespace']} does the same)" \
        if flux else ""
    pauses[title] = {"order": 0, "action": PAUSE, "severity": item["severity"], "object": target,
                     "command": manager["pause"], "codes": item["codes"], "managedBy": [manager],
                     "what": f"{verb} {title} first{also}, so that it does not put the old objects back meanwhile"}
    resume = manager.get("resume")
    again = f" (flux resume {str(target['kind']).lower()} {target['name']} -n {target['namespace']})" if flux else ""
    resumes[title] = {"order": 0, "action": RESUME, "severity": item["severity"], "object": target,
                      "command": resume, "codes": item["codes"], "managedBy": [manager],
                      "what": f"once its source holds the change, let {title} work again{again}" +
                              ("" if resume else ": put its syncPolicy.automated back as it was")}


def _who(managers: list[dict]) -> str:
    return ", ".join(dict.fromkeys(title_of(m) for m in managers))


def _source_command(managers: list[dict]) -> Optional[str]:
    """A command that shows where the source is: a Helm release's values (the others say it in words)."""
    return next((m["valuesCommand"] for m in managers if m.get("valuesCommand")), None)


def _look_command(finding: Finding) -> Optional[str]:
    ref = finding.object
    if finding.code in (_codes.DTYPE_AUTO, _codes.DTYPE_UNKNOWN):
        return f"kubectl kvdtype check -n {ref.namespace} -o wide"
    if finding.code in (_codes.ENGINE_UNKNOWN, _codes.VERSION_UNRECORDED):
        return f"kubectl get {'modeldeployment' if ref.kind == 'ModelDeployment' else 'pod'} {ref.name} " \
               f"-n {ref.namespace} -o yaml"
    return None


# --- Summary lines ---------------------------------------------------------------------------

def _setting_state(inventory: _judgement.BindingInventory, system_namespace: str, offline: bool) -> dict:
    """Whether the operator already enforces the dtype: the Setting exists and status.value is "true"."""
    name = f"{system_namespace}/{_model.SETTING_NAME}"
    requested, in_force = _model.setting_values(inventory.setting) if inventory.setting else (None, None)
    enforcing = in_force == "true"
    if inventory.setting is None and offline:
        line = f"Setting {name}: not in the manifests, so whether the dtype is enforced yet is not known."
        state = "unknown"
    elif inventory.setting is None and inventory.setting_error and "not found" not in inventory.setting_error:
        line = f"Setting {name}: unreadable ({inventory.setting_error}), so whether the dtype is enforced is not known."
        state = "unknown"
    elif inventory.setting is None:
        line = (f"Setting {name}: not yet: it does not exist, so this operator does not render the dtype; "
                "the upgrade turns it on.")
        state = "not-yet"
    elif enforcing:
        line = (f'Setting {name}: enforcing (status.value "true"): the operator already renders each Binding\'s '
                "dtype; the dry run is what every replica does once recreated.")
        state = "enforcing"
    else:
        value = f'"{in_force}"' if in_force is not None else "unset"
        line = (f"Setting {name}: not yet enforcing (status.value {value}): nothing is rendered until it is on, "
                f"and the dry run is what every replica does then.")
        state = "not-yet"
    return {"namespace": system_namespace, "name": _model.SETTING_NAME, "state": state, "enforcing": enforcing,
            "value": in_force, "requested": requested, "line": line}


_OUTCOME_WORDS = {
    _upgrade.STARTS: "start with their Binding's dtype", _upgrade.OWN_COPY: "start with their own copy of the flag",
    _upgrade.FAILS: "fail to start", _upgrade.REFUSED: "refused at admission",
    _upgrade.NO_BINDING: "name a Binding that does not exist", _upgrade.UNSURE: "unsure",
    _upgrade.NOT_JUDGED: "not judged (other engines)", _upgrade.UNCHANGED: "take-over roles unchanged",
}


def _dry_run_line(predictions: list[_upgrade.Prediction]) -> str:
    if not predictions:
        return "Dry run of the upgrade: no pool-attached role or injected Pod in scope."
    counts = _upgrade.counts(predictions)
    parts = [f"{counts[o]} {_OUTCOME_WORDS[o]}" for o in _OUTCOME_WORDS if counts.get(o)]
    return (f"Dry run of the upgrade over {len(predictions)} role(s) and injected Pod(s): {', '.join(parts)} "
            "(-o wide shows each).")


def _reason(errors: list[Finding], warnings: list[Finding], fail_on: str, unread: Sequence[str] = ()) -> str:
    codes = ", ".join(dict.fromkeys(f.code for f in errors))
    if errors:
        found = (f"{len(errors)} error finding(s) ({codes}) must be fixed first: work through the to-do list in "
                 f"order, then run preflight again.")
    elif warnings and fail_on == "warning":
        found = f"no error finding, but {len(warnings)} warning(s) and --fail-on warning."
    elif warnings:
        found = f"no error finding; {len(warnings)} warning(s) worth a look in the to-do list."
    else:
        found = "no error or warning finding."
    if not unread:
        return found
    return (f"{', '.join(unread)} could not be read (what is there may pass the flag or fail the upgrade unseen; "
            f"run preflight as a user who may read it), so the verdict is not GO; in what was read, {found}")


def _object_cell(item: dict) -> str:
    obj = item["object"]
    return f"{obj['kind']} {obj['namespace'] + '/' if obj.get('namespace') else ''}{obj['name']}"


COLUMNS = [
    Column("#", "order"),
    Column("ACTION", "action", status=True),
    Column("OBJECT", _object_cell),
    Column("COMMAND", "command"),
    Column("WHAT", "what"),
    MANAGED_BY,
    Column("CODE", lambda item: ",".join(item["codes"]), wide=True),
]

PREDICTION_COLUMNS = [
    Column("NAMESPACE", "namespace", namespace=True),
    Column("KIND", "kind"),
    Column("NAME", "name"),
    Column("ROLE/CONTAINER", lambda row: row["role"] or row["container"]),
    Column("ENGINE", lambda row: f"{row['engine'] or '?'}{' ' + row['engineVersion'] if row['engineVersion'] else ''}"),
    Column("DTYPE", "dtype"),
    Column("OUTCOME", "outcome", status=True),
    Column("AFTER THE UPGRADE", "prediction"),
]

"""``preflight``'s to-do list: each finding turned into what to do, in order, with its command.

Rebind a rejected Binding (or upgrade its engines, or split its consumers), fix a Binding
reference, remove a flag, investigate a predicted failure, then the warnings worth a look. Items
about objects someone else manages go to their source: pause the manager first, change the
source, resume it last. ``in_context`` points every command at the context judged.
"""

from __future__ import annotations

import re
import shlex
from typing import Iterable, Optional

from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._judging import bindings as _bindings
from kubectl_kvdtype._judging.managed import MANAGED_BY, title_of
from kubectl_kvdtype._kits import codes as _codes
from kubectl_kvdtype._kits.codes import PREDICTED_FAILURE
from kubectl_kvdtype._kits.report import ERROR, WARNING, Column, Finding

#: To-do actions, in the order they are listed.
REBIND, UPGRADE_ENGINE, SPLIT, CREATE_BINDING, REMOVE_FLAG, INVESTIGATE, LOOK = (
    "rebind", "upgrade-engine", "split-binding", "fix-binding-ref", "remove-flag", "investigate", "look")
#: The upgrade guard (``guard``): the operator enforces its rules itself now, so it may go.
REMOVE_GUARD = "remove-guard"
#: For objects someone else manages (``_send_to_sources``): stop its manager first, change its source,
#: and let it work again last.
PAUSE, CHANGE_SOURCE, RESUME = "pause-manager", "change-source", "resume-manager"
#: Warning codes worth a look, in the order listed; any other warning follows them.
_WARNING_ORDER = (_codes.DTYPE_AUTO, _codes.DTYPE_UNKNOWN, _codes.ENGINE_UNKNOWN, _codes.DUPLICATE_OBJECT,
                  _codes.VERSION_UNRECORDED)
#: Where a command names kubectl (or the plugin): its --context goes right after.
_KUBECTL = re.compile(r"\bkubectl(?: kvdtype)?(?= )")


def in_context(command: str, context_name: str) -> str:
    """``command`` with ``--context NAME`` after each kubectl (and ``kubectl kvdtype``) it runs;
    the name quoted for the shell, as it comes from the kubeconfig."""
    flag = f" --context {shlex.quote(context_name)}"
    return _KUBECTL.sub(lambda match: match.group() + flag, command)


def todo(findings: list[Finding], consumers: list[_bindings.Consumer]) -> list[dict]:
    """The ordered to-do list of ``findings`` (``consumers``: who uses each Binding, for a rebind's
    fix), each item numbered, those about managed objects sent to their source."""
    return _send_to_sources(_todo(findings, consumers))


def _todo(findings: list[Finding], consumers: list[_bindings.Consumer]) -> list[dict]:
    items: list[dict] = []
    rejected: dict[tuple, list[Finding]] = {}
    for finding in findings:
        if finding.code == _codes.DTYPE_REJECTED:
            rejected.setdefault((finding.object.namespace, finding.object.name), []).append(finding)
    by_binding: dict[tuple, list[_bindings.Consumer]] = {}  # one pass: a scan per Binding was N x M
    for consumer in consumers:
        by_binding.setdefault((consumer.namespace, consumer.binding), []).append(consumer)
    for (namespace, name), group in rejected.items():
        items.append(_rebind_item(namespace, name, group, by_binding.get((namespace, name), [])))
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


def guard_items(findings: list[Finding], enforced: bool, after: int) -> list[dict]:
    """The to-do's items about the upgrade guard, numbered from ``after`` + 1: a stale guard to
    update, and, once the operator enforces the same rules itself (``enforced``: the Setting on),
    the guard to remove."""
    items = [_todo_item(LOOK, f, "kubectl kvdtype guard --apply", f.message) for f in findings
             if f.code == _codes.GUARD_STALE and not enforced]
    installed = next((f for f in findings if f.code == _codes.GUARD_INSTALLED), None)
    if enforced and installed is not None:
        items.append(_todo_item(REMOVE_GUARD, installed, "kubectl kvdtype guard --remove --apply",
                                "the operator enforces the upgrade's rules itself (the Setting is on): the guard "
                                "installed before the upgrade may go"))
    for number, item in enumerate(items, after + 1):
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


def _rebind_item(namespace: str, name: str, group: list[Finding], consumers: list[_bindings.Consumer]) -> dict:
    """One item per rejected Binding: rebind (the same or a different dtype), upgrade, or split
    (``consumers``: the Binding's own)."""
    dtype = group[0].fields.get("dtype") or ""
    pairs = [(c.engine.name, c.engine.version) for c in consumers if c.engine.name and c.receives_flag]
    fix = _verdicts.remedy(dtype, pairs)
    engines = " and ".join(f"{f.fields.get('engine')} {f.fields.get('engineVersion')}" for f in group)
    why = f"{engines} reject{'s' if len(group) == 1 else ''} {dtype}"
    if fix.kind in (_records.REBIND, _records.REBIND_DIFFERENT):
        command = _bindings.rebind_command(namespace, name, fix.spelling)
        what = f"{why}: move its consumers to a Binding with dtype {fix.spelling}" + (
            ", which means the same" if fix.kind == _records.REBIND else
            " (a different dtype: it changes the KV-cache precision)")
        action = REBIND
    elif fix.kind in (_records.UPGRADE, _records.NO_FIX):
        names = ", ".join(f"{c.kind} {c.name}" for c in consumers if c.receives_flag)
        command = None
        what = f"{why}: {fix.text} (spec.engine.version of {names}, and the image it runs)"
        action = UPGRADE_ENGINE
    else:
        attached = [c for c in consumers if c.receives_flag]
        command = None
        what = f"{why}, and no dtype suits every engine consuming it: split its consumers by engine onto " \
               f"Bindings of their own ({_split_plan(dtype, attached)})"
        action = SPLIT
    item = _todo_item(action, group[0], command, what)
    item.update(dtype=dtype, fix=fix.text, dtypeFix=fix.spelling)
    return item


def _split_plan(dtype: str, attached: list[_bindings.Consumer]) -> str:
    """Per engine: its consumers, and the fix for them alone ("vLLM: ModelDeployment a: rebind with fp8")."""
    by_engine: dict[str, list[_bindings.Consumer]] = {}
    for consumer in attached:
        by_engine.setdefault(consumer.engine.name or "", []).append(consumer)
    parts = []
    for engine, group in by_engine.items():
        pairs = [(engine, c.engine.version) for c in group]
        names = ", ".join(f"{c.kind} {c.name}" for c in group)
        if all(_bindings.consumer_verdict(e, v, dtype).verdict == _records.ACCEPTED for e, v in pairs):
            parts.append(f"{engine}: {names}: can stay")
        else:
            parts.append(f"{engine}: {names}: {_verdicts.remedy(dtype, pairs).text}")
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
            occurrence.get("spelling") != _verdicts.SPACED
        if separate:
            entries.append(f"{field}[{index + 1}] {occurrence.get('given', occurrence['value'])!r}")
    return ", ".join(entries[:-1]) + (" and " if len(entries) > 1 else "") + entries[-1] if entries else "the flag"


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

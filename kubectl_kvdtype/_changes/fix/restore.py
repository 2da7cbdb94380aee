"""``escape restore`` of a ``find-flags --fix`` backup directory: each patched list put back.

Only where the object's resourceVersion is still the one the fix left (a patch sent and never
answered is judged by the object itself), and only after every step of the journal is checked to
be a patch the fix makes: of a kind it patches, of the lists it changes.
"""

from __future__ import annotations

import re
from contextlib import nullcontext
from pathlib import Path
from typing import Optional

from kubectl_kvdtype._changes import managed as _managed
from kubectl_kvdtype._changes.fix.plan import KINDS, OPERATION, at
from kubectl_kvdtype._changes.journal import JOURNAL, Journal, RestoreOptions
from kubectl_kvdtype._commands.command import Context
from kubectl_kvdtype._kits import signals as _signals
from kubectl_kvdtype._kits.codes import RESTORE_CONFLICT
from kubectl_kvdtype._kits.files import read_json
from kubectl_kvdtype._kits.report import Column, ObjectRef, Report
from kubectl_kvdtype._kits.status import ApiError, KvdtypeError
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources import names as _names
from kubectl_kvdtype._sources.kinds import DEPLOYMENT, Kind
from kubectl_kvdtype._sources.managers import pointer_field

#: ``escape restore``'s state of an object whose lists are as before the fix already.
ALREADY = "restored already"


def is_fix_backup(directory: Path) -> bool:
    try:
        data = read_json(directory / JOURNAL)
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
        kind = KINDS[step["kind"]]
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
        elif current != left and _as_before_the_fix(existing, step):
            item.update(state=ALREADY, detail="its flag is back as before the fix already (an earlier restore, or "
                                              "by hand): nothing to write")
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
        done: list[str] = []
        with nullcontext() if dry else _signals.in_progress("escape restore --apply of a fix"):
            for kind, step, item, left in ready:
                _revert(context, kind, step, item, left, report, dry, done)
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
    if isinstance(step, dict) and isinstance(step.get("kind"), str) and step["kind"] in KINDS:
        kind = KINDS[step["kind"]]
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
        values = [at(existing, a["path"]) for a in step.get("after") or []]
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


def _as_before_the_fix(existing: dict, step: dict) -> bool:
    """Whether every list the fix patched holds again what it held before the fix."""
    if step.get("uid") and _model.dig(existing, "metadata", "uid") != step["uid"]:
        return False
    return bool(step["revert"]) and [at(existing, r["path"]) for r in step["revert"]] == \
        [r["value"] for r in step["revert"]]


def _revert(context: Context, kind: Kind, step: dict, item: dict, left: str, report: Report, dry: bool,
            done: list[str]) -> None:
    """One object's lists put back; a refusal other than a conflict stops the run, saying what is
    back so far (a rerun leaves those alone: their lists are as before the fix)."""
    patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": left}] + step["revert"]
    context.env.progress(f"restore {item['object']}{' (dry run)' if dry else ''}")
    try:
        context.writable_source.json_patch(kind, step["namespace"], step["name"], patch, dry_run=dry)
    except ApiError as error:
        if error.code not in (409, 422):
            raise KvdtypeError(f"cannot restore {item['object']}: {error.message}. Restored so far: "
                               f"{'; '.join(done) or 'nothing'}; run the same command again to carry on") from None
        now = context.source.get(kind, step["namespace"], step["name"])
        _restore_conflict(report, item, step, left, str(_model.dig(now or {}, "metadata", "resourceVersion") or "gone"))
        return
    item.update(state="restored (dry run)" if dry else "restored", detail="its flag is back, as before the fix")
    done.append(item["object"])

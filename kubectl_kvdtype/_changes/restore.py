"""``escape restore DIR``: put back what a rebind's backup directory holds.

The way out of any rebind the user abandons: each saved object that no longer exists is created
again from its backup, without what the server sets; an object that exists is left alone (it may
be newer than the backup). Bindings come first, so that a restored deployment finds its Binding.
The Setting is never written here (``escape off``/``on`` do that): a saved Setting is only shown.
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from pathlib import Path

import yaml

from kubectl_kvdtype._changes import managed as _managed
from kubectl_kvdtype._changes.journal import JOURNAL, Journal, RestoreOptions
from kubectl_kvdtype._changes.rebind.checks import check_shape
from kubectl_kvdtype._changes.rebind.steps import Action, Step
from kubectl_kvdtype._changes.setting import OFF, blockers_of
from kubectl_kvdtype._commands.command import Context, confirm
from kubectl_kvdtype._judging.bindings import BindingInventory, build_check_report, consumers_of, read_setting
from kubectl_kvdtype._kits import files as _files
from kubectl_kvdtype._kits import signals as _signals
from kubectl_kvdtype._kits.codes import RESTORE_BREAKS
from kubectl_kvdtype._kits.report import Column, ObjectRef, Report
from kubectl_kvdtype._kits.status import ApiError, Conflict, Interrupted, KvdtypeError, UsageError, interrupted_status
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources import yamlread as _yamlread
from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, SETTING, Kind

_KINDS = {k.name: k for k in (BINDING, DEPLOYMENT, SETTING)}
_ORDER = {BINDING.name: 0, DEPLOYMENT.name: 1, SETTING.name: 2}
_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink",
               "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers")
#: The RestorePlan's table: one row per object in the backup directory.
RESTORE_COLUMNS = [
    Column("OBJECT", "object"),
    Column("STATE", "state", status=True),
    Column("DETAIL", "detail"),
]


def restore(context: Context, options: RestoreOptions) -> Report:
    """Plan by default; --apply creates each missing object; --dry-run=server sends them with dryRun=All."""
    source = context.source
    directory = Path(options.directory)
    # A find-flags --fix backup is reverted by patches, not re-created.
    from kubectl_kvdtype._changes.fix import restore as _fix

    journal = None
    if (directory / JOURNAL).exists():
        journal = Journal.read(directory)  # one that cannot be read is said (exit 3), never restored from half
        journal.check_cluster(source, "put it back on that cluster (--context)")
    if _fix.is_fix_backup(directory):
        return _fix.restore_fix(context, options)
    saved = read_backups(directory)
    if journal is not None:
        _check_saved(journal, saved)
    report = Report(kind="RestorePlan", columns=RESTORE_COLUMNS)
    missing = []
    for obj in saved:
        item = _item(obj)
        kind = _KINDS[obj["kind"]]
        existing = source.get(kind, _model.namespace_of(obj), _model.name_of(obj))
        if kind is SETTING:
            item.update(state="left alone", detail="restore never writes the Setting (escape off/on do)")
        elif existing is None:
            item.update(state="planned", detail="missing: created again from the backup")
            missing.append((kind, obj, item))
        elif _model.dig(existing, "metadata", "deletionTimestamp"):
            item.update(state="being deleted", detail="still terminating: run restore again once it is gone")
        else:
            item.update(state="exists", detail="left alone (it may be newer than the backup)")
        report.items.append(item)
    _judge_breaks(context, report, [obj for kind, obj, _ in missing if kind is BINDING], saved)
    managed = _managed.managed_writes(context, [_managed.write_of(k.name, o, _managed.RECREATE) for k, o, _ in missing])
    _managed.note(report, managed, options.force_managed)
    writing = options.apply or options.dry_run == "server"
    if writing and missing:
        if options.apply and options.dry_run == "none":
            _managed.refuse(context, managed, options.force_managed,
                            "the backup directory holds the objects to put back in the source")
            _last_look(context, report)
        _create_all(context, missing, dry_run=options.dry_run == "server")
    terminating = sum(1 for i in report.items if i["state"] == "being deleted")
    report.summary = {"directory": str(directory.resolve()), "missing": len(missing), "saved": len(saved),
                      "mode": "applied" if options.apply and options.dry_run == "none" else
                      (f"dry-run-{options.dry_run}" if options.dry_run != "none" else "plan")}
    report.headline = _headline(report.summary["mode"], len(missing), len(saved), terminating, directory)
    return report


def _check_saved(journal: Journal, saved: list[dict]) -> None:
    """Every saved object is one the journaled rebind saved: its old Binding, the deployments it
    moves, the Setting; a file put beside them (a planted backup) is refused before any create."""
    check_shape(journal)
    namespace, binding = journal.data["namespace"], journal.data["binding"]
    steps = [Step.from_journal(entry) for entry in journal.steps]
    moved = {s.name for s in steps if s.kind == DEPLOYMENT.name and s.action is Action.DELETE}
    for obj in saved:
        kind, where, name = obj["kind"], _model.namespace_of(obj), _model.name_of(obj)
        ours = kind == SETTING.name or (where == namespace and (
            (kind == BINDING.name and name == binding) or (kind == DEPLOYMENT.name and name in moved)))
        if not ours:
            raise KvdtypeError(f"{journal.directory}/ holds a backup of {kind} {where}/{name}, which the rebind it "
                               f"journals ({namespace}/{binding}) does not move: restore puts back only what that "
                               "rebind saved; remove the file, or restore it by hand; nothing was changed")


def read_backups(directory: Path) -> list[dict]:
    """The saved objects (every ``*.yaml`` but the journal), Bindings first."""
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory")
    found = []
    for path in sorted(directory.glob("*.yaml")):
        try:  # bounded like any input: the directory may be shared
            documents = _yamlread.load_all(_files.read_text(str(path), _files.JOURNAL))
        except (OSError, ValueError, yaml.YAMLError) as error:
            raise KvdtypeError(f"cannot read the backup {path}: {getattr(error, 'strerror', None) or error}") from None
        obj = documents[0] if len(documents) == 1 else None
        if isinstance(obj, dict) and obj.get("kind") in _KINDS and _model.name_of(obj):
            found.append(obj)
    if not found:
        hint = " (it holds a journal, but no saved object)" if (directory / JOURNAL).is_file() else ""
        raise KvdtypeError(f"{directory} holds no saved KVCachePoolBinding, ModelDeployment or Setting{hint}")
    return sorted(found, key=lambda o: (_ORDER[o["kind"]], _model.namespace_of(o), _model.name_of(o)))


def fresh_copy(obj: dict) -> dict:
    """The saved object without what the server sets (and without status, not settable on create)."""
    body = {k: copy.deepcopy(v) for k, v in obj.items() if k != "status"}
    meta = body.get("metadata") or {}
    for key in _SERVER_SET:
        meta.pop(key, None)
    return body


def _item(obj: dict) -> dict:
    namespace, name = _model.namespace_of(obj), _model.name_of(obj)
    return {"object": f"{obj['kind']} {namespace}/{name}", "kind": obj["kind"], "namespace": namespace,
            "name": name, "state": "", "detail": ""}


def _judge_breaks(context: Context, report: Report, bindings: list[dict], saved: list[dict]) -> None:
    """A restored Binding whose dtype an engine rejects, while the Setting is on: its consumers
    (saved or in the cluster) fail to start once recreated. Said, and asked on a terminal."""
    if not bindings:
        return
    setting, _ = read_setting(context.source, context.system_namespace)
    if setting is None or _model.setting_values(setting) == (OFF, OFF):
        return
    namespaces = {_model.namespace_of(b) for b in bindings}
    deployments = [d for d in saved if d["kind"] == DEPLOYMENT.name]
    for namespace in namespaces:
        try:
            deployments += context.source.list(DEPLOYMENT, namespace)
        except ApiError:
            pass
    unique = {(_model.namespace_of(d), _model.name_of(d)): d for d in deployments}
    judged = build_check_report(BindingInventory(bindings, consumers_of(unique.values(), []), [], None, None),
                                context.system_namespace, offline=True)
    for blocker in blockers_of(judged):
        namespace, _, name = blocker.partition("/")
        report.add(RESTORE_BREAKS, ObjectRef(BINDING.name, namespace, name),
                   f"the Setting is on and an engine rejects the dtype of the Binding {blocker}: once it is restored, "
                   "its consumers fail to start when recreated (kubectl kvdtype check -A says why; kubectl kvdtype "
                   "escape off first avoids it)")


def _last_look(context: Context, report: Report) -> None:
    """Ask on a terminal only when a restored Binding breaks its consumers (--yes skips it)."""
    breaks = [f for f in report.findings if f.code == RESTORE_BREAKS]

    def show() -> None:
        for finding in breaks:
            context.env.warn(finding.message)

    if breaks:  # without a terminal, --apply is the consent (``confirm``)
        confirm(context, "Restore anyway?", show=show)


def _create_all(context: Context, missing: list[tuple[Kind, dict, dict]], dry_run: bool) -> None:
    with nullcontext() if dry_run else _signals.in_progress("escape restore --apply"):
        _create_each(context, missing, dry_run)


def _create_each(context: Context, missing: list[tuple[Kind, dict, dict]], dry_run: bool) -> None:
    done: list[str] = []
    for kind, obj, item in missing:
        namespace = _model.namespace_of(obj)
        context.env.progress(f"create {item['object']}{' (dry run)' if dry_run else ''}")
        try:
            context.writable_source.create(kind, namespace, fresh_copy(obj), dry_run=dry_run)
            item["state"] = "created (dry run)" if dry_run else "created"
        except Conflict:
            item.update(state="exists", detail="created meanwhile by someone else: left alone")
        except KvdtypeError as error:
            raise KvdtypeError(_stopped_at(item, error.message, done)) from None
        except KeyboardInterrupt as signal:  # Ctrl-C, SIGTERM, SIGHUP: the create may have been carried out
            raise Interrupted(_stopped_at(item, "interrupted", done), interrupted_status(signal)) from None
        done.append(item["object"])


def _stopped_at(item: dict, why: str, done: list[str]) -> str:
    return (f"cannot create {item['object']}: {why}. Created so far: {'; '.join(done) or 'nothing'}; run the same "
            "command again to carry on (what exists is left alone)")


def _headline(mode: str, missing: int, saved: int, terminating: int, directory: Path) -> str:
    wait = f" {terminating} object(s) are still being deleted: run it again once they are gone." if terminating else ""
    if mode == "plan":
        return (f"Plan only, nothing was changed: {missing} of {saved} saved object(s) in {directory}/ are missing and "
                f"would be created again. Run again with --apply to restore them.{wait}")
    if mode.startswith("dry-run"):
        return f"Dry run, nothing was changed: {missing} of {saved} saved object(s) would be created again.{wait}"
    return (f"Restored {missing} of {saved} saved object(s) from {directory}/; the others exist and were left "
            f"alone.{wait}")

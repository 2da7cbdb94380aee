"""``find-flags --fix``: the plan's report, and with ``--apply`` the patches, after a backup.

Every patch starts with a ``test`` of ``/metadata/resourceVersion``, so the server applies it only
to the version that was read (422 otherwise), and the object is read again just before: one
changed since the plan is left alone, said as a conflict. Before the first write every object is
saved in a backup directory with a journal (``_changes.journal``), which ``escape restore DIR``
reverts (``_changes.fix.restore``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from kubectl_kvdtype._changes import managed as _managed
from kubectl_kvdtype._changes.journal import Journal, backup_name, fix_directory, identity_of
from kubectl_kvdtype._commands.command import Context, confirm
from kubectl_kvdtype._kits import signals as _signals
from kubectl_kvdtype._kits.codes import FIX_CONFLICT, FIX_MANUAL, FIX_REFUSED
from kubectl_kvdtype._kits.report import Column, Report
from kubectl_kvdtype._kits.status import ApiError, Interrupted, KvdtypeError, interrupted_status
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.managers import pointer_field

if TYPE_CHECKING:
    from kubectl_kvdtype._judging.flags import FlagInventory
from kubectl_kvdtype._changes.fix.options import FixOptions, check_options  # noqa: F401 - part of this module's face
from kubectl_kvdtype._changes.fix.plan import (
    CONFLICT,
    DRY,
    MANUAL,
    OPERATION,
    PATCHED,
    PLANNED,
    REFUSED,
    Target,
    at,
    plan,
    setting_state,
)

COLUMNS = [
    Column("NAMESPACE", "namespace", namespace=True),
    Column("KIND", "kind"),
    Column("NAME", "name"),
    Column("REMOVES", lambda item: ", ".join(item["removes"])),
    Column("STATE", "state", status=True),
    Column("DETAIL", "detail"),
]


def fix(context: Context, inventory: FlagInventory, found: Report, options: FixOptions) -> Report:
    """Plan by default; --apply writes (after asking on a terminal); --dry-run=server sends with dryRun=All."""
    writing = options.apply or options.dry_run == "server"
    on, said = setting_state(context)
    targets = plan(context, inventory, found, on, said, options.accept_dtype_change)
    report = Report(kind="FindFlagsFix", columns=COLUMNS, empty_message="Nothing to fix: no role, Pod or Pod "
                    "template passes --kv-cache-dtype itself.")
    ready = [t for t in targets if t.state == PLANNED]
    managed = _managed.managed_writes(context, [_patch_write(t) for t in ready],
                                      inventory.managers_reader(context.source, context.offline))
    directory: Optional[Path] = None
    if writing and ready and options.dry_run != "client":
        if options.dry_run == "server":
            _write(context, ready, None, dry_run=True)
        else:
            _managed.refuse(context, managed, options.force_managed, SOURCE_HINT)
            _confirm(context, ready)
            with _signals.in_progress("find-flags --fix --apply"):  # a signal ends it as Ctrl-C does: journaled
                directory = _backup(context, ready, options.backup_dir, _managed.record(managed))
                _write(context, ready, directory, dry_run=False)
    _fill(report, targets, found, directory, writing and options.dry_run != "client")
    _managed.note(report, managed, options.force_managed)
    return report
#: Where a refused fix's patched objects are, for the source (``_changes.managed.refuse``).
SOURCE_HINT = "the plan's -o yaml prints the patched objects, and -o patch the JSON patches, to apply in the source"


def _patch_write(target: Target) -> _managed.Write:
    """A planned patch, as a write on the object read: the lists it changes are its fields."""
    fields = [pointer_field(target.as_read, revert["path"]) for revert in target.revert]
    return _managed.write_of(target.kind.name, target.as_read, _managed.PATCH, fields)


def _confirm(context: Context, ready: list[Target]) -> None:

    for target in ready:
        context.env.progress(f"patch {target.ref}: remove {'; '.join(target.removes)}. {target.detail}")
    confirm(context, f"Patch {len(ready)} object(s)?")


def _backup(context: Context, ready: list[Target], backup_dir: Optional[str], managers: list[dict]) -> Path:
    directory = Path(backup_dir) if backup_dir else fix_directory()
    steps = [_step(t) for t in ready]
    Journal.create(directory, {"operation": OPERATION, "managers": managers, "cluster": identity_of(context.source)},
                   steps, [t.as_read for t in ready])
    context.env.progress(f"saved {len(ready)} object(s) in {directory}/ (kubectl kvdtype escape restore {directory} "
                         "reverts the fix)")
    return directory


def _step(target: Target) -> dict:
    return {"id": "/".join(target.key), "kind": target.kind.name, "group": target.kind.group,
            "version": target.kind.versions[0], "plural": target.kind.plural, "namespace": target.namespace,
            "name": target.name, "patch": target.patch, "revert": target.revert, "after": target.after,
            "uid": _model.dig(target.obj or {}, "metadata", "uid"), "backup": backup_name(target.obj or {})}


def _write(context: Context, ready: list[Target], directory: Optional[Path], dry_run: bool) -> None:
    journal = Journal.read(directory) if directory else None
    done: list[str] = []
    for target in ready:
        context.env.progress(f"patch {target.ref}{' (dry run)' if dry_run else ''}")
        try:
            _patch_one(context, target, journal, dry_run)
        except ApiError as error:
            if error.code in (409, 422):
                _conflicted(context, target, error)
                continue
            raise _stopped(target, error, done, directory, journal) from None
        except KvdtypeError as error:
            raise _stopped(target, error, done, directory, journal) from None
        except KeyboardInterrupt as signal:  # the PATCH may have been applied: the journal says it was sent
            raise _stopped(target, Interrupted("interrupted", interrupted_status(signal)), done, directory,
                           journal) from None
        if target.state == PLANNED:
            target.state = DRY if dry_run else PATCHED
            done.append(str(target.ref))


def _patch_one(context: Context, target: Target, journal: Optional[Journal], dry_run: bool) -> None:
    """GET the object just before; if it is still as planned (uid, generation, the lists the
    patch removes from), record the PATCH in the journal, then send it guarded by that GET's
    resourceVersion. A change stops this object only, said as a conflict."""
    current = context.source.get(target.kind, target.namespace, target.name)
    changed = _changes(target, current)
    if changed:
        target.state, target.detail = CONFLICT, f"changed since it was read ({changed}): nothing was written there; " \
                                                 "run the command again"
        return
    version = str(_model.dig(current or {}, "metadata", "resourceVersion") or "")
    step_id = "/".join(target.key)
    if journal is not None:
        journal.data.setdefault("sent", {})[step_id] = version
        journal.save()
    guard = [{"op": "test", "path": "/metadata/resourceVersion", "value": version}]
    answer = context.writable_source.json_patch(target.kind, target.namespace, target.name, guard + target.ops,
                                                dry_run=dry_run)
    if journal is not None:
        journal.mark(step_id, str(_model.dig(answer, "metadata", "resourceVersion") or ""))


def _changes(target: Target, current: Optional[dict]) -> str:
    """What changed in ``current`` since the plan read the object ("" when nothing the patch depends on)."""
    if current is None:
        return "deleted"
    before = target.as_read
    found = []
    for field_ in ("uid", "generation"):
        old, new = _model.dig(before, "metadata", field_), _model.dig(current, "metadata", field_)
        if old is not None and old != new:
            found.append(f"metadata.{field_} {old} -> {new}")
    for revert in target.revert:
        if at(current, revert["path"]) != revert["value"]:
            found.append(f"{revert['path']} is no longer as read")
    return "; ".join(found)


def _conflicted(context: Context, target: Target, error: ApiError) -> None:
    """409/422: changed since it was read (the test failed), or the server refused the patch."""
    try:
        now = context.source.get(target.kind, target.namespace, target.name)
    except KvdtypeError:
        now = None
    current = str(_model.dig(now or {}, "metadata", "resourceVersion") or "")
    target.state = CONFLICT
    if now is None or current != target.resource_version:
        target.detail = (f"changed since it was read (resourceVersion {target.resource_version} -> "
                         f"{current or 'gone'}): nothing was written there; run the command again")
    else:
        target.detail = f"the server refused the patch ({error.message}): nothing was written there"


def _stopped(target: Target, error: KvdtypeError, done: list[str], directory: Optional[Path],
             journal: Optional[Journal] = None) -> KvdtypeError:
    """One sentence: where it stopped, what is done, how to undo it; kept in the backup directory too."""
    so_far = "; ".join(done) or "nothing"
    where = (f"; the originals are in {directory}/ (kubectl kvdtype escape restore {directory} reverts what was "
             "patched, this one included if its PATCH was applied; run the same command again to carry on)"
             ) if directory else ""
    message = f"cannot patch {target.ref}: {error.message}. Patched so far: {so_far}{where}"
    if journal is not None:
        journal.note_stop(message)
    if isinstance(error, Interrupted):
        return Interrupted(message, error.status)
    return KvdtypeError(message)


def _fill(report: Report, targets: list[Target], found: Report, directory: Optional[Path], writing: bool) -> None:
    report.judged = [target.ref for target in targets]  # each object the fix would patch
    for target in targets:
        report.items.append({
            "namespace": target.namespace, "kind": target.kind.name, "name": target.name,
            "removes": target.removes, "state": target.state, "detail": target.detail, "fixes": target.fixes,
            "dtypeChanges": target.changes, "resourceVersion": target.resource_version or None,
            "patch": target.patch if target.ops else None,
        })
        code = {MANUAL: FIX_MANUAL, REFUSED: FIX_REFUSED, CONFLICT: FIX_CONFLICT}.get(target.state)
        if code:
            report.add(code, target.ref, f"{target.ref}: {target.detail}", fixes=target.fixes)
    shown = [t for t in targets if t.ops and t.state in (PLANNED, PATCHED, DRY)]
    report.manifests = [t.patched() for t in shown]
    report.patches = [{"apiVersion": t.as_read["apiVersion"], "kind": t.kind.name, "namespace": t.namespace,
                       "name": t.name, "patch": t.patch} for t in shown]
    report.warnings += found.warnings
    counts = {state: sum(1 for t in targets if t.state == state)
              for state in (PLANNED, PATCHED, DRY, REFUSED, MANUAL, CONFLICT)}
    report.summary = {"objects": len(targets), "backupDirectory": str(directory) if directory else None,
                      **{k.replace(" (dry run)", "DryRun"): v for k, v in counts.items()}}
    report.headline = _headline(counts, directory, writing)


def _headline(counts: dict, directory: Optional[Path], writing: bool) -> str:
    rest = []
    if counts[REFUSED]:
        rest.append(f"{counts[REFUSED]} refused (the dtype in use would change: --accept-dtype-change)")
    if counts[MANUAL]:
        rest.append(f"{counts[MANUAL]} manual step(s)")
    if counts[CONFLICT]:
        rest.append(f"{counts[CONFLICT]} changed meanwhile and left alone")
    tail = f"; {', '.join(rest)}." if rest else "."
    if counts[PATCHED]:
        return (f"Patched {counts[PATCHED]} object(s); each rolls its replicas{tail} Originals saved in {directory}/: "
                f"kubectl kvdtype escape restore {directory} reverts them.")
    if counts[DRY]:
        return f"Dry run, nothing was changed: the server accepted {counts[DRY]} patch(es){tail}"
    if writing:
        return f"Nothing was written{tail}"
    return (f"Plan only, nothing was changed: {counts[PLANNED]} object(s) would be patched, each rolling its "
            f"replicas{tail} Run again with --apply to write.")

"""Writes never fight the tools that manage an object (docs/reference.md, "Objects someone else manages").

``escape rebind --apply``, ``escape restore --apply`` and ``find-flags --fix --apply`` ask here,
before their first write, who manages each object they would delete, recreate or patch
(``_sources.managers``: Helm, Argo CD, Flux, a controller, another field manager). One that
others manage is refused (exit 3, nothing written), naming each object, its managers and what to
do: pause the manager, make the change at its source (the plan's ``-o yaml`` holds the new or
patched objects), then write with ``--force-managed``. That flag takes over knowingly: the write
goes on, the journal records the managers, and a warning names each manager that will put the
change back. Every plan says the same as ``managed-object`` warning findings, so a plan read
before ``--apply`` already tells.

The flag is named as kubectl names a refusal that can be overridden (``--force-conflicts``, which
takes fields other field managers own; ``drain --force``) and as this tool already does
(``--force-unknown-dtype``): ``--force-<what is refused>``.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from kubectl_kvdtype._commands.command import Context
from kubectl_kvdtype._judging.managed import changed_fields
from kubectl_kvdtype._kits.codes import MANAGED_OBJECT
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.report import ObjectRef, Report
from kubectl_kvdtype._kits.status import KvdtypeError
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.managers import AT_ONCE, NEXT_SYNC, WHEN_RESUMED, Field, Manager, ManagerReader

#: The flag that writes managed objects anyway.
FORCE_MANAGED = "--force-managed"
FORCE_MANAGED_HELP = ("write objects that Helm, Argo CD, Flux, a controller or another field manager manages "
                      "(refused without it): the journal records them and a warning names each that will put the "
                      "change back")
#: How a write changes an object, as a refusal or a warning says it.
DELETE, RECREATE, PATCH = "delete and create again", "create again", "patch"
#: A deletion that nothing creates again (a rebind's old Binding, a side-by-side original).
DELETE_ONLY = "delete"


@record_type(frozen=True)
class Write:
    """An object a write would change: its kind, as read (or as it will be created), how, and which fields."""

    kind: str
    obj: dict
    verb: str
    fields: tuple[Field, ...] = ()

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.kind, _model.namespace_of(self.obj) or None, _model.name_of(self.obj))


@record_type(frozen=True)
class Managed:
    """A write on an object that others manage, and who."""

    write: Write
    managers: tuple[Manager, ...]

    def to_dict(self) -> dict:
        """What the journal records."""
        return {"object": self.write.ref.to_dict(), "write": self.write.verb,
                "managedBy": [m.to_dict() for m in self.managers]}


def write_of(kind: str, obj: dict, verb: str, fields: Sequence[Field] = ()) -> Write:
    """A write, its fields those a judgement of the same object names (``_changes.managed.changed_fields``)
    unless given."""
    return Write(kind, obj, verb, tuple(fields) or tuple(changed_fields(kind, {})))


def managed_writes(context: Context, writes: Iterable[Write], reader: Optional[ManagerReader] = None) -> list[Managed]:
    """The writes on objects that others manage, reading their managers' own objects once each
    (``reader``: the one the run judged with, which read some already)."""
    reader = reader or ManagerReader(context.source, offline=context.offline)
    found = []
    for write in writes:
        managers = reader.managers(write.kind, write.obj, write.fields)
        if managers:
            found.append(Managed(write, tuple(managers)))
    return found


def note(report: Report, managed: list[Managed], force: bool) -> None:
    """A ``managed-object`` warning per managed object in the plan: what ``--apply`` will do."""
    for entry in managed:
        ref = entry.write.ref
        said = "; ".join(m.said() for m in entry.managers)
        if force:
            then = f"{FORCE_MANAGED} writes it anyway: {_reverting(entry)}"
        else:
            then = (f"--apply refuses to {entry.write.verb} it (exit 3, nothing written): {_what_to_do(entry)}, "
                    f"then run again with {FORCE_MANAGED}")
        report.add(MANAGED_OBJECT, ref, f"{ref} is managed by {said}; {then}.", write=entry.write.verb,
                   managedBy=[m.to_dict() for m in entry.managers])


def refuse(context: Context, managed: list[Managed], force: bool, plan_hint: str) -> None:
    """Before the first write: refuse writes on managed objects, or, with ``--force-managed``, say
    on stderr which managers will put the change back. ``plan_hint`` says where the objects to put
    in the source are (``the plan's -o yaml``)."""
    if not managed:
        return
    if force:
        for entry in managed:
            context.env.warn(f"{FORCE_MANAGED}: {entry.write.ref}: {_reverting(entry)}")
        return
    each = "; ".join(f"{entry.write.ref} ({entry.write.verb}) is managed by "
                     f"{', '.join(m.said() for m in entry.managers)}: {_what_to_do(entry)}" for entry in managed)
    raise KvdtypeError(f"refusing to write objects that others manage, and nothing was changed: {each}. "
                       f"{plan_hint[0].upper()}{plan_hint[1:]}; once the source holds the change, run again with "
                       f"{FORCE_MANAGED} to write anyway (the journal records the managers)")


def record(managed: list[Managed]) -> list[dict]:
    """The journal's ``managers``: each managed object written with --force-managed, and who manages it."""
    return [entry.to_dict() for entry in managed]


def _what_to_do(entry: Managed) -> str:
    steps = []
    for manager in entry.managers:
        pause = manager.pause()
        if pause:
            steps.append(f"pause {manager.title} ({pause})")
    sources = "; ".join(dict.fromkeys(m.source for m in entry.managers))
    return ", ".join(steps + [f"make the change at its source ({sources})"])


def _reverting(entry: Managed) -> str:
    """Which of its managers put the change back, and when."""
    said = []
    for manager in entry.managers:
        if manager.reverts == AT_ONCE:
            said.append(f"{manager.title} puts it back at once unless its source holds the change ({manager.state})")
        elif manager.reverts == NEXT_SYNC:
            said.append(f"{manager.title} puts it back at its next sync unless its source holds the change "
                        f"({manager.state})")
        elif manager.reverts == WHEN_RESUMED:
            said.append(f"{manager.title} is suspended: it puts it back when resumed unless its source holds the "
                        "change by then")
        else:
            said.append(f"whether {manager.title} puts it back is not known ({manager.state})")
    return "; ".join(said)

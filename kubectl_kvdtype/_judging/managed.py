"""Judging names who manages the objects it judges (docs/reference.md, "Objects someone else manages").

``check``, ``find-flags``, ``verify`` and ``preflight`` run this over their report: each finding
about an object that Helm, Argo CD, Flux, a controller or another field manager manages gains a
``managedBy`` field (JSON, YAML, SARIF's properties) and a clause in its message (tables, JUnit,
SARIF), and so does each item about that object (``-o wide``'s MANAGED BY column). A finding about
a Pod names the managers of its top owner, the object that must change; a finding about a Binding
also names those of its consumers (a rebind recreates them). Who manages what is
``_sources.managers``' reading; this module only says it on the report.

``managedBy`` is absent from a finding or item about an object nobody else manages: the report's
other fields are unchanged for every unmanaged cluster.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping, Optional

from kubectl_kvdtype._kits.codes import ROLE_FLAG
from kubectl_kvdtype._kits.records import replace
from kubectl_kvdtype._kits.report import Column, Finding, ObjectRef, Report
from kubectl_kvdtype._sources import managers as _managers
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, POD, Source
from kubectl_kvdtype._sources.managers import Field, Manager, ManagerReader, ObjectKey

#: Findings whose consumers (a Binding's) are named with their managers too.
_CONSUMERS = "consumers"
#: How many consumers' managers a message names (the JSON names them all).
_SHOWN = 3


class Index(Mapping[ObjectKey, dict]):
    """The objects a run read, by (kind, namespace, name): what the reader looks up before asking.
    Built on the first look-up, so a report without findings pays nothing; a key read straight from
    the metadata (a big ``verify -A`` looks up tens of thousands of objects)."""

    def __init__(self, groups: Iterable[tuple[str, Iterable[dict]]]) -> None:
        self._groups: Optional[list[tuple[str, Iterable[dict]]]] = list(groups)
        self._by_key: dict[ObjectKey, dict] = {}

    def _built(self) -> dict[ObjectKey, dict]:
        if self._groups is not None:
            for kind, objects in self._groups:
                for obj in objects:
                    metadata = obj.get("metadata") if isinstance(obj, dict) else None
                    if isinstance(metadata, dict):
                        namespace, name = metadata.get("namespace"), metadata.get("name")
                        self._by_key[(kind, namespace if isinstance(namespace, str) else "",
                                      name if isinstance(name, str) else "")] = obj
            self._groups = None
        return self._by_key

    def __getitem__(self, key: ObjectKey) -> dict:
        return self._built()[key]

    def __iter__(self) -> Iterator[ObjectKey]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())


def index(*groups: tuple[str, Iterable[dict]]) -> Index:
    """The objects a run read, by (kind, namespace, name)."""
    return Index(groups)


def reader_for(source: Source, offline: bool, *groups: tuple[str, Iterable[dict]]) -> ManagerReader:
    """The run's reader of managers, knowing the objects the run read already."""
    return ManagerReader(source, offline=offline, known=index(*groups))


def name_managers(report: Report, reader: ManagerReader, item_kind: Optional[str] = None) -> None:
    """Each finding (and item) about a managed object names its managers (see the module docstring)."""
    by_object: dict[ObjectRef, list[dict]] = {}
    reader.read_owners(_pods_named(report, reader))  # side by side, not a round trip per climb
    for position, finding in enumerate(report.findings):
        marked = mark(finding, reader)
        report.findings[position] = marked
        named = by_object.setdefault(finding.object, []) if marked.fields.get("managedBy") else []
        named += [m for m in marked.fields.get("managedBy") or [] if m not in named]
    if not by_object:
        return
    for item in report.items:
        ref = ObjectRef(item.get("kind") or item_kind or "", item.get("namespace"), item.get("name") or "")
        if by_object.get(ref):
            item["managedBy"] = by_object[ref]


def read_owners_early(report: Report, reader: ManagerReader, pods: Iterable[dict]) -> None:
    """The owners ``name_managers`` will climb to from the Pods ``report`` names (of ``pods``), read
    now, while the run's ModelDeployments may still be coming in (none is read here: the run lists
    them): on a link tens of milliseconds away, the round trip of those GETs is then no longer one
    after the LISTs. ``report``: one that names the very Pods the run's whole report will, so that
    no GET is made that the run would not make. ``reader.known`` is the run's to set again once
    everything is read."""
    reader.known = index((POD.name, pods))
    reader.read_owners(_pods_named(report, reader), listed=(DEPLOYMENT.name,))


def _pods_named(report: Report, reader: ManagerReader) -> list[dict]:
    """The Pods the report's findings are about, or name as a Binding's consumers, as the run read
    them: the objects ``mark`` will climb from."""
    refs = [finding.object for finding in report.findings]
    refs += [_consumer_ref(c) for f in report.findings for c in _consumer_list(f) if isinstance(c, dict)]
    pods = (_known(ref, reader) for ref in dict.fromkeys(refs) if ref.kind == POD.name)
    return [pod for pod in pods if pod is not None]


def _known(ref: ObjectRef, reader: ManagerReader) -> Optional[dict]:
    """The object ``ref`` names, as the run read it (None: not read)."""
    return reader.known.get((ref.kind, ref.namespace or "", ref.name))


def _consumer_ref(consumer: dict) -> ObjectRef:
    return ObjectRef(str(consumer.get("kind")), consumer.get("namespace"), str(consumer.get("name")))


def _consumer_list(finding: Finding) -> list:
    """A Binding finding's consumers (``consumers`` of dtype-rejected); none for any other."""
    consumers = finding.fields.get(_CONSUMERS)
    return consumers if finding.object.kind == BINDING.name and isinstance(consumers, list) else []


def mark(finding: Finding, reader: ManagerReader) -> Finding:
    """``finding`` with its managers named, or ``finding`` itself when its object has none."""
    ref = finding.object
    found = managers_of(ref, reader, finding.fields, finding.code)
    fields = dict(finding.fields)
    consumers, said = _consumers(finding, reader)
    if consumers is not None:
        fields[_CONSUMERS] = consumers
    if not found and not said:
        return finding
    clause = ""
    if found:
        said_of = reader.memo.get(("said", id(found)))
        if said_of is None:  # many findings share one object's managers (a deployment's replicas)
            said_of = reader.memo[("said", id(found))] = ([m.to_dict() for m in found],
                                                           " " + sentence(_whose(ref, found), found))
        fields["managedBy"], clause = list(said_of[0]), said_of[1]
    clause += "".join(" " + sentence(f"Its consumer {who} is", managers) for who, managers in said[:_SHOWN])
    return replace(finding, message=finding.message + clause, fields=fields)


def managers_of(ref: ObjectRef, reader: ManagerReader, fields: dict, code: str = "") -> list[Manager]:
    """The managers of the object a finding (of ``code``) is about: for a Pod, of its top owner."""
    obj = _known(ref, reader)
    if obj is None:
        return []
    if ref.kind != POD.name:
        return reader.managers(ref.kind, obj, changed_fields(ref.kind, fields, code))
    top = reader.top_owner(POD.name, obj)
    if top is None:
        return []
    kind, owner = top
    managed = (kind, _model.namespace_of(owner), _model.name_of(owner))
    wanted = tuple(changed_fields(kind, fields, code))
    key = ("owned", managed, wanted)
    if key not in reader.memo:  # one list per owner: its replicas' findings share it
        reader.memo[key] = [m.for_object(managed) for m in reader.managers(kind, owner, wanted)]
    return reader.memo[key]


def changed_fields(kind: str, fields: dict, code: str = "") -> list[Field]:
    """What the plugin (or the fix it advises) would change in an object of ``kind``, for its
    ``managedFields``: a Binding's dtype; a deployment's role's ``extraArgs`` for a flag it passes
    (``role-flag``), else its Binding (a rebind recreates it) and the role's ``extraArgs`` when the
    finding names a role; a Pod template container's ``args`` and ``command``."""
    if kind == BINDING.name:
        return [_managers.BINDING_DTYPE]
    if kind == DEPLOYMENT.name:
        role = fields.get("role")
        named = isinstance(role, str) and bool(role) and role != "injected"
        if code == ROLE_FLAG and named:
            return [_managers.role_args(str(role))]
        return [_managers.POOL_REF] + ([_managers.role_args(str(role))] if named else [])
    container = fields.get("container")
    return _managers.container_argv(kind, container) if isinstance(container, str) and container else []


def _consumers(finding: Finding, reader: ManagerReader) -> tuple[Optional[list], list[tuple[str, list[Manager]]]]:
    """A Binding's consumers (``consumers`` of dtype-rejected), each with its managers."""
    consumers = _consumer_list(finding)
    if not consumers:
        return None, []
    marked, said = [], []
    for consumer in consumers:
        if not isinstance(consumer, dict):
            marked.append(consumer)
            continue
        ref = _consumer_ref(consumer)
        managers = managers_of(ref, reader, {})
        if managers:
            consumer = {**consumer, "managedBy": [m.to_dict() for m in managers]}
            said.append((str(ref), managers))
        marked.append(consumer)
    return (marked if said else None), said


def _whose(ref: ObjectRef, managers: list[Manager]) -> str:
    managed = managers[0].managed
    if managed is None:
        return "It is"
    kind, namespace, name = managed
    return f"Its owner {ObjectRef(kind, namespace or None, name)} is"


def sentence(whose: str, managers: list[Manager]) -> str:
    """``It is managed by A (...); B (...): make the change at its source (...) ...``."""
    sources = "; ".join(dict.fromkeys(m.source for m in managers))
    return (f"{whose} managed by {'; '.join(m.said() for m in managers)}: change it at its source "
            f"({sources}), not only in the cluster.")


def managed_cell(item: dict) -> Optional[str]:
    """``-o wide``'s MANAGED BY: each manager in a few words, when the item has any."""
    found = item.get("managedBy")
    if not found:
        return None
    return ", ".join(_short(m) for m in found)


def _short(manager: dict) -> str:
    return f"{title_of(manager)} ({manager.get('reverts')})"


def title_of(manager: dict) -> str:
    """``Flux Kustomization flux-system/apps``: a manager of a report (its ``managedBy`` entry) named."""
    where = f"{manager.get('namespace')}/" if manager.get("namespace") else ""
    if manager.get("manager") == _managers.HELM:
        return f"Helm release {where}{manager.get('name')}"
    if manager.get("manager") == _managers.FIELDS:
        return f"field manager {manager.get('name')}"
    return f"{manager.get('manager')} {manager.get('kind')} {where}{manager.get('name')}"


#: The MANAGED BY column every judging table shows with -o wide, as its first wide column.
MANAGED_BY = Column("MANAGED BY", managed_cell, wide=True)

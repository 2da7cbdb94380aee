"""What a rebind is made of, and how each part is written in its journal.

Its flags (``RebindOptions``), the names it resolves from them once (``Names``), its steps (an
``Action`` on one object: ``Step``) and the ``Plan`` that holds them; what a step depends on as
the plan read it (``expectation``) and whether that still holds (``changes``). The journal's JSON
is made and read here only, at its edge (``Step.to_journal``, ``Step.from_journal``,
``Names.to_dict``, ``Names.from_dict``): old journals load, ``"patch"`` included.
"""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Any, Optional

from kubectl_kvdtype._changes.lease import LEASE_ANNOTATION, Lease
from kubectl_kvdtype._kits.records import asdict, field, record_type
from kubectl_kvdtype._kits.report import Report
from kubectl_kvdtype._kits.status import KvdtypeError
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, SETTING

REBIND_ANNOTATION = "kvdtype.gpustack.ai/rebound-from"
#: On the new Binding of an applied rebind: ``<host>:<absolute path>`` of its journal, so that any
#: run on any machine sees the rebind under way and resumes it, or names where it is.
JOURNAL_ANNOTATION = "kvdtype.gpustack.ai/journal"


class Strategy(Enum):
    """How the moved ModelDeployments are recreated (``--strategy``)."""

    #: Keep each name: delete, then create (a short outage).
    REPLACE = "replace"
    #: Create ``<name>-<suffix>`` first, then delete (no outage, new names).
    SIDE_BY_SIDE = "side-by-side"


class Action(Enum):
    """What a step writes. The value is its name in the journal; each has its runner in
    ``_changes.rebind.execute.RUNNERS``, the only way a step is carried out."""

    SETTING_OFF = "setting-off"
    CREATE = "create"
    DELETE = "delete"
    SETTING_ON = "setting-on"

    @property
    def word(self) -> str:
        """The step's verb in the plan's table and messages ("turn off", "create")."""
        return _ACTION_WORDS.get(self, self.value)

    @property
    def verb(self) -> str:
        """The API verb the step needs (asked with SelfSubjectAccessReview)."""
        return "patch" if self in (Action.SETTING_OFF, Action.SETTING_ON) else self.value

    @classmethod
    def from_journal(cls, name: object) -> Optional["Action"]:
        """The action a journal names (journals of versions before 0.1.1 name SETTING_OFF
        "patch"); None for a name no version wrote."""
        if name == _OLD_SETTING_OFF:
            return cls.SETTING_OFF
        return next((action for action in cls if action.value == name), None)
_ACTION_WORDS = {Action.SETTING_OFF: "turn off", Action.SETTING_ON: "turn on"}
#: What journals written before 0.1.1 call SETTING_OFF; still read, so that they resume.
_OLD_SETTING_OFF = "patch"
#: The ids of the steps a plan has at most once (a deployment's are ``create-md:<name>``, ``delete-md:<name>``).
SETTING_OFF_ID, NEW_BINDING_ID, OLD_BINDING_ID, SETTING_ON_ID = (
    "setting-off", "create-binding", "delete-binding", "setting-on")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DTYPE_SPELLING = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: Annotations that say nothing about what a copy runs: never copied, never "a change since the plan".
NOT_COPIED = (_LAST_APPLIED, LEASE_ANNOTATION, JOURNAL_ANNOTATION)


class Changed(KvdtypeError):
    """An object the plan depends on changed since the plan: the run stops before touching it."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


@record_type
class Step:
    """One write of the plan; ``body`` is the object to create, or the Setting value to write."""

    id: str
    action: Action
    kind: str
    namespace: str
    name: str
    detail: str
    body: Any = None
    #: What the plan read of the object this step deletes or copies (``name``, ``uid``,
    #: ``generation``, ``fields``): checked just before the write.
    expect: Optional[dict] = None
    #: For a create: the name of the object its body was copied from.
    origin: str = ""

    @classmethod
    def from_journal(cls, entry: dict) -> "Step":
        """A step as a journal recorded it (``check_shape`` has checked its fields and action)."""
        action = Action.from_journal(entry.get("action"))
        if action is None:
            raise KvdtypeError(f"a journal step of no action this version knows ({shown_name(entry.get('action'))})")
        return cls(**{**entry, "action": action})

    def to_journal(self) -> dict:
        """The step as the journal records it: JSON, its action by name."""
        return {**asdict(self), "action": self.action.value}

    def label(self) -> str:
        return f"{self.action.word} {self.kind} {self.namespace}/{self.name}"
#: How much of a name read from a journal a message repeats.
_NAME_SHOWN = 40


def shown_name(value: object) -> str:
    """A name a journal gives, for a message: quoted, and cut short (a planted file can hold anything)."""
    text = repr(value)
    return text if len(text) <= _NAME_SHOWN else text[:_NAME_SHOWN] + "..."


@record_type(frozen=True)
class Names:
    """What the rebind is to make, resolved once from the flags and the Binding (``resolve_names``)
    or read back from the journal, which records them as its ``options`` (``to_dict``)."""

    dtype: str
    #: The new Binding's name.
    new_name: str
    #: The new Binding's ``spec.domain.name``.
    domain_name: str
    strategy: Strategy
    #: The side-by-side copies' suffix.
    suffix: str
    keep_old_binding: bool

    def to_dict(self) -> dict:
        """The journal's ``options`` and the report's summary fields (their JSON names)."""
        return {"dtype": self.dtype, "newName": self.new_name, "domainName": self.domain_name,
                "strategy": self.strategy.value, "suffix": self.suffix, "keepOldBinding": self.keep_old_binding}

    @classmethod
    def from_dict(cls, recorded: dict) -> "Names":
        """A journal's ``options`` (``check_shape`` has checked each field's type)."""
        return cls(dtype=recorded["dtype"], new_name=recorded["newName"], domain_name=recorded["domainName"],
                   strategy=Strategy(recorded["strategy"]), suffix=recorded["suffix"],
                   keep_old_binding=bool(recorded.get("keepOldBinding")))


@record_type
class Plan:
    """Everything ``rebind`` will do, decided before the first write."""

    namespace: str
    binding: str
    names: Names
    steps: list[Step]
    originals: list[dict] = field(default_factory=list)  # saved before the first write
    manifests: list[dict] = field(default_factory=list)  # the new objects, for -o yaml
    blockers: list[str] = field(default_factory=list)  # Bindings that keep the Setting off
    force_unknown: bool = False  # --force-unknown-dtype
    lease: Optional[Lease] = None  # held while --apply writes
    report: Report = field(default_factory=lambda: Report(kind="RebindPlan"))
    #: The objects others manage that --apply --force-managed writes, and who (``_changes.managed.record``).
    managed: list[dict] = field(default_factory=list)
KINDS_BY_NAME = {k.name: k for k in (BINDING, DEPLOYMENT, SETTING)}


@record_type(frozen=True)
class RebindOptions:
    """``escape rebind``'s flags, typed: what the plan and its execution read, taken from the
    parsed command line by the subcommand (``escape``), never a namespace."""

    binding: str
    dtype: str
    new_name: Optional[str]
    domain_name: Optional[str]
    strategy: Optional[Strategy]
    suffix: Optional[str]
    keep_old_binding: bool
    force_unknown_dtype: bool
    apply: bool
    #: ``none``, ``client`` or ``server``.
    dry_run: str
    backup_dir: Optional[str]
    all_namespaces: bool
    #: --force-managed: write objects that Helm, Argo CD, Flux, a controller or a field manager manage.
    force_managed: bool = False


def is_dns_label(value: str) -> bool:
    """A DNS-1123 label: what Kubernetes accepts as these objects' names and a domain name."""
    return len(value) <= 63 and bool(_DNS_LABEL.match(value))


def suffixed(base: str, suffix: str) -> str:
    """``<base>-<suffix>``, never cut: a name shortened behind the user's back could collide, so a
    name too long is refused instead, before anything is planned (``_changes.rebind.plan``)."""
    return f"{base}-{suffix}"


def key_of(obj: dict) -> tuple[str, str]:
    return _model.namespace_of(obj), _model.name_of(obj)


def expectation(obj: dict) -> dict:
    """What a step's write depends on: the object's identity, generation and copied fields."""
    return {"name": _model.name_of(obj), "uid": _model.dig(obj, "metadata", "uid"),
            "generation": _model.dig(obj, "metadata", "generation"), "fields": _depends_on(obj)}


def _depends_on(obj: dict) -> dict:
    """The fields a copy is made of (status and what the server sets are not)."""
    annotations = {k: v for k, v in _model.annotations_of(obj).items() if k not in NOT_COPIED}
    return {"spec": obj.get("spec"), "labels": _model.labels_of(obj), "annotations": annotations}


def changes(expect: dict, current: dict) -> list[str]:
    """What differs between the plan's reading and ``current`` ([] when the plan still holds)."""
    found = []
    uid = _model.dig(current, "metadata", "uid")
    if expect.get("uid") and uid != expect["uid"]:
        return [f"it was deleted and created again (uid {expect['uid']} -> {uid})"]
    generation = _model.dig(current, "metadata", "generation")
    if expect.get("generation") is not None and generation != expect["generation"]:
        found.append(f"metadata.generation {expect['generation']} -> {generation}")
    fields = _depends_on(current)
    for name, before in (expect.get("fields") or {}).items():
        prefix = "metadata." + name if name != "spec" else "spec"
        found += _differences(before, fields.get(name), prefix)
    return list(dict.fromkeys(found))


def _differences(before: Any, after: Any, path: str, limit: int = 3) -> list[str]:
    """Up to ``limit`` paths where ``before`` and ``after`` differ, with the values when short."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        found: list[str] = []
        for key in sorted(set(before) | set(after), key=str):
            found += _differences(before.get(key), after.get(key), f"{path}.{key}", limit)
        return found[:limit]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        found = []
        for i, (old, new) in enumerate(zip(before, after, strict=True)):
            found += _differences(old, new, f"{path}[{i}]", limit)
        return found[:limit]
    old, new = json.dumps(before), json.dumps(after)
    return [f"{path} {old} -> {new}" if len(old) + len(new) < 80 else path]

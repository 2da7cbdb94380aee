"""The guard as the cluster holds it: installed or not, in which mode, written from which records,
and which kinds and versions its policies can see there.

Below the subcommands, so that ``guard`` plans with it and ``check`` and ``preflight`` say whether a
guard is installed and whether it is stale (its rules written from other records than this
plugin's) without importing ``guard``. The rules themselves are ``_judging.guard_rules``'.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

from kubectl_kvdtype._judging import guard_rules as _rules
from kubectl_kvdtype._kits.codes import GUARD_INSTALLED, GUARD_STALE
from kubectl_kvdtype._kits.records import field, record_type
from kubectl_kvdtype._kits.report import ObjectRef, Report
from kubectl_kvdtype._kits.status import KvdtypeError
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources.kinds import FIELD_MANAGER, WORKER_GROUP, Get, Kind, Source, list_many, not_readable

ADMISSION_GROUP = "admissionregistration.k8s.io"
POLICY = Kind("ValidatingAdmissionPolicy", ADMISSION_GROUP, ("v1",), "validatingadmissionpolicies", namespaced=False)
POLICY_BINDING = Kind("ValidatingAdmissionPolicyBinding", ADMISSION_GROUP, ("v1",),
                      "validatingadmissionpolicybindings", namespaced=False)
APISERVICE = Kind("APIService", "apiregistration.k8s.io", ("v1",), "apiservices", namespaced=False)
GUARD_KINDS = (POLICY, POLICY_BINDING)
#: Modes, as the bindings' validationActions say them.
WARN_MODE, DENY_MODE, MIXED_MODE, ABSENT = "warn", "deny", "mixed", "absent"
#: What each rule of the guard holds, by kind and API group (the coverage's rows).
GUARDED = (
    ("ModelDeployment", WORKER_GROUP), ("KVCachePoolBinding", WORKER_GROUP), ("Pod", ""),
    ("Deployment, StatefulSet, DaemonSet, ReplicaSet", "apps"), ("Job, CronJob", "batch"),
)


@record_type
class Installed:
    """The guard's objects as read: each of its names, the object or None."""

    objects: dict[tuple[str, str], Optional[dict]] = field(default_factory=dict)

    def of(self, kind: Kind, name: str) -> Optional[dict]:
        return self.objects.get((kind.name, name))

    @property
    def present(self) -> list[dict]:
        return [obj for obj in self.objects.values() if obj is not None]

    @property
    def mode(self) -> str:
        """``warn``, ``deny``, ``mixed`` (some bindings each way, or some missing), or ``absent``."""
        actions = [tuple(_model.as_list(_model.dig(b, "spec", "validationActions"))) if b else None
                   for b in (self.of(POLICY_BINDING, name) for name in _rules.POLICY_NAMES)]
        if all(a is None for a in actions):
            return ABSENT
        if all(a is not None and "Deny" in a for a in actions):
            return DENY_MODE
        if all(a is not None and "Deny" not in a and "Warn" in a for a in actions):
            return WARN_MODE
        return MIXED_MODE

    @property
    def records(self) -> set[str]:
        """The rules' fingerprints the present objects were stamped with."""
        return {_model.annotations_of(obj).get(_rules.RECORDS_ANNOTATION) or "" for obj in self.present}

    @property
    def version(self) -> str:
        versions = sorted({_model.annotations_of(obj).get(_rules.VERSION_ANNOTATION) or "?" for obj in self.present})
        return ", ".join(versions)

    def stale(self, current: str) -> bool:
        """Written from other rules than ``current`` (this run's fingerprint)."""
        return bool(self.present) and self.records != {current}


def guard_gets(kinds: Sequence[Kind] = GUARD_KINDS) -> list[Get]:
    """A GET of each of the guard's objects of ``kinds``, by name: the reader role may get these names only."""
    return [Get(kind, None, name) for kind in kinds for name in _rules.POLICY_NAMES]


def read_installed(source: Source, kinds: Sequence[Kind] = GUARD_KINDS) -> Installed:
    """Each of the guard's objects, by name (a GET each, side by side). A read refused (403) or a
    kind not served (404) raises, for the caller to word."""
    gets = guard_gets(kinds)
    return installed_of(gets, list_many(source, gets))


#: What check and preflight read beside their LISTs (``BindingInventory.read``, ``FlagInventory.read``)
#: to say whether a guard is installed: its policy bindings, so that saying it costs no round trip.
GUARD_NOTED = (POLICY_BINDING,)


def installed_of(gets: Sequence[Get], results: Sequence[Union[list[dict], KvdtypeError]]) -> Installed:
    """The guard's objects ``gets`` read (``list_many``'s results, in order); an error met raises."""
    installed = Installed()
    for query, result in zip(gets, results, strict=True):
        if isinstance(result, KvdtypeError):
            raise result
        installed.objects[(query.kind.name, query.name)] = result[0] if result else None
    return installed


def foreign(obj: dict) -> Optional[str]:
    """Why an object of the guard's name is not the plugin's to overwrite or remove: not made by
    it (no label), or changed since by another field manager; None when it is the plugin's."""
    if _model.labels_of(obj).get(_rules.MANAGED_LABEL) != FIELD_MANAGER:
        return "not made by kubectl-kvdtype (it lacks the label app.kubernetes.io/managed-by=kubectl-kvdtype)"
    others = sorted({str(entry.get("manager")) for entry in _model.as_list(_model.dig(obj, "metadata", "managedFields"))
                     if isinstance(entry, dict) and entry.get("manager") != FIELD_MANAGER
                     and _touches_spec(entry.get("fieldsV1"))})
    if others:
        return f"changed since by {', '.join(others)}"
    return None


def _touches_spec(fields: object) -> bool:
    return isinstance(fields, dict) and ("f:spec" in fields or "f:metadata" in fields and
                                         isinstance(fields["f:metadata"], dict) and
                                         "f:annotations" in fields["f:metadata"])


# --- Coverage --------------------------------------------------------------------------------

@record_type(frozen=True)
class Coverage:
    """One kind's group version on this cluster, and whether the guard's policies see its writes."""

    kinds: str
    group_version: str
    covered: Optional[bool]  # None: not known (the APIServices could not be read)
    why: str

    def to_dict(self) -> dict:
        return {"kinds": self.kinds, "groupVersion": self.group_version, "covered": self.covered, "why": self.why}


def coverage(source: Source) -> Union[list[Coverage], str]:
    """Which kinds and versions the guard covers here, from the APIServices (each group version the
    API server serves has one; one with a ``service`` is proxied to an aggregated server, where
    kube-apiserver's admission, policies included, does not run); the reason when they cannot be read."""
    try:
        services = source.list(APISERVICE, None)
    except KvdtypeError as error:
        if not_readable(error):
            return f"the APIServices could not be read ({error.message}): coverage not known"
        raise
    by_group: dict[str, list[dict]] = {}
    for service in services:
        group = _model.text(_model.dig(service, "spec", "group")) or ""
        by_group.setdefault(group, []).append(service)
    rows = []
    for kinds, group in GUARDED:
        served = sorted(by_group.get(group, []), key=lambda s: _model.text(_model.dig(s, "spec", "version")) or "")
        if not served:
            rows.append(Coverage(kinds, f"{group or 'core'}/*", None if group != WORKER_GROUP else False,
                                 "not served by this cluster: the rule waits until it is"
                                 if group == WORKER_GROUP else "not listed among the APIServices"))
        for service in served:
            version = _model.text(_model.dig(service, "spec", "version")) or "?"
            where = f"{group}/{version}" if group else version
            backend = _model.dig(service, "spec", "service")
            if isinstance(backend, dict):
                name = f"{_model.text(backend.get('namespace')) or '?'}/{_model.text(backend.get('name')) or '?'}"
                rows.append(Coverage(kinds, where, False,
                                     f"served by the aggregated API server behind Service {name}: kube-apiserver's "
                                     "admission does not run for it; hold it with kubectl kvdtype find-flags and "
                                     "check in CI"))
            else:
                rows.append(Coverage(kinds, where, True, "served by kube-apiserver itself"))
    return rows


# --- What check and preflight say ----------------------------------------------------------

def note_guard(report: Report, reads: Sequence[Union[list[dict], KvdtypeError]], ignore: Sequence[str] = ()) -> None:
    """When a guard is installed: a finding saying so, in which mode, and whether it is stale
    (``ignore``: codes --ignore drops), and ``summary.guard``. ``reads``: what ``guard_gets(GUARD_NOTED)``
    read beside the run's LISTs. None installed, or none this user may read, says nothing: the report
    is then the one ``-f`` gives of the same objects."""
    try:
        installed = installed_of(guard_gets(GUARD_NOTED), reads)
    except KvdtypeError as error:
        if not_readable(error):
            return  # a user who may not read it: said nowhere, as when none is installed
        raise
    mode = installed.mode
    if mode == ABSENT:
        return  # the report stays the one -f gives of the same objects
    current = _rules.fingerprint(_rules.policies())
    stale = installed.stale(current)
    report.summary["guard"] = {"mode": mode, "stale": stale, "writtenBy": installed.version}
    ref = ObjectRef(POLICY_BINDING.name, None, _rules.ROLES)
    said = {WARN_MODE: "warns (Warn, Audit)", DENY_MODE: "refuses (Deny)",
            MIXED_MODE: "is partly installed or in mixed modes"}[mode]
    if GUARD_INSTALLED not in ignore:
        report.add(GUARD_INSTALLED, ref, f"the upgrade guard (kubectl kvdtype guard) is installed and {said} writes "
                                         f"that break the upgrade's rules; written by kubectl-kvdtype "
                                         f"{installed.version}.", mode=mode)
    if stale and GUARD_STALE not in ignore:
        report.add(GUARD_STALE, ref, "the installed guard's rules were written from other engine records than this "
                                     f"plugin's (kubectl-kvdtype {installed.version} wrote them): run kubectl kvdtype "
                                     "guard --apply to update them.", mode=mode)

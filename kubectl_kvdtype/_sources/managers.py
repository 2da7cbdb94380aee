"""Who else manages an object, and what they will do with a change made in the cluster.

Most clusters apply their ModelDeployments, Bindings and workloads through Helm, Argo CD or Flux,
or an operator creates them. A change the plugin makes to such an object is put back (Argo CD's
self-heal, Flux's next reconcile, a controller), or breaks the manager's next run (a ``helm
upgrade`` on an immutable ``kvCache``). The one reader of that, read from the object itself:

- **Helm**: ``app.kubernetes.io/managed-by: Helm`` with the ``meta.helm.sh/release-name`` (and
  ``-namespace``) annotations that ``helm install`` writes (a chart rendered by another tool carries
  the label alone: that is not a release);
- **Argo CD**: the ``argocd.argoproj.io/tracking-id`` annotation (``<app>:<group>/<Kind>:<ns>/<name>``,
  the app ``<namespace>_<name>`` outside Argo CD's own namespace; one naming another object is a
  copy, which Argo CD does not track), the ``argocd.argoproj.io/instance`` label, or the
  ``app.kubernetes.io/instance`` label when an Application of that name exists (label tracking:
  many charts set that label, so it counts only with its Application);
- **Flux**: ``kustomize.toolkit.fluxcd.io/name|namespace`` (a Kustomization applies it) and
  ``helm.toolkit.fluxcd.io/name|namespace`` (a HelmRelease installs it);
- **a controller**: an ownerReference with ``controller: true``;
- **a field manager**: an entry of ``metadata.managedFields`` that owns the very field the plugin
  would change (``spec.kvCache.poolRef``, a role's ``extraArgs``, a Pod template container's
  ``args``/``command``): a server-side applier (``operation: Apply``), or a client other than
  kubectl's own commands (``kubectl``, ``kubectl-edit``...: a person's edit), a client the API
  server could not name (``unknown``: no field manager, no User-Agent) and the plugin.

Where the manager's own object can be read (only on a live cluster, only when an object names one,
and once per object), it says what the manager will do: an Application's
``spec.syncPolicy.automated`` (``selfHeal``, ``prune``), a Kustomization's or HelmRelease's
``spec.suspend``. A kind that cannot be read (not installed, 403, offline) is said, never guessed.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Collection, Iterable, Mapping, Optional, Sequence, Union

from kubectl_kvdtype._kits.records import field, record_type, replace
from kubectl_kvdtype._kits.status import ApiError, KvdtypeError, NotServed
from kubectl_kvdtype._sources import model as _model
from kubectl_kvdtype._sources import names as _names
from kubectl_kvdtype._sources.kinds import (
    APPLICATION,
    DEPLOYMENT,
    FIELD_MANAGER,
    HELMRELEASE,
    KUSTOMIZATION,
    REPLICASET,
    WORKLOADS,
    Get,
    Kind,
    Source,
    list_many,
)

HELM, ARGOCD, FLUX, CONTROLLER, FIELDS = "Helm", "Argo CD", "Flux", "controller", "field manager"
#: When a manager puts a change made in the cluster back (``Manager.reverts``).
AT_ONCE, NEXT_SYNC, WHEN_RESUMED, UNKNOWN = "at-once", "next-sync", "when-resumed", "unknown"

HELM_LABEL, HELM_VALUE = "app.kubernetes.io/managed-by", "Helm"
HELM_RELEASE, HELM_NAMESPACE = "meta.helm.sh/release-name", "meta.helm.sh/release-namespace"
ARGOCD_TRACKING = "argocd.argoproj.io/tracking-id"
ARGOCD_LABEL = "argocd.argoproj.io/instance"
INSTANCE_LABEL = _model.REPLICA_INSTANCE_LABEL
FLUX_KUSTOMIZATION = ("kustomize.toolkit.fluxcd.io/name", "kustomize.toolkit.fluxcd.io/namespace")
FLUX_HELMRELEASE = ("helm.toolkit.fluxcd.io/name", "helm.toolkit.fluxcd.io/namespace")
#: Field managers that are kubectl commands a person ran (``kubectl edit``, ``kubectl patch``...),
#: when they updated the field: a person's change, not someone who will put theirs back.
_PERSON = "kubectl"
#: The manager the API server records for a client that sent neither a field manager nor a
#: User-Agent: nobody that can be named, so nobody to send a change to (a script's one-off write).
_ANONYMOUS = "unknown"

#: One step of a field's path: a map key, or the entry of a list keyed by its name.
Step = Union[str, tuple[str, str]]


@record_type(frozen=True)
class Field:
    """A field the plugin would change, as ``managedFields`` address it, and as a person reads it."""

    steps: tuple[Step, ...]
    label: str


POOL_REF = Field(("spec", "kvCache", "poolRef"), "spec.kvCache.poolRef")
BINDING_DTYPE = Field(("spec", "domain", "dtype"), "spec.domain.dtype")


def role_args(role: str) -> Field:
    return Field(("spec", "roles", ("name", role), "extraArgs"), f"spec.roles[name={role}].extraArgs")


def container_argv(kind: str, container: str) -> list[Field]:
    """A Pod template container's ``args`` and ``command`` (a CronJob's template is its job's)."""
    base: tuple[Step, ...] = ("spec", "jobTemplate", "spec", "template") if kind == "CronJob" else ("spec", "template")
    where = ".".join(s for s in base if isinstance(s, str))
    steps = base + ("spec", "containers", ("name", container))
    return [Field(steps + (argv,), f"{where}.spec.containers[name={container}].{argv}") for argv in ("args", "command")]


def pointer_field(obj: dict, pointer: str) -> Field:
    """A JSON pointer into ``obj`` (``/spec/roles/0/extraArgs``) as a field: a list entry with a
    ``name`` is keyed by it; any other entry makes the whole list the field."""
    steps: list[Step] = []
    labels: list[str] = []
    node: Any = obj
    for part in pointer.strip("/").split("/"):
        if isinstance(node, list):
            entry = node[int(part)] if part.isdigit() and int(part) < len(node) else None
            name = _model.text(entry.get("name")) if isinstance(entry, dict) else None
            if name is None:
                break
            steps.append(("name", name))
            labels[-1] += f"[name={name}]"
            node = entry
        else:
            steps.append(part)
            labels.append(part)
            node = node.get(part) if isinstance(node, dict) else None
    return Field(tuple(steps), ".".join(labels))


def owns(fields_v1: Any, target: Field) -> bool:
    """Whether a FieldsV1 document owns ``target`` or a part of it (an atomic parent owns it whole)."""
    node = fields_v1
    for step in target.steps:
        if not isinstance(node, dict):
            return False
        child = node.get(f"f:{step}") if isinstance(step, str) else _keyed(node, step)
        if not isinstance(child, dict):
            return False
        if not child:  # a leaf: this manager owns the whole field (an atomic list or map)
            return True
        node = child
    return True


def _keyed(node: dict, step: tuple[str, str]) -> Any:
    key, value = step
    for name, child in node.items():
        if isinstance(name, str) and name.startswith("k:"):
            try:
                selector = json.loads(name[2:])
            except ValueError:
                continue
            if isinstance(selector, dict) and selector.get(key) == value:
                return child
    return None


@record_type(frozen=True)
class Manager:
    """Someone other than the plugin who manages an object, and what they do with a change."""

    tool: str  # HELM, ARGOCD, FLUX, CONTROLLER, FIELDS
    name: str
    namespace: Optional[str]
    #: Its own object's kind: Application, Kustomization, HelmRelease, the owner's kind; None for a
    #: Helm release or a field manager.
    kind: Optional[str]
    reverts: str  # AT_ONCE, NEXT_SYNC, WHEN_RESUMED, UNKNOWN
    #: What it does with a change made in the cluster, in a few words.
    state: str
    #: Where the change belongs instead.
    source: str
    #: Whether its own object was read (None: it has none to read).
    readable: Optional[bool] = None
    unreadable: Optional[str] = None
    #: False when an object only may be managed (label tracking whose Application cannot be read).
    certain: bool = True
    #: Tool-specific fields of the JSON report (tracking, syncPolicy, suspended, operation, fields).
    details: tuple[tuple[str, Any], ...] = ()
    #: The object it manages, when that is not the finding's own (a Pod's top owner, a consumer).
    managed: Optional[tuple[str, str, str]] = None

    @property
    def title(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        if self.tool == HELM:
            return f"Helm release {where}{self.name}"
        if self.tool == FIELDS:
            return f"field manager {self.name}"
        if self.tool == CONTROLLER:
            return f"its controller {self.kind} {where}{self.name}"
        return f"{'possibly ' if not self.certain else ''}{self.tool} {self.kind} {where}{self.name}"

    def said(self) -> str:
        """``Argo CD Application argocd/team-a (automated sync with self-heal: ...)``."""
        return f"{self.title} ({self.state})"

    def detail(self, key: str) -> Any:
        return dict(self.details).get(key)

    def for_object(self, ref: tuple[str, str, str]) -> "Manager":
        """The same manager, saying which object it manages (a Pod's top owner, a consumer)."""
        return replace(self, managed=ref)

    def to_dict(self) -> dict:
        entry: dict = {"manager": self.tool, "kind": self.kind, "namespace": self.namespace, "name": self.name,
                       "reverts": self.reverts, "description": self.said(), "source": self.source}
        if self.readable is not None:
            entry["readable"] = self.readable
        if self.unreadable:
            entry["unreadable"] = self.unreadable
        if not self.certain:
            entry["certain"] = False
        entry.update(self.details)
        pause, resume = self.pause(), self.resume()
        if pause:
            entry["pause"] = pause
        if resume:
            entry["resume"] = resume
        if self.managed is not None:
            kind, namespace, name = self.managed
            entry["object"] = {"kind": kind, "namespace": namespace or None, "name": name}
        return entry

    # --- Pausing and resuming it (preflight's to-do list, the refusal) --------------------------------

    def pause(self) -> Optional[str]:
        """The command that stops it putting a change back meanwhile; None when it needs none
        (Helm, a suspended Kustomization, a manual sync) or there is no exact one."""
        if not self._named():
            return None
        target = f"{self._resource()} {self.name} -n {self.namespace}"
        if self.tool == ARGOCD:
            policy = self.detail("syncPolicy")
            if policy is not None and not policy["automated"]:
                return None  # a manual sync: nothing syncs it meanwhile unless someone asks
            return f"kubectl patch {target} --type json -p {shlex.quote(_REMOVE_AUTOMATED)}"
        if self.detail("suspended") is True:
            return None  # someone suspended it already: it stays so
        return f"kubectl patch {target} --type merge -p {shlex.quote(_SUSPEND % 'true')}"

    def resume(self) -> Optional[str]:
        """The command that puts it back to work as it was read, after ``pause``; None when that
        cannot be said exactly (an Application not read: its sync policy is not known)."""
        if self.pause() is None:
            return None
        target = f"{self._resource()} {self.name} -n {self.namespace}"
        if self.tool == ARGOCD:
            policy = self.detail("syncPolicy")
            if policy is None:
                return None
            automated = {"prune": policy["prune"], "selfHeal": policy["selfHeal"]}
            patch = json.dumps({"spec": {"syncPolicy": {"automated": automated}}}, separators=(",", ":"))
            return f"kubectl patch {target} --type merge -p {shlex.quote(patch)}"
        return f"kubectl patch {target} --type merge -p {shlex.quote(_SUSPEND % 'false')}"

    def flux_command(self, verb: str) -> Optional[str]:
        """``flux suspend kustomization NAME -n NS``: the Flux CLI's words for the same patch."""
        if self.tool != FLUX or not self._named():
            return None
        return f"flux {verb} {(self.kind or '').lower()} {self.name} -n {self.namespace}"

    def _resource(self) -> str:
        kind = {"Application": APPLICATION, "Kustomization": KUSTOMIZATION, "HelmRelease": HELMRELEASE}.get(
            self.kind or "")
        return kind.resource if kind else (self.kind or "").lower()

    def _named(self) -> bool:
        """Whether its name and namespace may shape a printed command (checked as the API server would)."""
        return self.tool in (ARGOCD, FLUX) and _names.is_valid(self.name, _names.SUBDOMAIN) and \
            _names.is_valid(self.namespace, _names.LABEL)


_REMOVE_AUTOMATED = '[{"op":"remove","path":"/spec/syncPolicy/automated"}]'
_SUSPEND = '{"spec":{"suspend":%s}}'


# --- Reading ----------------------------------------------------------------------------------------

#: The owners a Pod's chain climbs (its top owner is what must change): the Pod's own workload kinds.
_CLIMBED = {k.name: k for k in (REPLICASET, DEPLOYMENT) + WORKLOADS}
_MAX_CHAIN = 4  # Pod -> ReplicaSet -> Deployment, Pod -> Job -> CronJob, and a margin
ObjectKey = tuple[str, str, str]


@record_type
class _Read:
    """One manager object read (or why not): ``missing`` when the cluster says it does not exist."""

    obj: Optional[dict] = None
    why: Optional[str] = None
    missing: bool = False
    #: The kind is not installed (its API group not served, or the resource absent from it).
    absent: bool = False
    #: The read was refused (403).
    denied: bool = False


@record_type
class ManagerReader:
    """The one reader of who manages an object, for one run: it reads the managers' own objects
    through the run's ``Source`` only when an object names one, each once.

    ``known`` holds the objects the run has read already (kind, namespace, name), so that climbing
    a Pod's owners asks the cluster only for what it does not have. Offline (``-f``) nothing more
    is read: an Application, a Kustomization or a HelmRelease is "not read offline"."""

    source: Source
    offline: bool = False
    known: Mapping[ObjectKey, dict] = field(default_factory=dict)
    #: What the reporting layer derives from the managers found, kept for the run (``_judging.managed``).
    memo: dict = field(default_factory=dict)
    _reads: dict = field(default_factory=dict)
    _applications: Optional[_Read] = None
    _cache: dict = field(default_factory=dict)

    def managers(self, kind: str, obj: dict, fields: Sequence[Field] = ()) -> list[Manager]:
        """Everyone but the plugin who manages ``obj`` (a ``kind``), ``fields`` being what the plugin
        would change in it (for ``managedFields``)."""
        key = (kind, _model.namespace_of(obj), _model.name_of(obj), tuple(fields))
        if key not in self._cache:
            self._cache[key] = self._helm(obj) + self._argocd(kind, obj) + self._flux(obj) + \
                self._controller(obj) + field_managers(obj, fields)
        return self._cache[key]

    def top_owner(self, kind: str, obj: dict) -> Optional[tuple[str, dict]]:
        """The object whose template makes ``obj`` (a Pod): its controllers climbed through the
        workload kinds (ReplicaSet -> Deployment, Job -> CronJob, StatefulSet, DaemonSet, a
        ModelDeployment); None when the first cannot be read (offline, an owner not in the dump)."""
        found: Optional[tuple[str, dict]] = None
        current, namespace = obj, _model.namespace_of(obj)
        for _ in range(_MAX_CHAIN):
            climbed = _climbed_to(current)
            if climbed is None:
                return found
            owner_kind = _CLIMBED[climbed[0]]
            owner = self._object(owner_kind, namespace, climbed[2])
            if owner is None:
                return found
            found, current = (owner_kind.name, owner), owner
        return found

    def read_owners(self, pods: Iterable[dict], listed: Collection[str] = ()) -> None:
        """The controllers ``top_owner`` will climb to from ``pods``, read now, side by side, a
        level at a time (``list_many``), where the climb asks for them one after another: on a link
        tens of milliseconds away, a round trip for all in place of one each. Nothing offline
        (the climb reads the manifests), nothing already read or known, and no object of the
        ``listed`` kinds: the run lists those whole, and their LIST may still be coming in (the
        climb stops there; a later call, once they are ``known``, goes on from it)."""
        if self.offline:
            return
        current = [pod for pod in pods if isinstance(pod, dict)]
        for _ in range(_MAX_CHAIN):
            climbed = [key for key in dict.fromkeys(map(_climbed_to, current))
                       if key is not None and key[0] not in listed]
            wanted = {key: Get(_CLIMBED[key[0]], key[1], key[2]) for key in climbed
                      if key not in self.known and key not in self._reads}
            for key, answer in zip(wanted, list_many(self.source, list(wanted.values())), strict=True):
                self._reads[key] = _answered(answer, _CLIMBED[key[0]], key[1])
            current = [obj for obj in map(self._had, climbed) if obj is not None]  # read now, or early

    def _had(self, key: ObjectKey) -> Optional[dict]:
        """The object ``key`` names as the run has it, known or read, without asking."""
        read = self._reads.get(key)
        return self.known.get(key) or (read.obj if read is not None else None)

    # --- Each manager --------------------------------------------------------------------------

    def _helm(self, obj: dict) -> list[Manager]:
        labels, annotations = _model.labels_of(obj), _model.annotations_of(obj)
        release = _model.text(annotations.get(HELM_RELEASE))
        if _model.text(labels.get(HELM_LABEL)) != HELM_VALUE or not release:
            return []
        namespace = _model.text(annotations.get(HELM_NAMESPACE)) or _model.namespace_of(obj) or None
        where = f"{namespace}/" if namespace else ""
        command = helm_values_command(release, namespace)
        return [Manager(HELM, release, namespace, None, NEXT_SYNC,
                        "its next helm upgrade puts back what its chart renders, or fails on an immutable field",
                        f"the chart's values of Helm release {where}{release}{f' ({command})' if command else ''}, "
                        "then helm upgrade", details=(("valuesCommand", command),) if command else ())]

    def _argocd(self, kind: str, obj: dict) -> list[Manager]:
        annotations, labels = _model.annotations_of(obj), _model.labels_of(obj)
        tracking = _model.text(annotations.get(ARGOCD_TRACKING))
        if tracking:
            app = _tracked_app(tracking, kind, obj)
            return [] if app is None else [self._application(app, "tracking-id annotation")]
        label = _model.text(labels.get(ARGOCD_LABEL))
        if label:
            return [self._application(_app_name(label), f"{ARGOCD_LABEL} label")]
        instance = _model.text(labels.get(INSTANCE_LABEL))
        if not instance or self.offline:
            return []  # offline, the instance label alone (which many charts set) says nothing
        app = _app_name(instance)
        read = self._read_application(*app)
        if read.obj is not None:
            return [self._application(app, f"{INSTANCE_LABEL} label (label tracking)", read)]
        if read.denied:  # whether such an Application exists cannot be known: said, as a possibility
            return [self._application(app, f"{INSTANCE_LABEL} label (label tracking, if an Application of that "
                                           "name exists)", read, certain=False)]
        return []  # no such Application, or Argo CD not installed: the label is someone else's

    def _application(self, app: tuple[Optional[str], str], tracking: str, read: Optional["_Read"] = None,
                     certain: bool = True) -> Manager:
        namespace, name = app
        details: tuple[tuple[str, Any], ...] = (("tracking", tracking),)
        read = read or self._read_application(namespace, name)
        if read.obj is not None:
            namespace = _model.namespace_of(read.obj) or namespace
            policy = _sync_policy(read.obj)
            state = _argocd_state(policy) + (f"; it tracks the object by its {tracking}" if "label" in tracking else "")
            return Manager(ARGOCD, name, namespace, APPLICATION.name, _argocd_reverts(policy), state,
                           f"the Git source of Argo CD Application {namespace}/{name} ({_argocd_source(read.obj)})",
                           readable=True, details=details + (("syncPolicy", policy),))
        why = read.why or f"there is no Application {name} on this cluster"
        if read.missing or read.absent:
            why += " (Argo CD may run on another cluster)"
        return Manager(ARGOCD, name, namespace, APPLICATION.name, UNKNOWN,
                       f"tracked by its {tracking}; the Application cannot be read: {why}, so whether it puts a change "
                       "back is not known", f"the Git source of Argo CD Application {name}", readable=False,
                       unreadable=why, certain=certain, details=details)

    def _flux(self, obj: dict) -> list[Manager]:
        found = []
        labels = _model.labels_of(obj)
        for kind, (name_label, namespace_label) in ((KUSTOMIZATION, FLUX_KUSTOMIZATION),
                                                    (HELMRELEASE, FLUX_HELMRELEASE)):
            name = _model.text(labels.get(name_label))
            if not name:
                continue
            namespace = _model.text(labels.get(namespace_label)) or _model.namespace_of(obj)
            read = self._read_object(kind, namespace, name)
            found.append(_flux_manager(kind, namespace, name, read))
        return found

    def _controller(self, obj: dict) -> list[Manager]:
        reference = _controller(obj)
        if reference is None:
            return []
        kind, name = _model.text(reference.get("kind")) or "?", _model.text(reference.get("name")) or "?"
        namespace = _model.namespace_of(obj) or None
        return [Manager(CONTROLLER, name, namespace, kind, AT_ONCE,
                        "controller: true; it reconciles what it owns and may put a change back",
                        f"its owner {kind} {namespace + '/' if namespace else ''}{name}, which makes it")]

    # --- Reads through the run's source -----------------------------------------------------------

    def _object(self, kind: Kind, namespace: str, name: str) -> Optional[dict]:
        """An owner: from what the run read, else from the cluster (None when it cannot be read)."""
        return self._had((kind.name, namespace, name)) or self._read_object(kind, namespace, name, True).obj

    def _read_object(self, kind: Kind, namespace: str, name: str, offline_reads: bool = False) -> _Read:
        if self.offline and not offline_reads:
            return _Read(why="not read offline")
        key = (kind.name, namespace, name)
        if key not in self._reads:
            self._reads[key] = _reading(lambda: self.source.get(kind, namespace, name), kind, namespace)
        return self._reads[key]

    def _read_application(self, namespace: Optional[str], name: str) -> _Read:
        if self.offline:
            return _Read(why="not read offline")
        if namespace:
            return self._read_object(APPLICATION, namespace, name)
        if self._applications is None:  # no namespace named: one LIST, however many objects ask
            self._applications = _reading(lambda: {"items": self.source.list(APPLICATION, None)}, APPLICATION, None)
        listed = self._applications
        if listed.obj is None:
            return listed
        matches = [a for a in listed.obj["items"] if _model.name_of(a) == name]
        return _Read(obj=matches[0]) if matches else _Read(missing=True)


def field_managers(obj: dict, fields: Sequence[Field]) -> list[Manager]:
    """The entries of ``managedFields`` that own one of ``fields``: an applier, or a client that
    is neither the plugin, nor a kubectl command a person ran, nor one the API server could not name."""
    found: dict[str, tuple[dict, list[str]]] = {}
    for entry in _model.as_list(_model.dig(obj, "metadata", "managedFields")):
        if not isinstance(entry, dict) or entry.get("subresource"):
            continue
        manager, operation = _model.text(entry.get("manager")) or "", _model.text(entry.get("operation")) or ""
        person = manager == _PERSON or manager.startswith(_PERSON + "-")
        if manager == FIELD_MANAGER or (operation != "Apply" and (person or manager == _ANONYMOUS)):
            continue
        owned = [f.label for f in fields if owns(entry.get("fieldsV1"), f)]
        if owned:
            found.setdefault(manager, (entry, []))[1].extend(owned)
    managers = []
    for manager, (entry, owned) in found.items():
        applies = entry.get("operation") == "Apply"
        labels = ", ".join(dict.fromkeys(owned))
        state = (f"it server-side applies {labels}: its next apply conflicts with a change made here or, forced, "
                 "puts it back" if applies else f"it last wrote {labels} and may write it again")
        details = (("operation", entry.get("operation")), ("fields", list(dict.fromkeys(owned))))
        managers.append(Manager(FIELDS, manager, None, None, NEXT_SYNC if applies else UNKNOWN, state,
                                f"what field manager {manager} applies", details=details))
    return managers


def helm_values_command(release: str, namespace: Optional[str]) -> Optional[str]:
    """``helm get values RELEASE -n NS``: where a release's values are, when its names may shape a
    command (a release name is a DNS label, as Helm checks it)."""
    if not _names.is_valid(release, _names.SUBDOMAIN) or (namespace and not _names.is_valid(namespace, _names.LABEL)):
        return None
    return f"helm get values {release}" + (f" -n {namespace}" if namespace else "")


def _reading(read: Any, kind: Kind, namespace: Optional[str]) -> _Read:
    """A read of a manager's object, its failure said in a few words, never raised: a missing CRD
    or a refused read must not fail the run."""
    try:
        obj = read()
    except KvdtypeError as error:
        return _failed(error, kind, namespace)
    return _Read(obj=obj) if obj is not None else _Read(missing=True)


def _answered(answer: Union[list[dict], KvdtypeError], kind: Kind, namespace: Optional[str]) -> _Read:
    """A ``Get``'s answer from ``list_many`` (a list of the object, none, or the error met) as ``_reading`` says it."""
    if isinstance(answer, KvdtypeError):
        return _failed(answer, kind, namespace)
    return _Read(obj=answer[0]) if answer else _Read(missing=True)


def _failed(error: KvdtypeError, kind: Kind, namespace: Optional[str]) -> _Read:
    code = error.code if isinstance(error, ApiError) else None
    if isinstance(error, NotServed) or code == 404:
        return _Read(why=f"{kind.resource} is not installed on this cluster", absent=True)
    if code == 403:
        where = f" in namespace {namespace}" if namespace else " in any namespace"
        return _Read(why=f"you may not read {kind.resource}{where} (403 Forbidden)", denied=True)
    return _Read(why=error.message)


def _climbed_to(obj: dict) -> Optional[ObjectKey]:
    """The (kind, namespace, name) of the owner ``top_owner`` climbs to from ``obj``, if it climbs."""
    reference = _controller(obj)
    owner_kind = _CLIMBED.get(_model.text((reference or {}).get("kind")) or "")
    if reference is None or owner_kind is None or not _same_group(reference, owner_kind):
        return None
    return owner_kind.name, _model.namespace_of(obj), _model.text(reference.get("name")) or ""


def _controller(obj: dict) -> Optional[dict]:
    """The ownerReference with ``controller: true`` (an owner that is not the controller manages nothing)."""
    owners = _model.as_list(_model.dig(obj, "metadata", "ownerReferences"))
    return next((o for o in owners if isinstance(o, dict) and o.get("controller") is True), None)


def _same_group(reference: dict, kind: Kind) -> bool:
    api_version = _model.text(reference.get("apiVersion")) or ""
    return api_version.rpartition("/")[0] == kind.group


def _app_name(value: str) -> tuple[Optional[str], str]:
    """An Application as a tracking label or annotation names it: ``<namespace>_<name>`` outside
    Argo CD's own namespace (which the value does not say)."""
    namespace, sep, name = value.partition("_")
    return (namespace, name) if sep and namespace and name else (None, value)


def _tracked_app(tracking: str, kind: str, obj: dict) -> Optional[tuple[Optional[str], str]]:
    """The Application a tracking id names, or None when it names another object: a copy keeps
    the annotation of its original, and Argo CD does not track it."""
    app, _, resource = tracking.partition(":")
    if not app:
        return None
    if resource:
        group_kind, _, where = resource.partition(":")
        tracked_kind = group_kind.rpartition("/")[2]
        namespace, _, name = where.rpartition("/")
        if (tracked_kind and tracked_kind != kind) or (name and name != _model.name_of(obj)) or \
                (namespace and namespace != _model.namespace_of(obj)):
            return None
    return _app_name(app)


def _sync_policy(app: dict) -> dict:
    automated = _model.dig(app, "spec", "syncPolicy", "automated")
    on = isinstance(automated, dict) and automated.get("enabled") is not False
    return {"automated": on, "selfHeal": on and automated.get("selfHeal") is True,
            "prune": on and automated.get("prune") is True}


def _argocd_reverts(policy: dict) -> str:
    return AT_ONCE if policy["selfHeal"] else NEXT_SYNC


def _argocd_state(policy: dict) -> str:
    prune = " and prune" if policy["prune"] else ""
    if policy["selfHeal"]:
        return f"automated sync with self-heal{prune}: it puts any change made here back at once"
    if policy["automated"]:
        return f"automated sync{prune} without self-heal: its next sync puts a change made here back"
    return "manual sync: the next sync puts a change made here back"


def _argocd_source(app: dict) -> str:
    sources = [s for s in _model.as_list(_model.dig(app, "spec", "sources")) if isinstance(s, dict)]
    source = _model.dig(app, "spec", "source")
    if isinstance(source, dict):
        sources.insert(0, source)
    if not sources:
        return "its spec.source"
    first = sources[0]
    parts = [_model.text(first.get("repoURL")) or "?"]
    if _model.text(first.get("chart")):
        parts.append(f"chart {_model.text(first.get('chart'))}")
    if _model.text(first.get("path")):
        parts.append(f"path {_model.text(first.get('path'))}")
    if _model.text(first.get("targetRevision")):
        parts.append(f"revision {_model.text(first.get('targetRevision'))}")
    more = f"; and {len(sources) - 1} more source(s)" if len(sources) > 1 else ""
    return ", ".join(parts) + more


def _flux_manager(kind: Kind, namespace: str, name: str, read: _Read) -> Manager:
    where = f"{namespace}/{name}"
    if read.obj is None:
        why = read.why or f"no {kind.name} {where} on this cluster"
        return Manager(FLUX, name, namespace, kind.name, UNKNOWN,
                       f"it cannot be read: {why}, so whether it puts a change back is not known",
                       f"the source of Flux {kind.name} {where}", readable=False, unreadable=why)
    suspended = _model.dig(read.obj, "spec", "suspend") is True
    details: tuple[tuple[str, Any], ...] = (("suspended", suspended),)
    source = _flux_source(kind, read.obj)
    if suspended:
        return Manager(FLUX, name, namespace, kind.name, WHEN_RESUMED,
                       "suspended: it changes nothing until resumed, then puts back what its source says",
                       f"the source of Flux {kind.name} {where} ({source})", readable=True, details=details)
    drift = _model.dig(read.obj, "spec", "driftDetection", "mode") == "enabled"
    if kind is KUSTOMIZATION or drift:
        state = "reconciling: it puts a change made here back at its next reconcile"
        reverts = AT_ONCE
    else:
        state = "reconciling: its next upgrade puts back what the chart renders"
        reverts = NEXT_SYNC
    return Manager(FLUX, name, namespace, kind.name, reverts, state,
                   f"the source of Flux {kind.name} {where} ({source})", readable=True, details=details)


def _flux_source(kind: Kind, obj: dict) -> str:
    if kind is KUSTOMIZATION:
        ref = _model.dig(obj, "spec", "sourceRef")
        path = _model.text(_model.dig(obj, "spec", "path"))
        return f"{_ref_text(ref)}{', path ' + path if path else ''}"
    chart = _model.dig(obj, "spec", "chart", "spec")
    if isinstance(chart, dict):
        return f"chart {_model.text(chart.get('chart')) or '?'} from {_ref_text(chart.get('sourceRef'))}, its values"
    return f"{_ref_text(_model.dig(obj, 'spec', 'chartRef'))}, its values"


def _ref_text(ref: Any) -> str:
    if not isinstance(ref, dict):
        return "its sourceRef"
    namespace = _model.text(ref.get("namespace"))
    return f"{_model.text(ref.get('kind')) or '?'} {namespace + '/' if namespace else ''}{_model.text(ref.get('name'))}"

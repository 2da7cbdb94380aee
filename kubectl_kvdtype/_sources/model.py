"""Defensive readers for the objects the plugin judges (docs/engines.md, "The objects the
plugin reads").

Objects come from live clusters of many ages and from hand-written manifests, so every reader here
accepts any shape: a missing ``spec``, a string where a list belongs, a null ``command``. Readers
return plain Python values and never raise on a strange object.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._kits import bounded as _bounded
from kubectl_kvdtype._kits import memo as _memo
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.report import FieldPath

INJECT_LABEL = "kvcache.gpustack.ai/inject"
BINDING_ANNOTATION = "kvcache.gpustack.ai/binding"
ENGINE_ANNOTATION = "kvcache.gpustack.ai/engine"
CONTAINER_ANNOTATION = "kvcache.gpustack.ai/container"
INJECTED_ANNOTATION = "kvcache.gpustack.ai/injected"

REPLICA_NAME_LABEL = "app.kubernetes.io/name"
REPLICA_INSTANCE_LABEL = "app.kubernetes.io/instance"
REPLICA_COMPONENT_LABEL = "app.kubernetes.io/component"
REPLICA_NAME_VALUE = "model-deployment"
ENGINE_CONTAINER = "main"

SETTING_NAME = "model-deployment-kv-cache-dtype-owned"


def dig(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, or None as soon as a level is not a mapping."""
    for key in path:
        try:
            obj = obj.get(key)  # JSON values: only a mapping has .get
        except AttributeError:
            return None
    return obj


def text(value: Any) -> Optional[str]:
    """A string field as a string; numbers kept readable; anything else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


# The readers below read their own path (``_field``) instead of the general ``dig``: a big run
# calls each tens of thousands of times per subcommand (``namespace_of`` ~70,000 in a
# 10,000-deployment preflight), where ``dig``'s argument tuple and loop were most of their cost.
# Each gives what ``dig`` gives (tests/test_model_readers.py ties them to it).

def _field(obj: Any, section: str, key: str) -> Any:
    """``dig(obj, section, key)`` for a path of two keys: ``.get`` on anything but a mapping is None."""
    try:
        return obj.get(section).get(key)  # JSON values: only a mapping has .get
    except AttributeError:
        return None


def _identity(obj: Any, key: str) -> str:
    """``metadata.<key>`` (the namespace or the name) as text, "" when it is none."""
    value = _field(obj, "metadata", key)
    return value if value.__class__ is str else text(value) or ""


def namespace_of(obj: dict) -> str:
    return _identity(obj, "namespace")


def name_of(obj: dict) -> str:
    return _identity(obj, "name")


def labels_of(obj: dict) -> dict:
    labels = _field(obj, "metadata", "labels")
    return labels if isinstance(labels, dict) else {}


def annotations_of(obj: dict) -> dict:
    annotations = _field(obj, "metadata", "annotations")
    return annotations if isinstance(annotations, dict) else {}


# --- KVCachePoolBinding --------------------------------------------------------------------

def binding_dtype(binding: dict) -> Optional[str]:
    return text(dig(binding, "spec", "domain", "dtype"))


def binding_pool(binding: dict) -> Optional[str]:
    return text(dig(binding, "spec", "poolRef", "name"))


def binding_domain(binding: dict) -> str:
    """The domain name; the operator stores an omitted one as ``default``."""
    return text(dig(binding, "spec", "domain", "name")) or "default"


# --- ModelDeployment -----------------------------------------------------------------------

def deployment_binding(deployment: dict) -> Optional[str]:
    """The Binding a deployment attaches (same namespace), or None when not pool-attached."""
    kv_cache = _field(deployment, "spec", "kvCache")
    if not isinstance(kv_cache, dict):
        return None
    return text(dig(kv_cache, "poolRef", "name")) or ""


def is_pool_attached(deployment: dict) -> bool:
    return isinstance(_field(deployment, "spec", "kvCache"), dict)


@record_type(frozen=True)
class EngineInfo:
    """An engine as a consumer declares it: ``name`` canonical (None when neither engine)."""

    name: Optional[str]
    declared: Optional[str]  # as written on the object, for messages
    version: Optional[str]


def deployment_engine(deployment: dict) -> EngineInfo:
    """``spec.engine: {name, version}``, or the oldest shape ``spec.engine: vllm`` + ``engineVersion``."""
    engine = _field(deployment, "spec", "engine")
    if isinstance(engine, dict):
        declared = text(engine.get("name"))
        version = text(engine.get("version"))
    else:
        declared = text(engine)
        version = text(_field(deployment, "spec", "engineVersion"))
    return engine_info(declared, version)


@_memo.memoized(maxsize=1024)
def engine_info(declared: Optional[str], version: Optional[str]) -> EngineInfo:
    """One (frozen, shared) EngineInfo per declaration: a cluster repeats a few engines and
    versions across thousands of consumers, each read up to three times by a preflight."""
    return EngineInfo(_records.canonical_engine(declared), declared, version)


def roles_of(deployment: dict) -> list[dict]:
    roles = _field(deployment, "spec", "roles")
    return [role for role in roles if isinstance(role, dict)] if isinstance(roles, list) else []


def role_name(role: dict) -> str:
    return text(role.get("name")) or ""


def role_is_takeover(role: dict) -> bool:
    """A non-empty ``command`` replaces the whole argv: the operator adds nothing to it."""
    command = role.get("command")
    return bool(command) and isinstance(command, (list, str))


def role_replicas(role: dict) -> int:
    replicas = role.get("replicas", 1)
    if isinstance(replicas, bool):
        return 1
    if isinstance(replicas, int):
        return max(replicas, 0)
    if isinstance(replicas, str) and replicas.isdigit():
        return int(replicas)
    return 1


def role_extra_args(role: dict) -> list[str]:
    """``extraArgs`` as a list of strings; a lone string (a hand-written mistake) is one argument."""
    extra = role.get("extraArgs")
    if isinstance(extra, str):
        return [extra]
    return [arg for arg in as_list(extra) if isinstance(arg, str)]


def managed_replicas(deployment: dict) -> int:
    """Replicas of the roles the operator builds the argv of (take-over roles are not counted)."""
    return managed_roles(deployment)[0]


def managed_roles(deployment: dict) -> tuple[int, bool]:
    """(``managed_replicas``, whether the deployment has a role at all and every one is a
    take-over, so that the operator renders no flag there), read in one pass over the roles:
    judging asks both of every deployment."""
    replicas, roles, managed = 0, 0, False
    for role in roles_of(deployment):
        roles += 1
        if not role_is_takeover(role):
            managed = True
            replicas += role_replicas(role)
    return replicas, roles > 0 and not managed


def rollout_counts(deployments: list[dict]) -> tuple[int, int]:
    """(pool-attached deployments, their managed replicas): what the upgrade or a Setting flip rolls."""
    attached = [d for d in deployments if is_pool_attached(d)]
    return len(attached), sum(managed_replicas(d) for d in attached)


# --- Pods and Pod templates ----------------------------------------------------------------

def opts_in(labels: dict) -> bool:
    return text(labels.get(INJECT_LABEL)) == "true"


def pod_binding(pod: dict) -> Optional[str]:
    return text(annotations_of(pod).get(BINDING_ANNOTATION))


def injected_record(pod: dict) -> Optional[dict]:
    """The webhook's JSON record on a Pod it injected, or None (also when unreadable)."""
    raw = annotations_of(pod).get(INJECTED_ANNOTATION)
    if not isinstance(raw, str):
        return None
    try:
        record = _bounded.loads(raw)  # a tenant's annotation: refused past the depth limit, as unreadable
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def pod_engine(pod: dict) -> EngineInfo:
    """The engine annotation; else the engine the webhook recorded. Pods declare no version."""
    declared = text(annotations_of(pod).get(ENGINE_ANNOTATION))
    if declared is None:
        declared = text((injected_record(pod) or {}).get("engine"))
    return EngineInfo(_records.canonical_engine(declared), declared, None)


def pod_spec(obj: dict) -> dict:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def containers_of(spec: dict) -> list[dict]:
    return [c for c in as_list(spec.get("containers")) if isinstance(c, dict)]


def target_container(pod_like: dict, spec: dict) -> Optional[dict]:
    """The container the webhook injects: named by annotation, else the only one."""
    containers = containers_of(spec)
    wanted = text(annotations_of(pod_like).get(CONTAINER_ANNOTATION))
    if wanted:
        return next((c for c in containers if c.get("name") == wanted), None)
    return containers[0] if len(containers) == 1 else None


def engine_container(pod: dict) -> Optional[dict]:
    """A replica's engine container: ``main``, else the first (one pass: it runs for every replica)."""
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    first = None
    for container in containers if isinstance(containers, list) else ():
        if isinstance(container, dict):
            if container.get("name") == ENGINE_CONTAINER:
                return container
            if first is None:
                first = container
    return first


def argv_of(container: dict, field: str) -> list[str]:
    return [arg for arg in as_list(container.get(field)) if isinstance(arg, str)]


def container_flags(container: dict, engine: EngineInfo) -> list[_verdicts.FlagOccurrence]:
    """The flag's occurrences in a container's argv: ``command`` then ``args``, read as one."""
    return _verdicts.find_in_fields(container_fields(container), engine.name, engine.version, container.get("env"))


def container_reading(container: dict, engine: EngineInfo) -> _verdicts.FlagReading:
    """What the engine makes of a container's argv (``command`` then ``args``, ``$(VAR)`` from ``env``)."""
    return _verdicts.read_flag(container_fields(container), engine.name, engine.version, container.get("env"))


def container_fields(container: dict) -> list[tuple[str, list[str]]]:
    return [("command", argv_of(container, "command")), ("args", argv_of(container, "args"))]


def pod_template(workload: dict) -> Optional[dict]:
    """The Pod template of a workload: ``spec.template``, or a CronJob's ``spec.jobTemplate.spec.template``."""
    template = dig(workload, "spec", "template")
    if not isinstance(template, dict):
        template = dig(workload, "spec", "jobTemplate", "spec", "template")
    return template if isinstance(template, dict) else None


def webhook_copy(pod_like: dict, occurrences: list[_verdicts.FlagOccurrence]) -> Optional[_verdicts.FlagOccurrence]:
    """The webhook's own appended flag on a Pod it injected: the last occurrence in ``args``.

    docs/engines.md, "Injected Pods": only a Pod carrying the ``injected`` annotation has one;
    every other occurrence (earlier in ``args``, or in ``command``) is the Pod's own.
    """
    if INJECTED_ANNOTATION not in annotations_of(pod_like):
        return None
    in_args = [o for o in occurrences if o.field == "args"]
    return in_args[-1] if in_args else None


def slim_pod(pod: dict) -> dict:
    """What judging a Pod reads (identity, labels, annotations, owners, container argv).

    Live Pods carry status, volumes and env worth several KB each; keeping only this while a LIST
    is paged bounds ``verify -A``'s memory on clusters with tens of thousands of replicas. A
    container's ``env`` is kept only when its argv refers to a variable (``$(VAR)``, a shell's
    ``$VAR``), the only way it can change what the engine reads.
    """
    # Plain loops, no comprehensions: this runs for every listed Pod, page by page.
    metadata = pod.get("metadata")
    slim_metadata = {}
    if isinstance(metadata, dict):
        for key in _POD_METADATA:
            if key in metadata:
                slim_metadata[key] = metadata[key]
    spec = pod_spec(pod)
    if "containers" not in spec:
        return {"metadata": slim_metadata, "spec": {}}
    containers = spec["containers"]
    if isinstance(containers, list):
        containers = [_slim_container(c) if isinstance(c, dict) else c for c in containers]
    return {"metadata": slim_metadata, "spec": {"containers": containers}}


_POD_METADATA = ("name", "namespace", "labels", "annotations", "ownerReferences")
_CONTAINER_KEPT = ("name", "command", "args")


#: One list for each argv met (``_shared_argv``), up to this many different ones.
_SHARED_ARGVS = 4096
_shared_argvs: dict[tuple, list] = {}


def _shared_argv(argv: list) -> list:
    """``argv``, or the equal list a Pod listed before it kept: a deployment's replicas run one
    argv, and a list of its own per replica was a large share of ``verify -A``'s memory. Judging
    never changes a listed argv in place (what it renders is a new list). Past ``_SHARED_ARGVS``
    different argvs, a new one is kept as it is (the table would cost more than it saves)."""
    try:
        key = tuple(argv)
        shared = _shared_argvs.get(key)
    except TypeError:  # an entry that is no string (a hand-written manifest's mapping)
        return argv
    if shared is not None:
        return shared
    if len(_shared_argvs) < _SHARED_ARGVS:
        _shared_argvs[key] = argv
    return argv


def _slim_container(container: dict) -> dict:
    slim = {}
    for key in _CONTAINER_KEPT:
        if key in container:
            value = container[key]
            slim[key] = _shared_argv(value) if type(value) is list else value
    if refers_to_env(container):
        slim["env"] = container["env"]
    return slim


def without_status(obj: dict) -> dict:
    """A Binding or a ModelDeployment as judging reads it: all but its ``status``, and of its
    ``managedFields`` only what a judgement asks of them (``JUDGED_SPEC_FIELDS``).

    What a subcommand reads of either is its metadata (identity, and what names its managers) and
    its spec; the status the operator writes back is never read, and is a large share of a listed
    object. Leaving it out as a LIST is paged bounds memory on clusters with tens of thousands of
    them. Changed in place (a projection is handed the object's own top level, see
    ``kinds.Projection``): a copy of each was a measurable share of a big LIST's reading."""
    obj.pop("status", None)
    metadata = obj.get("metadata")
    entries = metadata.get("managedFields") if isinstance(metadata, dict) else None
    if isinstance(entries, list):
        for entry in entries:
            if isinstance(entry, dict) and isinstance(entry.get("fieldsV1"), dict):
                entry["fieldsV1"] = _judged_fields(entry["fieldsV1"])
    return obj


#: The branches of ``spec`` whose fields a judgement asks who else manages (``_sources.managers``:
#: a deployment's Binding and roles, a Binding's dtype); ``without_status`` keeps only these of
#: each ``managedFields`` entry, the rest of which is a large share of a listed object.
JUDGED_SPEC_FIELDS = frozenset({"f:kvCache", "f:roles", "f:domain"})


def _judged_fields(fields_v1: dict) -> dict:
    """A FieldsV1 document with only ``spec``'s judged branches. An empty ``f:spec`` is kept (it
    owns the whole spec); one with no judged branch is dropped, since an empty one would say that."""
    spec = fields_v1.get("f:spec")
    if not isinstance(spec, dict) or not spec:
        return {"f:spec": spec} if isinstance(spec, dict) else {}
    kept = {key: value for key, value in spec.items() if key in JUDGED_SPEC_FIELDS}
    return {"f:spec": kept} if kept else {}


def judged_only(whole: bool) -> Optional[Callable[[dict], dict]]:
    """How a read lists Bindings and ModelDeployments: ``without_status`` for a judgement, as they
    come when ``whole`` (a write backs up the very objects it read)."""
    return None if whole else without_status


def refers_to_env(container: dict) -> bool:
    """Whether the container's ``env`` can change its argv: it has one, and the argv names a
    variable (``$(VAR)`` for the kubelet, ``$VAR`` for a shell)."""
    return bool(container.get("env")) and any("$" in t for f in ("command", "args") for t in argv_of(container, f))


def controller_of(obj: dict) -> Optional[dict]:
    """The controlling ownerReference (``controller: true``), else the first one."""
    owners = [o for o in as_list(dig(obj, "metadata", "ownerReferences")) if isinstance(o, dict)]
    return next((o for o in owners if o.get("controller") is True), owners[0] if owners else None)


# --- Setting -------------------------------------------------------------------------------

def setting_values(setting: dict) -> tuple[Optional[str], Optional[str]]:
    """(requested ``spec.value``, in force ``status.value``), as strings."""
    return _bool_text(dig(setting, "spec", "value")), _bool_text(dig(setting, "status", "value"))


def setting_is_on(setting: Optional[dict]) -> Optional[bool]:
    """Whether the Setting in force renders the dtype: ``status.value``, else ``spec.value``; None if unreadable."""
    if not setting:
        return None
    requested, in_force = setting_values(setting)
    value = (in_force if in_force is not None else requested or "").strip().lower()
    return {"true": True, "false": False}.get(value)


def _bool_text(value: Any) -> Optional[str]:
    if isinstance(value, bool):
        return "true" if value else "false"
    return text(value)


# --- Where a field is (``Finding.field_path``, for -o sarif's lines) ---------------------------
# The readers above skip entries of the wrong type (a role that is not a mapping, a number in
# extraArgs), and occurrences count within what they kept; these map back to the object as written.

BINDING_DTYPE_PATH: FieldPath = ("spec", "domain", "dtype")
DEPLOYMENT_BINDING_PATH: FieldPath = ("spec", "kvCache", "poolRef", "name")
POD_BINDING_PATH: FieldPath = ("metadata", "annotations", BINDING_ANNOTATION)


def index_in(values: Any, item: Any) -> Optional[int]:
    """The index of ``item`` itself (not an equal one) in the list ``values``."""
    return next((index for index, value in enumerate(as_list(values)) if value is item), None)


def role_path(deployment: dict, role: dict) -> Optional[FieldPath]:
    """``("spec", "roles", 2)``: where a role from ``roles_of`` is in its deployment."""
    index = index_in(dig(deployment, "spec", "roles"), role)
    return None if index is None else ("spec", "roles", index)


def role_named(deployment: dict, name: Optional[str]) -> Optional[dict]:
    return next((role for role in roles_of(deployment) if role_name(role) == name), None)


POD_SPEC_PATH: FieldPath = ("spec",)


def template_spec_path(workload: dict) -> FieldPath:
    """Where a workload's Pod spec is (see ``pod_template``): its template's, or a CronJob's job template's."""
    if isinstance(dig(workload, "spec", "template"), dict):
        return ("spec", "template", "spec")
    return ("spec", "jobTemplate", "spec", "template", "spec")


def container_path(spec_path: FieldPath, spec: dict, container: Optional[dict]) -> Optional[FieldPath]:
    """``("spec", "containers", 1)``: where a container of ``spec`` (found at ``spec_path``) is."""
    index = index_in(spec.get("containers"), container)
    return None if index is None else spec_path + ("containers", index)


def entry_path(owner: Optional[FieldPath], fields: dict, field: str, index: Optional[int]) -> Optional[FieldPath]:
    """Where the ``index``-th string of an argv field (``extraArgs``, ``args``...) is; the field
    itself when it is a lone string or the entry cannot be found."""
    if owner is None:
        return None
    strings = [i for i, value in enumerate(as_list(fields.get(field))) if isinstance(value, str)]
    if index is not None and 0 <= index < len(strings):
        return owner + (field, strings[index])
    return owner + (field,)


def named(path: Optional[FieldPath]) -> Optional[FieldPath]:
    """A role's or container's ``name`` field: the line that shows which one (in JSON, the entry's
    own first line is only its brace)."""
    return None if path is None else path + ("name",)


def occurrence_path(owner: Optional[FieldPath], fields: dict,
                    occurrence: Optional[_verdicts.FlagOccurrence]) -> Optional[FieldPath]:
    """The argv entry holding a flag occurrence, under the role or container at ``owner``."""
    if occurrence is None or occurrence.field not in ("extraArgs", "command", "args"):
        return owner
    return entry_path(owner, fields, occurrence.field, occurrence.index)


def engine_path(obj: dict, is_pod: bool) -> Optional[FieldPath]:
    """Where a consumer declares its engine: ``spec.engine`` (its name), or a Pod's annotation."""
    if not is_pod:
        return ("spec", "engine", "name") if isinstance(dig(obj, "spec", "engine"), dict) else ("spec", "engine")
    for annotation in (ENGINE_ANNOTATION, INJECTED_ANNOTATION):
        if annotation in annotations_of(obj):
            return ("metadata", "annotations", annotation)
    return None

"""The API's vocabulary: the resource types the fake serves, and errors answered as a Status."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

JSON = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
READ_VERBS = ("get", "list", "watch")
REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
    415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
    500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}
DEFAULT_GROUPS: dict[str, tuple[str, ...]] = {
    "worker.gpustack.ai": ("v1", "v1alpha1"),
    "gpustack.ai": ("v1",),
}


# ----------------------------------------------------------------------------- resource types
@dataclass(frozen=True)
class ResourceType:
    group: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    versions: tuple[str, ...] = ()  # built-ins; custom resources take groups_versions
    custom: bool = False
    has_status: bool = True
    categories: tuple[str, ...] = ()

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)


def _builtin(group: str, plural: str, kind: str, namespaced: bool = True,
             short: tuple[str, ...] = (), **kw: Any) -> ResourceType:
    return ResourceType(group, plural, kind.lower(), kind, namespaced, short,
                        versions=kw.pop("versions", ("v1",)), **kw)


def _custom(group: str, plural: str, kind: str, namespaced: bool, short: str,
            categories: tuple[str, ...] = ("gpustack",)) -> ResourceType:
    return ResourceType(group, plural, kind.lower(), kind, namespaced, (short,),
                        custom=True, categories=categories)


RESOURCE_TYPES: tuple[ResourceType, ...] = (
    _builtin("", "pods", "Pod", short=("po",), categories=("all",)),
    _builtin("", "namespaces", "Namespace", False, ("ns",),
             verbs=tuple(v for v in ALL_VERBS if v != "deletecollection")),
    _builtin("", "events", "Event", short=("ev",), verbs=READ_VERBS, has_status=False),
    # What a request steered off its path could read or delete (tests/test_security_edges.py).
    _builtin("", "secrets", "Secret", has_status=False),
    _builtin("apps", "deployments", "Deployment", short=("deploy",), categories=("all",)),
    _builtin("apps", "statefulsets", "StatefulSet", short=("sts",), categories=("all",)),
    _builtin("apps", "daemonsets", "DaemonSet", short=("ds",), categories=("all",)),
    _builtin("apps", "replicasets", "ReplicaSet", short=("rs",), categories=("all",)),
    _builtin("batch", "jobs", "Job", categories=("all",)),
    _builtin("batch", "cronjobs", "CronJob", short=("cj",), categories=("all",)),
    _builtin("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
             False, verbs=("create",), has_status=False),
    _custom("worker.gpustack.ai", "kvcachepoolbindings", "KVCachePoolBinding", True, "kvcpb"),
    _custom("worker.gpustack.ai", "kvcachepools", "KVCachePool", False, "kvcp"),
    _custom("worker.gpustack.ai", "modeldeployments", "ModelDeployment", True, "md"),
    _custom("worker.gpustack.ai", "instancetypes", "InstanceType", False, "instype"),
    _custom("gpustack.ai", "settings", "Setting", True, "set"),
    # The GitOps tools' own objects (tests/test_managed.py): served only when groups_versions names
    # their groups (GITOPS_GROUPS), as on a cluster where Argo CD and Flux are installed.
    _custom("argoproj.io", "applications", "Application", True, "app", ()),
    _custom("kustomize.toolkit.fluxcd.io", "kustomizations", "Kustomization", True, "ks", ()),
    _custom("helm.toolkit.fluxcd.io", "helmreleases", "HelmRelease", True, "hr", ()),
)

#: ``FakeKube(groups_versions=GITOPS_GROUPS)``: Argo CD's and Flux's CRDs installed too.
GITOPS_GROUPS: dict[str, tuple[str, ...]] = {
    "argoproj.io": ("v1alpha1",),
    "kustomize.toolkit.fluxcd.io": ("v1",),
    "helm.toolkit.fluxcd.io": ("v2",),
}


BUILTIN_GROUPS: dict[str, tuple[str, ...]] = {
    "": ("v1",), "apps": ("v1",), "batch": ("v1",), "authorization.k8s.io": ("v1",),
}


POD_FIELDS = {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
              "spec.serviceAccountName", "status.phase", "status.podIP",
              "status.nominatedNodeName"}


def find_type(name: str, group: Optional[str] = None) -> ResourceType:
    """Resolve a kind, plural, singular, short name or ``plural.group`` to a ResourceType."""
    want, _, grp = name.partition(".")
    grp = grp or group
    for rt in RESOURCE_TYPES:
        if grp is not None and rt.group != grp:
            continue
        if want in (rt.kind, rt.plural, rt.singular) or want.lower() in rt.short_names \
                or want.lower() == rt.kind.lower():
            return rt
    raise KeyError(f"unknown resource {name!r}")


# ----------------------------------------------------------------------------- errors
class ApiError(Exception):
    """An error answered as a Kubernetes Status."""

    def __init__(self, code: int, message: str, reason: Optional[str] = None,
                 details: Optional[JSON] = None, metadata: Optional[JSON] = None,
                 headers: Optional[dict[str, str]] = None) -> None:
        super().__init__(message)
        self.code, self.message = code, message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details or {}
        self.metadata = metadata or {}
        self.headers = headers or {}
        #: The body sent as it is instead of ``body()`` (``fake.fail(body=...)``).
        self.raw: Optional[bytes] = None

    def body(self) -> JSON:
        return {"kind": "Status", "apiVersion": "v1", "metadata": self.metadata,
                "status": "Failure", "message": self.message, "reason": self.reason,
                "details": self.details, "code": self.code}


def _details(rt: ResourceType, name: str = "") -> JSON:
    d = {"group": rt.group, "kind": rt.plural}
    if name:
        d = {"name": name, **d}
    return d


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, f'{rt.group_resource} "{name}" not found', details=_details(rt, name))


def conflict(rt: ResourceType, name: str) -> ApiError:
    return ApiError(409, f'Operation cannot be fulfilled on {rt.group_resource} "{name}": the '
                    "object has been modified; please apply your changes to the latest version "
                    "and try again", details=_details(rt, name))


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)

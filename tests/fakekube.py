"""A fake Kubernetes API server for tests (standard library only).

Speaks enough of the real REST protocol (legacy JSON discovery, LIST with selectors and
paging, GET/POST/PUT/PATCH/DELETE, status subresource, Status errors) for the real ``kubectl``
binary and the official ``kubernetes`` Python client.  Loopback only.

Public API::

    fake = FakeKube(groups_versions=None, token="fake-token", username="fake-user", tls=True)
    with fake:                                  # or fake.start() ... fake.stop()
        fake.url                                # "https://127.0.0.1:<port>"; fake.ca_pem
        fake.add(obj) -> dict                   # store a dict (upsert); fills uid/RV/...
        fake.add_many(objs) -> None             # bulk add, nothing copied back
        fake.get(kind_or_resource, namespace, name) -> dict | None   (a deep copy)
        fake.objects(kind_or_resource, namespace=None) -> list[dict] (deep copies, sorted)
        fake.update(kind_or_resource, namespace, name, merge_patch) -> dict  (status too)
        fake.remove(kind_or_resource, namespace, name) -> bool
        fake.deny(verb, resource, namespace=None, group=None)   # 403 + SSAR allowed=false
        fake.fail(status, method=None, path=None, times=1, retry_after=None, delay=0.0,
                  message=None, reason=None)    # path: regex searched in the URL path
        fake.delay(seconds, method=None, path=None, times=1)   # times=None: every match
        fake.clear_faults()                     # drop fail/delay/deny rules
        fake.expire_continue(times=1)           # next N continue-requests answer 410 Expired
        fake.admission(fn)                      # fn(op, new, old) -> None | denial text (403)
        fake.setting_lag = 0.0                  # seconds until Setting status.value follows spec
        fake.finalizer(kind_or_resource, name="gpustack.ai/cleanup", after=0.3, held_by=None)
                                                # an operator's finalizer: see "Finalizers" below
        fake.requests / fake.clear_log()        # RequestRecord list, arrival order
                                                # (.header_values(name), .sni, .client_cert)
        fake.passwords = {"alice": "pw"}        # basic-auth users accepted besides the token
        fake.write_kubeconfig(path, context="fake", namespace=None, token=None,
                              user="fake-user", exec_command=None) -> path

Behaviour worth knowing:
- HTTPS by default with a built-in test CA (the kubeconfig carries it): kubectl never sends a
  token or runs an exec plugin for an ``http://`` server.  ``tls=False`` serves plain HTTP
  (fine for the Python client, but kubectl then sends no credentials: use ``token=None``).
- ``groups_versions`` overrides the default ``{"worker.gpustack.ai": ("v1", "v1alpha1"),
  "gpustack.ai": ("v1",)}`` per group (first version preferred); map a group to ``None`` to
  leave it unserved (CRDs missing: absent from discovery, its paths 404).
- ``/version`` and ``/healthz|livez|readyz`` are open (like the default public-info RBAC);
  everything else needs ``Authorization: Bearer <token>`` (unless ``token=None``), a user of
  ``passwords`` in basic auth, or a client certificate signed by ``TEST_CLIENT_CA_PEM`` (the
  server asks for one in every handshake; ``TEST_CLIENT_CERT_PEM``/``TEST_CLIENT_KEY_PEM`` is one).
- Like a real server, items of built-in LISTs carry no ``kind``/``apiVersion``; custom-resource
  items do.  A no-op write keeps the resourceVersion.  Writes to the main resource keep
  ``.status``; ``/status`` writes only status.  A lagging Setting's status bumps its RV when it
  catches up.  A namespace-limited ``deny`` also denies the all-namespaces request.
- Finalizers (like a real server): DELETE of an object whose ``metadata.finalizers`` is not
  empty only sets ``deletionTimestamp`` (the object stays, terminating, and is returned); it is
  removed once an update empties its finalizers.  A create of a terminating name answers 409
  AlreadyExists ("object is being deleted").  ``fake.finalizer(...)`` plays an operator: it adds
  its finalizer to every existing and created object of that kind, and removes it ``after``
  seconds past the deletion request, and not while ``held_by(fake, obj)`` is true (e.g. a
  Binding still named by a ModelDeployment).  ``status`` is dropped on create, as ever.
- Not served: watch (405), OpenAPI (404: ``kubectl create/apply`` need ``--validate=false``),
  server-side apply (415), Table output (kubectl falls back to NAME/AGE columns).
"""
from __future__ import annotations

import base64
import bisect
import copy
import datetime
import json
import math
import re
import os
import socket
import ssl
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Optional
from urllib.parse import parse_qsl, urlsplit

JSON = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
READ_VERBS = ("get", "list", "watch")
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"
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
EXPIRED_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)

# Test-only TLS material (EC P-256, valid 2025-2125): a CA and a leaf for IP 127.0.0.1 /
# localhost.  kubectl sends credentials (token, exec plugin) only over https, so the fake
# serves TLS by default; kubeconfigs carry the CA as certificate-authority-data.
TEST_CA_PEM = """\
-----BEGIN CERTIFICATE-----
MIIBajCCARCgAwIBAgICEAAwCgYIKoZIzj0EAwIwGzEZMBcGA1UEAwwQZmFrZWt1
YmUtdGVzdC1jYTAgFw0yNTAxMDEwMDAwMDBaGA8yMTI1MDEwMTAwMDAwMFowGzEZ
MBcGA1UEAwwQZmFrZWt1YmUtdGVzdC1jYTBZMBMGByqGSM49AgEGCCqGSM49AwEH
A0IABNmF3xP2Qikb0FpAQfV8rdI3GA0GZNfC3BMmF6rwO20o7NHLi2k71bIF1YNk
G50nLFN/ptyUV3RhcPxJPj6ZTfWjQjBAMA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0P
AQH/BAQDAgEGMB0GA1UdDgQWBBQ7YBZDnXaKtU0jC6P1T7FXNI0sBDAKBggqhkjO
PQQDAgNIADBFAiA5FeRGcpObJmQmdDD79xBK9Dg7bqzNJ0Grrddk+1UR/gIhAJCR
QoMlFMLQ1Qo8jreZsqUl95WdoVmEiL5xs9/LkcrL
-----END CERTIFICATE-----
"""
TEST_CERT_PEM = """\
-----BEGIN CERTIFICATE-----
MIIBszCCAVmgAwIBAgICEAEwCgYIKoZIzj0EAwIwGzEZMBcGA1UEAwwQZmFrZWt1
YmUtdGVzdC1jYTAgFw0yNTAxMDEwMDAwMDBaGA8yMTI1MDEwMTAwMDAwMFowEzER
MA8GA1UEAwwIZmFrZWt1YmUwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATOM0Zj
BSx1MDv2dS9loBrUTuNsT5oSp918tlDfnuOClmuPIbgFqpZRgZjBl9YT2t1D0PWr
g4wsNz+JedrSe5bno4GSMIGPMAwGA1UdEwEB/wQCMAAwDgYDVR0PAQH/BAQDAgWg
MBMGA1UdJQQMMAoGCCsGAQUFBwMBMB0GA1UdDgQWBBSedjzX7L8WbwrriaJubSOi
ZXocbjAfBgNVHSMEGDAWgBQ7YBZDnXaKtU0jC6P1T7FXNI0sBDAaBgNVHREEEzAR
hwR/AAABgglsb2NhbGhvc3QwCgYIKoZIzj0EAwIDSAAwRQIgMv2RHtf6rM+lNkSw
ImIetOQZfrewCUBh5+7zLK1Cn3kCIQD2iu8FIqVFAq9VOjfqlJzTkme5NnGSLjWF
2U3epoIKvg==
-----END CERTIFICATE-----
"""
TEST_KEY_PEM = """\
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg17MEKdbOSU5Y69KJ
gLS+Xnz0mY12nWELlZC3MS3MSYihRANCAATOM0ZjBSx1MDv2dS9loBrUTuNsT5oS
p918tlDfnuOClmuPIbgFqpZRgZjBl9YT2t1D0PWrg4wsNz+JedrSe5bn
-----END PRIVATE KEY-----
"""


# Test-only client-certificate material (EC P-256, valid 2025-2125): a client CA the fake trusts
# for client certificates (like kube-apiserver's --client-ca-file) and a client certificate
# (CN=ci-bot, O=ci) signed by it.  A verified client certificate authenticates a request.
TEST_CLIENT_CA_PEM = """\
-----BEGIN CERTIFICATE-----
MIIBbTCCARSgAwIBAgICIAAwCgYIKoZIzj0EAwIwHTEbMBkGA1UEAwwSZmFrZWt1
YmUtY2xpZW50LWNhMCAXDTI1MDEwMTAwMDAwMFoYDzIxMjUwMTAxMDAwMDAwWjAd
MRswGQYDVQQDDBJmYWtla3ViZS1jbGllbnQtY2EwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAS/ayt1VIWSuYhXue+7NWLs7bs61oA6XbOkcwUHYC2eHaZoFg2qH3wk
8dZekpqKEzqSJIcnhNtVjT4JFCYH6NPZo0IwQDAPBgNVHRMBAf8EBTADAQH/MA4G
A1UdDwEB/wQEAwIBBjAdBgNVHQ4EFgQUfnvTNSh13spiKOJY7UniZAKKZe0wCgYI
KoZIzj0EAwIDRwAwRAIgTkGWsyWlMW2gNu0abPgyeIuT39TUPgGFGxGAgN8fKsEC
IEuLLgtws+RdjGrUhrBNj3JajKHmd0PXd54u4O/3MIwp
-----END CERTIFICATE-----
"""
TEST_CLIENT_CERT_PEM = """\
-----BEGIN CERTIFICATE-----
MIIBgzCCASmgAwIBAgICIAEwCgYIKoZIzj0EAwIwHTEbMBkGA1UEAwwSZmFrZWt1
YmUtY2xpZW50LWNhMCAXDTI1MDEwMTAwMDAwMFoYDzIxMjUwMTAxMDAwMDAwWjAe
MQswCQYDVQQKDAJjaTEPMA0GA1UEAwwGY2ktYm90MFkwEwYHKoZIzj0CAQYIKoZI
zj0DAQcDQgAE6vwPwYCB82qumeSsTu/nwoYFl6f+wGUW8Z/PX31Ej/wGlsR4yfqf
Qxi2UPTrQ+QXI90MULkAPo2fbh0FM3r/tKNWMFQwDAYDVR0TAQH/BAIwADAOBgNV
HQ8BAf8EBAMCB4AwEwYDVR0lBAwwCgYIKwYBBQUHAwIwHwYDVR0jBBgwFoAUfnvT
NSh13spiKOJY7UniZAKKZe0wCgYIKoZIzj0EAwIDSAAwRQIgIHCarT0f8cdSYeif
JPvJLk2cuosLqeVHMkhLTVWKRioCIQDdVqrJHoduDxkcJkSYR5whKu5yZ6ATzMzW
zTKfEF18fw==
-----END CERTIFICATE-----
"""
TEST_CLIENT_KEY_PEM = """\
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgYOAmWxiI46XESRd/
2jEWHFnJoNhwGYQLKYfm7jImysuhRANCAATq/A/BgIHzaq6Z5KxO7+fChgWXp/7A
ZRbxn89ffUSP/AaWxHjJ+p9DGLZQ9OtD5Bcj3QxQuQA+jZ9uHQUzev+0
-----END PRIVATE KEY-----
"""

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


def _custom(group: str, plural: str, kind: str, namespaced: bool, short: str) -> ResourceType:
    return ResourceType(group, plural, kind.lower(), kind, namespaced, (short,),
                        custom=True, categories=("gpustack",))


RESOURCE_TYPES: tuple[ResourceType, ...] = (
    _builtin("", "pods", "Pod", short=("po",), categories=("all",)),
    _builtin("", "namespaces", "Namespace", False, ("ns",),
             verbs=tuple(v for v in ALL_VERBS if v != "deletecollection")),
    _builtin("", "events", "Event", short=("ev",), verbs=READ_VERBS, has_status=False),
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
)
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


# ----------------------------------------------------------------------------- errors / records
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


@dataclass
class RequestRecord:
    method: str
    path: str
    query: dict[str, str]
    content_type: Optional[str]
    body: Any
    status: Optional[int]
    time: float  # time.monotonic() at arrival
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""
    #: Every header line in order (``headers`` keeps only the last of a repeated name).
    header_lines: list[tuple[str, str]] = field(default_factory=list)
    #: The TLS server name the client asked for (SNI), and the CN of the verified client
    #: certificate it presented (None: none presented).
    sni: Optional[str] = None
    client_cert: Optional[str] = None

    def header_values(self, name: str) -> list[str]:
        """Every value of a (repeatable) header, e.g. ``Impersonate-Group``."""
        return [v for k, v in self.header_lines if k.lower() == name.lower()]


@dataclass
class _Rule:
    status: Optional[int]
    method: Optional[str]
    path: Optional[re.Pattern[str]]
    times: Optional[int]
    delay: float = 0.0
    retry_after: Optional[float] = None
    message: Optional[str] = None
    reason: Optional[str] = None

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        if self.method and self.method.upper() != method:
            return False
        return self.path is None or bool(self.path.search(path))

    def error(self) -> ApiError:
        code = self.status or 500
        headers, details = {}, {}
        if self.retry_after is not None:
            seconds = max(0, math.ceil(self.retry_after))  # clients parse integers only
            headers["Retry-After"] = str(seconds)
            details["retryAfterSeconds"] = seconds
        message = self.message or f"injected fault: HTTP {code}"
        return ApiError(code, message, self.reason, details, headers=headers)


@dataclass(frozen=True)
class _Deny:
    verb: Optional[str]
    group: Optional[str]
    resource: str
    namespace: Optional[str]

    def matches(self, verb: str, group: str, resource: str, namespace: str) -> bool:
        if self.verb not in (None, "*", verb):
            return False
        if self.group is not None and self.group not in ("*", group):
            return False
        if self.resource not in ("*", resource):
            return False
        # A cluster-wide request ("" namespace) needs the permission in every namespace.
        return self.namespace is None or not namespace or self.namespace == namespace


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


# ----------------------------------------------------------------------------- selectors
_SET_TERM = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\((.*)\)\s*$")
_EQ_TERM = re.compile(r"^\s*([^\s!=]+)\s*(==|=|!=)\s*([^\s]*)\s*$")
_EXISTS_TERM = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")
Matcher = Callable[[JSON], bool]


def _split_terms(selector: str) -> list[str]:
    terms, depth, cur = [], 0, []
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def _label_term(term: str) -> Callable[[dict[str, str]], bool]:
    m = _SET_TERM.match(term)
    if m:
        key, op = m.group(1), m.group(2)
        values = {v.strip() for v in m.group(3).split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    m = _EQ_TERM.match(term)
    if m:
        key, op, value = m.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    m = _EXISTS_TERM.match(term)
    if m:
        neg, key = m.groups()
        return (lambda labels: key not in labels) if neg else (lambda labels: key in labels)
    raise bad_request(f"unable to parse requirement: invalid label selector term {term!r}")


def label_matcher(selector: str) -> Optional[Matcher]:
    """Compile a label selector; None when it selects everything."""
    terms = [_label_term(t) for t in _split_terms(selector or "")]
    if not terms:
        return None

    def match(obj: JSON) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(t(labels) for t in terms)
    return match


def _field_value(obj: JSON, path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def field_matcher(selector: str, rt: ResourceType) -> Optional[Matcher]:
    """Compile a field selector (``f=v``, ``f==v``, ``f!=v``, comma-joined)."""
    allowed = {"metadata.name", "metadata.namespace"}
    if rt.plural == "pods":
        allowed |= POD_FIELDS
    tests: list[tuple[str, bool, str]] = []
    for term in _split_terms(selector or ""):
        m = _EQ_TERM.match(term)
        if not m:
            raise bad_request(f"invalid field selector: {term!r}")
        name, op, value = m.groups()
        if name not in allowed and not (rt.plural == "events" and name != "metadata.uid"):
            raise bad_request(f'field label not supported: {name}')
        tests.append((name, op != "!=", value))
    if not tests:
        return None
    return lambda obj: all((_field_value(obj, n) == v) == eq for n, eq, v in tests)


# ----------------------------------------------------------------------------- patches
def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; never mutates its inputs."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _strip_directives(patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    return {k: _strip_directives(v) for k, v in patch.items() if not k.startswith("$")}


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, list):
            doc = doc[int(part)]
        elif isinstance(doc, dict):
            doc = doc[part]
        else:
            raise KeyError(part)
    return doc


def _jp_add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        parent.insert(len(parent) if last == "-" else int(last), value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise KeyError(last)
    return doc


def _jp_remove(doc: Any, parts: list[str]) -> Any:
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        del parent[int(last)]
    else:
        del parent[last]
    return doc


def json_patch(doc: Any, ops: list[JSON]) -> Any:
    """RFC 6902 (add, remove, replace, move, copy, test) on a deep copy of ``doc``."""
    doc = copy.deepcopy(doc)
    for op in ops:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))
        if kind == "add":
            doc = _jp_add(doc, parts, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc = _jp_remove(doc, parts)
        elif kind == "replace":
            _resolve(doc, parts)
            doc = _jp_add(_jp_remove(doc, parts), parts, copy.deepcopy(op["value"])) \
                if parts else copy.deepcopy(op["value"])
        elif kind in ("move", "copy"):
            src = _pointer(op["from"])
            value = copy.deepcopy(_resolve(doc, src))
            if kind == "move":
                doc = _jp_remove(doc, src)
            doc = _jp_add(doc, parts, value)
        elif kind == "test":
            if _resolve(doc, parts) != op.get("value"):
                raise ValueError(f"testing value {op.get('path')} failed")
        else:
            raise ValueError(f"unknown JSON patch op {kind!r}")
    return doc


# ----------------------------------------------------------------------------- protobuf
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _pb_fields(buf: bytes) -> dict[int, list[Any]]:
    """Decode one protobuf message into {field number: [int | bytes, ...]}."""
    out: dict[int, list[Any]] = {}
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise bad_request(f"unsupported protobuf wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _pb_str(fields: dict[int, list[Any]], number: int) -> str:
    return fields[number][-1].decode() if number in fields else ""


def ssar_from_protobuf(raw: bytes) -> JSON:
    """Decode the SelfSubjectAccessReview that ``kubectl auth can-i`` sends as protobuf."""
    if not raw.startswith(b"k8s\x00"):
        raise bad_request("protobuf body lacks the k8s envelope")
    envelope = _pb_fields(raw[4:])
    review = _pb_fields(envelope.get(2, [b""])[-1])
    spec = _pb_fields(review.get(2, [b""])[-1])
    body: JSON = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "metadata": {}, "spec": {}}
    if 1 in spec:
        attrs = _pb_fields(spec[1][-1])
        names = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
        body["spec"]["resourceAttributes"] = {
            n: _pb_str(attrs, i) for i, n in enumerate(names, 1) if i in attrs}
    if 2 in spec:
        attrs = _pb_fields(spec[2][-1])
        body["spec"]["nonResourceAttributes"] = {"path": _pb_str(attrs, 1),
                                                 "verb": _pb_str(attrs, 2)}
    return body


# ----------------------------------------------------------------------------- storage
class _Store:
    """Objects of one (group, resource), keyed by (namespace, name), with a sorted index."""

    def __init__(self) -> None:
        self.objs: dict[Key, JSON] = {}
        self.keys: list[Key] = []
        self.cache: dict[Key, dict[tuple[str, bool], str]] = {}

    def put(self, key: Key, obj: JSON) -> None:
        if key not in self.objs:
            bisect.insort(self.keys, key)
        self.objs[key] = obj
        self.cache.pop(key, None)

    def drop(self, key: Key) -> Optional[JSON]:
        obj = self.objs.pop(key, None)
        if obj is not None:
            del self.keys[bisect.bisect_left(self.keys, key)]
            self.cache.pop(key, None)
        return obj

    def span(self, namespace: str) -> tuple[int, int]:
        if not namespace:
            return 0, len(self.keys)
        lo = bisect.bisect_left(self.keys, (namespace,))
        return lo, bisect.bisect_left(self.keys, (namespace + "\x00",), lo)

    def render(self, key: Key, api_version: str, in_list: bool) -> str:
        per_key = self.cache.setdefault(key, {})
        text = per_key.get((api_version, in_list))
        if text is None:
            obj = self.objs[key]
            if in_list:
                obj = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
            elif obj.get("apiVersion") != api_version:
                obj = {**obj, "apiVersion": api_version}
            text = per_key[(api_version, in_list)] = _dumps(obj)
        return text


def _split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def _spec_part(obj: JSON) -> JSON:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _encode_continue(rv: str, key: Key) -> str:
    raw = _dumps({"v": "meta.k8s.io/v1", "rv": int(rv), "start": list(key)})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[str, Key]:
    try:
        pad = "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(token + pad))
        return str(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except Exception:
        raise bad_request("continue key is not valid: incorrect encoded start resourceVersion")


# ----------------------------------------------------------------------------- HTTP plumbing
class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    fake: "FakeKube"
    ssl_context: Optional[ssl.SSLContext] = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Runs in the connection's own thread, so a TLS handshake never blocks accept()."""
        if self.ssl_context is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(10)
        conn = self.ssl_context.wrap_socket(request, server_side=True)
        try:
            conn.settimeout(None)
            super().finish_request(conn, client_address)
        finally:
            conn.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # handshake failures, clients hanging up mid-request


def _server_ssl_context() -> ssl.SSLContext:
    """The server certificate; client certificates are asked for and, when sent, verified against
    the client CA (a handshake with an untrusted one fails, as with kube-apiserver)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.load_verify_locations(cadata=TEST_CLIENT_CA_PEM)
    ctx.sni_callback = _remember_sni
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(TEST_CERT_PEM + TEST_KEY_PEM)
        ctx.load_cert_chain(path)
    finally:
        os.unlink(path)
    return ctx


def _remember_sni(conn: Any, server_name: Optional[str], ctx: ssl.SSLContext) -> None:
    conn.fake_sni = server_name  # read back per request (RequestRecord.sni)


def _peer_common_name(conn: Any) -> Optional[str]:
    try:
        cert = conn.getpeercert()
    except (AttributeError, ValueError):
        return None
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, False)

    def _dispatch(self) -> None:
        self.server.fake._serve(self, self.command)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch

    def read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _read_chunked(self) -> bytes:
        out = bytearray()
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += self.rfile.read(size)
            self.rfile.readline()

    def send(self, status: int, body: bytes, content_type: str,
             headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


@dataclass
class _Response:
    status: int
    body: Any  # JSON-able, str (already JSON) or bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return _dumps(self.body).encode()


@dataclass
class _Target:
    """A parsed resource URL."""
    rt: ResourceType
    version: str
    namespace: str
    name: str
    sub: str

    @property
    def api_version(self) -> str:
        return f"{self.rt.group}/{self.version}" if self.rt.group else self.version


# ----------------------------------------------------------------------------- the fake
@dataclass
class _Finalizer:
    """An operator's finalizer on one kind: when each deleted object's turn comes (monotonic)."""
    rt: "ResourceType"
    name: str
    after: float
    held_by: Optional[Callable[..., bool]]
    due: dict = field(default_factory=dict)


class FakeKube:
    """In-process fake kube-apiserver; see the module docstring."""

    def __init__(self, groups_versions: Optional[dict[str, Optional[Iterable[str]]]] = None,
                 token: Optional[str] = "fake-token", username: str = "fake-user",
                 tls: bool = True) -> None:
        self.token, self.username, self.tls = token, username, tls
        self.setting_lag = 0.0
        #: user -> password accepted as basic auth (``Authorization: Basic``), besides the token.
        self.passwords: dict[str, str] = {}
        self.server_version = {"major": "1", "minor": "37", "gitVersion": "v1.37.0-fake",
                               "gitCommit": "0" * 40, "gitTreeState": "clean",
                               "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25.0",
                               "compiler": "gc", "platform": "linux/amd64"}
        self.requests: list[RequestRecord] = []
        self._groups = self._served_groups(groups_versions)
        self._lock = threading.RLock()
        self._log_lock = threading.Lock()
        self._stores: dict[tuple[str, str], _Store] = {rt.key: _Store() for rt in RESOURCE_TYPES}
        self._rv = 1
        #: Stored objects LIST requests have looked at: paging is O(page) when a full walk
        #: examines each object once, however many pages it takes (tests assert this, not time).
        self.examined = 0
        self._rules: list[_Rule] = []
        self._denies: list[_Deny] = []
        self._admission: list[Callable[[str, Optional[JSON], Optional[JSON]], Optional[str]]] = []
        self._expire = 0
        self._pending: dict[Key, tuple[float, Any]] = {}
        self._finalizers: list[_Finalizer] = []
        self._reaping = False
        self._conns: set[socket.socket] = set()
        self._server: Optional[_Server] = None
        self._thread: Optional[threading.Thread] = None

    # -- lifecycle
    @staticmethod
    def _served_groups(overrides: Optional[dict[str, Optional[Iterable[str]]]]
                       ) -> dict[str, tuple[str, ...]]:
        groups = {**BUILTIN_GROUPS, **DEFAULT_GROUPS}
        for group, versions in (overrides or {}).items():
            groups[group] = tuple(versions or ())
        return {g: v for g, v in groups.items() if v}

    def start(self) -> "FakeKube":
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        server.ssl_context = _server_ssl_context() if self.tls else None
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fakekube",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server = None

    def __enter__(self) -> "FakeKube":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "FakeKube not started"
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    @property
    def ca_pem(self) -> str:
        """PEM of the CA that signed the server certificate (for clients not using kubeconfig)."""
        return TEST_CA_PEM

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    # -- test helpers: state
    def add(self, obj: JSON) -> JSON:
        """Store ``obj`` (upsert), filling uid, resourceVersion, creationTimestamp, generation."""
        with self._lock:
            rt, key = self._add(obj)
            return copy.deepcopy(self._store(rt).objs[key])

    def add_many(self, objs: Iterable[JSON]) -> None:
        with self._lock:
            for obj in objs:
                self._add(obj)

    def get(self, kind_or_resource: str, namespace: Optional[str], name: str
            ) -> Optional[JSON]:
        rt = find_type(kind_or_resource)
        with self._lock:
            self._reap()
            self._settle(rt)
            obj = self._store(rt).objs.get(self._key(rt, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def objects(self, kind_or_resource: str, namespace: Optional[str] = None) -> list[JSON]:
        rt = find_type(kind_or_resource)
        with self._lock:
            self._reap()
            self._settle(rt)
            store = self._store(rt)
            lo, hi = store.span(namespace or "")
            return [copy.deepcopy(store.objs[k]) for k in store.keys[lo:hi]]

    def update(self, kind_or_resource: str, namespace: Optional[str], name: str,
               patch: JSON) -> JSON:
        """Merge-patch a stored object directly (status too, no checks); returns a copy."""
        rt = find_type(kind_or_resource)
        with self._lock:
            key = self._key(rt, namespace, name)
            old = self._store(rt).objs.get(key)
            if old is None:
                raise KeyError(f"{rt.plural} {namespace}/{name} not found")
            new = merge_patch(old, patch)
            self._bump_generation(old, new)
            self._commit(rt, key, new)
            return copy.deepcopy(new)

    def remove(self, kind_or_resource: str, namespace: Optional[str], name: str) -> bool:
        rt = find_type(kind_or_resource)
        with self._lock:
            return self._store(rt).drop(self._key(rt, namespace, name)) is not None

    # -- test helpers: behaviour
    def deny(self, verb: Optional[str], resource: str, namespace: Optional[str] = None,
             group: Optional[str] = None) -> None:
        """Forbid ``verb`` (None/"*" = any) on ``resource``.

        ``resource``: kind, plural, short name, ``plural.group``, ``"*"`` or ``"plural/status"``.
        """
        base, _, sub = resource.partition("/")
        try:
            rt = find_type(base, group)
            resource, group = rt.plural + (f"/{sub}" if sub else ""), rt.group
        except KeyError:
            pass
        with self._lock:
            self._denies.append(_Deny(verb, group, resource, namespace))

    def fail(self, status: int, method: Optional[str] = None, path: Optional[str] = None,
             times: Optional[int] = 1, retry_after: Optional[float] = None,
             delay: float = 0.0, message: Optional[str] = None,
             reason: Optional[str] = None) -> None:
        """Answer the next ``times`` (None = all) matching requests with ``status``."""
        rule = _Rule(status, method, re.compile(path) if path else None, times, delay,
                     retry_after, message, reason)
        with self._lock:
            self._rules.append(rule)

    def delay(self, seconds: float, method: Optional[str] = None, path: Optional[str] = None,
              times: Optional[int] = 1) -> None:
        """Sleep ``seconds`` before answering the next ``times`` (None = all) matches."""
        with self._lock:
            self._rules.append(_Rule(None, method, re.compile(path) if path else None,
                                     times, seconds))

    def clear_faults(self) -> None:
        with self._lock:
            self._rules.clear()
            self._denies.clear()
            self._expire = 0

    def expire_continue(self, times: int = 1) -> None:
        with self._lock:
            self._expire += times

    def admission(self, fn: Callable[[str, Optional[JSON], Optional[JSON]], Optional[str]]
                  ) -> None:
        """Add a validating hook ``fn(op, new, old)``; op is CREATE/UPDATE/DELETE.

        A returned string denies the request with 403 like a webhook would.
        """
        with self._lock:
            self._admission.append(fn)

    def clear_log(self) -> None:
        with self._log_lock:
            self.requests.clear()

    def write_kubeconfig(self, path: Any, context: str = "fake",
                         namespace: Optional[str] = None, token: Optional[str] = None,
                         user: str = "fake-user", exec_command: Optional[list[str]] = None
                         ) -> Any:
        """Write a kubeconfig (JSON, which is YAML) pointing at this server; returns path."""
        if exec_command:
            creds: JSON = {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": exec_command[0], "args": list(exec_command[1:]),
                "interactiveMode": "Never", "provideClusterInfo": False}}
        else:
            creds = {"token": token if token is not None else (self.token or "")}
        ctx: JSON = {"cluster": context, "user": user}
        if namespace:
            ctx["namespace"] = namespace
        cluster: JSON = {"server": self.url}
        if self.tls:
            cluster["certificate-authority-data"] = base64.b64encode(
                TEST_CA_PEM.encode()).decode()
        config = {"apiVersion": "v1", "kind": "Config", "preferences": {},
                  "clusters": [{"name": context, "cluster": cluster}],
                  "users": [{"name": user, "user": creds}],
                  "contexts": [{"name": context, "context": ctx}],
                  "current-context": context}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(config, fh, indent=2)
        return path

    def is_allowed(self, verb: str, group: str, resource: str, namespace: str = "") -> bool:
        with self._lock:
            return not any(d.matches(verb, group, resource, namespace) for d in self._denies)


    # -- finalizers and deletionTimestamp (deletion completes later)
    def finalizer(self, kind_or_resource: str, name: str = "gpustack.ai/cleanup", after: float = 0.3,
                  held_by: Optional[Callable[["FakeKube", JSON], bool]] = None) -> None:
        """Play an operator's finalizer on ``kind_or_resource`` (see the module docstring)."""
        rt = find_type(kind_or_resource)
        with self._lock:
            self._finalizers.append(_Finalizer(rt, name, after, held_by))
            store = self._store(rt)
            for key in list(store.keys):
                obj = copy.deepcopy(store.objs[key])
                if self._add_finalizers(rt, obj):
                    self._commit(rt, key, obj)

    @staticmethod
    def _terminating(obj: JSON) -> bool:
        return bool((obj.get("metadata") or {}).get("deletionTimestamp"))

    def _add_finalizers(self, rt: ResourceType, obj: JSON) -> bool:
        """The operator's finalizers on a live object of ``rt``; True if any was added."""
        meta = obj["metadata"]
        names = [f.name for f in self._finalizers if f.rt is rt and f.name not in (meta.get("finalizers") or [])]
        if names and not self._terminating(obj):
            meta["finalizers"] = list(meta.get("finalizers") or []) + names
            return True
        return False

    def _mark_terminating(self, target: _Target, old: JSON, dry: bool) -> _Response:
        """A DELETE with finalizers pending: set deletionTimestamp once; the object stays."""
        obj = copy.deepcopy(old)
        if not self._terminating(obj):
            obj["metadata"].update(deletionTimestamp=_now(), deletionGracePeriodSeconds=0)
            if not dry:
                key = self._key(target.rt, target.namespace, target.name)
                self._commit(target.rt, key, obj)
                for fin in self._finalizers:
                    if fin.rt is target.rt and fin.name in obj["metadata"]["finalizers"]:
                        fin.due[key] = time.monotonic() + fin.after
        return _Response(200, self._present(obj, target))

    def _reap(self) -> None:
        """Each operator finalizer whose time has come (and that nothing holds) is removed."""
        with self._lock:
            if self._reaping:  # held_by reads the fake, which reaps: not again from inside
                return
            self._reaping = True
            try:
                self._reap_due()
            finally:
                self._reaping = False

    def _reap_due(self) -> None:
        with self._lock:
            now = time.monotonic()
            for fin in self._finalizers:
                store = self._store(fin.rt)
                for key, due in list(fin.due.items()):
                    obj = store.objs.get(key)
                    if obj is None:
                        del fin.due[key]
                        continue
                    if due > now or (fin.held_by is not None and fin.held_by(self, obj)):
                        continue
                    del fin.due[key]
                    left = [f for f in obj["metadata"].get("finalizers") or [] if f != fin.name]
                    if left:
                        new = copy.deepcopy(obj)
                        new["metadata"]["finalizers"] = left
                        self._commit(fin.rt, key, new)
                    else:
                        store.drop(key)

    # -- storage internals
    def _store(self, rt: ResourceType) -> _Store:
        return self._stores[rt.key]

    @staticmethod
    def _key(rt: ResourceType, namespace: Optional[str], name: str) -> Key:
        return ((namespace or "") if rt.namespaced else "", name)

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _commit(self, rt: ResourceType, key: Key, obj: JSON) -> None:
        obj["metadata"] = {**obj.get("metadata", {}), "resourceVersion": self._next_rv()}
        self._store(rt).put(key, obj)

    @staticmethod
    def _fill_metadata(meta: JSON, old: Optional[JSON]) -> None:
        old_meta = (old or {}).get("metadata", {})
        meta.setdefault("uid", old_meta.get("uid") or str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", old_meta.get("creationTimestamp") or _now())
        meta.setdefault("generation", old_meta.get("generation", 1))

    def _add(self, obj: JSON) -> tuple[ResourceType, Key]:
        group, _ = _split_api_version(obj.get("apiVersion", ""))
        rt = find_type(obj["kind"], group)
        obj = dict(obj)
        meta = obj["metadata"] = dict(obj.get("metadata") or {})
        if rt.namespaced:
            meta.setdefault("namespace", "default")
            self._ensure_namespace(meta["namespace"])
        else:
            meta.pop("namespace", None)
        key = self._key(rt, meta.get("namespace"), meta["name"])
        old = self._store(rt).objs.get(key)
        self._fill_metadata(meta, old)
        self._commit(rt, key, obj)
        return rt, key

    def _ensure_namespace(self, namespace: str) -> None:
        ns_rt = find_type("namespaces")
        if ("", namespace) not in self._store(ns_rt).objs:
            self._add({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": namespace}, "status": {"phase": "Active"}})

    @staticmethod
    def _bump_generation(old: JSON, new: JSON) -> None:
        gen = old.get("metadata", {}).get("generation", 1)
        if _spec_part(old) != _spec_part(new):
            gen += 1
        new["metadata"] = {**new.get("metadata", {}), "generation": gen}

    # -- Setting status follows spec
    def _settle(self, rt: ResourceType) -> None:
        if rt.plural != "settings" or not self._pending:
            return
        now, store = time.monotonic(), self._store(rt)
        for key, (due, value) in list(self._pending.items()):
            if due <= now:
                del self._pending[key]
                obj = store.objs.get(key)
                if obj is not None:
                    self._commit(rt, key, self._with_status_value(obj, value))

    @staticmethod
    def _with_status_value(obj: JSON, value: Any) -> JSON:
        return {**obj, "status": {**(obj.get("status") or {}), "value": value}}

    def _follow_spec(self, rt: ResourceType, key: Key, obj: JSON) -> JSON:
        spec = obj.get("spec")
        if rt.plural != "settings" or not isinstance(spec, dict) or "value" not in spec:
            return obj
        if self.setting_lag <= 0:
            self._pending.pop(key, None)
            return self._with_status_value(obj, spec["value"])
        self._pending[key] = (time.monotonic() + self.setting_lag, spec["value"])
        return obj

    # -- request entry point
    def _serve(self, handler: _Handler, method: str) -> None:
        raw = handler.read_body()
        split = urlsplit(handler.path)
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        ctype = handler.headers.get("Content-Type")
        record = RequestRecord(method, split.path, query, ctype, _try_json(raw), None,
                               time.monotonic(), dict(handler.headers.items()), raw,
                               list(handler.headers.items()), getattr(handler.connection, "fake_sni", None),
                               _peer_common_name(handler.connection))
        with self._log_lock:
            self.requests.append(record)
        try:
            resp = self._respond(method, split.path, query, handler, raw)
        except ApiError as err:
            resp = _Response(err.code, err.body(), headers=err.headers)
        except Exception as err:  # pragma: no cover - a bug in the fake
            resp = _Response(500, ApiError(500, f"fake apiserver bug: {err!r}").body())
        record.status = resp.status
        handler.send(resp.status, resp.encode(), resp.content_type, resp.headers)

    def _respond(self, method: str, path: str, query: dict[str, str], handler: _Handler,
                 raw: bytes) -> _Response:
        self._apply_rules(method, path)
        self._reap()
        if path in ("/version", "/version/"):
            return _Response(200, self.server_version)
        if path in ("/healthz", "/livez", "/readyz"):
            return _Response(200, b"ok", "text/plain; charset=utf-8")
        self._check_auth(handler.headers.get("Authorization"), _peer_common_name(handler.connection))
        return self._route(method, path, query, handler.headers.get("Content-Type") or "", raw)

    def _apply_rules(self, method: str, path: str) -> None:
        failing, pause = None, 0.0
        with self._lock:
            for rule in self._rules:
                if not rule.matches(method, path):
                    continue
                if rule.status is None:
                    pause += rule.delay
                elif failing is None:
                    failing = rule
                    pause += rule.delay
                else:
                    continue
                if rule.times is not None:
                    rule.times -= 1
        if pause:
            time.sleep(pause)
        if failing is not None:
            raise failing.error()

    def _check_auth(self, header: Optional[str], client_cert: Optional[str]) -> None:
        """The bearer token, a verified client certificate, or a user of ``passwords``."""
        if self.token is None or header == f"Bearer {self.token}" or client_cert:
            return
        if header and header.startswith("Basic ") and self.passwords:
            try:
                user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                user, password = "", None
            if self.passwords.get(user) == password:
                return
        raise ApiError(401, "Unauthorized")

    # -- routing
    def _route(self, method: str, path: str, query: dict[str, str], ctype: str,
               raw: bytes) -> _Response:
        parts = [p for p in path.split("/") if p]
        if parts == ["api"]:
            return _Response(200, self._api_versions())
        if parts == ["apis"]:
            return _Response(200, self._group_list())
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) == 2 and parts[1] in self._groups:
            return _Response(200, self._group_doc(parts[1]))
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "the server could not find the requested resource")
        if version not in self._groups.get(group, ()):
            raise ApiError(404, "the server could not find the requested resource")
        if not rest:
            return _Response(200, self._resource_list(group, version))
        target = self._parse_target(group, version, rest)
        return self._dispatch(method, target, query, ctype, raw)

    def _parse_target(self, group: str, version: str, rest: list[str]) -> _Target:
        namespace = ""
        if rest[0] == "namespaces" and len(rest) > 2 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise ApiError(404, "the server could not find the requested resource")
        try:
            rt = find_type(rest[0], group)
        except KeyError:
            rt = None
        if rt is None or rt.plural != rest[0] or (rest[2:] and not rt.has_status) \
                or rest[2:] not in ([], ["status"]):
            raise ApiError(404, "the server could not find the requested resource")
        if (namespace and not rt.namespaced) or (rt.namespaced and not namespace
                                                 and len(rest) > 1):
            raise ApiError(404, "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else ""
        return _Target(rt, version, namespace, name, rest[2] if len(rest) > 2 else "")

    @staticmethod
    def _verb(method: str, target: _Target, query: dict[str, str]) -> str:
        if method in ("GET", "HEAD"):
            if query.get("watch") in ("true", "1"):
                return "watch"
            return "get" if target.name else "list"
        if method == "DELETE":
            return "delete" if target.name else "deletecollection"
        return {"POST": "create", "PUT": "update", "PATCH": "patch"}[method]

    def _dispatch(self, method: str, target: _Target, query: dict[str, str], ctype: str,
                  raw: bytes) -> _Response:
        verb = self._verb(method, target, query)
        rt = target.rt
        if verb not in rt.verbs or (verb == "create" and target.name) \
                or (target.sub and verb not in ("get", "update", "patch")):
            raise ApiError(405, "the server does not allow this method on the requested "
                                "resource")
        self._authorize(verb, target)
        if verb == "watch":
            raise ApiError(405, "watch is not supported by the fake API server")
        dry = self._dry_run(query)
        body = None
        if verb in ("create", "update"):
            body = self._decode_body(rt, ctype, raw)
        with self._lock:
            self._settle(rt)
            if rt.plural == "selfsubjectaccessreviews":
                return self._access_review(body, dry)
            handler = getattr(self, f"_do_{verb}")
            return handler(target, query, body=body, ctype=ctype, raw=raw, dry=dry)

    def _authorize(self, verb: str, target: _Target) -> None:
        rt = target.rt
        resource = rt.plural + (f"/{target.sub}" if target.sub else "")
        if self.is_allowed(verb, rt.group, resource, target.namespace):
            return
        subject = f'{rt.group_resource} "{target.name}"' if target.name else rt.group_resource
        scope = (f'in the namespace "{target.namespace}"' if target.namespace
                 else "at the cluster scope")
        message = (f'{subject} is forbidden: User "{self.username}" cannot {verb} resource '
                   f'"{resource}" in API group "{rt.group}" {scope}')
        raise ApiError(403, message, details=_details(rt, target.name))

    @staticmethod
    def _dry_run(query: dict[str, str]) -> bool:
        value = query.get("dryRun")
        if not value:
            return False
        if value != "All":
            raise bad_request(f'Invalid dry run value "{value}": supported values: "All"')
        return True

    def _decode_body(self, rt: ResourceType, ctype: str, raw: bytes) -> Any:
        if ctype.startswith(PROTOBUF):
            if rt.plural != "selfsubjectaccessreviews":
                raise ApiError(415, f"the fake API server only decodes {PROTOBUF} for "
                                    "SelfSubjectAccessReview; send application/json")
            return ssar_from_protobuf(raw)
        return self._parse_body(raw)

    @staticmethod
    def _parse_body(raw: bytes) -> Any:
        try:
            return json.loads(raw or b"null")
        except ValueError as err:
            raise bad_request(f"the body of the request could not be decoded as JSON: {err}")

    # -- discovery
    def _api_versions(self) -> JSON:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": self.url.split("//", 1)[1]}]}

    def _group_doc(self, group: str) -> JSON:
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in self._groups[group]]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions,
                "preferredVersion": versions[0]}

    def _group_list(self) -> JSON:
        groups = [self._group_doc(g) for g in self._groups if g]
        for g in groups:
            del g["kind"], g["apiVersion"]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _resource_list(self, group: str, version: str) -> JSON:
        resources: list[JSON] = []
        for rt in RESOURCE_TYPES:
            if rt.group != group:
                continue
            entry: JSON = {"name": rt.plural, "singularName": rt.singular,
                           "namespaced": rt.namespaced, "kind": rt.kind, "verbs": list(rt.verbs)}
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            if rt.categories:
                entry["categories"] = list(rt.categories)
            resources.append(entry)
            if rt.has_status:
                resources.append({"name": f"{rt.plural}/status", "singularName": "",
                                  "namespaced": rt.namespaced, "kind": rt.kind,
                                  "verbs": ["get", "patch", "update"]})
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                "resources": resources}

    # -- verbs (called with the state lock held)
    def _do_list(self, target: _Target, query: dict[str, str], **_: Any) -> _Response:
        rt, store = target.rt, self._store(target.rt)
        labels = label_matcher(query.get("labelSelector", ""))
        fields = field_matcher(query.get("fieldSelector", ""), rt)
        limit = max(0, int(query.get("limit") or 0))
        lo, hi = store.span(target.namespace)
        list_rv, start = str(self._rv), lo
        if query.get("continue"):
            list_rv, last = self._continue_from(query["continue"])
            start = max(lo, bisect.bisect_right(store.keys, last, lo, hi))
        items, i = self._select(store, start, hi, labels, fields, limit, target, rt)
        meta: JSON = {"resourceVersion": list_rv}
        if limit and len(items) == limit and i < hi:
            meta["continue"] = _encode_continue(list_rv, store.keys[i - 1])
            if labels is None and fields is None:
                meta["remainingItemCount"] = hi - i
        head = _dumps({"kind": f"{rt.kind}List", "apiVersion": target.api_version,
                       "metadata": meta})
        return _Response(200, f'{head[:-1]},"items":[{",".join(items)}]}}')

    def _select(self, store: _Store, start: int, hi: int, labels: Optional[Matcher],
                fields: Optional[Matcher], limit: int, target: _Target, rt: ResourceType
                ) -> tuple[list[str], int]:
        items: list[str] = []
        keys, objs, i = store.keys, store.objs, start
        while i < hi and not (limit and len(items) >= limit):
            key = keys[i]
            obj = objs[key]
            i += 1
            if (labels is None or labels(obj)) and (fields is None or fields(obj)):
                items.append(store.render(key, target.api_version, not rt.custom))
        self.examined += i - start
        return items, i

    def _continue_from(self, token: str) -> tuple[str, Key]:
        rv, last = _decode_continue(token)
        if self._expire > 0:
            self._expire -= 1
            fresh = _encode_continue(str(self._rv), last)
            raise ApiError(410, EXPIRED_MESSAGE, "Expired", metadata={"continue": fresh})
        return rv, last

    def _existing(self, target: _Target) -> JSON:
        obj = self._store(target.rt).objs.get(self._key(target.rt, target.namespace,
                                                        target.name))
        if obj is None:
            raise not_found(target.rt, target.name)
        return obj

    def _do_get(self, target: _Target, query: dict[str, str], **_: Any) -> _Response:
        self._existing(target)
        key = self._key(target.rt, target.namespace, target.name)
        return _Response(200, self._store(target.rt).render(key, target.api_version, False))

    def _do_create(self, target: _Target, query: dict[str, str], body: Any, dry: bool,
                   **_: Any) -> _Response:
        rt = target.rt
        obj = self._validate_body(target, body)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not meta.get("name"):
            raise ApiError(422, f'{rt.kind} "" is invalid: metadata.name: Required value: '
                                "name or generateName is required", details=_details(rt))
        if rt.namespaced:
            self._require_namespace(target.namespace)
        key = self._key(rt, target.namespace, meta["name"])
        if key in self._store(rt).objs:
            being = "object is being deleted: " if self._terminating(self._store(rt).objs[key]) else ""
            raise ApiError(409, f'{being}{rt.group_resource} "{meta["name"]}" already exists',
                           "AlreadyExists", _details(rt, meta["name"]))
        obj.pop("status", None)
        meta.pop("resourceVersion", None)
        for k in ("uid", "creationTimestamp", "generation"):
            meta.pop(k, None)
        self._fill_metadata(meta, None)
        self._add_finalizers(rt, obj)
        obj = self._follow_spec(rt, key, obj) if not dry else obj
        self._admit("CREATE", obj, None)
        if not dry:
            self._commit(rt, key, obj)
        return _Response(201, self._present(obj, target))

    def _require_namespace(self, namespace: str) -> None:
        if ("", namespace) not in self._store(find_type("namespaces")).objs:
            raise ApiError(404, f'namespaces "{namespace}" not found',
                           details={"name": namespace, "kind": "namespaces"})

    def _validate_body(self, target: _Target, body: Any) -> JSON:
        rt = target.rt
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        obj = dict(body)
        obj.setdefault("apiVersion", target.api_version)
        obj.setdefault("kind", rt.kind)
        group, _ = _split_api_version(obj["apiVersion"])
        if obj["kind"] != rt.kind or group != rt.group:
            raise bad_request(f"the API version in the data ({obj['apiVersion']}) does not "
                              f"match the expected API version ({target.api_version})")
        meta = obj["metadata"] = dict(obj.get("metadata") or {})
        if rt.namespaced:
            if meta.get("namespace", target.namespace) != target.namespace:
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            meta["namespace"] = target.namespace
        if target.name and meta.get("name", target.name) != target.name:
            raise bad_request(f"the name of the object ({meta.get('name')}) does not match "
                              f"the name on the URL ({target.name})")
        if target.name:
            meta["name"] = target.name
        return obj

    def _do_update(self, target: _Target, query: dict[str, str], body: Any, dry: bool,
                   **_: Any) -> _Response:
        old = self._existing(target)
        new = self._validate_body(target, body)
        rv = new["metadata"].get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(target.rt, target.name)
        return self._write(target, old, new, dry)

    def _do_patch(self, target: _Target, query: dict[str, str], ctype: str, raw: bytes,
                  dry: bool, **_: Any) -> _Response:
        old = self._existing(target)
        new = self._patched(target, old, ctype.split(";")[0].strip(), raw)
        if not isinstance(new, dict):
            raise ApiError(422, "the patched object is not a JSON object")
        rv = (new.get("metadata") or {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(target.rt, target.name)
        return self._write(target, old, self._validate_body(target, new), dry)

    def _patched(self, target: _Target, old: JSON, ctype: str, raw: bytes) -> Any:
        rt = target.rt
        accepted = f"{JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}" + \
            ("" if rt.custom else f", {STRATEGIC_PATCH}")
        if ctype not in (MERGE_PATCH, JSON_PATCH) and not (ctype == STRATEGIC_PATCH
                                                           and not rt.custom):
            raise ApiError(415, f"the body of the request was in an unknown format - accepted "
                                f"media types include: {accepted}")
        patch = self._parse_body(raw)
        base = {**old, "apiVersion": target.api_version}
        if ctype == JSON_PATCH:
            if not isinstance(patch, list):
                raise bad_request("json: cannot unmarshal object into Go value of type "
                                  "jsonpatch.Patch")
            try:
                return json_patch(base, patch)
            except (KeyError, IndexError, ValueError, TypeError) as err:
                raise ApiError(422, f"the server rejected our request due to an error in our "
                                    f"request: {err}")
        if not isinstance(patch, dict):
            raise bad_request("the body of the request must be a JSON object")
        return merge_patch(base, _strip_directives(patch) if ctype == STRATEGIC_PATCH else patch)

    def _write(self, target: _Target, old: JSON, new: JSON, dry: bool) -> _Response:
        """Finish an update or patch: status semantics, metadata, admission, commit."""
        rt = target.rt
        if target.sub == "status":
            new = {**old, "status": new.get("status")}
            if new["status"] is None:
                del new["status"]
        else:
            new.pop("status", None)
            if "status" in old:
                new["status"] = old["status"]
        meta = new["metadata"] = dict(new["metadata"])
        for k in ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp",
                  "deletionGracePeriodSeconds"):
            if k in old["metadata"]:
                meta[k] = old["metadata"][k]
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        self._bump_generation(old, new)
        key = self._key(rt, target.namespace, target.name)
        if not dry and not target.sub:
            new = self._follow_spec(rt, key, new)
        self._admit("UPDATE", new, old)
        if new == old:  # a no-op write is not persisted: resourceVersion unchanged
            return _Response(200, self._present(old, target))
        if not dry and self._terminating(new) and not new["metadata"].get("finalizers"):
            self._store(rt).drop(key)  # the last finalizer is gone: deletion completes
        elif not dry:
            self._commit(rt, key, new)
        return _Response(200, self._present(new, target))

    def _do_delete(self, target: _Target, query: dict[str, str], raw: bytes, dry: bool,
                   **_: Any) -> _Response:
        rt, old = target.rt, self._existing(target)
        options = _try_json(raw) or {}
        pre = options.get("preconditions") or {} if isinstance(options, dict) else {}
        if pre.get("resourceVersion") and pre["resourceVersion"] != \
                old["metadata"]["resourceVersion"]:
            raise conflict(rt, target.name)
        if pre.get("uid") and pre["uid"] != old["metadata"].get("uid"):
            raise conflict(rt, target.name)
        self._admit("DELETE", None, old)
        if old["metadata"].get("finalizers"):
            return self._mark_terminating(target, old, dry)
        if not dry:
            key = self._key(rt, target.namespace, target.name)
            self._store(rt).drop(key)
            self._pending.pop(key, None)
        if rt.plural == "pods":
            return _Response(200, self._present(old, target))
        return _Response(200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Success", "details": {
                                   **_details(rt, target.name),
                                   "uid": old["metadata"].get("uid")}})

    def _do_deletecollection(self, target: _Target, query: dict[str, str], dry: bool,
                             **_: Any) -> _Response:
        rt, store = target.rt, self._store(target.rt)
        labels = label_matcher(query.get("labelSelector", ""))
        fields = field_matcher(query.get("fieldSelector", ""), rt)
        lo, hi = store.span(target.namespace)
        gone = [k for k in store.keys[lo:hi]
                if (labels is None or labels(store.objs[k]))
                and (fields is None or fields(store.objs[k]))]
        for key in gone:
            self._admit("DELETE", None, store.objs[key])
        items = [json.loads(store.render(k, target.api_version, False)) for k in gone]
        if not dry:
            for key in gone:
                store.drop(key)
        return _Response(200, {"kind": f"{rt.kind}List", "apiVersion": target.api_version,
                               "metadata": {"resourceVersion": str(self._rv)}, "items": items})

    def _admit(self, op: str, new: Optional[JSON], old: Optional[JSON]) -> None:
        for fn in self._admission:
            verdict = fn(op, new, old)
            if verdict:
                raise ApiError(403, f'admission webhook "validate.gpustack.ai" denied the '
                                    f"request: {verdict}")

    @staticmethod
    def _present(obj: JSON, target: _Target) -> str:
        if obj.get("apiVersion") != target.api_version:
            obj = {**obj, "apiVersion": target.api_version}
        return _dumps(obj)

    def _access_review(self, body: Any, dry: bool) -> _Response:
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        attrs = (body.get("spec") or {}).get("resourceAttributes")
        allowed = True
        if isinstance(attrs, dict):
            resource = (attrs.get("resource") or "") + \
                (f"/{attrs['subresource']}" if attrs.get("subresource") else "")
            allowed = self.is_allowed(attrs.get("verb") or "", attrs.get("group") or "",
                                      resource, attrs.get("namespace") or "")
        status: JSON = {"allowed": allowed}  # RBAC gives no reason, so kubectl says "no"
        out = {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
               **{k: v for k, v in body.items() if k not in ("kind", "apiVersion")},
               "status": status}
        out.setdefault("metadata", {})
        out["metadata"].setdefault("creationTimestamp", None)
        return _Response(201, out)


def _try_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


# --- A hanging server ------------------------------------------------------------------------
# Kept apart from FakeKube on purpose: it speaks no protocol at all. It is a listening socket
# that accepts every connection (so the client's connect succeeds, like a wedged API server or a
# load balancer whose backend died) and then never reads a byte nor answers.

class HangingServer:
    """``with HangingServer() as server: server.write_kubeconfig(path)``: accepts, never answers.

    ``accepted`` counts the connections taken (each is held open until ``stop``);
    ``first_accept`` is the ``time.monotonic()`` of the first one (None before it).
    """

    def __init__(self) -> None:
        self._listener: Optional[socket.socket] = None
        self._held: list[socket.socket] = []
        self._thread: Optional[threading.Thread] = None
        self._stopping = threading.Event()
        self.first_accept: Optional[float] = None

    @property
    def accepted(self) -> int:
        return len(self._held)

    def start(self) -> "HangingServer":
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        listener.settimeout(0.05)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, name="hanging-server", daemon=True)
        self._thread.start()
        return self

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if self.first_accept is None:
                self.first_accept = time.monotonic()
            self._held.append(conn)

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for conn in self._held:
            conn.close()
        if self._listener is not None:
            self._listener.close()

    def __enter__(self) -> "HangingServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._listener is not None, "HangingServer not started"
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def write_kubeconfig(self, path: Any, context: str = "hanging", namespace: Optional[str] = None) -> Any:
        """A kubeconfig (JSON) pointing at this server over plain HTTP with a token user."""
        ctx: JSON = {"cluster": context, "user": context}
        if namespace:
            ctx["namespace"] = namespace
        config = {"apiVersion": "v1", "kind": "Config", "current-context": context,
                  "clusters": [{"name": context, "cluster": {"server": self.url}}],
                  "users": [{"name": context, "user": {"token": "hanging-token"}}],
                  "contexts": [{"name": context, "context": ctx}]}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(config, fh, indent=2)
        return path

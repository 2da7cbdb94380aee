"""The one place that talks to a cluster, through the official ``kubernetes`` client.

The client is used for what it does well (kubeconfig, exec credential plugins, TLS, the HTTP
pool); responses are read as plain JSON, never as generated model classes, because lists can hold
10,000+ objects. Importing this module imports the client (only the parts used, see
"The kubernetes client" below), so only a live run does it.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional
from urllib.parse import quote, unquote, urlencode

import urllib3
import yaml
from urllib3 import HTTPHeaderDict

from kubectl_kvdtype import __version__
from kubectl_kvdtype._kits import progress as _progress
from kubectl_kvdtype._kits.env import limit
from kubectl_kvdtype._kits.report import Finding
from kubectl_kvdtype._kits.secrets import breaks_header, without_password
from kubectl_kvdtype._kits.status import (
    ApiError,
    ClusterError,
    Conflict,
    KvdtypeError,
    NotFound,
    RequestTimeout,
    UsageError,
)
from kubectl_kvdtype._sources import names as _names
from kubectl_kvdtype._sources.kinds import Kind, Projection

# --- The kubernetes client, paid for what is used ------------------------------------------
#
# ``import kubernetes`` runs the package's __init__, which imports every API class and, through
# ``kubernetes.client``'s __init__, ~800 generated pydantic models; ``kube_config`` adds requests
# and oauthlib at module level for the OIDC refresh. A run needs none of that: it needs the
# kubeconfig loader (exec plugins, tokens, client certificates, auth providers), the in-cluster
# loader, ``Configuration`` and the REST client over urllib3. So the client's packages are entered
# without running their __init__ (``_DeferredPackage``: the __init__ runs, whole, the first time
# anything asks for a name only it defines), and what ``kube_config`` imports for the OIDC refresh
# alone is imported when a refresh happens (``_StandIn``, ``_Deferred``). This leans on the client's file
# layout, hence the pinned bound in setup.cfg; tests/test_cli.py checks a live run leaves the
# models unimported, and tests/test_connection_flags.py runs the OIDC refresh.

_CLIENT_PACKAGES = ("kubernetes", "kubernetes.client", "kubernetes.config", "kubernetes.utils")
_PACKAGE_INIT = threading.RLock()  # an __init__ may use another deferred package's names


class _DeferredPackage(types.ModuleType):
    """A package of the client entered without running its __init__; any name the __init__
    defines (``kubernetes.client.CoreV1Api``) runs it first, so whoever wants the whole client
    in this process still gets it."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system's probes (__path__ is set, __all__ is not)
            raise AttributeError(name)
        with _PACKAGE_INIT:
            if isinstance(self, _DeferredPackage):
                module: types.ModuleType = self  # a plain module from here on: its __init__ runs next, once
                module.__class__ = types.ModuleType
                self.__spec__.loader.exec_module(self)  # type: ignore[union-attr]
        return getattr(self, name)


class _Deferred:
    """A name ``kube_config`` binds at import but uses only in an OIDC refresh (``OAuth2Session``,
    ``oauthlib``, ``ApiClient``): ``module``'s ``attribute``, imported when first called or read."""

    def __init__(self, module: str, attribute: str) -> None:
        self._module, self._attribute = module, attribute

    def _resolve(self) -> Any:
        module = importlib.import_module(self._module)
        try:
            return getattr(module, self._attribute)
        except AttributeError:  # a submodule its package has not imported (oauthlib.oauth2)
            return importlib.import_module(f"{self._module}.{self._attribute}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._resolve()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resolve(), name)


class _StandIn(types.ModuleType):
    """Stands in for a module while ``kube_config`` is imported: each name taken from it is a
    ``_Deferred`` of the real module's."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Deferred(self.__name__, name)


def _enter_client_packages() -> None:
    for name in _CLIENT_PACKAGES:
        if name in sys.modules:  # already imported (in full, or by an earlier call)
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            raise ImportError(f"the kubernetes client has no {name}")
        package = importlib.util.module_from_spec(spec)
        package.__class__ = _DeferredPackage
        sys.modules[name] = package
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, package)


def _defer_client_init(configuration: type) -> None:
    """``Configuration`` is a name of ``kubernetes.client`` the config loaders import from it: set
    it there (the very object its __init__ would bind) so that import does not run the __init__."""
    package = sys.modules["kubernetes.client"]
    if isinstance(package, _DeferredPackage) and "Configuration" not in vars(package):
        package.Configuration = configuration  # type: ignore[attr-defined]


@contextmanager
def _standing_in(modules: dict[str, types.ModuleType], package: types.ModuleType,
                 names: dict[str, Any]) -> Iterator[None]:
    """While ``kube_config`` is imported: ``modules`` stand in for modules not imported yet, and
    ``names`` sit on a deferred ``package``; both are gone afterwards, so later imports are real."""
    placed = [name for name in modules if name not in sys.modules]
    for name in placed:
        sys.modules[name] = modules[name]
    set_here = [name for name in names if isinstance(package, _DeferredPackage) and name not in vars(package)]
    for name in set_here:
        setattr(package, name, names[name])
    try:
        yield
    finally:
        for name in placed:
            sys.modules.pop(name, None)
        for name in set_here:
            vars(package).pop(name, None)


_enter_client_packages()
from kubernetes.client.configuration import Configuration  # noqa: E402  (after the packages are entered)
from kubernetes.client.exceptions import ApiException  # noqa: E402
from kubernetes.client.rest import RESTClientObject  # noqa: E402

_defer_client_init(Configuration)
with _standing_in({"requests_oauthlib": _StandIn("requests_oauthlib"), "oauthlib": _StandIn("oauthlib"),
                   "oauthlib.oauth2": _StandIn("oauthlib.oauth2")},
                  sys.modules["kubernetes.client"],
                  {"ApiClient": _Deferred("kubernetes.client.api_client", "ApiClient")}):
    import kubernetes.config.exec_provider as _client_exec  # noqa: E402
    import kubernetes.config.kube_config as _client_kube_config  # noqa: E402
    from kubernetes.config.config_exception import ConfigException  # noqa: E402
    from kubernetes.config.incluster_config import load_incluster_config  # noqa: E402
    from kubernetes.config.kube_config import KubeConfigLoader  # noqa: E402


# --- Exec credential plugins, bounded ------------------------------------------------------
#
# The client runs a kubeconfig user's exec plugin (``users[].user.exec``) as
# ``subprocess.Popen(...).communicate()``, with no timeout, and logs any failure of it (on
# stderr, through the root logger) and goes on without credentials. So a plugin that never
# returns held a run forever whatever --request-timeout said, and a failing one added a log line
# before a 401. While a ClusterSource loads or refreshes credentials (``_exec_bounded``), the
# client's exec module gets a Popen whose ``communicate`` has the request timeout (the plugin and
# its children are killed when it runs out), and a failure ends the run in one sentence naming
# the command, as kubectl's does. A plugin the client hands the terminal to (stdout is a
# terminal: it may be waiting for a person to log in) is not cut short. Outside ``_exec_bounded``
# the client behaves as its own.

_EXEC = threading.local()  # .active, .timeout: set by _exec_bounded, per thread (parallel LISTs refresh too)


class _CredentialPluginFailed(BaseException):
    """Carries ``error`` out through the client, whose exec loader catches (and logs) every ``Exception``."""

    def __init__(self, error: KvdtypeError) -> None:
        super().__init__(error.message)
        self.error = error


def _plugin_name(args: Any) -> str:
    return str(args[0] if isinstance(args, (list, tuple)) and args else args)


class _BoundedPopen(subprocess.Popen):
    """The client's exec plugin process: in its own session when it is not handed the terminal
    (so that it can be killed with its children), and ``communicate`` bounded by the timeout."""

    def __init__(self, args: Any, **kwargs: Any) -> None:
        self._bounded = bool(getattr(_EXEC, "active", False)) and kwargs.get("stdin") is None  # not interactive
        if self._bounded:
            kwargs["start_new_session"] = True
        try:
            super().__init__(args, **kwargs)
        except OSError as error:
            if not getattr(_EXEC, "active", False):
                raise
            raise _CredentialPluginFailed(KvdtypeError(
                f"cannot run the exec credential plugin {_plugin_name(args)} of the kubeconfig user: "
                f"{error.strerror or error}")) from None

    def communicate(self, input: Any = None, timeout: Optional[float] = None) -> Any:  # noqa: A002 - Popen's name
        if not self._bounded or timeout is not None or not getattr(_EXEC, "timeout", None):
            return super().communicate(input, timeout)
        try:
            return super().communicate(input, _EXEC.timeout)
        except subprocess.TimeoutExpired:
            self._kill_all()
            raise _CredentialPluginFailed(RequestTimeout(
                f"the exec credential plugin {_plugin_name(self.args)} of the kubeconfig user did not return within "
                f"{_seconds(_EXEC.timeout)} (--request-timeout; 0 waits without limit)")) from None

    def _kill_all(self) -> None:
        """The plugin and whatever it started (its session), then the pipes: a child that got away
        cannot keep this process waiting for their end."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (OSError, AttributeError):
            self.kill()
        self.wait()
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()


#: An exec plugin the client hands the terminal to (its stdout is one: it may ask a person to log in,
#: in a browser or with a device code) runs alone, even while several contexts of a fleet connect.
_INTERACTIVE_PLUGIN = threading.Lock()


class _ExecProvider(_client_exec.ExecProvider):
    """The client's exec protocol, with its failures said in one sentence (inside ``_exec_bounded``)."""

    def run(self, previous_response: Any = None) -> Any:
        interactive = hasattr(sys.stdout, "isatty") and sys.stdout.isatty()  # the client's own test
        try:
            with _INTERACTIVE_PLUGIN if interactive else contextlib.nullcontext():
                status = super().run(previous_response)
        except Exception as error:  # noqa: BLE001 - ConfigException, bad JSON: anything the protocol meets
            if not getattr(_EXEC, "active", False):
                raise
            raise self._failed(_first_line(error)) from None
        usable = isinstance(status, dict) and (
            "token" in status or {"clientCertificateData", "clientKeyData"} <= set(status))
        if getattr(_EXEC, "active", False) and not usable:  # the client would log it and go on without
            raise self._failed("its ExecCredential status holds neither a token nor a client certificate and key")
        return status

    def _failed(self, why: str) -> _CredentialPluginFailed:
        return _CredentialPluginFailed(KvdtypeError(
            f"the exec credential plugin {_plugin_name(self.args)} of the kubeconfig user failed: {why}"))


_client_exec.subprocess = types.SimpleNamespace(Popen=_BoundedPopen, PIPE=subprocess.PIPE)  # type: ignore[assignment]
_client_kube_config.ExecProvider = _ExecProvider  # type: ignore[misc]


@contextmanager
def _exec_bounded(timeout: Optional[float]) -> Iterator[None]:
    """Credentials loaded or refreshed inside run an exec plugin for at most ``timeout`` seconds
    (None or 0: no limit); a plugin that fails or runs out raises its ``KvdtypeError``."""
    previous = getattr(_EXEC, "active", False), getattr(_EXEC, "timeout", None)
    _EXEC.active, _EXEC.timeout = True, timeout
    try:
        yield
    except _CredentialPluginFailed as failure:
        raise failure.error from None
    finally:
        _EXEC.active, _EXEC.timeout = previous


PAGE_SIZE = 500
#: Pages one LIST may take before it is abandoned as endless: 500,000 objects at PAGE_SIZE, five
#: times a 100,000-Pod cluster; ``MAX_PAGES_VARIABLE`` sets another (docs/reference.md, "Limits").
MAX_PAGES = 1000
MAX_PAGES_VARIABLE = "KUBECTL_KVDTYPE_MAX_PAGES"
#: Attempts for a request answered 429 or 5xx (reads), or 429 (writes, which a 5xx may have done).
ATTEMPTS = 4
_RETRY_READ = {429, 500, 502, 503, 504}
_MAX_RETRY_AFTER = 10.0
_LIST_RESTARTS = 3
_IN_CLUSTER_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
_REASONS = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
            410: "Gone", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests"}


@dataclass(frozen=True)
class ConnectionOptions:
    """The kubectl-style flags that say which cluster and who; each overrides the kubeconfig's
    setting the way kubectl's does (``_override_cluster``, ``_override_user``)."""

    kubeconfig: Optional[str] = None
    context: Optional[str] = None
    request_timeout: Optional[float] = None
    impersonate: Optional[str] = None
    cluster: Optional[str] = None
    user: Optional[str] = None
    server: Optional[str] = None
    token: Optional[str] = field(default=None, repr=False)
    certificate_authority: Optional[str] = None
    client_certificate: Optional[str] = None
    client_key: Optional[str] = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: Optional[str] = None
    impersonate_groups: tuple[str, ...] = ()
    impersonate_uid: Optional[str] = None
    username: Optional[str] = None
    password: Optional[str] = field(default=None, repr=False)

    @classmethod
    def from_flags(cls, flags: Any) -> "ConnectionOptions":
        """From the parsed command line (a flag missing from ``flags`` counts as not given)."""
        def get(name: str) -> Any:
            return getattr(flags, name, None)

        return cls(kubeconfig=get("kubeconfig"), context=get("context"), request_timeout=get("request_timeout"),
                   impersonate=get("as_user"), cluster=get("cluster"), user=get("user"), server=get("server"),
                   token=get("token"), certificate_authority=get("certificate_authority"),
                   client_certificate=get("client_certificate"), client_key=get("client_key"),
                   insecure_skip_tls_verify=bool(get("insecure_skip_tls_verify")),
                   tls_server_name=get("tls_server_name"), impersonate_groups=tuple(get("as_group") or ()),
                   impersonate_uid=get("as_uid"), username=get("username"), password=get("password"))

    @property
    def overrides(self) -> bool:
        """Whether any flag overrides the kubeconfig (then a refusal is a usage error)."""
        return any((self.cluster, self.user, self.server, self.token, self.certificate_authority,
                    self.client_certificate, self.client_key, self.insecure_skip_tls_verify,
                    self.tls_server_name, self.impersonate, self.impersonate_groups, self.impersonate_uid,
                    self.username, self.password))


class ClusterSource:
    """A ``WritableSource`` over a live API server: the reads, and the few writes ``escape`` and
    ``find-flags --fix`` need. (In the class body ``list`` is the method: ``builtins.list`` the type.)"""

    #: LISTs of different kinds may run side by side (``_sources.list_many``): each waits on the
    #: network and the server most of its time, and the HTTP pool is thread-safe.
    parallel = True

    def __init__(self, options: ConnectionOptions, environ: Optional[dict] = None) -> None:
        environ = dict(os.environ if environ is None else environ)
        self._configuration, self._namespace, self.description, impersonation = _load_configuration(options, environ)
        self._rest = RESTClientObject(self._configuration)
        _watch_connections(self._rest.pool_manager)
        #: The server as messages name it: a password in its URL shown as ``user:***``.
        self._shown_host = without_password(self._configuration.host)
        self._timeout = options.request_timeout
        #: A time (time.monotonic) no request may outlive, set by ``within`` (verify --wait).
        self._deadline: Optional[float] = None
        # A header dict that keeps a repeated name (Impersonate-Group) as separate header lines.
        self._headers = HTTPHeaderDict({"Accept": "application/json", "User-Agent": f"kubectl-kvdtype/{__version__}"})
        for name, value in impersonation:
            self._headers.add(name, value)
        self._versions: dict[str, Optional[str]] = {}
        self._discovery = threading.Lock()  # one discovery per group, even from parallel LISTs
        # One credential refresh at a time: parallel LISTs would each run an expired token's exec
        # plugin; and once it has failed, the others say so rather than run it again.
        self._credentials = threading.Lock()
        self._credentials_failed: Optional[KvdtypeError] = None
        self._discovery_errors: dict[str, KvdtypeError] = {}  # met once, not again per waiting LIST
        self.request_count = 0
        self._max_pages = limit(environ, MAX_PAGES_VARIABLE, MAX_PAGES, "pages")
        #: Objects the cluster answered with names the API server refuses (``_names.refusal``).
        self.findings: builtins.list[Finding] = []

    # --- Source ---------------------------------------------------------------------------

    def default_namespace(self) -> Optional[str]:
        return self._namespace

    def list(self, kind: Kind, namespace: Optional[str], selector: str = "",
             project: Optional[Projection] = None) -> list[dict]:
        """Every object, one paged LIST; restarted when the continue token expires (410)."""
        path = self.path(kind, namespace)
        for _ in range(_LIST_RESTARTS):
            items, expired = self._list_pages(path, selector, kind, namespace, project)
            if not expired:
                return items
        raise ClusterError(f"listing {kind.resource} kept failing: the list changed faster than it could be read")

    def get(self, kind: Kind, namespace: Optional[str], name: str) -> Optional[dict]:
        if _names.object_problem(kind, namespace, name) is not None:
            return None  # a name the API server refuses names no object (a poolRef a tenant wrote)
        try:
            return self.request("GET", self.path(kind, namespace, name), verb="get", kind=kind, namespace=namespace)
        except NotFound:
            return None

    # --- Writes (escape) ------------------------------------------------------------------

    def create(self, kind: Kind, namespace: Optional[str], body: dict, dry_run: bool = False) -> dict:
        return self.request("POST", self.path(kind, namespace), query=_dry(dry_run), body=body,
                            verb="create", kind=kind, namespace=namespace)

    def merge_patch(self, kind: Kind, namespace: Optional[str], name: str, patch: dict, dry_run: bool = False) -> dict:
        return self.request("PATCH", self.path(kind, namespace, name), query=_dry(dry_run), body=patch,
                            content_type="application/merge-patch+json",
                            verb="patch", kind=kind, namespace=namespace)

    def json_patch(self, kind: Kind, namespace: Optional[str], name: str, operations: builtins.list[dict],
                   dry_run: bool = False) -> dict:
        """A JSON patch (RFC 6902) of one object (find-flags --fix). Led by a ``test`` of
        /metadata/resourceVersion, the server applies it only to the version read, else answers 422."""
        return self.request("PATCH", self.path(kind, namespace, name), query=_dry(dry_run), body=operations,
                            content_type="application/json-patch+json",
                            verb="patch", kind=kind, namespace=namespace)

    def delete(self, kind: Kind, namespace: Optional[str], name: str, dry_run: bool = False,
               preconditions: Optional[dict] = None) -> dict:
        """``preconditions`` (``uid``, ``resourceVersion``): the server deletes only that object in
        that version, else answers 409, so an edit made since it was read is never lost."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions} if preconditions else None
        return self.request("DELETE", self.path(kind, namespace, name), query=_dry(dry_run), body=body,
                            verb="delete", kind=kind, namespace=namespace)

    def post(self, path: str, body: dict) -> dict:
        """A POST to a fixed path (SelfSubjectAccessReview)."""
        return self.request("POST", path, body=body, verb="create")

    # --- Plumbing ---------------------------------------------------------------------------

    def path(self, kind: Kind, namespace: Optional[str], name: Optional[str] = None) -> str:
        version = self.served_version(kind)
        segments = ["apis", kind.group, version] if kind.group else ["api", version]
        if kind.namespaced and namespace:
            _names.check_configured("namespace", namespace, _names.LABEL, "a request")
            segments += ["namespaces", namespace]
        if name:
            _names.check_configured(f"{kind.name} name", name, _names.rule_of(kind.name), "a request")
        segments.append(kind.plural)
        return request_path(*segments, *([name] if name else []))

    def served_version(self, kind: Kind) -> str:
        """The version of ``kind``'s group the server serves, found once by discovery."""
        if not kind.group or kind.group in ("apps", "batch"):
            return kind.versions[0]
        with self._discovery:
            if kind.group in self._discovery_errors:
                raise self._discovery_errors[kind.group]
            if kind.group not in self._versions:
                try:
                    self._versions[kind.group] = self._discover(kind)
                except KvdtypeError as error:
                    self._discovery_errors[kind.group] = error
                    raise
        version = self._versions[kind.group]
        if version is None:
            raise ClusterError(
                f"the API group {kind.group} ({'/'.join(kind.versions)}) is not served by this cluster: "
                "gpustack-operator is not installed, or is too old for this tool"
            )
        return version

    def _discover(self, kind: Kind) -> Optional[str]:
        try:
            group = self.request("GET", request_path("apis", kind.group), verb="discover")
        except NotFound:
            return None
        served = {v.get("version") for v in group.get("versions", []) if isinstance(v, dict)}
        return next((v for v in kind.versions if v in served), None)

    @contextmanager
    def within(self, deadline: Optional[float]) -> Iterator[None]:
        """Requests made inside end by ``deadline`` (a ``time.monotonic()`` value) at the latest."""
        previous, self._deadline = self._deadline, deadline
        try:
            yield
        finally:
            self._deadline = previous

    def _list_pages(self, path: str, selector: str, kind: Kind, namespace: Optional[str],
                    project: Optional[Projection]) -> tuple[builtins.list[dict], bool]:
        items: builtins.list[dict] = []
        query: dict[str, Any] = {"limit": PAGE_SIZE}
        if selector:
            query["labelSelector"] = selector
        seen: set[str] = set()  # continue tokens already followed: one met again is a loop
        for _ in range(self._max_pages):
            so_far = f" ({len(items)} so far)" if items else ""
            _progress.note(f"listing {kind.resource}{_where(kind, namespace)}{so_far}")
            try:
                page = self.request("GET", path, query=query, verb="list", kind=kind, namespace=namespace)
            except ApiError as error:
                if error.code == 410 and "continue" in query:
                    return [], True
                raise
            finally:
                _progress.done()
            objects = (i for i in _list_items(page, kind, namespace, path)
                       if isinstance(i, dict) and self._named_validly(kind, i))
            items.extend(map(project, objects) if project else objects)
            token = _continue_token(page)
            if not token:
                return items, False
            if token in seen:
                raise ClusterError(f"{_describe('list', kind, namespace, path)}: the API server answered a "
                                   f"continue token it had answered before, so the list would never end")
            seen.add(token)
            query["continue"] = token
        raise ClusterError(f"{_describe('list', kind, namespace, path)}: still not complete after {self._max_pages} "
                           f"pages of {PAGE_SIZE}, the most one LIST may take (set {MAX_PAGES_VARIABLE} for more)")

    def _named_validly(self, kind: Kind, obj: dict) -> bool:
        """Whether a listed object's name and namespace are ones the API server accepts: a proxy
        or a server that answers otherwise gets a finding, and the object is not judged."""
        metadata = obj.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        finding = _names.refusal(kind, metadata.get("namespace") or "", metadata.get("name"),
                                 f"the cluster's list of {kind.resource}")
        if finding is not None:
            self.findings.append(finding)
        return finding is None

    def request(self, method: str, path: str, query: Optional[dict] = None, body: Any = None,
                content_type: str = "application/json", verb: str = "", kind: Optional[Kind] = None,
                namespace: Optional[str] = None) -> dict:
        """One API call answered as plain JSON; 429 (and 5xx on reads) retried with backoff.

        The request timeout bounds the whole call, retries and their waits included (kubectl's
        bounds each attempt): past it, the call fails naming itself.
        """
        if verb == "list":  # a LIST's pages say more (see _list_pages)
            return self._request(method, path, query, body, content_type, verb, kind, namespace)
        _progress.note(_describe(verb or method.lower(), kind, namespace, path))
        try:
            return self._request(method, path, query, body, content_type, verb, kind, namespace)
        finally:
            _progress.done()

    def _request(self, method: str, path: str, query: Optional[dict], body: Any, content_type: str, verb: str,
                 kind: Optional[Kind], namespace: Optional[str]) -> dict:
        url = self._configuration.host + _encoded(path) + (f"?{urlencode(query)}" if query else "")
        headers = HTTPHeaderDict(self._headers)
        if body is not None:
            headers["Content-Type"] = content_type
        clock = _Clock(self._timeout, self._deadline, _describe(verb or method.lower(), kind, namespace, path),
                       self._shown_host)
        for attempt in range(1, ATTEMPTS + 1):
            headers.update(self._auth_headers())
            with clock.watching():  # connect, headers and body: all of it within what is left
                response = self._send(method, url, headers, body, clock)
                data = self._read(response, clock)
            status = response.status
            if status < 300:
                return _json(data)
            retryable = status == 429 or (method == "GET" and status in _RETRY_READ)
            if retryable and attempt < ATTEMPTS:
                clock.sleep(_backoff(attempt, response.headers.get("Retry-After")))
                continue
            raise _api_error(status, data, verb or method.lower(), kind, namespace, path)
        raise AssertionError("unreachable")

    def _auth_headers(self) -> dict:
        # auth_settings() runs the client's refresh hook, which re-runs exec plugins when due.
        with self._credentials:
            if self._credentials_failed is not None:
                raise self._credentials_failed
            try:
                with _exec_bounded(self._timeout):
                    settings = self._configuration.auth_settings().get("BearerToken")
            except KvdtypeError as failure:
                self._credentials_failed = failure
                raise
        value = settings.get("value") if settings else None
        if breaks_header(value):  # an exec plugin's or auth provider's token: never echoed
            raise KvdtypeError("the credential the kubeconfig user's exec plugin or auth provider returned holds a "
                               "line break (CR or LF) or a NUL, which no HTTP header may carry (it is not shown)")
        return {"Authorization": value} if value else {}

    def _send(self, method: str, url: str, headers: HTTPHeaderDict, body: Any, clock: "_Clock") -> Any:
        self.request_count += 1
        try:
            return self._rest.request(method, url, headers=headers, body=body, _request_timeout=clock.remaining())
        except _Cut:
            raise clock.timed_out() from None
        except ApiException as error:  # the client turns TLS failures into status 0
            clock.check_timeout(None)
            raise ClusterError(f"TLS failure talking to {self._shown_host}: "
                               f"{_first_line(error.reason)}") from None
        except urllib3.exceptions.MaxRetryError as error:
            clock.check_timeout(error.reason)
            raise ClusterError(_connection_message(self._shown_host, error.reason)) from None
        except urllib3.exceptions.HTTPError as error:
            clock.check_timeout(error)
            raise ClusterError(_connection_message(self._shown_host, error)) from None

    def _read(self, response: Any, clock: "_Clock") -> bytes:
        """The body (the client leaves it unread): reading it can time out or break off too."""
        try:
            return response.read()
        except (urllib3.exceptions.HTTPError, OSError) as error:
            clock.check_timeout(getattr(error, "reason", None) or error)
            raise ClusterError(_connection_message(self._shown_host, error)) from None


def request_path(*segments: str) -> str:
    """The one way a request path is built: each segment percent-encoded whole (a ``/``, ``?``,
    ``#`` or ``%`` in a name stays inside its segment), and an empty or dot segment refused,
    which would otherwise steer the request elsewhere (names are validated before they get here:
    this is the last line)."""
    for segment in segments:
        if segment in ("", ".", ".."):
            raise KvdtypeError(f"refusing to build a request path with the segment {segment!r}")
    return "/" + "/".join(quote(segment, safe="") for segment in segments)


def _encoded(path: str) -> str:
    """``path`` as ``request_path`` would build it from its own segments: every request passes
    here, so a path made any other way cannot carry a query, a fragment or a dot segment."""
    return request_path(*(unquote(segment) for segment in path.lstrip("/").split("/")))


# --- The request timeout, for the whole request ----------------------------------------------
#
# urllib3's timeouts bound each socket operation: a server that sends its headers or body a byte
# at a time never lets one expire, and holds the request as long as it likes. So while a request
# runs (``_Clock.watching``), the connection it was given is cut (its socket shut down) when the
# time is up, and the failure that follows is said as the timeout it is. The pools of the
# client's PoolManager are subclasses that tell the request's clock which connection it got.

_IN_FLIGHT = threading.local()  # .clock: the _Clock of the request this thread is making


class _Cut(Exception):
    """The clock ran out before urllib3 took a connection (its quiet retry): not sent again.
    Not an urllib3 exception, so urllib3 does not catch it."""


class _WatchedPool(urllib3.HTTPConnectionPool):
    def _get_conn(self, timeout: Optional[float] = None) -> Any:
        connection = super()._get_conn(timeout)
        clock = getattr(_IN_FLIGHT, "clock", None)
        if clock is not None:
            clock.attach(connection)
        return connection


class _WatchedHTTPSPool(urllib3.HTTPSConnectionPool, _WatchedPool):
    pass


def _watch_connections(pool_manager: Any) -> None:
    pool_manager.pool_classes_by_scheme = {"http": _WatchedPool, "https": _WatchedHTTPSPool}


class _Clock:
    """The time one request (all its attempts) may take: the request timeout and any deadline."""

    def __init__(self, timeout: Optional[float], deadline: Optional[float], what: str, host: str) -> None:
        self.start = time.monotonic()
        self.timeout = timeout
        ends = [t for t in (timeout and self.start + timeout, deadline) if t]
        self.end: Optional[float] = min(ends) if ends else None
        self.by_deadline = deadline is not None and self.end == deadline
        self.what = what
        self.host = host
        self._lock = threading.Lock()
        self._connection: Any = None
        self._cut = False

    def remaining(self) -> Optional[float]:
        """Seconds left for the next attempt (None: no limit); a spent budget fails now."""
        if self.end is None:
            return None
        left = self.end - time.monotonic()
        if left <= 0:
            raise self.timed_out()
        return left

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Inside, this thread's request loses its connection when the time is up."""
        left = self.remaining()
        if left is None:
            yield
            return
        timer = threading.Timer(left, self._cut_connection)
        timer.daemon = True
        _IN_FLIGHT.clock = self
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            _IN_FLIGHT.clock = None
            with self._lock:
                self._connection = None

    def attach(self, connection: Any) -> None:
        """The connection urllib3 took for this request (again, on its quiet retry)."""
        with self._lock:
            if self._cut:
                raise _Cut()
            self._connection = connection

    def _cut_connection(self) -> None:
        with self._lock:
            self._cut = True
            sock = getattr(self._connection, "sock", None)
        if sock is not None:
            try:  # socket.socket's own: an SSLSocket's would drop its TLS state under the reading thread
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def sleep(self, seconds: float) -> None:
        """Back off before a retry, unless the wait would outlast the budget."""
        left = self.remaining()
        if left is not None and seconds >= left:
            raise self.timed_out()
        time.sleep(seconds)

    def check_timeout(self, reason: object) -> None:
        """A failure that is the time running out (a socket timeout, or the cut) is said as that."""
        if self._cut:
            raise self.timed_out() from None
        if isinstance(reason, (urllib3.exceptions.TimeoutError, TimeoutError)) and \
                not isinstance(reason, urllib3.exceptions.NewConnectionError):
            raise self.timed_out() from None

    def timed_out(self) -> RequestTimeout:
        if self.by_deadline:
            return RequestTimeout(f"{self.what}: the cluster at {self.host} did not answer before the --wait deadline")
        return RequestTimeout(f"{self.what}: the cluster at {self.host} did not answer within "
                              f"{_seconds(self.timeout or 0)} (--request-timeout; 0 waits without limit)")


def _describe(verb: str, kind: Optional[Kind], namespace: Optional[str], path: str) -> str:
    """``list pods in namespace "ml"``: a request as error messages name it."""
    what = kind.resource if kind else path
    return f"{verb} {what}{_where(kind, namespace)}"


def _where(kind: Optional[Kind], namespace: Optional[str]) -> str:
    if not kind or not kind.namespaced:
        return ""
    return f' in namespace "{namespace}"' if namespace else " in all namespaces"


def _seconds(seconds: float) -> str:
    return f"{seconds:g}s"


def _dry(dry_run: bool) -> Optional[dict]:
    return {"dryRun": "All"} if dry_run else None


def _list_items(page: dict, kind: Kind, namespace: Optional[str], path: str) -> builtins.list:
    """A LIST page's items; an answer that is not a List of ``kind`` is no answer (an empty one
    would read as "none exist": every consumer told its Binding is missing)."""
    items = page.get("items")
    if page.get("kind") != f"{kind.name}List" or not isinstance(items, builtins.list):
        answered = page.get("kind")
        shown = f"kind {_first_line(answered)[:60]!r}" if isinstance(answered, str) and answered else "no kind"
        listed = "" if isinstance(items, builtins.list) else ", no list of items"
        raise ClusterError(f"{_describe('list', kind, namespace, path)}: the API server's answer is not a "
                           f"{kind.name}List ({shown}{listed})")
    return items


def _continue_token(page: dict) -> Optional[str]:
    metadata = page.get("metadata")
    token = metadata.get("continue") if isinstance(metadata, dict) else None
    return token if isinstance(token, str) and token else None


def _json(data: bytes) -> dict:
    try:
        parsed = json.loads(data or b"{}")
    except ValueError:
        raise ClusterError("the API server answered with something that is not JSON") from None
    return parsed if isinstance(parsed, dict) else {}


def _backoff(attempt: int, retry_after: Optional[str]) -> float:
    try:
        if retry_after is not None:
            return min(max(float(retry_after), 0.0), _MAX_RETRY_AFTER)
    except ValueError:
        pass
    return min(0.25 * 2 ** (attempt - 1), _MAX_RETRY_AFTER)


def _first_line(text: object) -> str:
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown error"


def _connection_message(host: str, reason: object) -> str:
    if isinstance(reason, urllib3.exceptions.SSLError):
        return f"TLS failure talking to {host}: {reason}"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):  # a ConnectTimeoutError subclass
        pass
    elif isinstance(reason, (urllib3.exceptions.ConnectTimeoutError, urllib3.exceptions.ReadTimeoutError)):
        return f"the cluster at {host} did not answer in time"
    detail = str(reason).split(": ", 1)[-1] if reason else "connection failed"
    return f"cannot reach the cluster at {host}: {detail}"


def _api_error(status: int, data: bytes, verb: str, kind: Optional[Kind], namespace: Optional[str],
               path: str) -> ApiError:
    try:
        body = json.loads(data or b"{}")
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    server_message = body.get("message") or ""
    reason = body.get("reason") or _REASONS.get(status, "")
    what = kind.resource if kind else path
    where = _where(kind, namespace)
    if status == 401:
        message = "the cluster refused your credentials (401 Unauthorized): log in again or check the kubeconfig user"
    elif status == 403:
        message = f"you may not {verb} {what}{where} (403 Forbidden)" + (
            f": {server_message}" if server_message else "")
    elif status == 404:
        message = f"{what} not found" + (f": {server_message}" if server_message else "")
    else:
        message = f"{verb} {what}{where} failed ({status} {reason})" + (f": {server_message}" if server_message else "")
    error_class = {404: NotFound, 409: Conflict}.get(status, ApiError)
    return error_class(message, status, reason)


# --- Kubeconfig, resolved like kubectl -----------------------------------------------------

Headers = list[tuple[str, str]]
_CLUSTER_PATHS = ("certificate-authority",)
_USER_PATHS = ("client-certificate", "client-key", "tokenFile")


def _load_configuration(options: ConnectionOptions, environ: dict) -> tuple[Configuration, str, str, Headers]:
    """(client configuration, the context's namespace, a description, impersonation headers);
    never writes a file. The flags override the kubeconfig as kubectl's do."""
    configuration = Configuration()
    # One quiet retry of a dropped connection, never of a read that timed out: the request
    # timeout bounds the whole call (see _Clock), so urllib3 must not start the clock again.
    # Nor does it honour Retry-After itself (it would sleep for whatever the server asks): the
    # plugin's retries do, within what is left of the request timeout.
    configuration.retries = urllib3.Retry(total=1, read=0, respect_retry_after_header=False)
    paths = _kubeconfig_paths(options.kubeconfig, environ)
    if not paths and not options.server:
        return _in_cluster(configuration, options, environ)
    documents = [(path, _read_kubeconfig(path)) for path in paths]
    context_name = options.context or next(
        (d.get("current-context") for _, d in documents if d.get("current-context")), None)
    entry: dict = {}
    if context_name:
        found = _named(documents, "contexts", context_name)
        if found is None:
            raise KvdtypeError(f'the context "{context_name}" does not exist in the kubeconfig ({", ".join(paths)})')
        entry = _mapping(found[1].get("context"))
    elif not (options.server or options.cluster):
        raise KvdtypeError(f"the kubeconfig ({', '.join(paths)}) sets no current context: pass --context or --server")
    cluster_name = options.cluster or entry.get("cluster") or ""
    user_name = options.user or entry.get("user") or ""
    if options.user and _named(documents, "users", options.user) is None:  # exit 3, as an unknown --context
        raise KvdtypeError(f'auth info "{options.user}" does not exist in the kubeconfig ({", ".join(paths)})')
    cluster, _ = _entry(documents, "clusters", cluster_name, "cluster", _CLUSTER_PATHS)
    user, user_dir = _entry(documents, "users", user_name, "user", _USER_PATHS)
    if options.cluster and not options.server and _named(documents, "clusters", options.cluster) is None:
        raise KvdtypeError(f'no server found for cluster "{options.cluster}": the kubeconfig '
                           f'({", ".join(paths)}) has no such cluster')
    cluster, user = _override_cluster(cluster, options), _override_user(_read_token_file(user), options)
    refusals = _refusals(cluster_name, cluster, user_name, user)
    if refusals:
        raise (UsageError if options.overrides else KvdtypeError)("; ".join(refusals))
    _refuse_line_breaks(user, user_name)
    config = {"clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}],
              "contexts": [{"name": "kvdtype", "context": {"cluster": "c", "user": "u"}}]}
    what = f'context "{context_name}"' if context_name else f"the server {without_password(str(cluster.get('server')))}"
    try:
        with _exec_bounded(options.request_timeout):
            KubeConfigLoader(config_dict=config, active_context="kvdtype",
                             config_base_path=user_dir).load_and_set(configuration)
    except (ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise KvdtypeError(f"cannot use the {what} of the kubeconfig: {_first_line(error)}") from None
    namespace = entry.get("namespace") or "default"
    _names.check_configured("namespace", namespace, _names.LABEL, f"the {what} of the kubeconfig")
    return configuration, namespace, what, _impersonation(user)


def _read_token_file(user: dict) -> dict:
    """The user with its ``tokenFile`` read into ``token``, surrounding blanks trimmed as kubectl
    trims them (``echo "$TOKEN" > file`` ends the file with a newline, no header may hold one).
    An inline token wins over the file, as in kubectl; an unreadable file is left to the client's
    own message."""
    path = user.get("tokenFile")
    if user.get("token") or not isinstance(path, str) or not path:
        return user
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return user
    trimmed = {key: value for key, value in user.items() if key != "tokenFile"}
    return {**trimmed, "token": token}


#: The user settings sent as HTTP header values.
_HEADER_SETTINGS = ("token", "as", "as-uid", "as-groups", "as-user-extra")


def _refuse_line_breaks(user: dict, user_name: str) -> None:
    """A kubeconfig credential or impersonation value with a CR, LF or NUL: one sentence naming
    the setting, never the value (exit 3)."""
    for key in _HEADER_SETTINGS:
        if any(breaks_header(text) for text in _strings(user.get(key))):
            raise KvdtypeError(f'the {key} of the kubeconfig user "{user_name}" holds a line break (CR or LF) or a '
                               "NUL, which no HTTP header may carry (the value is not shown)")


def _strings(value: Any) -> Iterator[str]:
    """Every string in a setting: itself, a list's items, a mapping's keys and values (as-user-extra)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _mapping(value: Any) -> dict:
    """A kubeconfig section that should be a mapping; anything else (a hand-edited ``3``) reads as empty."""
    return value if isinstance(value, dict) else {}


def _named(documents: list[tuple[str, dict]], section: str, name: str) -> Optional[tuple[str, dict]]:
    """(file, entry) of the first entry of that name: like kubectl, the first file to set one wins."""
    for path, document in documents:
        for item in _listed(document.get(section)):
            if isinstance(item, dict) and item.get("name") == name:
                return path, item
    return None


def _entry(documents: list[tuple[str, dict]], section: str, name: str, key: str,
           path_keys: tuple[str, ...]) -> tuple[dict, str]:
    """A copy of a cluster's or user's settings, its file paths made absolute against its own
    kubeconfig file (so flags' paths, relative to the working directory, can sit beside them)."""
    found = _named(documents, section, name) if name else None
    if found is None:
        return {}, os.getcwd()
    base = os.path.dirname(os.path.abspath(found[0]))
    settings = dict(_mapping(found[1].get(key)))
    for path_key in path_keys:
        if isinstance(settings.get(path_key), str) and settings[path_key]:
            settings[path_key] = os.path.join(base, os.path.expanduser(settings[path_key]))
    return settings, base


def _override_cluster(cluster: dict, options: ConnectionOptions) -> dict:
    """kubectl's rules: --certificate-authority or --insecure-skip-tls-verify replaces all three of
    the kubeconfig's CA file, CA data and skip setting; --server also drops its tls-server-name."""
    cluster = dict(cluster)
    if options.server:
        cluster["server"] = options.server
    if options.insecure_skip_tls_verify or options.certificate_authority:
        cluster.pop("certificate-authority-data", None)
        cluster.pop("certificate-authority", None)
        cluster["insecure-skip-tls-verify"] = options.insecure_skip_tls_verify
        if options.certificate_authority:
            cluster["certificate-authority"] = os.path.abspath(options.certificate_authority)
    if options.tls_server_name or options.server:
        cluster.pop("tls-server-name", None)
        if options.tls_server_name:
            cluster["tls-server-name"] = options.tls_server_name
    return cluster


def _override_user(user: dict, options: ConnectionOptions) -> dict:
    """Each flag replaces the same setting. A token or basic auth from a flag also sets aside the
    user's exec plugin and auth provider: kubectl sends the flag's credentials, never theirs."""
    user = dict(user)
    replaced = {"token": options.token, "client-certificate": _absolute(options.client_certificate),
                "client-key": _absolute(options.client_key), "username": options.username,
                "password": options.password, "as": options.impersonate, "as-uid": options.impersonate_uid,
                "as-groups": list(options.impersonate_groups) or None}
    user.update({key: value for key, value in replaced.items() if value})
    if options.token:
        user.pop("tokenFile", None)
    if options.token or options.username or options.password:
        user.pop("exec", None)
        user.pop("auth-provider", None)
    if user.get("username") or user.get("password"):  # the client needs both; kubectl defaults either to ""
        user.setdefault("username", "")
        user.setdefault("password", "")
    return user


def _absolute(path: Optional[str]) -> Optional[str]:
    return os.path.abspath(os.path.expanduser(path)) if path else None


def _refusals(cluster_name: str, cluster: dict, user_name: str, user: dict) -> list[str]:
    """What kubectl refuses to run with, in kubectl's words (its kubeconfig validation)."""
    errors = []
    if not cluster.get("server"):
        errors.append(f'no server found for cluster "{cluster_name}"' if cluster_name
                      else "no server found: pass --server")
    if cluster.get("certificate-authority") and cluster.get("certificate-authority-data"):
        errors.append(f"certificate-authority-data and certificate-authority are both specified for {cluster_name}. "
                      "certificate-authority-data will override.")
    errors += _unreadable(cluster, "certificate-authority", "certificate-authority", cluster_name)
    has_ca = cluster.get("certificate-authority") or cluster.get("certificate-authority-data")
    if cluster.get("insecure-skip-tls-verify") and has_ca:
        errors.append("specifying a root certificates file with the insecure flag is not allowed")
    if user.get("client-certificate") or user.get("client-certificate-data"):
        if user.get("client-certificate") and user.get("client-certificate-data"):
            errors.append(f"client-cert-data and client-cert are both specified for {user_name}. "
                          "client-cert-data will override.")
        if user.get("client-key") and user.get("client-key-data"):
            errors.append(f"client-key-data and client-key are both specified for {user_name}; "
                          "client-key-data will override")
        if not (user.get("client-key") or user.get("client-key-data")):
            errors.append(f"client-key-data or client-key must be specified for {user_name} to use the clientCert "
                          "authentication method.")
        errors += _unreadable(user, "client-certificate", "client-cert", user_name)
        errors += _unreadable(user, "client-key", "client-key", user_name)
    methods = (["token"] if user.get("token") else []) + (
        ["basicAuth"] if user.get("username") or user.get("password") else [])
    if len(methods) > 1:
        errors.append(f"more than one authentication method found for {user_name}; "
                      f"found [{' '.join(methods)}], only one is allowed")
    if (user.get("as-uid") or user.get("as-groups") or user.get("as-user-extra")) and not user.get("as"):
        errors.append(f"requesting uid, groups or user-extra for {user_name} without impersonating a user")
    return errors


def _unreadable(settings: dict, key: str, label: str, owner: str) -> list[str]:
    path = settings.get(key)
    if not path:
        return []
    try:
        with open(path, "rb"):
            return []
    except OSError as error:
        reason = (error.strerror or str(error)).lower()
        return [f"unable to read {label} {path} for {owner} due to open {path}: {reason}"]


def _impersonation(user: dict) -> Headers:
    """The impersonation headers kubectl sends for the user (flags already merged in)."""
    if not user.get("as"):
        return []
    headers = [("Impersonate-User", str(user["as"]))]
    headers += [("Impersonate-Group", str(group)) for group in _listed(user.get("as-groups"))]
    if user.get("as-uid"):
        headers.append(("Impersonate-Uid", str(user["as-uid"])))
    for key, values in _mapping(user.get("as-user-extra")).items():
        for value in values if isinstance(values, list) else [values]:
            headers.append((f"Impersonate-Extra-{key}", str(value)))
    return headers


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else []


def _kubeconfig_paths(explicit: Optional[str], environ: dict) -> list[str]:
    """--kubeconfig, else the KUBECONFIG list (read now, not at import), else ~/.kube/config."""
    if explicit:
        if not os.path.isfile(explicit):
            raise KvdtypeError(f"the kubeconfig {explicit} does not exist")
        return [explicit]
    listed = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        existing = [os.path.expanduser(p) for p in listed if os.path.isfile(os.path.expanduser(p))]
        if not existing:
            raise KvdtypeError(f"none of the files in KUBECONFIG exist ({environ['KUBECONFIG']})")
        return existing
    home = os.path.join(os.path.expanduser(environ.get("HOME") or "~"), ".kube", "config")
    return [home] if os.path.isfile(home) else []


def context_names(explicit: Optional[str], environ: dict) -> list[str]:
    """Every context of the kubeconfig (--kubeconfig, else KUBECONFIG, else ~/.kube/config), in
    file order, each once (the first file to name one wins, as kubectl merges them)."""
    paths = _kubeconfig_paths(explicit, environ)
    if not paths:
        raise KvdtypeError("no kubeconfig found (~/.kube/config, KUBECONFIG, --kubeconfig): a fleet run needs "
                           "the contexts of one")
    names: dict[str, None] = {}
    for path in paths:
        for entry in _listed(_read_kubeconfig(path).get("contexts")):
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                names.setdefault(entry["name"])
    return list(names)


def _read_kubeconfig(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except (OSError, UnicodeDecodeError) as error:
        raise KvdtypeError(f"cannot read the kubeconfig {path}: {getattr(error, 'strerror', None) or error}") from None
    except yaml.YAMLError:
        raise KvdtypeError(f"the kubeconfig {path} is not valid YAML") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise KvdtypeError(f"the kubeconfig {path} is not a kubeconfig (expected a mapping)")
    return document


def _in_cluster(configuration: Configuration, options: ConnectionOptions,
                environ: dict) -> tuple[Configuration, str, str, Headers]:
    if not environ.get("KUBERNETES_SERVICE_HOST"):
        raise KvdtypeError("no kubeconfig found (~/.kube/config, KUBECONFIG, --kubeconfig) and not running "
                           "in a cluster: pass --kubeconfig, or --server")
    try:
        load_incluster_config(client_configuration=configuration)
    except ConfigException as error:
        raise KvdtypeError(f"cannot use the in-cluster service account: {error}") from None
    # kubectl in a pod: --token and --certificate-authority replace the service account's.
    if options.token:
        configuration.api_key = {"BearerToken": f"Bearer {options.token}"}
        configuration.refresh_api_key_hook = None
    if options.certificate_authority:
        configuration.ssl_ca_cert = _absolute(options.certificate_authority)
    user = _override_user({}, options)
    if user.get("as-uid") or user.get("as-groups"):
        if not user.get("as"):
            raise UsageError("requesting uid, groups or user-extra without impersonating a user")
    try:
        with open(_IN_CLUSTER_NAMESPACE, encoding="utf-8") as handle:
            namespace = handle.read().strip() or "default"
    except OSError:
        namespace = "default"
    _names.check_configured("namespace", namespace, _names.LABEL, _IN_CLUSTER_NAMESPACE)
    return configuration, namespace, "the in-cluster service account", _impersonation(user)

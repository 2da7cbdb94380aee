"""The one place that talks to a cluster, through the official ``kubernetes`` client.

The client is used for what it does well (kubeconfig, exec credential plugins, TLS, the HTTP
pool); responses are read as plain JSON, never as generated model classes, because lists can hold
10,000+ objects. Importing this module imports the client, so only a live run does it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional
from urllib.parse import urlencode

import urllib3
import yaml
from kubernetes import config as kube_config
from kubernetes.client import Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTClientObject
from kubernetes.config.config_exception import ConfigException

from kubectl_kvdtype import __version__, _progress
from kubectl_kvdtype._sources import Kind, Projection
from kubectl_kvdtype._status import ApiError, ClusterError, Conflict, KvdtypeError, NotFound, RequestTimeout

PAGE_SIZE = 500
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
    """The kubectl-style flags that say which cluster and who."""

    kubeconfig: Optional[str] = None
    context: Optional[str] = None
    request_timeout: Optional[float] = None
    impersonate: Optional[str] = None


class ClusterSource:
    """A ``Source`` over a live API server, plus the few writes ``escape`` needs."""

    #: LISTs of different kinds may run side by side (``_sources.list_many``): each waits on the
    #: network and the server most of its time, and the HTTP pool is thread-safe.
    parallel = True

    def __init__(self, options: ConnectionOptions, environ: Optional[dict] = None) -> None:
        environ = dict(os.environ if environ is None else environ)
        self._configuration, self._namespace, self.description = _load_configuration(options, environ)
        self._rest = RESTClientObject(self._configuration)
        self._timeout = options.request_timeout
        #: A time (time.monotonic) no request may outlive, set by ``within`` (verify --wait).
        self._deadline: Optional[float] = None
        self._headers = {"Accept": "application/json", "User-Agent": f"kubectl-kvdtype/{__version__}"}
        if options.impersonate:
            self._headers["Impersonate-User"] = options.impersonate
        self._versions: dict[str, Optional[str]] = {}
        self._discovery = threading.Lock()  # one discovery per group, even from parallel LISTs
        self._discovery_errors: dict[str, KvdtypeError] = {}  # met once, not again per waiting LIST
        self.request_count = 0

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

    def delete(self, kind: Kind, namespace: Optional[str], name: str, dry_run: bool = False) -> dict:
        return self.request("DELETE", self.path(kind, namespace, name), query=_dry(dry_run),
                            verb="delete", kind=kind, namespace=namespace)

    def post(self, path: str, body: dict) -> dict:
        """A POST to a fixed path (SelfSubjectAccessReview)."""
        return self.request("POST", path, body=body, verb="create")

    # --- Plumbing ---------------------------------------------------------------------------

    def path(self, kind: Kind, namespace: Optional[str], name: Optional[str] = None) -> str:
        version = self.served_version(kind)
        base = f"/apis/{kind.group}/{version}" if kind.group else f"/api/{version}"
        if kind.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{kind.plural}"
        return f"{base}/{name}" if name else base

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
            group = self.request("GET", f"/apis/{kind.group}", verb="discover")
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
                    project: Optional[Projection]) -> tuple[list[dict], bool]:
        items: list[dict] = []
        query: dict[str, Any] = {"limit": PAGE_SIZE}
        if selector:
            query["labelSelector"] = selector
        while True:
            _progress.note(f"listing {kind.resource}{_where(kind, namespace)}" + (f" ({len(items)} so far)" if items else ""))
            try:
                page = self.request("GET", path, query=query, verb="list", kind=kind, namespace=namespace)
            except ApiError as error:
                if error.code == 410 and "continue" in query:
                    return [], True
                raise
            finally:
                _progress.done()
            objects = (i for i in page.get("items") or [] if isinstance(i, dict))
            items.extend(map(project, objects) if project else objects)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items, False
            query["continue"] = token

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
        url = self._configuration.host + path + (f"?{urlencode(query)}" if query else "")
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = content_type
        clock = _Clock(self._timeout, self._deadline, _describe(verb or method.lower(), kind, namespace, path),
                       self._configuration.host)
        for attempt in range(1, ATTEMPTS + 1):
            headers.update(self._auth_headers())
            response = self._send(method, url, headers, body, clock)
            status = response.status
            if status < 300:
                return _json(self._read(response, clock))
            retryable = status == 429 or (method == "GET" and status in _RETRY_READ)
            if retryable and attempt < ATTEMPTS:
                clock.sleep(_backoff(attempt, response.headers.get("Retry-After")))
                continue
            raise _api_error(status, self._read(response, clock), verb or method.lower(), kind, namespace, path)
        raise AssertionError("unreachable")

    def _auth_headers(self) -> dict:
        # auth_settings() runs the client's refresh hook, which re-runs exec plugins when due.
        settings = self._configuration.auth_settings().get("BearerToken")
        return {"Authorization": settings["value"]} if settings and settings.get("value") else {}

    def _send(self, method: str, url: str, headers: dict, body: Any, clock: "_Clock") -> Any:
        self.request_count += 1
        try:
            return self._rest.request(method, url, headers=headers, body=body, _request_timeout=clock.remaining())
        except ApiException as error:  # the client turns TLS failures into status 0
            raise ClusterError(f"TLS failure talking to {self._configuration.host}: {_first_line(error.reason)}") from None
        except urllib3.exceptions.MaxRetryError as error:
            clock.check_timeout(error.reason)
            raise ClusterError(_connection_message(self._configuration.host, error.reason)) from None
        except urllib3.exceptions.HTTPError as error:
            clock.check_timeout(error)
            raise ClusterError(_connection_message(self._configuration.host, error)) from None

    def _read(self, response: Any, clock: "_Clock") -> bytes:
        """The body (the client leaves it unread): reading it can time out or break off too."""
        try:
            return response.read()
        except (urllib3.exceptions.HTTPError, OSError) as error:
            clock.check_timeout(getattr(error, "reason", None) or error)
            raise ClusterError(_connection_message(self._configuration.host, error)) from None


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

    def remaining(self) -> Optional[float]:
        """Seconds left for the next attempt (None: no limit); a spent budget fails now."""
        if self.end is None:
            return None
        left = self.end - time.monotonic()
        if left <= 0:
            raise self._timed_out()
        return left

    def sleep(self, seconds: float) -> None:
        """Back off before a retry, unless the wait would outlast the budget."""
        left = self.remaining()
        if left is not None and seconds >= left:
            raise self._timed_out()
        time.sleep(seconds)

    def check_timeout(self, reason: object) -> None:
        if isinstance(reason, (urllib3.exceptions.TimeoutError, TimeoutError)) and \
                not isinstance(reason, urllib3.exceptions.NewConnectionError):
            raise self._timed_out() from None

    def _timed_out(self) -> RequestTimeout:
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


def _api_error(status: int, data: bytes, verb: str, kind: Optional[Kind], namespace: Optional[str], path: str) -> ApiError:
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
        message = f"you may not {verb} {what}{where} (403 Forbidden)" + (f": {server_message}" if server_message else "")
    elif status == 404:
        message = f"{what} not found" + (f": {server_message}" if server_message else "")
    else:
        message = f"{verb} {what}{where} failed ({status} {reason})" + (f": {server_message}" if server_message else "")
    error_class = {404: NotFound, 409: Conflict}.get(status, ApiError)
    return error_class(message, status, reason)


# --- Kubeconfig, resolved like kubectl -----------------------------------------------------

def _load_configuration(options: ConnectionOptions, environ: dict) -> tuple[Configuration, str, str]:
    """(client configuration, the context's namespace, a description) — never writes a file."""
    configuration = Configuration()
    # One quiet retry of a dropped connection, never of a read that timed out: the request
    # timeout bounds the whole call (see _Clock), so urllib3 must not start the clock again.
    configuration.retries = urllib3.Retry(total=1, read=0)
    paths = _kubeconfig_paths(options.kubeconfig, environ)
    if not paths:
        return _in_cluster(configuration, environ)
    documents = [(path, _read_kubeconfig(path)) for path in paths]
    context = options.context or next((d.get("current-context") for _, d in documents if d.get("current-context")), None)
    if not context:
        raise KvdtypeError(f"the kubeconfig ({', '.join(paths)}) sets no current context: pass --context")
    entry = next((c for _, d in documents for c in _listed(d.get("contexts"))
                  if isinstance(c, dict) and c.get("name") == context), None)
    if entry is None:
        raise KvdtypeError(f'the context "{context}" does not exist in the kubeconfig ({", ".join(paths)})')
    try:
        kube_config.load_kube_config(config_file=os.pathsep.join(paths), context=context,
                                     client_configuration=configuration, persist_config=False)
    except (ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise KvdtypeError(f'cannot use the context "{context}" of the kubeconfig: {_first_line(error)}') from None
    context_fields = entry.get("context")
    namespace = (context_fields.get("namespace") if isinstance(context_fields, dict) else None) or "default"
    if not isinstance(namespace, str):
        raise KvdtypeError(f'the context "{context}" of the kubeconfig has a namespace that is not a string')
    return configuration, namespace, f'context "{context}"'


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


def _in_cluster(configuration: Configuration, environ: dict) -> tuple[Configuration, str, str]:
    if not environ.get("KUBERNETES_SERVICE_HOST"):
        raise KvdtypeError("no kubeconfig found (~/.kube/config, KUBECONFIG, --kubeconfig) and not running in a cluster")
    try:
        kube_config.load_incluster_config(client_configuration=configuration)
    except ConfigException as error:
        raise KvdtypeError(f"cannot use the in-cluster service account: {error}") from None
    try:
        with open(_IN_CLUSTER_NAMESPACE, encoding="utf-8") as handle:
            namespace = handle.read().strip() or "default"
    except OSError:
        namespace = "default"
    return configuration, namespace, "the in-cluster service account"

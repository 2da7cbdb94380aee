"""The one place that talks to a cluster, through the official ``kubernetes`` client.

The client is used for what it does well (kubeconfig, exec credential plugins, TLS, the HTTP
pool); responses are read as plain JSON, never as generated model classes, because lists can hold
10,000+ objects. Importing this module imports the client (only the parts used, see
"The kubernetes client" below), so only a live run does it.
"""

from __future__ import annotations

import builtins
import http
import os
import re
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional
from urllib.parse import quote, unquote, urlencode

import urllib3
from urllib3 import HTTPHeaderDict

from kubectl_kvdtype import __version__
from kubectl_kvdtype._kits import bounded as _bounded
from kubectl_kvdtype._kits import progress as _progress
from kubectl_kvdtype._kits import settings as _settings
from kubectl_kvdtype._kits import threads
from kubectl_kvdtype._kits.display import cut
from kubectl_kvdtype._kits.report import Finding
from kubectl_kvdtype._kits.secrets import HEADER_REFUSAL, breaks_header, without_password
from kubectl_kvdtype._kits.status import (
    ApiError,
    ClusterError,
    Conflict,
    KvdtypeError,
    NotFound,
    NotServed,
    RequestTimeout,
)
from kubectl_kvdtype._sources import names as _names
from kubectl_kvdtype._sources.client import ApiException, RESTClientObject
from kubectl_kvdtype._sources.credentials import _exec_bounded, _first_line, _seconds
from kubectl_kvdtype._sources.kinds import FIELD_MANAGER, SETTINGS_GROUP, WORKER_GROUP, Kind, Projection
from kubectl_kvdtype._sources.kubeconfig import ConnectionOptions, Resolved, configure, resolve

PAGE_SIZE = 500
#: Pages one LIST may take before it is abandoned as endless: 500,000 objects at PAGE_SIZE, five
#: times a 100,000-Pod cluster; ``MAX_PAGES_VARIABLE`` sets another (docs/reference.md, "Limits").
MAX_PAGES: int = _settings.MAX_PAGES.default
MAX_PAGES_VARIABLE = _settings.MAX_PAGES.name
#: Attempts for a request answered 429 or 5xx (reads), or 429 (writes, which a 5xx may have done).
ATTEMPTS = 4
_RETRY_READ = {429, 500, 502, 503, 504}
_MAX_RETRY_AFTER = 10.0
#: Reads of one LIST from its first page when its continue token expires (410 Expired: the server
#: compacted the revision the list was reading, docs/reference.md, "Limits").
LIST_READS = 3
#: How kube-apiserver words a 403 from admission (a webhook's "denied the request", a
#: ValidatingAdmissionPolicy's "denied request"), as opposed to RBAC's "cannot VERB resource".
_ADMISSION_REFUSAL = re.compile(r"\bdenied (the )?request\b")
_REASONS = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
            410: "Gone", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests"}


class ClusterSource:
    """A ``WritableSource`` over a live API server: the reads, and the few writes ``escape`` and
    ``find-flags --fix`` need. (In the class body ``list`` is the method: ``builtins.list`` the type.)"""

    #: LISTs of different kinds may run side by side (``kinds.list_many``): each waits on the
    #: network and the server most of its time, and the HTTP pool is thread-safe.
    parallel = True

    def __init__(self, options: ConnectionOptions, environ: Optional[dict] = None,
                 resolved: Optional[Resolved] = None) -> None:
        """``resolved``: the kubeconfig already resolved for ``options`` (``kubeconfig.resolve``,
        which a caller runs before importing this module); else it is resolved here."""
        environ = dict(os.environ if environ is None else environ)
        resolved = resolved or resolve(options, environ)
        self._configuration, self._namespace, self.description, impersonation = configure(resolved)
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
        self._max_pages = int(_settings.value(environ, _settings.MAX_PAGES))
        #: Objects the cluster answered with names the API server refuses (``_sources.names.refusal``).
        self.findings: builtins.list[Finding] = []

    # --- Source ---------------------------------------------------------------------------

    def default_namespace(self) -> Optional[str]:
        return self._namespace

    @property
    def identity(self) -> dict:
        """Which cluster this is, as a journal records it and checks it before it is carried on:
        the server (a password in its URL shown as ``user:***``) and the kubeconfig context."""
        return {"server": self._shown_host, "context": self.description}

    def list(self, kind: Kind, namespace: Optional[str], selector: str = "",
             project: Optional[Projection] = None) -> list[dict]:
        """Every object, one paged LIST; read again from its first page when the continue token
        expires (410), a list being a snapshot of one revision: pages of two revisions would miss
        or repeat objects."""
        path = self.path(kind, namespace)
        for _ in range(LIST_READS):
            items, expired = self._list_pages(path, selector, kind, namespace, project)
            if not expired:
                return items
        raise ClusterError(f"{_describe('list', kind, namespace, path)}: the API server expired the list's continue "
                           f"token (410 Expired: it compacted the revision the list was reading) on each of "
                           f"{LIST_READS} reads from the first page, so the list could not be read whole; run the "
                           "command again")

    def get(self, kind: Kind, namespace: Optional[str], name: str) -> Optional[dict]:
        if _names.object_problem(kind, namespace, name) is not None:
            return None  # a name the API server refuses names no object (a poolRef a tenant wrote)
        try:
            return self.request("GET", self.path(kind, namespace, name), verb="get", kind=kind, namespace=namespace)
        except NotFound:
            return None

    # --- Writes (escape) ------------------------------------------------------------------

    def create(self, kind: Kind, namespace: Optional[str], body: dict, dry_run: bool = False) -> dict:
        return self.request("POST", self.path(kind, namespace), query=_written(dry_run), body=body,
                            verb="create", kind=kind, namespace=namespace)

    def merge_patch(self, kind: Kind, namespace: Optional[str], name: str, patch: dict, dry_run: bool = False) -> dict:
        return self.request("PATCH", self.path(kind, namespace, name), query=_written(dry_run), body=patch,
                            content_type="application/merge-patch+json",
                            verb="patch", kind=kind, namespace=namespace)

    def json_patch(self, kind: Kind, namespace: Optional[str], name: str, operations: builtins.list[dict],
                   dry_run: bool = False) -> dict:
        """A JSON patch (RFC 6902) of one object (find-flags --fix). Led by a ``test`` of
        /metadata/resourceVersion, the server applies it only to the version read, else answers 422."""
        return self.request("PATCH", self.path(kind, namespace, name), query=_written(dry_run), body=operations,
                            content_type="application/json-patch+json",
                            verb="patch", kind=kind, namespace=namespace)

    def delete(self, kind: Kind, namespace: Optional[str], name: str, dry_run: bool = False,
               preconditions: Optional[dict] = None) -> dict:
        """``preconditions`` (``uid``, ``resourceVersion``): the server deletes only that object in
        that version, else answers 409, so an edit made since it was read is never lost.

        A dry run says so in the DeleteOptions as well as in the query: kube-apiserver reads a
        DELETE's options from its body when it has one and then ignores the query, so a
        ``?dryRun=All`` beside a body of preconditions deletes the object for real."""
        body: Optional[dict] = None
        if preconditions or dry_run:
            body = {"apiVersion": "v1", "kind": "DeleteOptions"}
            if preconditions:
                body["preconditions"] = preconditions
            if dry_run:
                body["dryRun"] = ["All"]
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
            served = f"the API group {kind.group} ({'/'.join(kind.versions)}) is not served by this cluster"
            if kind.group in (WORKER_GROUP, SETTINGS_GROUP):
                raise NotServed(f"{served}: gpustack-operator is not installed, or is too old for this tool")
            raise NotServed(f"{served} ({kind.resource} is not installed)")
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
                return _json(data, verb or method.lower(), kind, namespace, path)
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
            raise KvdtypeError("the credential the kubeconfig user's exec plugin or auth provider returned holds "
                               f"{HEADER_REFUSAL} (it is not shown)")
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
        threads.start(timer)
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




def _dry(dry_run: bool) -> Optional[dict]:
    return {"dryRun": "All"} if dry_run else None


def _written(dry_run: bool) -> dict:
    """The query of a create or patch: the plugin's field manager, so that the object's
    managedFields say which fields it changed (a DELETE has no field manager)."""
    return {"fieldManager": FIELD_MANAGER, **(_dry(dry_run) or {})}


def _list_items(page: dict, kind: Kind, namespace: Optional[str], path: str) -> builtins.list:
    """A LIST page's items; an answer that is not a List of ``kind`` is no answer (an empty one
    would read as "none exist": every consumer told its Binding is missing). A List of ``kind``
    whose ``items`` is null is empty: a Go server encodes an empty list so (a nil slice)."""
    items = page.get("items")
    if items is None and "items" in page and page.get("kind") == f"{kind.name}List":
        return []
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


def _json(data: bytes, verb: str = "", kind: Optional[Kind] = None, namespace: Optional[str] = None,
          path: str = "") -> dict:
    try:
        parsed = _bounded.loads(data or b"{}")
    except _bounded.TooDeep as error:
        raise ClusterError(f"{_describe(verb or 'request', kind, namespace, path)}: the API server's answer "
                           f"cannot be read: {error}") from None
    except ValueError:
        raise ClusterError("the API server answered with something that is not JSON") from None
    except MemoryError:
        raise ClusterError(f"{_describe(verb or 'request', kind, namespace, path)}: the API server's answer holds "
                           "more than this process has memory for") from None
    return parsed if isinstance(parsed, dict) else {}


def _backoff(attempt: int, retry_after: Optional[str]) -> float:
    try:
        if retry_after is not None:
            return min(max(float(retry_after), 0.0), _MAX_RETRY_AFTER)
    except ValueError:
        pass
    return min(0.25 * 2 ** (attempt - 1), _MAX_RETRY_AFTER)




def _connection_message(host: str, reason: object) -> str:
    if isinstance(reason, urllib3.exceptions.SSLError):
        return f"TLS failure talking to {host}: {reason}"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):  # a ConnectTimeoutError subclass
        pass
    elif isinstance(reason, (urllib3.exceptions.ConnectTimeoutError, urllib3.exceptions.ReadTimeoutError)):
        return f"the cluster at {host} did not answer in time"
    detail = str(reason).split(": ", 1)[-1] if reason else "connection failed"
    return f"cannot reach the cluster at {host}: {detail}"


def _phrase(status: int) -> str:
    """HTTP's own name of a status (``Internal Server Error``), for an answer that says none."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


#: The most characters of an API server's error message an error shows (a 403's explanation fits).
_SERVER_MESSAGE_SHOWN = 400


def _api_error(status: int, data: bytes, verb: str, kind: Optional[Kind], namespace: Optional[str],
               path: str) -> ApiError:
    try:
        body = _bounded.loads(data or b"{}")
    except (ValueError, MemoryError):  # not JSON, or nested too deep: the status alone says it
        body = {}
    body = body if isinstance(body, dict) else {}
    # The server's own words, when they are words: a proxy's or a hostile server's body may be anything.
    server_message = cut(body["message"], _SERVER_MESSAGE_SHOWN) if isinstance(body.get("message"), str) else ""
    reason = body["reason"] if isinstance(body.get("reason"), str) else _REASONS.get(status, "") or _phrase(status)
    reason = cut(reason, 60)
    what = kind.resource if kind else path
    where = _where(kind, namespace)
    if status == 401:
        message = "the cluster refused your credentials (401 Unauthorized): log in again or check the kubeconfig user"
    elif status == 403 and _ADMISSION_REFUSAL.search(server_message):  # allowed by RBAC, refused by a rule
        message = f"{verb} {what}{where} refused by the cluster's admission (403 Forbidden): {server_message}"
    elif status == 403:
        message = f"you may not {verb} {what}{where} (403 Forbidden)" + (
            f": {server_message}" if server_message else "")
    elif status == 404:
        message = f"{what} not found" + (f": {server_message}" if server_message else "")
    else:
        message = f"{verb} {what}{where} failed ({status} {reason})" + (f": {server_message}" if server_message else "")
    error_class = {404: NotFound, 409: Conflict}.get(status, ApiError)
    return error_class(message, status, reason)



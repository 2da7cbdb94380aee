"""The one place that talks to a cluster: the reads and the few writes, as plain JSON.

Responses are read as plain JSON, never as generated model classes, because lists can hold
10,000+ objects. The requests go out through a transport (``_sources.transport``): the standard
library's for most kubeconfigs (exec credential plugins included), the official ``kubernetes``
client's for auth providers and in-cluster configuration; only a live run imports either.
"""

from __future__ import annotations

import builtins
import os
import re
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NamedTuple, Optional, TextIO, TypeVar
from urllib.parse import quote, unquote, urlencode

from kubectl_kvdtype import __version__
from kubectl_kvdtype._kits import bounded as _bounded
from kubectl_kvdtype._kits import progress as _progress
from kubectl_kvdtype._kits import settings as _settings
from kubectl_kvdtype._kits.display import cut
from kubectl_kvdtype._kits.report import Finding
from kubectl_kvdtype._kits.secrets import without_password
from kubectl_kvdtype._kits.status import (
    ApiError,
    ClusterError,
    Conflict,
    KvdtypeError,
    NotFound,
    NotServed,
)
from kubectl_kvdtype._sources import names as _names
from kubectl_kvdtype._sources import requestlog as _requestlog
from kubectl_kvdtype._sources import server_warnings as _server_warnings
from kubectl_kvdtype._sources.chooser import connect
from kubectl_kvdtype._sources.kinds import FIELD_MANAGER, OPERATOR_GROUPS, Kind, Projection
from kubectl_kvdtype._sources.kubeconfig import ConnectionOptions, Resolved, resolve
from kubectl_kvdtype._sources.lists import Collector, continue_token, endless, list_items, peek_continue, read_streamed
from kubectl_kvdtype._sources.transport import Ahead, Clock, Exchange, HeaderLines

#: The first page of a LIST (kubectl's --chunk-size): a small LIST is one page, a first answer comes soon.
PAGE_SIZE = 500
#: The JSON a later page holds at most, as the page before it measures its objects: on a link tens
#: of milliseconds away each page is a round trip more, while a page's text and its decoding are
#: what a run holds in memory beyond the objects it keeps (docs/development.md, "Speed on big clusters").
PAGE_BYTES = 2 * 1024 * 1024
#: The most objects a page asks for, however small they are.
MAX_PAGE_SIZE = 5000
#: Pages one LIST may take before it is abandoned as endless: 500,000 objects or more (a page holds
#: PAGE_SIZE or more), five times a 100,000-Pod cluster; ``_kits.settings.MAX_PAGES`` sets another.
MAX_PAGES: int = _settings.MAX_PAGES.default
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
_Read = TypeVar("_Read")
_REASONS = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
            410: "Gone", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests"}


#: Groups every supported cluster serves at the kind's first version: read there without discovery
#: (the admission groups are GA since Kubernetes 1.30; an older server's 404 is an object not there).
ALWAYS_SERVED = ("apps", "batch", "admissionregistration.k8s.io", "apiregistration.k8s.io")


class ClusterSource:
    """A ``WritableSource`` over a live API server: the reads, and the few writes ``escape`` and
    ``find-flags --fix`` need. (In the class body ``list`` is the method: ``builtins.list`` the type.)"""

    #: LISTs of different kinds may run side by side (``kinds.list_many``): each waits on the
    #: network and the server most of its time, and the HTTP pool is thread-safe.
    parallel = True

    def __init__(self, options: ConnectionOptions, environ: Optional[dict] = None,
                 resolved: Optional[Resolved] = None, warned: Optional[Callable[[str], None]] = None,
                 log: Optional[TextIO] = None) -> None:
        """``resolved``: the kubeconfig already resolved for ``options`` (``kubeconfig.resolve``,
        which a caller runs before importing this module); else it is resolved here. ``warned``:
        shows a warning of the server's (``Environment.warn``: ``Warning: TEXT`` on stderr). ``log``:
        where ``-v`` 6 and above writes each request (``_sources.requestlog``)."""
        environ = dict(os.environ if environ is None else environ)
        resolved = resolved or resolve(options, environ)
        connected = connect(resolved)  # the transport (_sources.chooser)
        self._transport = _requestlog.logged(connected.transport, options.verbosity, log)
        self._namespace, self.description = connected.namespace, connected.description
        #: The server as messages name it: a password in its URL shown as ``user:***``.
        self._shown_host = without_password(self._transport.host)
        self._timeout = options.request_timeout
        #: A time (time.monotonic) no request may outlive, set by ``within`` (verify --wait).
        self._deadline: Optional[float] = None
        #: Every request's header lines; a repeated name (Impersonate-Group) is a line each.
        self._headers: HeaderLines = [("Accept", "application/json"),
                                      ("User-Agent", f"kubectl-kvdtype/{__version__}"), *connected.impersonation]
        if resolved.cluster.get("disable-compression") is not True:  # --disable-compression sets it too
            self._headers.append(("Accept-Encoding", "gzip"))  # as kubectl asks: the server compresses big answers
        self._warned = warned or _shown_on_stderr
        #: --warnings-as-errors: a warning ends the run before its next request (and at its end).
        self._warnings_end = options.warnings_as_errors
        self._versions: dict[str, Optional[str]] = {}
        self._discovery = threading.Lock()  # one discovery per group, even from parallel LISTs
        self._discovery_errors: dict[str, KvdtypeError] = {}  # met once, not again per waiting LIST
        self.request_count = 0
        self._max_pages = int(_settings.value(environ, _settings.MAX_PAGES))
        #: Whether a LIST is one request, its objects decoded as they come (``_sources.lists``): the
        #: direct transport's way unless pages are asked for (KUBECTL_KVDTYPE_PAGED_LISTS).
        self._stream: Optional[Callable[..., tuple[Exchange, Any]]] = None if _settings.value(
            environ, _settings.PAGED_LISTS) else getattr(self._transport, "stream", None)  # the client's cannot
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
        return self._read(kind, lambda version: self._list_at(self.path(kind, namespace, version=version), selector,
                                                              kind, namespace, project))

    def _list_at(self, path: str, selector: str, kind: Kind, namespace: Optional[str],
                 project: Optional[Projection]) -> builtins.list[dict]:
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
            return self._read(kind, lambda version: self.request("GET", self.path(kind, namespace, name, version),
                                                                 verb="get", kind=kind, namespace=namespace))
        except NotFound:
            return None

    def _read(self, kind: Kind, read: Callable[[str], _Read]) -> _Read:
        """``read(version)`` at the version ``kind`` is served in. For the operator's groups, read on
        every run, that is at first the version preferred (``_guess``), without asking discovery:
        discovery is a round trip (and a TLS handshake) that every other request of the run would
        wait for. An answer 404 (or 403: RBAC is asked before the server looks for the resource)
        then asks discovery whether the group serves another version (read again at it), none
        (``NotServed``, as discovery first would have said), or that one (the answer was the
        object's own, raised as it came)."""
        guess = self._guess(kind)
        if guess is None:
            return read(self.served_version(kind))
        try:
            answer = read(guess)
        except ApiError as error:
            if error.code not in (403, 404):
                raise
            served = self.served_version(kind)
            if served == guess:
                raise
            return read(served)
        with self._discovery:
            self._versions.setdefault(kind.group, guess)  # answered there: discovery would choose it too
        return answer

    def _guess(self, kind: Kind) -> Optional[str]:
        """The version to read ``kind`` at before discovery has been asked; None when discovery has
        answered (or failed) already, or the kind is not of the operator's groups: a manager's
        kind (Argo CD's, Flux's) is often not installed, and discovery says so in one request."""
        if kind.group not in OPERATOR_GROUPS:
            return None
        with self._discovery:
            known = kind.group in self._versions or kind.group in self._discovery_errors
        return None if known else kind.versions[0]

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

    def apply(self, kind: Kind, namespace: Optional[str], name: str, body: dict, force: bool = False,
              dry_run: bool = False) -> dict:
        """A server-side apply of ``body`` (kubectl-kvdtype's fields); a ``metadata.resourceVersion``
        in it is a precondition. ``force``: take fields another field manager owns (else 409)."""
        query = {**_written(dry_run), **({"force": "true"} if force else {})}
        return self.request("PATCH", self.path(kind, namespace, name), query=query, body=body,
                            content_type="application/apply-patch+yaml", verb="apply", kind=kind, namespace=namespace)

    # --- Plumbing ---------------------------------------------------------------------------

    def path(self, kind: Kind, namespace: Optional[str], name: Optional[str] = None,
             version: Optional[str] = None) -> str:
        """The request path of ``kind`` (of one object with ``name``) at ``version``, else at the
        version the server serves (found by discovery)."""
        version = version or self.served_version(kind)
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
        if not kind.group or kind.group in ALWAYS_SERVED:
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
            if kind.group in OPERATOR_GROUPS:
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
        """A LIST: one unpaged request read as it comes (``lists.read_streamed``) where the
        transport can, else pages one after another, each asked for as soon as the page before it names its
        continue token (``_ask_ahead``), so the server writes it while this one is decoded. A
        continue token in an unpaged answer is followed too, as client-go's pager follows one."""
        collector = Collector(kind, project)
        paged = self._stream is None
        query: dict[str, Any] = {"limit": PAGE_SIZE} if paged else {}
        if selector:
            query["labelSelector"] = selector
        seen: set[str] = set()  # continue tokens already followed: one met again is a loop
        ahead: Optional[_AskedAhead] = None
        what = _describe("list", kind, namespace, path)
        try:
            for number in range(1, self._max_pages + 1):
                so_far = f" ({len(collector.items)} so far)" if collector.items else ""
                _progress.note(f"listing {kind.resource}{_where(kind, namespace)}{so_far}")
                try:
                    if paged:
                        data = self._answered("GET", path, query, None, "", "list", kind, namespace,
                                              ahead.request if ahead else None)
                    else:
                        token = self._answered("GET", path, query, None, "", "list", kind, namespace, read=lambda
                                               pieces: read_streamed(pieces, collector, what,
                                                                     self._max_pages * PAGE_SIZE))
                except ApiError as error:
                    if error.code == 410 and "continue" in query:
                        return [], True
                    raise
                finally:
                    ahead = None
                    _progress.done()
                if paged:
                    query["limit"] = next_limit(query["limit"], len(data))
                    if number < self._max_pages:  # past the budget, no page is asked for
                        ahead = self._ask_ahead(path, query, data, seen, kind, namespace)
                    page = _json(data, "list", kind, namespace, path)
                    collector.take(list_items(page, kind, what))
                    token = continue_token(page)
                self.findings += collector.findings
                collector.findings = []
                if not token:
                    return collector.items, False
                if token in seen:
                    raise ClusterError(f"{what}: the API server answered a continue token it had answered before, "
                                       f"so the list would never end")
                seen.add(token)
                query["continue"] = token
                if ahead is not None and ahead.token != token:  # the page's own token is another: not that one
                    ahead.request.drop()
                    ahead = None
        finally:
            if ahead is not None:
                ahead.request.drop()
        raise endless(what, f"{self._max_pages} pages")

    def _ask_ahead(self, path: str, query: dict[str, Any], data: bytes, seen: set[str], kind: Kind,
                   namespace: Optional[str]) -> Optional[_AskedAhead]:
        """The next page's GET, sent before this page (``data``) is decoded, when the transport can
        send one ahead and the page's text names its continue token where an API server writes it
        (``peek_continue``). Only a guess until the page is decoded: ``_list_pages`` drops it when
        the decoded page names another token."""
        send_ahead: Optional[Callable[[str, HeaderLines, Clock], Optional[Ahead]]] = getattr(
            self._transport, "send_ahead", None)  # the client's transport cannot
        if send_ahead is None:
            return None
        token = peek_continue(data)
        if token is None or token in seen:
            return None
        target = _encoded(path) + f"?{urlencode({**query, 'continue': token})}"
        clock = self._clock("list", kind, namespace, path)
        with clock.watching():
            sent = send_ahead(target, self._signed(self._headers), clock)
        if sent is None:
            return None
        self.request_count += 1
        return _AskedAhead(token, sent)

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
        data = self._answered(method, path, query, body, content_type, verb, kind, namespace)
        return _json(data, verb or method.lower(), kind, namespace, path)

    def _answered(self, method: str, path: str, query: Optional[dict], body: Any, content_type: str, verb: str,
                  kind: Optional[Kind], namespace: Optional[str], ahead: Optional[Ahead] = None,
                  read: Optional[Callable[[Iterator[bytes]], Any]] = None) -> Any:
        """The body of a successful answer; ``ahead``: the first attempt, already sent; ``read``: a
        GET streamed (the transport's ``stream``), what ``read`` made of its body instead."""
        target = _encoded(path) + (f"?{urlencode(query)}" if query else "")
        headers = self._headers + ([("Content-Type", content_type)] if body is not None else [])
        clock = ahead.clock if ahead else self._clock(verb or method.lower(), kind, namespace, path)
        for attempt in range(1, ATTEMPTS + 1):
            if self._warnings_end and _server_warnings.count():  # the answer that warned was used: no more
                raise ClusterError(_server_warnings.received())
            if attempt == 1 and ahead is not None:
                with clock.watching():
                    answer = ahead.answer()
            else:
                self.request_count += 1
                with clock.watching():  # connect, headers and body: all of it within what is left
                    if read is None:
                        answer = self._transport.exchange(method, target, self._signed(headers), body, clock)
                    else:
                        assert self._stream is not None, "a streamed read is asked for only of a transport that streams"
                        answer, made = self._stream(target, self._signed(headers), clock, read)
            _server_warnings.heard(answer.warning, self._warned)
            if answer.status < 300:
                return answer.data if read is None else made
            retryable = answer.status == 429 or (method == "GET" and answer.status in _RETRY_READ)
            if retryable and attempt < ATTEMPTS:
                clock.sleep(_backoff(attempt, answer.retry_after))
                continue
            raise _api_error(answer.status, answer.data, verb or method.lower(), kind, namespace, path)
        raise AssertionError("unreachable")


    def _clock(self, verb: str, kind: Optional[Kind], namespace: Optional[str], path: str) -> Clock:
        """The time one request (all its attempts) may take, named as its errors name it."""
        return Clock(self._timeout, self._deadline, _describe(verb, kind, namespace, path), self._shown_host)

    def _signed(self, headers: HeaderLines) -> HeaderLines:
        """``headers`` and the transport's Authorization, asked for at each attempt: an exec
        plugin's token may expire between two."""
        authorization = self._transport.authorization()
        return headers + ([("Authorization", authorization)] if authorization else [])


def _shown_on_stderr(text: str) -> None:
    """A server's warning where no environment was handed in: on this process's stderr, as kubectl's."""
    from kubectl_kvdtype._kits.env import Environment

    Environment().warn(text)


def next_limit(limit: int, size: int) -> int:
    """The next page's limit after a page of ``size`` bytes asked with ``limit``: as many objects
    as ``PAGE_BYTES`` holds at that page's bytes per object (a page that goes on is full), from
    ``PAGE_SIZE`` to ``MAX_PAGE_SIZE``."""
    per_object = max(1, size // max(1, limit))
    return max(PAGE_SIZE, min(MAX_PAGE_SIZE, PAGE_BYTES // per_object))


class _AskedAhead(NamedTuple):
    """The next page's GET sent ahead, and the continue token it asks with."""

    token: str
    request: Ahead


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




def _phrase(status: int) -> str:
    """HTTP's own name of a status (``Internal Server Error``), for an answer that says none.
    ``http`` is imported here: its ``HTTPStatus`` is an enum of some sixty members built at import,
    which a run that meets no error status would pay for."""
    import http

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



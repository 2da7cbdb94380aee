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
        fake.deny(verb, resource, namespace=None, group=None, but=())   # 403 + SSAR allowed=false;
                                                # but: names the verb stays allowed on (resourceNames)
        fake.fail(status, method=None, path=None, times=1, retry_after=None, delay=0.0,
                  message=None, reason=None, body=None)   # path: regex searched in the URL path;
                                                # body: bytes sent instead of the Status
        fake.delay(seconds, method=None, path=None, times=1)   # times=None: every match
        fake.hold(method=None, path=None, times=1) -> Hold   # hold matches until .release()
                                                # (.arrived / .wait_arrived(): one is waiting)
        fake.fall_silent(after=0, method=None, path=None)   # answer `after` matches, then nothing
        fake.silent                             # whether fall_silent has taken effect
        fake.clear_faults()                     # drop fail/delay/deny rules, end a silence
        fake.expire_continue(times=1)           # next N continue-requests answer 410 Expired
        fake.answer(body, method=None, path=None, times=1)   # 200 with body ({}, None, []...) instead
        fake.dribble(seconds_per_byte, method=None, path=None, times=1)   # the body a byte at a time
        fake.warn(text, method=None, path=None, times=1)   # answered as usual, with Warning: 299 - "text"
        fake.loop_continue(fresh=False, resource=None)   # LIST pages' continue leads back to page 1
        fake.admission(fn)                      # fn(op, new, old) -> None | denial text (403)
        fake.setting_lag = 0.0                  # seconds until Setting status.value follows spec
        fake.finalizer(kind_or_resource, name="gpustack.ai/cleanup", after=0.3, held_by=None)
                                                # an operator's finalizer: see "Finalizers" below
        fake.requests / fake.clear_log()        # RequestRecord list, arrival order
                                                # (.header_values(name), .sni, .client_cert,
                                                # .target: the raw request target)
        fake.request_log()                      # [(method, path, query)] of every request
        fake.passwords = {"alice": "pw"}        # basic-auth users accepted besides the token
        fake.write_kubeconfig(path, context="fake", namespace=None, token=None,
                              user="fake-user", exec_command=None) -> path

Behaviour worth knowing:
- HTTPS by default with a built-in test CA (the kubeconfig carries it): kubectl never sends a
  token or runs an exec plugin for an ``http://`` server.  ``tls=False`` serves plain HTTP
  (fine for the Python client, but kubectl then sends no credentials: use ``token=None``).
- ``groups_versions`` overrides the default ``{"worker.gpustack.ai": ("v1", "v1alpha1"),
  "gpustack.ai": ("v1",)}`` per group (first version preferred); map a group to ``None`` to
  leave it unserved (CRDs missing: absent from discovery, its paths 404).  Argo CD's
  ``Application`` (argoproj.io) and Flux's ``Kustomization``/``HelmRelease``
  (kustomize/helm.toolkit.fluxcd.io) are custom resources like the operator's, unserved unless
  ``groups_versions`` names their groups (``GITOPS_GROUPS`` names all three).
- ``metadata.managedFields`` (``fields.py``), as a real server keeps them for writes other than
  server-side apply: a create, update or patch records the fields it set or changed under its
  field manager (the ``fieldManager`` query parameter, else the User-Agent's first word) and takes
  them from every other manager; lists are atomic in custom resources and keyed by ``name`` in
  built-in kinds; status writes and ``fake.add``/``fake.update`` record nothing.  Seed an object
  with the ``managedFields`` of appliers (``operation: Apply``) as stored data.
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
- A DELETE's options (preconditions, ``dryRun``) come from its body when it has one, else from its
  query, as kube-apiserver decodes them; a failed precondition, a failed JSON patch ``test``
  and an expired continue token are worded as kube-apiserver words them
  (tests/test_fake_vs_real.py holds the fake to the real server's answers).
- Not served: watch (405), OpenAPI (404: ``kubectl create/apply`` need ``--validate=false``),
  server-side apply (415), Table output (kubectl falls back to NAME/AGE columns).

Where things live (``FakeKube`` is put together from one mixin per concern; its state is all
set in ``FakeKube.__init__`` below, so one look shows it):

- ``resources.py``: the resource types served (``RESOURCE_TYPES``, ``find_type``), Status errors.
- ``store.py``: ``StoreMixin``: stored objects and their index, resourceVersions, finalizers and
  deletionTimestamp, the lagging Setting; the state helpers tests call (``add``, ``get``, ...).
- ``verbs.py``: ``VerbsMixin``: what LIST (paging), GET, create, update, patch and DELETE do.
- ``server.py``: ``ServerMixin``: the HTTP(S) server, request log, auth, routing, discovery,
  SelfSubjectAccessReview, ``write_kubeconfig``.
- ``faults.py``: ``FaultsMixin``: ``fail``/``delay``/``deny``/``expire_continue``/``admission``/
  ``fall_silent`` and where requests meet them; ``HangingServer``.
- ``fields.py``: ``metadata.managedFields``: the field manager of a write and the fields it owns.
- ``wire.py``: pure functions over the wire formats (selectors, merge and JSON patches, the
  protobuf SSAR, continue tokens); ``tls.py``: the test CA, certificates and SSL context.
"""
from __future__ import annotations

import re
import socket
import threading
from typing import Any, Callable, Iterable, Optional

from .faults import EXPIRED_MESSAGE, FaultsMixin, HangingServer, Hold, _Deny, _Loop, _Rule, _Silence
from .resources import (
    ALL_VERBS,
    BUILTIN_GROUPS,
    DEFAULT_GROUPS,
    GITOPS_GROUPS,
    JSON,
    POD_FIELDS,
    READ_VERBS,
    REASONS,
    RESOURCE_TYPES,
    ApiError,
    Key,
    ResourceType,
    bad_request,
    conflict,
    find_type,
    not_found,
)
from .server import EXEC_API_VERSION, RequestRecord, ServerMixin, _Server
from .store import StoreMixin, _Finalizer, _Store
from .tls import (
    TEST_CA_PEM,
    TEST_CERT_PEM,
    TEST_CLIENT_CA_PEM,
    TEST_CLIENT_CERT_PEM,
    TEST_CLIENT_KEY_PEM,
    TEST_KEY_PEM,
)
from .verbs import VerbsMixin
from .wire import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    PROTOBUF,
    STRATEGIC_PATCH,
    Matcher,
    field_matcher,
    json_patch,
    label_matcher,
    merge_patch,
    ssar_from_protobuf,
)

__all__ = [
    "FakeKube", "HangingServer", "Hold", "RequestRecord", "ApiError", "ResourceType", "RESOURCE_TYPES",
    "find_type", "not_found", "conflict", "bad_request", "label_matcher", "field_matcher",
    "Matcher", "merge_patch", "json_patch", "ssar_from_protobuf", "JSON", "Key", "ALL_VERBS",
    "READ_VERBS", "MERGE_PATCH", "JSON_PATCH", "STRATEGIC_PATCH", "APPLY_PATCH", "PROTOBUF",
    "REASONS", "DEFAULT_GROUPS", "GITOPS_GROUPS", "BUILTIN_GROUPS", "POD_FIELDS", "EXPIRED_MESSAGE",
    "TEST_CA_PEM", "TEST_CERT_PEM", "TEST_KEY_PEM", "TEST_CLIENT_CA_PEM",
    "TEST_CLIENT_CERT_PEM", "TEST_CLIENT_KEY_PEM", "EXEC_API_VERSION",
]


class FakeKube(ServerMixin, VerbsMixin, FaultsMixin, StoreMixin):
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
        self._holds: list[Hold] = []
        self._denies: list[_Deny] = []
        self._admission: list[Callable[[str, Optional[JSON], Optional[JSON]], Optional[str]]] = []
        self._expire = 0
        self._loop: Optional[_Loop] = None
        self._silence: Optional[_Silence] = None
        #: drop_kept's (method, target pattern) (None: any), one per drop to come
        self._drop_kept: list[tuple[Optional[str], Optional[re.Pattern[str]]]] = []
        self._pending: dict[Key, tuple[float, Any]] = {}
        self._finalizers: list[_Finalizer] = []
        self._reaping = False
        self._conns: set[socket.socket] = set()
        self._connections_accepted = 0
        self._server: Optional[_Server] = None
        self._thread: Optional[threading.Thread] = None
        #: The User-Agent of the request this thread serves: a write's field manager by default.
        self._agent = threading.local()

"""Where objects come from: the small interface shared by the live cluster and the manifests.

``Source.list`` answers one kind in one namespace (or all) with plain JSON dicts. The live twin is
``_sources.cluster.ClusterSource``, the offline twin ``_sources.manifests.ManifestSource``; subcommands see only
this interface, so the same judgement runs on a cluster and on a dump of it.
"""

from __future__ import annotations

import functools
import re
import threading
from contextlib import nullcontext
from typing import Any, Callable, ContextManager, Optional, Protocol, Sequence, TypeGuard, Union

from kubectl_kvdtype._kits import threads
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.status import ApiError, KvdtypeError

WORKER_GROUP = "worker.gpustack.ai"
SETTINGS_GROUP = "gpustack.ai"
#: The operator's own API groups: read on every run, served wherever gpustack-operator is installed.
OPERATOR_GROUPS = (WORKER_GROUP, SETTINGS_GROUP)


@record_type(frozen=True)
class Kind:
    """A resource the plugin reads; ``versions`` in order of preference."""

    name: str
    group: str  # "" for the core group
    versions: tuple[str, ...]
    plural: str
    namespaced: bool = True

    @property
    def resource(self) -> str:
        """``plural.group`` as kubectl and error messages name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


BINDING = Kind("KVCachePoolBinding", WORKER_GROUP, ("v1", "v1alpha1"), "kvcachepoolbindings")
POOL = Kind("KVCachePool", WORKER_GROUP, ("v1", "v1alpha1"), "kvcachepools", namespaced=False)
DEPLOYMENT = Kind("ModelDeployment", WORKER_GROUP, ("v1", "v1alpha1"), "modeldeployments")
SETTING = Kind("Setting", SETTINGS_GROUP, ("v1",), "settings")
POD = Kind("Pod", "", ("v1",), "pods")
WORKLOADS = (
    Kind("Deployment", "apps", ("v1",), "deployments"),
    Kind("StatefulSet", "apps", ("v1",), "statefulsets"),
    Kind("DaemonSet", "apps", ("v1",), "daemonsets"),
    Kind("Job", "batch", ("v1",), "jobs"),
    Kind("CronJob", "batch", ("v1",), "cronjobs"),
)
KINDS = (BINDING, POOL, DEPLOYMENT, SETTING, POD) + WORKLOADS
#: What a Deployment's Pods are owned by: read only to climb a Pod's owner chain (its top owner).
REPLICASET = Kind("ReplicaSet", "apps", ("v1",), "replicasets")
#: The objects of the tools that manage others (``_sources.managers``): read only when an object names one, never
#: listed on every run, and not read from manifests (``kind_for`` does not know them, so -f skips them).
APPLICATION = Kind("Application", "argoproj.io", ("v1alpha1",), "applications")
KUSTOMIZATION = Kind("Kustomization", "kustomize.toolkit.fluxcd.io", ("v1", "v1beta2"), "kustomizations")
HELMRELEASE = Kind("HelmRelease", "helm.toolkit.fluxcd.io", ("v2", "v2beta2", "v2beta1"), "helmreleases")
MANAGER_KINDS = (APPLICATION, KUSTOMIZATION, HELMRELEASE)
#: The field manager every write of the plugin names (``fieldManager``), so that an object's
#: ``managedFields`` say which fields the plugin changed; ``_sources.managers`` never counts it as another's.
FIELD_MANAGER = "kubectl-kvdtype"


def kind_for(api_version: object, kind: object) -> Optional[Kind]:
    """The known Kind of an object's ``apiVersion``/``kind``, any served version accepted."""
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    group = api_version.rpartition("/")[0]
    return next((k for k in KINDS if k.name == kind and k.group == group), None)


#: What a caller keeps of each listed object (see ``Source.list``). It may change the top level of
#: the object it is given, and return it: a source hands it each object's own top level.
Projection = Callable[[dict], dict]


class Source(Protocol):
    """What a subcommand may ask of the objects, wherever they live."""

    #: A few words for messages: "context kind-prod" or "manifests".
    description: str

    def default_namespace(self) -> Optional[str]:
        """The namespace used without -n/-A: the context's on a cluster, None (all) offline."""

    def list(self, kind: Kind, namespace: Optional[str], selector: str = "",
             project: Optional[Projection] = None) -> list[dict]:
        """Every object of ``kind`` in ``namespace`` (None: all) matching a label selector.

        ``project`` maps each object to what the caller keeps, applied page by page, so a big
        LIST never holds more than one page of whole objects. It is handed the object's own top
        level (a live LIST's objects are the read's; the manifests' are copied for it).
        """

    def get(self, kind: Kind, namespace: Optional[str], name: str) -> Optional[dict]:
        """One object, or None when it does not exist."""


class WritableSource(Source, Protocol):
    """A source that can also change the cluster: only the live one (``escape`` refuses ``-f``)."""

    def create(self, kind: Kind, namespace: Optional[str], body: dict, dry_run: bool = False) -> dict:
        """Create ``body``; with ``dry_run`` the server only validates it (``dryRun=All``)."""

    def merge_patch(self, kind: Kind, namespace: Optional[str], name: str, patch: dict,
                    dry_run: bool = False) -> dict:
        """A JSON merge patch of one object."""

    def delete(self, kind: Kind, namespace: Optional[str], name: str, dry_run: bool = False,
               preconditions: Optional[dict] = None) -> dict:
        """Delete one object; with ``preconditions`` only while its uid and resourceVersion are those."""

    def json_patch(self, kind: Kind, namespace: Optional[str], name: str, operations: list[dict],
                   dry_run: bool = False) -> dict:
        """A JSON patch (RFC 6902) of one object."""

    def post(self, path: str, body: dict) -> dict:
        """A POST to a fixed path (SelfSubjectAccessReview)."""

    def apply(self, kind: Kind, namespace: Optional[str], name: str, body: dict, force: bool = False,
              dry_run: bool = False) -> dict:
        """A server-side apply (field manager kubectl-kvdtype); a resourceVersion in ``body`` is a precondition."""


def bounded(source: Source, deadline: Optional[float]) -> ContextManager[None]:
    """Requests made inside end by ``deadline`` (``time.monotonic()``), whatever the server does:
    a ``--wait`` holds its time. Manifests answer at once, so only a live source needs it."""
    within = getattr(source, "within", None)
    return within(deadline) if within else nullcontext()


@record_type(frozen=True)
class Query:
    """One LIST: a kind, a namespace (None: all), a label selector."""

    kind: Kind
    namespace: Optional[str]
    selector: str = ""
    project: Optional[Projection] = None

    def read(self, source: Source) -> list[dict]:
        return source.list(self.kind, self.namespace, self.selector, self.project)


@record_type(frozen=True)
class Get:
    """One GET of a named object, read beside the LISTs of ``list_many`` (the Setting a judgement
    depends on does not wait for them): its answer is a list of one object, or none when it
    does not exist."""

    kind: Kind
    namespace: Optional[str]
    name: str

    def read(self, source: Source) -> list[dict]:
        found = source.get(self.kind, self.namespace, self.name)
        return [] if found is None else [found]


#: The most requests ``list_many`` has in flight at once: find-flags' eight LISTs, each mostly a
#: wait on the network and the API server.
MAX_IN_FLIGHT = 8


def list_many(source: Source, queries: Sequence[Union[Query, Get]]) -> list[Union[list[dict], KvdtypeError]]:
    """Each query's objects, or the error it met, in order.

    A live source runs the requests side by side (``parallel``): on a real cluster each one mostly
    waits on the network and the API server, so a subcommand reading four kinds and a Setting pays
    for about the slowest, not the sum. Errors are returned, not raised, so a caller can forgive some kinds.
    """
    return list_early(source, queries, (), lambda _: None)


def list_early(source: Source, queries: Sequence[Union[Query, Get]], soon: Sequence[int],
               then: Callable[[list[Union[list[dict], KvdtypeError]]], None]) -> list[Union[list[dict], KvdtypeError]]:
    """``list_many(source, queries)``, with ``then`` given the answers of the queries at ``soon``
    (indexes, in that order) as soon as those are all in, while the others (the big LISTs) may
    still be coming: there a caller starts the reads that its findings about the soon objects
    will need, and their round trip is no longer one after the LISTs. Not when a LIST among them
    failed: the run ends on that error (a GET's may be forgiven, a missing Setting). ``then`` runs
    in the thread that read the last of them; what it raises is raised here, once every read has
    ended. All the queries are read side by side as ``list_many``'s are (every helper started
    before the first request leaves)."""
    answers: dict[int, Union[list[dict], KvdtypeError]] = {}
    waiting = set(soon)
    answered = threading.Lock()

    def read(index: int) -> Union[list[dict], KvdtypeError]:
        try:
            answer: Union[list[dict], KvdtypeError] = queries[index].read(source)
        except KvdtypeError as error:
            answer = error
        with answered:
            answers[index] = answer
            last = index in waiting and len(waiting) == 1
            waiting.discard(index)
        if last and not any(isinstance(queries[i], Query) and isinstance(answers[i], KvdtypeError) for i in soon):
            then([answers[i] for i in soon])
        return answer

    if not getattr(source, "parallel", False) or len(queries) < 2:
        return [read(index) for index in range(len(queries))]
    return _side_by_side(read, range(len(queries)))


def _side_by_side(one: Callable[[Any], Any],
                  queries: Sequence[Any]) -> list[Any]:
    """``one(query)`` for each query, up to ``MAX_IN_FLIGHT`` at once: in this thread and in
    plain daemon helper threads (``concurrent.futures`` would import ``logging`` too, and its exit
    joins its threads, which on Ctrl-C is a silent server's answer). The helpers come from the
    run's one budget (``_kits.threads.helper``): when it is spent, or the system starts no more
    threads, fewer run at once, this thread's share the rest. Anything ``one`` raises is raised
    here, in query order."""
    results: list[Any] = [None] * len(queries)
    order = iter(range(len(queries)))
    taking = threading.Lock()
    # No request leaves before every helper has started: each start blocks the main thread's
    # signals for a moment (threads.start), and a request answered, or held, meanwhile would be
    # one a Ctrl-C could not cut short.
    started = threading.Event()
    left = threading.Semaphore(0)  # released by each helper as it ends

    def work(helper: bool) -> None:
        while True:
            with taking:
                index = next(order, None)
            if index is None:
                return
            try:
                results[index] = one(queries[index])
            except Exception as error:  # noqa: BLE001 - carried to the calling thread, raised there in order
                results[index] = _Raised(error)
            except BaseException as error:  # Ctrl-C or a signal met by the calling thread's own read: at once
                if not helper:
                    raise
                results[index] = _Raised(error)

    def helping() -> None:
        try:
            started.wait()
            work(helper=True)
        finally:
            left.release()

    helpers = 0
    while helpers < min(len(queries), MAX_IN_FLIGHT) - 1 and threads.helper(helping, "kvdtype-list"):
        helpers += 1
    started.set()
    work(helper=False)
    for _ in range(helpers):
        left.acquire()
    for result in results:
        if isinstance(result, _Raised):
            raise result.error
    return results


class _Raised:
    """What a query's thread raised, to be raised again in the main thread."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def not_readable(error: object) -> TypeGuard[ApiError]:
    """Whether a read of a kind the judgement can go on without failed because this user may not
    read it (403) or the server does not serve it although its group is served (404): then the
    kind is not examined and the report says so (``Report.not_examined``: incomplete, exit 4). Any
    other failure (a timeout, 5xx, 401) is the whole run's (exit 3). The one rule; every reader of
    such a kind asks it."""
    return isinstance(error, ApiError) and error.code in (403, 404)


def unwrap(results: Sequence[Union[list[dict], KvdtypeError]]) -> list[list[dict]]:
    """The objects of every query, raising the first error in query order."""
    objects: list[list[dict]] = []
    for result in results:
        if isinstance(result, KvdtypeError):
            raise result
        objects.append(result)
    return objects


# --- Label selectors (the offline twin needs what the API server does for the live one) ----

#: One requirement of a selector; compiled (and kept in ``re``'s cache) at the first selector
#: matched: a live run matches none, and compiling it was a share of every start.
_REQUIREMENT = (
    r"^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9_./-]+)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<value>[A-Za-z0-9_.-]*)"
    r"|\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?\s*$"
)


@functools.lru_cache(maxsize=64)
def _split_requirements(selector: str) -> tuple[str, ...]:
    """Split on the commas that are not inside ``in (a,b)`` parentheses.

    Cached: the offline twin matches one selector against every Pod of a dump."""
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return tuple(part for part in parts if part.strip())


def matches_selector(labels: dict, selector: str) -> bool:
    """Kubernetes label-selector semantics for the equality, set and existence forms."""
    requirement_re = re.compile(_REQUIREMENT)
    for requirement in _split_requirements(selector or ""):
        match = requirement_re.match(requirement)
        if not match:
            raise ValueError(f"cannot read the label selector requirement {requirement!r}")
        key, present = match["key"], match["key"] in labels
        value = labels.get(key)
        if match["neg"]:
            ok = not present
        elif match["op"] in ("=", "=="):
            ok = present and value == match["value"]
        elif match["op"] == "!=":
            ok = value != match["value"]
        elif match["setop"]:
            values = {v.strip() for v in match["values"].split(",")}
            ok = (present and value in values) if match["setop"] == "in" else value not in values
        else:
            ok = present
        if not ok:
            return False
    return True

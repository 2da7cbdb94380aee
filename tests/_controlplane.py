"""A real control plane for the tests: etcd and kube-apiserver on loopback, serving gpustack-operator's
API, with users bound to the plugin's documented roles (standard library and PyYAML only).

The binaries come from ``scripts/control-plane`` (built into its cache when missing, never skipped).
``tests/conftest.py`` starts one per test run (fixture ``control_plane``; every test that uses it is
marked ``real`` and runs in one pytest-xdist worker, group ``real``) and gives each test a fresh
namespace (fixture ``real``, a ``Cluster``; ``real_examples`` also holds examples/).
``scripts/control-plane start`` runs the same thing by hand.

A test's ``Cluster`` (fixture ``real``)::

    real.namespace                               # fresh, its kubeconfigs' default; emptied after the test
    real.kubectl(*args, user="admin", input=None, timeout=60, server=None, cwd=None)
                                                 # the real kubectl as that user, in cwd (default: the
                                                 # test's HOME); server: another address, e.g. a proxy's
    real.kvdtype(*args, user="admin", ...)       # `kubectl kvdtype ARGS` (the plugin through kubectl)
    real.env(user="admin", server=None) -> dict; real.kubeconfig(user="admin", server=None) -> Path
    real.apply(objects) -> list[dict]            # into real.namespace (see plane.apply)
    real.write_status(obj) -> dict               # obj["status"] through the status subresource
    real.get(kind, name, namespace=None); real.list(kind, namespace=None)
    real.plane                                   # the ControlPlane below

The ``ControlPlane`` (fixture ``control_plane``, shared by every test of the run)::

    plane = ControlPlane(workdir, binaries()); plane.start() ... plane.stop()
    ControlPlane(workdir, binaries(), server_defaults=True)   # kube-apiserver's own LIST serving and
                                                 # compaction (the benchmark's), not the tests' below
    plane.url, plane.ca_pem, plane.etcd_url      # "https://127.0.0.1:<port>", the CA, "http://127.0.0.1:<port>"
    plane.users                                  # "admin" (system:masters), "reader" (kvdtype-reader),
                                                 # "writer" (kvdtype-writer): manifests/rbac.yaml's roles;
                                                 # "limited": bound to nothing; "ci-bot" (kvdtype-reader),
                                                 # by its token or fakekube's client certificate
    with plane.grant(user, rules) as role: ...   # user bound to a ClusterRole of rules while inside
    plane.kubeconfig(user="admin", namespace=None, server=None) -> Path   # one context, named after the user
    plane.write_kubeconfig(path, users=("admin",), namespace=None, server=None) -> Path
                                                 # a context per user (a fleet: two contexts)
    plane.env(user="admin", home=None, namespace=None, server=None) -> dict   # for kubectl and the plugin
    plane.request(method, path, body=None, user="admin", query=None, content_type=None) -> Answer
                                                 # .status, .body (parsed JSON), .text; any status
    plane.create(obj, user="admin", namespace=None, query=None) -> dict   # POST; else ApiFailure
    plane.create_all(objects, namespace=None) -> list[dict]   # many at once (concurrent POSTs), no
                                                 # status; each into its own namespace without one
    plane.apply(objects, namespace=None) -> list[dict]   # create, or merge-patch what exists, then
                                                 # each one's status through the status subresource
    plane.get(kind, namespace, name, user="admin") -> dict | None
    plane.list(kind, namespace=None, user="admin") -> list[dict]
    plane.patch(kind, namespace, name, patch, user="admin", subresource=None) -> dict   # merge patch
    plane.delete(kind, namespace, name, user="admin", body=None) -> Answer   # body: DeleteOptions
    plane.write_status(obj, namespace=None) -> dict
    plane.namespace(prefix="t") -> str           # a fresh namespace with its default ServiceAccount
    plane.ensure_namespace(name)                 # that namespace (and its ServiceAccount) made if missing
    plane.clean(namespace)                       # delete what a test made there, finalizers and all
    plane.drop(kind, namespace)                  # every custom resource of kind there, deleted in etcd at once
    plane.set_setting("true"|"false", wait=True) # spec.value; wait: until status follows and the
                                                 # policies act on it
    plane.setting() -> dict; plane.setting_lag = 0.0   # seconds before status.value follows
    plane.revision() -> int; plane.compact() -> int   # compact etcd past every revision so far:
                                                 # a continue token issued before answers 410
    plane.load_examples() / plane.unload_examples()   # examples/, stored as before the upgrade
    plane.logs() -> str                          # the servers' last log lines, for a failure message

``kind`` is a kind (``"KVCachePoolBinding"``), a plural or ``plural.group``, resolved through
discovery to its group's preferred version; objects are plain dicts.

What it serves, and why (docs/development.md, "The real control plane"):

- etcd with ``--unsafe-no-fsync``, and kube-apiserver with RBAC, a static token file for its users,
  this directory's test CA (the fake API server's, ``fakekube/tls.py``), no compaction of its own
  (``compact`` does it when a test asks) and LIST continue pages read from etcd. No
  kube-controller-manager: no garbage collection (the examples' owner references name objects
  that do not exist), no namespace deletion (hence ``clean``), no default ServiceAccount
  (``namespace`` makes one), and aggregated ClusterRoles stay empty.
- ``operator/crds.yaml``: the operator's CRDs with their CEL rules; ``operator/policies.yaml``: its
  Setting-dependent rules as ValidatingAdmissionPolicies; ``manifests/rbac.yaml``: the plugin's
  roles. ``gpustack-operator`` (the stand-in for the operator, ``SettingFollower``) is the only user
  that may create or delete a Setting.
- ``start`` returns once the policies are in force (each probed with a dry-run write).
"""

from __future__ import annotations

import base64
import copy
import http.client
import itertools
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional
from urllib.parse import quote, urlencode

import yaml

from fakekube.tls import TEST_CA_PEM, TEST_CERT_PEM, TEST_CLIENT_CA_PEM, TEST_KEY_PEM

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OPERATOR = HERE / "operator"
CRDS = OPERATOR / "crds.yaml"
POLICIES = OPERATOR / "policies.yaml"
RBAC = ROOT / "manifests" / "rbac.yaml"
EXAMPLES = ROOT / "examples"

SYSTEM_NAMESPACE = "gpustack-system"
SETTING = "model-deployment-kv-cache-dtype-owned"
SETTING_DESCRIPTION = "Render each Binding's dtype as the engines' --kv-cache-dtype."
OPERATOR_USER = "gpustack-operator"


@dataclass(frozen=True)
class User:
    name: str
    token: str
    groups: tuple[str, ...] = ()
    cluster_role: Optional[str] = None  # bound cluster-wide (a ClusterRoleBinding)


#: The users a test can be: kubeconfig(user) gives each one's credentials.
USERS = {u.name: u for u in (
    User("admin", "admin-token", ("system:masters",)),
    User("reader", "reader-token", (), "kvdtype-reader"),
    User("writer", "writer-token", (), "kvdtype-writer"),
    User("limited", "limited-token"),  # bound to nothing: a test grants it what it needs (``grant``)
    # A reader the server also knows by fakekube's client certificate (TEST_CLIENT_CERT_PEM: CN ci-bot,
    # O ci), signed by the client CA it trusts (--client-ca-file).
    User("ci-bot", "ci-bot-token", ("ci",), "kvdtype-reader"),
)}
_OPERATOR = User(OPERATOR_USER, "operator-token", ("system:masters",))
#: Kinds ``clean`` empties a namespace of (everything the tests create there).
CLEANED = ("pods", "modeldeployments.worker.gpustack.ai", "kvcachepoolbindings.worker.gpustack.ai",
           "deployments.apps", "statefulsets.apps", "daemonsets.apps", "replicasets.apps", "jobs.batch",
           "cronjobs.batch", "configmaps")
READY_TIMEOUT = 90.0
STOP_GRACE = 5.0


#: Dry-run creates each Setting-dependent policy refuses while the Setting is on (``_wait_enforced``).
_PROBES = (
    {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding", "metadata": {"name": "probe"},
     "spec": {"poolRef": {"name": "probe"}, "domain": {"blockSize": 1, "dtype": "auto"}}},
    {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment", "metadata": {"name": "probe"},
     "spec": {"engine": {"name": "vLLM"}, "kvCache": {"poolRef": {"name": "probe"}},
              "roles": [{"name": "server", "extraArgs": ["--kv-cache-dtype=fp8"]}]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "probe", "labels": {"kvcache.gpustack.ai/inject": "true"},
        "annotations": {"kvcache.gpustack.ai/engine": "vLLM"}},
     "spec": {"containers": [{"name": "main", "image": "probe", "args": ["--kv-cache-dtype", "fp8"]}]}},
)


class ApiFailure(Exception):
    """A request the API server refused: ``status`` and its Status ``body``."""

    def __init__(self, method: str, path: str, answer: "Answer") -> None:
        self.status, self.body = answer.status, answer.body
        message = answer.body.get("message") if isinstance(answer.body, dict) else None
        super().__init__(f"{method} {path}: {answer.status} {message or answer.text[:300]}")


@dataclass
class Answer:
    status: int
    text: str

    @property
    def body(self) -> Any:
        try:
            return json.loads(self.text) if self.text else None
        except ValueError:
            return None


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: frozenset[str]

    def path(self, namespace: Optional[str] = None, name: Optional[str] = None,
             subresource: Optional[str] = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        return base + (f"/{subresource}" if subresource else "")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def documents(path: Path) -> list[dict]:
    """Objects in a YAML file or directory, ``kind: List`` unrolled (independent of the plugin)."""
    files = sorted(path.rglob("*.y*ml")) if path.is_dir() else [path]
    found: list[dict] = []
    for file in files:
        for document in yaml.safe_load_all(file.read_text()):
            if isinstance(document, dict) and document.get("kind") == "List":
                found.extend(document["items"])
            elif isinstance(document, dict):
                found.append(document)
    return found


def _in_own_group() -> None:
    """In the child: its own process group (stop kills the group), and SIGKILL when the test
    process dies, so that a crashed run leaves no server behind (Linux's PR_SET_PDEATHSIG)."""
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class ControlPlane:
    """etcd and kube-apiserver for one test run (see the module docstring)."""

    def __init__(self, workdir: Path, binaries: dict[str, Path], server_defaults: bool = False) -> None:
        self.workdir = Path(workdir)
        self.binaries = binaries
        #: kube-apiserver with its own LIST serving and compaction (a production server's: continue
        #: pages from the watch cache, etcd compacted every 5 minutes), for the benchmark; the tests'
        #: default turns both off (see _start_apiserver), which the compaction tests need.
        self.server_defaults = server_defaults
        self.users = tuple(USERS)
        self.ca_pem = TEST_CA_PEM
        self.setting_lag = 0.0
        self.url = ""
        self.etcd_url = ""
        self.started_in: Optional[float] = None  # seconds from start() to ready
        self._processes: list[tuple[str, subprocess.Popen, Path]] = []
        self._resources: dict[tuple[str, str], Resource] = {}  # (apiVersion, kind) -> Resource
        self._by_name: dict[str, Resource] = {}  # kind, plural or plural.group -> preferred Resource
        self._local = threading.local()
        self._ssl = ssl.create_default_context(cadata=TEST_CA_PEM)
        self._follower: Optional[SettingFollower] = None
        self._names = itertools.count(1)

    # --- Life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_etcd()
            self._start_apiserver()
            self._wait_ready()
            self._install()
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - started

    def stop(self) -> None:
        """Stop the follower, then each server's whole process group, kube-apiserver before etcd
        (SIGTERM, then SIGKILL after ``STOP_GRACE``): nothing is left running."""
        if self._follower is not None:
            self._follower.stop()
            self._follower = None
        for _, process, _ in reversed(self._processes):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    pass
                try:
                    process.wait(timeout=STOP_GRACE)
                    break
                except subprocess.TimeoutExpired:
                    continue
            try:  # the group's other members, if the server left any (it leaves none today)
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._processes = []
        shutil.rmtree(self.workdir / "etcd", ignore_errors=True)  # its 64 MB WAL; the logs stay

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = self.workdir / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       preexec_fn=_in_own_group, cwd=self.workdir)
        self._processes.append((name, process, log))
        return process

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self._spawn("etcd", [
            str(self.binaries["etcd"]), "--name", "default", "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"default={peer_url}", "--unsafe-no-fsync", "--log-level", "warn",
        ])

    def _start_apiserver(self) -> None:
        secrets = self.workdir / "secrets"
        secrets.mkdir(exist_ok=True)
        (secrets / "tls.crt").write_text(TEST_CERT_PEM)
        (secrets / "tls.key").write_text(TEST_KEY_PEM)
        (secrets / "client-ca.crt").write_text(TEST_CLIENT_CA_PEM)
        tokens = [*USERS.values(), _OPERATOR]
        (secrets / "tokens.csv").write_text("".join(
            f'{u.token},{u.name},{u.name},"{",".join(u.groups)}"\n' for u in tokens))
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        self._spawn("kube-apiserver", [
            str(self.binaries["kube-apiserver"]), "--etcd-servers", self.etcd_url,
            # Without a default route it refuses to start unless told where it is; loopback is
            # not an address the endpoint reconciler may publish, so that is off.
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(port),
            "--endpoint-reconciler-type", "none",
            # The fake API server's test CA and certificate (127.0.0.1, localhost): one CA for both.
            "--tls-cert-file", str(secrets / "tls.crt"), "--tls-private-key-file", str(secrets / "tls.key"),
            "--service-cluster-ip-range", "10.0.0.0/24",
            # Service account tokens signed with the same key (its certificate holds the public half).
            "--service-account-issuer", self.url, "--service-account-key-file", str(secrets / "tls.crt"),
            "--service-account-signing-key-file", str(secrets / "tls.key"),
            "--authorization-mode", "RBAC", "--token-auth-file", str(secrets / "tokens.csv"),
            "--client-ca-file", str(secrets / "client-ca.crt"),
            # Compaction when a test asks (compact()), never behind its back; and a LIST's continue
            # pages read from etcd, so that compaction expires them at once (with ListFromCacheSnapshot,
            # beta and on since 1.34, the watch cache serves them until its own compactor catches up
            # with etcd's, up to 15 s later; clusters before 1.34 read them from etcd).
            *([] if self.server_defaults else [
                "--etcd-compaction-interval", "0", "--feature-gates", "ListFromCacheSnapshot=false"]),
            "--profiling=false",
        ])

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            for name, process, log in self._processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited with {process.returncode}:\n{self._tail(log)}")
            try:
                if self.request("GET", "/readyz").status == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"kube-apiserver not ready after {READY_TIMEOUT:.0f} s:\n"
                           f"{self._tail(self.workdir / 'kube-apiserver.log')}")

    @staticmethod
    def _tail(log: Path, lines: int = 30) -> str:
        try:
            return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def logs(self) -> str:
        """The last lines of each server's log, for a failure message."""
        return "\n".join(f"--- {name}\n{self._tail(log)}" for name, _, log in self._processes)

    # --- The operator's API, the users ------------------------------------------------------------

    def _install(self) -> None:
        crds = documents(CRDS)
        for crd in crds:
            self.create(crd)
        self._wait_established([crd["metadata"]["name"] for crd in crds])
        self._discover()
        self.ensure_namespace(SYSTEM_NAMESPACE)
        self.create({"apiVersion": "gpustack.ai/v1", "kind": "Setting",
                     "metadata": {"name": SETTING, "namespace": SYSTEM_NAMESPACE}, "spec": {"value": "true"}},
                    user=OPERATOR_USER)
        self.patch("settings.gpustack.ai", SYSTEM_NAMESPACE, SETTING, {"status": {
            "value": "true", "description": SETTING_DESCRIPTION, "editable": True, "sensitive": False}},
            user=OPERATOR_USER, subresource="status")
        self._follower = SettingFollower(self)
        self._follower.start()
        for role in documents(RBAC):
            self.create(role)
        for user in USERS.values():
            if user.cluster_role:
                self.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                             "metadata": {"name": f"{user.cluster_role}-{user.name}"},
                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                         "name": user.cluster_role},
                             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                           "name": user.name}]})
        for policy in documents(POLICIES):
            self.create(policy)
        self._wait_enforced()

    def _wait_established(self, names: list[str]) -> None:
        deadline = time.monotonic() + 60
        waiting = set(names)
        while waiting and time.monotonic() < deadline:
            for name in sorted(waiting):
                crd = self.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").body
                conditions = {c.get("type"): c.get("status") for c in (crd or {}).get("status", {}).get(
                    "conditions") or []}
                if conditions.get("Established") == "True":
                    waiting.discard(name)
            if waiting:
                time.sleep(0.05)
        if waiting:
            raise RuntimeError(f"CRDs not established after 60 s: {sorted(waiting)}")

    def _wait_enforced(self) -> None:
        """Until each Setting-dependent policy refuses what it should (a policy takes effect a
        moment after it is created): three dry-run creates in the system namespace."""
        probes = list(_PROBES)
        deadline = time.monotonic() + 60
        while probes:
            probes = [p for p in probes if self._probe(p) != 403]
            if probes and time.monotonic() > deadline:
                raise RuntimeError(f"policies not in force after 60 s: {[p['kind'] for p in probes]}")
            if probes:
                time.sleep(0.1)

    def ensure_namespace(self, name: str) -> None:
        """Namespace ``name`` with its default ServiceAccount, made unless it exists."""
        answer = self.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": name}})
        if answer.status not in (201, 409):
            raise ApiFailure("POST", "/api/v1/namespaces", answer)
        # What kube-controller-manager would make: Pods need their ServiceAccount to be admitted.
        account = self.request("POST", f"/api/v1/namespaces/{name}/serviceaccounts",
                               {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
        if account.status not in (201, 409):
            raise ApiFailure("POST", "serviceaccounts", account)

    def namespace(self, prefix: str = "t") -> str:
        """A namespace no test has used, with its default ServiceAccount."""
        stem = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")[:40].strip("-") or "t"
        name = f"{stem}-{next(self._names)}"
        self.ensure_namespace(name)
        return name

    def clean(self, namespace: str) -> None:
        """Delete what a test made in ``namespace`` (finalizers are dropped first: no operator
        removes them here). The namespace stays: no controller would finish deleting it."""
        for name in CLEANED:
            resource = self.resource(name)
            for obj in self.list(name, namespace):
                if obj["metadata"].get("finalizers"):
                    self.patch(name, namespace, obj["metadata"]["name"], {"metadata": {"finalizers": None}})
            answer = self.request("DELETE", resource.path(namespace))
            if answer.status >= 300 and answer.status != 404:
                raise ApiFailure("DELETE", resource.path(namespace), answer)

    @contextmanager
    def grant(self, user: str, rules: list[dict], name: Optional[str] = None) -> Iterator[str]:
        """``user`` bound cluster-wide to a ClusterRole holding ``rules`` while inside (both deleted
        after); entered once the authorizer allows the first rule's first verb (RBAC reads the
        binding from a cache, a moment behind). Yields the ClusterRole's name."""
        name = name or f"kvdtype-test-{user}-{next(self._names)}"
        self.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                     "metadata": {"name": name}, "rules": rules})
        try:
            self.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                         "metadata": {"name": name},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})
            first = rules[0]
            attributes = {"verb": first["verbs"][0], "group": first.get("apiGroups", [""])[0],
                          "resource": first.get("resources", [""])[0]}
            if first.get("resourceNames"):
                attributes["name"] = first["resourceNames"][0]
            self._wait_allowed(user, attributes)
            yield name
        finally:
            for kind in ("clusterrolebindings", "clusterroles"):
                self.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/{kind}/{name}")

    def _wait_allowed(self, user: str, attributes: dict, timeout: float = 30) -> None:
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": attributes}}
        deadline = time.monotonic() + timeout
        while not self._checked("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review,
                                user=user)["status"].get("allowed"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{user} is still not allowed {attributes} after {timeout:g} s")
            time.sleep(0.02)

    # --- Kubeconfigs -------------------------------------------------------------------------------

    def write_kubeconfig(self, path: Path, users: Iterable[str] = ("admin",), namespace: Optional[str] = None,
                         server: Optional[str] = None) -> Path:
        """A kubeconfig with one context per user (named after it), the first current."""
        users = list(users)
        cluster = {"server": server or self.url,
                   "certificate-authority-data": base64.b64encode(self.ca_pem.encode()).decode()}
        context = {"cluster": "real"}
        if namespace:
            context["namespace"] = namespace
        config = {"apiVersion": "v1", "kind": "Config", "current-context": users[0],
                  "clusters": [{"name": "real", "cluster": cluster}],
                  "users": [{"name": u, "user": {"token": self._user(u).token}} for u in users],
                  "contexts": [{"name": u, "context": dict(context, user=u)} for u in users]}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config, indent=2))
        return path

    def kubeconfig(self, user: str = "admin", namespace: Optional[str] = None, server: Optional[str] = None) -> Path:
        """The user's kubeconfig (one context named after the user), written once per namespace
        and server (``server``: another address for the API server, such as a test's proxy)."""
        name = "-".join([user, *([namespace] if namespace else []),
                         *([re.sub(r"[^0-9A-Za-z]+", "_", server)] if server else [])])
        path = self.workdir / "kubeconfigs" / name
        return path if path.exists() else self.write_kubeconfig(path, [user], namespace, server)

    def env(self, user: str = "admin", home: Optional[Path] = None, namespace: Optional[str] = None,
            server: Optional[str] = None) -> dict:
        """An environment for kubectl and the plugin as subprocesses, as ``user``."""
        env = dict(os.environ)
        for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECTL_KUBERC"):
            env.pop(name, None)
        env["KUBECONFIG"] = str(self.kubeconfig(user, namespace, server))
        if home is not None:
            env["HOME"] = str(home)
            env["KUBECACHEDIR"] = str(home / "kubecache")
        env["NO_COLOR"] = "1"
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        return env

    @staticmethod
    def _user(name: str) -> User:
        return USERS[name] if name in USERS else _OPERATOR

    # --- Requests -----------------------------------------------------------------------------------

    def _connection(self) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            host, port = self.url.removeprefix("https://").rsplit(":", 1)
            conn = http.client.HTTPSConnection(host, int(port), context=self._ssl, timeout=60)
            self._local.conn = conn
        return conn

    def request(self, method: str, path: str, body: Any = None, user: str = "admin",
                query: Optional[dict] = None, content_type: Optional[str] = None) -> Answer:
        """One request as ``user`` (kept-alive connection per thread); any status is answered."""
        target = path + (f"?{urlencode(query)}" if query else "")
        headers = {"Authorization": f"Bearer {self._user(user).token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type or "application/json"
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request(method, target, body=data, headers=headers)
                response = conn.getresponse()
                return Answer(response.status, response.read().decode(errors="replace"))
            except (http.client.RemoteDisconnected, http.client.CannotSendRequest, BrokenPipeError,
                    ConnectionResetError):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _checked(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        answer = self.request(method, path, body, **kwargs)
        if answer.status >= 300:
            raise ApiFailure(method, path, answer)
        return answer.body

    # --- Resources -----------------------------------------------------------------------------------

    def _discover(self) -> None:
        """Every served resource, by (apiVersion, kind) and by name (a name resolves to its group's
        preferred version): from discovery, as kubectl does."""
        versions = [("", "v1")]
        for group in self._checked("GET", "/apis")["groups"]:
            preferred = group["preferredVersion"]["version"]
            versions += sorted(((group["name"], v["version"]) for v in group["versions"]),
                               key=lambda gv: gv[1] != preferred)
        by_name: dict[str, Resource] = {}
        for group, version in versions:
            listing = self._checked("GET", f"/apis/{group}/{version}" if group else "/api/v1")
            subresources: dict[str, set[str]] = {}
            for entry in listing["resources"]:
                plural, _, sub = entry["name"].partition("/")
                if sub:
                    subresources.setdefault(plural, set()).add(sub)
            for entry in listing["resources"]:
                if "/" in entry["name"]:
                    continue
                resource = Resource(group, version, entry["name"], entry["kind"], entry["namespaced"],
                                    frozenset(subresources.get(entry["name"], ())))
                self._resources[(f"{group}/{version}" if group else version, resource.kind)] = resource
                for name in (resource.kind, resource.plural, f"{resource.plural}.{group}" if group else ""):
                    if name:
                        by_name.setdefault(name, resource)
        self._by_name = by_name

    def resource(self, kind: str, api_version: Optional[str] = None) -> Resource:
        """The served resource of a kind (at ``api_version``, or its preferred one), a plural or
        ``plural.group``."""
        if not self._resources:
            self._discover()
        key = (api_version, kind) if api_version else None
        found = self._resources.get(key) if key else self._by_name.get(kind)
        if found is None:
            self._discover()  # a CRD created since
            found = self._resources.get(key) if key else self._by_name.get(kind)
        if found is None:
            raise KeyError(f"{api_version or ''} {kind} is not served")
        return found

    def _of(self, obj: dict) -> Resource:
        return self.resource(obj["kind"], obj.get("apiVersion"))

    # --- Objects -------------------------------------------------------------------------------------

    def create(self, obj: dict, user: str = "admin", namespace: Optional[str] = None,
               query: Optional[dict] = None) -> dict:
        namespace = namespace or obj.get("metadata", {}).get("namespace")
        body = copy.deepcopy(obj)
        if namespace and self._of(obj).namespaced:
            body.setdefault("metadata", {})["namespace"] = namespace
        return self._checked("POST", self._of(obj).path(namespace), body, user=user, query=query)

    def get(self, kind: str, namespace: Optional[str], name: str, user: str = "admin") -> Optional[dict]:
        answer = self.request("GET", self.resource(kind).path(namespace, name), user=user)
        if answer.status == 404:
            return None
        if answer.status >= 300:
            raise ApiFailure("GET", self.resource(kind).path(namespace, name), answer)
        return answer.body

    def list(self, kind: str, namespace: Optional[str] = None, user: str = "admin") -> list[dict]:
        return self._checked("GET", self.resource(kind).path(namespace), user=user)["items"]

    def patch(self, kind: str, namespace: Optional[str], name: str, patch: dict, user: str = "admin",
              subresource: Optional[str] = None) -> dict:
        """A JSON merge patch (of the status subresource with ``subresource="status"``)."""
        path = self.resource(kind).path(namespace, name, subresource)
        return self._checked("PATCH", path, patch, user=user, content_type="application/merge-patch+json")

    def delete(self, kind: str, namespace: Optional[str], name: str, user: str = "admin",
               body: Optional[dict] = None) -> Answer:
        return self.request("DELETE", self.resource(kind).path(namespace, name), body, user=user)

    def write_status(self, obj: dict, namespace: Optional[str] = None) -> dict:
        """``obj["status"]`` written through the status subresource, as a controller writes it."""
        resource = self._of(obj)
        namespace = namespace or obj["metadata"].get("namespace")
        path = resource.path(namespace, obj["metadata"]["name"], "status")
        return self._checked("PATCH", path, {"status": obj["status"]}, content_type="application/merge-patch+json")

    def create_all(self, objects: list[dict], namespace: Optional[str] = None, writers: int = 16) -> list[dict]:
        """Many objects created at once: concurrent POSTs, each writer on its kept-alive connection
        (the API server, not the client, is what they wait on); into ``namespace``, or each into
        its own. No status is written. Returns the stored objects, in order."""
        failures: list[str] = []
        stored: list[dict] = [{}] * len(objects)

        def create(k: int) -> None:
            for index in range(k, len(objects), writers):
                obj = objects[index]
                answer = self.request("POST", self._of(obj).path(namespace or obj["metadata"].get("namespace")), obj)
                if answer.status != 201:
                    failures.append(f"{obj['metadata']['name']}: {answer.status} {answer.text[:200]}")
                else:
                    stored[index] = answer.body

        threads = [threading.Thread(target=create, args=(k,)) for k in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise RuntimeError(f"{len(failures)} create(s) failed, the first: {failures[0]}")
        return stored

    def apply(self, objects: Iterable[dict], namespace: Optional[str] = None) -> list[dict]:
        """Each object created (or, where it exists, merge-patched to it), then its status written
        where it has one and the kind a status subresource; ``namespace`` overrides theirs."""
        stored = []
        for obj in objects:
            resource = self._of(obj)
            where = (namespace or obj.get("metadata", {}).get("namespace")) if resource.namespaced else None
            body = {k: v for k, v in copy.deepcopy(obj).items() if k != "status"}
            if where:
                body["metadata"]["namespace"] = where
            answer = self.request("POST", resource.path(where), body)
            if answer.status == 409:
                answer = self.request("PATCH", resource.path(where, body["metadata"]["name"]), body,
                                      content_type="application/merge-patch+json")
            if answer.status >= 300:
                raise ApiFailure("apply", resource.path(where, body["metadata"]["name"]), answer)
            result = answer.body
            if obj.get("status") and "status" in resource.subresources:
                result = self.write_status(dict(obj, metadata=dict(obj["metadata"], namespace=where)), where)
            stored.append(result)
        return stored

    # --- The Setting, etcd ---------------------------------------------------------------------------

    def set_setting(self, value: str, wait: bool = True, timeout: float = 30) -> dict:
        """The Setting's spec.value, as ``escape`` writes it (a JSON merge patch). With ``wait``, it
        returns once status.value has followed (after ``setting_lag``) and the admission policies
        act on it (their parameter is read from a cache, a moment behind)."""
        setting = self.patch("settings.gpustack.ai", SYSTEM_NAMESPACE, SETTING, {"spec": {"value": value}})
        deadline = time.monotonic() + timeout + self.setting_lag
        while wait and not ((setting.get("status") or {}).get("value") == value and self._enforcing() == (
                value == "true")):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Setting's status.value, or the policies, did not follow {value!r}")
            time.sleep(0.02)
            setting = self.setting()
        return setting

    def _enforcing(self) -> bool:
        """Whether the policies refuse a new ``auto`` Binding now (a dry-run create)."""
        return self._probe(_PROBES[0]) == 403

    def _probe(self, probe: dict) -> int:
        answer = self.request("POST", self.resource(probe["kind"]).path(SYSTEM_NAMESPACE), probe,
                              query={"dryRun": "All"})
        if answer.status >= 300 and answer.status != 403:
            raise RuntimeError(f"probing the policies: {answer.status} {answer.text[:300]}")
        return answer.status

    def setting(self) -> dict:
        return self.get("settings.gpustack.ai", SYSTEM_NAMESPACE, SETTING)

    def _etcd(self, path: str, body: dict) -> dict:
        """etcd's JSON gateway (its client port serves /v3/... as well as gRPC)."""
        host, port = self.etcd_url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            text = response.read().decode()
        finally:
            conn.close()
        if response.status != 200:
            raise RuntimeError(f"etcd {path}: {response.status} {text[:300]}")
        return json.loads(text)

    def revision(self) -> int:
        """etcd's current revision (every write to the API server moves it)."""
        return int(self._etcd("/v3/maintenance/status", {})["header"]["revision"])

    def drop(self, kind: str, namespace: str) -> None:
        """Every custom resource of ``kind`` in ``namespace`` deleted at once, in etcd, under the
        API server's own keys (/registry/<group>/<plural>/<namespace>/): a DELETE of a collection of
        thousands takes the API server seconds. Its watch cache hears the deletions as from any
        write, a moment later: this returns once a LIST shows none of them."""
        resource = self.resource(kind)
        if not resource.group or "." not in resource.group:
            raise ValueError(f"{kind}: only custom resources are stored under /registry/<group>/")
        prefix = f"/registry/{resource.group}/{resource.plural}/{namespace}/".encode()
        end = prefix[:-1] + bytes([prefix[-1] + 1])
        self._etcd("/v3/kv/deleterange", {"key": base64.b64encode(prefix).decode(),
                                          "range_end": base64.b64encode(end).decode()})
        deadline = time.monotonic() + 30
        while self.request("GET", resource.path(namespace), query={"limit": 1}).body["items"]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{resource.plural} in {namespace} still listed 30 s after the etcd delete")
            time.sleep(0.05)

    def compact(self) -> int:
        """Compact etcd, physically, past every revision so far (a write first moves the revision
        on, since compacting at R keeps R): a LIST continue token issued before then answers 410
        Expired, as on a cluster whose compaction ran mid-list. Returns the compacted revision."""
        key = base64.b64encode(b"/kvdtype-tests/compaction").decode()
        put = self._etcd("/v3/kv/put", {"key": key, "value": base64.b64encode(str(time.time()).encode()).decode()})
        revision = int(put["header"]["revision"])
        self._etcd("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    # --- The examples ----------------------------------------------------------------------------------

    def example_namespaces(self) -> list[str]:
        return sorted({o["metadata"]["namespace"] for o in documents(EXAMPLES)
                       if o["metadata"].get("namespace") and o.get("kind") != "Setting"})

    def unload_examples(self) -> None:
        """The examples gone again (the Setting, which every test shares, is left as it is)."""
        for namespace in self.example_namespaces():
            self.clean(namespace)
        for obj in documents(EXAMPLES):
            if not obj["metadata"].get("namespace") and not self._of(obj).namespaced:
                self.delete(obj["kind"], None, obj["metadata"]["name"])

    def load_examples(self) -> list[dict]:
        """examples/ as a cluster holds them before the upgrade: written with the Setting off (some
        would be refused with it on, as they were stored before it), statuses included, then the
        Setting turned on."""
        objects = documents(EXAMPLES)
        for namespace in self.example_namespaces():
            self.ensure_namespace(namespace)
        self.set_setting("false")
        try:
            stored = self.apply(o for o in objects if o.get("kind") != "Setting")
        finally:
            self.set_setting("true")
        return stored


def binaries(log: Any = None) -> dict[str, Path]:
    """kube-apiserver's and etcd's paths, built into scripts/control-plane's cache if missing."""
    return _script().ensure_all(["kube-apiserver", "etcd"], log=log or (lambda line: print(line, file=sys.stderr)))


def cached() -> bool:
    """Whether the binaries the control plane needs are built already (no build to wait for)."""
    script = _script()
    return all(script.cached(script.BY_NAME[name]) for name in ("kube-apiserver", "etcd"))


def _script() -> Any:
    """scripts/control-plane as a module, loaded once."""
    from _support import script_module  # here, not at the top: _support imports this module

    return sys.modules.get("control_plane_script") or script_module("control-plane")


class Cluster:
    """One test's part of the control plane (fixture ``real``): a fresh namespace, which the
    kubeconfigs it hands out make the default, and a HOME of its own for kubectl's caches."""

    def __init__(self, plane: ControlPlane, namespace: str, home: Path, kubectl: str) -> None:
        self.plane, self.namespace, self.home, self._kubectl = plane, namespace, home, kubectl

    def kubeconfig(self, user: str = "admin", server: Optional[str] = None) -> Path:
        return self.plane.kubeconfig(user, self.namespace, server)

    def env(self, user: str = "admin", server: Optional[str] = None) -> dict:
        return self.plane.env(user, self.home, self.namespace, server)

    def kubectl(self, *args: str, user: str = "admin", input: Optional[str] = None, timeout: float = 60,
                server: Optional[str] = None, cwd: Optional[Path] = None,
                extra: Optional[dict] = None) -> subprocess.CompletedProcess:
        """The real kubectl as ``user`` (through ``server``, e.g. a proxy's URL, when given), in
        ``cwd`` (default: this test's HOME), with the variables of ``extra`` set too; never raises on
        a non-zero exit."""
        return subprocess.run([self._kubectl, *args], env={**self.env(user, server), **(extra or {})}, input=input,
                              text=True, capture_output=True, timeout=timeout, cwd=cwd or self.home)

    def kvdtype(self, *args: str, user: str = "admin", input: Optional[str] = None, timeout: float = 60,
                server: Optional[str] = None, cwd: Optional[Path] = None,
                extra: Optional[dict] = None) -> subprocess.CompletedProcess:
        """``kubectl kvdtype ARGS`` as ``user``: the real kubectl finds the plugin on PATH."""
        return self.kubectl("kvdtype", *args, user=user, input=input, timeout=timeout, server=server, cwd=cwd,
                            extra=extra)

    def apply(self, objects: Iterable[dict]) -> list[dict]:
        """``plane.apply`` into this test's namespace (cluster-scoped objects stay cluster-scoped)."""
        return self.plane.apply(objects, self.namespace)

    def write_status(self, obj: dict) -> dict:
        return self.plane.write_status(obj, obj["metadata"].get("namespace") or self.namespace)

    def get(self, kind: str, name: str, namespace: Optional[str] = None) -> Optional[dict]:
        return self.plane.get(kind, namespace or self.namespace, name)

    def list(self, kind: str, namespace: Optional[str] = None) -> list[dict]:
        return self.plane.list(kind, namespace or self.namespace)


class SettingFollower:
    """The operator's part the plugin depends on: the Setting's status.value follows its
    spec.value, ``plane.setting_lag`` seconds after the change is seen (a watch, so no polling)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._stopping = threading.Event()
        self._conn: Optional[http.client.HTTPSConnection] = None
        self._thread = threading.Thread(target=self._run, name="setting-follower", daemon=True)
        # The harness's own thread: it shares a pytest-xdist worker with fast-tier tests, whose
        # guard (conftest.HARNESS_THREAD) must not take its watch's reconnects for theirs.
        self._thread.kvdtype_harness = True  # type: ignore[attr-defined]
        self.errors: list[str] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=10)

    def _path(self, **query: Any) -> str:
        return (self.plane.resource("settings.gpustack.ai").path(SYSTEM_NAMESPACE)
                + "?" + urlencode(dict(query, fieldSelector=f"metadata.name={SETTING}")))

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._follow()
            except (OSError, http.client.HTTPException, ValueError, KeyError) as error:
                if self._stopping.is_set():
                    return
                self.errors.append(repr(error))
                self._stopping.wait(0.2)

    def _follow(self) -> None:
        """Catch up with a LIST, then follow its watch until the server ends it."""
        listing = self.plane._checked("GET", self._path(), user=OPERATOR_USER)
        for setting in listing["items"]:
            self._catch_up(setting)
        host, port = self.plane.url.removeprefix("https://").rsplit(":", 1)
        self._conn = http.client.HTTPSConnection(host, int(port), context=self.plane._ssl, timeout=None)
        try:
            self._conn.request("GET", self._path(watch="true", timeoutSeconds=60,
                                                 resourceVersion=listing["metadata"]["resourceVersion"]),
                               headers={"Authorization": f"Bearer {_OPERATOR.token}"})
            response = self._conn.getresponse()
            if response.status != 200:
                raise ValueError(f"watch answered {response.status}")
            while not self._stopping.is_set():
                line = response.readline()
                if not line:
                    return
                event = json.loads(line)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self._catch_up(event["object"])
        finally:
            self._conn.close()
            self._conn = None

    def _catch_up(self, setting: dict) -> None:
        wanted = (setting.get("spec") or {}).get("value")
        if wanted is None or (setting.get("status") or {}).get("value") == wanted:
            return
        if self.plane.setting_lag > 0 and self._stopping.wait(self.plane.setting_lag):
            return
        # What the spec says now (it may have changed again while this waited).
        current = self.plane.get("settings.gpustack.ai", SYSTEM_NAMESPACE, SETTING, user=OPERATOR_USER)
        wanted = ((current or {}).get("spec") or {}).get("value")
        if current is not None and wanted is not None and (current.get("status") or {}).get("value") != wanted:
            self.plane.patch("settings.gpustack.ai", SYSTEM_NAMESPACE, SETTING, {"status": {"value": wanted}},
                             user=OPERATOR_USER, subresource="status")

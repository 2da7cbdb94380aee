"""The fake API server (tests/fakekube) checked against the real one (tests/_controlplane.py): one
table of scenarios, each run on both, parametrized over scenario x server. A scenario stores its
objects, acts (the plugin through the real kubectl, or kubectl itself), and its outcome is
compared with the scenario's expectation: the exit status, the plugin's -o json report (or its one
error sentence), and the outcome of each request that mattered, as a proxy between the client and
the server logged it (tests/_proxy.py, in front of both). Both servers meeting the same expectation
is the fake agreeing with the real server.

Each server is asked for a scenario's condition in its own way where it has to be (an expired
continue token: the fake's expire_continue, the real one by compacting etcd after the first page;
a kind the user may not list: the fake's deny, a real RBAC role without it); everything the plugin
then meets is the server's answer.

Where the fake differs on purpose (it has no schema, no admission rules of the operator unless a
test adds them), the scenario says what the fake answers instead (``fake_differs``), and
docs/development.md ("The fake and the real server") lists why it stays; faults only the fake can
inject are not here (they are the fake's job).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import ssl
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional
from urllib.parse import urlencode

import pytest
import yaml

from _controlplane import RBAC, SETTING, SYSTEM_NAMESPACE, documents
from _proxy import ApiProxy
from _support import EXAMPLES, JUDGING, direct, paged, seed
from conftest import kubectl_path
from fakekube import FakeKube

pytestmark = pytest.mark.e2e  # the fake's cases; the real ones are marked real too (SERVERS)

#: Where each kind used here is served (the same paths on both servers).
PATHS = {
    "KVCachePoolBinding": ("/apis/worker.gpustack.ai/v1", "kvcachepoolbindings", True),
    "ModelDeployment": ("/apis/worker.gpustack.ai/v1", "modeldeployments", True),
    "Setting": ("/apis/gpustack.ai/v1", "settings", True),
    "Namespace": ("/api/v1", "namespaces", False),
}
FINALIZER = "gpustack.ai/cleanup"
#: The examples' Bindings an engine rejects: they keep the Setting off after any rebind.
EXAMPLES_REJECTED = "team-a/legacy, team-b/half, team-b/mixed, team-b/turbo"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


# --- The two servers, asked alike ------------------------------------------------------------------------


class Server:
    """One server for one scenario, the proxy in front of it: what a scenario may ask of either."""

    name: str

    def __init__(self, url: str, home: Path, namespace: str) -> None:
        self.home, self.namespace = home, namespace
        self.proxy = ApiProxy(url).start()

    # What each server does its own way.
    def kubeconfig(self, user: str) -> Path:
        raise NotImplementedError

    def request(self, method: str, path: str, body: Any = None, query: Optional[dict] = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        raise NotImplementedError

    def store(self, objects: list[dict], before_the_upgrade: bool = False) -> None:
        """Objects in this scenario's namespace; ``before_the_upgrade``: some the operator's rules
        refuse today, as a cluster holds them from before."""
        raise NotImplementedError

    def expire_continue(self) -> None:
        """The next LIST page asked with a continue token is answered 410 Expired."""
        raise NotImplementedError

    @contextmanager
    def may_not_list(self, group: str, resource: str) -> Iterator[str]:
        """A user who may do what kvdtype-reader allows but list ``resource``: yields its name."""
        raise NotImplementedError
        yield ""

    def stop(self) -> None:
        self.proxy.stop()

    # The same on both.
    def path(self, kind: str, name: Optional[str] = None, namespace: Optional[str] = None) -> str:
        prefix, plural, namespaced = PATHS[kind]
        where = f"/namespaces/{namespace or self.namespace}" if namespaced else ""
        return f"{prefix}{where}/{plural}" + (f"/{name}" if name else "")

    def get(self, kind: str, name: str, namespace: Optional[str] = None) -> Optional[dict]:
        status, body = self.request("GET", self.path(kind, name, namespace))
        assert status in (200, 404), (status, body)
        return body if status == 200 else None

    def patch(self, kind: str, name: str, patch: dict, namespace: Optional[str] = None,
              subresource: str = "") -> dict:
        path = self.path(kind, name, namespace) + (f"/{subresource}" if subresource else "")
        status, body = self.request("PATCH", path, patch, content_type="application/merge-patch+json")
        assert status == 200, (status, body)
        return body

    def env(self, user: str) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
                                                              "KUBECTL_KUBERC")}
        env.update(KUBECONFIG=str(self.kubeconfig(user)), HOME=str(self.home), KUBECACHEDIR=str(self.home / "cache"),
                   NO_COLOR="1", PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]))
        return env

    def kubectl(self, *args: str, user: str = "admin", input: Optional[str] = None,
                extra: Optional[dict] = None) -> subprocess.CompletedProcess:
        return subprocess.run([kubectl_path(), *args], env={**self.env(user), **(extra or {})}, cwd=self.home,
                              input=input, text=True, capture_output=True, timeout=60)

    def kvdtype(self, *args: str, user: str = "admin", extra: Optional[dict] = None) -> subprocess.CompletedProcess:
        return self.kubectl("kvdtype", *args, user=user, extra=extra)

    def background(self, *args: str, user: str = "admin") -> subprocess.Popen:
        return subprocess.Popen([kubectl_path(), "kvdtype", *args], env=self.env(user), cwd=self.home, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


class Fake(Server):
    name = "fake"

    def __init__(self, home: Path, namespace: str) -> None:
        self.fake = FakeKube().start()
        super().__init__(self.fake.url, home, namespace)
        self._ssl = ssl.create_default_context(cadata=self.fake.ca_pem)
        seed(self.fake, documents(EXAMPLES))  # as the real server holds them for the module
        self.fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})

    def kubeconfig(self, user: str) -> Path:
        path = self.home / f"kubeconfig-{user}"
        if not path.exists():
            self.fake.write_kubeconfig(path, namespace=self.namespace, user=user)
            config = json.loads(path.read_text())
            config["clusters"][0]["cluster"]["server"] = self.proxy.url
            path.write_text(json.dumps(config))
        return path

    def request(self, method: str, path: str, body: Any = None, query: Optional[dict] = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        host, port = self.fake.url.removeprefix("https://").rsplit(":", 1)
        conn = http.client.HTTPSConnection(host, int(port), context=self._ssl, timeout=30)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path + (f"?{urlencode(query)}" if query else ""), body=data,
                         headers={"Authorization": f"Bearer {self.fake.token}", "Content-Type": content_type})
            response = conn.getresponse()
            text = response.read()
        finally:
            conn.close()
        return response.status, json.loads(text) if text else None

    def store(self, objects: list[dict], before_the_upgrade: bool = False) -> None:
        for obj in objects:
            obj = json.loads(json.dumps(obj))
            if PATHS.get(obj["kind"], (None, None, True))[2]:
                obj["metadata"].setdefault("namespace", self.namespace)
            self.fake.add(obj)

    def expire_continue(self) -> None:
        self.fake.expire_continue(times=1)

    @contextmanager
    def may_not_list(self, group: str, resource: str) -> Iterator[str]:
        self.fake.deny("list", resource, group=group)
        yield "limited"

    def stop(self) -> None:
        super().stop()
        self.fake.stop()


class Real(Server):
    name = "real"

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self._many = False  # Bindings by the hundred: dropped at once at the end (a DELETE takes seconds)
        super().__init__(cluster.plane.url, cluster.home, cluster.namespace)

    def stop(self) -> None:
        super().stop()
        if self._many:
            self.cluster.plane.drop("KVCachePoolBinding", self.namespace)

    def kubeconfig(self, user: str) -> Path:
        return self.cluster.kubeconfig(user, server=self.proxy.url)

    def request(self, method: str, path: str, body: Any = None, query: Optional[dict] = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        answer = self.cluster.plane.request(method, path, body, query=query, content_type=content_type)
        return answer.status, answer.body

    def store(self, objects: list[dict], before_the_upgrade: bool = False) -> None:
        plane = self.cluster.plane
        self._many = self._many or len(objects) > 100
        if not before_the_upgrade:
            plane.create_all(objects, self.namespace)
            return
        plane.set_setting("false")
        try:
            plane.create_all(objects, self.namespace)
        finally:
            plane.set_setting("true")

    def expire_continue(self) -> None:
        self.cluster.plane.compact()

    @contextmanager
    def may_not_list(self, group: str, resource: str) -> Iterator[str]:
        (reader,) = [r for r in documents(RBAC) if r["metadata"]["name"] == "kvdtype-reader"]
        rules = []
        for rule in reader["rules"]:
            kept = [r for r in rule["resources"] if not (r == resource and group in rule["apiGroups"])]
            if kept:
                rules.append({**rule, "resources": kept})
        with self.cluster.plane.grant("limited", rules):
            yield "limited"


# --- What a scenario stores, does and expects ----------------------------------------------------------------


def binding(name: str, dtype: str, finalizers: tuple[str, ...] = ()) -> dict:
    metadata: dict = {"name": name, **({"finalizers": list(finalizers)} if finalizers else {})}
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding", "metadata": metadata,
            "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": name, "blockSize": 64, "dtype": dtype}}}


def deployment(name: str, binding_name: str, extra_args: tuple[str, ...] = (), replicas: int = 1) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment", "metadata": {"name": name},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": "vLLM", "version": "0.29.0"},
                     "kvCache": {"poolRef": {"name": binding_name}},
                     "roles": [{"name": "server", "kind": "Server", "replicas": replicas,
                                "extraArgs": list(extra_args)}]}}


@dataclass
class Outcome:
    """What a scenario compares: the exit status, what was said, and the requests that mattered."""

    status: Optional[int] = None
    said: Any = None
    requests: list = field(default_factory=list)
    state: Any = None


@dataclass(frozen=True)
class Scenario:
    id: str
    act: Callable[[Server], Outcome]
    expect: Outcome
    #: What the fake answers instead, when it differs on purpose (docs/development.md says why).
    fake_differs: Optional[Outcome] = None
    #: The plugin's command on examples/ read offline: its report is the ``said`` both must show.
    offline: tuple[str, ...] = ()


def _report(server: Server, result: subprocess.CompletedProcess) -> dict:
    """The plugin's -o json report, the scenario's namespace written NS and users USER."""
    assert result.stdout, result.stderr
    return json.loads(_normal(server, result.stdout))


def _normal(server: Server, text: str) -> str:
    """A server's words with what differs by run written alike: the namespace, the user, the
    test's directory, a backup's time."""
    text = text.replace(str(server.home), "HOME").replace(server.namespace, "NS")
    text = re.sub(r"\d{8}T\d{12}Z", "TIME", text)
    return re.sub(r'User \\?"[^"\\]*\\?"', "User USER", text)


def _error(server: Server, result: subprocess.CompletedProcess) -> str:
    """The one error sentence, normalized; the line before it may be progress (a step, a create)."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    assert sum(line.startswith("error:") for line in lines) == 1, result.stderr
    return _normal(server, lines[-1])


def _exchanges(server: Server, method: str, path: str) -> list[tuple[str, Optional[int]]]:
    """(method, status) of each exchange of ``method`` whose path matches ``path``."""
    return [(e.method, e.status) for e in server.proxy.exchanges(method, path)]


def _judged(report: dict) -> dict:
    return {"items": report["items"], "findings": report["findings"], "summary": report["summary"]}


def _offline(command: tuple[str, ...]) -> dict:
    """The report of ``command`` on examples/ read offline."""
    result = direct(dict(os.environ), *command, "-f", str(EXAMPLES), "-o", "json")
    assert result.returncode in (0, 1), result.stderr
    return _judged(json.loads(result.stdout))


# The scenarios' acts ---------------------------------------------------------------------------------------


def on_the_examples(*command: str) -> Callable[[Server], Outcome]:
    """The examples judged by ``command`` as the reader: the report, and every request's answer."""
    def act(server: Server) -> Outcome:
        result = server.kvdtype(*command, "-A", "-o", "json", user="reader")
        answered = sorted({(e.method, e.status) for e in server.proxy.log})
        return Outcome(result.returncode, _judged(_report(server, result)), answered)
    return act


def forbidden_kind(server: Server) -> Outcome:
    server.store([binding("chat", "bfloat16")])
    with server.may_not_list("apps", "deployments") as user:
        result = server.kvdtype("find-flags", "-o", "json", user=user)
    report = _report(server, result)
    return Outcome(result.returncode, [(f["code"], f["message"]) for f in report["findings"]],
                   _exchanges(server, "GET", r"/deployments$"))


def expired_continue(server: Server) -> Outcome:
    server.store([binding(f"b{i:03d}", "bfloat16") for i in range(501)])  # two pages of 500
    server.proxy.after(lambda exchange: server.expire_continue(), "GET", r"/kvcachepoolbindings$",
                       when=lambda e: "continue" not in e.query)
    result = server.kvdtype("check", "-o", "json", user="reader", extra=paged({}))
    pages = server.proxy.exchanges("GET", r"/kvcachepoolbindings$")
    expired = next(p for p in pages if p.status == 410).json
    return Outcome(result.returncode, len(_report(server, result)["items"]), [p.status for p in pages],
                   (expired["reason"], expired["message"]))


def missing_deployment(server: Server) -> Outcome:
    result = server.kvdtype("verify", "nope", user="reader")
    return Outcome(result.returncode, _error(server, result), _exchanges(server, "GET", r"/modeldeployments/nope$"))


def delete_precondition(server: Server) -> Outcome:
    """A spec edit between the rebind's GET and its DELETE: the DELETE's preconditions refuse it."""
    server.store([binding("legacy", "bf16"), deployment("qwen", "legacy")])
    held = server.proxy.hold("DELETE", r"/modeldeployments/qwen$")
    run = server.background("escape", "rebind", "legacy", "--dtype", "bfloat16", "--apply", "-o", "json",
                            user="writer")
    try:
        held.wait_arrived()
        server.patch("ModelDeployment", "qwen", {"spec": {"roles": [{**deployment("qwen", "legacy")["spec"]["roles"][0],
                                                                    "replicas": 3}]}})
    finally:
        held.release()
    _, err = run.communicate(timeout=60)
    refusal = server.proxy.exchanges("DELETE", r"/modeldeployments/qwen$")[0].json
    kept = server.get("ModelDeployment", "qwen")
    return Outcome(run.returncode, _error(server, subprocess.CompletedProcess([], run.returncode, "", err)),
                   _exchanges(server, "DELETE", r"/modeldeployments/qwen$"),
                   (refusal["reason"], re.sub(r"\(\d+\)", "(RV)", refusal["message"]),
                    kept["spec"]["roles"][0]["replicas"], kept["spec"]["kvCache"]["poolRef"]))


def patch_precondition(server: Server) -> Outcome:
    """A status write between the fix's GET and its PATCH: the patch's resourceVersion test fails."""
    server.store([binding("chat", "bfloat16"),
                  deployment("qwen", "chat", ("--kv-cache-dtype", "bfloat16", "--max-model-len=4096"))],
                 before_the_upgrade=True)
    held = server.proxy.hold("PATCH", r"/modeldeployments/qwen$")
    run = server.background("find-flags", "--fix", "--apply", "--yes", "-o", "json", user="writer")
    try:
        held.wait_arrived()
        server.patch("ModelDeployment", "qwen", {"status": {"observedGeneration": 7}}, subresource="status")
    finally:
        held.release()
    out, _ = run.communicate(timeout=60)
    (item,) = json.loads(_normal(server, out))["items"]
    (patch,) = server.proxy.exchanges("PATCH", r"/modeldeployments/qwen$")
    return Outcome(run.returncode, (item["state"], item["detail"].split(" (")[0]), [(patch.status,)],
                   (patch.json["reason"], patch.json["message"],
                    server.get("ModelDeployment", "qwen")["spec"]["roles"][0]["extraArgs"]))


def finalizer_on_the_old_binding(server: Server) -> Outcome:
    server.store([binding("legacy", "bf16", finalizers=(FINALIZER,)), deployment("qwen", "legacy")])
    result = server.kvdtype("escape", "rebind", "legacy", "--dtype", "bfloat16", "--strategy", "side-by-side",
                            "--apply", "-o", "json", user="writer")
    report = _report(server, result)
    old = server.get("KVCachePoolBinding", "legacy")
    return Outcome(result.returncode, {i["id"]: i["state"] for i in report["items"]},
                   _exchanges(server, "DELETE", r"/kvcachepoolbindings/legacy$"),
                   (bool(old["metadata"].get("deletionTimestamp")), old["metadata"]["finalizers"],
                    server.get("Setting", SETTING, SYSTEM_NAMESPACE)["spec"]["value"]))


def strategic_merge_patch_on_the_setting(server: Server) -> Outcome:
    result = server.kubectl("-n", SYSTEM_NAMESPACE, "patch", "setting", SETTING, "-p", '{"spec":{"value":"false"}}')
    return Outcome(result.returncode, result.stderr.strip(), _exchanges(server, "PATCH", f"/settings/{SETTING}$"),
                   server.get("Setting", SETTING, SYSTEM_NAMESPACE)["spec"]["value"])


def dry_runs(server: Server) -> Outcome:
    server.store([binding("legacy", "bf16"), deployment("qwen", "legacy")])
    off = server.kvdtype("escape", "off", "--yes", "--dry-run=server", "-o", "json", user="writer")
    rebind = server.kvdtype("escape", "rebind", "legacy", "--dtype", "bfloat16", "--dry-run=server", "-o", "json",
                            user="writer")
    sent = [(e.method, e.query.get("dryRun"), e.status) for e in server.proxy.log
            if e.method in WRITES and "selfsubjectaccessreviews" not in e.path]
    left = (server.get("Setting", SETTING, SYSTEM_NAMESPACE)["spec"]["value"],
            server.get("ModelDeployment", "qwen") is not None, server.get("KVCachePoolBinding", "legacy") is not None,
            server.get("KVCachePoolBinding", "legacy-bfloat16") is not None)
    return Outcome((off.returncode, rebind.returncode),
                   (_report(server, off)["items"][0]["result"],
                    {i["id"]: i["state"] for i in _report(server, rebind)["items"]}), sent, left)


def a_deletes_body_wins_over_its_query(server: Server) -> Outcome:
    """kube-apiserver reads a DELETE's options from its body when it has one: a dryRun in the query
    beside it is ignored, and the object is deleted."""
    server.store([binding("scratch", "bfloat16")])
    status, _ = server.request("DELETE", server.path("KVCachePoolBinding", "scratch"),
                               {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {}},
                               query={"dryRun": "All"})
    return Outcome(status, state=server.get("KVCachePoolBinding", "scratch") is None)


def status_through_its_subresource(server: Server) -> Outcome:
    """A create's status is dropped; a write to the main resource keeps status as it was; the
    status subresource writes only status."""
    created = server.request("POST", server.path("ModelDeployment"),
                             {**deployment("qwen", "chat"), "status": {"observedGeneration": 3}})[1]
    main = server.patch("ModelDeployment", "qwen", {"status": {"observedGeneration": 4},
                                                    "metadata": {"labels": {"x": "y"}}})
    sub = server.patch("ModelDeployment", "qwen", {"status": {"observedGeneration": 5},
                                                   "metadata": {"labels": {"x": "z"}}}, subresource="status")
    return Outcome(said=(created.get("status"), main.get("status"), main["metadata"]["labels"],
                         sub["status"], sub["metadata"]["labels"]))


def the_schema_refuses(server: Server) -> Outcome:
    """A hand-edited backup restored with a value the CRD's schema refuses (replicas -1)."""
    backup = server.home / "edited"
    backup.mkdir()
    edited = deployment("qwen", "chat", replicas=-1)
    edited["metadata"]["namespace"] = server.namespace
    (backup / "modeldeployment.yaml").write_text(yaml.safe_dump(edited))
    result = server.kvdtype("escape", "restore", str(backup), "--apply", user="writer")
    return Outcome(result.returncode, _error(server, result) if result.returncode else None,
                   _exchanges(server, "POST", r"/modeldeployments$"))


def the_operators_rule_refuses(server: Server) -> Outcome:
    """A backup's auto Binding restored while the Setting is on: the operator refuses it (on the
    fake, a test's admission hook plays that rule; its words are a webhook's)."""
    if isinstance(server, Fake):
        server.fake.admission(lambda op, new, old: "a new KVCachePoolBinding may not declare dtype auto" if
                              op == "CREATE" and (new or {}).get("kind") == "KVCachePoolBinding"
                              and new["spec"]["domain"].get("dtype") == "auto" else None)
    backup = server.home / "saved"
    backup.mkdir()
    saved = binding("scratch", "auto")
    saved["metadata"]["namespace"] = server.namespace
    (backup / "kvcachepoolbinding.yaml").write_text(yaml.safe_dump(saved))
    result = server.kvdtype("escape", "restore", str(backup), "--apply", user="writer")
    error = _error(server, result)
    return Outcome(result.returncode, (error.split(" (403 Forbidden): ")[0], "may not declare dtype auto" in error),
                   _exchanges(server, "POST", r"/kvcachepoolbindings$"))


SCENARIOS = [
    # The 404: a Pod's owner named by the examples (a StatefulSet the dump does not hold), looked up
    # for who manages it (_sources.managers), is not found on either server.
    *[Scenario(f"{command}-on-the-examples", on_the_examples(command),
               Outcome(requests=[("GET", 200), ("GET", 404)]), offline=(command,)) for command in JUDGING],
    Scenario("escape-status-on-the-examples", on_the_examples("escape", "status"), Outcome(0, requests=[("GET", 200)]),
             offline=("escape", "status")),
    Scenario("a-kind-the-user-may-not-list", forbidden_kind, Outcome(4, [  # incomplete: never a pass
        ("kind-not-examined", "deployments.apps not examined: you may not list deployments.apps in namespace \"NS\" "
                              "(403 Forbidden): deployments.apps is forbidden: User USER cannot list resource "
                              "\"deployments\" in API group \"apps\" in the namespace \"NS\"; their Pod templates "
                              "may pass --kv-cache-dtype unseen.")], [("GET", 403)])),
    Scenario("an-expired-continue-token", expired_continue, Outcome(
        0, 501, [200, 410, 200, 200],
        ("Expired", "The provided continue parameter is too old to display a consistent list result. You can start "
                    "a new list without the continue parameter, or use the continue token in this response to "
                    "retrieve the remainder of the results. Continuing with the provided token results in an "
                    "inconsistent list - objects that were created, modified, or deleted between the time the "
                    "first chunk was returned and now may show up in the list."))),
    Scenario("a-deployment-that-does-not-exist", missing_deployment, Outcome(
        3, 'error: ModelDeployment "nope" not found in namespace "NS"', [("GET", 404)])),
    Scenario("an-edit-between-get-and-delete", delete_precondition, Outcome(
        3, "error: step 3 of 6 (delete ModelDeployment NS/qwen) stopped before touching it: ModelDeployment NS/qwen "
           "changed since the plan (metadata.generation 1 -> 2; spec.roles[0].replicas 1 -> 3); its edit is kept. "
           "Done so far: turn off Setting gpustack-system/model-deployment-kv-cache-dtype-owned; create "
           "KVCachePoolBinding NS/legacy-bfloat16. To move it as it is now, run the same command again with --apply "
           "(its copy and its backup are made again from it); or put back what this run changed with kubectl kvdtype "
           "escape restore HOME/kvdtype-backup-NS-legacy-TIME",
        [("DELETE", 409)],
        ("Conflict", 'Operation cannot be fulfilled on ModelDeployment.worker.gpustack.ai "qwen": the ResourceVersion '
                     "in the precondition (RV) does not match the ResourceVersion in record (RV). The object might "
                     "have been modified", 3, {"name": "legacy"}))),
    Scenario("a-write-between-get-and-patch", patch_precondition, Outcome(
        1, ("conflict", "changed since it was read"), [(422,)],
        ("Invalid", "the server rejected our request due to an error in our request",
         ["--kv-cache-dtype", "bfloat16", "--max-model-len=4096"]))),
    Scenario("a-finalizer-on-the-old-binding", finalizer_on_the_old_binding, Outcome(
        0, {"setting-off": 'set to "false"', "create-binding": "created", "create-md:qwen-bfloat16": "created",
            "delete-md:qwen": "deleted", "delete-binding": "deleted",
            "setting-on": f"left off: {EXAMPLES_REJECTED} would still break an engine"},
        [("DELETE", 200)], (True, [FINALIZER], "false"))),
    Scenario("a-strategic-merge-patch-of-the-setting", strategic_merge_patch_on_the_setting, Outcome(
        1, "error: application/strategic-merge-patch+json is not supported by gpustack.ai/v1, Kind=Setting: the "
           "body of the request was in an unknown format - accepted media types include: "
           "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        [("PATCH", 415)], "true")),
    Scenario("server-dry-runs", dry_runs, Outcome(
        (0, 0), ("would change (dry run: server accepted it)", {
            "setting-off": 'set to "false" (dry run)', "create-binding": "created (dry run)",
            "delete-md:qwen": "deleted (dry run)",
            "create-md:qwen": "not created (dry run: the name is still held by the deployment the real run "
                              "deletes first)",
            "delete-binding": "deleted (dry run)",
            "setting-on": f"left off: {EXAMPLES_REJECTED} would still break an engine"}),
        [("PATCH", "All", 200), ("PATCH", "All", 200), ("POST", "All", 201), ("DELETE", "All", 200),
         ("POST", "All", 409), ("DELETE", "All", 200)],
        ("true", True, True, False))),
    Scenario("a-deletes-body-wins-over-its-query", a_deletes_body_wins_over_its_query, Outcome(200, state=True)),
    Scenario("the-status-subresource", status_through_its_subresource, Outcome(
        said=(None, None, {"x": "y"}, {"observedGeneration": 5}, {"x": "y"}))),
    Scenario("a-value-the-schema-refuses", the_schema_refuses, Outcome(
        3, "error: cannot create ModelDeployment NS/qwen: create modeldeployments.worker.gpustack.ai in namespace "
           "\"NS\" failed (422 Invalid): ModelDeployment.worker.gpustack.ai \"qwen\" is invalid: "
           "spec.roles[0].replicas: Invalid value: -1: spec.roles[0].replicas in body should be greater than or "
           "equal to 0. Created so far: nothing; run the same command again to carry on (what exists is left alone)",
        [("POST", 422)]),
        fake_differs=Outcome(0, None, [("POST", 201)])),
    Scenario("the-operators-rule-refuses", the_operators_rule_refuses, Outcome(
        3, ("error: cannot create KVCachePoolBinding NS/scratch: create kvcachepoolbindings.worker.gpustack.ai in "
            "namespace \"NS\" refused by the cluster's admission", True), [("POST", 403)])),
]


# --- The table, run on both servers -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_examples_once(control_plane):
    """examples/ applied with kubectl once for the module (the Setting off, as stored before the
    upgrade; statuses through the status subresource), then the Setting on."""
    plane = control_plane
    objects = documents(EXAMPLES)
    for namespace in plane.example_namespaces():
        plane.ensure_namespace(namespace)
    plane.set_setting("false")
    try:
        applied = subprocess.run([kubectl_path(), "apply", "-f", "-"], env=plane.env("admin"), text=True,
                                 capture_output=True, timeout=60,
                                 input=yaml.safe_dump_all([o for o in objects if o.get("kind") != "Setting"]))
        assert applied.returncode == 0, applied.stderr
        for obj in objects:
            if obj.get("status") and obj["kind"] != "Setting" and "status" in plane.resource(
                    obj["kind"], obj["apiVersion"]).subresources:
                plane.write_status(obj)
    finally:
        plane.set_setting("true")
    try:
        yield plane
    finally:
        plane.unload_examples()


@pytest.fixture
def server(request, tmp_path) -> Iterator[Server]:
    if request.param == "real":
        request.getfixturevalue("real_examples_once")
        started: Server = Real(request.getfixturevalue("real"))
    else:
        started = Fake(tmp_path, "fvr-1")
    try:
        yield started
    finally:
        started.stop()


SERVERS = [pytest.param("fake", id="fake"), pytest.param("real", id="real", marks=pytest.mark.real)]


@pytest.mark.parametrize("server", SERVERS, indirect=True)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_the_fake_answers_as_the_real_server(scenario: Scenario, server: Server):
    outcome = scenario.act(server)
    expect = scenario.fake_differs if server.name == "fake" and scenario.fake_differs else scenario.expect
    assert server.proxy.errors == []
    if scenario.offline:  # what the same objects read offline give
        expect = Outcome(expect.status if expect.status is not None else outcome.status, _offline(scenario.offline),
                         expect.requests)
        assert outcome.status in (0, 1)
    for name in ("status", "said", "requests", "state"):
        wanted = getattr(expect, name)
        if wanted is not None or name == "status":
            assert getattr(outcome, name) == wanted, name

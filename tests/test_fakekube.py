"""Self-tests: the fake API server is real enough for kubectl and the Python client."""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

import pytest
from kubernetes import client, config

from conftest import run_kubectl
from fakekube import FakeKube

SYSTEM_NS = "gpustack-system"
SETTING = "model-deployment-kv-cache-dtype-owned"
MERGE = "application/merge-patch+json"


# ----------------------------------------------------------------------------- fixtures / helpers
def binding(ns: str, name: str, dtype: str, api_version: str = "worker.gpustack.ai/v1") -> dict:
    return {"apiVersion": api_version, "kind": "KVCachePoolBinding",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"poolRef": {"name": "shared-dram"}, "quota": {"ceiling": "600Gi"},
                     "domain": {"name": "default", "blockSize": 64, "dtype": dtype}},
            "status": {"phase": "Ready"}}


def deployment(ns: str, name: str, engine: str = "vLLM") -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"model": {"name": "Qwen/Qwen2.5-7B-Instruct"},
                     "engine": {"name": engine, "version": "0.29.0"},
                     "kvCache": {"poolRef": {"name": ns}, "connector": "Mooncake"},
                     "roles": [{"name": "server", "kind": "Server", "replicas": 1,
                                "instanceType": "gpustack-nvidia-a10g-linux-amd64"}]}}


def pod(ns: str, name: str, instance: str, component: str = "server") -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {
                "app.kubernetes.io/name": "model-deployment",
                "app.kubernetes.io/instance": instance,
                "app.kubernetes.io/component": component}},
            "spec": {"containers": [{"name": "main", "image": "vllm/vllm-openai:v0.29.0",
                                     "command": ["vllm", "serve", "Qwen/Qwen3-8B",
                                                 "--kv-cache-dtype", "fp8_e4m3"]}]},
            "status": {"phase": "Running"}}


def setting(value: str = "true") -> dict:
    return {"apiVersion": "gpustack.ai/v1", "kind": "Setting",
            "metadata": {"name": SETTING, "namespace": SYSTEM_NS},
            "spec": {"value": value},
            "status": {"value": value, "editable": True, "sensitive": False}}


@pytest.fixture
def populated(fake: FakeKube) -> FakeKube:
    fake.add(binding("team-a", "team-a", "fp8_e4m3"))
    fake.add(binding("team-b", "team-b", "bf16", "worker.gpustack.ai/v1alpha1"))
    fake.add(deployment("team-a", "qwen-chat"))
    fake.add(deployment("team-b", "qwen-batch", "SGLang"))
    fake.add(pod("team-a", "qwen-chat-server-r0-m0", "qwen-chat"))
    fake.add(pod("team-a", "qwen-chat-router-0", "qwen-chat", "router"))
    fake.add(pod("team-b", "qwen-batch-server-r0-m0", "qwen-batch"))
    fake.add(setting())
    return fake


class Py:
    """The official Python client (v37 API: param_serialize + call_api) against the fake."""

    def __init__(self, kubeconfig: Path) -> None:
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
        self.api = client.ApiClient(cfg)

    def call(self, method: str, path: str, query: Optional[dict] = None, body: Any = None,
             content_type: Optional[str] = None) -> tuple[int, Any, Any]:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        m, url, hdrs, data, _ = self.api.param_serialize(
            method, path, query_params=list((query or {}).items()), header_params=headers,
            body=body, auth_settings=["BearerToken"])
        resp = self.api.call_api(m, url, hdrs, data)
        raw = resp.read()
        return resp.status, json.loads(raw) if raw else None, resp.headers


@pytest.fixture
def py(fake: FakeKube, tmp_path: Path) -> Py:
    return Py(fake.write_kubeconfig(tmp_path / "py-kubeconfig"))


def ok(proc: Any) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# ----------------------------------------------------------------------------- kubectl
def test_kubectl_custom_columns_across_versions(populated: FakeKube, kubectl: Any) -> None:
    out = ok(kubectl("get", "kvcachepoolbindings", "-A", "-o",
                     "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,"
                     "DTYPE:.spec.domain.dtype"))
    assert out.split("\n")[0].split() == ["NAMESPACE", "NAME", "DTYPE"]
    assert out.split("\n")[1].split() == ["team-a", "team-a", "fp8_e4m3"]
    assert out.split("\n")[2].split() == ["team-b", "team-b", "bf16"]
    # discovery was the legacy JSON fallback, and kubectl never asked for OpenAPI
    paths = [r.path for r in populated.requests]
    assert "/apis/worker.gpustack.ai/v1" in paths
    assert not [p for p in paths if p.startswith("/openapi")]


def test_kubectl_get_json_and_default_table(populated: FakeKube, kubectl: Any) -> None:
    doc = json.loads(ok(kubectl("get", "md", "-A", "-o", "json")))
    assert [i["metadata"]["name"] for i in doc["items"]] == ["qwen-chat", "qwen-batch"]
    assert {i["apiVersion"] for i in doc["items"]} == {"worker.gpustack.ai/v1"}
    table = ok(kubectl("get", "md", "-n", "team-a"))
    assert "qwen-chat" in table and "qwen-batch" not in table


def test_kubectl_label_selector_jsonpath(populated: FakeKube, kubectl: Any) -> None:
    out = ok(kubectl("get", "pods", "-A", "-l",
                     "app.kubernetes.io/name=model-deployment,"
                     "app.kubernetes.io/component in (server)",
                     "-o", "jsonpath={.items[*].metadata.name}"))
    assert out.split() == ["qwen-chat-server-r0-m0", "qwen-batch-server-r0-m0"]
    out = ok(kubectl("get", "pods", "-n", "team-a", "-l", "app.kubernetes.io/component!=server",
                     "-o", "jsonpath={.items[*].spec.containers[0].name}"))
    assert out.split() == ["main"]


def test_kubectl_merge_patch_setting_and_strategic_refused(populated: FakeKube,
                                                           kubectl: Any) -> None:
    ns = ["-n", SYSTEM_NS]
    out = ok(kubectl(*ns, "patch", "setting", SETTING, "--type", "merge",
                     "-p", '{"spec":{"value":"false"}}'))
    assert "patched" in out
    assert populated.get("Setting", SYSTEM_NS, SETTING)["status"]["value"] == "false"
    again = ok(kubectl(*ns, "patch", "setting", SETTING, "--type", "merge",
                       "-p", '{"spec":{"value":"false"}}'))
    assert "no change" in again
    refused = kubectl(*ns, "patch", "set", SETTING, "-p", '{"spec":{"value":"true"}}')
    assert refused.returncode != 0
    assert "unknown format" in refused.stderr
    assert populated.requests[-1].status == 415
    assert populated.get("Setting", SYSTEM_NS, SETTING)["spec"]["value"] == "false"
    # built-in kinds accept strategic merge
    ok(kubectl("-n", "team-a", "patch", "pod", "qwen-chat-router-0",
               "-p", '{"metadata":{"labels":{"x":"y"}}}'))
    assert populated.get("pods", "team-a", "qwen-chat-router-0")["metadata"]["labels"]["x"] == "y"


def test_kubectl_unauthorized(populated: FakeKube, kube_env: dict, tmp_path: Path) -> None:
    env = dict(kube_env, KUBECONFIG=str(populated.write_kubeconfig(tmp_path / "bad",
                                                                      token="wrong")))
    proc = run_kubectl(["get", "md", "-A"], env)
    assert proc.returncode != 0
    assert "logged in" in proc.stderr or "Unauthorized" in proc.stderr
    assert {r.status for r in populated.requests} == {401}


def test_kubectl_exec_plugin_and_python_exec(populated: FakeKube, kube_env: dict,
                                             tmp_path: Path) -> None:
    cred = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
            "status": {"token": populated.token}}
    argv = [sys.executable, "-c", f"print({json.dumps(json.dumps(cred))})"]
    path = populated.write_kubeconfig(tmp_path / "exec", exec_command=argv)
    out = ok(run_kubectl(["get", "kvcpb", "-n", "team-a", "-o", "name"],
                         dict(kube_env, KUBECONFIG=str(path))))
    assert out.strip() == "kvcachepoolbinding.worker.gpustack.ai/team-a"
    status, body, _ = Py(path).call("GET", "/apis/worker.gpustack.ai/v1/kvcachepoolbindings")
    assert status == 200 and len(body["items"]) == 2


def test_kubectl_v1alpha1_only_and_missing_crds(tmp_path: Path, kube_env: dict) -> None:
    with FakeKube(groups_versions={"worker.gpustack.ai": ["v1alpha1"]}) as old:
        old.add(binding("team-a", "team-a", "fp8_e4m3"))
        env = dict(kube_env, KUBECONFIG=str(old.write_kubeconfig(tmp_path / "old")),
                   KUBECACHEDIR=str(tmp_path / "cache-old"))
        doc = json.loads(ok(run_kubectl(["get", "kvcpb", "-A", "-o", "json"], env)))
        assert doc["items"][0]["apiVersion"] == "worker.gpustack.ai/v1alpha1"
    with FakeKube(groups_versions={"worker.gpustack.ai": None}) as bare:
        env = dict(kube_env, KUBECONFIG=str(bare.write_kubeconfig(tmp_path / "bare")),
                   KUBECACHEDIR=str(tmp_path / "cache-bare"))
        proc = run_kubectl(["get", "md", "-A"], env)
        assert proc.returncode != 0 and "doesn't have a resource type" in proc.stderr
        proc = run_kubectl(["-n", SYSTEM_NS, "get", "settings"], env)
        assert proc.returncode == 0 and "No resources found" in proc.stderr
        assert bare.requests[-1].path == f"/apis/gpustack.ai/v1/namespaces/{SYSTEM_NS}/settings"


def test_kubectl_auth_can_i_follows_deny(populated: FakeKube, kubectl: Any) -> None:
    populated.deny("patch", "settings", SYSTEM_NS)
    proc = kubectl("auth", "can-i", "patch", "settings.gpustack.ai", "-n", SYSTEM_NS)
    assert proc.stdout.strip() == "no"
    assert ok(kubectl("auth", "can-i", "list", "md", "-n", "team-a")).strip() == "yes"
    proc = kubectl("-n", SYSTEM_NS, "patch", "setting", SETTING, "--type", "merge",
                   "-p", '{"spec":{"value":"false"}}')
    assert proc.returncode != 0
    assert ('settings.gpustack.ai "model-deployment-kv-cache-dtype-owned" is forbidden: User '
            '"fake-user" cannot patch resource "settings" in API group "gpustack.ai" in the '
            'namespace "gpustack-system"') in proc.stderr


def test_kubectl_retries_on_retry_after(populated: FakeKube, kubectl: Any) -> None:
    populated.fail(429, method="GET", path=r"/modeldeployments$", times=1, retry_after=1)
    out = ok(kubectl("get", "md", "-A", "-o", "name"))
    assert "qwen-chat" in out
    answered = [r for r in populated.requests if r.path.endswith("/modeldeployments")]
    assert [r.status for r in answered] == [429, 200]
    assert answered[1].time - answered[0].time >= 0.9  # the retry waited Retry-After (the fake's own clock)


# ----------------------------------------------------------------------------- Python client
def test_python_client_get_and_discovery(populated: FakeKube, py: Py) -> None:
    status, body, headers = py.call("GET", "/apis/worker.gpustack.ai/v1/namespaces/team-a/"
                                           "kvcachepoolbindings/team-a")
    assert status == 200 and body["spec"]["domain"]["dtype"] == "fp8_e4m3"
    assert headers["Content-Type"] == "application/json"
    meta = body["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1
    assert int(meta["resourceVersion"]) > 0
    _, alpha, _ = py.call("GET", "/apis/worker.gpustack.ai/v1alpha1/namespaces/team-a/"
                                 "kvcachepoolbindings/team-a")
    assert alpha["apiVersion"] == "worker.gpustack.ai/v1alpha1"
    _, groups, _ = py.call("GET", "/apis")
    worker = [g for g in groups["groups"] if g["name"] == "worker.gpustack.ai"][0]
    assert worker["preferredVersion"]["version"] == "v1"
    assert [v["version"] for v in worker["versions"]] == ["v1", "v1alpha1"]
    _, res, _ = py.call("GET", "/apis/gpustack.ai/v1")
    settings = [r for r in res["resources"] if r["name"] == "settings"][0]
    assert settings["shortNames"] == ["set"] and settings["namespaced"] is True
    status, body, _ = py.call("GET", "/apis/worker.gpustack.ai/v1/namespaces/team-a/"
                                     "modeldeployments/nope")
    assert status == 404 and body["reason"] == "NotFound"
    assert body["message"] == 'modeldeployments.worker.gpustack.ai "nope" not found'


def test_builtin_list_items_lack_kind_like_a_real_server(populated: FakeKube, py: Py) -> None:
    _, pods, _ = py.call("GET", "/api/v1/namespaces/team-a/pods")
    assert pods["kind"] == "PodList" and "kind" not in pods["items"][0]
    _, mds, _ = py.call("GET", "/apis/worker.gpustack.ai/v1/modeldeployments")
    assert mds["kind"] == "ModelDeploymentList" and mds["items"][0]["kind"] == "ModelDeployment"


def test_selectors(populated: FakeKube, py: Py) -> None:
    def names(query: dict) -> list[str]:
        status, body, _ = py.call("GET", "/api/v1/pods", query)
        assert status == 200, body
        return [i["metadata"]["name"] for i in body["items"]]
    everything = ["qwen-chat-router-0", "qwen-chat-server-r0-m0", "qwen-batch-server-r0-m0"]
    assert names({}) == everything
    assert names({"labelSelector": "app.kubernetes.io/instance==qwen-batch"}) == everything[2:]
    assert names({"labelSelector": "app.kubernetes.io/component notin (server)"}) == \
        everything[:1]
    assert names({"labelSelector": "app.kubernetes.io/component,!missing"}) == everything
    assert names({"labelSelector": "missing"}) == []
    assert names({"fieldSelector": "metadata.namespace!=team-a"}) == everything[2:]
    assert names({"fieldSelector": "metadata.name=qwen-chat-router-0"}) == everything[:1]
    status, _, _ = py.call("GET", "/api/v1/pods", {"fieldSelector": "spec.bogus=1"})
    assert status == 400


def test_paging_returns_each_object_once(fake: FakeKube, py: Py) -> None:
    fake.add_many(pod(f"ns-{i % 7}", f"p-{i:04d}", "x") for i in range(1234))
    seen: list[str] = []
    query: dict = {"limit": 100}
    pages = 0
    while True:
        status, body, _ = py.call("GET", "/api/v1/pods", query)
        assert status == 200
        pages += 1
        seen += [f'{i["metadata"]["namespace"]}/{i["metadata"]["name"]}' for i in body["items"]]
        token = body["metadata"].get("continue")
        if not token:
            break
        assert body["metadata"]["remainingItemCount"] == 1234 - len(seen)
        query = {"limit": 100, "continue": token}
    assert pages == 13 and len(seen) == 1234 == len(set(seen)) and seen == sorted(seen)
    _, ns3, _ = py.call("GET", "/api/v1/namespaces/ns-3/pods", {"limit": 1000})
    assert len(ns3["items"]) == len([i for i in range(1234) if i % 7 == 3])


def test_continue_expired_410(fake: FakeKube, py: Py) -> None:
    fake.add_many(pod("team-a", f"p-{i}", "x") for i in range(5))
    _, first, _ = py.call("GET", "/api/v1/pods", {"limit": 2})
    fake.expire_continue()
    status, body, _ = py.call("GET", "/api/v1/pods", {"limit": 2,
                                                      "continue": first["metadata"]["continue"]})
    assert status == 410 and body["reason"] == "Expired" and body["kind"] == "Status"
    assert "continue parameter is too old" in body["message"]
    status, again, _ = py.call("GET", "/api/v1/pods", {"limit": 2,
                                                       "continue": first["metadata"]["continue"]})
    assert status == 200 and len(again["items"]) == 2


def test_fault_injection_with_retry_after_and_delay(populated: FakeKube, py: Py) -> None:
    path = f"/apis/gpustack.ai/v1/namespaces/{SYSTEM_NS}/settings/{SETTING}"
    populated.fail(429, method="PATCH", path=r"/settings/", times=1, retry_after=7)
    status, body, headers = py.call("PATCH", path, None, {"spec": {"value": "false"}}, MERGE)
    assert status == 429 and headers["Retry-After"] == "7"
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 7
    assert populated.get("set", SYSTEM_NS, SETTING)["spec"]["value"] == "true"
    # urllib3 (under the Python client) silently retries idempotent requests answered
    # 413/429/503 with a Retry-After header, up to 3 times
    populated.clear_log()
    populated.fail(503, method="GET", path=r"/settings", times=2, retry_after=0)
    assert py.call("GET", path)[0] == 200
    assert [r.status for r in populated.requests] == [503, 503, 200]
    populated.delay(0.3, path=r"/settings/")
    assert populated.faults_pending() == 1
    start = time.monotonic()
    assert py.call("GET", path)[0] == 200
    assert time.monotonic() - start >= 0.3  # the answer waited for the delay (a lower bound: no machine is faster)
    assert populated.faults_pending() == 0  # times=1: the next answer is not delayed
    populated.fail(500, path="/api/v1/namespaces/team-a/pods$", delay=0.1)
    status, body, _ = py.call("GET", "/api/v1/namespaces/team-a/pods")
    assert status == 500 and body["reason"] == "InternalError"


def test_hold_keeps_a_request_received_and_unanswered_until_released(populated: FakeKube, py: Py) -> None:
    path = f"/apis/gpustack.ai/v1/namespaces/{SYSTEM_NS}/settings/{SETTING}"
    held = populated.hold("PATCH", r"/settings/")
    answers: list = []
    worker = threading.Thread(target=lambda: answers.append(py.call("PATCH", path, None, {"spec": {"value": "false"}},
                                                                      MERGE)))
    worker.start()
    held.wait_arrived()
    assert answers == [] and populated.get("set", SYSTEM_NS, SETTING)["spec"]["value"] == "true"
    held.release()
    worker.join(10)
    assert answers[0][0] == 200 and populated.get("set", SYSTEM_NS, SETTING)["spec"]["value"] == "false"
    assert py.call("GET", path)[0] == 200  # times=1: the next one is not held


def test_generation_follows_the_spec_only_whatever_version_is_served(populated: FakeKube, py: Py) -> None:
    """Like a real server: a metadata write through another served version keeps the generation;
    a DELETE whose resourceVersion precondition is stale is a 409 and deletes nothing."""
    path = "/apis/worker.gpustack.ai/v1/namespaces/team-b/kvcachepoolbindings/team-b"  # stored as v1alpha1
    status, patched, _ = py.call("PATCH", path, None, {"metadata": {"annotations": {"a": "b"}}}, MERGE)
    assert status == 200 and patched["metadata"]["generation"] == 1
    stale = {"preconditions": {"resourceVersion": "1"}}
    assert py.call("DELETE", path, None, stale)[0] == 409
    assert populated.get("kvcachepoolbindings", "team-b", "team-b") is not None


def test_fall_silent_answers_n_matches_then_nothing(populated: FakeKube, py: Py) -> None:
    path = f"/apis/gpustack.ai/v1/namespaces/{SYSTEM_NS}/settings/{SETTING}"
    populated.fall_silent(after=1, method="PATCH", path=r"/settings/")
    assert py.call("GET", path)[0] == 200  # not a match: answered, and not counted
    assert not populated.silent
    assert py.call("PATCH", path, None, {"spec": {"value": "false"}}, MERGE)[0] == 200
    assert populated.silent
    answered: list[int] = []
    caller = threading.Thread(target=lambda: answered.append(py.call("GET", path)[0]), daemon=True)
    caller.start()
    caller.join(timeout=1.5)
    assert caller.is_alive() and answered == []  # held, no answer
    assert populated.requests[-1].method == "GET" and populated.requests[-1].status is None  # read, logged
    populated.clear_faults()  # ends the silence: the held request is answered
    caller.join(timeout=5)
    assert answered == [200]
    assert py.call("GET", path)[0] == 200


def test_dry_run_changes_nothing(populated: FakeKube, py: Py) -> None:
    path = f"/apis/gpustack.ai/v1/namespaces/{SYSTEM_NS}/settings/{SETTING}"
    before = populated.get("set", SYSTEM_NS, SETTING)
    status, body, _ = py.call("PATCH", path, {"dryRun": "All"}, {"spec": {"value": "false"}},
                              MERGE)
    assert status == 200 and body["spec"]["value"] == "false"
    assert populated.get("set", SYSTEM_NS, SETTING) == before
    status, _, _ = py.call("DELETE", "/api/v1/namespaces/team-a/pods/qwen-chat-router-0",
                           {"dryRun": "All"})
    assert status == 200 and populated.get("Pod", "team-a", "qwen-chat-router-0")
    status, _, _ = py.call("POST", "/apis/worker.gpustack.ai/v1/namespaces/team-a/"
                                   "kvcachepoolbindings", {"dryRun": "All"},
                           binding("team-a", "new", "bfloat16"))
    assert status == 201 and populated.get("kvcpb", "team-a", "new") is None


def test_resource_version_conflict_and_writes(populated: FakeKube, py: Py) -> None:
    path = f"/apis/gpustack.ai/v1/namespaces/{SYSTEM_NS}/settings/{SETTING}"
    _, current, _ = py.call("GET", path)
    rv = current["metadata"]["resourceVersion"]
    status, body, _ = py.call("PATCH", path, None, {"metadata": {"resourceVersion": "1"},
                                                    "spec": {"value": "false"}}, MERGE)
    assert status == 409 and body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]
    status, body, _ = py.call("PATCH", path, None, {"metadata": {"resourceVersion": rv},
                                                    "spec": {"value": "false"}}, MERGE)
    assert status == 200 and int(body["metadata"]["resourceVersion"]) > int(rv)
    assert body["metadata"]["generation"] == 2 and body["status"]["value"] == "false"
    status, _, _ = py.call("PUT", path, None, current)  # stale resourceVersion
    assert status == 409
    ops = [{"op": "test", "path": "/spec/value", "value": "false"},
           {"op": "replace", "path": "/spec/value", "value": "true"}]
    status, body, _ = py.call("PATCH", path, None, ops, "application/json-patch+json")
    assert status == 200 and body["spec"]["value"] == "true"
    status, _, _ = py.call("PATCH", path, None, ops, "application/json-patch+json")
    assert status == 422
    status, body, _ = py.call("PATCH", path, None, {"spec": {"value": "x"}},
                              "application/strategic-merge-patch+json")
    assert status == 415 and body["reason"] == "UnsupportedMediaType"
    status, body, _ = py.call("POST", "/apis/worker.gpustack.ai/v1/namespaces/team-a/"
                                      "kvcachepoolbindings", None,
                              binding("team-a", "team-a", "bfloat16"))
    assert status == 409 and body["reason"] == "AlreadyExists"
    status, _, _ = py.call("DELETE", "/apis/worker.gpustack.ai/v1/namespaces/team-a/"
                                     "modeldeployments/qwen-chat")
    assert status == 200 and populated.get("md", "team-a", "qwen-chat") is None
    assert py.call("DELETE", "/apis/worker.gpustack.ai/v1/namespaces/team-a/"
                             "modeldeployments/qwen-chat")[0] == 404


def test_status_is_a_subresource(populated: FakeKube, py: Py) -> None:
    path = "/apis/worker.gpustack.ai/v1/namespaces/team-a/kvcachepoolbindings/team-a"
    _, body, _ = py.call("PATCH", path, None, {"status": {"phase": "Error"}}, MERGE)
    assert body["status"]["phase"] == "Ready"
    _, body, _ = py.call("PATCH", path + "/status", None, {"status": {"phase": "Error"}}, MERGE)
    assert body["status"]["phase"] == "Error" and body["metadata"]["generation"] == 1


def test_setting_status_lags_spec(populated: FakeKube, py: Py) -> None:
    populated.setting_lag = 0.3
    path = f"/apis/gpustack.ai/v1/namespaces/{SYSTEM_NS}/settings/{SETTING}"
    _, body, _ = py.call("PATCH", path, None, {"spec": {"value": "false"}}, MERGE)
    assert body["spec"]["value"] == "false" and body["status"]["value"] == "true"
    assert py.call("GET", path)[1]["status"]["value"] == "true"
    time.sleep(0.35)
    assert py.call("GET", path)[1]["status"]["value"] == "false"
    assert py.call("GET", path)[1]["status"]["editable"] is True


def test_forbidden_list_message_and_ssar(populated: FakeKube, py: Py) -> None:
    populated.deny("list", "md", "team-a")
    status, body, _ = py.call("GET", "/apis/worker.gpustack.ai/v1/namespaces/team-a/"
                                     "modeldeployments")
    assert status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == ('modeldeployments.worker.gpustack.ai is forbidden: User '
                               '"fake-user" cannot list resource "modeldeployments" in API '
                               'group "worker.gpustack.ai" in the namespace "team-a"')
    assert py.call("GET", "/apis/worker.gpustack.ai/v1/modeldeployments")[0] == 403
    assert py.call("GET", "/apis/worker.gpustack.ai/v1/namespaces/team-b/"
                          "modeldeployments")[0] == 200
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"verb": "list", "group": "worker.gpustack.ai",
                                              "resource": "modeldeployments",
                                              "namespace": "team-a"}}}
    status, body, _ = py.call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                              None, review)
    assert status == 201 and body["status"]["allowed"] is False
    review["spec"]["resourceAttributes"]["namespace"] = "team-b"
    _, body, _ = py.call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                         None, review)
    assert body["status"]["allowed"] is True


def test_request_log_and_unauthorized_python(populated: FakeKube, py: Py,
                                             tmp_path: Path) -> None:
    populated.clear_log()
    py.call("PATCH", f"/apis/gpustack.ai/v1/namespaces/{SYSTEM_NS}/settings/{SETTING}",
            {"fieldManager": "kvdtype"}, {"spec": {"value": "false"}}, MERGE)
    (rec,) = populated.requests
    assert (rec.method, rec.status, rec.content_type) == ("PATCH", 200, MERGE)
    assert rec.query == {"fieldManager": "kvdtype"} and rec.body == {"spec": {"value": "false"}}
    bad = Py(populated.write_kubeconfig(tmp_path / "bad", token="nope"))
    status, body, _ = bad.call("GET", "/api")
    assert status == 401 and body["reason"] == "Unauthorized"
    assert bad.call("GET", "/version")[0] == 200  # /version is open, like a real server


def test_admission_hook_denies_like_a_webhook(populated: FakeKube, py: Py) -> None:
    populated.admission(lambda op, new, old: "auto is refused" if new and
                        new.get("spec", {}).get("domain", {}).get("dtype") == "auto" else None)
    status, body, _ = py.call("POST", "/apis/worker.gpustack.ai/v1/namespaces/team-a/"
                                      "kvcachepoolbindings", None,
                              binding("team-a", "x", "auto"))
    assert status == 403 and "denied the request: auto is refused" in body["message"]


def test_keepalive_is_prompt_and_concurrent(populated: FakeKube, py: Py) -> None:
    populated.clear_log()
    for _ in range(50):
        assert py.call("GET", "/api/v1/namespaces/team-a/pods")[0] == 200
    # One kept-alive connection, with Nagle's algorithm off: no 40 ms Nagle/delayed-ACK stall per
    # request (told by the socket's own setting, not by a clock a loaded machine would break).
    assert {r.connection for r in populated.requests} == {populated.requests[0].connection}
    assert all(r.nodelay for r in populated.requests)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(10):
                assert py.call("GET", "/apis/worker.gpustack.ai/v1/modeldeployments")[0] == 200
        except BaseException as err:  # pragma: no cover
            errors.append(err)
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_benchmark_scale_paging(fake: FakeKube, py: Py) -> None:
    """Paging through 20,000 Pods examines each stored object once: O(page) per request,
    not O(everything) (counted, not timed: a loaded machine must not fail it)."""
    fake.add_many(pod(f"team-{i % 20}", f"r-{i:05d}", f"md-{i % 10000}") for i in range(20000))
    fake.add_many(deployment(f"team-{i % 20}", f"md-{i:05d}") for i in range(10000))
    before = fake.examined
    total, pages, query = 0, 0, {"limit": 500, "labelSelector": "app.kubernetes.io/component=server"}
    while True:
        _, body, _ = py.call("GET", "/api/v1/pods", query)
        total, pages = total + len(body["items"]), pages + 1
        assert len(body["items"]) <= 500
        if not body["metadata"].get("continue"):
            break
        query = {**query, "continue": body["metadata"]["continue"]}
    assert total == 20000 and pages == 40
    assert fake.examined - before == 20000


# ----------------------------------------------------------------------------- finalizers
def test_finalizers_hold_a_deleted_object_and_its_name(populated: FakeKube, kubectl: Any) -> None:
    populated.finalizer("modeldeployments", after=0.5)
    stored = populated.get("modeldeployments", "team-a", "qwen-chat")
    assert stored["metadata"]["finalizers"] == ["gpustack.ai/cleanup"]
    ok(kubectl("-n", "team-a", "delete", "md", "qwen-chat", "--wait=false"))
    terminating = populated.get("modeldeployments", "team-a", "qwen-chat")
    assert terminating is not None and terminating["metadata"]["deletionTimestamp"]
    manifest = json.dumps({**deployment("team-a", "qwen-chat"), "status": {"phase": "Ready"}})
    again = kubectl("create", "--validate=false", "-f", "-", input=manifest)
    assert again.returncode != 0 and "object is being deleted" in again.stderr and "already exists" in again.stderr
    time.sleep(0.6)
    assert populated.get("modeldeployments", "team-a", "qwen-chat") is None  # the operator let it go
    ok(kubectl("create", "--validate=false", "-f", "-", input=manifest))
    created = populated.get("modeldeployments", "team-a", "qwen-chat")
    assert "status" not in created  # status is not settable on create
    assert created["metadata"]["finalizers"] == ["gpustack.ai/cleanup"]
    assert "deletionTimestamp" not in created["metadata"]


def test_a_held_finalizer_waits_and_an_emptied_one_completes_deletion(populated: FakeKube, py: Py) -> None:
    holding = {"on": True}
    populated.finalizer("kvcachepoolbindings", after=0.0, held_by=lambda fake, obj: holding["on"])
    path = "/apis/worker.gpustack.ai/v1/namespaces/team-a/kvcachepoolbindings/team-a"
    status, body, _ = py.call("DELETE", path)
    assert status == 200 and body["metadata"]["deletionTimestamp"]
    time.sleep(0.05)
    assert py.call("GET", path)[0] == 200  # held
    holding["on"] = False
    assert populated.get("kvcachepoolbindings", "team-a", "team-a") is None
    other = "/apis/worker.gpustack.ai/v1/namespaces/team-b/kvcachepoolbindings/team-b"
    populated.update("kvcachepoolbindings", "team-b", "team-b", {"metadata": {"finalizers": ["x/y"]}})
    py.call("DELETE", other)
    assert populated.get("kvcachepoolbindings", "team-b", "team-b") is not None
    py.call("PATCH", other, None, {"metadata": {"finalizers": None}}, MERGE)
    assert populated.get("kvcachepoolbindings", "team-b", "team-b") is None

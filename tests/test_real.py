"""The plugin on a real kube-apiserver and etcd (tests/_controlplane.py), through the real kubectl:
verify on Pods created with their argv and a status written through the status subresource; escape
off/on --wait as the writer, the Setting's status following it; and the fixture's own promises (the
operator's rules, the roles, compaction) that later tests build on. The examples applied with
kubectl and judged by every judging subcommand, as on the fake and offline, are in
tests/test_fake_vs_real.py; the writes in tests/test_real_writes.py."""

from __future__ import annotations

import json

import pytest

from _controlplane import SETTING, SYSTEM_NAMESPACE, documents
from _support import EXAMPLES

pytestmark = pytest.mark.real


def _report(result) -> dict:
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


# --- The fixture's promises --------------------------------------------------------------------------


def test_the_server_is_kube_apiserver_1_37_with_the_operators_api(real):
    version = real.plane.request("GET", "/version").body
    assert version["gitVersion"] == "v1.37.2"
    group = real.plane.request("GET", "/apis/worker.gpustack.ai").body
    assert [v["version"] for v in group["versions"]] == ["v1", "v1alpha1"]
    assert group["preferredVersion"]["version"] == "v1"
    listed = real.kubectl("get", "kvcachepoolbindings.v1alpha1.worker.gpustack.ai", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["items"] == []
    setting = real.kubectl("get", "set", "-n", SYSTEM_NAMESPACE, SETTING)
    assert setting.stdout.split("\n")[0].split() == ["NAME", "VALUE", "IN", "FORCE", "AGE"]  # printer columns
    assert setting.stdout.split("\n")[1].split()[1:3] == ["true", "true"]


def _binding(name: str, dtype: str, domain: str = "") -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding", "metadata": {"name": name},
            "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": domain or name, "blockSize": 64,
                                                                    "dtype": dtype}}}


def test_the_operators_rules_are_the_servers(real):
    """CEL on the CRD (an immutable dtype), a policy with the Setting as parameter (no new auto),
    a refusal of the main resource that the status subresource does not meet."""
    real.apply([_binding("chat", "bfloat16")])
    changed = real.kubectl("patch", "kvcpb", "chat", "--type", "merge", "-p", '{"spec":{"domain":{"dtype":"fp8"}}}')
    assert changed.returncode == 1 and "spec.domain.dtype is immutable" in changed.stderr
    auto = real.kubectl("create", "-f", "-", input=json.dumps(_binding("scratch", "auto")))
    assert auto.returncode == 1 and "may not declare dtype auto" in auto.stderr and "Forbidden" in auto.stderr
    real.write_status({**_binding("chat", "bfloat16"), "status": {"phase": "Ready"}})
    assert real.get("KVCachePoolBinding", "chat")["status"] == {"phase": "Ready"}
    real.plane.set_setting("false")
    assert real.kubectl("create", "-f", "-", input=json.dumps(_binding("scratch", "auto"))).returncode == 0


def test_the_reader_may_read_and_not_write_and_a_setting_is_never_created(real):
    assert real.kubectl("auth", "can-i", "list", "kvcachepoolbindings.worker.gpustack.ai", "-A",
                        user="reader").stdout.strip() == "yes"
    assert real.kubectl("auth", "can-i", "patch", f"settings.gpustack.ai/{SETTING}", "-n", SYSTEM_NAMESPACE,
                        user="reader").stdout.strip() == "no"
    assert real.kubectl("auth", "can-i", "patch", f"settings.gpustack.ai/{SETTING}", "-n", SYSTEM_NAMESPACE,
                        user="writer").stdout.strip() == "yes"
    created = real.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "gpustack.ai/v1", "kind": "Setting", "metadata": {"name": "another"}, "spec": {"value": "x"}}))
    assert created.returncode == 1 and "never created or deleted" in created.stderr


def test_compaction_expires_a_continue_token(real):
    real.apply([_binding(f"b{i}", "bfloat16") for i in range(3)])
    path = real.plane.resource("KVCachePoolBinding").path(real.namespace)
    first = real.plane.request("GET", path, query={"limit": 1}).body
    real.plane.compact()
    expired = real.plane.request("GET", path, query={"limit": 1, "continue": first["metadata"]["continue"]})
    assert expired.status == 410 and expired.body["reason"] == "Expired"


# --- verify on Pods made as the operator makes them -------------------------------------------------------


def _deployment(name: str, binding: str, extra_args: list[str]) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment", "metadata": {"name": name},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": "vLLM", "version": "0.29.0"},
                     "kvCache": {"poolRef": {"name": binding}, "connector": "Mooncake"},
                     "roles": [{"name": "server", "kind": "Server", "replicas": 2,
                                "instanceType": "gpustack-nvidia-a10g-linux-amd64", "extraArgs": extra_args}]},
            "status": {"roles": [{"name": "server", "desired": 2, "ready": 2, "unmanaged": False}]}}


def _replica(deployment: str, index: int, dtype: str) -> dict:
    """A replica Pod as the operator renders it: the whole argv in the container's command."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{deployment}-server-r{index}-m0",
                         "labels": {"app.kubernetes.io/name": "model-deployment",
                                    "app.kubernetes.io/instance": deployment,
                                    "app.kubernetes.io/component": "server"}},
            "spec": {"containers": [{"name": "main", "image": "vllm/vllm-openai:v0.29.0",
                                     "command": ["vllm", "serve", "Qwen/Qwen3-8B", "--kv-cache-dtype", dtype,
                                                 "--max-model-len=4096", "--host", "0.0.0.0", "--port", "8000"]}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def test_verify_reads_the_replicas_created_with_their_argv(real):
    real.apply([_binding("chat", "fp8_e4m3"), _deployment("qwen", "chat", ["--max-model-len=4096"])])
    real.apply([_replica("qwen", 0, "fp8_e4m3"), _replica("qwen", 1, "fp8_e4m3")])
    assert real.get("Pod", "qwen-server-r0-m0")["status"]["phase"] == "Running"  # through pods/status
    passed = real.kvdtype("verify", "qwen", "-o", "json", user="reader")
    assert passed.returncode == 0, passed.stderr
    assert {i["verdict"] for i in json.loads(passed.stdout)["items"]} == {"ok"}
    real.plane.delete("Pod", real.namespace, "qwen-server-r1-m0")
    real.apply([_replica("qwen", 1, "fp8_e5m2")])
    failed = real.kvdtype("verify", "qwen", "-o", "json", user="reader")
    assert failed.returncode == 1, failed.stderr
    verdicts = {i["name"]: i["verdict"] for i in json.loads(failed.stdout)["items"]}
    assert verdicts["qwen-server-r0-m0"] == "ok" and verdicts["qwen-server-r1-m0"] != "ok"


def test_the_operators_kinds_are_read_before_discovery_and_a_refusal_stays_the_servers(real):
    """The operator's kinds are read at their preferred version at once, without waiting for
    discovery; a 403 there (RBAC answers before the server looks for the resource) asks discovery,
    which says the version is served, so the run says the server's 403, not "not installed"."""
    from _proxy import ApiProxy

    # What the reading rests on, in the real server's words: a version the group does not serve is
    # 404 to a user RBAC lets through, and 403 to one it does not (RBAC answers first).
    unserved = f"/apis/worker.gpustack.ai/v1beta9/namespaces/{real.namespace}/modeldeployments"
    assert real.plane.request("GET", unserved).status == 404
    assert real.plane.request("GET", unserved, user="limited").status == 403
    real.apply([_binding("chat", "fp8_e4m3"), _deployment("qwen", "chat", ["--max-model-len=4096"])])
    with ApiProxy(real.plane.url) as proxy:
        verified = real.kvdtype("verify", "-n", real.namespace, "-o", "json", server=proxy.url)
        assert verified.returncode in (0, 1), verified.stderr
        asked = [(e.method, e.path, e.status) for e in proxy.log]
        assert not [path for _, path, _ in asked if path in ("/apis/worker.gpustack.ai", "/apis/gpustack.ai")]
        assert ("GET", f"/apis/worker.gpustack.ai/v1/namespaces/{real.namespace}/modeldeployments", 200) in asked
        assert ("GET", f"/apis/gpustack.ai/v1/namespaces/{SYSTEM_NAMESPACE}/settings/{SETTING}", 200) in asked
        proxy.clear()
        refused = real.kvdtype("check", "-n", real.namespace, user="limited", server=proxy.url)
        assert refused.returncode == 3 and "Traceback" not in refused.stderr, refused.stderr
        assert (f'you may not list kvcachepoolbindings.worker.gpustack.ai in namespace "{real.namespace}" '
                "(403 Forbidden)") in refused.stderr
        asked = [(e.method, e.path, e.status) for e in proxy.log]
        assert ("GET", "/apis/worker.gpustack.ai", 200) in asked  # asked once the 403 came
        assert all(status == 403 for _, path, status in asked if "/v1/namespaces/" in path)


# --- escape off|on --wait, the Setting's status following ---------------------------------------------------


def test_escape_off_and_on_wait_for_the_setting_and_the_rules_follow(real_examples):
    """The writer switches the Setting over the examples; status.value follows a moment later (the
    fixture's stand-in for the operator), --wait waits for it, the report counts the deployments
    the switch recreates, and the server's own rules follow the value in force."""
    real = real_examples
    attached = [o for o in documents(EXAMPLES) if o["kind"] == "ModelDeployment" and o["spec"].get("kvCache")]
    real.plane.setting_lag = 0.5
    off = real.kvdtype("escape", "off", "--yes", "--wait=30s", "-o", "json", user="writer")
    assert off.returncode == 0, off.stderr
    assert json.loads(off.stdout)["items"][0]["deployments"] == len(attached)
    assert real.plane.setting()["status"]["value"] == "false"
    assert real.kubectl("create", "-f", "-", input=json.dumps(_binding("scratch", "auto"))).returncode == 0
    refused = real.kvdtype("escape", "on", "--yes", user="reader")
    assert refused.returncode == 3 and "403 Forbidden" in refused.stderr and "Traceback" not in refused.stderr
    on = real.kvdtype("escape", "on", "--yes", "--wait=30s", "-o", "json", user="writer")
    assert on.returncode == 0, on.stderr
    assert real.plane.setting()["status"]["value"] == "true"
    again = real.kubectl("create", "-f", "-", input=json.dumps(_binding("scratch2", "auto")))
    assert again.returncode == 1 and "may not declare dtype auto" in again.stderr


# --- A kubeconfig as kubectl writes it, an exec plugin: the direct transport on the real server ----------


def test_a_kubeconfig_kubectl_wrote_and_an_exec_plugin_are_served_directly_by_the_real_server(real, tmp_path):
    """The reader's kubeconfig as kubectl writes it (``config view --raw --flatten --minify``:
    block YAML) is read by the block reader, without PyYAML; the same user with its token handed
    out by an exec plugin runs on the direct transport, without urllib3. The real server
    authenticates both as the reader (who may list Bindings), and both judge the Binding alike."""
    from _support import exec_credential, exec_plugin, imported_by
    from fakekube import EXEC_API_VERSION
    from kubectl_kvdtype._kits.blockyaml import loads_block_mapping

    real.apply([_binding("chat", "fp8_e4m3")])
    written = real.kubectl("config", "view", "--raw", "--flatten", "--minify", user="reader")
    assert written.returncode == 0, written.stderr
    config = loads_block_mapping(written.stdout)
    assert config is not None and config["kind"] == "Config", written.stdout
    yaml_kc = tmp_path / "written"
    yaml_kc.write_text(written.stdout, encoding="utf-8")
    token = config["users"][0]["user"].pop("token")
    plugin = exec_plugin(tmp_path / "cred-plugin", f"printf '%s' '{exec_credential({'token': token})}'\n")
    # v1 needs interactiveMode (kubectl refuses the setting without it, and so does the plugin).
    config["users"][0]["user"]["exec"] = {"apiVersion": EXEC_API_VERSION, "command": str(plugin),
                                          "interactiveMode": "Never"}
    exec_kc = tmp_path / "exec"
    exec_kc.write_text(json.dumps(config), encoding="utf-8")
    runs = {}
    for name, path in (("written", yaml_kc), ("exec", exec_kc)):
        result, modules = imported_by(["check", "-o", "json"], {**real.env(user="reader"), "KUBECONFIG": str(path)})
        runs[name] = [(i["name"], i["verdict"]) for i in _report(result)["items"]]
        assert {"yaml", "urllib3", "kubernetes.client.rest"} & modules == set(), name
    assert runs["written"] == runs["exec"] == [("chat", "unused")]  # no deployment consumes it


def test_a_client_certificate_given_as_data_is_authenticated_by_the_real_server(real, tmp_path):
    """A kubeconfig user whose credential is a client certificate and key given as data (kind's,
    kubeadm's) is served directly, the pair handed to ``ssl`` from memory files on Linux: the real
    server takes the certificate as ci-bot (a reader), and the run judges as the token's does."""
    import base64
    import os

    from _support import imported_by
    from fakekube import TEST_CLIENT_CERT_PEM, TEST_CLIENT_KEY_PEM

    real.apply([_binding("chat", "fp8_e4m3")])
    config = json.loads(real.kubeconfig(user="ci-bot").read_text())
    config["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(TEST_CLIENT_CERT_PEM.encode()).decode(),
        "client-key-data": base64.b64encode(TEST_CLIENT_KEY_PEM.encode()).decode()}
    certified = tmp_path / "certified"
    certified.write_text(json.dumps(config), encoding="utf-8")
    by_token = _report(real.kvdtype("check", "-o", "json", user="ci-bot"))
    result, modules = imported_by(["check", "-o", "json"], {**real.env(user="ci-bot"), "KUBECONFIG": str(certified)})
    assert _report(result)["items"] == by_token["items"] and [i["name"] for i in by_token["items"]] == ["chat"]
    assert "urllib3" not in modules and ("tempfile" in modules) is (not hasattr(os, "memfd_create"))
    other = {**config, "users": [{"name": config["users"][0]["name"], "user": {
        **config["users"][0]["user"], "client-key-data": base64.b64encode(b"not a key").decode()}}]}
    certified.write_text(json.dumps(other), encoding="utf-8")
    refused = real.kvdtype("check", "--kubeconfig", str(certified), user="ci-bot")
    assert refused.returncode == 3 and len(refused.stderr.splitlines()) == 1, refused.stderr


def _owned_pod(name: str, binding: str, owner: dict, injected: str = "") -> dict:
    """An injected Pod (vLLM) naming ``binding``, controlled by the stored ``owner``; ``injected``:
    the Binding's dtype, as the webhook appends it to the args and records it (the server's
    pod-flag policy refuses a Pod's own copy)."""
    reference = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
                 "uid": owner["metadata"]["uid"], "controller": True}
    annotations = {"kvcache.gpustack.ai/binding": binding, "kvcache.gpustack.ai/engine": "vLLM"}
    if injected:
        annotations["kvcache.gpustack.ai/injected"] = json.dumps({"binding": binding, "engine": "vllm",
                                                                  "domain": binding})
    args = ["--kv-cache-dtype", injected] if injected else []
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"kvcache.gpustack.ai/inject": "true"}, "annotations": annotations,
                         "ownerReferences": [reference]},
            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.29.0",
                                     "command": ["vllm", "serve", "m"], "args": args}]}}


def _helm_set(name: str) -> dict:
    """A StatefulSet Helm manages (its labels and annotations), as the real server validates one."""
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "Helm"},
                         "annotations": {"meta.helm.sh/release-name": name}},
            "spec": {"serviceName": name, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}}


@pytest.mark.parametrize("command", ["check", "verify"])
def test_the_owners_read_early_are_those_named_each_once_on_the_real_server(real, command):
    """check and verify read the owners of the injected Pods they name while the deployments are
    still coming (``managed.read_owners_early``): on the real server, exactly those (not the owner
    of a Pod no finding names, never a ModelDeployment one by one), each once, and the finding
    names the manager the real server's stored owner says."""
    from _proxy import ApiProxy

    real.apply([_binding("rejected", "bf16"), _binding("accepted", "fp8"), _helm_set("named-set"),
                _helm_set("fine-set"), _deployment("md", "accepted", [])])
    named_set, fine_set, md = (real.get(kind, name) for kind, name in
                               (("StatefulSet", "named-set"), ("StatefulSet", "fine-set"), ("ModelDeployment", "md")))
    real.apply([_owned_pod("named", "rejected", named_set), _owned_pod("of-md", "rejected", md),
                _owned_pod("fine", "accepted", fine_set, injected="fp8")])
    with ApiProxy(real.plane.url) as proxy:
        result = real.kvdtype(command, "-n", real.namespace, "-o", "json", user="reader", server=proxy.url)
        asked = [e.path for e in proxy.log if e.method == "GET"]
    assert result.returncode == 1, result.stderr
    owners = [path for path in asked if "/statefulsets/" in path or "/modeldeployments/" in path]
    assert owners == [f"/apis/apps/v1/namespaces/{real.namespace}/statefulsets/named-set"]
    findings = json.loads(result.stdout)["findings"]
    about = {f["object"]["name"]: f for f in findings if f["object"]["kind"] == "Pod"}
    consumers = [c for f in findings if f["object"]["name"] == "rejected" for c in f.get("consumers") or []]
    named = about.get("named") or next(c for c in consumers if c["name"] == "named")
    assert [m["object"]["name"] for m in named["managedBy"]] == ["named-set"]
    assert "fine" not in about and "fine" not in {c["name"] for c in consumers}

"""The plugin's writes on the real API server, through the real kubectl, as the writer user: escape
rebind --apply (replace and side-by-side), escape restore, find-flags --fix --apply, and what only a
real server decides about them: finalizers holding what the plugin deleted, the resourceVersion and
uid preconditions refusing a write made between the plugin's check and its write (the proxy of
tests/_proxy.py holds the write while the test edits the object), RBAC and SelfSubjectAccessReview,
field validation and the operator's admission rules (CEL) refusing a write in one sentence, and
--dry-run=server through the real admission chain."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Optional

import pytest
import yaml

from _controlplane import RBAC, SETTING, SYSTEM_NAMESPACE, documents
from _proxy import ApiProxy, Exchange
from conftest import kubectl_path

pytestmark = pytest.mark.real

#: An operator's finalizer: nothing here removes it but the test.
FINALIZER = "gpustack.ai/cleanup"
REBOUND_FROM = "kvdtype.gpustack.ai/rebound-from"
WRITES = ("POST", "PUT", "PATCH", "DELETE")
SSAR = "/selfsubjectaccessreviews"


def _binding(name: str, dtype: str, finalizers: Optional[list[str]] = None) -> dict:
    metadata: dict = {"name": name}
    if finalizers:
        metadata["finalizers"] = finalizers
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding", "metadata": metadata,
            "spec": {"poolRef": {"name": "shared-dram"}, "quota": {"ceiling": "600Gi"},
                     "domain": {"name": name, "blockSize": 64, "dtype": dtype}},
            "status": {"phase": "Ready"}}


def _deployment(name: str, binding: str, extra_args: tuple[str, ...] = ("--max-model-len=4096",),
                finalizers: Optional[list[str]] = None, replicas: int = 1) -> dict:
    metadata: dict = {"name": name, "labels": {"team": "a"}}
    if finalizers:
        metadata["finalizers"] = finalizers
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment", "metadata": metadata,
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": "vLLM", "version": "0.29.0"},
                     "kvCache": {"poolRef": {"name": binding}, "connector": "Mooncake"},
                     "roles": [{"name": "server", "kind": "Server", "replicas": replicas,
                                "instanceType": "gpustack-nvidia-a10g-linux-amd64", "extraArgs": list(extra_args)}]},
            "status": {"roles": [{"name": "server", "desired": replicas, "ready": replicas, "unmanaged": False}]}}


def _stored_before_the_upgrade(real, objects: list[dict]) -> list[dict]:
    """Objects the rules refuse today (an auto Binding, a role's own flag), as a cluster holds them
    from before: written with the Setting off, then the Setting back on."""
    real.plane.set_setting("false")
    try:
        return real.apply(objects)
    finally:
        real.plane.set_setting("true")


@pytest.fixture
def proxy(control_plane):
    with ApiProxy(control_plane.url) as running:
        yield running


def _report(result, *codes: int) -> dict:
    assert result.returncode in (codes or (0,)), result.stderr
    return json.loads(result.stdout)


def _error(result, status: int = 3) -> str:
    """The run's one error sentence: the last line of stderr (after the steps' progress lines), the
    only one starting ``error:``, no traceback."""
    assert result.returncode == status, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), result.stderr
    assert sum(line.startswith("error:") for line in lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[-1]


def _states(report: dict) -> dict[str, str]:
    return {item["id"]: item["state"] for item in report["items"]}


def _written(proxy: ApiProxy, namespace: str) -> list[tuple[str, str, Optional[int]]]:
    """(method, what, status) of each write the plugin sent, without its SelfSubjectAccessReviews and
    its lease on the Binding (a merge patch of one annotation)."""
    found = []
    for exchange in proxy.log:
        if exchange.method not in WRITES or exchange.path.endswith(SSAR) or _is_lease(exchange):
            continue
        what = exchange.path.rsplit("/namespaces/", 1)[-1].replace(f"{namespace}/", "")
        if exchange.method == "POST":
            what += f"/{_posted(exchange)}"
        found.append((exchange.method, what, exchange.status))
    return found


def _posted(exchange: Exchange) -> Optional[str]:
    """The name of the object a POST creates."""
    return ((exchange.request_json or {}).get("metadata") or {}).get("name")


def _is_lease(exchange: Exchange) -> bool:
    body = exchange.request_json
    return (exchange.method == "PATCH" and isinstance(body, dict) and set(body) == {"metadata"}
            and "kvdtype.gpustack.ai/lease" in (body["metadata"].get("annotations") or {}))


def _backup(real) -> Path:
    (directory,) = sorted(real.home.glob("kvdtype-backup-*"))
    return directory


def _write_status(plane, namespace: str, name: str) -> None:
    """A ModelDeployment's status written, as its controller writes it: a new resourceVersion, the
    same generation."""
    plane.patch("ModelDeployment", namespace, name, {"status": {"observedGeneration": 7}}, subresource="status")


def _background(real, *args: str, user: str, server: str) -> subprocess.Popen:
    """``kubectl kvdtype ARGS`` started, not waited for (a test acts while it runs)."""
    return subprocess.Popen([kubectl_path(), "kvdtype", *args], env=real.env(user, server), cwd=real.home,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


# --- escape rebind --apply, replace; escape restore -------------------------------------------------------


def test_rebind_replace_waits_out_a_finalizer_and_restore_meets_the_operators_rules(real, proxy):
    """An auto Binding (stored before the upgrade) moved to bfloat16: the Setting off, the new
    Binding, each deployment deleted with the uid and resourceVersion just read as preconditions and
    created again once the server has let it go (an operator's finalizer holds the first one until
    the plugin has looked twice), the old Binding deleted, the Setting on. Then escape restore puts
    back the old Binding: the server refuses an auto Binding while the Setting is on (the operator's
    rule), in a dry run as in the real one, each in one sentence; with the Setting off it is made."""
    plane, namespace = real.plane, real.namespace
    _stored_before_the_upgrade(real, [_binding("scratch", "auto"),
                                      _deployment("qwen-a", "scratch", finalizers=[FINALIZER]),
                                      _deployment("qwen-b", "scratch")])
    _write_status(plane, namespace, "qwen-b")  # judging never reads it; the backup keeps it all the same
    original = real.get("ModelDeployment", "qwen-b")
    uids = {name: real.get("ModelDeployment", name)["metadata"]["uid"] for name in ("qwen-a", "qwen-b")}

    def let_go(exchange: Exchange) -> None:  # the operator's cleanup, once the plugin has seen it hold
        if exchange.status == 200 and exchange.json["metadata"].get("deletionTimestamp"):
            plane.patch("ModelDeployment", namespace, "qwen-a", {"metadata": {"finalizers": None}})

    proxy.after(let_go, "GET", r"/modeldeployments/qwen-a$",
                when=lambda e: bool(proxy.exchanges("DELETE", r"/modeldeployments/qwen-a$")))
    result = real.kvdtype("escape", "rebind", "scratch", "--dtype", "bfloat16", "--apply", "-o", "json",
                          user="writer", server=proxy.url)
    report = _report(result)
    assert report["summary"]["mode"] == "applied"
    assert _states(report) == {
        "setting-off": 'set to "false"', "create-binding": "created",
        "delete-md:qwen-a": "deleted", "create-md:qwen-a": "created",
        "delete-md:qwen-b": "deleted", "create-md:qwen-b": "created",
        "delete-binding": "deleted", "setting-on": 'set to "true"'}
    md, kvcpb, setting = "modeldeployments", "kvcachepoolbindings", f"{SYSTEM_NAMESPACE}/settings/{SETTING}"
    assert [(m, w) for m, w, _ in _written(proxy, namespace)] == [
        ("PATCH", setting), ("POST", f"{kvcpb}/scratch-bfloat16"),
        ("DELETE", f"{md}/qwen-a"), ("POST", f"{md}/qwen-a"),
        ("DELETE", f"{md}/qwen-b"), ("POST", f"{md}/qwen-b"),
        ("DELETE", f"{kvcpb}/scratch"), ("PATCH", setting)]
    for delete in proxy.exchanges("DELETE", "/modeldeployments/"):
        assert set(delete.request_json["preconditions"]) == {"uid", "resourceVersion"}
    # Between qwen-a's DELETE and its new copy: the server said it was still there (the finalizer), then gone.
    log = proxy.log
    deleted = next(i for i, e in enumerate(log) if e.method == "DELETE" and e.path.endswith("/qwen-a"))
    created = next(i for i, e in enumerate(log) if e.method == "POST" and _posted(e) == "qwen-a")
    polls = [e.status for e in log[deleted + 1:created] if e.method == "GET" and e.path.endswith("/qwen-a")]
    assert polls[0] == 200 and polls[-1] == 404, polls

    new = real.get("KVCachePoolBinding", "scratch-bfloat16")
    assert new["spec"]["domain"] == {"name": "scratch-bfloat16", "blockSize": 64, "dtype": "bfloat16"}
    assert new["metadata"]["annotations"][REBOUND_FROM] == f"{namespace}/scratch"
    for name in ("qwen-a", "qwen-b"):
        moved = real.get("ModelDeployment", name)
        assert moved["metadata"]["uid"] != uids[name] and moved["spec"]["kvCache"]["poolRef"]["name"] == \
            "scratch-bfloat16"
        assert moved["metadata"]["labels"] == {"team": "a"} and not moved["metadata"].get("finalizers")
    assert real.get("KVCachePoolBinding", "scratch") is None
    assert plane.setting()["spec"]["value"] == "true"

    backup = _backup(real)
    assert sorted(p.name for p in backup.iterdir() if p.suffix == ".yaml") == sorted(
        [f"kvcachepoolbinding-{namespace}-scratch.yaml", f"modeldeployment-{namespace}-qwen-a.yaml",
         f"modeldeployment-{namespace}-qwen-b.yaml", f"setting-{SYSTEM_NAMESPACE}-{SETTING}.yaml"])
    saved = yaml.safe_load((backup / f"modeldeployment-{namespace}-qwen-b.yaml").read_text())
    assert saved == original and saved["status"]["observedGeneration"] == 7  # read whole, as the server holds it
    restore = ("escape", "restore", str(backup), "-o", "json")
    for dry_run in ("--dry-run=server", "--apply"):
        error = _error(real.kvdtype(*restore, dry_run, user="writer", server=proxy.url))
        assert f"cannot create KVCachePoolBinding {namespace}/scratch: create kvcachepoolbindings.worker.gpustack.ai " \
               f'in namespace "{namespace}" refused by the cluster\'s admission (403 Forbidden): ' in error
        assert "may not declare dtype auto" in error and "Created so far: nothing" in error
        assert real.get("KVCachePoolBinding", "scratch") is None
    plane.set_setting("false")
    restored = _report(real.kvdtype(*restore, "--apply", user="writer", server=proxy.url))
    assert {i["name"]: i["state"] for i in restored["items"]} == {
        "scratch": "created", "qwen-a": "exists", "qwen-b": "exists", SETTING: "left alone"}
    assert real.get("KVCachePoolBinding", "scratch")["spec"]["domain"]["dtype"] == "auto"


# --- escape rebind --apply, side-by-side: the old Binding held by a finalizer ------------------------------


def test_rebind_side_by_side_leaves_the_old_binding_to_its_finalizer_and_restore_waits_for_it(real, proxy):
    """Copies first, then the originals deleted; the old Binding, held by the operator's finalizer,
    stays terminating, and the Setting is turned back on all the same (a Binding being deleted is
    nobody's). escape restore then says the Binding is still being deleted, and makes it again once
    the finalizer has let it go."""
    plane, namespace = real.plane, real.namespace
    real.apply([_binding("legacy", "bf16", finalizers=[FINALIZER]), _deployment("qwen", "legacy")])
    result = real.kvdtype("escape", "rebind", "legacy", "--dtype", "bfloat16", "--strategy", "side-by-side",
                          "--apply", "-o", "json", user="writer", server=proxy.url)
    report = _report(result)
    assert _states(report) == {
        "setting-off": 'set to "false"', "create-binding": "created", "create-md:qwen-bfloat16": "created",
        "delete-md:qwen": "deleted", "delete-binding": "deleted", "setting-on": 'set to "true"'}
    assert [f["code"] for f in report["findings"]] == ["name-change"]
    md = "modeldeployments"
    assert [(m, w, s) for m, w, s in _written(proxy, namespace) if w.startswith(md)] == [
        ("POST", f"{md}/qwen-bfloat16", 201), ("DELETE", f"{md}/qwen", 200)]
    old = real.get("KVCachePoolBinding", "legacy")
    assert old["metadata"]["deletionTimestamp"] and old["metadata"]["finalizers"] == [FINALIZER]  # terminating
    assert real.get("ModelDeployment", "qwen") is None
    assert real.get("ModelDeployment", "qwen-bfloat16")["spec"]["kvCache"]["poolRef"]["name"] == "legacy-bfloat16"
    assert plane.setting()["spec"]["value"] == "true"

    restore = ("escape", "restore", str(_backup(real)), "-o", "json")
    waiting = _report(real.kvdtype(*restore, user="writer", server=proxy.url))
    assert {i["name"]: i["state"] for i in waiting["items"]} == {
        "legacy": "being deleted", "qwen": "planned", SETTING: "left alone"}
    assert waiting["items"][0]["detail"] == "still terminating: run restore again once it is gone"
    plane.patch("KVCachePoolBinding", namespace, "legacy", {"metadata": {"finalizers": None}})
    assert real.get("KVCachePoolBinding", "legacy") is None  # the server completes the deletion itself
    restored = _report(real.kvdtype(*restore, "--apply", user="writer", server=proxy.url))
    assert {i["name"]: i["state"] for i in restored["items"]} == {
        "legacy": "created", "qwen": "created", SETTING: "left alone"}
    assert [f["code"] for f in restored["findings"]] == ["restore-breaks"]  # vLLM rejects bf16, the Setting on
    again = real.get("KVCachePoolBinding", "legacy")
    assert again["spec"]["domain"]["dtype"] == "bf16" and not again["metadata"].get("finalizers")
    assert real.get("ModelDeployment", "qwen")["spec"]["kvCache"]["poolRef"]["name"] == "legacy"
    assert real.get("ModelDeployment", "qwen-bfloat16") is not None  # the rebind's own objects stay


# --- find-flags --fix --apply; escape restore of what it patched ---------------------------------------------


def _batch(name: str = "vllm-batch") -> dict:
    """A Deployment whose Pod template opts into injection and passes the flag itself."""
    labels = {"app": name, "kvcache.gpustack.ai/inject": "true"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels,
                                               "annotations": {"kvcache.gpustack.ai/binding": "chat",
                                                               "kvcache.gpustack.ai/engine": "vLLM"}},
                                  "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.29.0",
                                                           "args": ["--kv-cache-dtype=bfloat16", "--port=8000"]}]}}}}


FLAGGED = ("--kv-cache-dtype", "bfloat16", "--max-model-len=4096")


def _flags(real) -> tuple[list[str], list[str]]:
    """(the role's extraArgs, the template container's args) as the server holds them."""
    role = real.get("ModelDeployment", "qwen-flagged")["spec"]["roles"][0]["extraArgs"]
    container = real.get("Deployment", "vllm-batch")["spec"]["template"]["spec"]["containers"][0]["args"]
    return role, container


def test_fix_removes_the_flags_through_the_admission_chain_and_restore_puts_them_back(real, proxy):
    """A role and a Pod template passing the flag (stored before the upgrade): a server dry run
    (the patches through admission, nothing changed), then the patches, each a JSON patch led by a
    test of the resourceVersion; escape restore puts the flags back, which the operator's rule
    refuses for the role while the Setting is on (one sentence), and allows once it is off."""
    plane, namespace = real.plane, real.namespace
    _stored_before_the_upgrade(real, [_binding("chat", "bfloat16"), _deployment("qwen-flagged", "chat", FLAGGED),
                                      _batch()])
    versions = {k: real.get(k, n)["metadata"]["resourceVersion"] for k, n in
                (("ModelDeployment", "qwen-flagged"), ("Deployment", "vllm-batch"))}
    fix = ("find-flags", "--fix", "-o", "json")
    dry = _report(real.kvdtype(*fix, "--dry-run=server", user="writer", server=proxy.url))
    assert {i["name"]: i["state"] for i in dry["items"]} == {"qwen-flagged": "accepted (dry run)",
                                                             "vllm-batch": "accepted (dry run)"}
    patches = proxy.exchanges("PATCH")
    assert [(p.query, p.status) for p in patches] == [({"dryRun": "All", "fieldManager": "kubectl-kvdtype"}, 200)] * 2
    assert {k: real.get(k, n)["metadata"]["resourceVersion"] for k, n in
            (("ModelDeployment", "qwen-flagged"), ("Deployment", "vllm-batch"))} == versions
    assert _flags(real) == (list(FLAGGED), ["--kv-cache-dtype=bfloat16", "--port=8000"])
    assert not list(real.home.glob("kvdtype-backup-*"))  # a dry run saves nothing

    proxy.clear()
    fixed = _report(real.kvdtype(*fix, "--apply", "--yes", user="writer", server=proxy.url))
    assert {i["name"]: i["state"] for i in fixed["items"]} == {"qwen-flagged": "patched", "vllm-batch": "patched"}
    for patch in proxy.exchanges("PATCH"):
        assert patch.status == 200 and patch.request_json[0]["op"] == "test"
        assert patch.request_json[0]["path"] == "/metadata/resourceVersion"
    assert _flags(real) == (["--max-model-len=4096"], ["--port=8000"])
    assert _report(real.kvdtype("find-flags", "-o", "json", user="reader"))["items"] == []

    restore = ("escape", "restore", str(_backup(real)), "--apply", "-o", "json")
    error = _error(real.kvdtype(*restore, user="writer", server=proxy.url))
    assert f"ModelDeployment {namespace}/qwen-flagged" in error and "refused by the cluster's admission" in error
    assert "pass --kv-cache-dtype in extraArgs" in error and "Restored so far: nothing" in error  # the operator's words
    assert _flags(real)[0] == ["--max-model-len=4096"]
    plane.set_setting("false")
    restored = _report(real.kvdtype(*restore, user="writer", server=proxy.url))
    assert {i["name"]: i["state"] for i in restored["items"]} == {"qwen-flagged": "restored", "vllm-batch": "restored"}
    assert _flags(real) == (list(FLAGGED), ["--kv-cache-dtype=bfloat16", "--port=8000"])


# --- A write made between the plugin's check and its own write: the server's preconditions --------------------


def test_a_write_between_the_fixs_check_and_its_patch_fails_the_patchs_test_and_is_kept(real, proxy):
    """The fix reads the object just before patching it; the proxy holds the PATCH while the test
    writes the object's status (as its controller would: the operator's rule refuses any other
    update of a role passing the flag). The server then fails the patch's test of the
    resourceVersion (422): the object keeps that write and its flag, and the fix says it changed."""
    plane, namespace = real.plane, real.namespace
    _stored_before_the_upgrade(real, [_binding("chat", "bfloat16"), _deployment("qwen-flagged", "chat", FLAGGED)])
    held = proxy.hold("PATCH", r"/modeldeployments/qwen-flagged$")
    run = _background(real, "find-flags", "--fix", "--apply", "--yes", "-o", "json", user="writer", server=proxy.url)
    try:
        held.wait_arrived()
        _write_status(plane, namespace, "qwen-flagged")
    finally:
        held.release()
    out, err = run.communicate(timeout=60)
    assert run.returncode == 1, err  # a conflict is an error finding
    (item,) = json.loads(out)["items"]
    assert item["state"] == "conflict" and "changed since it was read (resourceVersion" in item["detail"]
    (patch,) = proxy.exchanges("PATCH")
    assert (patch.status, patch.json["reason"]) == (422, "Invalid")  # the server's own refusal
    kept = real.get("ModelDeployment", "qwen-flagged")
    assert kept["status"]["observedGeneration"] == 7 and kept["spec"]["roles"][0]["extraArgs"] == list(FLAGGED)


def test_writes_between_the_rebinds_check_and_its_delete_meet_the_delete_preconditions(real, proxy):
    """Each DELETE carries the uid and resourceVersion of the GET just before it. The proxy holds
    the first DELETE of each deployment while the test writes it: a status write (a controller's)
    makes the server refuse the DELETE (409), and the plugin, reading it again, finds nothing it
    depends on changed and deletes it; a spec edit (a user's) makes it stop before touching the
    object, which keeps the edit."""
    plane, namespace = real.plane, real.namespace
    real.apply([_binding("legacy", "bf16"), _deployment("qwen-a", "legacy"), _deployment("qwen-b", "legacy")])
    holds = {name: proxy.hold("DELETE", rf"/modeldeployments/{name}$") for name in ("qwen-a", "qwen-b")}
    role = _deployment("qwen-b", "legacy")["spec"]["roles"][0]
    edits = {"qwen-a": lambda: _write_status(plane, namespace, "qwen-a"),
             "qwen-b": lambda: plane.patch("ModelDeployment", namespace, "qwen-b",
                                           {"spec": {"roles": [{**role, "replicas": 3}]}})}
    run = _background(real, "escape", "rebind", "legacy", "--dtype", "bfloat16", "--apply", "-o", "json",
                      user="writer", server=proxy.url)
    try:
        for name in ("qwen-a", "qwen-b"):
            holds[name].wait_arrived()
            edits[name]()
            holds[name].release()
    finally:
        for hold in holds.values():
            hold.release()
    out, err = run.communicate(timeout=60)
    assert run.returncode == 3, err
    error = err.strip().splitlines()[-1]
    assert f"stopped before touching it: ModelDeployment {namespace}/qwen-b changed since the plan (" in error
    assert "spec.roles[0].replicas 1 -> 3" in error and "its edit is kept" in error
    deletes = [(e.path.rsplit("/", 1)[-1], e.status) for e in proxy.exchanges("DELETE", "/modeldeployments/")]
    assert deletes == [("qwen-a", 409), ("qwen-a", 200), ("qwen-b", 409)]
    refusal = proxy.exchanges("DELETE", "/qwen-b$")[0].json  # the server's own words
    assert refusal["reason"] == "Conflict" and "the ResourceVersion in the precondition" in refusal["message"]
    assert real.get("ModelDeployment", "qwen-a")["spec"]["kvCache"]["poolRef"]["name"] == "legacy-bfloat16"
    assert real.get("ModelDeployment", "qwen-b")["spec"]["roles"][0]["replicas"] == 3  # kept, on the old Binding
    assert real.get("ModelDeployment", "qwen-b")["spec"]["kvCache"]["poolRef"]["name"] == "legacy"


# --- The roles: each user does its job and nothing more ------------------------------------------------------


def _writer_rules() -> list[dict]:
    (writer,) = [r for r in documents(RBAC) if r["metadata"]["name"] == "kvdtype-writer"]
    return writer["rules"]


def _nothing_written(proxy: ApiProxy) -> bool:
    return all(e.method not in WRITES or e.path.endswith(SSAR) for e in proxy.log)


def test_a_role_missing_one_verb_the_rebind_needs_is_refused_before_the_first_write(real, proxy):
    """kvdtype-writer without delete on ModelDeployments: SelfSubjectAccessReview says so before
    anything is written (no backup, no lease, the Setting untouched); the reader, likewise."""
    real.apply([_binding("legacy", "bf16"), _deployment("qwen", "legacy")])
    rules = [dict(r, verbs=[v for v in r["verbs"] if v != "delete"]) if "modeldeployments" in r.get("resources", [])
             else r for r in _writer_rules()]
    rules = [{**rules[0], "resources": ["modeldeployments"]},
             {**_writer_rules()[0], "resources": ["kvcachepoolbindings"]}] + rules[1:]
    setting = real.plane.setting()["metadata"]["resourceVersion"]
    rebind = ("escape", "rebind", "legacy", "--dtype", "bfloat16", "--apply")
    with real.plane.grant("limited", rules):
        error = _error(real.kvdtype(*rebind, user="limited", server=proxy.url))
    assert error == (f"error: you may not delete modeldeployments.worker.gpustack.ai in namespace {real.namespace} "
                     "(SelfSubjectAccessReview), which the plan needs; nothing was changed")
    reader = _error(real.kvdtype(*rebind, user="reader", server=proxy.url))
    assert reader.startswith("error: you may not patch settings.gpustack.ai") and "create kvcachepoolbindings" in reader
    assert _nothing_written(proxy) and proxy.exchanges("POST", SSAR)
    assert not list(real.home.glob("kvdtype-backup-*"))
    assert real.plane.setting()["metadata"]["resourceVersion"] == setting
    assert real.get("KVCachePoolBinding", "legacy")["metadata"].get("annotations") is None  # no lease taken


def test_the_reader_may_not_fix_and_the_server_says_so_at_the_first_patch(real, proxy):
    _stored_before_the_upgrade(real, [_binding("chat", "bfloat16"), _deployment("qwen-flagged", "chat", FLAGGED)])
    error = _error(real.kvdtype("find-flags", "--fix", "--apply", "--yes", user="reader", server=proxy.url))
    assert f"cannot patch ModelDeployment {real.namespace}/qwen-flagged: you may not patch " in error
    assert 'User "reader" cannot patch resource "modeldeployments"' in error and "Patched so far: nothing" in error
    assert [(e.method, e.status) for e in proxy.log if e.method in WRITES] == [("PATCH", 403)]
    assert real.get("ModelDeployment", "qwen-flagged")["spec"]["roles"][0]["extraArgs"] == list(FLAGGED)


def test_a_fleet_of_contexts_each_with_its_own_user_and_answer(real, tmp_path):
    """One kubeconfig, a context per user: the reader's and the writer's judge the same cluster
    alike; the context of a user bound to nothing is its own row, refused by RBAC, and the fleet
    says it is incomplete."""
    real.apply([_binding("legacy", "bf16"), _deployment("qwen", "legacy")])
    kubeconfig = real.plane.write_kubeconfig(tmp_path / "fleet", users=("reader", "writer", "limited"),
                                             namespace=real.namespace)
    env = dict(real.env("reader"), KUBECONFIG=str(kubeconfig))
    result = subprocess.run([kubectl_path(), "kvdtype", "check", "--all-contexts", "-o", "json"], env=env,
                            cwd=real.home, text=True, capture_output=True, timeout=60)
    assert result.returncode == 3, result.stderr
    fleet = json.loads(result.stdout)
    by_context = {c["context"]: c for c in fleet["contexts"]}
    assert list(by_context) == ["limited", "reader", "writer"]
    assert by_context["reader"]["report"] == by_context["writer"]["report"]
    assert [i["verdict"] for i in by_context["reader"]["report"]["items"]] == ["rejected"]
    assert by_context["limited"]["exitStatus"] == 3
    assert 'User "limited" cannot list resource' in by_context["limited"]["error"]["message"]
    assert fleet["summary"]["notChecked"] == ["limited"] and fleet["summary"]["failing"] == ["reader", "writer"]


# --- Server-side dry runs, field validation -------------------------------------------------------------------


def test_dry_runs_go_through_the_server_and_change_nothing(real, proxy):
    """escape off and escape rebind with --dry-run=server: every write sent with dryRun=All and
    answered by the server (admission included), nothing changed."""
    plane = real.plane
    real.apply([_binding("legacy", "bf16"), _deployment("qwen", "legacy")])
    before = plane.setting()["metadata"]["resourceVersion"]
    off = _report(real.kvdtype("escape", "off", "--yes", "--dry-run=server", "-o", "json", user="writer",
                               server=proxy.url))
    assert off["items"][0]["result"] == "would change (dry run: server accepted it)"
    rebind = _report(real.kvdtype("escape", "rebind", "legacy", "--dtype", "bfloat16", "--dry-run=server", "-o",
                                  "json", user="writer", server=proxy.url))
    assert rebind["summary"]["mode"] == "dry-run-server"
    assert _states(rebind) == {
        "setting-off": 'set to "false" (dry run)', "create-binding": "created (dry run)",
        "delete-md:qwen": "deleted (dry run)",
        "create-md:qwen": "not created (dry run: the name is still held by the deployment the real run deletes first)",
        "delete-binding": "deleted (dry run)", "setting-on": 'set to "true" (dry run)'}
    sent = [e for e in proxy.log if e.method in WRITES and not e.path.endswith(SSAR)]
    written = {"dryRun": "All", "fieldManager": "kubectl-kvdtype"}  # a write names the plugin; a DELETE has no fields
    assert [(e.method, e.query, e.status) for e in sent] == [
        ("PATCH", written, 200),  # escape off
        ("PATCH", written, 200), ("POST", written, 201), ("DELETE", {"dryRun": "All"}, 200),
        ("POST", written, 409), ("DELETE", {"dryRun": "All"}, 200), ("PATCH", written, 200)]
    # kube-apiserver reads a DELETE's options from its body, when there is one, not from its query.
    assert all(e.request_json["dryRun"] == ["All"] for e in sent if e.method == "DELETE")
    assert plane.setting()["metadata"]["resourceVersion"] == before
    assert real.get("ModelDeployment", "qwen")["spec"]["kvCache"]["poolRef"]["name"] == "legacy"
    assert real.get("KVCachePoolBinding", "legacy-bfloat16") is None and real.get("KVCachePoolBinding", "legacy")


def test_an_object_the_schema_refuses_is_one_sentence(real, tmp_path):
    """A backup edited by hand to a value the CRD's schema refuses: the server's 422, said once."""
    backup = tmp_path / "edited"
    backup.mkdir()
    edited = _deployment("qwen", "legacy", replicas=-1)
    edited["metadata"]["namespace"] = real.namespace
    (backup / "modeldeployment-qwen.yaml").write_text(yaml.safe_dump(edited))
    error = _error(real.kvdtype("escape", "restore", str(backup), "--apply", user="writer"))
    assert f"cannot create ModelDeployment {real.namespace}/qwen: create modeldeployments.worker.gpustack.ai" in error
    assert "(422 Invalid)" in error and "spec.roles[0].replicas" in error and "Created so far: nothing" in error
    assert real.get("ModelDeployment", "qwen") is None

"""``kubectl kvdtype find-flags --fix`` and ``escape restore`` of its backups, through real kubectl
against the fake API server (which answers a failed JSON-patch ``test`` with 422, like a real one)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from _support import EXAMPLES, SETTING, SYSTEM, documents, seed
from conftest import kubectl_path, run_kubectl

NS = "team-c"
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
      "metadata": {"name": "vllm-batch-7d9f", "namespace": NS,
                   "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm-batch",
                                        "uid": "d1", "controller": True}]},
      "spec": {"selector": {"matchLabels": {"app": "vllm-batch"}},
               "template": {"metadata": {"labels": {"app": "vllm-batch", "kvcache.gpustack.ai/inject": "true"}},
                            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.29.0",
                                                     "args": ["--kv-cache-dtype=fp8"]}]}}}}
INJECT = {"kvcache.gpustack.ai/inject": "true"}
NOTES = {"kvcache.gpustack.ai/binding": "chat-d", "kvcache.gpustack.ai/engine": "vLLM"}


def run(env: dict, cwd: Path, *args: str, input: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_path(), "kvdtype", *args], env=env, cwd=cwd, text=True, input=input,
                          capture_output=True, timeout=60)


def patches(fake) -> list:
    return [r for r in fake.requests if r.method == "PATCH"]


def items(result: subprocess.CompletedProcess) -> dict:
    assert result.stdout, result.stderr
    return {(i["kind"], i["name"]): i for i in json.loads(result.stdout)["items"]}


def extra_args(fake, name: str) -> list:
    return fake.get("ModelDeployment", NS, name)["spec"]["roles"][0].get("extraArgs")


@pytest.fixture
def cluster(fake, kube_env):
    seed(fake, documents(EXAMPLES) + [RS])
    fake.clear_log()
    return kube_env


# --- team-c: roles, a Deployment reached from its Pod and its template, a CronJob --------------

def test_the_plan_changes_nothing_and_refuses_dtype_changes(cluster, fake, tmp_path):
    result = run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "-o", "json")
    assert result.returncode == 1, result.stderr  # refused objects are error findings
    found = items(result)
    assert not patches(fake) and not list(tmp_path.glob("kvdtype-backup-*"))
    assert found[("ModelDeployment", "qwen-same")]["state"] == "planned"  # same value as its Binding
    assert found[("ModelDeployment", "sglang-underscore")]["state"] == "planned"  # not read: fails anyway
    flagged = found[("ModelDeployment", "qwen-flagged")]
    assert flagged["state"] == "refused"
    assert "runs fp8_e4m3 today; after removal it runs its Binding chat-c's bfloat16" in flagged["detail"]
    assert found[("ModelDeployment", "qwen-twice")]["state"] == "refused"
    # The injected Pod is fixed in its top controller, the Deployment, once with the template's own finding.
    deployment = found[("Deployment", "vllm-batch")]
    assert deployment["state"] == "planned", deployment  # the webhook's later copy wins: nothing changes
    assert sorted(deployment["fixes"]) == ["Deployment team-c/vllm-batch", "Pod team-c/vllm-batch-7d9f-abcde"]
    assert ("Pod", "vllm-batch-7d9f-abcde") not in found and ("ReplicaSet", "vllm-batch-7d9f") not in found
    cron = found[("CronJob", "nightly-eval")]
    assert cron["removes"] == [
        "spec.jobTemplate.spec.template.spec.containers[1].command[5,6]: --kv-cache-dtype fp8_e4m3"]
    assert "rolls its replicas" in deployment["detail"] and "rolling update" in deployment["detail"]
    assert deployment["patch"][0] == {"op": "test", "path": "/metadata/resourceVersion",
                                      "value": fake.get("Deployment", NS, "vllm-batch")["metadata"]["resourceVersion"]}
    table = run(cluster, tmp_path, "find-flags", "-n", NS, "--fix")
    assert "Plan only, nothing was changed: 4 object(s) would be patched" in table.stdout
    assert "--accept-dtype-change" in table.stdout


def test_apply_backs_up_then_patches_and_leaves_refused_objects(cluster, fake, tmp_path):
    with_status = fake.get("ModelDeployment", NS, "qwen-same")
    with_status["status"] = {"roles": [{"name": "server", "desired": 1, "ready": 1}]}  # judging never reads it
    original = fake.add(with_status)
    before = {n: extra_args(fake, n) for n in ("qwen-flagged", "qwen-same")}
    result = run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "--apply", "--yes", "-o", "json")
    assert result.returncode == 1, result.stderr  # the refused ones remain
    found = items(result)
    assert {k for k, i in found.items() if i["state"] == "patched"} == {
        ("ModelDeployment", "qwen-same"), ("ModelDeployment", "sglang-underscore"), ("Deployment", "vllm-batch"),
        ("CronJob", "nightly-eval")}
    sent = patches(fake)
    assert len(sent) == 4 and all((r.content_type or "").startswith("application/json-patch+json")
                                  for r in sent)
    assert all(r.body[0]["op"] == "test" and r.body[0]["path"] == "/metadata/resourceVersion" for r in sent)
    assert extra_args(fake, "qwen-same") == [] and extra_args(fake, "sglang-underscore") == []
    assert extra_args(fake, "qwen-flagged") == before["qwen-flagged"]  # refused: untouched
    assert fake.get("Deployment", NS, "vllm-batch")["spec"]["template"]["spec"]["containers"][0]["args"] == []
    cron_spec = fake.get("CronJob", NS, "nightly-eval")["spec"]["jobTemplate"]["spec"]
    command = cron_spec["template"]["spec"]["containers"][1]["command"]
    assert command == ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]
    (backup,) = tmp_path.glob("kvdtype-backup-fix-*")
    saved = yaml.safe_load((backup / "modeldeployment-team-c-qwen-same.yaml").read_text())
    assert saved["spec"]["roles"][0]["extraArgs"] == before["qwen-same"]
    assert saved == original  # the object as it was, its status too: --fix reads what it backs up whole
    assert {p.name for p in backup.glob("*.yaml")} == {
        "modeldeployment-team-c-qwen-same.yaml", "modeldeployment-team-c-sglang-underscore.yaml",
        "deployment-team-c-vllm-batch.yaml", "cronjob-team-c-nightly-eval.yaml"}
    # find-flags now reports only what was refused (and the old Pod, until its Deployment rolls it).
    again = json.loads(run(cluster, tmp_path, "find-flags", "-n", NS, "-o", "json").stdout)
    assert sorted(f["object"]["name"] for f in again["findings"]) == [
        "qwen-abbrev", "qwen-flagged", "qwen-twice", "vllm-batch-7d9f-abcde"]


def test_accept_dtype_change_patches_the_refused_roles(cluster, fake, tmp_path):
    result = run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "--apply", "--yes", "--accept-dtype-change",
                 "-o", "json")
    assert result.returncode == 0, result.stderr
    assert extra_args(fake, "qwen-flagged") == ["--max-model-len=4096"]  # the flag and its value
    assert extra_args(fake, "qwen-twice") == [] and extra_args(fake, "qwen-abbrev") == []
    assert "dtype change accepted" in items(result)[("ModelDeployment", "qwen-flagged")]["detail"]
    left = json.loads(run(cluster, tmp_path, "find-flags", "-n", NS, "-o", "json").stdout)["findings"]
    assert [f["object"]["name"] for f in left] == ["vllm-batch-7d9f-abcde"]  # an old Pod, until its Deployment rolls


@pytest.mark.parametrize("setting", ["off", "absent"])
def test_before_the_operator_enforces_the_dtype_every_removal_is_refused(cluster, fake, tmp_path, setting):
    if setting == "off":
        fake.update("Setting", SYSTEM, SETTING, {"spec": {"value": "false"}, "status": {"value": "false"}})
    else:
        fake.remove("Setting", SYSTEM, SETTING)
    found = items(run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "-o", "json"))
    same, deployment = found[("ModelDeployment", "qwen-same")], found[("Deployment", "vllm-batch")]
    assert same["state"] == deployment["state"] == "refused"
    assert f"the Setting {'is off' if setting == 'off' else SYSTEM + '/' + SETTING + ' is absent'}" in same["detail"]
    assert "its engine's default (auto) instead of bfloat16" in same["detail"]
    assert found[("ModelDeployment", "sglang-underscore")]["state"] == "planned"  # fails at startup today anyway


def test_dry_run_server_sends_dry_run_patches_and_changes_nothing(cluster, fake, tmp_path):
    before = fake.get("ModelDeployment", NS, "qwen-same")
    result = run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "--dry-run=server")
    assert "Dry run, nothing was changed: the server accepted 4 patch(es)" in result.stdout, result.stderr
    assert patches(fake) and all(r.query.get("dryRun") == "All" for r in patches(fake))
    assert fake.get("ModelDeployment", NS, "qwen-same") == before
    assert not list(tmp_path.glob("kvdtype-backup-*"))


def test_without_a_terminal_apply_is_the_consent(cluster, fake, tmp_path):
    """As for every write that plans by default (issue 39: one consent rule, tests/test_consent.py)."""
    result = run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "--apply")
    assert result.returncode == 1 and "[y/N]" not in result.stderr, result.stderr  # the refused ones remain
    assert len(patches(fake)) == 4 and len(list(tmp_path.glob("kvdtype-backup-*"))) == 1


def test_yaml_prints_patched_manifests_and_patch_the_json_patches_kubectl_applies(cluster, fake, tmp_path):
    manifests = list(yaml.safe_load_all(run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "-o", "yaml").stdout))
    by_name = {m["metadata"]["name"]: m for m in manifests}
    assert by_name["qwen-same"]["spec"]["roles"][0]["extraArgs"] == []
    assert "resourceVersion" not in by_name["qwen-same"]["metadata"] and by_name["vllm-batch"]["kind"] == "Deployment"
    listed = json.loads(run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "-o", "patch").stdout)
    assert not patches(fake)
    # The oracle: kubectl itself applies each printed patch (its resourceVersion test passes once)...
    for entry in listed:
        resource = {"ModelDeployment": "modeldeployments.worker.gpustack.ai"}.get(entry["kind"], entry["kind"].lower())
        done = run_kubectl(["patch", resource, entry["name"], "-n", entry["namespace"], "--type=json",
                            "-p", json.dumps(entry["patch"])], cluster)
        assert done.returncode == 0, done.stderr
        again = run_kubectl(["patch", resource, entry["name"], "-n", entry["namespace"], "--type=json",
                             "-p", json.dumps(entry["patch"])], cluster)
        assert again.returncode != 0  # ...and the same patch is refused on the version it made (422)
    assert extra_args(fake, "qwen-same") == []
    assert json.loads(run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "-o", "json").stdout)["summary"][
        "planned"] == 0


def test_an_object_changed_meanwhile_is_left_alone(cluster, fake, tmp_path):
    """Someone edits the CronJob's spec while the fix patches the deployments: the GET just before
    its PATCH shows a new generation, so no PATCH is sent to it."""
    def edit_cronjob(op, new, old):
        if op == "UPDATE" and (new or {}).get("kind") == "ModelDeployment":
            fake.update("CronJob", NS, "nightly-eval", {"spec": {"schedule": "0 4 * * *"}})
    fake.admission(edit_cronjob)
    result = run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "--apply", "--yes", "-o", "json")
    cron = items(result)[("CronJob", "nightly-eval")]
    assert cron["state"] == "conflict" and "changed since it was read (metadata.generation" in cron["detail"]
    assert [r.status for r in patches(fake) if "cronjobs" in r.path] == []
    assert "fix-conflict" in [f["code"] for f in json.loads(result.stdout)["findings"]]
    cron_spec = fake.get("CronJob", NS, "nightly-eval")["spec"]["jobTemplate"]["spec"]
    command = cron_spec["template"]["spec"]["containers"][1]["command"]
    assert "--kv-cache-dtype" in command
    assert extra_args(fake, "qwen-same") == []


def test_a_label_written_meanwhile_is_not_a_change_and_survives(cluster, fake, tmp_path):
    """Controllers write metadata and status all the time: the PATCH carries the resourceVersion of
    a GET made just before it, so such a write neither blocks the fix nor is lost."""
    def label_cronjob(op, new, old):
        if op == "UPDATE" and (new or {}).get("kind") == "ModelDeployment":
            fake.update("CronJob", NS, "nightly-eval", {"metadata": {"labels": {"edited": "yes"}}})
    fake.admission(label_cronjob)
    result = run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "--apply", "--yes", "-o", "json")
    assert items(result)[("CronJob", "nightly-eval")]["state"] == "patched", result.stderr
    cron = fake.get("CronJob", NS, "nightly-eval")
    assert cron["metadata"]["labels"]["edited"] == "yes"
    assert "--kv-cache-dtype" not in cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][1]["command"]


def test_restore_reverts_the_fix_and_leaves_an_object_changed_since(cluster, fake, tmp_path):
    originals = {n: extra_args(fake, n) for n in ("qwen-same", "sglang-underscore")}
    deployment = fake.get("Deployment", NS, "vllm-batch")["spec"]
    run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "--apply", "--yes", "--backup-dir", "fixed")
    assert extra_args(fake, "qwen-same") == []
    fake.update("ModelDeployment", NS, "sglang-underscore", {"metadata": {"labels": {"edited": "yes"}}})
    fake.clear_log()
    plan = run(cluster, tmp_path, "escape", "restore", "fixed", "-o", "json")
    states = {i["name"]: i["state"] for i in json.loads(plan.stdout)["items"]}
    assert states == {"qwen-same": "planned", "sglang-underscore": "conflict", "vllm-batch": "planned",
                      "nightly-eval": "planned"}
    assert not patches(fake)
    applied = run(cluster, tmp_path, "escape", "restore", "fixed", "--apply", "-o", "json")
    applied_at = fake.requests[-1].time
    assert applied.returncode == 1, applied.stderr  # the conflict is an error finding
    document = json.loads(applied.stdout)
    assert [(f["code"], f["object"]["name"]) for f in document["findings"]] == [
        ("restore-conflict", "sglang-underscore")]
    assert extra_args(fake, "qwen-same") == originals["qwen-same"]
    assert extra_args(fake, "sglang-underscore") == []  # changed since the fix: left alone
    assert fake.get("Deployment", NS, "vllm-batch")["spec"]["template"] == deployment["template"]
    assert all(r.body[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": r.body[0]["value"]}
               for r in patches(fake))
    # Restoring again: what the restore put back is as before the fix, so nothing is written; the
    # object changed since the fix is still a conflict.
    again = run(cluster, tmp_path, "escape", "restore", "fixed", "--apply", "-o", "json")
    assert {i["name"]: i["state"] for i in json.loads(again.stdout)["items"]} == {
        "qwen-same": "restored already", "sglang-underscore": "conflict", "vllm-batch": "restored already",
        "nightly-eval": "restored already"}
    assert not [r for r in patches(fake) if r.time > applied_at]


def test_a_restore_refused_half_way_says_what_is_back_and_a_rerun_carries_on(cluster, fake, tmp_path):
    run(cluster, tmp_path, "find-flags", "-n", NS, "--fix", "--apply", "--yes", "--backup-dir", "fixed")
    refuse = {"on": True}
    fake.admission(lambda op, new, old: "the operator's rule" if refuse["on"] and op == "UPDATE"
                   and (new or {}).get("kind") == "Deployment" else None)
    first = run(cluster, tmp_path, "escape", "restore", "fixed", "--apply", "-o", "json")
    assert first.returncode == 3 and first.stdout == ""
    error = first.stderr.splitlines()[-1]
    assert error.startswith(f"error: cannot restore Deployment {NS}/vllm-batch: ") and "the operator's rule" in error
    assert error.endswith(". Restored so far: ModelDeployment team-c/qwen-same; ModelDeployment "
                          "team-c/sglang-underscore; run the same command again to carry on")
    refuse["on"] = False
    again = run(cluster, tmp_path, "escape", "restore", "fixed", "--apply", "-o", "json")
    assert again.returncode == 0, again.stderr
    states = {i["name"]: i["state"] for i in json.loads(again.stdout)["items"]}
    assert states["vllm-batch"] == "restored" and states["nightly-eval"] == "restored"
    assert {states[n] for n in ("qwen-same", "sglang-underscore")} == {"restored already"}


# --- Owner chains and manual steps ----------------------------------------------------------------

def _pod(name: str, owner: tuple = (), args: list = ("--kv-cache-dtype", "bfloat16"), **container) -> dict:
    meta = {"name": name, "namespace": "team-d", "labels": dict(INJECT), "annotations": dict(NOTES)}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": owner[0], "kind": owner[1], "name": owner[2], "uid": name,
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.29.0", "args": list(args),
                                     **container}]}}


def _workload(api: str, kind: str, name: str, template_args: list, owner: tuple = (), opted: bool = False) -> dict:
    template = {"metadata": {"labels": dict(INJECT) if opted else {"app": name}, "annotations": dict(NOTES)},
                "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.29.0", "args": template_args}]}}
    spec = {"jobTemplate": {"spec": {"template": template}}, "schedule": "0 * * * *"} if kind == "CronJob" \
        else {"template": template, "selector": {"matchLabels": {"app": name}}}
    meta = {"name": name, "namespace": "team-d"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": owner[0], "kind": owner[1], "name": owner[2], "uid": name,
                                    "controller": True}]
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": spec}


FLAG = ["--kv-cache-dtype", "bfloat16"]
TEAM_D = [
    {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
     "metadata": {"name": "chat-d", "namespace": "team-d"},
     "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": "d", "blockSize": 64, "dtype": "bfloat16"}}},
    _workload("apps/v1", "StatefulSet", "sts", FLAG), _pod("sts-0", ("apps/v1", "StatefulSet", "sts")),
    _workload("apps/v1", "DaemonSet", "ds", ["--port", "8000"] + FLAG), _pod("ds-x", ("apps/v1", "DaemonSet", "ds")),
    _workload("apps/v1", "ReplicaSet", "bare-rs", FLAG), _pod("bare-rs-x", ("apps/v1", "ReplicaSet", "bare-rs")),
    _workload("batch/v1", "CronJob", "cron", ["--kv-cache-dtype=bfloat16"]),
    _workload("batch/v1", "Job", "cron-1", ["--kv-cache-dtype=bfloat16"], owner=("batch/v1", "CronJob", "cron")),
    _pod("cron-1-x", ("batch/v1", "Job", "cron-1"), args=["--kv-cache-dtype=bfloat16"]),
    _workload("batch/v1", "Job", "lone-job", FLAG), _pod("lone-job-x", ("batch/v1", "Job", "lone-job")),
    _workload("batch/v1", "Job", "opted-job", FLAG, opted=True),
    _pod("orphan"),
    _pod("shell", args=[], command=["sh", "-c", "exec vllm serve m --kv-cache-dtype bfloat16"]),
    _pod("stale-0", ("apps/v1", "StatefulSet", "gone")),
]


def test_each_owner_chain_and_each_manual_step(fake, kube_env, tmp_path):
    seed(fake, [d for d in documents(EXAMPLES / "team-b.yaml") if d["kind"] == "Setting"] + TEAM_D)
    fake.clear_log()
    result = run(kube_env, tmp_path, "find-flags", "-n", "team-d", "--fix", "--apply", "--yes", "-o", "json")
    found = items(result)
    assert result.returncode == 1, result.stderr  # manual steps remain
    patched = {k for k, i in found.items() if i["state"] == "patched"}
    assert patched == {("StatefulSet", "sts"), ("DaemonSet", "ds"), ("ReplicaSet", "bare-rs"), ("CronJob", "cron")}
    assert found[("CronJob", "cron")]["fixes"] == ["Pod team-d/cron-1-x"]  # Pod -> Job -> CronJob
    manual = {k: i["detail"] for k, i in found.items() if i["state"] == "manual"}
    assert set(manual) == {("Pod", "lone-job-x"), ("Job", "opted-job"), ("Pod", "orphan"), ("Pod", "shell"),
                           ("Pod", "stale-0")}
    assert "Pod template cannot be changed" in manual[("Pod", "lone-job-x")]
    assert "Pod template cannot be changed" in manual[("Job", "opted-job")]
    assert "no owner" in manual[("Pod", "orphan")] and "no owner" in manual[("Pod", "shell")]
    assert "StatefulSet gone was not found" in manual[("Pod", "stale-0")]
    assert fake.get("DaemonSet", "team-d", "ds")["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "--port", "8000"]
    assert fake.get("ReplicaSet", "team-d", "bare-rs")["spec"]["template"]["spec"]["containers"][0]["args"] == []
    assert fake.get("Job", "team-d", "lone-job")["spec"]["template"]["spec"]["containers"][0]["args"] == FLAG
    assert {r.path.split("/")[-2] for r in patches(fake)} == {"statefulsets", "daemonsets", "replicasets", "cronjobs"}


def test_a_flag_in_a_shell_string_is_a_manual_step_even_with_an_owner(fake, kube_env, tmp_path):
    sts = _workload("apps/v1", "StatefulSet", "sh", [], opted=True)
    sts["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", "vllm serve m --kv-cache-dtype=bfloat16"]
    seed(fake, [d for d in documents(EXAMPLES / "team-b.yaml") if d["kind"] == "Setting"] + TEAM_D[:1] + [sts])
    found = items(run(kube_env, tmp_path, "find-flags", "-n", "team-d", "--fix", "-o", "json"))
    assert found[("StatefulSet", "sh")]["state"] == "manual"
    assert "shell command string" in found[("StatefulSet", "sh")]["detail"]


# --- Usage ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (("find-flags", "--apply"), "--apply goes with --fix"),
    (("find-flags", "-o", "patch"), "-o patch"),
    (("check", "-o", "patch"), "-o patch prints the JSON patches"),
    (("find-flags", "--fix", "--apply", "-f", str(EXAMPLES)), "writes to a live cluster only"),
    (("find-flags", "--fix", "--dry-run=server", "-f", str(EXAMPLES)), "writes to a live cluster only"),
])
def test_usage_errors(kube_env, tmp_path, args, message):
    result = run(kube_env, tmp_path, *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_offline_plan_prints_patches_without_a_resource_version_test(kube_env, tmp_path):
    result = run(kube_env, tmp_path, "find-flags", "--fix", "-f", str(EXAMPLES), "-o", "patch")
    listed = json.loads(result.stdout)
    assert {e["name"] for e in listed} == {"qwen-same", "sglang-underscore", "vllm-batch", "nightly-eval"}
    assert all(op["op"] == "remove" for e in listed for op in e["patch"])

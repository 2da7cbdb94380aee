"""``kubectl kvdtype escape rebind`` through real kubectl against the fake API server."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Optional

import pytest
import yaml

from _support import (
    EXAMPLES,
    SETTING,
    SYSTEM,
    WRITES,
    assert_one_clean_line,
    documents,
    ignores,
    in_process,
    seed,
    signal_state,
    with_ctrl_c,
)
from conftest import kubectl_path
from fakekube import FakeKube

REBIND = ("legacy", "-n", "team-a", "--dtype", "bfloat16")
JOURNAL_ANNOTATION = "kvdtype.gpustack.ai/journal"
LEASE = "kvdtype.gpustack.ai/lease"

#: A second deployment on the broken Binding, carrying metadata a copy must keep or drop.
SECOND = {
    "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
    "metadata": {"name": "qwen-legacy-b", "namespace": "team-a", "labels": {"team": "a"},
                 "annotations": {"owner": "ml-platform",
                                 "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
    "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": "vLLM", "version": "0.29.0"},
             "kvCache": {"poolRef": {"name": "legacy"}, "connector": "Mooncake"},
             "roles": [{"name": "server", "kind": "Server", "replicas": 1,
                        "instanceType": "gpustack-nvidia-a10g-linux-amd64"}]},
    "status": {"kvCache": {"binding": "legacy"}, "roles": [{"name": "server", "desired": 1, "ready": 1}]},
}
INJECTED_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "legacy-worker-0", "namespace": "team-a",
                 "labels": {"kvcache.gpustack.ai/inject": "true"},
                 "annotations": {"kvcache.gpustack.ai/binding": "legacy", "kvcache.gpustack.ai/engine": "vllm"},
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "legacy-worker",
                                      "uid": "1a2b", "controller": True}]},
    "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.29.0"}]},
}


def team_a() -> list[dict]:
    """team-a, plus the cluster-wide Setting and pool (from team-b's file), plus SECOND."""
    shared = [d for d in documents(EXAMPLES / "team-b.yaml") if d["kind"] in ("Setting", "KVCachePool")]
    return documents(EXAMPLES / "team-a.yaml") + shared + [SECOND]


def team_b_bindings() -> list[dict]:
    return documents(EXAMPLES / "team-b.yaml")


@pytest.fixture
def cluster(fake, kube_env, tmp_path):
    seed(fake, team_a())
    fake.clear_log()
    return kube_env


def kvdtype(env: dict, cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``kubectl kvdtype escape rebind ARGS`` in ``cwd`` (where the backup directory goes)."""
    return subprocess.run([kubectl_path(), "kvdtype", "escape", "rebind", *args], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=timeout)


def env_for(fake: FakeKube, base: dict, path: Path) -> dict:
    return {**base, "KUBECONFIG": str(fake.write_kubeconfig(path))}


def is_lease(record) -> bool:
    """A PATCH of the Binding's lease annotation alone (taken, renewed, given back)."""
    annotations = ((record.body or {}).get("metadata") or {}).get("annotations") if record.method == "PATCH" else None
    return isinstance(record.body, dict) and set(record.body) == {"metadata"} and set(annotations or {}) == {LEASE}


def writes(fake: FakeKube) -> list[tuple[str, str, str]]:
    """(method, resource, name) of every write but SelfSubjectAccessReviews and the lease, in arrival order."""
    found = []
    for record in fake.requests:
        if record.method not in WRITES or "selfsubjectaccessreviews" in record.path or is_lease(record):
            continue
        parts = record.path.split("/")
        if record.method == "POST":
            found.append(("POST", parts[-1], (record.body or {}).get("metadata", {}).get("name")))
        else:
            found.append((record.method, parts[-2], parts[-1]))
    return found


def clean(obj: dict) -> dict:
    """Without what the server sets, and with the journal's location (a path under tmp_path) only marked."""
    server_set = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
    meta = {k: v for k, v in obj["metadata"].items() if k not in server_set}
    if JOURNAL_ANNOTATION in (meta.get("annotations") or {}):
        meta["annotations"] = {**meta["annotations"], JOURNAL_ANNOTATION: "<host>:<journal>"}
    return {**obj, "metadata": meta}


def state(fake: FakeKube) -> dict:
    """What a rebind changes, without what the server sets (uid, resourceVersion...)."""
    setting = fake.get("settings", SYSTEM, SETTING)
    return {
        "bindings": {b["metadata"]["name"]: clean(b) for b in fake.objects("kvcachepoolbindings", "team-a")},
        "deployments": {d["metadata"]["name"]: clean(d) for d in fake.objects("modeldeployments", "team-a")},
        "setting": (setting["spec"]["value"], setting["status"]["value"]),
    }


def backup_dirs(where: Path) -> list[Path]:
    return sorted(where.glob("kvdtype-backup-team-a-legacy-*"))


def uninterrupted(base_env: dict, tmp_path: Path, *args: str, extra: Optional[list[dict]] = None) -> dict:
    """The end state of the same rebind, run once without faults on a fresh fake cluster."""
    with FakeKube() as other:
        seed(other, team_a() + (extra or []))
        where = tmp_path / "reference"
        where.mkdir()
        result = kvdtype(env_for(other, base_env, tmp_path / "kc-reference"), where, *args, "--apply")
        assert result.returncode == 0, result.stderr
        return state(other)


# --- the plan ------------------------------------------------------------------------------------

def test_the_plan_changes_nothing_and_lists_every_step(cluster, fake, tmp_path):
    before = state(fake)
    result = kvdtype(cluster, tmp_path, *REBIND, "-o", "json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["kind"] == "RebindPlan" and plan["summary"]["mode"] == "plan"
    assert [(i["action"], i["object"]) for i in plan["items"]] == [
        ("turn off", f"Setting {SYSTEM}/{SETTING}"),
        ("create", "KVCachePoolBinding team-a/legacy-bfloat16"),
        ("delete", "ModelDeployment team-a/qwen-legacy"), ("create", "ModelDeployment team-a/qwen-legacy"),
        ("delete", "ModelDeployment team-a/qwen-legacy-b"), ("create", "ModelDeployment team-a/qwen-legacy-b"),
        ("delete", "KVCachePoolBinding team-a/legacy"),
        ("turn on", f"Setting {SYSTEM}/{SETTING}"),
    ]
    assert {i["state"] for i in plan["items"]} == {"planned"}
    assert (plan["summary"]["newName"], plan["summary"]["domainName"]) == ("legacy-bfloat16", "team-a-legacy-bfloat16")
    assert plan["summary"]["settingBlockedBy"] == []
    assert writes(fake) == [] and {r.method for r in fake.requests} == {"GET"}
    assert backup_dirs(tmp_path) == [] and state(fake) == before
    table = kvdtype(cluster, tmp_path, *REBIND)
    assert "Plan only, nothing was changed: 8 step(s)" in table.stdout
    assert "Run again with --apply" in table.stdout and "./kvdtype-backup-team-a-legacy-<UTC time>/" in table.stdout


def test_yaml_prints_the_new_objects_as_manifests_for_gitops(cluster, tmp_path):
    result = kvdtype(cluster, tmp_path, *REBIND, "--new-name", "legacy-v2", "--domain-name", "team-a-legacy-v2",
                     "-o", "yaml")
    assert result.returncode == 0, result.stderr
    manifests = list(yaml.safe_load_all(result.stdout))
    assert [(m["kind"], m["metadata"]["name"]) for m in manifests] == [
        ("KVCachePoolBinding", "legacy-v2"), ("ModelDeployment", "qwen-legacy"), ("ModelDeployment", "qwen-legacy-b")]
    binding = manifests[0]
    assert binding["spec"] == {"poolRef": {"name": "shared-dram"}, "quotaCeiling": "200Gi",
                               "domain": {"name": "team-a-legacy-v2", "blockSize": 64, "dtype": "bfloat16"}}
    for manifest in manifests:
        assert "status" not in manifest
        assert not {"uid", "resourceVersion", "creationTimestamp", "generation"} & set(manifest["metadata"])
    second = manifests[2]
    assert second["spec"]["kvCache"] == {"poolRef": {"name": "legacy-v2"}, "connector": "Mooncake"}
    assert second["metadata"]["labels"] == {"team": "a"}
    assert second["metadata"]["annotations"] == {"owner": "ml-platform",
                                                 "kvdtype.gpustack.ai/rebound-from": "team-a/legacy"}


# --- a full rebind ----------------------------------------------------------------------------------

def test_replace_end_to_end_with_backups_first_and_equal_to_the_originals(cluster, fake, tmp_path):
    originals = {
        "kvcachepoolbinding-team-a-legacy.yaml": fake.get("kvcachepoolbindings", "team-a", "legacy"),
        "modeldeployment-team-a-qwen-legacy.yaml": fake.get("modeldeployments", "team-a", "qwen-legacy"),
        "modeldeployment-team-a-qwen-legacy-b.yaml": fake.get("modeldeployments", "team-a", "qwen-legacy-b"),
        f"setting-{SYSTEM}-{SETTING}.yaml": fake.get("settings", SYSTEM, SETTING),
    }
    seen: list[tuple[str, set]] = []
    fake.admission(lambda op, new, old: seen.append(
        (op, {p.name for p in tmp_path.glob("kvdtype-backup-*/*")})) and None)
    result = kvdtype(cluster, tmp_path, *REBIND, "--apply", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert writes(fake) == [
        ("PATCH", "settings", SETTING),
        ("POST", "kvcachepoolbindings", "legacy-bfloat16"),
        ("DELETE", "modeldeployments", "qwen-legacy"), ("POST", "modeldeployments", "qwen-legacy"),
        ("DELETE", "modeldeployments", "qwen-legacy-b"), ("POST", "modeldeployments", "qwen-legacy-b"),
        ("DELETE", "kvcachepoolbindings", "legacy"),
        ("PATCH", "settings", SETTING),
    ]
    # Every write, the first included (the lease on the old Binding, then 8 steps), found the backups on disk.
    assert len(seen) == 9 and all(files >= set(originals) | {"journal.json"} for _, files in seen)
    (directory,) = backup_dirs(tmp_path)
    for name, original in originals.items():
        assert yaml.safe_load((directory / name).read_text()) == original
    journal = json.loads((directory / "journal.json").read_text())
    assert len(journal["done"]) == len(journal["steps"]) == 8
    assert f"Saved 4 object(s) and the journal to {directory}" in result.stderr
    end = state(fake)
    assert set(end["bindings"]) == {"chat", "scratch", "legacy-bfloat16"}
    assert end["bindings"]["legacy-bfloat16"]["spec"]["domain"] == {
        "name": "team-a-legacy-bfloat16", "blockSize": 64, "dtype": "bfloat16"}
    for name in ("qwen-legacy", "qwen-legacy-b"):
        moved = end["deployments"][name]
        assert moved["spec"]["kvCache"]["poolRef"]["name"] == "legacy-bfloat16"
        assert "status" not in moved
        assert fake.get("modeldeployments", "team-a", name)["metadata"]["uid"] != originals[
            f"modeldeployment-team-a-{name}.yaml"]["metadata"]["uid"]  # a new object, not an edit
    assert end["setting"] == ("true", "true")  # nothing else in team-a breaks an engine
    document = json.loads(result.stdout)
    assert document["summary"]["mode"] == "applied" and document["summary"]["backupDir"] == str(directory)
    assert [i["state"] for i in document["items"]][:3] == ['set to "false"', "created", "deleted"]


def test_side_by_side_creates_before_it_deletes_and_warns_about_the_names(cluster, fake, tmp_path):
    result = kvdtype(cluster, tmp_path, *REBIND, "--strategy", "side-by-side", "--apply", "-o", "json")
    assert result.returncode == 0, result.stderr
    order = writes(fake)
    md_writes = [(m, n) for m, r, n in order if r == "modeldeployments"]
    assert md_writes == [("POST", "qwen-legacy-bfloat16"), ("POST", "qwen-legacy-b-bfloat16"),
                         ("DELETE", "qwen-legacy"), ("DELETE", "qwen-legacy-b")]
    assert order.index(("POST", "kvcachepoolbindings", "legacy-bfloat16")) < order.index(
        ("POST", "modeldeployments", "qwen-legacy-bfloat16"))
    assert set(state(fake)["deployments"]) == {"qwen-chat", "qwen-chat-sglang", "qwen-batch",
                                               "qwen-legacy-bfloat16", "qwen-legacy-b-bfloat16"}
    (warning,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "name-change"]
    assert warning["renamed"] == {"qwen-legacy": "qwen-legacy-bfloat16", "qwen-legacy-b": "qwen-legacy-b-bfloat16"}
    assert "app.kubernetes.io/instance" in warning["message"]


def test_keep_old_binding(cluster, fake, tmp_path):
    result = kvdtype(cluster, tmp_path, *REBIND, "--keep-old-binding", "--apply")
    assert result.returncode == 0, result.stderr
    assert ("DELETE", "kvcachepoolbindings", "legacy") not in writes(fake)
    assert {"legacy", "legacy-bfloat16"} <= set(state(fake)["bindings"])


def test_dry_run_server_sends_every_write_with_dry_run_all(cluster, fake, tmp_path):
    before = state(fake)
    result = kvdtype(cluster, tmp_path, *REBIND, "--dry-run=server", "-o", "json")
    assert result.returncode == 0, result.stderr
    sent = [r for r in fake.requests if r.method in WRITES and "selfsubjectaccessreviews" not in r.path]
    assert len(sent) == 8 and all(r.query.get("dryRun") == "All" for r in sent)
    # A DELETE's options come from its body when it has one (its query is then ignored): there too.
    deletes = [r for r in sent if r.method == "DELETE"]
    assert deletes and all(r.body["dryRun"] == ["All"] and r.body["preconditions"] for r in deletes)
    assert state(fake) == before and backup_dirs(tmp_path) == []
    document = json.loads(result.stdout)
    assert document["summary"]["mode"] == "dry-run-server"
    assert "every write was sent with dryRun=All" in kvdtype(cluster, tmp_path, *REBIND, "--dry-run=server").stdout


# --- interrupted, then resumed ----------------------------------------------------------------------

@pytest.mark.parametrize("strategy, method, path, step", [
    ("replace", "POST", r"/modeldeployments$", 4),  # after deleting qwen-legacy, before recreating it
    ("side-by-side", "DELETE", r"/kvcachepoolbindings/legacy$", 7),
])
def test_a_fault_half_way_then_the_same_command_resumes_to_the_same_end(cluster, fake, kube_env, tmp_path,
                                                                        strategy, method, path, step):
    args = (*REBIND, "--strategy", strategy)
    fake.fail(500, method=method, path=path, times=1)
    first = kvdtype(cluster, tmp_path, *args, "--apply")
    assert first.returncode == 3
    error = first.stderr.splitlines()[-1]
    assert error.startswith(f"error: step {step} of 8 (")
    assert "failed: " in error and "500" in error and "Done so far: turn off Setting" in error
    (directory,) = backup_dirs(tmp_path)
    assert f"are in {directory}/: run the same command again (with --apply) to resume from step {step}" in error
    journal = json.loads((directory / "journal.json").read_text())
    assert len(journal["done"]) == step - 1
    half = kvdtype(cluster, tmp_path, *args, "-o", "json")  # without --apply: shows where it stands
    assert json.loads(half.stdout)["summary"]["mode"] == "half-done"
    before_resume = len(fake.requests)
    second = kvdtype(cluster, tmp_path, *args, "--apply")
    assert second.returncode == 0, second.stderr
    assert f"Resuming the rebind journaled in {directory}/: {step - 1} of 8 step(s) already done" in second.stderr
    resumed = writes(fake)[-(9 - step):]
    assert len([r for r in fake.requests[before_resume:] if r.method in WRITES and not is_lease(r)
                and "selfsubjectaccessreviews" not in r.path]) == 9 - step  # nothing done twice
    assert resumed[0][0] == method
    assert backup_dirs(tmp_path) == [directory]
    assert state(fake) == uninterrupted(kube_env, tmp_path, *args)


def test_a_403_from_admission_half_way_is_journaled_and_resumable(cluster, fake, kube_env, tmp_path):
    """A webhook refusal is not visible to SelfSubjectAccessReview: it stops the run, which resumes."""
    refuse = {"on": True}
    fake.admission(lambda op, new, old: "quota exceeded" if refuse["on"] and op == "CREATE"
                   and (new or {}).get("kind") == "ModelDeployment" else None)
    first = kvdtype(cluster, tmp_path, *REBIND, "--apply")
    assert first.returncode == 3
    assert ("step 4 of 8 (create ModelDeployment team-a/qwen-legacy) failed: create modeldeployments.worker."
            'gpustack.ai in namespace "team-a" refused by the cluster\'s admission (403 Forbidden): admission webhook '
            '"validate.gpustack.ai" denied the request: quota exceeded. Done so far:') in first.stderr
    refuse["on"] = False
    assert kvdtype(cluster, tmp_path, *REBIND, "--apply").returncode == 0
    assert state(fake) == uninterrupted(kube_env, tmp_path, *REBIND)


def test_ctrl_c_in_flight_then_resume(cluster, fake, kube_env, tmp_path):
    """Ctrl-C while a create is in flight: the server still creates it; the resumed run sees it is done.

    The create is held unanswered until the run has ended (not delayed for a while): however
    slowly this machine schedules the test, the signal lands mid-request."""
    held = fake.hold("POST", r"/modeldeployments$")
    process = subprocess.Popen(with_ctrl_c([kubectl_path(), "kvdtype", "escape", "rebind", *REBIND, "--apply"]),
                               env=cluster, cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    held.wait_arrived()
    assert not ignores(process.pid, signal.SIGINT), signal_state(process.pid)
    process.send_signal(signal.SIGINT)  # env and kubectl exec: this pid is the plugin
    try:
        _, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        state_then = signal_state(process.pid)
        held.release()
        process.kill()
        pytest.fail(f"Ctrl-C went unanswered; the plugin's signals: {state_then}")
    assert process.returncode == 130, stderr
    assert "step 4 of 8 (create ModelDeployment team-a/qwen-legacy) failed: interrupted" in stderr
    assert fake.get("modeldeployments", "team-a", "qwen-legacy") is None  # still held: not yet created
    held.release()  # the server finishes the request its client left
    deadline = time.monotonic() + 10
    while fake.get("modeldeployments", "team-a", "qwen-legacy") is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    second = kvdtype(cluster, tmp_path, *REBIND, "--apply", "-o", "json")
    assert second.returncode == 0, second.stderr
    states = {i["object"]: i["state"] for i in json.loads(second.stdout)["items"] if i["step"] == 4}
    assert states == {"ModelDeployment team-a/qwen-legacy": "already created"}
    assert state(fake) == uninterrupted(kube_env, tmp_path, *REBIND)


def test_resuming_with_other_options_is_refused(cluster, fake, tmp_path):
    fake.fail(500, method="POST", path=r"/modeldeployments$", times=1)
    assert kvdtype(cluster, tmp_path, *REBIND, "--apply").returncode == 3
    other = kvdtype(cluster, tmp_path, "legacy", "-n", "team-a", "--dtype", "fp8_e4m3", "--apply")
    assert other.returncode == 2
    assert "was started with dtype 'bfloat16', not 'fp8_e4m3'" in other.stderr


def test_an_explicit_backup_dir_is_used_and_found_again(cluster, fake, tmp_path):
    chosen = tmp_path / "backups" / "rebind-legacy"
    fake.fail(500, method="DELETE", path=r"/kvcachepoolbindings/legacy$", times=1)
    assert kvdtype(cluster, tmp_path, *REBIND, "--backup-dir", str(chosen), "--apply").returncode == 3
    assert (chosen / "journal.json").is_file() and backup_dirs(tmp_path) == []
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = kvdtype(cluster, elsewhere, *REBIND, "--backup-dir", str(chosen), "--apply")
    assert result.returncode == 0 and "Resuming" in result.stderr
    assert "legacy" not in state(fake)["bindings"]


# --- step 5 and the manual steps -------------------------------------------------------------------

def test_setting_stays_off_while_another_binding_would_break_an_engine(cluster, fake, tmp_path):
    seed(fake, team_b_bindings())
    plan = json.loads(kvdtype(cluster, tmp_path, *REBIND, "-o", "json").stdout)
    # turbo too: vLLM 0.29.0's recorded parser refuses turboquant_4bit (issue 27)
    assert set(plan["summary"]["settingBlockedBy"]) == {"team-b/mixed", "team-b/half", "team-b/turbo"}
    (stays_off,) = [f for f in plan["findings"] if f["code"] == "setting-stays-off"]
    assert set(stays_off["blockedBy"]) == {"team-b/mixed", "team-b/half", "team-b/turbo"}
    assert plan["items"][-1]["detail"].startswith("leave it off: ")
    result = kvdtype(cluster, tmp_path, *REBIND, "--apply")
    assert result.returncode == 0, result.stderr
    assert state(fake)["setting"][0] == "false"
    assert [w for w in writes(fake) if w[1] == "settings"] == [("PATCH", "settings", SETTING)]  # only turned off
    assert "The Setting was left off: team-b/half, team-b/mixed, team-b/turbo would still break an engine." \
        in result.stdout


def test_injected_pods_become_manual_steps_and_keep_the_old_binding(cluster, fake, tmp_path):
    seed(fake, [INJECTED_POD])
    plan = json.loads(kvdtype(cluster, tmp_path, *REBIND, "-o", "json").stdout)
    (manual,) = [f for f in plan["findings"] if f["code"] == "manual-step"]
    assert manual["owner"] == "StatefulSet legacy-worker" and manual["pods"] == ["legacy-worker-0"]
    assert "kvcache.gpustack.ai/binding: legacy to legacy-bfloat16" in manual["message"]
    assert not any(i["object"] == "KVCachePoolBinding team-a/legacy" for i in plan["items"])
    assert kvdtype(cluster, tmp_path, *REBIND, "--apply").returncode == 0
    end = state(fake)
    assert "legacy" in end["bindings"]  # still used by the injected Pod
    assert end["setting"][0] == "false"  # and its bf16 still breaks vLLM: check's judgement says so
    assert fake.get("pods", "team-a", "legacy-worker-0")["metadata"]["annotations"][
        "kvcache.gpustack.ai/binding"] == "legacy"  # never touched


def test_without_the_setting_the_plan_does_not_switch_it(fake, kube_env, tmp_path):
    seed(fake, [d for d in team_a() if d["kind"] != "Setting"])
    result = kvdtype(kube_env, tmp_path, *REBIND, "-o", "json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert not any(i["kind"] == "Setting" for i in plan["items"])
    assert [f["code"] for f in plan["findings"]] == ["setting-missing"]


# --- refusals: exit 3, one sentence, nothing written, no backup directory ----------------------------

@pytest.mark.parametrize("args, message", [
    (("legacy", "--dtype", "auto"), "--dtype auto is refused on a new Binding"),
    (("chat", "--dtype", "bf16"), "refusing the new dtype: vLLM 0.29.0 does not accept bf16, and md/qwen-chat"),
    (("gone", "--dtype", "bfloat16"), "the KVCachePoolBinding team-a/gone does not exist"),
    (("legacy", "--dtype", "bf16"), "the Binding already has dtype bf16"),
    (("legacy", "--dtype", "bfloat16", "--domain-name", "qwen-72b-v2"),
     "the domain name qwen-72b-v2 is already claimed on the pool shared-dram"),
    (("legacy", "--dtype", "bfloat16", "--new-name", "chat"), "a KVCachePoolBinding team-a/chat already exists"),
    (("legacy", "--dtype", "bfloat16", "--strategy", "side-by-side", "--suffix", "chat"),
     "a ModelDeployment team-a/qwen-chat already exists"),
])
def test_refusals(cluster, fake, tmp_path, monkeypatch, args, message):
    if args[-1] == "chat" and "--suffix" in args:
        seed(fake, [{**SECOND, "metadata": {"name": "qwen-legacy-chat", "namespace": "team-a"}}])
        message = "a ModelDeployment team-a/qwen-legacy-chat already exists"
    before = state(fake)
    monkeypatch.chdir(tmp_path)  # where a backup directory would go (in-process: fast)
    code, out, err = in_process(["escape", "rebind", *args, "-n", "team-a", "--apply"], cluster)
    assert code == 3, err
    assert_one_clean_line(err)
    assert message in err and err.rstrip().endswith("nothing was changed") and out == ""
    assert writes(fake) == [] and state(fake) == before and backup_dirs(tmp_path) == []


def test_a_derived_domain_name_already_claimed_is_refused(cluster, fake, tmp_path):
    seed(fake, [{"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
                 "metadata": {"name": "taken", "namespace": "team-b"},
                 "spec": {"poolRef": {"name": "shared-dram"},
                          "domain": {"name": "team-a-legacy-bfloat16", "blockSize": 64, "dtype": "bfloat16"}}}])
    result = kvdtype(cluster, tmp_path, *REBIND, "--apply")
    assert result.returncode == 3
    assert "the domain name team-a-legacy-bfloat16 is already claimed" in result.stderr and writes(fake) == []


def test_permissions_are_checked_up_front(cluster, fake, tmp_path):
    fake.deny("delete", "modeldeployments", "team-a")
    before = state(fake)
    result = kvdtype(cluster, tmp_path, *REBIND, "--apply")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "you may not delete modeldeployments.worker.gpustack.ai in namespace team-a (SelfSubjectAccessReview)" \
        in result.stderr
    reviews = [r for r in fake.requests if "selfsubjectaccessreviews" in r.path]
    assert {r.body["spec"]["resourceAttributes"]["verb"] for r in reviews} == {"patch", "create", "delete"}
    assert writes(fake) == [] and state(fake) == before and backup_dirs(tmp_path) == []


def test_a_verb_granted_on_the_setting_alone_is_asked_for_by_its_name(cluster, fake, tmp_path):
    """kvdtype-writer grants patch on the one Setting (resourceNames): a review naming no object is
    refused, one naming the Setting allowed, so the rebind asks again naming it, and goes on."""
    fake.deny("patch", "settings", but=[SETTING])
    result = kvdtype(cluster, tmp_path, *REBIND, "--apply")
    assert result.returncode == 0, result.stderr
    reviews = [r.body["spec"]["resourceAttributes"] for r in fake.requests if "selfsubjectaccessreviews" in r.path]
    asked = [(a["verb"], a["resource"], a.get("name")) for a in reviews if a["resource"] == "settings"]
    assert asked == [("patch", "settings", None), ("patch", "settings", SETTING)]
    assert fake.get("Setting", SYSTEM, SETTING)["spec"]["value"] == "true"  # turned off, then on again


def test_a_verb_refused_on_one_named_object_names_it(cluster, fake, tmp_path):
    fake.deny("delete", "modeldeployments", "team-a", but=["qwen-legacy"])
    before = state(fake)
    result = kvdtype(cluster, tmp_path, *REBIND, "--apply")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert ("you may not delete modeldeployments.worker.gpustack.ai qwen-legacy-b in namespace team-a "
            "(SelfSubjectAccessReview)") in result.stderr
    assert writes(fake) == [] and state(fake) == before and backup_dirs(tmp_path) == []


@pytest.mark.parametrize("args, message", [
    (("-f", str(EXAMPLES / "team-a.yaml")), "escape rebind changes a live cluster"),
    (("-A",), "use -n, not -A"),
    (("--new-name", "Bad_Name"), "--new-name 'Bad_Name' is not a valid DNS label"),
    (("--strategy", "swap"), "invalid choice: 'swap'"),
])
def test_usage_errors(cluster, fake, args, message):
    code, _, err = in_process(["escape", "rebind", "legacy", "--dtype", "bfloat16", *args], cluster)
    assert code == 2, err
    assert message in err
    assert writes(fake) == []


def test_dtype_is_required(cluster):
    code, _, err = in_process(["escape", "rebind", "legacy", "-n", "team-a"], cluster)
    assert code == 2 and "--dtype" in err


def test_the_context_namespace_is_used_without_n(fake, kube_env, tmp_path):
    seed(fake, team_a())
    env = {**kube_env, "KUBECONFIG": str(fake.write_kubeconfig(tmp_path / "kc-team-a", namespace="team-a"))}
    result = kvdtype(env, tmp_path, "legacy", "--dtype", "bfloat16", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["namespace"] == "team-a"


def test_a_rerun_after_a_finished_rebind_points_at_its_journal(cluster, fake, tmp_path):
    assert kvdtype(cluster, tmp_path, *REBIND, "--apply").returncode == 0
    (directory,) = backup_dirs(tmp_path)
    again = kvdtype(cluster, tmp_path, *REBIND, "--apply")
    assert again.returncode == 3
    assert again.stderr.strip() == (f"error: the KVCachePoolBinding team-a/legacy does not exist (a finished rebind "
                                    f"of it is journaled in {directory}/); nothing was changed")

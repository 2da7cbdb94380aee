"""A planted journal steers nothing (issue 40). A rebind journal is found only where the user's own
command (``--backup-dir``, ``escape restore DIR``) or the default directory puts it, never from a
cluster's annotation alone, and before any step runs it is checked against the Binding it claims
(namespace, name, uid, the cluster it was written for) and its steps against the plan this run
would make: a step outside it is refused in one sentence, exit 3, nothing written. Through the real
kubectl against the fake API server."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from _support import SETTING, WRITES, seed
from conftest import kubectl_path
from fakekube import FakeKube
from test_escape_rebind import JOURNAL_ANNOTATION, REBIND, backup_dirs, env_for, kvdtype, team_a
from test_escape_rebind_safety import fail_recreating

pytestmark = pytest.mark.e2e

REBOUND = "kvdtype.gpustack.ai/rebound-from"
#: A ModelDeployment in another namespace, which no rebind of team-a/legacy may touch.
VICTIM = {
    "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
    "metadata": {"name": "victim", "namespace": "team-b"},
    "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": "vLLM", "version": "0.29.0"},
             "kvCache": {"poolRef": {"name": "chat-b"}},
             "roles": [{"name": "server", "kind": "Server", "replicas": 1}]},
}
#: A deployment in team-a that does not use the Binding being rebound.
BYSTANDER = {**VICTIM, "metadata": {"name": "bystander", "namespace": "team-a"},
             "spec": {**VICTIM["spec"], "kvCache": {"poolRef": {"name": "chat"}}}}


def _writes(fake: FakeKube) -> list:
    return [(r.method, r.path) for r in fake.requests
            if r.method in WRITES and "selfsubjectaccessreviews" not in r.path]


def _step(action: str, kind: str, namespace: str, name: str, body=None, origin: str = "") -> dict:
    suffix = {"ModelDeployment": "md", "KVCachePoolBinding": "binding"}.get(kind, "setting")
    return {"id": f"{action}-{suffix}:{name}", "action": action, "kind": kind, "namespace": namespace, "name": name,
            "detail": "", "body": body, "expect": None, "origin": origin}


def _new_binding_body() -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
            "metadata": {"name": "legacy-bfloat16", "namespace": "team-a", "annotations": {REBOUND: "team-a/legacy"}},
            "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": "team-a-legacy-bfloat16",
                                                                      "dtype": "bfloat16"}}}


def plant(directory: Path, steps: list[dict], done: dict | None = None, **header) -> Path:
    """A journal as an attacker writes one: of team-a/legacy, claiming the usual options."""
    directory.mkdir(parents=True, exist_ok=True)
    data = {"format": 1, "namespace": "team-a", "binding": "legacy",
            "options": {"dtype": "bfloat16", "newName": "legacy-bfloat16", "domainName": "team-a-legacy-bfloat16",
                        "strategy": "replace", "suffix": "bfloat16", "keepOldBinding": False},
            "blockers": [], "manifests": [], "findings": [], "steps": steps, "done": done or {}, "sent": {},
            **header}
    (directory / "journal.json").write_text(json.dumps(data))
    return directory


def _malicious_steps() -> list[dict]:
    return [_step("create", "KVCachePoolBinding", "team-a", "legacy-bfloat16", _new_binding_body(), origin="legacy"),
            _step("delete", "ModelDeployment", "team-b", "victim")]


def _rebound_binding(location: str) -> dict:
    """The new Binding a rebind under way would have made, annotated with where its journal is."""
    body = _new_binding_body()
    body["metadata"]["annotations"][JOURNAL_ANNOTATION] = location
    return body


@pytest.fixture
def cluster(fake, kube_env):
    seed(fake, team_a() + [VICTIM, BYSTANDER])
    fake.clear_log()
    return kube_env


def restore(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_path(), "kvdtype", "escape", "restore", *args], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=60)


def _one_sentence_exit_3(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 3, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


# --- found only where the user's command puts it ---------------------------------------------------

def test_a_journal_named_only_by_a_cluster_annotation_is_never_resumed(cluster, fake, tmp_path):
    planted = plant(tmp_path / "shared-tmp" / "evil", _malicious_steps(),
                    done={"create-binding:legacy-bfloat16": "created"})
    seed(fake, [_rebound_binding(f"{socket.gethostname()}:{planted}\x1b]0;owned\x07")])
    fake.clear_log()
    work = tmp_path / "work"
    work.mkdir()
    result = kvdtype(cluster, work, *REBIND, "--apply")
    error = _one_sentence_exit_3(result)
    assert _writes(fake) == [] and fake.get("modeldeployments", "team-b", "victim") is not None
    assert "is under way" in error and "nothing was changed" in error
    assert "\x1b" not in result.stderr and "\\x1b]0;owned\\x07" in error  # the hint, escaped
    # It says where the other run's journal is and the command that resumes it from there.
    assert f"--backup-dir {planted}" in error.replace("'", "") and "escape restore" in error
    assert not list(work.iterdir())  # no backup directory started either


def test_following_the_hint_to_a_planted_journal_is_refused_before_any_step(cluster, fake, tmp_path):
    planted = plant(tmp_path / "evil", _malicious_steps(), done={"create-binding:legacy-bfloat16": "created"})
    for args in (("--apply",), ("--apply", "--yes"), ()):
        result = kvdtype(cluster, tmp_path, *REBIND, "--backup-dir", str(planted), *args)
        error = _one_sentence_exit_3(result)
        assert "ModelDeployment team-b/victim" in error and "would not make" in error, error
        assert "nothing was changed" in error
    assert _writes(fake) == [] and fake.get("modeldeployments", "team-b", "victim") is not None


def test_a_journal_planted_in_the_current_directory_is_checked_too(cluster, fake, tmp_path):
    """A shared /tmp as the working directory: the default place is no proof either."""
    plant(tmp_path / "kvdtype-backup-team-a-legacy-20260101T000000000000Z", _malicious_steps())
    error = _one_sentence_exit_3(kvdtype(cluster, tmp_path, *REBIND, "--apply"))
    assert "ModelDeployment team-b/victim" in error and _writes(fake) == []


@pytest.mark.parametrize("step, said", [
    (_step("delete", "ModelDeployment", "team-a", "bystander"), "does not use the Binding legacy"),
    (_step("create", "ModelDeployment", "team-a", "miner", {
        "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
        "metadata": {"name": "miner", "annotations": {REBOUND: "team-a/legacy"}},
        "spec": {"kvCache": {"poolRef": {"name": "legacy-bfloat16"}}}}, origin="miner"), "moves no ModelDeployment"),
    (_step("delete", "KVCachePoolBinding", "team-a", "chat"), "KVCachePoolBinding team-a/chat"),
    (_step("setting-off", "Setting", "team-b", SETTING), f"Setting team-b/{SETTING}"),
    ({**_step("delete", "ModelDeployment", "team-a", "qwen-legacy"), "kind": "Secret"}, "not a journal"),
])
def test_every_step_outside_the_plan_is_refused(cluster, fake, tmp_path, step, said):
    planted = plant(tmp_path / "dir", [_malicious_steps()[0], step])
    error = _one_sentence_exit_3(kvdtype(cluster, tmp_path, *REBIND, "--backup-dir", str(planted), "--apply"))
    assert said in error, error
    assert _writes(fake) == []


# --- checked against the Binding it claims --------------------------------------------------------------

def half_done(env: dict, fake: FakeKube, where: Path) -> Path:
    """A real rebind stopped half-way (the first recreate of qwen-legacy refused): its backup directory."""
    fail_recreating(fake)
    assert kvdtype(env, where, *REBIND, "--apply").returncode == 3
    (directory,) = backup_dirs(where)
    return directory


def test_a_real_journal_records_its_cluster_and_resumes_only_there(cluster, fake, kube_env, tmp_path):
    directory = half_done(cluster, fake, tmp_path)
    recorded = json.loads((directory / "journal.json").read_text())
    assert recorded["cluster"]["server"] == fake.url and recorded["uid"]
    with FakeKube() as other:  # another cluster holding the same names
        seed(other, team_a())
        other_env = env_for(other, kube_env, tmp_path / "kc-other")
        error = _one_sentence_exit_3(kvdtype(other_env, tmp_path, *REBIND, "--apply"))
        assert f"written for the cluster at {fake.url}" in error and other.url in error, error
        assert [r for r in other.requests if r.method in WRITES] == []
    resumed = kvdtype(cluster, tmp_path, *REBIND, "--apply")
    assert resumed.returncode == 0, resumed.stderr


def test_a_binding_deleted_and_created_again_is_not_the_one_the_journal_claims(cluster, fake, tmp_path):
    half_done(cluster, fake, tmp_path)
    old = fake.get("kvcachepoolbindings", "team-a", "legacy")
    fake.remove("kvcachepoolbindings", "team-a", "legacy")
    old["metadata"] = {k: v for k, v in old["metadata"].items() if k not in ("uid", "resourceVersion")}
    fake.add(old)  # same name, new uid
    fake.clear_log()
    error = _one_sentence_exit_3(kvdtype(cluster, tmp_path, *REBIND, "--apply"))
    assert "uid" in error and "nothing was changed" in error
    assert _writes(fake) == []


def test_a_rerun_from_another_directory_is_told_the_command_and_resumes_with_it(cluster, fake, tmp_path):
    directory = half_done(cluster, fake, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    error = _one_sentence_exit_3(kvdtype(cluster, elsewhere, *REBIND, "--backup-dir", str(elsewhere / "new"),
                                         "--apply"))
    command = f"kubectl kvdtype escape rebind legacy -n team-a --dtype bfloat16 --backup-dir {directory} --apply"
    assert command in error, error
    assert not (elsewhere / "new").exists()
    resumed = kvdtype(cluster, elsewhere, *REBIND, "--backup-dir", str(directory), "--apply")
    assert resumed.returncode == 0, resumed.stderr
    assert f"Resuming the rebind journaled in {directory}/" in resumed.stderr


# --- escape restore reads journals too: the same checks ------------------------------------------------

def test_restore_refuses_a_backup_outside_its_journal(cluster, fake, tmp_path):
    directory = half_done(cluster, fake, tmp_path)
    fake.remove("modeldeployments", "team-b", "victim")
    (directory / "modeldeployment-team-b-victim.yaml").write_text(yaml.safe_dump(VICTIM))  # planted beside
    fake.clear_log()
    for args in (("--apply",), ()):
        error = _one_sentence_exit_3(restore(cluster, tmp_path, str(directory), *args))
        assert "ModelDeployment team-b/victim" in error and "nothing was changed" in error, error
    assert _writes(fake) == []


def test_restore_refuses_a_journal_of_another_cluster(cluster, fake, kube_env, tmp_path):
    directory = half_done(cluster, fake, tmp_path)
    with FakeKube() as other:
        seed(other, [d for d in team_a() if d["kind"] != "ModelDeployment"])
        error = _one_sentence_exit_3(restore(env_for(other, kube_env, tmp_path / "kc-other"), tmp_path,
                                             str(directory), "--apply"))
        assert f"written for the cluster at {fake.url}" in error
        assert [r for r in other.requests if r.method in WRITES] == []


def test_restore_of_a_fix_journal_patches_only_what_a_fix_patches(cluster, fake, tmp_path):
    directory = tmp_path / "fix"
    directory.mkdir()
    step = {"id": "Secret/team-a/creds", "kind": "Secret", "group": "", "version": "v1", "plural": "secrets",
            "namespace": "team-a", "name": "creds", "patch": [], "after": [], "uid": None, "backup": "x.yaml",
            "revert": [{"op": "replace", "path": "/data/password", "value": "b3duZWQ="}]}
    (directory / "journal.json").write_text(json.dumps({"format": 1, "operation": "find-flags-fix", "steps": [step],
                                                        "done": {step["id"]: "1"}, "sent": {}}))
    error = _one_sentence_exit_3(restore(cluster, tmp_path, str(directory), "--apply"))
    assert "Secret team-a/creds" in error and "nothing was changed" in error
    step.update(kind="Deployment", group="apps", plural="deployments", id="Deployment/team-a/x", name="x")
    (directory / "journal.json").write_text(json.dumps({"format": 1, "operation": "find-flags-fix", "steps": [step],
                                                        "done": {step["id"]: "1"}, "sent": {}}))
    error = _one_sentence_exit_3(restore(cluster, tmp_path, str(directory), "--apply"))
    assert "/data/password" in error
    assert _writes(fake) == []


def test_a_moved_journal_found_with_backup_dir_still_resumes(cluster, fake, tmp_path):
    """The user's own command names it: the annotation's stale location is only a hint."""
    directory = half_done(cluster, fake, tmp_path)
    moved = tmp_path / "copied"
    shutil.move(str(directory), moved)
    resumed = kvdtype(cluster, tmp_path, *REBIND, "--backup-dir", str(moved), "--apply")
    assert resumed.returncode == 0, resumed.stderr
    assert {d["metadata"]["name"] for d in fake.objects("modeldeployments", "team-a")} >= {"qwen-legacy",
                                                                                         "qwen-legacy-b"}

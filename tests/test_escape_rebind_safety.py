"""``escape rebind`` on a cluster that behaves like a real one (finalizers, a controller that
removes them late), and ``escape restore``: through real kubectl against the fake API server."""

from __future__ import annotations

import io
import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from _support import SETTING, SYSTEM, WRITES, seed
from conftest import kubectl_path
from fakekube import FakeKube
from test_escape_rebind import (
    INJECTED_POD,
    JOURNAL_ANNOTATION,
    REBIND,
    backup_dirs,
    env_for,
    kvdtype,
    state,
    team_a,
    team_b_bindings,
    writes,
)

ORIGINAL_DEPLOYMENTS = ("qwen-legacy", "qwen-legacy-b")


def operator(fake: FakeKube, after: float = 0.3) -> None:
    """The operator's finalizers: a deployment lingers ``after`` seconds once deleted; a Binding
    stays until no ModelDeployment names it any more."""
    def named(fake: FakeKube, binding: dict) -> bool:
        meta = binding["metadata"]
        return any(((d.get("spec") or {}).get("kvCache") or {}).get("poolRef", {}).get("name") == meta["name"]
                   for d in fake.objects("modeldeployments", meta["namespace"]))
    fake.finalizer("modeldeployments", after=after)
    fake.finalizer("kvcachepoolbindings", after=0.0, held_by=named)


def settled(fake: FakeKube, timeout: float = 10) -> dict:
    """``state`` once every deletion has completed (the operator's finalizers are gone)."""
    deadline = time.monotonic() + timeout
    while any(o["metadata"].get("deletionTimestamp") for kind in ("modeldeployments", "kvcachepoolbindings")
              for o in fake.objects(kind, "team-a")):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return state(fake)


def restore(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_path(), "kvdtype", "escape", "restore", *args], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=60)


@pytest.fixture
def cluster(fake, kube_env):
    seed(fake, team_a())
    operator(fake)
    fake.clear_log()
    return kube_env


# --- 1. input validation ----------------------------------------------------------------------------

@pytest.mark.parametrize("args, code, message", [
    (("--dtype", ""), 2, "--dtype '' is not a dtype spelling"),
    (("--dtype", "bf 16"), 2, "--dtype 'bf 16' is not a dtype spelling"),
    (("--dtype=-rf",), 2, "--dtype '-rf' is not a dtype spelling"),
    (("--dtype", "x" * 100), 3, "pass --new-name"),
    (("--dtype", "bfloat16", "--new-name", "a" * 64), 2, "--new-name"),
    (("--dtype", "bfloat16", "--domain-name", "Team_A"), 2, "--domain-name 'Team_A' is not a valid DNS label"),
    (("--dtype", "bfloat16", "--new-name", "ok", "--domain-name", "d" * 64), 2, "--domain-name"),
    (("--dtype", "fp8_e4m3", "--new-name", "ok", "--suffix", "s" * 64), 2, "--suffix"),
    (("--dtype", "bfloat16", "--strategy", "side-by-side", "--suffix", "s" * 55), 3, "pass a shorter --suffix"),
])
def test_bad_input_is_refused_before_anything_is_written(cluster, fake, tmp_path, args, code, message):
    before = state(fake)
    result = kvdtype(cluster, tmp_path, "legacy", "-n", "team-a", *args, "--apply")
    assert result.returncode == code, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert writes(fake) == [] and state(fake) == before and backup_dirs(tmp_path) == []


def test_an_unknown_dtype_is_refused_before_anything_is_written(cluster, fake, tmp_path):
    # chat's SGLang v0.5.18.post1 is no recorded release: the hand-kept table decides, and it does not
    # know turboquant_k8v4 (vLLM 0.29.0's recorded parser lists it, so legacy's consumers accept it).
    before = state(fake)
    result = kvdtype(cluster, tmp_path, "chat", "-n", "team-a", "--dtype", "turboquant_k8v4", "--apply")
    assert result.returncode == 3, result.stderr
    assert "pass --force-unknown-dtype" in result.stderr and "Traceback" not in result.stderr
    assert writes(fake) == [] and state(fake) == before and backup_dirs(tmp_path) == []


def test_an_unknown_dtype_is_taken_with_force_and_warned_about(cluster, fake, tmp_path):
    result = kvdtype(cluster, tmp_path, "chat", "-n", "team-a", "--dtype", "turboquant_k8v4",
                     "--force-unknown-dtype", "-o", "json")
    assert result.returncode == 0, result.stderr
    # (and setting-stays-off: team-a's legacy bf16 would still break vLLM once the Setting is back on)
    assert [f["code"] for f in json.loads(result.stdout)["findings"]] == ["dtype-unknown", "setting-stays-off"]
    assert "Warning: dtype-unknown: " in result.stderr  # -o json still says it on stderr


# --- 2. the Setting is flipped only when a deployment is recreated ----------------------------------

def test_a_binding_no_deployment_uses_leaves_the_setting_alone(cluster, fake, tmp_path):
    plan = json.loads(kvdtype(cluster, tmp_path, "scratch", "-n", "team-a", "--dtype", "bfloat16", "-o", "json").stdout)
    assert [i["kind"] for i in plan["items"]] == ["KVCachePoolBinding", "KVCachePoolBinding"]
    result = kvdtype(cluster, tmp_path, "scratch", "-n", "team-a", "--dtype", "bfloat16", "--apply")
    assert result.returncode == 0, result.stderr
    assert [w for w in writes(fake) if w[1] == "settings"] == []
    assert state(fake)["setting"] == ("true", "true")


def test_step_1_says_what_the_flip_recreates_cluster_wide(cluster, fake, tmp_path):
    plan = json.loads(kvdtype(cluster, tmp_path, *REBIND, "-o", "json").stdout)
    first = plan["items"][0]
    assert first["action"] == "turn off"
    deployments = [d for d in fake.objects("modeldeployments") if (d["spec"].get("kvCache") or {}).get("poolRef")]
    assert f"it recreates {len(deployments)} pool-attached ModelDeployment(s)" in first["detail"]
    assert "cluster-wide" in first["detail"]


def test_with_the_setting_off_nothing_turns_it_on(cluster, fake, tmp_path):
    fake.update("settings", SYSTEM, SETTING, {"spec": {"value": "false"}, "status": {"value": "false"}})
    result = kvdtype(cluster, tmp_path, *REBIND, "--apply")
    assert result.returncode == 0, result.stderr
    assert [w for w in writes(fake) if w[1] == "settings"] == [] and state(fake)["setting"] == ("false", "false")


# --- 3. with finalizers, both strategies turn the Setting back on -------------------------------------

@pytest.mark.parametrize("strategy", ["replace", "side-by-side"])
def test_finalizers_do_not_keep_the_setting_off(cluster, fake, tmp_path, strategy):
    fake.finalizer("modeldeployments", name="slow.gpustack.ai/drain", after=2.0)  # still terminating at step 6
    plan = json.loads(kvdtype(cluster, tmp_path, *REBIND, "--strategy", strategy, "-o", "json").stdout)
    assert plan["summary"]["settingBlockedBy"] == []  # the promise ...
    result = kvdtype(cluster, tmp_path, *REBIND, "--strategy", strategy, "--apply", "-o", "json", timeout=120)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["items"][-1]["state"] == 'set to "true"'  # ... and the result agree
    assert not [f for f in document["findings"] if f["code"] == "setting-stays-off"]
    assert settled(fake)["setting"] == ("true", "true")


# --- 4. the cluster records a rebind under way ---------------------------------------------------------

def fail_recreating(fake: FakeKube) -> None:
    """Refuse the first create of qwen-legacy (replace: it has just been deleted)."""
    armed = {"on": True}

    def hook(op, new, old):
        if armed["on"] and op == "CREATE" and new.get("kind") == "ModelDeployment" \
                and new["metadata"]["name"] == "qwen-legacy":
            armed["on"] = False
            return "injected fault"
    fake.admission(hook)


def test_another_backup_dir_is_told_the_recorded_journal_instead_of_starting_over(cluster, fake, kube_env, tmp_path):
    fail_recreating(fake)
    first = kvdtype(cluster, tmp_path, *REBIND, "--apply")
    assert first.returncode == 3 and "escape restore" in first.stderr
    (directory,) = backup_dirs(tmp_path)
    binding = fake.get("kvcachepoolbindings", "team-a", "legacy-bfloat16")
    assert binding["metadata"]["annotations"][JOURNAL_ANNOTATION] == f"{socket.gethostname()}:{directory}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Issue 40: the annotation is said, never opened (a cluster's word steers no run to a file).
    second = kvdtype(cluster, elsewhere, *REBIND, "--backup-dir", str(elsewhere / "fresh"), "--apply")
    assert second.returncode == 3, second.stderr
    assert f"--dtype bfloat16 --backup-dir {directory} --apply" in second.stderr
    assert not (elsewhere / "fresh").exists()
    third = kvdtype(cluster, elsewhere, *REBIND, "--backup-dir", str(directory), "--apply")
    assert third.returncode == 0, third.stderr
    assert f"Resuming the rebind journaled in {directory}/" in third.stderr
    assert set(settled(fake)["deployments"]) >= set(ORIGINAL_DEPLOYMENTS)


def test_a_journal_of_an_older_version_still_resumes(cluster, fake, tmp_path):
    """Journals written before the step action was named ``setting-off`` call it ``patch``."""
    fail_recreating(fake)
    first = kvdtype(cluster, tmp_path, *REBIND, "--apply")
    assert first.returncode == 3 and "escape restore" in first.stderr
    (directory,) = backup_dirs(tmp_path)
    journal = directory / "journal.json"
    data = json.loads(journal.read_text())
    assert data["steps"][0]["action"] == "setting-off" and "setting-off" in data["done"]
    data["steps"][0]["action"] = "patch"  # as an older version wrote it
    journal.write_text(json.dumps(data))
    second = kvdtype(cluster, tmp_path, *REBIND, "--apply")
    assert second.returncode == 0, second.stderr
    assert f"Resuming the rebind journaled in {directory}/" in second.stderr
    assert set(settled(fake)["deployments"]) >= set(ORIGINAL_DEPLOYMENTS)
    shown = kvdtype(cluster, tmp_path, *REBIND, "--backup-dir", str(directory), "-o", "json")
    assert json.loads(shown.stdout)["items"][0]["action"] == "turn off"


def test_an_unreachable_journal_is_named_with_escape_restore_and_restore_puts_the_deployment_back(
        cluster, fake, tmp_path):
    fail_recreating(fake)
    assert kvdtype(cluster, tmp_path, *REBIND, "--apply").returncode == 3
    (directory,) = backup_dirs(tmp_path)
    moved = tmp_path / "copied-from-the-other-machine"
    shutil.move(str(directory), moved)  # the journal is no longer where the cluster says
    assert fake.get("modeldeployments", "team-a", "qwen-legacy") is None
    for args in ((*REBIND, "--apply"), (*REBIND, "--backup-dir", str(tmp_path / "new"), "--apply"), REBIND,
                 ("legacy", "-n", "team-a", "--dtype", "fp8_e4m3", "--new-name", "other", "--apply")):
        again = kvdtype(cluster, tmp_path, *args)
        assert again.returncode == 3, again.stderr
        assert f"{socket.gethostname()} in {directory}/" in again.stderr and "escape restore" in again.stderr
        assert "nothing was changed" in again.stderr
    before = len(writes(fake))
    planned = restore(cluster, tmp_path, str(moved), "-o", "json")
    assert planned.returncode == 0, planned.stderr and len(writes(fake)) == before
    states = {i["object"]: i["state"] for i in json.loads(planned.stdout)["items"]}
    assert states["ModelDeployment team-a/qwen-legacy"] == "planned"
    assert states["ModelDeployment team-a/qwen-legacy-b"] == "exists"
    assert states[f"Setting {SYSTEM}/{SETTING}"] == "left alone"
    applied = restore(cluster, tmp_path, str(moved), "--apply")
    assert applied.returncode == 0, applied.stderr
    assert writes(fake)[before:] == [("POST", "modeldeployments", "qwen-legacy")]
    back = fake.get("modeldeployments", "team-a", "qwen-legacy")
    saved = yaml.safe_load((moved / "modeldeployment-team-a-qwen-legacy.yaml").read_text())
    assert back["spec"] == saved["spec"] and back["metadata"]["uid"] != saved["metadata"]["uid"]
    assert "status" not in back


# --- 5. -o yaml says every warning on stderr ------------------------------------------------------------

def test_yaml_output_still_warns_on_stderr(cluster, fake, tmp_path):
    seed(fake, [INJECTED_POD] + team_b_bindings())
    result = kvdtype(cluster, tmp_path, *REBIND, "--strategy", "side-by-side", "-o", "yaml")
    assert result.returncode == 0, result.stderr
    assert all(d["kind"] in ("KVCachePoolBinding", "ModelDeployment") for d in yaml.safe_load_all(result.stdout))
    lines = result.stderr.splitlines()
    for code in ("manual-step", "name-change", "setting-stays-off"):
        assert len([line for line in lines if line.startswith(f"Warning: {code}: ")]) >= 1, result.stderr


# --- 6. a terminal gets a last look -----------------------------------------------------------------------

class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def on_terminal(args: list[str], environ: dict, answer: str, cwd: Path, monkeypatch) -> tuple[int, str, str]:
    from kubectl_kvdtype._cli.main import run
    from kubectl_kvdtype._kits.env import Environment

    monkeypatch.chdir(cwd)
    out, err = io.StringIO(), io.StringIO()
    return run(args, Environment(stdin=Terminal(answer), stdout=out, stderr=err, environ=environ)), out.getvalue(), \
        err.getvalue()


@pytest.mark.parametrize("answer, written", [("y\n", True), ("yes\n", True), ("n\n", False), ("\n", False)])
def test_apply_on_a_terminal_asks(cluster, fake, tmp_path, monkeypatch, answer, written):
    code, _, err = on_terminal(["escape", "rebind", *REBIND, "--apply"], dict(cluster), answer, tmp_path, monkeypatch)
    assert "Carry out this plan? [y/N]:" in err
    assert "delete ModelDeployment team-a/qwen-legacy" in err.split("[y/N]")[0]
    if written:
        assert code == 0 and ("DELETE", "modeldeployments", "qwen-legacy") in writes(fake)
    else:
        assert code == 3 and "not confirmed; nothing was changed" in err
        assert writes(fake) == [] and backup_dirs(tmp_path) == []


def test_yes_skips_the_last_look(cluster, fake, tmp_path, monkeypatch):
    code, _, err = on_terminal(["escape", "rebind", *REBIND, "--apply", "--yes"], dict(cluster), "", tmp_path,
                               monkeypatch)
    assert code == 0 and "[y/N]" not in err


# --- 7. restore -------------------------------------------------------------------------------------------

def test_restore_dry_run_server_and_a_binding_that_breaks_its_consumers(cluster, fake, tmp_path, monkeypatch):
    assert kvdtype(cluster, tmp_path, *REBIND, "--keep-old-binding", "--apply").returncode == 0
    (directory,) = backup_dirs(tmp_path)
    settled(fake)
    fake.update("settings", SYSTEM, SETTING, {"spec": {"value": "true"}, "status": {"value": "true"}})
    fake.remove("kvcachepoolbindings", "team-a", "legacy")  # someone deletes it; then wants it back
    for name in ORIGINAL_DEPLOYMENTS:
        fake.remove("modeldeployments", "team-a", name)
    fake.clear_log()
    dry = restore(cluster, tmp_path, str(directory), "--dry-run=server", "-o", "json")
    assert dry.returncode == 0, dry.stderr
    sent = [r for r in fake.requests if r.method in WRITES]
    assert len(sent) == 3 and all(r.query.get("dryRun") == "All" for r in sent)
    assert fake.get("kvcachepoolbindings", "team-a", "legacy") is None
    (breaks,) = [f for f in json.loads(dry.stdout)["findings"] if f["code"] == "restore-breaks"]
    assert "team-a/legacy" in breaks["message"] and "Warning: restore-breaks: " in dry.stderr
    code, _, err = on_terminal(["escape", "restore", str(directory), "--apply"], dict(cluster), "n\n", tmp_path,
                               monkeypatch)
    assert code == 3 and "Restore anyway? [y/N]:" in err and fake.get("kvcachepoolbindings", "team-a", "legacy") is None
    code, _, err = on_terminal(["escape", "restore", str(directory), "--apply"], dict(cluster), "y\n", tmp_path,
                               monkeypatch)
    assert code == 0, err
    assert fake.get("kvcachepoolbindings", "team-a", "legacy") is not None
    assert all(fake.get("modeldeployments", "team-a", n) for n in ORIGINAL_DEPLOYMENTS)
    assert [w for w in writes(fake) if w[1] == "settings"] == []  # never the Setting


# --- acceptance: a fault at every write step, every piece of advice followed --------------------------------

STEPS = {  # the write steps of each strategy, as (admission op, kind, name, Setting value)
    "replace": [("UPDATE", "Setting", SETTING, "false"), ("CREATE", "KVCachePoolBinding", "legacy-bfloat16", None),
                ("DELETE", "ModelDeployment", "qwen-legacy", None), ("CREATE", "ModelDeployment", "qwen-legacy", None),
                ("DELETE", "ModelDeployment", "qwen-legacy-b", None),
                ("CREATE", "ModelDeployment", "qwen-legacy-b", None),
                ("DELETE", "KVCachePoolBinding", "legacy", None), ("UPDATE", "Setting", SETTING, "true")],
    "side-by-side": [("UPDATE", "Setting", SETTING, "false"),
                     ("CREATE", "KVCachePoolBinding", "legacy-bfloat16", None),
                     ("CREATE", "ModelDeployment", "qwen-legacy-bfloat16", None),
                     ("CREATE", "ModelDeployment", "qwen-legacy-b-bfloat16", None),
                     ("DELETE", "ModelDeployment", "qwen-legacy", None),
                     ("DELETE", "ModelDeployment", "qwen-legacy-b", None),
                     ("DELETE", "KVCachePoolBinding", "legacy", None), ("UPDATE", "Setting", SETTING, "true")],
}
CASES = [(s, i, follow) for s in STEPS for i in range(len(STEPS[s])) for follow in ("resume", "restore")]


def fault_once(fake: FakeKube, op: str, kind: str, name: str, value) -> None:
    armed = {"on": True}

    def hook(verb, new, old):
        obj = old if verb == "DELETE" else new
        if not (armed["on"] and verb == op and obj.get("kind") == kind and obj["metadata"]["name"] == name):
            return None
        if value is not None and (obj.get("spec") or {}).get("value") != value:
            return None
        armed["on"] = False
        return "injected fault"
    fake.admission(hook)


def assert_no_deployment_lives_only_in_a_backup(fake: FakeKube, result: subprocess.CompletedProcess,
                                                 directory: Path) -> None:
    """Each original deployment exists (under its name or its side-by-side name), or the tool said
    where the journal is and how to put it back."""
    present = {d["metadata"]["name"] for d in fake.objects("modeldeployments", "team-a")}
    lost = [n for n in ORIGINAL_DEPLOYMENTS if n not in present and f"{n}-bfloat16" not in present]
    if lost:
        said = result.stderr + result.stdout
        assert str(directory) in said and "kubectl kvdtype escape restore" in said, (lost, said)


#: The end state of each uninterrupted rebind, by its arguments: the same for every fault of a strategy,
#: so each worker runs it once per strategy instead of once per case.
_UNINTERRUPTED: dict[tuple[str, ...], dict] = {}


def uninterrupted(kube_env: dict, tmp_path: Path, args: tuple[str, ...]) -> dict:
    """The settled end state of the same rebind, uninterrupted, on the same kind of cluster."""
    if args not in _UNINTERRUPTED:
        with FakeKube() as other:
            seed(other, team_a())
            operator(other, after=0.2)
            where = tmp_path / "reference"
            where.mkdir()
            reference = kvdtype(env_for(other, kube_env, tmp_path / "kc-ref"), where, *args, "--apply", timeout=120)
            assert reference.returncode == 0, reference.stderr
            _UNINTERRUPTED[args] = settled(other)
    return _UNINTERRUPTED[args]


@pytest.mark.parametrize("strategy, index, follow", CASES)
def test_a_fault_at_every_write_step_and_every_advice_followed(fake, kube_env, tmp_path, strategy, index, follow):
    seed(fake, team_a())
    operator(fake, after=0.2)
    args = (*REBIND, "--strategy", strategy)
    fault_once(fake, *STEPS[strategy][index])
    first = kvdtype(kube_env, tmp_path, *args, "--apply")
    assert first.returncode == 3, first.stderr
    assert f"error: step {index + 1} of 8 (" in first.stderr and "injected fault" in first.stderr
    (directory,) = backup_dirs(tmp_path)
    assert_no_deployment_lives_only_in_a_backup(fake, first, directory)
    advice = first.stderr.splitlines()[-1]
    assert "run the same command again (with --apply)" in advice
    assert f"kubectl kvdtype escape restore {directory}" in advice
    if follow == "resume":
        second = kvdtype(kube_env, tmp_path, *args, "--apply", timeout=120)
        assert second.returncode == 0, second.stderr
        assert_no_deployment_lives_only_in_a_backup(fake, second, directory)
        assert settled(fake) == uninterrupted(kube_env, tmp_path, args)
    else:
        restored = restore(kube_env, tmp_path, str(directory), "--apply")
        assert restored.returncode == 0, restored.stderr
        settled(fake)
        restored = restore(kube_env, tmp_path, str(directory), "--apply")  # once terminating objects are gone
        assert restored.returncode == 0, restored.stderr
        present = {d["metadata"]["name"] for d in fake.objects("modeldeployments", "team-a")}
        assert all(n in present or f"{n}-bfloat16" in present for n in ORIGINAL_DEPLOYMENTS)

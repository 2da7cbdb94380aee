"""Writes that never lose an edit, through real kubectl against the fake API server: DELETE and
PATCH preconditions against concurrent edits, SIGTERM/SIGHUP at a create, a delete-wait and a
patch (then the same command again, compared with an uninterrupted run), the fix journal's
in-flight PATCH, one rebind per Binding (the lease), and the backup directory's rules."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Optional

import pytest

from _support import EXAMPLES, SETTING, SYSTEM, WRITES, documents, seed
from conftest import kubectl_path
from fakekube import FakeKube
from test_escape_rebind import REBIND, backup_dirs, env_for, is_lease, state, team_a

LEASE = "kvdtype.gpustack.ai/lease"
EXIT = {signal.SIGTERM: 143, signal.SIGHUP: 129}


def start(env: dict, cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([kubectl_path(), "kvdtype", *args], env=env, cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def run(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_path(), "kvdtype", *args], env=env, cwd=cwd, text=True, capture_output=True,
                          timeout=60)


def until(condition: Callable[[], object], what: str, timeout: float = 20) -> None:
    """Poll the fake (not the clock) until ``condition``; the bound only catches a hang."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def rebind_writes(fake: FakeKube, since: int = 0) -> list:
    return [r for r in fake.requests[since:] if r.method in WRITES and "selfsubjectaccessreviews" not in r.path
            and not is_lease(r)]


def operator(fake: FakeKube, holding: dict) -> None:
    """A finalizer on deployments, held while ``holding["on"]``: the run waits in its delete-wait."""
    fake.finalizer("modeldeployments", after=0.0, held_by=lambda _fake, _obj: holding["on"])


#: Each uninterrupted rebind's end state, by its arguments: every signal case of one rebind shares it,
#: so each worker runs it once.
_REFERENCES: dict[tuple, dict] = {}


def reference(base_env: dict, tmp_path: Path, args: tuple, prepare: Optional[Callable[[FakeKube], None]] = None,
              extra: Optional[list] = None, key: Optional[str] = None) -> dict:
    """The end state of the same rebind, uninterrupted, on a fresh cluster set up the same way;
    with ``key`` (what ``prepare`` and ``extra`` amount to), run once and remembered."""
    if key is not None and (args, key) in _REFERENCES:
        return _REFERENCES[args, key]
    with FakeKube() as other:
        seed(other, team_a() + (extra or []))
        if prepare:
            prepare(other)
        where = tmp_path / "reference"
        where.mkdir()
        result = run(env_for(other, base_env, tmp_path / "kc-reference"), where, "escape", "rebind", *args, "--apply")
        assert result.returncode == 0, result.stderr
        end = state(other)
    if key is not None:
        _REFERENCES[args, key] = end
    return end


@pytest.fixture
def cluster(fake, kube_env):
    seed(fake, team_a())
    fake.clear_log()
    return kube_env


def scale(fake: FakeKube, name: str, replicas: int) -> None:
    deployment = fake.get("modeldeployments", "team-a", name)
    roles = deployment["spec"]["roles"]
    roles[0]["replicas"] = replicas
    fake.update("modeldeployments", "team-a", name, {"spec": {"roles": roles}})


# --- 1. an edit made just before the DELETE survives ---------------------------------------------------

def test_an_edit_just_before_the_delete_stops_the_run_and_survives_the_rerun(cluster, fake, kube_env, tmp_path):
    replicas = fake.get("modeldeployments", "team-a", "qwen-legacy")["spec"]["roles"][0]["replicas"]
    held = fake.hold("DELETE", r"/modeldeployments/qwen-legacy$")
    process = start(cluster, tmp_path, "escape", "rebind", *REBIND, "--apply")
    held.wait_arrived()
    scale(fake, "qwen-legacy", 7)  # the admin scales it while the DELETE (read at 1 replica) is on its way
    held.release()
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 3, stderr
    assert "step 3 of 8 (delete ModelDeployment team-a/qwen-legacy) stopped before touching it" in stderr
    assert f"changed since the plan (metadata.generation 1 -> 2; spec.roles[0].replicas {replicas} -> 7)" in stderr
    assert "its edit is kept" in stderr and "run the same command again with --apply" in stderr
    now = fake.get("modeldeployments", "team-a", "qwen-legacy")
    assert now["spec"]["roles"][0]["replicas"] == 7 and "deletionTimestamp" not in now["metadata"]
    assert LEASE not in fake.get("kvcachepoolbindings", "team-a", "legacy")["metadata"].get("annotations", {})
    again = run(cluster, tmp_path, "escape", "rebind", *REBIND, "--apply")
    assert again.returncode == 0, again.stderr
    moved = fake.get("modeldeployments", "team-a", "qwen-legacy")
    assert moved["spec"]["roles"][0]["replicas"] == 7  # the edit survives the move
    assert moved["spec"]["kvCache"]["poolRef"]["name"] == "legacy-bfloat16"
    (directory,) = backup_dirs(tmp_path)
    assert "replicas: 7" in (directory / "modeldeployment-team-a-qwen-legacy.yaml").read_text()  # restore keeps it


def test_a_status_write_between_the_get_and_the_delete_is_not_a_change(cluster, fake, kube_env, tmp_path):
    """Controllers write status all the time: a 409 from that is read again, and the run goes on."""
    held = fake.hold("DELETE", r"/modeldeployments/qwen-legacy$")
    process = start(cluster, tmp_path, "escape", "rebind", *REBIND, "--apply")
    held.wait_arrived()
    fake.update("modeldeployments", "team-a", "qwen-legacy", {"status": {"observedGeneration": 1}})
    held.release()
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    deletes = [r for r in fake.requests if r.method == "DELETE" and r.path.endswith("/qwen-legacy")]
    assert [r.status for r in deletes] == [409, 200]
    assert all(r.body["preconditions"]["uid"] and r.body["preconditions"]["resourceVersion"] for r in deletes)


# --- 2. SIGTERM and SIGHUP end a write as Ctrl-C does ----------------------------------------------------

def signal_at(fake: FakeKube, point: str, holding: dict):
    """Hold the run at ``point``; returns what releases it."""
    if point == "create":
        held = fake.hold("POST", r"/modeldeployments$")
        return held.wait_arrived, held.release
    if point == "patch":
        held = fake.hold("PATCH", rf"/settings/{SETTING}$")
        return held.wait_arrived, held.release

    def waiting() -> None:  # a poll of the deleted deployment after its DELETE: in the wait
        until(lambda: any(r.method == "GET" and r.path.endswith("/qwen-legacy") and r.time > delete.time
                          for r in fake.requests for delete in fake.requests
                          if delete.method == "DELETE" and delete.path.endswith("/qwen-legacy")), "no delete-wait")

    def release() -> None:
        holding["on"] = False
    return waiting, release


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("point, step", [("create", 4), ("delete-wait", 3), ("patch", 1)])
def test_a_signal_mid_write_says_how_to_resume_and_the_rerun_ends_as_an_uninterrupted_run(
        cluster, fake, kube_env, tmp_path, number, point, step):
    holding = {"on": point == "delete-wait"}
    operator(fake, holding)
    arrived, release = signal_at(fake, point, holding)
    process = start(cluster, tmp_path, "escape", "rebind", *REBIND, "--apply")
    arrived()
    process.send_signal(number)  # kubectl execs the plugin: this pid is the plugin
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == EXIT[number], stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert line.startswith(f"error: step {step} of 8 (") and "run the same command again (with --apply)" in line
    if point == "create":  # its original was deleted by step 3: said, not left for the user to find out
        assert "Until then ModelDeployment team-a/qwen-legacy may exist only in the backup." in line
    (directory,) = backup_dirs(tmp_path)
    assert line[len("error: "):] in (directory / "STOPPED.txt").read_text()  # for whoever was not watching
    assert LEASE not in fake.get("kvcachepoolbindings", "team-a", "legacy")["metadata"].get("annotations", {})
    release()
    second = run(cluster, tmp_path, "escape", "rebind", *REBIND, "--apply")
    assert second.returncode == 0, second.stderr
    assert not (directory / "STOPPED.txt").exists()
    expected = reference(kube_env, tmp_path, REBIND, lambda other: operator(other, {"on": False}),
                         key="operator released")
    until(lambda: state(fake) == expected, f"end state differs: {state(fake)} != {expected}", timeout=10)


def test_a_read_only_run_ends_quietly_on_sigterm(cluster, fake, tmp_path):
    held = fake.hold("GET", r"/kvcachepoolbindings")
    process = start(cluster, tmp_path, "check", "-A")
    held.wait_arrived()
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    held.release()
    assert process.returncode == 143 and out == "" and err == ""


def polled_after_patch(fake: FakeKube, since: int) -> bool:
    requests = fake.requests[since:]
    patched = [i for i, r in enumerate(requests) if r.method == "PATCH"]
    return bool(patched) and any(r.method == "GET" and r.path.endswith(SETTING) for r in requests[patched[0] + 1:])


def test_escape_off_wait_says_the_write_is_done_on_sigterm_and_sighup(cluster, fake, tmp_path):
    fake.setting_lag = 30.0  # the operator lags: the command is in its wait
    for number in (signal.SIGTERM, signal.SIGHUP):
        fake.update("settings", SYSTEM, SETTING, {"spec": {"value": "true"}, "status": {"value": "true"}})
        since = len(fake.requests)
        process = start(cluster, tmp_path, "escape", "off", "--yes", "--wait", "60s")
        until(lambda since=since: polled_after_patch(fake, since), "not waiting yet")
        process.send_signal(number)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == EXIT[number], stderr
        assert 'interrupted while waiting: the write is done (spec.value "false")' in stderr
        assert fake.get("settings", SYSTEM, SETTING)["spec"]["value"] == "false"


def test_restore_interrupted_mid_create_says_so_and_the_rerun_carries_on(cluster, fake, tmp_path):
    fake.fail(500, method="POST", path=r"/modeldeployments$", times=1)
    assert run(cluster, tmp_path, "escape", "rebind", *REBIND, "--apply").returncode == 3
    assert fake.get("modeldeployments", "team-a", "qwen-legacy") is None  # only in the backup now
    (directory,) = backup_dirs(tmp_path)
    held = fake.hold("POST", r"/modeldeployments$")
    process = start(cluster, tmp_path, "escape", "restore", str(directory), "--apply", "--yes")
    held.wait_arrived()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 143, stderr
    assert "cannot create ModelDeployment team-a/qwen-legacy: interrupted" in stderr
    assert "run the same command again to carry on" in stderr
    held.release()
    again = run(cluster, tmp_path, "escape", "restore", str(directory), "--apply", "--yes")
    assert again.returncode == 0, again.stderr
    assert fake.get("modeldeployments", "team-a", "qwen-legacy") is not None


# --- 3. the fix journal records each PATCH before it is sent ---------------------------------------------

FIX_NS = "team-c"


def fix_cluster(fake: FakeKube) -> None:
    seed(fake, documents(EXAMPLES))
    fake.clear_log()


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_restore_reverts_a_fix_patch_interrupted_in_flight(fake, kube_env, tmp_path, number):
    fix_cluster(fake)
    before = fake.get("ModelDeployment", FIX_NS, "qwen-same")["spec"]["roles"][0]["extraArgs"]
    held = fake.hold("PATCH", r"/modeldeployments/qwen-same$")
    process = start(kube_env, tmp_path, "find-flags", "-n", FIX_NS, "--fix", "--apply", "--yes")
    held.wait_arrived()
    process.send_signal(number)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == EXIT[number], stderr
    assert "cannot patch ModelDeployment team-c/qwen-same: interrupted" in stderr
    (directory,) = tmp_path.glob("kvdtype-backup-fix-*")
    assert "qwen-same: interrupted" in (directory / "STOPPED.txt").read_text()
    held.release()  # the server applies the PATCH it received
    until(lambda: fake.get("ModelDeployment", FIX_NS, "qwen-same")["spec"]["roles"][0]["extraArgs"] == [],
          "the held PATCH was not applied")
    result = run(kube_env, tmp_path, "escape", "restore", str(directory), "--apply", "--yes", "-o", "json")
    assert result.returncode == 0, result.stderr
    states = {i["name"]: i["state"] for i in json.loads(result.stdout)["items"]}
    assert states["qwen-same"] == "restored"
    assert fake.get("ModelDeployment", FIX_NS, "qwen-same")["spec"]["roles"][0]["extraArgs"] == before


def test_restore_says_it_cannot_tell_when_an_interrupted_patch_target_changed_since(fake, kube_env, tmp_path):
    fix_cluster(fake)
    held = fake.hold("PATCH", r"/modeldeployments/qwen-same$")
    process = start(kube_env, tmp_path, "find-flags", "-n", FIX_NS, "--fix", "--apply", "--yes")
    held.wait_arrived()
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)
    fake.clear_faults()  # the PATCH applies; then someone edits the list again
    until(lambda: fake.get("ModelDeployment", FIX_NS, "qwen-same")["spec"]["roles"][0]["extraArgs"] == [],
          "the held PATCH was not applied")
    roles = fake.get("ModelDeployment", FIX_NS, "qwen-same")["spec"]["roles"]
    roles[0]["extraArgs"] = ["--max-model-len", "4096"]
    fake.update("ModelDeployment", FIX_NS, "qwen-same", {"spec": {"roles": roles}})
    (directory,) = tmp_path.glob("kvdtype-backup-fix-*")
    result = run(kube_env, tmp_path, "escape", "restore", str(directory), "--apply", "--yes", "-o", "json")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert {i["name"]: i["state"] for i in document["items"]}["qwen-same"] == "unknown"
    (finding,) = [f for f in document["findings"] if f["object"]["name"] == "qwen-same"]
    assert "cannot tell whether the patch was applied" in finding["message"]
    assert fake.get("ModelDeployment", FIX_NS, "qwen-same")["spec"]["roles"][0]["extraArgs"] == [
        "--max-model-len", "4096"]


def test_a_fix_patch_whose_lists_changed_since_the_plan_is_left_alone(fake, kube_env, tmp_path):
    fix_cluster(fake)
    held = fake.hold("GET", r"/modeldeployments/qwen-same$")  # the GET just before its PATCH
    process = start(kube_env, tmp_path, "find-flags", "-n", FIX_NS, "--fix", "--apply", "--yes", "-o", "json")
    held.wait_arrived()
    roles = fake.get("ModelDeployment", FIX_NS, "qwen-same")["spec"]["roles"]
    roles[0]["extraArgs"] = roles[0]["extraArgs"] + ["--max-model-len", "4096"]
    fake.update("ModelDeployment", FIX_NS, "qwen-same", {"spec": {"roles": roles}})
    held.release()
    out, err = process.communicate(timeout=60)
    found = {i["name"]: i for i in json.loads(out)["items"]}
    assert found["qwen-same"]["state"] == "conflict", err
    assert "changed since it was read (metadata.generation" in found["qwen-same"]["detail"]
    assert fake.get("ModelDeployment", FIX_NS, "qwen-same")["spec"]["roles"][0]["extraArgs"][-2:] == [
        "--max-model-len", "4096"]
    assert not [r for r in fake.requests if r.method == "PATCH" and r.path.endswith("/qwen-same")]


# --- 4. one rebind per Binding ----------------------------------------------------------------------------

def test_a_second_rebind_of_the_same_binding_refuses_at_once_naming_the_holder(cluster, fake, tmp_path):
    held = fake.hold("POST", r"/modeldeployments$")
    first = start(cluster, tmp_path, "escape", "rebind", *REBIND, "--apply", "--backup-dir", str(tmp_path / "one"))
    held.wait_arrived()
    since = len(fake.requests)
    second = run(cluster, tmp_path, "escape", "rebind", *REBIND, "--apply", "--backup-dir", str(tmp_path / "two"))
    assert second.returncode == 3, second.stderr
    assert f"another escape rebind of team-a/legacy is running (holder {socket.gethostname()} pid " in second.stderr
    assert f"journal {tmp_path / 'one'}" in second.stderr
    assert f"kubectl annotate kvcachepoolbinding legacy -n team-a {LEASE}-" in second.stderr
    assert rebind_writes(fake, since) == []  # nothing written by the second
    held.release()
    _, stderr = first.communicate(timeout=60)
    assert first.returncode == 0, stderr


def _ended_pid() -> int:
    """The pid of a process that has ended (a pid beyond pid_max is no lease's: refused, issue 40)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("lease", [
    {"host": "elsewhere", "pid": 1, "expires": "2020-01-01T00:00:00Z"},  # expired
    {"host": socket.gethostname(), "pid": _ended_pid, "expires": "2999-01-01T00:00:00Z"},  # its process is gone
], ids=["expired", "dead-pid"])
def test_a_lease_a_crashed_run_left_is_taken_over(cluster, fake, tmp_path, lease):
    lease = {**lease, "pid": lease["pid"]() if callable(lease["pid"]) else lease["pid"]}
    fake.update("kvcachepoolbindings", "team-a", "legacy", {"metadata": {"annotations": {
        LEASE: json.dumps({**lease, "holder": f"{lease['host']} pid {lease['pid']}", "journal": "/gone"})}}})
    result = run(cluster, tmp_path, "escape", "rebind", *REBIND, "--apply")
    assert result.returncode == 0, result.stderr


def test_a_live_lease_elsewhere_refuses_and_a_plan_takes_none(cluster, fake, tmp_path):
    fake.update("kvcachepoolbindings", "team-a", "legacy", {"metadata": {"annotations": {LEASE: json.dumps(
        {"host": "ci-runner-7", "pid": 4242, "holder": "ci-runner-7 pid 4242", "journal": "/builds/x",
         "expires": "2999-01-01T00:00:00Z"})}}})
    fake.clear_log()
    plan = run(cluster, tmp_path, "escape", "rebind", *REBIND)
    assert plan.returncode == 0 and [r for r in fake.requests if r.method in WRITES] == []
    result = run(cluster, tmp_path, "escape", "rebind", *REBIND, "--apply")
    assert result.returncode == 3
    assert "holder ci-runner-7 pid 4242, journal /builds/x" in result.stderr
    assert rebind_writes(fake) == [] and backup_dirs(tmp_path) == []  # refused before anything, journal included


# --- 5. backup directories ---------------------------------------------------------------------------------

def test_a_corrupt_journal_is_exit_3_naming_the_file(cluster, fake, tmp_path):
    fake.fail(500, method="DELETE", path=r"/kvcachepoolbindings/legacy$", times=1)
    assert run(cluster, tmp_path, "escape", "rebind", *REBIND, "--apply").returncode == 3
    (directory,) = backup_dirs(tmp_path)
    (directory / "journal.json").write_text('{"format": 1, "steps": [')
    fake.clear_log()
    result = run(cluster, tmp_path, "escape", "restore", str(directory), "--apply", "--yes")
    assert result.returncode == 3
    assert f"cannot read the journal {directory / 'journal.json'}" in result.stderr
    assert [r for r in fake.requests if r.method in WRITES] == []


@pytest.mark.parametrize("command", [("escape", "rebind", *REBIND), ("find-flags", "-n", FIX_NS, "--fix", "--yes")])
def test_an_unrelated_non_empty_backup_dir_is_refused_before_the_first_write(fake, kube_env, tmp_path, command):
    seed(fake, documents(EXAMPLES) + team_a())
    fake.clear_log()
    unrelated = tmp_path / "photos"
    unrelated.mkdir()
    (unrelated / "holiday.jpg").write_text("not a backup")
    result = run(kube_env, tmp_path, *command, "--apply", "--backup-dir", str(unrelated))
    assert result.returncode == 3, result.stderr
    assert "is not empty (holiday.jpg) and holds no journal of this run" in result.stderr
    assert [r for r in fake.requests if r.method in WRITES and "selfsubjectaccessreviews" not in r.path] == []
    assert sorted(p.name for p in unrelated.iterdir()) == ["holiday.jpg"]


def test_a_fix_backup_dir_given_to_another_fix_is_named_as_a_fix_journal(fake, kube_env, tmp_path):
    fix_cluster(fake)
    first = run(kube_env, tmp_path, "find-flags", "-n", FIX_NS, "--fix", "--apply", "--yes")
    assert first.returncode in (0, 1), first.stderr
    (directory,) = tmp_path.glob("kvdtype-backup-fix-*")
    fake.update("ModelDeployment", FIX_NS, "qwen-flagged", {"metadata": {"labels": {"x": "y"}}})
    again = run(kube_env, tmp_path, "find-flags", "-n", FIX_NS, "--fix", "--apply", "--yes", "--accept-dtype-change",
                "--backup-dir", str(directory))
    assert again.returncode == 3
    assert "already holds the journal of a find-flags --fix" in again.stderr
    assert os.path.isdir(directory)


def test_default_backup_names_differ_within_one_second():
    """A rerun in the same second gets its own directory (both a rebind's and a fix's)."""
    import datetime

    from kubectl_kvdtype._changes.journal import default_directory, fix_directory

    moment = datetime.datetime(2026, 12, 1, 12, 0, 0, 1000, tzinfo=datetime.timezone.utc)
    later = moment + datetime.timedelta(milliseconds=5)
    assert default_directory("team-a", "legacy", moment) != default_directory("team-a", "legacy", later)
    assert fix_directory(moment) != fix_directory(later)
    assert str(default_directory("team-a", "legacy", moment)).startswith("kvdtype-backup-team-a-legacy-20261201T1200")

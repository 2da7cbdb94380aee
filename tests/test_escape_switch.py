"""``kubectl kvdtype escape status|off|on`` through real kubectl (and in-process for a terminal)."""

from __future__ import annotations

import io
import json
import threading

import pytest
import yaml

from _support import EXAMPLES, SETTING, SYSTEM, WRITES, assert_one_clean_line, direct, documents, kvdtype, report, seed
from fakekube import FakeKube

#: The two example files these tests' counts come from (other files may join examples/).
FILES = (EXAMPLES / "team-a.yaml", EXAMPLES / "team-b.yaml")


@pytest.fixture
def cluster(fake, kube_env):
    """The example dump: 8 pool-attached ModelDeployments, 14 managed replicas, the Setting on."""
    for path in FILES:
        seed(fake, documents(path))
    fake.clear_log()
    return kube_env


def setting_spec(fake) -> str:
    return fake.get("settings", SYSTEM, SETTING)["spec"]["value"]


def setting_writes(fake) -> list:
    return [r for r in fake.requests if r.method in WRITES and "/settings" in r.path]


# --- status ----------------------------------------------------------------------------------

def test_status_reports_both_values_and_what_they_mean(cluster):
    found = report(kvdtype(cluster, "escape", "status", "-o", "json"))
    assert found["kind"] == "EscapeStatus"
    (item,) = found["items"]
    assert (item["namespace"], item["name"], item["requested"], item["inForce"], item["pending"]) == (
        SYSTEM, SETTING, "true", "true", False)
    assert (item["deployments"], item["replicas"]) == (8, 14)  # the same counts check gives
    assert "rendered as --kv-cache-dtype on 8 pool-attached ModelDeployment(s) (14 replica(s))" in item["meaning"]


def test_status_shows_a_write_not_yet_applied(cluster, fake):
    fake.update("settings", SYSTEM, SETTING, {"spec": {"value": "false"}})  # status still "true"
    table = kvdtype(cluster, "escape", "status")
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()[:2]
    assert header.split()[:4] == ["NAMESPACE", "NAME", "REQUESTED", "IN"]
    assert row.split()[2:5] == ["false", "true", "yes"]
    assert 'A write is not applied yet: requested "false", in force "true".' in table.stdout


def test_status_yaml_is_the_json_document_and_global_flags_work_after_the_action(cluster):
    as_json = report(kvdtype(cluster, "escape", "status", "-o", "json"))
    as_yaml = yaml.safe_load(kvdtype(cluster, "escape", "status", "-o", "yaml").stdout)
    before = report(kvdtype(cluster, "-o", "json", "escape", "status"))
    assert as_yaml == as_json == before


def test_status_offline_reads_the_setting_from_manifests(cluster):
    offline = direct(cluster, "escape", "status", "-f", str(FILES[0]), "-f", str(FILES[1]), "-o", "json")
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout) == report(kvdtype(cluster, "escape", "status", "-o", "json"))


def test_status_in_another_system_namespace(fake, kube_env):
    setting = next(d for d in documents(FILES[1]) if d["kind"] == "Setting")
    setting["metadata"]["namespace"] = "ops"
    seed(fake, [setting])
    found = report(kvdtype(kube_env, "escape", "status", "--system-namespace", "ops", "-o", "json"))
    assert found["items"][0]["namespace"] == "ops"
    missing = kvdtype(kube_env, "escape", "status")  # still looking in gpustack-system
    assert missing.returncode == 3


def test_missing_setting_means_an_older_operator(fake, kube_env):
    seed(fake, [d for path in FILES for d in documents(path) if d["kind"] != "Setting"])
    for action in ("status", "off", "on"):
        flags = ["--yes"] if action != "status" else []
        result = kvdtype(kube_env, "escape", action, *flags)
        assert result.returncode == 3, result.stderr
        assert_one_clean_line(result.stderr)
        assert "operator is older than this feature" in result.stderr
    assert not [r for r in fake.requests if r.method in WRITES]


# --- off / on ----------------------------------------------------------------------------------

def test_no_terminal_and_no_yes_refuses_without_writing(cluster, fake):
    result = kvdtype(cluster, "escape", "off")
    assert result.returncode == 2
    assert "stdin is not a terminal, so pass --yes" in result.stderr
    # It still showed what would have happened, with the counts.
    assert '"true" -> "false"' in result.stderr and "8 pool-attached ModelDeployment(s), 14 replica(s)" in result.stderr
    assert setting_writes(fake) == [] and setting_spec(fake) == "true"


def test_off_writes_a_guarded_merge_patch_and_reads_back(cluster, fake):
    read_rv = fake.get("settings", SYSTEM, SETTING)["metadata"]["resourceVersion"]
    result = kvdtype(cluster, "escape", "off", "--yes", "-o", "json")
    assert result.returncode == 0, result.stderr
    (patch,) = setting_writes(fake)
    assert patch.method == "PATCH" and patch.content_type.startswith("application/merge-patch+json")
    assert patch.body == {"metadata": {"resourceVersion": read_rv}, "spec": {"value": "false"}}
    assert "dryRun" not in patch.query
    (item,) = report(result)["items"]
    assert (item["before"], item["requested"], item["inForce"], item["result"]) == ("true", "false", "false", "changed")
    assert setting_spec(fake) == "false"
    # The read-back came after the write.
    after = [r for r in fake.requests if r.method == "GET" and r.path.endswith(f"/settings/{SETTING}")]
    assert after and after[-1].time > patch.time


def test_on_after_off_and_the_counts_in_the_preview(cluster, fake):
    assert kvdtype(cluster, "escape", "off", "--yes").returncode == 0
    result = kvdtype(cluster, "escape", "on", "--yes")
    assert result.returncode == 0, result.stderr
    assert '"false" -> "true"' in result.stderr and "gets its Binding's dtype as --kv-cache-dtype" in result.stderr
    assert setting_spec(fake) == "true"
    assert 'The Setting is now requested "true"; in force: "true".' in result.stdout


def test_on_warns_about_the_bindings_an_engine_rejects(cluster, fake):
    fake.update("settings", SYSTEM, SETTING, {"spec": {"value": "false"}, "status": {"value": "false"}})
    result = kvdtype(cluster, "escape", "on", "--dry-run=client", "-o", "json")
    assert result.returncode == 0, result.stderr
    item = report(result)["items"][0]
    # as check says (turbo's turboquant_4bit: vLLM 0.29.0's recorded parser refuses it, issue 27)
    assert set(item["rejectedBindings"]) == {"team-a/legacy", "team-b/half", "team-b/mixed", "team-b/turbo"}
    refused = kvdtype(cluster, "escape", "on")  # the preview, shown before the question, says it
    assert "WARNING: an engine rejects the dtype of team-a/legacy, team-b/half, team-b/mixed, team-b/turbo" \
        in refused.stderr
    assert refused.returncode == 2 and setting_spec(fake) == "false"


def test_already_at_the_value_writes_nothing(cluster, fake):
    result = kvdtype(cluster, "escape", "on")  # no --yes needed: nothing to confirm
    assert result.returncode == 0, result.stderr
    assert 'already requested "true"; nothing was written' in result.stdout
    assert setting_writes(fake) == []


def test_wait_polls_until_status_follows(cluster, fake):
    fake.setting_lag = 1.0
    waited = report(kvdtype(cluster, "escape", "off", "--yes", "--wait=60s", "-o", "json"))
    assert waited["items"][0]["inForce"] == "false"
    (patch,) = [r for r in fake.requests if r.method == "PATCH"]
    polls = [r for r in fake.requests if r.method == "GET" and r.path.endswith(f"/settings/{SETTING}")
             and r.time > patch.time]
    # Polled until status followed, which the fake lets happen only 1 s after the patch (its own clock).
    assert len(polls) >= 2 and polls[-1].time - patch.time >= 1.0


def test_without_wait_the_lagging_value_is_said(cluster, fake):
    # Longer than the two runs below can take on a loaded CI machine (each took ~5 s there); nothing waits it out.
    fake.setting_lag = 60.0
    result = kvdtype(cluster, "escape", "off", "--yes", "-o", "json")
    assert result.returncode == 0
    item = report(result)["items"][0]
    assert (item["requested"], item["inForce"]) == ("false", "true")
    table = kvdtype(cluster, "escape", "status")
    assert "A write is not applied yet" in table.stdout


def test_wait_that_runs_out_says_the_write_is_done(cluster, fake):
    fake.setting_lag = 30.0
    result = kvdtype(cluster, "escape", "off", "--yes", "--wait=1s")
    assert result.returncode == 3
    assert 'the write is done (spec.value "false") but status.value still says "true" after 1s' in result.stderr
    assert setting_spec(fake) == "false"


def test_dry_run_client_sends_nothing_and_server_sends_dry_run_all(cluster, fake):
    client = kvdtype(cluster, "escape", "off", "--dry-run=client", "-o", "json")
    assert client.returncode == 0, client.stderr
    assert setting_writes(fake) == []
    assert report(client)["items"][0]["requested"] == "false"
    assert "would change" in report(client)["items"][0]["result"]
    server = kvdtype(cluster, "escape", "off", "--dry-run=server")
    assert server.returncode == 0, server.stderr
    (patch,) = setting_writes(fake)
    assert patch.query.get("dryRun") == "All" and patch.status == 200
    assert "Dry run, accepted by the server" in server.stdout and '"true" -> "false"' in server.stdout
    assert setting_spec(fake) == "true"


def test_forbidden_write_is_one_sentence_and_changes_nothing(cluster, fake):
    fake.deny("patch", "settings")
    result = kvdtype(cluster, "escape", "off", "--yes")
    assert result.returncode == 3
    error = result.stderr.splitlines()[-1]
    assert error.startswith("error: you may not patch settings.gpustack.ai") and "403 Forbidden" in error
    assert error.endswith("nothing was changed")
    assert setting_spec(fake) == "true"


def test_concurrent_change_is_a_clear_conflict_not_a_blind_overwrite(cluster, fake):
    """Someone else writes the Setting between our read and our write: 409, nothing overwritten."""
    held = fake.hold("PATCH", f"/settings/{SETTING}$")  # answered once the other write is in

    def meddle() -> None:
        try:
            held.wait_arrived()
            fake.update("settings", SYSTEM, SETTING, {"metadata": {"annotations": {"by": "someone-else"}}})
        finally:
            held.release()

    thread = threading.Thread(target=meddle)
    thread.start()
    result = kvdtype(cluster, "escape", "off", "--yes")
    thread.join()
    assert result.returncode == 3, result.stderr
    assert "changed after it was read (409 Conflict), so nothing was written" in result.stderr
    (patch,) = setting_writes(fake)
    assert patch.status == 409
    assert setting_spec(fake) == "true"


def test_filename_is_a_usage_error_for_writes(cluster):
    result = kvdtype(cluster, "escape", "off", "--yes", "-f", str(EXAMPLES))
    assert result.returncode == 2
    assert "escape off changes a live cluster" in result.stderr


def test_an_action_is_required_and_help_lists_them(cluster):
    missing = kvdtype(cluster, "escape")
    assert missing.returncode == 2 and "<action>" in missing.stderr
    helped = kvdtype(cluster, "escape", "--help")
    assert all(a in helped.stdout for a in ("status", "off", "on", "rebind"))
    sub = kvdtype(cluster, "escape", "off", "--help")
    assert sub.stdout.startswith("usage: kubectl kvdtype escape off") and "--kubeconfig" in sub.stdout


# --- the confirmation question, on a terminal (in-process: the environment decides) ---------------

class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_on_terminal(args: list[str], environ: dict, answer: str) -> tuple[int, str, str]:
    from kubectl_kvdtype._cli.main import run
    from kubectl_kvdtype._kits.env import Environment

    out, err = io.StringIO(), io.StringIO()
    env = Environment(stdin=Terminal(answer), stdout=out, stderr=err, environ=environ)
    return run(args, env), out.getvalue(), err.getvalue()


@pytest.mark.parametrize("answer, written",
                         [("y\n", True), ("yes\n", True), ("n\n", False), ("\n", False), ("", False)])
def test_terminal_asks_and_only_yes_writes(cluster, fake, answer, written):
    code, out, err = run_on_terminal(["escape", "off"], dict(cluster), answer)
    assert "Turn the Setting off? [y/N]: " in err
    assert '"true" -> "false"' in err.split("Turn the Setting off?")[0]  # shown before asking
    if written:
        assert code == 0 and setting_spec(fake) == "false"
    else:
        assert code == 3 and "not confirmed; nothing was changed" in err
        assert setting_writes(fake) == [] and setting_spec(fake) == "true"


def test_yes_skips_the_question_even_on_a_terminal(cluster, fake):
    code, _, err = run_on_terminal(["escape", "off", "--yes"], dict(cluster), "")
    assert code == 0 and "[y/N]" not in err
    assert setting_spec(fake) == "false"


def test_no_prompt_text_reaches_stdout(cluster):
    code, out, err = run_on_terminal(["escape", "off", "-o", "json"], dict(cluster), "y\n")
    assert code == 0
    assert json.loads(out)["kind"] == "EscapeSwitch"  # stdout is the result only
    assert "[y/N]" in err and '"true" -> "false"' in err and "[y/N]" not in out


def test_operator_api_not_served_at_all(kube_env, tmp_path):
    with FakeKube(groups_versions={"gpustack.ai": None}) as bare:
        env = {**kube_env, "KUBECONFIG": str(bare.write_kubeconfig(tmp_path / "kc-bare"))}
        result = kvdtype(env, "escape", "status")
        assert result.returncode == 3
        assert_one_clean_line(result.stderr)
        assert "the API group gpustack.ai" in result.stderr and "is not served" in result.stderr

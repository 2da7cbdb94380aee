"""``kubectl kvdtype preflight`` through real kubectl against the fake API server, and offline."""

from __future__ import annotations

import json

from _support import EXAMPLES, SETTING, SYSTEM, assert_one_clean_line, direct, kvdtype, report, seed
from test_faults import _closed_port, _kubeconfig


def _binding(namespace: str, name: str, dtype: str) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": f"{namespace}-{name}", "blockSize": 64,
                                                                    "dtype": dtype}}}


def _deployment(namespace: str, name: str, binding: str, engine: str, version: str, extra=(), replicas=1) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": engine, "version": version},
                     "kvCache": {"poolRef": {"name": binding}, "connector": "Mooncake"},
                     "roles": [{"name": "server", "kind": "Server", "replicas": replicas,
                                "instanceType": "gpustack-nvidia-h20-linux-amd64", "extraArgs": list(extra)}]}}


def _setting(value: str) -> dict:
    return {"apiVersion": "gpustack.ai/v1", "kind": "Setting", "metadata": {"name": SETTING, "namespace": SYSTEM},
            "spec": {"value": value}, "status": {"value": value}}


def _by_object(document: dict) -> dict:
    return {(i["object"]["namespace"], i["object"]["name"]): i for i in document["items"]}


# --- NO-GO, the to-do list and its kinds --------------------------------------------------------

def test_no_go_on_the_examples_with_every_todo_kind_in_order(cluster):
    result = kvdtype(cluster, "preflight", "-A", "-o", "json")
    assert result.returncode == 1, result.stderr
    found = report(result)
    assert found["kind"] == "PreflightReport"
    assert found["summary"]["verdict"] == "NO-GO"
    assert [i["order"] for i in found["items"]] == list(range(1, len(found["items"]) + 1))
    actions = [i["action"] for i in found["items"]]
    # Rejected Bindings first, then missing Bindings, then own flags, then failures only the dry run
    # sees, then the warnings worth a look.
    order = ["rebind", "fix-binding-ref", "remove-flag", "investigate", "look"]
    assert sorted(actions, key=order.index) == actions
    # No failure only the dry run sees: check asks each consumer the question the dry run asks
    # (issue 27; before, turboquant_4bit was "unknown" to check and failing in the dry run).
    assert set(actions) == set(order) - {"investigate"}
    items = _by_object(found)
    assert items[("team-a", "legacy")]["command"] == "kubectl kvdtype escape rebind legacy -n team-a --dtype bfloat16"
    assert items[("team-b", "mixed")]["command"] == "kubectl kvdtype escape rebind mixed -n team-b --dtype fp8_e4m3"
    # float16 has no SGLang spelling: a different dtype, and the item says what that costs.
    half = items[("team-b", "half")]
    assert half["command"].endswith("--dtype bfloat16") and "changes the KV-cache precision" in half["what"]
    orphan = items[("team-b", "qwen-orphan")]
    assert orphan["action"] == "fix-binding-ref" and "'gone'" in orphan["what"]
    assert orphan["command"] == "kubectl get kvcachepoolbindings -n team-b"


def test_remove_flag_items_say_what_to_delete_from_which_field(cluster):
    found = report(kvdtype(cluster, "preflight", "-n", "team-c", "-o", "json"))
    items = _by_object(found)
    flagged = items[("team-c", "qwen-flagged")]
    assert flagged["action"] == "remove-flag"
    assert flagged["what"] == ("delete extraArgs[1] '--kv-cache-dtype' and extraArgs[2] 'fp8_e4m3' "
                               "from spec.roles[name=server].extraArgs")
    assert flagged["command"] == "kubectl edit modeldeployment qwen-flagged -n team-c"
    pod = items[("team-c", "vllm-batch-7d9f-abcde")]
    assert "args[0]" in pod["what"] and "ReplicaSet vllm-batch-7d9f" in pod["what"]
    assert pod["command"] == "kubectl edit replicaset vllm-batch-7d9f -n team-c"
    cron = items[("team-c", "nightly-eval")]
    assert cron["what"] == ("delete command[5] '--kv-cache-dtype' and command[6] 'fp8_e4m3' from "
                            "spec.jobTemplate.spec.template.spec.containers[name=sglang]")
    assert cron["command"] == "kubectl edit cronjob nightly-eval -n team-c"


def test_findings_are_check_and_find_flags_own(cluster):
    """preflight reuses the two judgements: their findings, unchanged, plus what only the dry run sees."""
    found = report(kvdtype(cluster, "preflight", "-A", "-o", "json"))
    checked = report(kvdtype(cluster, "check", "-A", "-o", "json"))
    flagged = report(kvdtype(cluster, "find-flags", "-A", "-o", "json"))
    assert found["findings"] == checked["findings"] + flagged["findings"]
    # turboquant_4bit: vLLM 0.29.0's recorded parser has no such choice (turboquant_4bit_nc is its
    # name), and check says so itself now, so the dry run sees no failure that check does not name.
    turbo = [f for f in found["findings"] if f["object"]["name"] == "turbo"]
    assert [f["code"] for f in turbo] == ["dtype-rejected"]
    errors = {f["code"] for f in found["findings"] if f["severity"] == "error"}
    assert errors == {"dtype-rejected", "binding-missing", "role-flag", "pod-flag"}
    assert found["summary"]["findings"]["errors"] == len([f for f in found["findings"] if f["severity"] == "error"])


def test_upgrade_engine_when_a_later_version_accepts_the_spelling(fake, kube_env):
    seed(fake, [_binding("team-u", "fp4", "nvfp4"), _deployment("team-u", "qwen-old", "fp4", "SGLang", "0.5.15"),
                _setting("true")])
    result = kvdtype(kube_env, "preflight", "-n", "team-u", "-o", "json")
    assert result.returncode == 1, result.stderr
    item, look = report(result)["items"]
    assert item["action"] == "upgrade-engine" and item["command"] is None
    # 0.5.15 is older than the oldest recorded SGLang release: the parser that stood in is named
    assert look["action"] == "look" and look["codes"] == ["engine-version-unrecorded"]
    assert ("SGLang 0.5.15 is older than the oldest recorded release: the spelling judged by this tool's spelling "
            "table at 0.5.15, the argv read by SGLang 0.5.18's parser, the oldest recorded") in look["what"]
    assert "upgrade SGLang to >= 0.5.16" in item["what"] and "ModelDeployment qwen-old" in item["what"]


def test_table_ends_with_the_verdict_line(cluster):
    result = kvdtype(cluster, "preflight", "-n", "team-a")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["#", "ACTION", "OBJECT", "COMMAND"]
    assert lines[1].split()[:2] == ["1", "rebind"]
    assert lines[-1].startswith("NO-GO: 1 error finding(s) (dtype-rejected)")
    assert any(line.startswith('Setting gpustack-system/model-deployment-kv-cache-dtype-owned: enforcing')
               for line in lines)
    assert "SEVERITY" not in result.stdout  # the to-do list says it; no second findings table


def test_wide_shows_the_predicted_outcome_of_every_role(cluster):
    result = kvdtype(cluster, "preflight", "-n", "team-a", "-o", "wide")
    rows = {tuple(line.split()[:3]): line for line in result.stdout.splitlines()
            if line.startswith("ModelDeployment")}
    assert "starts with fp8_e4m3" in rows[("ModelDeployment", "qwen-chat", "server")]
    assert "fails: invalid choice 'bf16'" in rows[("ModelDeployment", "qwen-legacy", "server")]
    assert {key[1] for key in rows} == {"qwen-chat", "qwen-chat-sglang", "qwen-legacy"}
    assert "starts with fp8_e4m3" not in kvdtype(cluster, "preflight", "-n", "team-a").stdout


def test_a_role_with_its_own_copy_and_a_pod_refused_at_admission(cluster):
    found = report(kvdtype(cluster, "preflight", "-n", "team-c", "-o", "json"))
    predictions = {(p["name"], p["role"] or p["container"]): p for p in found["predictions"]}
    flagged = predictions[("qwen-flagged", "server")]
    assert flagged["outcome"] == "own-copy" and flagged["runs"] == "fp8_e4m3"
    assert flagged["prediction"].startswith("starts, but with its own fp8_e4m3 (the role's copy wins)")
    assert flagged["argv"][:5] == ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--kv-cache-dtype", "bfloat16"]
    pod = predictions[("vllm-batch-7d9f-abcde", "vllm")]
    assert pod["outcome"] == "refused" and pod["prediction"].startswith("refused at admission")
    assert predictions[("qwen-pd", "decode")]["outcome"] == "unchanged"  # a take-over role


# --- GO, --fail-on, --exit-zero, -f, incomplete ------------------------------------------------------

def test_go_when_every_replica_starts_with_its_binding_dtype(fake, kube_env):
    seed(fake, [_binding("team-g", "chat", "bfloat16"), _deployment("team-g", "qwen", "chat", "vLLM", "0.29.0"),
                _deployment("team-g", "qwen-sg", "chat", "SGLang", "0.5.18", replicas=2), _setting("false")])
    result = kvdtype(kube_env, "preflight", "-n", "team-g", "-o", "wide")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "GO: no error or warning finding."
    assert "not yet enforcing (status.value \"false\")" in result.stdout
    assert sum("starts with bfloat16" in line for line in lines) == 2
    assert "Nothing to do before the upgrade" in result.stderr
    found = report(kvdtype(kube_env, "preflight", "-n", "team-g", "-o", "json"))
    assert (found["summary"]["verdict"], found["items"]) == ("GO", [])
    assert found["summary"]["setting"]["state"] == "not-yet" and found["summary"]["setting"]["enforcing"] is False


def test_no_setting_means_not_yet(fake, kube_env):
    seed(fake, [_binding("team-g", "chat", "bfloat16"), _deployment("team-g", "qwen", "chat", "vLLM", "0.29.0")])
    found = report(kvdtype(kube_env, "preflight", "-n", "team-g", "-o", "json"))
    assert found["summary"]["setting"]["state"] == "not-yet"
    assert "does not exist" in found["summary"]["setting"]["line"]


def test_warnings_make_no_go_only_with_fail_on_warning(fake, kube_env):
    seed(fake, [_binding("team-w", "old", "auto"), _deployment("team-w", "qwen", "old", "vLLM", "0.29.0"),
                _setting("true")])
    relaxed = kvdtype(kube_env, "preflight", "-n", "team-w")
    assert relaxed.returncode == 0, relaxed.stdout
    assert relaxed.stdout.splitlines()[-1] == "GO: no error finding; 1 warning(s) worth a look in the to-do list."
    assert "look" in relaxed.stdout and "kubectl kvdtype check -n team-w -o wide" in relaxed.stdout
    strict = kvdtype(kube_env, "preflight", "-n", "team-w", "--fail-on", "warning")
    assert strict.returncode == 1
    assert strict.stdout.splitlines()[-1] == "NO-GO: no error finding, but 1 warning(s) and --fail-on warning."
    assert kvdtype(kube_env, "preflight", "-n", "team-w", "--fail-on", "warning", "--exit-zero").returncode == 0


def test_exit_zero_keeps_the_verdict(cluster):
    result = kvdtype(cluster, "preflight", "-A", "--exit-zero", "-o", "yaml")
    assert result.returncode == 0, result.stderr
    assert "verdict: NO-GO" in result.stdout


def test_ignore_drops_findings_before_the_verdict(cluster):
    result = kvdtype(cluster, "preflight", "-n", "team-a", "--ignore", "dtype-rejected", "-o", "json")
    assert result.returncode == 0, result.stderr
    found = report(result)
    assert found["summary"]["verdict"] == "GO" and found["summary"]["findings"]["ignored"] == 1
    # dtype-auto, then SGLang v0.5.18.post1 (no recorded release): both worth a look
    assert [(i["action"], i["codes"]) for i in found["items"]] == [("look", ["dtype-auto"]),
                                                                    ("look", ["engine-version-unrecorded"])]


def test_offline_gives_the_same_report_as_live(cluster):
    live = kvdtype(cluster, "preflight", "-A", "-o", "json")
    offline = kvdtype(cluster, "preflight", "-f", str(EXAMPLES), "-o", "json")
    assert offline.returncode == live.returncode == 1, offline.stderr
    assert json.loads(offline.stdout) == json.loads(live.stdout)


def test_offline_exit_zero_and_a_dump_without_a_setting(cluster, tmp_path):
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        _binding("team-g", "chat", "bf16"), _deployment("team-g", "qwen", "chat", "vLLM", "0.29.0")]}))
    result = kvdtype(cluster, "preflight", "-f", str(dump), "--exit-zero")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("NO-GO: 1 error finding(s) (dtype-rejected)")
    assert "not in the manifests" in result.stdout
    assert direct(cluster, "preflight", "-f", str(dump)).returncode == 1


def test_an_unreachable_cluster_is_incomplete(kube_env, tmp_path):
    kube_env["KUBECONFIG"] = _kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{_closed_port()}")
    result = kvdtype(kube_env, "preflight", "--exit-zero")
    assert result.returncode == 3 and result.stdout == ""
    assert_one_clean_line(result.stderr)


def test_split_binding_when_no_dtype_suits_every_engine(fake, kube_env):
    """A pool shared since 2024: vLLM 0.4.1 (fp8, but no fp8_e4m3 yet and fp8_e5m2 missing in 0.4.1-0.4.2)
    and SGLang 0.4.0 (fp8_e5m2, no fp8): no spelling of any dtype starts both, so no rebind of the
    shared Binding can help, and upgrading cannot make SGLang read vLLM's `fp8`."""
    seed(fake, [_binding("team-s", "legacy-fp8", "fp8"),
                _deployment("team-s", "qwen-vllm", "legacy-fp8", "vLLM", "0.4.1"),
                _deployment("team-s", "qwen-sglang", "legacy-fp8", "SGLang", "0.4.0"), _setting("true")])
    result = kvdtype(kube_env, "preflight", "-n", "team-s", "-o", "json")
    assert result.returncode == 1, result.stderr
    found = report(result)
    assert found["summary"]["verdict"] == "NO-GO"
    (item,) = [i for i in found["items"] if i["object"]["name"] == "legacy-fp8"]
    assert item["action"] == "split-binding" and item["command"] is None
    assert item["dtypeFix"] is None and item["fix"] == "split consumers by engine"
    assert item["what"].startswith("SGLang 0.4.0 rejects fp8, and no dtype suits every engine consuming it")
    # Each engine's share of the split, with the fix for that engine alone.
    assert "vLLM: ModelDeployment qwen-vllm: can stay" in item["what"]  # vLLM 0.4.1 accepts fp8
    assert "SGLang: ModelDeployment qwen-sglang: rebind with fp8_e5m2 (a different dtype)" in item["what"]
    table = kvdtype(kube_env, "preflight", "-n", "team-s")
    assert any(line.split()[:2] == ["1", "split-binding"] for line in table.stdout.splitlines()), table.stdout
    checked = report(kvdtype(kube_env, "check", "-n", "team-s", "-o", "json"))
    assert [f["code"] for f in checked["findings"] if f["severity"] == "error"] == ["dtype-rejected"]

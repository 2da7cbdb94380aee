"""``kubectl kvdtype verify`` through real kubectl against the fake API server, offline, and --wait."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import threading
import time
from collections import Counter

from _support import EXAMPLES, SETTING, assert_one_clean_line, codes, direct, kvdtype, report, seed
from conftest import kubectl_path

#: The guide's Verification command, verbatim but for the two placeholders
#: (docs/engines.md, "The upgrade guide's commands").
GUIDE_VERIFY = (
    "kubectl -n {namespace} get pods -l app.kubernetes.io/instance={deployment} \\\n"
    "  -o jsonpath='{{range .items[*]}}{{.metadata.name}}{{\"\\t\"}}"
    "{{.spec.containers[0].command}}{{\"\\n\"}}{{end}}' \\\n"
    "  | grep -o -- '--kv-cache-dtype\",\"[^\"]*'"
)


def verdicts(document: dict) -> dict[str, str]:
    return {item["name"]: item["verdict"] for item in document["items"]}


def namespaced_verdicts(document: dict) -> dict[str, str]:
    return {f"{item['namespace']}/{item['name']}": item["verdict"] for item in document["items"]}


def test_every_verdict_and_code_on_the_examples(cluster):
    result = kvdtype(cluster, "verify", "-A", "-o", "json")
    assert result.returncode == 1, result.stderr
    found = report(result)
    assert found["kind"] == "VerifyReport"
    got = namespaced_verdicts(found)
    # SGLang refuses vLLM's fp8 as it parses its argv: team-b's injected Pod never serves.
    assert got["team-b/sglang-worker-0"] == "rejected" and got["team-c/sglang-worker-0"] == "ok"
    assert verdicts(found) == {
        "qwen-chat-server-r0-m0": "ok", "qwen-chat-server-r1-m0": "missing",  # team-a
        "sglang-worker-0": "ok",  # team-b and team-c both have one (same name)
        "qwen-flagged-server-r0-m0": "mismatch", "qwen-flagged-server-r1-m0": "mismatch",
        "qwen-same-server-r0-m0": "ok", "qwen-pd-prefill-r0-m0": "ok", "qwen-pd-prefill-r1-m0": "missing",
        "qwen-pd-decode-r0-m0": "unmanaged",
        "vllm-worker-0": "ok", "vllm-batch-7d9f-abcde": "ok", "vllm-worker-1": "missing", "vllm-worker-2": "mismatch",
    }
    assert len(found["items"]) == 14  # the router Pod is not judged
    assert sorted(codes(found)) == sorted([
        ("replica-missing-flag", "team-a/qwen-chat-server-r1-m0"),
        ("binding-missing", "team-b/qwen-orphan"),
        ("pod-dtype-rejected", "team-b/sglang-worker-0"),
        ("replica-dtype-mismatch", "team-c/qwen-flagged-server-r0-m0"),
        ("replica-dtype-mismatch", "team-c/qwen-flagged-server-r1-m0"),
        ("role-unmanaged", "team-c/qwen-pd"),
        ("replica-missing-flag", "team-c/qwen-pd-prefill-r1-m0"),
        ("pod-missing-flag", "team-c/vllm-worker-1"),
        ("pod-dtype-mismatch", "team-c/vllm-worker-2"),
        # a version that is no recorded release: the parser that stood in is named
        ("engine-version-unrecorded", "team-a/qwen-chat-sglang"),
    ])
    severities = {f["code"]: f["severity"] for f in found["findings"]}
    assert severities["role-unmanaged"] == "info"
    assert {severities[c] for c in ("replica-missing-flag", "replica-dtype-mismatch", "pod-missing-flag",
                                    "pod-dtype-mismatch", "pod-dtype-rejected", "binding-missing")} == {"error"}
    assert found["summary"]["verdicts"] == {"ok": 6, "pending": 0, "rejected": 1, "missing": 3, "mismatch": 3,
                                            "unmanaged": 1, "unknown": 0}


def test_items_carry_every_occurrence_with_its_origin(cluster):
    found = report(kvdtype(cluster, "verify", "-n", "team-c", "-o", "json"))
    items = {item["name"]: item for item in found["items"]}
    flagged = items["qwen-flagged-server-r0-m0"]
    assert (flagged["namespace"], flagged["deployment"], flagged["role"], flagged["container"]) == (
        "team-c", "qwen-flagged", "server", "main")
    assert (flagged["expected"], flagged["effective"]) == ("bfloat16", "fp8_e4m3")
    assert [(o["field"], o["index"], o["value"], o["origin"]) for o in flagged["occurrences"]] == [
        ("command", 5, "bfloat16", "operator"), ("command", 8, "fp8_e4m3", "extraArgs")]
    same = items["qwen-same-server-r0-m0"]  # the sidecar is containers[0]; main is read
    assert same["container"] == "main" and [o["token"] for o in same["occurrences"]] == [
        "--kv-cache-dtype", "--kv-cache-dtype=bfloat16"]
    sglang = items["sglang-worker-0"]  # --enable-hierarchical-cache follows the webhook's pair
    assert (sglang["role"], sglang["container"], sglang["effective"]) == ("injected", "sglang", "fp8_e4m3")
    batch = items["vllm-batch-7d9f-abcde"]  # its own flag first, the webhook's copy last and winning
    assert [o["origin"] for o in batch["occurrences"]] == ["pod", "webhook"] and batch["verdict"] == "ok"


def test_messages_say_which_copy_wins(cluster):
    found = report(kvdtype(cluster, "verify", "-n", "team-c", "-o", "json"))
    messages = {f["object"]["name"]: f["message"] for f in found["findings"]}
    assert "the operator's copy is right (bfloat16)" in messages["qwen-flagged-server-r0-m0"]
    assert "from extraArgs comes later and wins" in messages["qwen-flagged-server-r0-m0"]
    assert "no operator copy" in messages["qwen-flagged-server-r1-m0"]
    assert "has not been replaced" in messages["qwen-pd-prefill-r1-m0"]
    assert "where the webhook appends bfloat16" in messages["vllm-worker-1"]
    assert "runs fp8_e4m3" in messages["vllm-worker-2"]


def test_one_deployment_by_name(cluster):
    result = kvdtype(cluster, "verify", "qwen-flagged", "-n", "team-c", "-o", "json")
    assert result.returncode == 1
    found = report(result)
    assert verdicts(found) == {"qwen-flagged-server-r0-m0": "mismatch", "qwen-flagged-server-r1-m0": "mismatch"}
    takeover = report(kvdtype(cluster, "verify", "qwen-pd", "-n", "team-c", "-o", "json"))
    assert verdicts(takeover)["qwen-pd-decode-r0-m0"] == "unmanaged"
    assert ("role-unmanaged", "team-c/qwen-pd") in codes(takeover)
    clean = kvdtype(cluster, "verify", "qwen-same", "-n", "team-c")
    assert clean.returncode == 0, clean.stdout
    assert "1/1 replicas carry bfloat16" in clean.stdout
    assert clean.stdout.splitlines()[0].split() == ["POD", "ROLE", "CONTAINER", "EXPECTED", "EFFECTIVE", "VERDICT"]
    assert clean.stdout.splitlines()[1].split() == [
        "qwen-same-server-r0-m0", "server", "main", "bfloat16", "bfloat16", "ok"]
    across = report(kvdtype(cluster, "verify", "qwen-same", "-A", "-o", "json"))
    assert verdicts(across) == {"qwen-same-server-r0-m0": "ok"}


def test_a_deployment_that_does_not_exist_is_one_sentence_exit_3(cluster):
    result = kvdtype(cluster, "verify", "nope", "-n", "team-c")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert 'ModelDeployment "nope" not found in namespace "team-c"' in result.stderr
    offline = direct(cluster, "verify", "nope", "-f", str(EXAMPLES))
    assert offline.returncode == 3 and "not found in any namespace" in offline.stderr


def test_not_attached_and_missing_binding_are_findings(cluster):
    detached = kvdtype(cluster, "verify", "qwen-detached", "-n", "team-c", "-o", "json")
    assert detached.returncode == 0
    (finding,) = report(detached)["findings"]
    assert (finding["code"], finding["severity"]) == ("deployment-not-attached", "warning")
    orphan = kvdtype(cluster, "verify", "qwen-orphan", "-n", "team-b", "-o", "json")
    assert orphan.returncode == 1
    assert [f["code"] for f in report(orphan)["findings"]] == ["binding-missing"]
    assert "Traceback" not in orphan.stderr + detached.stderr


def test_setting_off_expects_no_flag(cluster, fake):
    fake.update("Setting", "gpustack-system", SETTING, {"spec": {"value": "false"}, "status": {"value": "false"}})
    found = report(kvdtype(cluster, "verify", "-n", "team-c", "-o", "json"))
    got = verdicts(found)
    assert got["qwen-pd-prefill-r1-m0"] == "ok"  # no flag: already rolled back
    assert got["qwen-pd-prefill-r0-m0"] == "mismatch"  # still the operator's copy
    assert got["qwen-flagged-server-r0-m0"] == "mismatch"
    assert got["qwen-flagged-server-r1-m0"] == "ok"  # only the role's own copy, which is allowed now
    assert got["vllm-worker-1"] == "ok" and got["vllm-worker-0"] == "mismatch"  # the webhook's copy
    messages = {f["object"]["name"]: f["message"] for f in found["findings"]}
    assert "not rolled back yet" in messages["qwen-pd-prefill-r0-m0"]
    assert found["summary"]["setting"]["value"] == "false"
    assert all(item["expected"] is None for item in found["items"])


def test_offline_gives_the_same_report_as_live(cluster):
    live = report(kvdtype(cluster, "verify", "-A", "-o", "json"))
    offline = direct(cluster, "verify", "-f", str(EXAMPLES), "-o", "json")
    assert offline.returncode == 1, offline.stderr
    assert json.loads(offline.stdout) == live
    named_live = report(kvdtype(cluster, "verify", "qwen-flagged", "-n", "team-c", "-o", "json"))
    named_offline = direct(cluster, "verify", "qwen-flagged", "-n", "team-c", "-f", str(EXAMPLES), "-o", "json")
    assert json.loads(named_offline.stdout) == named_live


def guide_verification(env: dict, namespace: str, deployment: str) -> list[str]:
    """The values the guide's jsonpath | grep prints (``--kv-cache-dtype","V`` lines)."""
    command = GUIDE_VERIFY.format(namespace=namespace, deployment=deployment)
    result = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode in (0, 1), result.stderr  # grep exits 1 when nothing matches
    return [line.split('","', 1)[1] for line in result.stdout.splitlines() if line.strip()]


def test_oracle_guide_verification(cluster):
    """The guide's jsonpath | grep, run with real kubectl, against verify's occurrences.

    Where containers[0] is the engine container, the grep sees exactly the space-form occurrences
    verify reports. It cannot say which copy wins (qwen-flagged prints bfloat16 next to the winning
    fp8_e4m3), it includes take-over roles (qwen-pd's decode) and never says a replica is missing a
    flag (qwen-pd-prefill-r1 prints nothing), it reads a sidecar when that is containers[0]
    (qwen-same: nothing printed), and its pattern misses the ``--kv-cache-dtype=V`` form.
    """
    assert os.path.realpath(subprocess.run(["bash", "-c", "command -v kubectl"], env=cluster, capture_output=True,
                                           text=True).stdout.strip()) == os.path.realpath(kubectl_path())
    for deployment in ("qwen-flagged", "qwen-pd"):
        guide = guide_verification(cluster, "team-c", deployment)
        found = report(kvdtype(cluster, "verify", deployment, "-n", "team-c", "-o", "json"))
        space_form = [o["value"] for item in found["items"] for o in item["occurrences"]
                      if o["field"] == "command" and o["token"] == "--kv-cache-dtype"]
        assert Counter(guide) == Counter(space_form), deployment
    assert Counter(guide_verification(cluster, "team-c", "qwen-flagged")) == Counter(
        {"bfloat16": 1, "fp8_e4m3": 2})  # ...while verify says both replicas run fp8_e4m3, not bfloat16
    assert guide_verification(cluster, "team-c", "qwen-same") == []
    same = report(kvdtype(cluster, "verify", "qwen-same", "-n", "team-c", "-o", "json"))
    assert [o["value"] for o in same["items"][0]["occurrences"]] == ["bfloat16", "bfloat16"]


# --- --wait --------------------------------------------------------------------------------

def _rollout_objects(flagged: bool) -> list[dict]:
    """A deployment with two replicas, both carrying the operator's flag when ``flagged``."""
    def pod(name: str) -> dict:
        command = ["vllm", "serve", "m"] + (["--kv-cache-dtype", "bfloat16"] if flagged else []) + ["--port", "8000"]
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "roll",
                             "labels": {"app.kubernetes.io/name": "model-deployment",
                                        "app.kubernetes.io/instance": "qwen", "app.kubernetes.io/component": "server"}},
                "spec": {"containers": [{"name": "main", "command": command}]}}
    return [
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
         "metadata": {"name": "b", "namespace": "roll"},
         "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": "roll", "dtype": "bfloat16"}}},
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
         "metadata": {"name": "qwen", "namespace": "roll"},
         "spec": {"engine": {"name": "vLLM", "version": "0.29.0"}, "kvCache": {"poolRef": {"name": "b"}},
                  "roles": [{"name": "server", "replicas": 2}]}},
        {"apiVersion": "gpustack.ai/v1", "kind": "Setting",
         "metadata": {"name": SETTING, "namespace": "gpustack-system"},
         "spec": {"value": "true"}, "status": {"value": "true"}},
        pod("qwen-server-r0-m0"), pod("qwen-server-r1-m0"),
    ]


def _after_polls(fake, count: int) -> None:
    """Block until verify has listed the Pods ``count`` times (so each change lands between polls).

    Counts answered requests only: the fake logs a request on arrival, and a change made before
    the answer would land inside that poll instead of between polls.
    """
    deadline = time.monotonic() + 20
    while sum(1 for r in fake.requests if r.path.endswith("/pods") and r.status is not None) < count \
            and time.monotonic() < deadline:
        time.sleep(0.02)


def _roll_out_later(fake) -> threading.Thread:
    """While verify waits: r0 gets the flag in place, then r1 is replaced by a new Pod carrying it."""
    fixed = {o["metadata"]["name"]: o for o in _rollout_objects(flagged=True) if o["kind"] == "Pod"}

    def run() -> None:
        _after_polls(fake, 1)
        fake.update("Pod", "roll", "qwen-server-r0-m0", {"spec": fixed["qwen-server-r0-m0"]["spec"]})
        _after_polls(fake, 2)
        fake.remove("Pod", "roll", "qwen-server-r1-m0")
        replacement = fixed["qwen-server-r1-m0"]
        replacement["metadata"]["name"] = "qwen-server-r1-m1"
        fake.add(replacement)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_wait_ends_when_every_replica_passes_with_a_progress_line_on_a_terminal(fake, kube_env):
    seed(fake, _rollout_objects(flagged=False))
    fake.clear_log()
    thread = _roll_out_later(fake)
    master, slave = pty.openpty()
    process = subprocess.Popen([kubectl_path(), "kvdtype", "verify", "qwen", "-n", "roll", "--wait=60s", "-o", "json"],
                               env=kube_env, stdout=subprocess.PIPE, stderr=slave, text=True)
    out, _ = process.communicate(timeout=90)
    os.close(slave)
    progress = _read_all(master)
    thread.join()
    assert process.returncode == 0, progress
    found = json.loads(out)
    assert verdicts(found) == {"qwen-server-r0-m0": "ok", "qwen-server-r1-m1": "ok"}
    wait = found["summary"]["wait"]
    # It ended once both replicas passed, not at the deadline: timedOut says which.
    assert wait["timedOut"] is False and wait["seconds"] == 60 and wait["polls"] >= 3
    pod_lists = [r for r in fake.requests if r.path.endswith("/pods")]
    assert len(pod_lists) == wait["polls"]  # one LIST per poll
    assert "0/2 replicas carry bfloat16" in progress and "1/2 replicas carry bfloat16" in progress
    assert progress.rstrip().endswith("2/2 replicas carry bfloat16")
    assert "\r" in progress and "Warning" not in progress


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO once the other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def test_wait_gives_up_when_time_is_up(fake, kube_env):
    objects = _rollout_objects(flagged=False)
    seed(fake, objects)
    fake.update("Pod", "roll", "qwen-server-r0-m0", {"spec": _rollout_objects(flagged=True)[-2]["spec"]})
    # The first poll lists Pods twice (replicas, injected) and is answered; the second poll's LISTs
    # get 503 until the client gives up on both (four attempts each): a fault placed by count.
    fake.fail(503, method="GET", path=r"/pods$", times=8, after=2)
    started = time.monotonic()
    result = kvdtype(kube_env, "verify", "-n", "roll", "--wait=5s", "-o", "json")
    assert result.returncode == 1, result.stderr
    assert time.monotonic() - started >= 5.0  # it waited the whole --wait (a lower bound: no machine is faster)
    assert "Warning: gave up waiting after 5s: 1/2 replicas carry bfloat16" in result.stderr
    assert "1 poll(s) failed and were retried" in result.stderr and "503" in result.stderr
    assert "\r" not in result.stderr  # no live display off a terminal
    found = report(result)
    assert found["summary"]["wait"]["timedOut"] is True and found["summary"]["wait"]["polls"] >= 2
    assert codes(found) == [("replica-missing-flag", "roll/qwen-server-r1-m0")]


def test_wait_before_the_name_and_not_offline(fake, kube_env):
    seed(fake, _rollout_objects(flagged=True))
    result = kvdtype(kube_env, "verify", "--wait", "qwen", "-n", "roll", "--poll-interval=0.1s", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert report(result)["summary"]["wait"] == {"seconds": 600.0, "polls": 1, "timedOut": False}
    offline = direct(kube_env, "verify", "--wait=5s", "-f", str(EXAMPLES))
    assert offline.returncode == 2
    assert_one_clean_line(offline.stderr)


def test_strange_shapes_are_judged_not_crashed(fake, kube_env):
    """Never a traceback: missing specs, strings where lists belong, Pods without containers."""
    replica = {"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": "odd",
               "app.kubernetes.io/component": "s"}
    seed(fake, [
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
         "metadata": {"name": "b", "namespace": "odd"}, "spec": {"domain": {"dtype": "bfloat16"}}},
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
         "metadata": {"name": "odd", "namespace": "odd"},
         "spec": {"engine": "vllm", "kvCache": {"poolRef": {"name": "b"}},
                  "roles": [{"name": "s", "extraArgs": "--kv-cache-dtype fp8", "command": None}, "not-a-role"]}},
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
         "metadata": {"name": "no-spec", "namespace": "odd"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p0", "namespace": "odd", "labels": replica},
         "spec": {"containers": "oops"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "odd", "labels": replica},
         "spec": {"containers": [{"name": "main", "command": ["vllm", 3, None, "--kv-cache-dtype"]}]}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "inj", "namespace": "odd", "labels": {"kvcache.gpustack.ai/inject": "true"},
                      "annotations": {"kvcache.gpustack.ai/binding": "b", "kvcache.gpustack.ai/injected": "{not json"}},
         "spec": {"containers": [{"name": "a"}, {"name": "b"}]}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "odd"},
         "spec": {"template": "oops"}},
    ])
    verified = kvdtype(kube_env, "verify", "-n", "odd", "-o", "json")
    flags = kvdtype(kube_env, "find-flags", "-n", "odd", "-o", "json")
    assert "Traceback" not in verified.stderr + flags.stderr
    assert verdicts(report(verified)) == {"p0": "missing", "p1": "rejected", "inj": "missing"}
    messages = {f["object"]["name"]: f["message"] for f in report(verified)["findings"]}
    assert "exits at argument parsing (error: argument --kv-cache-dtype: expected one argument)" in messages["p1"]
    assert "no target container" in messages["inj"]
    (role_flag,) = report(flags)["findings"]  # one entry holding a space: reported, not read
    assert role_flag["occurrences"][0]["spelling"] == "spaced" and role_flag["value"] is None


def test_pods_whose_binding_is_missing_or_has_no_dtype_are_unknown(fake, kube_env):
    def deployment(name: str, binding: str) -> list[dict]:
        return [{"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
                 "metadata": {"name": name, "namespace": "unk"},
                 "spec": {"engine": {"name": "vLLM"}, "kvCache": {"poolRef": {"name": binding}},
                          "roles": [{"name": "server"}]}},
                {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"{name}-server-r0-m0", "namespace": "unk",
                              "labels": {"app.kubernetes.io/name": "model-deployment",
                                         "app.kubernetes.io/instance": name, "app.kubernetes.io/component": "server"}},
                 "spec": {"containers": [{"name": "main",
                                          "command": ["vllm", "serve", "m", "--kv-cache-dtype", "fp8"]}]}}]
    seed(fake, deployment("orphan", "gone") + deployment("blank", "nodtype") + [
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
         "metadata": {"name": "nodtype", "namespace": "unk"}, "spec": {"domain": {"name": "x"}}}])
    result = kvdtype(kube_env, "verify", "-n", "unk", "-o", "json")
    found = report(result)
    assert verdicts(found) == {"orphan-server-r0-m0": "unknown", "blank-server-r0-m0": "unknown"}
    assert sorted(codes(found)) == [("binding-missing", "unk/orphan"), ("dtype-unknown", "unk/nodtype")]
    assert result.returncode == 1  # binding-missing is an error; waiting would not fix it
    assert "Warning: Setting gpustack-system/model-deployment-kv-cache-dtype-owned not found" in result.stderr


def test_wait_keeps_waiting_while_a_replica_is_absent(fake, kube_env):
    """Mid-rollout: r1 deleted, its successor not created yet. 1/1 present Pods pass, but the
    role wants 2, so --wait must not end until the successor exists and passes."""
    objects = _rollout_objects(flagged=True)
    seed(fake, [o for o in objects if o["metadata"]["name"] != "qwen-server-r1-m0"])
    successor = next(o for o in objects if o["metadata"]["name"] == "qwen-server-r1-m0")
    successor["metadata"]["name"] = "qwen-server-r1-m1"

    def recreate_later() -> None:
        _after_polls(fake, 3)
        fake.add(successor)
    thread = threading.Thread(target=recreate_later, daemon=True)
    thread.start()
    result = kvdtype(kube_env, "verify", "qwen", "-n", "roll", "--wait=10s", "--poll-interval=0.1s", "-o", "json")
    thread.join()
    assert result.returncode == 0, result.stderr
    found = report(result)
    assert verdicts(found) == {"qwen-server-r0-m0": "ok", "qwen-server-r1-m1": "ok"}
    assert found["summary"]["wait"]["polls"] >= 4 and found["summary"]["pending"] == []


def test_absent_replicas_are_counted_when_time_is_up(fake, kube_env):
    seed(fake, [o for o in _rollout_objects(flagged=True) if o["metadata"]["name"] != "qwen-server-r1-m0"])
    # A --wait long enough for the first answers on a loaded machine: the deadline must end the
    # wait, not come before the first poll.
    result = kvdtype(kube_env, "verify", "qwen", "-n", "roll", "--wait=3s", "-o", "json")
    assert "gave up waiting after 3s: 1/2 replicas carry bfloat16 (1 not created yet)" in result.stderr
    found = report(result)
    assert found["summary"]["wait"]["timedOut"] is True
    assert found["summary"]["pending"] == [
        {"namespace": "roll", "deployment": "qwen", "role": "server", "desired": 2, "found": 1}]
    assert result.returncode == 0  # what is present passes; absence alone is not an error finding


def test_listed_bindings_and_deployments_are_kept_without_their_status(fake, tmp_path):
    """check, verify and find-flags read Bindings and ModelDeployments page by page without their
    status (never read, a large share of a listed object), and everything else of them as listed;
    check keeps its injected Pods slim, as verify does. A read for a write keeps them whole."""
    from _support import documents, kubeconfig
    from kubectl_kvdtype._judging.bindings import BindingInventory
    from kubectl_kvdtype._judging.flags import FlagInventory
    from kubectl_kvdtype._judging.replicas import PodInventory
    from kubectl_kvdtype._sources.cluster import ClusterSource
    from kubectl_kvdtype._sources.connection import ConnectionOptions
    from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, POD
    from kubectl_kvdtype._sources.model import slim_pod

    listed = [doc for doc in documents(EXAMPLES) if doc.get("kind") in ("KVCachePoolBinding", "ModelDeployment")]
    for number, doc in enumerate(listed):
        doc["status"] = {"observedGeneration": number, "conditions": [{"type": "Ready", "status": "True"}]}
    seed(fake, documents(EXAMPLES) + listed)
    injected = {"apiVersion": "v1", "kind": "Pod",  # its uid, image and status are never read
                "metadata": {"name": "inj", "namespace": "team-a", "labels": {"kvcache.gpustack.ai/inject": "true"},
                             "uid": "u"},
                "spec": {"containers": [{"name": "main", "args": ["--x"], "image": "i"}]},
                "status": {"phase": "Running"}}
    seed(fake, [injected])
    source = ClusterSource(ConnectionOptions(), environ={"KUBECONFIG": str(kubeconfig(fake, tmp_path / "kc"))})
    as_listed = [obj for kind in (BINDING, DEPLOYMENT) for obj in source.list(kind, None)]
    assert len(as_listed) == len(listed) and all("status" in obj for obj in as_listed)
    expected = {_key(obj): {k: v for k, v in obj.items() if k != "status"} for obj in as_listed}

    check = BindingInventory.read(source, None, "gpustack-system")
    verify = PodInventory.read_all(source, None, "gpustack-system")
    find_flags = FlagInventory.read(source, None, "gpustack-system")
    for read in (check.bindings, check.deployments, list(verify.bindings.values()), verify.deployments,
                 find_flags.deployments):
        assert read and all("status" not in obj for obj in read)
        for obj in read:
            assert obj == expected[_key(obj)]
    # A write backs up the objects it read (escape rebind, find-flags --fix): those are read whole.
    for whole in (BindingInventory.read(source, None, "gpustack-system", whole=True),
                  FlagInventory.read(source, None, whole=True)):
        deployments = [obj for obj in as_listed if obj["kind"] == "ModelDeployment"]
        assert sorted(map(_key, whole.deployments)) == sorted(map(_key, deployments))
        assert all(obj in as_listed for obj in [*whole.bindings, *whole.deployments])
    assert check.pods == [slim_pod(pod) for pod in source.list(POD, None, "kvcache.gpustack.ai/inject=true")]
    assert [pod for pod in check.pods if pod["metadata"]["name"] == "inj"] == [
        {"metadata": {"name": "inj", "namespace": "team-a", "labels": {"kvcache.gpustack.ai/inject": "true"}},
         "spec": {"containers": [{"name": "main", "args": ["--x"]}]}}]


def _key(obj: dict) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]


def test_listed_pods_are_slimmed_to_what_judging_reads():
    """verify keeps identity, labels, annotations, owners and argv of each listed Pod, not the rest."""
    from kubectl_kvdtype._sources.model import slim_pod

    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "n", "labels": {"a": "b"}, "annotations": {"c": "d"},
                        "ownerReferences": [{"kind": "ReplicaSet", "name": "rs"}], "managedFields": [{"big": 1}]},
           "spec": {"containers": [{"name": "main", "command": ["vllm"], "args": ["--x"], "env": [{"name": "E"}]},
                                   "odd"], "volumes": [{"name": "v"}]},
           "status": {"phase": "Running"}}
    assert slim_pod(pod) == {
        "metadata": {"name": "p", "namespace": "n", "labels": {"a": "b"}, "annotations": {"c": "d"},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "rs"}]},
        "spec": {"containers": [{"name": "main", "command": ["vllm"], "args": ["--x"]}, "odd"]},
    }
    assert slim_pod({"spec": "oops"}) == {"metadata": {}, "spec": {}}

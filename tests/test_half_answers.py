"""Never GO on a half answer (issue 40). A kind that could not be read and could hold what the
verdict depends on (a workload kind whose Pod templates may pass the flag; the Setting ``verify``
judges by) makes the run INCOMPLETE: exit 4, before 1, whatever ``--exit-zero`` and ``--fail-on``
say; a fleet with such a context is INCOMPLETE too. And a LIST answered ``"items": null`` (how a Go
server writes an empty list) is an empty list. Through the real kubectl against the fake API server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _support import EXAMPLES, SETTING, SYSTEM, documents, kvdtype, report, seed
from conftest import kubectl_path
from fakekube import FakeKube

pytestmark = pytest.mark.e2e

PARTIAL = 4
#: The examples' one Binding every consumer accepts, with those consumers: preflight finds it GO.
CLEAN = {"chat", "qwen-chat", "qwen-chat-sglang", "qwen-chat-server-r0-m0", "shared-dram", SETTING}


def _only_a_flagged_deployment_template(fake: FakeKube) -> None:
    """The cluster's one flagged object is a Deployment's Pod template (team-c's vllm-batch)."""
    seed(fake, [obj for obj in documents(EXAMPLES / "team-c.yaml")
                if obj["kind"] == "Deployment" and obj["metadata"]["name"] == "vllm-batch"])


# --- a single run --------------------------------------------------------------------------------

@pytest.mark.parametrize("extra", [(), ("--exit-zero",), ("--fail-on", "warning"), ("--ignore", "kind-not-examined")])
def test_preflight_with_deployments_forbidden_is_incomplete_never_go(fake, kube_env, extra):
    _only_a_flagged_deployment_template(fake)
    fake.deny("list", "deployments", group="apps")
    table = kvdtype(kube_env, "preflight", "-A", *extra)
    assert table.returncode == PARTIAL, table.stdout + table.stderr
    verdict = table.stdout.splitlines()[-1]
    assert verdict.startswith("INCOMPLETE: deployments.apps could not be read"), verdict
    assert "GO:" not in table.stdout and verdict.split(":")[0] == "INCOMPLETE"
    document = report(kvdtype(kube_env, "preflight", "-A", "-o", "json", *extra))
    assert document["summary"]["verdict"] == "INCOMPLETE"
    assert document["summary"]["incomplete"] == ["deployments.apps"]


def test_preflight_incomplete_wins_over_no_go_and_says_both(cluster, fake):
    fake.deny("list", "cronjobs")
    table = kvdtype(cluster, "preflight", "-A")
    assert table.returncode == PARTIAL, table.stderr
    verdict = table.stdout.splitlines()[-1]
    assert verdict.startswith("INCOMPLETE: cronjobs.batch could not be read") and "error finding(s)" in verdict
    document = report(kvdtype(cluster, "preflight", "-A", "-o", "json"))
    assert document["summary"]["verdict"] == "INCOMPLETE" and document["summary"]["incomplete"] == ["cronjobs.batch"]
    assert document["summary"]["findings"]["errors"] > 0


def test_preflight_reads_whole_is_go_exit_0(fake, kube_env):
    seed(fake, [d for d in documents(EXAMPLES) if d["metadata"]["name"] in CLEAN])
    result = kvdtype(kube_env, "preflight", "-A")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith("GO: ")
    assert report(kvdtype(kube_env, "preflight", "-A", "-o", "json"))["summary"]["incomplete"] == []


@pytest.mark.parametrize("extra", [(), ("--exit-zero",)])
def test_find_flags_with_a_kind_forbidden_is_incomplete(cluster, fake, extra):
    fake.deny("list", "cronjobs")
    result = kvdtype(cluster, "find-flags", "-A", "-o", "json", *extra)
    assert result.returncode == PARTIAL, result.stderr
    document = report(result)
    assert document["summary"]["incomplete"] == ["cronjobs.batch"]
    assert ("role-flag", "qwen-flagged") in {(f["code"], f["object"]["name"]) for f in document["findings"]}


def test_verify_with_the_setting_forbidden_is_incomplete(fake, kube_env):
    seed(fake, [d for d in documents(EXAMPLES) if d["metadata"]["name"] in CLEAN])
    fake.deny("get", "settings")
    result = kvdtype(kube_env, "verify", "-A", "-o", "json")
    assert result.returncode == PARTIAL, result.stderr
    document = report(result)
    assert document["summary"]["incomplete"] == ["settings.gpustack.ai"]
    (finding,) = [f for f in document["findings"] if f["code"] == "kind-not-examined"]
    assert finding["object"] == {"kind": "Setting", "namespace": SYSTEM, "name": SETTING}


def test_check_needs_every_kind_it_reads_and_says_so_with_exit_3(cluster, fake):
    fake.deny("list", "pods")
    result = kvdtype(cluster, "check", "-A")
    assert result.returncode == 3 and result.stdout == "", result.stderr
    assert "pods" in result.stderr and "403" in result.stderr


# --- a fleet ----------------------------------------------------------------------------------------

def _fleet_env(tmp_path: Path, fakes: dict[str, FakeKube]) -> dict:
    config: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [],
                    "current-context": next(iter(fakes))}
    for name, fake in fakes.items():
        one = json.loads(Path(fake.write_kubeconfig(tmp_path / f"{name}.json", context=name,
                                                    user=f"u-{name}")).read_text())
        for section in ("clusters", "users", "contexts"):
            config[section] += one[section]
    (tmp_path / "kubeconfig").write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECTL_KUBERC")}
    env.update(KUBECONFIG=str(tmp_path / "kubeconfig"), HOME=str(tmp_path), NO_COLOR="1",
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return env


def _run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_path(), "kvdtype", *args], env=env, text=True, capture_output=True, timeout=60)


def test_a_fleet_with_an_incomplete_context_is_incomplete(tmp_path):
    clean, partial, findings = FakeKube(token="a"), FakeKube(token="b"), FakeKube(token="c")
    with clean, partial, findings:
        seed(clean, [d for d in documents(EXAMPLES) if d["metadata"]["name"] in CLEAN])
        _only_a_flagged_deployment_template(partial)
        partial.deny("list", "deployments", group="apps")
        seed(findings, documents(EXAMPLES))
        env = _fleet_env(tmp_path, {"clean": clean, "partial": partial, "findings": findings})
        both = _run(env, "preflight", "-A", "--contexts", "clean,partial")
        assert both.returncode == PARTIAL, both.stdout + both.stderr
        last = both.stdout.splitlines()[-1]
        assert last.startswith("Fleet verdict: INCOMPLETE:") and "incomplete: partial" in last, last
        assert last.endswith("; exit 4."), last
        assert _run(env, "preflight", "-A", "--contexts", "clean,partial", "--exit-zero").returncode == PARTIAL
        document = json.loads(_run(env, "preflight", "-A", "--contexts", "clean,partial", "-o", "json").stdout)
        assert document["summary"]["verdict"] == "INCOMPLETE" and document["summary"]["exitStatus"] == PARTIAL
        assert document["summary"]["incomplete"] == ["partial"]
        assert {e["context"]: e["exitStatus"] for e in document["contexts"]} == {"clean": 0, "partial": PARTIAL}
        # The same precedence as one run: incomplete before failing findings, then 0.
        three = _run(env, "preflight", "-A", "--contexts", "clean,partial,findings")
        assert three.returncode == PARTIAL and three.stdout.splitlines()[-1].startswith("Fleet verdict: INCOMPLETE")
        assert _run(env, "preflight", "-A", "--contexts", "clean,findings").returncode == 1
        assert _run(env, "preflight", "-A", "--contexts", "clean").returncode == 0


# --- "items": null ------------------------------------------------------------------------------------

def test_a_list_answered_items_null_is_an_empty_list(fake, kube_env):
    seed(fake, [d for d in documents(EXAMPLES) if d["kind"] in ("Setting",)])
    fake.answer({"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBindingList",
                 "metadata": {"resourceVersion": "7"}, "items": None}, method="GET", path="kvcachepoolbindings$",
                times=None)
    result = kvdtype(kube_env, "check", "-A")
    assert result.returncode == 0, result.stderr
    assert "No KVCachePoolBindings found in any namespace." in result.stderr
    document = report(kvdtype(kube_env, "check", "-A", "-o", "json"))
    assert document["items"] == [] and document["summary"]["bindings"] == 0
    # Not a List of the kind asked for, or no items key at all: still no answer, exit 3.
    fake.clear_faults()
    fake.answer({"kind": "KVCachePoolBindingList", "metadata": {}}, method="GET", path="kvcachepoolbindings$",
                times=None)
    assert kvdtype(kube_env, "check", "-A").returncode == 3

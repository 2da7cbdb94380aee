"""``kubectl kvdtype check`` through real kubectl against the fake API server, and offline."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable

import pytest
import yaml

from _support import (
    EXAMPLES,
    SETTING,
    assert_one_clean_line,
    codes,
    direct,
    documents,
    kvdtype,
    paged,
    report,
    seed,
)


def test_every_finding_code_on_the_examples(cluster):
    result = kvdtype(cluster, "check", "-A", "-o", "json")
    assert result.returncode == 1, result.stderr
    found = report(result)
    assert found["kind"] == "CheckReport"
    assert sorted(codes(found)) == sorted([
        ("dtype-rejected", "team-a/legacy"),
        ("dtype-auto", "team-a/scratch"),
        ("binding-unused", "team-a/scratch"),
        ("dtype-rejected", "team-b/half"),
        ("dtype-rejected", "team-b/mixed"),
        # vLLM 0.29.0's recorded parser lists turboquant_4bit_nc, not turboquant_4bit (issue 27)
        ("dtype-rejected", "team-b/turbo"),
        ("binding-missing", "team-b/qwen-orphan"),
        ("engine-unknown", "team-b/trt-chat"),
        # a version that is no recorded release: the parser that stood in is named
        ("engine-version-unrecorded", "team-a/qwen-chat-sglang"),
    ])
    by_key = {(f["code"], f["object"]["name"]): f for f in found["findings"]}
    legacy = by_key[("dtype-rejected", "legacy")]
    assert (legacy["severity"], legacy["engine"], legacy["engineVersion"], legacy["suggestion"]) == (
        "error", "vLLM", "0.29.0", "bfloat16")
    mixed = by_key[("dtype-rejected", "mixed")]
    assert (mixed["engine"], mixed["suggestion"]) == ("SGLang", "fp8_e4m3")
    assert by_key[("dtype-rejected", "half")]["suggestion"] is None
    assert by_key[("binding-missing", "qwen-orphan")]["binding"] == "gone"
    assert by_key[("binding-missing", "qwen-orphan")]["object"]["kind"] == "ModelDeployment"
    assert by_key[("engine-unknown", "trt-chat")]["severity"] == "warning"
    assert by_key[("binding-unused", "scratch")]["severity"] == "info"
    unrecorded = by_key[("engine-version-unrecorded", "qwen-chat-sglang")]
    assert (unrecorded["severity"], unrecorded["engine"], unrecorded["engineVersion"], unrecorded["judgedAs"]) == (
        "info", "SGLang", "v0.5.18.post1", "0.5.18")
    for finding in found["findings"]:
        assert set(finding) >= {"code", "severity", "object", "message"}
        assert finding["message"].endswith(".")


def test_items_verdicts_consumers_and_upgrade_summary(cluster):
    found = report(kvdtype(cluster, "check", "-A", "-o", "json"))
    verdicts = {(i["namespace"], i["name"]): i["verdict"] for i in found["items"]}
    assert verdicts == {
        ("team-a", "chat"): "ok", ("team-a", "legacy"): "rejected", ("team-a", "scratch"): "auto",
        ("team-b", "half"): "rejected", ("team-b", "mixed"): "rejected", ("team-b", "turbo"): "rejected",
        ("team-c", "chat-c"): "ok", ("team-c", "sg"): "ok",  # team-c holds the find-flags/verify cases
    }
    chat = next(i for i in found["items"] if i["name"] == "chat")
    assert (chat["dtype"], chat["pool"], chat["domain"]) == ("fp8_e4m3", "shared-dram", "qwen-72b-v2")
    assert {(c["kind"], c["name"], c["engine"], c["engineVersion"]) for c in chat["consumers"]} == {
        ("ModelDeployment", "qwen-chat", "vLLM", "0.29.0"),
        ("ModelDeployment", "qwen-chat-sglang", "SGLang", "v0.5.18.post1"),
    }
    mixed = next(i for i in found["items"] if i["name"] == "mixed")
    assert {c["kind"] for c in mixed["consumers"]} == {"ModelDeployment", "Pod"}
    scratch = next(i for i in found["items"] if i["name"] == "scratch")
    assert scratch["domain"] == "default"  # an omitted domain name is stored as "default"
    summary = found["summary"]
    # Pool-attached deployments: qwen-chat(2) qwen-chat-sglang(3) qwen-legacy(3) qwen3-vllm(2)
    # qwen3-half(1) qwen3-turbo(1) qwen-orphan(1) trt-chat(1); qwen-batch is not attached.
    # team-c: qwen-flagged(2) qwen-same(1) qwen-twice(1) qwen-skip(1) qwen-abbrev(1) qwen-pd(2, its
    # take-over decode role not counted) sglang-underscore(1); qwen-detached is not attached.
    assert summary["upgrade"] == {"rollingDeployments": 15, "replacedReplicas": 23}
    assert summary["setting"]["value"] == "true"
    assert summary["findings"] == {"errors": 5, "warnings": 2, "info": 2, "ignored": 0}


def test_oracle_guide_step1_lists_the_same_bindings(cluster, kubectl):
    """The upgrade guide's Step 1 command, run by real kubectl, lists what check lists."""
    guide = kubectl("get", "kvcachepoolbindings", "-A", "-o",
                    "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,DTYPE:.spec.domain.dtype")
    assert guide.returncode == 0, guide.stderr
    rows = [tuple(line.split()) for line in guide.stdout.splitlines()[1:] if line.strip()]
    found = report(kvdtype(cluster, "check", "-A", "-o", "json"))
    assert sorted(rows) == sorted((i["namespace"], i["name"], i["dtype"]) for i in found["items"])
    assert len(rows) == 8


def test_offline_gives_the_same_report_as_live(cluster):
    live = report(kvdtype(cluster, "check", "-A", "-o", "json"))
    offline = direct(cluster, "check", "-f", str(EXAMPLES), "-o", "json")
    assert offline.returncode == 1
    assert json.loads(offline.stdout) == live


def test_offline_reads_stdin_and_single_files(cluster):
    text = (EXAMPLES / "team-a.yaml").read_text()
    from_stdin = direct(cluster, "check", "-f", "-", "-o", "json", input=text)
    from_file = direct(cluster, "check", "-f", str(EXAMPLES / "team-a.yaml"), "-o", "json")
    assert json.loads(from_stdin.stdout) == json.loads(from_file.stdout)
    assert {i["name"] for i in json.loads(from_file.stdout)["items"]} == {"chat", "legacy", "scratch"}


def test_yaml_output_is_the_json_document(cluster):
    as_json = report(kvdtype(cluster, "check", "-A", "-o", "json"))
    as_yaml = yaml.safe_load(kvdtype(cluster, "check", "-A", "-o", "yaml").stdout)
    assert as_yaml == as_json


def test_table_namespace_column_only_across_namespaces(cluster):
    wide = kvdtype(cluster, "check", "-A")
    lines = wide.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAMESPACE", "NAME", "DTYPE"]
    assert "VERDICT" in lines[0] and "FIX" in lines[0]
    assert any("SEVERITY" in line and "MESSAGE" in line for line in lines)
    assert "The upgrade rolls 15 pool-attached ModelDeployment(s) (23 replica(s))" in lines[-1]
    narrow = kvdtype(cluster, "check", "-n", "team-a")
    assert narrow.stdout.splitlines()[0].split()[:2] == ["NAME", "DTYPE"]
    assert "\x1b[" not in wide.stdout  # no colour off a terminal


def test_wide_adds_columns_and_no_headers_drops_them(cluster):
    wide = kvdtype(cluster, "check", "-A", "-o", "wide").stdout.splitlines()[0]
    assert "DOMAIN" in wide and "CONSUMER NAMES" in wide
    bare = kvdtype(cluster, "check", "-n", "team-a", "--no-headers").stdout
    assert "NAME" not in bare and "SEVERITY" not in bare and "upgrade rolls" not in bare
    assert bare.splitlines()[0].split()[:2] == ["chat", "fp8_e4m3"]


def test_namespace_from_context_and_flags_on_either_side(fake, kube_env, tmp_path):
    seed(fake, documents(EXAMPLES))
    kube_env["KUBECONFIG"] = str(fake.write_kubeconfig(tmp_path / "ctx", namespace="team-b"))
    from_context = report(kvdtype(kube_env, "check", "-o", "json"))
    assert {i["namespace"] for i in from_context["items"]} == {"team-b"}
    before = report(kvdtype(kube_env, "-n", "team-a", "-o", "json", "check"))
    after = report(kvdtype(kube_env, "check", "-n", "team-a", "-o", "json"))
    assert before == after
    assert {i["namespace"] for i in after["items"]} == {"team-a"}


def test_exit_codes_zero_one_ignore_and_exit_zero(cluster):
    assert kvdtype(cluster, "check", "-A").returncode == 1
    assert kvdtype(cluster, "check", "-A", "--exit-zero").returncode == 0
    ignoring = kvdtype(cluster, "check", "-A", "--ignore", "dtype-rejected", "--ignore", "binding-missing",
                       "-o", "json")
    assert ignoring.returncode == 0
    document = report(ignoring)
    assert not {c for c, _ in codes(document)} & {"dtype-rejected", "binding-missing"}
    assert document["summary"]["findings"]["ignored"] == 5
    clean = kvdtype(cluster, "check", "-n", "team-a", "--ignore", "dtype-rejected")
    assert clean.returncode == 0  # warnings and info alone never fail


def test_a_clean_namespace_exits_zero(fake, kube_env):
    seed(fake, [o for o in documents(EXAMPLES)
                if o["metadata"].get("name") in ("chat", "qwen-chat", "qwen-chat-sglang")])
    result = kvdtype(kube_env, "check", "-n", "team-a", "-o", "json")
    assert result.returncode == 0, result.stdout
    # SGLang v0.5.18.post1 is no recorded release: the one finding says which parser stood in
    assert codes(report(result)) == [("engine-version-unrecorded", "team-a/qwen-chat-sglang")]


def test_v1alpha1_only_cluster(tmp_path, kube_env):
    from fakekube import FakeKube

    with FakeKube(groups_versions={"worker.gpustack.ai": ("v1alpha1",)}) as old:
        seed(old, documents(EXAMPLES))
        kube_env["KUBECONFIG"] = str(old.write_kubeconfig(tmp_path / "old"))
        found = report(kvdtype(kube_env, "check", "-A", "-o", "json"))
        assert len(found["items"]) == 8
        asked = [(r.path, r.status) for r in old.requests
                 if "kvcachepoolbindings" in r.path or r.path == "/apis/worker.gpustack.ai"]
        # v1 first (a cluster with the operator serves it), then discovery, then the version it names
        assert asked[asked.index(("/apis/worker.gpustack.ai/v1/kvcachepoolbindings", 404)) + 1:] in (
            [("/apis/worker.gpustack.ai", 200), ("/apis/worker.gpustack.ai/v1alpha1/kvcachepoolbindings", 200)],
            [("/apis/worker.gpustack.ai/v1alpha1/kvcachepoolbindings", 200)])  # another LIST's 404 asked it
        assert [path for path, _ in asked].count("/apis/worker.gpustack.ai") == 1


def test_strange_shapes_are_judged_not_crashed(fake, kube_env):
    seed(fake, [
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
         "metadata": {"name": "odd", "namespace": "team-a"}},  # no spec at all
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
         "metadata": {"name": "odd-md", "namespace": "team-a"},
         "spec": {"engine": {"name": "vLLM", "version": None}, "kvCache": {"poolRef": {"name": "odd"}},
                  "roles": [{"name": "s", "extraArgs": "--kv-cache-dtype fp8", "command": None, "replicas": "2"},
                            "not-a-role"]}},
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
         "metadata": {"name": "no-spec", "namespace": "team-a"}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "p", "namespace": "team-a", "labels": {"kvcache.gpustack.ai/inject": "true"}},
         "spec": {"containers": "oops"}},
    ])
    result = kvdtype(kube_env, "check", "-n", "team-a", "-o", "json")
    assert "Traceback" not in result.stderr
    document = report(result)
    assert ("dtype-unknown", "team-a/odd") in codes(document)
    assert ("binding-missing", "team-a/p") in codes(document)  # opted in, names no Binding
    assert ("engine-unknown", "team-a/p") in codes(document)
    assert document["summary"]["upgrade"] == {"rollingDeployments": 1, "replacedReplicas": 2}


def test_paging_reads_every_object_with_one_list_per_page(fake, kube_env):
    bindings = [
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
         "metadata": {"name": f"b{i:04d}", "namespace": "team-a"},
         "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": f"d{i}", "dtype": "bfloat16"}}}
        for i in range(1203)
    ]
    seed(fake, bindings)
    fake.clear_log()
    found = report(kvdtype(paged(kube_env), "check", "-A", "-o", "json"))
    assert len(found["items"]) == 1203
    lists = [r for r in fake.requests if r.path.endswith("/kvcachepoolbindings")]
    # 500 (kubectl's chunk), then the other 703 in one page: as many as PAGE_BYTES holds of these
    from kubectl_kvdtype._sources.cluster import MAX_PAGE_SIZE, PAGE_SIZE

    assert len(lists) == 2 and lists[0].query.get("limit") == str(PAGE_SIZE)
    assert 703 <= int(lists[1].query["limit"]) <= MAX_PAGE_SIZE
    # Unless pages are asked for, the direct transport reads the LIST in one request, as it comes.
    fake.clear_log()
    assert report(kvdtype(kube_env, "check", "-A", "-o", "json")) == found
    lists = [r for r in fake.requests if r.path.endswith("/kvcachepoolbindings")]
    assert len(lists) == 1 and "limit" not in lists[0].query and "continue" not in lists[0].query


def _two_pages_of_bindings(fake) -> None:
    seed(fake, [
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
         "metadata": {"name": f"b{i:04d}", "namespace": "team-a"}, "spec": {"domain": {"dtype": "bfloat16"}}}
        for i in range(700)
    ])


def test_expired_continue_token_restarts_the_list(fake, kube_env):
    _two_pages_of_bindings(fake)
    fake.expire_continue(times=1)
    found = report(kvdtype(paged(kube_env), "check", "-A", "-o", "json"))
    assert len(found["items"]) == 700
    assert len({i["name"] for i in found["items"]}) == 700


def test_a_continue_token_expiring_on_every_read_ends_the_run_in_one_sentence(fake, kube_env):
    _two_pages_of_bindings(fake)
    fake.expire_continue(times=3)
    result = kvdtype(paged(kube_env), "check", "-A", "-o", "json")
    assert result.returncode == 3 and result.stdout == ""
    assert_one_clean_line(result.stderr)
    assert "list kvcachepoolbindings.worker.gpustack.ai in all namespaces" in result.stderr
    assert "410 Expired" in result.stderr and "3 reads" in result.stderr
    lists = [r for r in fake.requests if r.path.endswith("/kvcachepoolbindings")]
    assert [r.status for r in lists] == [200, 410] * 3


def test_429_and_500_are_retried(fake, kube_env):
    seed(fake, documents(EXAMPLES))
    fake.fail(429, path=r"/kvcachepoolbindings$", times=1, retry_after=0)
    fake.fail(500, path=r"/modeldeployments$", times=2)
    result = kvdtype(kube_env, "check", "-A", "-o", "json")
    assert result.returncode == 1, result.stderr
    assert len(report(result)["items"]) == 8
    statuses = [r.status for r in fake.requests if r.path.endswith("/modeldeployments")]
    assert statuses == [500, 500, 200]


def test_setting_unreadable_is_a_warning_not_a_failure(kube_env, tmp_path):
    from fakekube import FakeKube

    with FakeKube(groups_versions={"gpustack.ai": None}) as old:
        seed(old, [o for o in documents(EXAMPLES) if o["kind"] != "Setting"])
        kube_env["KUBECONFIG"] = str(old.write_kubeconfig(tmp_path / "nosetting"))
        result = kvdtype(kube_env, "check", "-A", "-o", "json")
        assert result.returncode == 1
        assert report(result)["summary"]["setting"]["value"] is None
        assert "Warning: cannot read the Setting" in result.stderr


def test_a_kubectl_json_dump_checks_offline_like_the_live_cluster(cluster, kubectl, tmp_path):
    """``kubectl get ... -A -o json`` (a List whose built-in items kubectl completes) as -f input."""
    dump = kubectl("get", "kvcachepoolbindings,modeldeployments,pods,settings", "-A", "-o", "json")
    assert dump.returncode == 0, dump.stderr
    (tmp_path / "dump.json").write_text(dump.stdout)
    offline = direct(cluster, "check", "-f", str(tmp_path / "dump.json"), "-o", "json")
    assert json.loads(offline.stdout) == report(kvdtype(cluster, "check", "-A", "-o", "json"))


def test_impersonation_header_is_sent(cluster, fake):
    fake.clear_log()
    kvdtype(cluster, "check", "-A", "--as", "alice")
    assert fake.requests
    assert all(r.headers.get("Impersonate-User") == "alice" for r in fake.requests if r.path.startswith("/apis/"))


def test_take_over_only_deployments_are_not_judged(fake, kube_env):
    """A role with its own command gets no operator argument, so no dtype to reject."""
    seed(fake, [
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
         "metadata": {"name": "b", "namespace": "team-a"},
         "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": "d", "dtype": "bf16"}}},
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
         "metadata": {"name": "own-argv", "namespace": "team-a"},
         "spec": {"engine": {"name": "vLLM", "version": "0.29.0"}, "kvCache": {"poolRef": {"name": "b"}},
                  "roles": [{"name": "s", "command": ["vllm", "serve", "m"], "replicas": 2}]}},
    ])
    document = report(kvdtype(kube_env, "check", "-n", "team-a", "-o", "json"))
    assert [i["verdict"] for i in document["items"]] == ["ok"]
    assert document["findings"] == []
    assert document["summary"]["upgrade"] == {"rollingDeployments": 1, "replacedReplicas": 0}
    # The same deployment with one managed role is judged, and rejected.
    fake.update("modeldeployments", "team-a", "own-argv",
                {"spec": {"roles": [{"name": "s", "command": ["vllm"], "replicas": 2}, {"name": "t", "replicas": 1}]}})
    again = report(kvdtype(kube_env, "check", "-n", "team-a", "-o", "json"))
    assert [(c, o) for c, o in codes(again)] == [("dtype-rejected", "team-a/b")]


def _while_held(fake, path: str, seen: Callable[[list], list], run: Callable[[], Any]) -> tuple[Any, list]:
    """``run()`` with the first GET of ``path`` held until ``seen`` finds what it looks for in the
    requests the server has had (up to 20 s: then the request is let go, and nothing was seen
    while it was held): what ``run`` gave, and what ``seen`` found."""
    held = fake.hold("GET", path)
    found: list = []

    def watch() -> None:
        try:
            held.wait_arrived()
            for _ in range(400):
                found[:] = seen(list(fake.requests))
                if found:
                    break
                time.sleep(0.05)
        finally:
            held.release()

    thread = threading.Thread(target=watch)
    thread.start()
    result = run()
    thread.join()
    return result, found


@pytest.mark.parametrize("command", ["check", "verify", "preflight"])
def test_the_setting_is_read_beside_the_lists(cluster, fake, command):
    """The Setting's GET does not wait for the LISTs (``kinds.list_many``): it reaches the server
    while the Bindings' LIST is still unanswered."""
    result, seen = _while_held(fake, r"/kvcachepoolbindings$",
                               lambda requests: [r for r in requests if r.path.endswith(f"/settings/{SETTING}")],
                               lambda: kvdtype(cluster, command, "-A", "-o", "json"))
    assert result.returncode in (0, 1, 4), result.stderr
    assert seen, "the Setting was read only once the LISTs were answered"


def _owned_by(kind: str, name: str, owner_kind: str, owner: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {
        "name": name, "namespace": "team-a",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner_kind, "name": owner, "uid": f"u-{owner}",
                             "controller": True}]}}


def test_the_owners_of_a_bindings_injected_consumers_are_read_side_by_side_a_level_at_a_time(cluster, fake):
    """Naming who manages a rejected Binding's injected Pods climbs Pod -> ReplicaSet ->
    Deployment (``ManagerReader.read_owners``): the three ReplicaSets are asked for while the first
    is still unanswered, each owner once however many Pods it has, and the Deployments after them."""
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"w-{r}-{p}", "namespace": "team-a", "labels": {"kvcache.gpustack.ai/inject": "true"},
        "annotations": {"kvcache.gpustack.ai/binding": "b", "kvcache.gpustack.ai/engine": "vLLM"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"rs-{r}", "uid": f"u-rs-{r}",
                             "controller": True}]},
        "spec": {"containers": [{"name": "vllm", "command": ["vllm", "serve", "m"]}]}} for r in range(3) for p in "ab"]
    seed(fake, [
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
         "metadata": {"name": "b", "namespace": "team-a"},
         "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": "d", "dtype": "bf16"}}},
        *pods,
        *(_owned_by("ReplicaSet", f"rs-{r}", "Deployment", f"web-{r}") for r in range(3)),
        *({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
            "name": f"web-{r}", "namespace": "team-a", "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": f"web-{r}"}}} for r in range(3))])
    fake.clear_log()

    def both(requests: list) -> list:  # ReplicaSets read one after another never arrive while one is held
        found = [r.path for r in requests if r.path.endswith(("/rs-1", "/rs-2"))]
        return found if len(found) == 2 else []

    result, others = _while_held(fake, r"/replicasets/rs-0$", both,
                                 lambda: kvdtype(cluster, "check", "-n", "team-a", "-o", "json"))
    assert result.returncode == 1, result.stderr
    assert sorted(others) == [f"/apis/apps/v1/namespaces/team-a/replicasets/rs-{r}" for r in (1, 2)]
    owners = [r.path.rsplit("/", 2)[-2:] for r in fake.requests
              if r.method == "GET" and ("/replicasets/" in r.path or "/deployments/" in r.path)]
    assert sorted(map(tuple, owners)) == sorted([("replicasets", f"rs-{r}") for r in range(3)]
                                                + [("deployments", f"web-{r}") for r in range(3)])  # each once
    times = {tuple(r.path.rsplit("/", 2)[-2:]): r.time for r in fake.requests}
    assert min(times[("deployments", f"web-{r}")] for r in range(3)) > \
        max(times[("replicasets", f"rs-{r}")] for r in range(3))  # the next level once this one is read
    consumers = json.loads(result.stdout)["findings"][0]["consumers"]
    assert {c["name"]: c["managedBy"][0]["object"]["name"] for c in consumers} == {
        f"w-{r}-{p}": f"web-{r}" for r in range(3) for p in "ab"}


@pytest.mark.parametrize("command", ["check", "verify"])
def test_the_owners_are_read_while_the_deployments_are_still_coming_and_only_those_named(cluster, fake, command):
    """The owners of the injected Pods check and verify name are asked for while the
    ModelDeployments' LIST is still unanswered (``managed.read_owners_early``):
    their round trip is no longer one after the LISTs. Only those: a Pod the report does not name
    (its engine accepts the Binding's dtype, and runs it) has its owner left unread, and a Pod owned
    by a ModelDeployment is climbed from the LIST, never a GET. The climb goes on from what was read
    early (the StatefulSet's own owner)."""
    def pod(name: str, binding: str, owner_kind: str, owner: str, api: str = "apps/v1", injected: str = "") -> dict:
        """``injected``: the webhook's copy of the dtype and its record (a real server refuses a Pod's own)."""
        annotations = {"kvcache.gpustack.ai/binding": binding, "kvcache.gpustack.ai/engine": "vLLM"}
        if injected:
            annotations["kvcache.gpustack.ai/injected"] = json.dumps({"binding": binding, "engine": "vllm"})
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": "team-a", "labels": {"kvcache.gpustack.ai/inject": "true"},
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": api, "kind": owner_kind, "name": owner, "uid": f"u-{owner}",
                                 "controller": True}]},
            "spec": {"containers": [{"name": "vllm", "command": ["vllm", "serve", "m"],
                                     "args": ["--kv-cache-dtype", injected] if injected else []}]}}

    def binding(name: str, dtype: str) -> dict:
        return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
                "metadata": {"name": name, "namespace": "team-a"},
                "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": name, "dtype": dtype}}}

    seed(fake, [binding("rejected", "bf16"), binding("accepted", "fp8"),
                pod("named", "rejected", "StatefulSet", "named-set"),
                pod("fine", "accepted", "StatefulSet", "fine-set", injected="fp8"),
                pod("of-a-deployment", "rejected", "ModelDeployment", "md", "worker.gpustack.ai/v1"),
                _owned_by("StatefulSet", "named-set", "Deployment", "web"),
                _owned_by("StatefulSet", "fine-set", "Deployment", "web"),
                {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
                 "metadata": {"name": "md", "namespace": "team-a"},
                 "spec": {"engine": {"name": "vLLM", "version": "0.29.0"}, "kvCache": {"poolRef": {"name": "accepted"}},
                          "roles": [{"name": "server", "replicas": 1}]}}])
    fake.clear_log()
    result, seen = _while_held(fake, r"/modeldeployments$",
                               lambda requests: [r.path for r in requests if "/statefulsets/" in r.path],
                               lambda: kvdtype(cluster, command, "-n", "team-a", "-o", "json"))
    assert result.returncode == 1, result.stderr
    assert seen == ["/apis/apps/v1/namespaces/team-a/statefulsets/named-set"], "not read while the LIST was held"
    owners = [r.path.rsplit("/", 2)[-2:] for r in fake.requests if r.method == "GET" and "/apis/apps/" in r.path]
    assert sorted(map(tuple, owners)) == [("deployments", "web"), ("statefulsets", "named-set")]  # each once
    findings = json.loads(result.stdout)["findings"]
    about = {f["object"]["name"] for f in findings if f["object"]["kind"] == "Pod"}
    about |= {c["name"] for f in findings if f["object"]["name"] == "rejected" for c in f.get("consumers") or []}
    assert about >= {"named", "of-a-deployment"} and "fine" not in about

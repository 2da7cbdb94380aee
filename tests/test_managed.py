"""Objects someone else manages (issue 38), through the real kubectl on the fake API server: every
case of ``_managed_cases`` (Helm; Argo CD by annotation and by label with self-heal on, off, a manual
sync, or unreadable; Flux Kustomizations suspended and not, and a HelmRelease over a Helm release;
server-side-apply managedFields from several managers; a controller owner; a Pod whose top owner
Helm manages) shows its finding and message, its to-do items, the refusal of every write with
nothing written, and the takeover with --force-managed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from _managed_cases import (
    ARGOCD_NS,
    CASES,
    PLAIN,
    Case,
    assert_owned_after_the_fix,
    cluster_objects,
    deployment,
    expected_managers,
    findings_in,
    flag_finding,
    managed_object,
    managers_of,
)
from _support import SETTING, SYSTEM, WRITES, assert_one_clean_line, seed
from conftest import kubectl_path
from fakekube import GITOPS_GROUPS, FakeKube

pytestmark = pytest.mark.e2e

IDS = [case.id for case in CASES]
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def _env(fake: FakeKube, where: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECTL_KUBERC"):
        env.pop(name, None)
    env.update(KUBECONFIG=str(fake.write_kubeconfig(where / "kubeconfig")), KUBECACHEDIR=str(where / "cache"),
               HOME=str(where), NO_COLOR="1")
    env["PATH"] = os.pathsep.join([str(Path(kubectl_path()).parent), str(Path(sys.executable).parent),
                                   env.get("PATH", "")])
    return env


def _started(cases: tuple[Case, ...] = CASES, groups=GITOPS_GROUPS) -> FakeKube:
    fake = FakeKube(groups_versions=groups).start()
    seed(fake, cluster_objects(cases))
    for case in cases:
        for verb, resource, namespace, group in case.denied:
            fake.deny(verb, resource, namespace=namespace, group=group)
    return fake


def kvdtype(env: dict, where: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_path(), "kvdtype", *args], env=env, cwd=where, text=True, capture_output=True,
                          timeout=120)


@pytest.fixture(scope="module")
def gitops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeKube, dict, Path]]:
    """One cluster holding every case, Argo CD's and Flux's CRDs installed; read, never written."""
    where = tmp_path_factory.mktemp("gitops")
    fake = _started()
    try:
        yield fake, _env(fake, where), where
    finally:
        fake.stop()


@pytest.fixture(scope="module")
def judged(gitops) -> dict[str, dict]:
    """The JSON reports of the judging subcommands over the whole cluster."""
    fake, env, where = gitops
    fake.clear_log()
    found = {}
    for command in ("find-flags", "check", "preflight", "verify"):
        result = kvdtype(env, where, command, "-A", "-o", "json")
        assert result.returncode == 1, result.stderr  # every namespace has error findings
        found[command] = json.loads(result.stdout)
    found["requests"] = fake.request_log()
    return found


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[tuple[FakeKube, dict, Path]]:
    """A cluster of its own for a test that writes."""
    fake = _started()
    try:
        yield fake, _env(fake, tmp_path), tmp_path
    finally:
        fake.stop()


# --- Judging ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_find_flags_names_the_managers_of_each_flagged_object(judged, case):
    finding = flag_finding(judged["find-flags"], case)
    kind = "Pod" if case.pod else "ModelDeployment"
    if case.pod:  # the managers are the top owner's: the Deployment above its ReplicaSet
        assert {m["object"]["name"] for m in finding["managedBy"]} == {"vllm-batch"}
    (item,) = [i for i in judged["find-flags"]["items"] if i["namespace"] == case.id and i["kind"] == kind]
    assert item["managedBy"] == finding["managedBy"]


@pytest.mark.parametrize("case", [c for c in CASES if not c.pod], ids=[c.id for c in CASES if not c.pod])
def test_check_names_the_managers_of_a_rejected_bindings_consumers(judged, case):
    (finding,) = findings_in(judged["check"], "dtype-rejected", case.id)
    (consumer,) = finding["consumers"]
    assert managers_of(consumer["managedBy"]) == expected_managers(case, "rebind")
    assert f"Its consumer ModelDeployment {case.id}/qwen is managed by" in finding["message"]
    assert "managedBy" not in finding  # the Binding itself is nobody's


@pytest.mark.parametrize("case", [c for c in CASES if not c.pod], ids=[c.id for c in CASES if not c.pod])
def test_verify_names_the_managers_of_each_replicas_deployment(judged, case):
    (finding,) = findings_in(judged["verify"], "replica-missing-flag", case.id)
    assert managers_of(finding["managedBy"]) == expected_managers(case, "verify")
    assert {m["object"]["kind"] for m in finding["managedBy"]} == {"ModelDeployment"}
    assert "Its owner ModelDeployment" in finding["message"]


def test_nothing_is_said_of_objects_nobody_manages(judged):
    for command in ("find-flags", "check", "preflight", "verify"):
        plain = [f for f in judged[command]["findings"] if f["object"]["namespace"] == PLAIN]
        assert plain, command
        assert all("managedBy" not in f and "managed by" not in f["message"] for f in plain), command
        assert all(all("managedBy" not in c for c in f.get("consumers") or []) for f in plain)
    items = [i for i in judged["preflight"]["items"] if i["object"]["namespace"] == PLAIN]
    assert [i["action"] for i in items] == ["rebind", "remove-flag"]
    assert items[0]["command"] == "kubectl kvdtype escape rebind chat -n plain --dtype bfloat16"


def test_each_managers_object_is_read_once_and_only_when_named(judged):
    requests = judged["requests"]
    lists = [r for r in requests if r[0] == "GET" and r[1] == "/apis/argoproj.io/v1alpha1/applications"]
    # one LIST per run serves every tracking id that names no namespace (argocd/...), however many objects
    assert len(lists) == 4
    gets = [r for r in requests if r[1] == f"/apis/argoproj.io/v1alpha1/namespaces/{ARGOCD_NS}/applications/argo-annot"]
    assert gets == []
    kustomizations = [r for r in requests if r[1].endswith("/kustomizations/apps")]
    assert len(kustomizations) == 4  # once per run, for all the findings about the object it manages


def test_verify_wait_reads_each_managers_object_once_for_all_its_polls(gitops):
    fake, env, where = gitops
    fake.clear_log()
    result = kvdtype(env, where, "verify", "-n", "flux-on", "--wait=1s", "--poll-interval", "0.1", "-o", "json")
    assert result.returncode == 1 and json.loads(result.stdout)["summary"]["wait"]["polls"] > 1, result.stderr
    assert len([r for r in fake.request_log() if r[1].endswith("/kustomizations/apps")]) == 1


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_preflight_sends_each_change_to_its_source(judged, case):
    items = judged["preflight"]["items"]
    mine = [i for i in items if i["object"]["namespace"] == case.id and i["action"] not in ("pause-manager",
                                                                                            "resume-manager")]
    actions = [i["action"] for i in mine]
    if not case.pod:
        assert actions == ["change-source", "rebind", "remove-flag"], actions
        source, rebind, remove = mine
        assert source["command"] == "kubectl kvdtype escape rebind chat -n %s --dtype bfloat16 -o yaml > " \
                                    "rebind-chat.yaml" % case.id
        assert rebind["command"] == f"kubectl kvdtype escape rebind chat -n {case.id} --dtype bfloat16 --apply " \
                                    "--force-managed"
        assert source["order"] < rebind["order"]
        assert managers_of(rebind["managedBy"]) == expected_managers(case, "rebind")
    else:
        remove = next(i for i in mine if i["action"] == "remove-flag" and i["object"]["kind"] == "Pod")
    assert remove["what"].startswith("in the source, not the cluster: delete ")
    assert managers_of(remove["managedBy"]) == expected_managers(case)
    if case.id == "helm":
        assert remove["command"] == "helm get values qwen-chart -n helm"
    pauses = [i for i in items if i["action"] == "pause-manager" and i["command"].startswith(case.pauses or "-")]
    resumes = [i for i in items if i["action"] == "resume-manager" and case.resumes and case.resumes in
               (i["command"] or "")]
    if case.pauses:
        (pause,) = pauses
        assert pause["order"] < min(i["order"] for i in mine)  # first of all
    else:
        assert pauses == []
    if case.resumes:
        (resume,) = resumes
        assert resume["order"] > max(i["order"] for i in mine)  # last of all
    assert [i["order"] for i in items] == list(range(1, len(items) + 1))


def test_a_manager_is_paused_before_anything_and_resumed_after_everything(judged):
    actions = [i["action"] for i in judged["preflight"]["items"]]
    first_other = next(n for n, a in enumerate(actions) if a != "pause-manager")
    last_other = max(n for n, a in enumerate(actions) if a != "resume-manager")
    assert set(actions[:first_other]) == {"pause-manager"} and set(actions[last_other + 1:]) == {"resume-manager"}
    # a suspended Kustomization and a manual sync need no pause: nothing puts the old objects back
    paused = [i["object"]["name"] for i in judged["preflight"]["items"] if i["action"] == "pause-manager"]
    assert "apps-paused" not in paused and "argo-manual" not in paused and "argo-annot" in paused


def test_wide_junit_and_sarif_carry_themanagers_of(gitops):
    fake, env, where = gitops
    wide = kvdtype(env, where, "find-flags", "-n", "argo-annot", "-o", "wide").stdout.splitlines()
    assert "MANAGED BY" in wide[0]
    assert "Argo CD Application argocd/argo-annot (at-once)" in wide[1]
    junit = ElementTree.fromstring(kvdtype(env, where, "find-flags", "-n", "flux-on", "-o", "junit").stdout)
    failures = [f.get("message") or "" for f in junit.iter("failure")]
    assert any("It is managed by Flux Kustomization flux-system/apps (reconciling" in m for m in failures), failures
    sarif = json.loads(kvdtype(env, where, "find-flags", "-n", "ssa", "-o", "sarif").stdout)
    (result,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "role-flag"]
    assert [m["name"] for m in result["properties"]["managedBy"]] == ["ci-deploy"]
    assert "field manager ci-deploy" in result["message"]["text"]
    plain = kvdtype(env, where, "check", "-n", PLAIN, "-o", "wide").stdout.splitlines()
    assert "MANAGED BY" in plain[0] and "<none>" in plain[1]


# --- Writes: refused, then taken over ---------------------------------------------------------------

def _writes(fake: FakeKube) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in fake.requests if r.method in WRITES and r.path != SSAR]


def test_fix_refuses_every_managed_object_and_writes_nothing(fresh):
    fake, env, where = fresh
    fake.clear_log()
    result = kvdtype(env, where, "find-flags", "-A", "--fix", "--apply", "--yes")
    assert result.returncode == 3, result.stderr
    assert_one_clean_line(result.stderr)
    assert _writes(fake) == [] and not list(where.glob("kvdtype-backup-*"))
    message = result.stderr
    for case in CASES:
        kind, namespace, name = managed_object(case)
        assert f"{kind} {namespace}/{name} (patch) is managed by" in message, case.id
    assert f"ModelDeployment {PLAIN}/qwen" not in message
    assert "pause Argo CD Application argocd/argo-annot (kubectl patch applications.argoproj.io argo-annot -n argocd" \
        in message
    assert "run again with --force-managed" in message
    plan = json.loads(kvdtype(env, where, "find-flags", "-A", "--fix", "-o", "json").stdout)
    noted = {f["object"]["namespace"] for f in plan["findings"] if f["code"] == "managed-object"}
    assert noted == {case.id for case in CASES}


def test_fix_with_force_managed_writes_warns_and_journals_themanagers_of(fresh):
    fake, env, where = fresh
    fake.clear_log()
    result = kvdtype(env, where, "find-flags", "-A", "--fix", "--apply", "--yes", "--force-managed")
    assert result.returncode == 0, result.stderr
    for case in CASES:
        assert case.warns in result.stderr, case.id
    (backup,) = where.glob("kvdtype-backup-fix-*")
    journal = json.loads((backup / "journal.json").read_text())
    recorded = {(m["object"]["namespace"], m["object"]["name"]): managers_of(m["managedBy"])
                for m in journal["managers"]}
    for case in CASES:
        kind, namespace, name = managed_object(case)
        assert recorded[(namespace, name)] == expected_managers(case)
    patches = [r for r in fake.requests if r.method == "PATCH"]
    assert len(patches) == len(CASES) + 2 and all(r.query.get("fieldManager") == "kubectl-kvdtype" for r in patches)
    for case in CASES:  # the managedFields name the plugin for the field it changed, and nobody else
        kind, namespace, name = managed_object(case)
        assert_owned_after_the_fix(kind, fake.get(kind, namespace, name)["metadata"]["managedFields"])
    ssa = fake.get("ModelDeployment", "ssa", "qwen")["metadata"]["managedFields"]
    assert [m["manager"] for m in ssa if m["manager"] in ("ci-deploy", "kubectl-edit")] == ["ci-deploy"]
    assert next(m for m in ssa if m["manager"] == "ci-deploy")["fieldsV1"] == {"f:spec": {"f:model": {"f:name": {}}}}


@pytest.mark.parametrize("case_id", ["argo-annot", "flux-off", "ssa"])
def test_rebind_refuses_a_managed_deployment_then_takes_it_over(tmp_path, case_id):
    case = next(c for c in CASES if c.id == case_id)
    fake = _started((case,))
    try:
        env = _env(fake, tmp_path)
        rebind = ("escape", "rebind", "chat", "-n", case.id, "--dtype", "bfloat16", "--apply", "--yes")
        fake.clear_log()
        refused = kvdtype(env, tmp_path, *rebind)
        assert refused.returncode == 3, refused.stderr
        assert_one_clean_line(refused.stderr)
        assert f"ModelDeployment {case.id}/qwen (delete and create again) is managed by" in refused.stderr
        assert "The plan's -o yaml prints the new Binding and ModelDeployments" in refused.stderr
        assert _writes(fake) == [] and not list(tmp_path.glob("kvdtype-backup-*"))
        assert fake.get("Setting", SYSTEM, SETTING)["spec"]["value"] == "true"
        taken = kvdtype(env, tmp_path, *rebind, "--force-managed")
        assert taken.returncode == 0, taken.stderr
        assert (case.rebind_warns or case.warns) in taken.stderr
        (backup,) = tmp_path.glob("kvdtype-backup-*")
        journal = json.loads((backup / "journal.json").read_text())
        assert [managers_of(m["managedBy"]) for m in journal["managers"]] == [expected_managers(case, "rebind")]
        assert journal["managers"][0]["write"] == "delete and create again"
        recreated = fake.get("ModelDeployment", case.id, "qwen")
        assert recreated["spec"]["kvCache"]["poolRef"]["name"] == "chat-bfloat16"
        assert [m["manager"] for m in recreated["metadata"]["managedFields"]] == ["kubectl-kvdtype"]
        written = [r for r in fake.requests if r.method in ("POST", "PATCH") and r.path != SSAR]
        assert written and all(r.query.get("fieldManager") == "kubectl-kvdtype" for r in written)
    finally:
        fake.stop()


def test_restore_refuses_to_recreate_a_managed_object_then_takes_it_over(tmp_path):
    case = next(c for c in CASES if c.id == "helm")
    fake = _started(())
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "helm"}})
    try:
        env = _env(fake, tmp_path)
        backup = tmp_path / "kvdtype-backup-helm-chat-20260101T000000000000Z"
        backup.mkdir()
        (backup / "modeldeployment-helm-qwen.yaml").write_text(yaml.safe_dump(deployment("helm", case.metadata)))
        fake.clear_log()
        refused = kvdtype(env, tmp_path, "escape", "restore", str(backup), "--apply", "--yes")
        assert refused.returncode == 3, refused.stderr
        assert "ModelDeployment helm/qwen (create again) is managed by Helm release helm/qwen-chart" in refused.stderr
        assert _writes(fake) == [] and fake.get("ModelDeployment", "helm", "qwen") is None
        taken = kvdtype(env, tmp_path, "escape", "restore", str(backup), "--apply", "--yes", "--force-managed")
        assert taken.returncode == 0, taken.stderr
        assert case.warns in taken.stderr
        restored = fake.get("ModelDeployment", "helm", "qwen")
        assert restored["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert [m["manager"] for m in restored["metadata"]["managedFields"]] == ["kubectl-kvdtype"]
    finally:
        fake.stop()


# --- A cluster without Argo CD's and Flux's CRDs ----------------------------------------------------

def test_a_manager_whose_kind_is_not_installed_is_said_and_never_fails_the_run(tmp_path):
    fake = FakeKube().start()  # argoproj.io and the Flux groups are not served
    try:
        seed(fake, cluster_objects(tuple(c for c in CASES if c.id in ("argo-annot", "argo-label", "flux-on"))))
        env = _env(fake, tmp_path)
        fake.clear_log()
        result = kvdtype(env, tmp_path, "find-flags", "-A", "-o", "json")
        assert result.returncode == 1, result.stderr
        findings = {f["object"]["namespace"]: f for f in json.loads(result.stdout)["findings"]
                    if f["code"] == "role-flag"}
        (argo,) = findings["argo-annot"]["managedBy"]
        assert (argo["manager"], argo["readable"], argo["reverts"]) == ("Argo CD", False, "unknown")
        assert argo["unreadable"] == ("applications.argoproj.io is not installed on this cluster (Argo CD may run on "
                                      "another cluster)")
        assert "managedBy" not in findings["argo-label"]  # the instance label alone is nobody's
        (flux,) = findings["flux-on"]["managedBy"]
        assert flux["unreadable"] == "kustomizations.kustomize.toolkit.fluxcd.io is not installed on this cluster"
        asked = [path for _, path, _ in fake.request_log() if "argoproj" in path or "fluxcd" in path]
        assert sorted(set(asked)) == ["/apis/argoproj.io", "/apis/kustomize.toolkit.fluxcd.io"]  # discovery, once each
        assert len(asked) == 2
        refused = kvdtype(env, tmp_path, "find-flags", "-A", "--fix", "--apply", "--yes")
        assert refused.returncode == 3 and "ModelDeployment argo-annot/qwen (patch)" in refused.stderr
    finally:
        fake.stop()


def test_an_unmanaged_cluster_asks_nothing_of_argo_cd_or_flux(cluster, fake, tmp_path):
    fake.clear_log()
    for command in ("check", "find-flags", "verify", "preflight"):
        kvdtype(cluster, tmp_path, command, "-A", "-o", "json")
    assert [path for _, path, _ in fake.request_log() if "argoproj" in path or "fluxcd" in path] == []

"""Objects someone else manages (issue 38) on the real API server, through the real kubectl: the
cases of ``_managed_cases`` stored in kube-apiserver, Argo CD's and Flux's kinds served as CRDs
(none of their controllers runs: the plugin only reads their objects), and what only a real server
decides: the ``managedFields`` it writes for server-side apply and for updates (the ``ssa`` case is
made by two managers, not written by hand), a real 403 for an Application the user may not read,
a kind that is not installed, and who owns the fields after the plugin's takeover.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Iterator, Optional

import pytest
import yaml

from _controlplane import RBAC, Cluster, ControlPlane, documents
from _managed_cases import (
    ARGOCD_NS,
    CASES,
    FLUX_NS,
    PLAIN,
    Case,
    _pool,
    assert_owned_after_the_fix,
    binding,
    deployment,
    expected_managers,
    findings_in,
    flag_finding,
    managed_object,
    managers_of,
    objects,
)
from conftest import kubectl_path

pytestmark = pytest.mark.real

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#: (group, version, kind, plural) of the managers' kinds the plugin reads.
GITOPS_KINDS = (("argoproj.io", "v1alpha1", "Application", "applications"),
                ("kustomize.toolkit.fluxcd.io", "v1", "Kustomization", "kustomizations"),
                ("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases"))
#: The user who judges: the reader's rules but a GET of Argo CD's Applications, which it may do in
#: the argocd namespace only (a Role there), so the ``*-denied`` cases meet a real 403; the LIST over
#: all namespaces, which finds an Application a tracking id names without its namespace, it keeps.
JUDGE = "limited"
SSA = next(case for case in CASES if case.id == "ssa")


def _crd(group: str, version: str, kind: str, plural: str) -> dict:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                               "singular": kind.lower()},
                     "versions": [{"name": version, "served": True, "storage": True, "schema": schema}]}}


def _install_gitops(plane: ControlPlane) -> None:
    crds = [_crd(*kind) for kind in GITOPS_KINDS]
    for crd in crds:
        plane.create(crd)
    plane._wait_established([crd["metadata"]["name"] for crd in crds])


def _uninstall_gitops(plane: ControlPlane) -> None:
    """The CRDs deleted, and waited for: the API server deletes their objects first, and the tests
    after this module find the cluster as it was (discovery without these groups)."""
    names = [f"{plural}.{group}" for group, _, _, plural in GITOPS_KINDS]
    for name in names:
        plane.request("DELETE", f"{CRD_PATH}/{name}")
    deadline = time.monotonic() + 60
    while any(plane.request("GET", f"{CRD_PATH}/{name}").status != 404 for name in names):
        assert time.monotonic() < deadline, "the gitops CRDs were not deleted in 60 s"
        time.sleep(0.2)


def _judge_rules() -> list[dict]:
    (reader,) = [d for d in documents(RBAC) if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "kvdtype-reader"]
    rules = [rule for rule in reader["rules"] if "argoproj.io" not in rule.get("apiGroups", [])]
    return rules + [{"apiGroups": ["argoproj.io"], "resources": ["applications"], "verbs": ["list"]}]


def _may_read_applications_in(plane: ControlPlane, namespace: str) -> None:
    """A Role and RoleBinding letting JUDGE read Applications in ``namespace`` alone."""
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + namespace
    plane._checked("POST", f"{rbac}/roles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "applications"},
        "rules": [{"apiGroups": ["argoproj.io"], "resources": ["applications"], "verbs": ["get"]}]})
    plane._checked("POST", f"{rbac}/rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "applications"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "applications"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": JUDGE}]})
    plane._wait_allowed(JUDGE, {"verb": "get", "group": "argoproj.io", "resource": "applications",
                                "namespace": namespace})


def _seed(plane: ControlPlane, admin: Cluster, cases: tuple[Case, ...]) -> None:
    """Every case's objects as a cluster holds them from before the upgrade (the Setting off while
    they are written: the operator's rules refuse a role's own flag today). The ``ssa`` case's
    deployment is written by two managers the way they would: ``team-bot`` creates it (an update),
    then ``ci-deploy`` server-side applies its roles, changed, and takes them."""
    managers_kinds = {kind for _, _, kind, _ in GITOPS_KINDS}  # stored once their CRDs are installed
    stored = [_pool()] + [obj for case in (*cases, None) for obj in objects(case) if obj["kind"] not in managers_kinds]
    extras = [obj for case in cases for obj in case.extra]
    for namespace in sorted({o["metadata"]["namespace"] for o in stored + extras if o["metadata"].get("namespace")}):
        plane.ensure_namespace(namespace)
    plane.set_setting("false")
    try:
        for obj in stored:
            if obj["kind"] == "ModelDeployment" and obj["metadata"]["namespace"] == SSA.id:
                _twomanagers_of(plane, admin, obj)
            else:
                plane.apply([obj])
    finally:
        plane.set_setting("true")


def _twomanagers_of(plane: ControlPlane, admin: Cluster, deployment: dict) -> None:
    created = copy.deepcopy(deployment)
    del created["metadata"]["managedFields"]
    created["spec"]["roles"][0]["replicas"] = 2
    plane._checked("POST", plane.resource("ModelDeployment").path(SSA.id), created,
                   query={"fieldManager": "team-bot"})
    applied = {"apiVersion": deployment["apiVersion"], "kind": "ModelDeployment",
               "metadata": {"name": deployment["metadata"]["name"], "namespace": SSA.id},
               "spec": {"roles": deployment["spec"]["roles"]}}
    result = admin.kubectl("apply", "--server-side", "--field-manager=ci-deploy", "--force-conflicts", "-f", "-",
                           input=yaml.safe_dump(applied))
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def gitops(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Every case stored; find-flags run once before Argo CD's and Flux's kinds are installed, then
    each judging subcommand once after, as JUDGE. Everything made is removed at the end."""
    home = tmp_path_factory.mktemp("real-managed")
    admin = Cluster(control_plane, "default", home, kubectl_path())
    namespaces = sorted({case.id for case in CASES} | {PLAIN, ARGOCD_NS, FLUX_NS})
    control_plane.setting_lag = 0.0
    _seed(control_plane, admin, CASES)
    found: dict = {"admin": admin, "home": home}
    try:
        with control_plane.grant(JUDGE, _judge_rules()):
            judge = Cluster(control_plane, "default", home, kubectl_path())
            found["not-installed"] = _judged(judge, "find-flags")
            _install_gitops(control_plane)
            for extra in (obj for case in CASES for obj in case.extra):
                control_plane.apply([extra])
            _may_read_applications_in(control_plane, ARGOCD_NS)
            for command in ("find-flags", "check", "preflight", "verify"):
                found[command] = _judged(judge, command)
            found["reader"] = _judged(judge, "find-flags", user="reader")
            yield found
    finally:
        _uninstall_gitops(control_plane)
        for namespace in namespaces:
            control_plane.clean(namespace)


def _judged(cluster: Cluster, command: str, user: str = JUDGE) -> dict:
    result = cluster.kvdtype(command, "-A", "-o", "json", user=user)
    assert result.returncode == 1, result.stderr  # every case has error findings
    return json.loads(result.stdout)


# --- Judging ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_find_flags_names_each_manager_as_the_real_server_stores_it(gitops, case):
    flag_finding(gitops["find-flags"], case)


@pytest.mark.parametrize("case", [c for c in CASES if not c.pod], ids=[c.id for c in CASES if not c.pod])
def test_check_and_verify_name_the_managers_of_the_fields_they_would_change(gitops, case):
    (rejected,) = findings_in(gitops["check"], "dtype-rejected", case.id)
    (consumer,) = rejected["consumers"]
    assert managers_of(consumer["managedBy"]) == expected_managers(case, "rebind")
    (replica,) = findings_in(gitops["verify"], "replica-missing-flag", case.id)
    assert managers_of(replica["managedBy"]) == expected_managers(case, "verify")


def test_the_real_servers_managed_fields_make_the_ssa_case(gitops, control_plane):
    """What the ``ssa`` case says rests on managedFields kube-apiserver wrote: ci-deploy applied
    the roles (an atomic list in the CRD's schema), team-bot's create keeps spec.kvCache."""
    stored = control_plane.get("ModelDeployment", SSA.id, "qwen")
    fields = {m["manager"]: (m["operation"], json.dumps(m["fieldsV1"])) for m in stored["metadata"]["managedFields"]}
    assert fields["ci-deploy"][0] == "Apply" and '"f:roles"' in fields["ci-deploy"][1]
    assert fields["team-bot"][0] == "Update" and '"f:poolRef"' in fields["team-bot"][1]
    assert '"f:roles"' not in fields["team-bot"][1]


def test_an_application_the_user_may_not_read_is_the_real_servers_403(gitops):
    (finding,) = findings_in(gitops["find-flags"], "role-flag", "argo-denied")
    (argo,) = finding["managedBy"]
    assert (argo["manager"], argo["readable"], argo["reverts"]) == ("Argo CD", False, "unknown")
    assert "you may not read applications.argoproj.io in namespace argo-denied (403 Forbidden)" in argo["unreadable"]


def test_the_shipped_reader_role_reads_every_managers_object(gitops):
    """manifests/rbac.yaml's kvdtype-reader is enough: no manager is unreadable to it (an
    Application a tracking id names without its namespace is found by a LIST over all of them)."""
    unreadable = [(f["object"]["namespace"], m["name"], m.get("unreadable"))
                  for f in gitops["reader"]["findings"] for m in f.get("managedBy") or [] if m.get("readable") is False]
    assert unreadable == []
    (finding,) = findings_in(gitops["reader"], "role-flag", "argo-annot")
    assert managers_of(finding["managedBy"]) == [("Argo CD", "argo-annot", "at-once")]


def test_a_manager_whose_kind_is_not_installed_is_said(gitops):
    findings = {f["object"]["namespace"]: f for f in gitops["not-installed"]["findings"] if f["code"] == "role-flag"}
    (argo,) = findings["argo-annot"]["managedBy"]
    assert argo["unreadable"] == ("applications.argoproj.io is not installed on this cluster (Argo CD may run on "
                                  "another cluster)")
    (flux,) = findings["flux-on"]["managedBy"]
    assert flux["unreadable"] == "kustomizations.kustomize.toolkit.fluxcd.io is not installed on this cluster"
    assert "managedBy" not in findings["argo-label"]  # the instance label alone is nobody's


def test_preflight_pauses_the_managers_first_and_sends_the_changes_to_their_source(gitops):
    items = gitops["preflight"]["items"]
    actions = [i["action"] for i in items]
    paused = [i["object"]["name"] for i in items if i["action"] == "pause-manager"]
    assert "argo-annot" in paused and "apps" in paused and "apps-paused" not in paused
    first_other = next(n for n, a in enumerate(actions) if a != "pause-manager")
    assert set(actions[:first_other]) == {"pause-manager"}
    sources = {i["object"]["namespace"] for i in items if i["action"] == "change-source"}
    assert {case.id for case in CASES if not case.pod} <= sources and PLAIN not in sources


# --- Writes: refused with nothing written, then taken over ------------------------------------------

def _versions(plane: ControlPlane) -> dict[str, Optional[str]]:
    return {case.id: (plane.get(*managed_object(case)) or {}).get("metadata", {}).get("resourceVersion")
            for case in CASES}


def test_the_fix_refuses_every_managed_object_then_takes_them_over(gitops, control_plane):
    writer = Cluster(control_plane, "default", gitops["home"], kubectl_path())
    before = _versions(control_plane)
    refused = writer.kvdtype("find-flags", "-A", "--fix", "--apply", "--yes", user="writer")
    assert refused.returncode == 3, refused.stderr
    # The writer may read every Application: argo-label-denied's label names none that exists, so
    # it is nobody's (to the judge, refused the GET, it was "possibly" Argo CD's).
    managed = [case for case in CASES if case.id != "argo-label-denied"]
    for case in managed:
        kind, namespace, name = managed_object(case)
        assert f"{kind} {namespace}/{name} (patch) is managed by" in refused.stderr, case.id
    assert "argo-label-denied/qwen" not in refused.stderr and f"{PLAIN}/qwen" not in refused.stderr
    assert _versions(control_plane) == before
    assert not list(Path(gitops["home"]).glob("kvdtype-backup-fix-*"))

    taken = writer.kvdtype("find-flags", "-A", "--fix", "--apply", "--yes", "--force-managed", user="writer")
    assert taken.returncode == 0, taken.stderr
    for case in managed:
        if case.denied:  # the writer may read what the judge was refused: it says what the Application does
            assert f"Argo CD Application {case.id}/apps puts it back at once" in taken.stderr
        else:
            assert case.warns in taken.stderr, case.id
    for case in CASES:  # kube-apiserver's own managedFields: the plugin took the field it changed
        kind, namespace, name = managed_object(case)
        assert_owned_after_the_fix(kind, control_plane.get(kind, namespace, name)["metadata"]["managedFields"])
    ssa = control_plane.get("ModelDeployment", SSA.id, "qwen")["metadata"]["managedFields"]
    # ci-deploy owned nothing but the roles: its entry is gone, and the roles are the plugin's alone
    assert [m["manager"] for m in ssa if '"f:roles"' in json.dumps(m.get("fieldsV1"))] == ["kubectl-kvdtype"]
    assert "ci-deploy" not in {m["manager"] for m in ssa} and "team-bot" in {m["manager"] for m in ssa}
    assert "--kv-cache-dtype" not in json.dumps(control_plane.get("ModelDeployment", SSA.id, "qwen")["spec"])


def test_a_rebind_refuses_a_helm_deployment_then_takes_it_over(real):
    """escape rebind of a Binding whose consumer Helm manages: refused with nothing written (not even
    the Setting switched off), then with --force-managed the deployment is created again, its Helm
    labels kept, and kube-apiserver records the plugin as the only manager of the new object."""
    helm = next(case for case in CASES if case.id == "helm")
    plane, namespace = real.plane, real.namespace
    plane.set_setting("false")
    try:
        real.apply([binding(namespace), deployment(namespace, helm.metadata)])
    finally:
        plane.set_setting("true")
    old = real.get("ModelDeployment", "qwen")
    setting = plane.setting()["metadata"]["resourceVersion"]
    rebind = ("escape", "rebind", "chat", "--dtype", "bfloat16", "--apply", "--yes")

    refused = real.kvdtype(*rebind, user="writer")
    assert refused.returncode == 3, refused.stderr
    assert f"ModelDeployment {namespace}/qwen (delete and create again) is managed by Helm release helm/qwen-chart" \
        in refused.stderr
    assert real.get("ModelDeployment", "qwen")["metadata"]["resourceVersion"] == old["metadata"]["resourceVersion"]
    assert plane.setting()["metadata"]["resourceVersion"] == setting
    assert real.get("KVCachePoolBinding", "chat-bfloat16") is None and not list(real.home.glob("kvdtype-backup-*"))

    taken = real.kvdtype(*rebind, "--force-managed", user="writer")
    assert taken.returncode == 0, taken.stderr
    assert helm.warns in taken.stderr
    moved = real.get("ModelDeployment", "qwen")
    assert moved["metadata"]["uid"] != old["metadata"]["uid"]
    assert moved["spec"]["kvCache"]["poolRef"]["name"] == "chat-bfloat16"
    assert moved["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert [m["manager"] for m in moved["metadata"]["managedFields"]] == ["kubectl-kvdtype"]
    (backup,) = real.home.glob("kvdtype-backup-*")
    journal = json.loads((backup / "journal.json").read_text())
    assert [managers_of(m["managedBy"]) for m in journal["managers"]] == [list(helm.managers)]
    # (Whether the Setting is on again depends on the rest of the cluster: the module's other cases,
    # if they are stored, still hold Bindings that would break an engine.)

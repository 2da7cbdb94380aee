"""The reader of who manages an object (``_sources.managers``), in-process: how each manager is
recognized, which managedFields count, what is said offline, the commands it prints, and the fake's
managedFields bookkeeping the end-to-end tests rely on (tests/test_managed.py runs the rest)."""

from __future__ import annotations

import json

import pytest

from _managed_cases import CASES, cluster_objects, deployment
from _support import in_process
from fakekube.fields import flatten, manager_of, record
from kubectl_kvdtype._judging.managed import changed_fields
from kubectl_kvdtype._sources import managers as _managers
from kubectl_kvdtype._sources.managers import Field, ManagerReader, field_managers, owns, pointer_field, role_args
from kubectl_kvdtype._sources.manifests import ManifestSource

EXTRA_ARGS = role_args("server")


def _entry(manager: str, fields: dict, operation: str = "Apply", **extra: str) -> dict:
    return {"manager": manager, "operation": operation, "fieldsType": "FieldsV1", "fieldsV1": fields, **extra}


@pytest.mark.parametrize("fields, owned", [
    ({"f:spec": {"f:roles": {}}}, True),  # a custom resource's atomic list: the whole of it
    ({"f:spec": {"f:roles": {'k:{"name":"server"}': {"f:extraArgs": {}}}}}, True),
    ({"f:spec": {"f:roles": {'k:{"name":"router"}': {"f:extraArgs": {}}}}}, False),
    ({"f:spec": {"f:roles": {'k:{"name":"server"}': {".": {}, "f:name": {}}}}}, False),  # the entry, not the field
    ({"f:spec": {"f:roles": {'k:{"name":"server"}': {"f:extraArgs": {}, "f:replicas": {}}}}}, True),
    ({"f:spec": {"f:kvCache": {"f:poolRef": {"f:name": {}}}}}, False),
    ({"f:spec": {}}, True),  # the whole spec, atomically
    ({}, False),
])
def test_a_field_is_owned_by_whoever_owns_it_or_an_atomic_parent(fields, owned):
    assert owns(fields, EXTRA_ARGS) is owned


def test_pool_ref_is_owned_through_its_name():
    assert owns({"f:spec": {"f:kvCache": {"f:poolRef": {"f:name": {}}}}}, _managers.POOL_REF)


def test_appliers_and_other_clients_count_and_a_persons_kubectl_and_the_plugin_do_not():
    obj = {"metadata": {"managedFields": [
        _entry("ci-deploy", {"f:spec": {"f:roles": {}}}),
        _entry("kubectl", {"f:spec": {"f:roles": {}}}),  # kubectl apply --server-side: an applier too
        _entry("kubectl-edit", {"f:spec": {"f:roles": {}}}, "Update"),
        _entry("kubectl-client-side-apply", {"f:spec": {"f:roles": {}}}, "Update"),
        _entry("kubectl-kvdtype", {"f:spec": {"f:roles": {}}}, "Update"),
        _entry("terraform", {"f:spec": {"f:roles": {}}}, "Update"),
        _entry("unknown", {"f:spec": {"f:roles": {}}}, "Update"),  # no field manager, no User-Agent: nobody
        _entry("gpustack-operator", {"f:status": {}}, "Update", subresource="status"),
        _entry("argocd-controller", {"f:spec": {"f:model": {}}}),  # owns nothing the plugin changes
    ]}}
    found = field_managers(obj, [EXTRA_ARGS])
    assert [(m.name, m.detail("operation"), m.reverts) for m in found] == [
        ("ci-deploy", "Apply", "next-sync"), ("kubectl", "Apply", "next-sync"), ("terraform", "Update", "unknown")]
    assert found[0].detail("fields") == ["spec.roles[name=server].extraArgs"]


def _reader(*objects: dict) -> ManagerReader:
    return ManagerReader(ManifestSource([dict(o) for o in objects]), offline=True)


def test_offline_an_application_is_named_and_not_read_and_a_bare_instance_label_is_nobodys():
    tracked = deployment("team-a", {"annotations": {
        "argocd.argoproj.io/tracking-id": "team-a:worker.gpustack.ai/ModelDeployment:team-a/qwen"}})
    (argo,) = _reader().managers("ModelDeployment", tracked)
    assert (argo.tool, argo.name, argo.namespace, argo.readable, argo.reverts) == \
        ("Argo CD", "team-a", None, False, "unknown")
    assert argo.unreadable == "not read offline" and argo.said().startswith("Argo CD Application team-a (tracked")
    assert _reader().managers("ModelDeployment", deployment("team-a", {"labels": {
        "app.kubernetes.io/instance": "team-a"}})) == []
    (label,) = _reader().managers("ModelDeployment", deployment("team-a", {"labels": {
        "argocd.argoproj.io/instance": "apps_team-a"}}))
    assert (label.namespace, label.name, label.detail("tracking")) == \
        ("apps", "team-a", "argocd.argoproj.io/instance label")


@pytest.mark.parametrize("tracking", [
    "team-a:worker.gpustack.ai/ModelDeployment:team-a/qwen-original",  # a copy keeps its original's id
    "team-a:apps/Deployment:team-a/qwen",
    "team-a:worker.gpustack.ai/ModelDeployment:team-b/qwen",
    ":worker.gpustack.ai/ModelDeployment:team-a/qwen",
])
def test_a_tracking_id_naming_another_object_is_not_argo_cds(tracking):
    copy = deployment("team-a", {"annotations": {"argocd.argoproj.io/tracking-id": tracking}})
    assert _reader().managers("ModelDeployment", copy) == []


def test_helm_needs_its_release_annotation_and_flux_offline_is_not_read():
    # helm template | kubectl apply: the label, and no release
    rendered = deployment("team-a", {"labels": {"app.kubernetes.io/managed-by": "Helm"}})
    assert _reader().managers("ModelDeployment", rendered) == []
    both = deployment("team-a", {"labels": {"app.kubernetes.io/managed-by": "Helm",
                                            "helm.toolkit.fluxcd.io/name": "qwen",
                                            "helm.toolkit.fluxcd.io/namespace": "flux-system"},
                                 "annotations": {"meta.helm.sh/release-name": "team-a-qwen"}})
    helm, flux = _reader().managers("ModelDeployment", both)
    assert (helm.tool, helm.name, helm.namespace, helm.detail("valuesCommand")) == \
        ("Helm", "team-a-qwen", "team-a", "helm get values team-a-qwen -n team-a")
    assert (flux.tool, flux.kind, flux.unreadable, flux.pause() is not None) == \
        ("Flux", "HelmRelease", "not read offline", True)


def test_a_controller_is_an_owner_reference_with_controller_true_only():
    owned = deployment("team-a", {"ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "just-an-owner", "uid": "1"},
        {"apiVersion": "serving.example.com/v1", "kind": "InferenceApp", "name": "qwen-app", "uid": "2",
         "controller": True}]})
    (controller,) = _reader().managers("ModelDeployment", owned)
    assert controller.title == "its controller InferenceApp team-a/qwen-app" and controller.reverts == "at-once"


def test_a_pods_top_owner_is_climbed_through_what_was_read():
    case = next(c for c in CASES if c.pod)
    objects = [o for o in cluster_objects((case,)) if o["metadata"].get("namespace") == case.id]
    reader = _reader(*objects)
    pod = next(o for o in objects if o["kind"] == "Pod" and "inject" in str(o["metadata"].get("labels")))
    # offline, the ReplicaSet is not a kind -f reads: the chain stops, and nothing is guessed
    assert reader.top_owner("Pod", pod) is None
    known = {(o["kind"], case.id, o["metadata"]["name"]): o for o in objects}
    kind, owner = ManagerReader(ManifestSource([]), offline=True, known=known).top_owner("Pod", pod)
    assert (kind, owner["metadata"]["name"]) == ("Deployment", "vllm-batch")


@pytest.mark.parametrize("name, namespace", [("team a", "argocd"), ("apps", "../kube-system"), ("x;rm", "argocd")])
def test_no_command_is_printed_from_a_name_the_api_server_refuses(name, namespace):
    manager = _managers.Manager("Flux", name, namespace, "Kustomization", "at-once", "reconciling", "its source",
                                readable=True, details=(("suspended", False),))
    assert manager.pause() is None and manager.resume() is None and manager.flux_command("suspend") is None


def test_pause_and_resume_follow_what_was_read():
    def argo(policy):
        return _managers.Manager("Argo CD", "team-a", "argocd", "Application", "at-once", "", "",
                                 readable=policy is not None,
                                 details=(("syncPolicy", policy),) if policy is not None else ())
    assert argo({"automated": False, "selfHeal": False, "prune": False}).pause() is None  # a manual sync
    on = argo({"automated": True, "selfHeal": True, "prune": False})
    assert on.resume() == ("kubectl patch applications.argoproj.io team-a -n argocd --type merge -p "
                           "'{\"spec\":{\"syncPolicy\":{\"automated\":{\"prune\":false,\"selfHeal\":true}}}}'")
    unread = argo(None)
    assert unread.pause() is not None and unread.resume() is None  # its policy is not known: said in words
    suspended = _managers.Manager("Flux", "apps", "flux-system", "Kustomization", "when-resumed", "", "",
                                  details=(("suspended", True),))
    assert suspended.pause() is None
    assert suspended.flux_command("resume") == "flux resume kustomization apps -n flux-system"


def test_a_pointer_becomes_the_field_it_names():
    md = deployment("team-a")
    assert pointer_field(md, "/spec/roles/0/extraArgs") == EXTRA_ARGS
    template = {"spec": {"template": {"spec": {"containers": [{"name": "vllm", "args": []}]}}}}
    assert pointer_field(template, "/spec/template/spec/containers/0/args") == Field(
        ("spec", "template", "spec", "containers", ("name", "vllm"), "args"),
        "spec.template.spec.containers[name=vllm].args")
    assert pointer_field({"spec": {"args": ["a"]}}, "/spec/args/0") == Field(("spec", "args"), "spec.args")


def test_each_finding_asks_about_the_field_its_fix_changes():
    assert changed_fields("ModelDeployment", {"role": "server"}, "role-flag") == [EXTRA_ARGS]
    assert changed_fields("ModelDeployment", {"role": "server"}, "replica-dtype-mismatch") == \
        [_managers.POOL_REF, EXTRA_ARGS]
    assert changed_fields("ModelDeployment", {"role": "injected"}) == [_managers.POOL_REF]
    assert changed_fields("KVCachePoolBinding", {}) == [_managers.BINDING_DTYPE]
    assert [f.label for f in changed_fields("CronJob", {"container": "c"})] == [
        "spec.jobTemplate.spec.template.spec.containers[name=c].args",
        "spec.jobTemplate.spec.template.spec.containers[name=c].command"]


def test_offline_find_flags_names_the_manager_and_reads_nothing_more(tmp_path):
    case = next(c for c in CASES if c.id == "argo-annot")
    (tmp_path / "dump.json").write_text(json.dumps({"kind": "List", "items": cluster_objects((case,))}))
    status, out, err = in_process(["find-flags", "-f", str(tmp_path / "dump.json"), "-o", "json"], environ={})
    assert status == 1, err
    (finding,) = [f for f in json.loads(out)["findings"] if f["object"]["namespace"] == case.id]
    (argo,) = finding["managedBy"]
    assert (argo["name"], argo["readable"], argo["unreadable"]) == ("argo-annot", False, "not read offline")
    assert "the Application cannot be read: not read offline" in finding["message"]


# --- The fake's managedFields (tests/fakekube/fields.py) ---------------------------------------------

def test_the_fake_records_a_writes_fields_under_its_manager_and_takes_them_from_others():
    assert manager_of(None, "kubectl-kvdtype/0.1.0") == "kubectl-kvdtype" and manager_of("m", "x/1") == "m"
    old = deployment("team-a", {"managedFields": [
        _entry("ci-deploy", {"f:spec": {"f:roles": {}, "f:model": {"f:name": {}}}})]})
    new = json.loads(json.dumps(old))
    new["spec"]["roles"][0]["extraArgs"] = []
    entries = record(old, new, "kubectl-kvdtype", keyed=False, api_version="worker.gpustack.ai/v1")
    assert [(e["manager"], e["operation"]) for e in entries] == [("ci-deploy", "Apply"), ("kubectl-kvdtype", "Update")]
    assert entries[0]["fieldsV1"] == {"f:spec": {"f:model": {"f:name": {}}}}
    assert entries[1]["fieldsV1"] == {"f:spec": {"f:roles": {}}}


def test_the_fake_keys_a_built_in_kinds_named_lists():
    pod = {"metadata": {"name": "p", "namespace": "n", "uid": "u"},
           "spec": {"containers": [{"name": "main", "args": ["a"]}]}, "status": {"phase": "Running"}}
    (entry,) = record(None, pod, "kubectl-create", keyed=True, api_version="v1")
    assert flatten(entry["fieldsV1"]) == {("f:spec", "f:containers", 'k:{"name":"main"}', "."),
                                         ("f:spec", "f:containers", 'k:{"name":"main"}', "f:name"),
                                         ("f:spec", "f:containers", 'k:{"name":"main"}', "f:args")}


def test_each_manager_is_recognized_served_by_the_fake_exercised_and_in_the_reference_table():
    """Holds docs/development.md's row "a manager": a manager is its tool in ``_sources.managers``,
    its own object's kind in ``MANAGER_KINDS`` (served by the fake), a case of
    tests/_managed_cases.py expecting it, and a row of docs/reference.md's "Who manages an object"."""
    from _support import ROOT
    from fakekube.resources import RESOURCE_TYPES
    from kubectl_kvdtype._sources.kinds import MANAGER_KINDS

    tools = (_managers.HELM, _managers.ARGOCD, _managers.FLUX, _managers.CONTROLLER, _managers.FIELDS)
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    table = reference.split("### Who manages an object", 1)[1].split("\n\n| field |", 1)[0]
    rows = {line.split("|")[1].strip().lower() for line in table.splitlines() if line.startswith("| ")}
    assert {tool.lower() for tool in tools} <= {row.removeprefix("a ") for row in rows}
    served = {(rt.group, rt.kind) for rt in RESOURCE_TYPES}
    assert {(kind.group, kind.name) for kind in MANAGER_KINDS} <= served
    expected = {who for case in CASES for who, _, _ in (*case.managers, *case.rebinds, *case.verifies)}
    assert set(tools) <= expected, "every manager needs a case in tests/_managed_cases.py"
    extras = {obj["kind"] for case in CASES for obj in case.extra}
    assert {kind.name for kind in MANAGER_KINDS} <= extras


# --- What a judged read keeps of managedFields (_sources.model.without_status) -------------------------

_ROLE_KEYS = ('k:{"name":"server"}', 'k:{"name":"router"}')


@pytest.mark.parametrize("fields", [
    {"f:spec": {"f:roles": {}}},
    {"f:spec": {}},  # the whole spec, atomically: still the whole spec once pruned
    {"f:spec": {"f:model": {"f:name": {}}}},  # nothing judged: no f:spec left, which owns nothing
    {"f:spec": {"f:model": {}, "f:roles": {_ROLE_KEYS[0]: {"f:extraArgs": {}}}}},
    {"f:spec": {"f:kvCache": {"f:poolRef": {"f:name": {}}}, "f:engine": {"f:version": {}}}},
    {"f:spec": {"f:domain": {"f:dtype": {}}, "f:quota": {}}},
    {"f:spec": {"f:domain": {"f:name": {}}}},
    {"f:metadata": {"f:labels": {"f:app": {}}}},
    {},
])
def test_a_judged_read_keeps_every_answer_managed_fields_give(fields):
    """Whatever a manager owns, the fields a judgement asks about (every one changed_fields names
    for a deployment or a Binding) are owned by the same managers before and after the pruning."""
    from kubectl_kvdtype._sources.model import without_status

    asked = {f for code in ("role-flag", "replica-dtype-mismatch", "") for role in ("server", "router", "injected")
             for kind in ("ModelDeployment", "KVCachePoolBinding")
             for f in changed_fields(kind, {"role": role}, code)}
    obj = {"metadata": {"managedFields": [_entry("ci-deploy", json.loads(json.dumps(fields)))]}, "status": {"x": 1}}
    pruned = without_status(json.loads(json.dumps(obj)))
    assert "status" not in pruned
    for field in asked:
        assert [m.name for m in field_managers(pruned, [field])] == [m.name for m in field_managers(obj, [field])]


def test_every_field_a_judgement_asks_about_lies_in_a_branch_the_judged_read_keeps():
    from kubectl_kvdtype._sources.model import JUDGED_SPEC_FIELDS

    asked = {f for code in ("role-flag", "replica-dtype-mismatch", "") for role in ("server", "injected", "")
             for kind in ("ModelDeployment", "KVCachePoolBinding") for f in changed_fields(kind, {"role": role}, code)}
    assert {f"f:{f.steps[1]}" for f in asked if f.steps[0] == "spec"} == set(JUDGED_SPEC_FIELDS)
    assert all(f.steps[0] == "spec" for f in asked)


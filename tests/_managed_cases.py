"""Objects someone else manages (issue 38), as data: each case is a namespace holding one Binding and
one ModelDeployment (or an injected Pod's chain), the labels, annotations, owner references and
managedFields that make a manager of them, the manager's own objects, and what the plugin must say
and do. ``tests/test_managed.py`` runs them through the real kubectl on the fake API server, and
``tests/test_real_managed.py`` on the real control plane (there the ``ssa`` case's managedFields are
made by the managers themselves, and ``case.denied`` is RBAC).

Every case's deployment passes ``--kv-cache-dtype bfloat16`` in its role's ``extraArgs`` (a
``role-flag``, which ``find-flags --fix`` removes without changing the dtype) and attaches a
Binding whose ``bf16`` vLLM 0.29.0 rejects (a ``dtype-rejected``, which ``escape rebind`` moves):
so each case has a finding, a to-do item, a patch and a rebind to refuse or take over.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Optional

ARGOCD_NS = "argocd"
FLUX_NS = "flux-system"
SETTING = "model-deployment-kv-cache-dtype-owned"


@dataclass(frozen=True)
class Case:
    """One way an object is managed, and what the plugin must say about it."""

    id: str
    #: Merged into the ModelDeployment's metadata (or the Deployment's, for ``pod``).
    metadata: dict
    #: The manager's own objects (an Application, a Kustomization).
    extra: tuple[dict, ...] = ()
    #: (verb, resource, namespace, group) denied to the user, as ``fake.deny`` takes them.
    denied: tuple[tuple[str, str, Optional[str], Optional[str]], ...] = ()
    #: The managedBy entries expected, in order: (manager, name, reverts), of the flag's removal
    #: (its role's extraArgs: find-flags, the fix, preflight's remove-flag).
    managers: tuple[tuple[str, str, str], ...] = ()
    #: Where a field manager's fields make a difference, those of a rebind (the deployment's
    #: kvCache.poolRef: check's consumers, escape rebind) and of verify (both fields), when not ``managers``.
    rebinds: tuple[tuple[str, str, str], ...] = ()
    verifies: tuple[tuple[str, str, str], ...] = ()
    #: Words the finding's message must carry (its clause).
    says: tuple[str, ...] = ()
    #: Words the --force-managed warning must carry (of a rebind, when not the same).
    warns: str = ""
    rebind_warns: str = ""
    #: Whether preflight pauses a manager first (the command it prints starts so) and resumes it last.
    pauses: Optional[str] = None
    resumes: Optional[str] = None
    #: The finding's object is a Pod whose top owner (a Deployment) is the managed one.
    pod: bool = False


def _application(name: str, automated: Optional[dict], namespace: str = ARGOCD_NS) -> dict:
    spec: dict = {"project": "default", "destination": {"server": "https://kubernetes.default.svc"},
                  "source": {"repoURL": "https://git.example.com/platform/deploy.git", "path": f"apps/{name}",
                             "targetRevision": "main"}}
    if automated is not None:
        spec["syncPolicy"] = {"automated": automated}
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _kustomization(name: str, suspend: bool) -> dict:
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": FLUX_NS},
            "spec": {"interval": "10m", "path": f"./clusters/prod/{name}", "prune": True, "suspend": suspend,
                     "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}


def _helmrelease(name: str, namespace: str) -> dict:
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"interval": "10m", "chart": {"spec": {"chart": "qwen-chart", "version": "1.4.x",
                                                           "sourceRef": {"kind": "HelmRepository", "name": "charts",
                                                                         "namespace": FLUX_NS}}},
                     "values": {"server": {"extraArgs": ["--kv-cache-dtype", "bfloat16"]}}}}


def _tracking(app: str, namespace: str, name: str = "qwen", kind: str = "worker.gpustack.ai/ModelDeployment") -> dict:
    return {"annotations": {"argocd.argoproj.io/tracking-id": f"{app}:{kind}:{namespace}/{name}"}}


def _flux(name: str) -> dict:
    return {"labels": {"kustomize.toolkit.fluxcd.io/name": name, "kustomize.toolkit.fluxcd.io/namespace": FLUX_NS}}


#: Every case, each in the namespace named by its id.
CASES: tuple[Case, ...] = (
    Case("helm", {"labels": {"app.kubernetes.io/managed-by": "Helm"},
                  "annotations": {"meta.helm.sh/release-name": "qwen-chart", "meta.helm.sh/release-namespace": "helm"}},
         managers=(("Helm", "qwen-chart", "next-sync"),),
         says=("It is managed by Helm release helm/qwen-chart", "helm get values qwen-chart -n helm"),
         warns="Helm release helm/qwen-chart puts it back at its next sync"),
    Case("argo-annot", _tracking("argo-annot", "argo-annot"),
         extra=(_application("argo-annot", {"selfHeal": True, "prune": True}),),
         managers=(("Argo CD", "argo-annot", "at-once"),),
         says=("Argo CD Application argocd/argo-annot (automated sync with self-heal and prune",
               "https://git.example.com/platform/deploy.git, path apps/argo-annot, revision main"),
         warns="Argo CD Application argocd/argo-annot puts it back at once",
         pauses='kubectl patch applications.argoproj.io argo-annot -n argocd --type json -p '
                '\'[{"op":"remove","path":"/spec/syncPolicy/automated"}]\'',
         resumes='kubectl patch applications.argoproj.io argo-annot -n argocd --type merge -p '
                 '\'{"spec":{"syncPolicy":{"automated":{"prune":true,"selfHeal":true}}}}\''),
    Case("argo-label", {"labels": {"app.kubernetes.io/instance": "argo-label"}},
         extra=(_application("argo-label", {"selfHeal": False}),),
         managers=(("Argo CD", "argo-label", "next-sync"),),
         says=("Argo CD Application argocd/argo-label (automated sync without self-heal",
               "app.kubernetes.io/instance label (label tracking)"),
         warns="Argo CD Application argocd/argo-label puts it back at its next sync",
         pauses="kubectl patch applications.argoproj.io argo-label -n argocd --type json",
         resumes='\'{"spec":{"syncPolicy":{"automated":{"prune":false,"selfHeal":false}}}}\''),
    Case("argo-manual", _tracking("argo-manual", "argo-manual"), extra=(_application("argo-manual", None),),
         managers=(("Argo CD", "argo-manual", "next-sync"),),
         says=("(manual sync: the next sync puts a change made here back)",),
         warns="Argo CD Application argocd/argo-manual puts it back at its next sync"),
    Case("argo-denied", _tracking("argo-denied_apps", "argo-denied"),
         extra=(_application("apps", {"selfHeal": True}, namespace="argo-denied"),),
         denied=(("get", "applications", "argo-denied", "argoproj.io"),),
         managers=(("Argo CD", "apps", "unknown"),),
         says=("you may not read applications.argoproj.io in namespace argo-denied (403 Forbidden)",
               "whether it puts a change back is not known"),
         warns="whether Argo CD Application argo-denied/apps puts it back is not known",
         pauses="kubectl patch applications.argoproj.io apps -n argo-denied --type json"),
    Case("argo-label-denied", {"labels": {"app.kubernetes.io/instance": "argo-label-denied_apps"}},
         denied=(("get", "applications", "argo-label-denied", "argoproj.io"),),
         managers=(("Argo CD", "apps", "unknown"),),
         says=("possibly Argo CD Application argo-label-denied/apps", "if an Application of that name exists"),
         warns="whether possibly Argo CD Application argo-label-denied/apps puts it back is not known"),
    Case("flux-on", _flux("apps"), extra=(_kustomization("apps", suspend=False),),
         managers=(("Flux", "apps", "at-once"),),
         says=("Flux Kustomization flux-system/apps (reconciling",
               "GitRepository flux-system, path ./clusters/prod/apps"),
         warns="Flux Kustomization flux-system/apps puts it back at once",
         pauses="kubectl patch kustomizations.kustomize.toolkit.fluxcd.io apps -n flux-system --type merge -p "
                '\'{"spec":{"suspend":true}}\'',
         resumes="kustomizations.kustomize.toolkit.fluxcd.io apps -n flux-system --type merge -p "
                 '\'{"spec":{"suspend":false}}\''),
    Case("flux-off", _flux("apps-paused"), extra=(_kustomization("apps-paused", suspend=True),),
         managers=(("Flux", "apps-paused", "when-resumed"),),
         says=("Flux Kustomization flux-system/apps-paused (suspended: it changes nothing until resumed",),
         warns="Flux Kustomization flux-system/apps-paused is suspended: it puts it back when resumed"),
    Case("flux-helm", {"labels": {"app.kubernetes.io/managed-by": "Helm", "helm.toolkit.fluxcd.io/name": "qwen",
                                  "helm.toolkit.fluxcd.io/namespace": "flux-helm"},
                       "annotations": {"meta.helm.sh/release-name": "flux-helm-qwen",
                                       "meta.helm.sh/release-namespace": "flux-helm"}},
         extra=(_helmrelease("qwen", "flux-helm"),),
         managers=(("Helm", "flux-helm-qwen", "next-sync"), ("Flux", "qwen", "next-sync")),
         says=("Flux HelmRelease flux-helm/qwen (reconciling: its next upgrade puts back what the chart renders)",
               "chart qwen-chart from HelmRepository flux-system/charts, its values"),
         warns="Flux HelmRelease flux-helm/qwen puts it back at its next sync",
         pauses="kubectl patch helmreleases.helm.toolkit.fluxcd.io qwen -n flux-helm --type merge -p "
                '\'{"spec":{"suspend":true}}\'',
         resumes="helmreleases.helm.toolkit.fluxcd.io qwen -n flux-helm --type merge -p "
                 '\'{"spec":{"suspend":false}}\''),
    Case("ssa", {"managedFields": [
        {"manager": "ci-deploy", "operation": "Apply", "apiVersion": "worker.gpustack.ai/v1",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:roles": {}, "f:model": {"f:name": {}}}}},
        {"manager": "team-bot", "operation": "Update", "apiVersion": "worker.gpustack.ai/v1",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:kvCache": {"f:poolRef": {"f:name": {}}}}}},
        {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "worker.gpustack.ai/v1",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:roles": {}}}},
        {"manager": "kubectl-kvdtype", "operation": "Update", "apiVersion": "worker.gpustack.ai/v1",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:kvCache": {}}}},
        {"manager": "gpustack-operator", "operation": "Update", "apiVersion": "worker.gpustack.ai/v1",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}, "subresource": "status"}]},
         managers=(("field manager", "ci-deploy", "next-sync"),),
         rebinds=(("field manager", "team-bot", "unknown"),),
         verifies=(("field manager", "ci-deploy", "next-sync"), ("field manager", "team-bot", "unknown")),
         says=("field manager ci-deploy (it server-side applies spec.roles[name=server].extraArgs",),
         warns="field manager ci-deploy puts it back at its next sync",
         rebind_warns="whether field manager team-bot puts it back is not known (it last wrote spec.kvCache.poolRef"),
    Case("owned", {"ownerReferences": [{"apiVersion": "serving.example.com/v1", "kind": "InferenceApp",
                                        "name": "qwen-app", "uid": "0a1b", "controller": True}]},
         managers=(("controller", "qwen-app", "at-once"),),
         says=("its controller InferenceApp owned/qwen-app (controller: true",
               "its owner InferenceApp owned/qwen-app, which makes it"),
         warns="its controller InferenceApp owned/qwen-app puts it back at once"),
    Case("pod-helm", {"labels": {"app.kubernetes.io/managed-by": "Helm"},
                      "annotations": {"meta.helm.sh/release-name": "batch",
                                      "meta.helm.sh/release-namespace": "pod-helm"}},
         managers=(("Helm", "batch", "next-sync"),), pod=True,
         says=("Its owner Deployment pod-helm/vllm-batch is managed by Helm release pod-helm/batch",),
         warns="Helm release pod-helm/batch puts it back at its next sync"),
)
#: A namespace with the same objects and no manager: nothing is said or refused there.
PLAIN = "plain"


def _pool() -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePool", "metadata": {"name": "shared-dram"},
            "spec": {"backend": "mooncake-dram"}}


def _setting() -> dict:
    return {"apiVersion": "gpustack.ai/v1", "kind": "Setting",
            "metadata": {"name": SETTING, "namespace": "gpustack-system"},
            "spec": {"value": "true"}, "status": {"value": "true", "editable": True}}


def binding(namespace: str) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
            "metadata": {"name": "chat", "namespace": namespace},
            "spec": {"poolRef": {"name": "shared-dram"}, "quota": {"ceiling": "100Gi"},
                     "domain": {"name": f"{namespace}-chat", "blockSize": 64, "dtype": "bf16"}}}


def deployment(namespace: str, metadata: Optional[dict] = None) -> dict:
    md = {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
          "metadata": {"name": "qwen", "namespace": namespace},
          "spec": {"model": {"name": "Qwen/Qwen2.5-7B-Instruct"}, "engine": {"name": "vLLM", "version": "0.29.0"},
                   "kvCache": {"poolRef": {"name": "chat"}, "connector": "Mooncake"},
                   "roles": [{"name": "server", "kind": "Server", "replicas": 1,
                              "instanceType": "gpustack-nvidia-a10g-linux-amd64",
                              "extraArgs": ["--kv-cache-dtype", "bfloat16"]}]}}
    _merge(md["metadata"], metadata or {})
    return md


def _pod_chain(namespace: str, metadata: dict) -> list[dict]:
    """A Deployment (the managed one), its ReplicaSet and an injected Pod that passes the flag."""
    annotations = {"kvcache.gpustack.ai/binding": "chat", "kvcache.gpustack.ai/engine": "vLLM"}
    template = {"metadata": {"labels": {"app": "vllm-batch"}, "annotations": annotations},
                "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.29.0",
                                         "args": ["--kv-cache-dtype", "bfloat16"]}]}}
    workload = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "vllm-batch", "namespace": namespace},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "vllm-batch"}},
                         "template": copy.deepcopy(template)}}
    _merge(workload["metadata"], metadata)
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm-batch", "uid": "d001", "controller": True}
    replicaset = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": "vllm-batch-7d9f", "namespace": namespace, "ownerReferences": [owner]},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "vllm-batch"}},
                           "template": copy.deepcopy(template)}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "vllm-batch-7d9f-abcde", "namespace": namespace,
                        "labels": {"app": "vllm-batch", "kvcache.gpustack.ai/inject": "true"},
                        "annotations": dict(template["metadata"]["annotations"]),
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "vllm-batch-7d9f",
                                             "uid": "r001", "controller": True}]},
           "spec": copy.deepcopy(template["spec"])}
    return [workload, replicaset, pod]


def objects(case: Optional[Case]) -> list[dict]:
    """What a case seeds in its namespace (``case`` None: the plain namespace), its manager's objects too."""
    namespace = case.id if case else PLAIN
    found = [binding(namespace)]
    if case is not None and case.pod:
        found += [deployment(namespace)] + _pod_chain(namespace, case.metadata)
    else:
        found.append(deployment(namespace, case.metadata if case else None))
    return found + [replica(namespace)] + [copy.deepcopy(extra) for extra in (case.extra if case else ())]


def replica(namespace: str) -> dict:
    """A replica of the deployment that runs without the flag (``verify``: replica-missing-flag)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "qwen-server-r0-m0", "namespace": namespace,
                         "labels": {"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": "qwen",
                                    "app.kubernetes.io/component": "server"},
                         "ownerReferences": [{"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
                                              "name": "qwen", "uid": "m001", "controller": True}]},
            "spec": {"containers": [{"name": "main", "image": "vllm/vllm-openai:v0.29.0",
                                     "command": ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"]}]}}


def cluster_objects(cases: tuple[Case, ...] = CASES) -> list[dict]:
    """Every case's objects, the plain namespace's, the pool and the Setting."""
    return [_pool(), _setting()] + [obj for case in (*cases, None) for obj in objects(case)]


def managed_object(case: Case) -> tuple[str, str, str]:
    """(kind, namespace, name) of the object the case's manager manages."""
    return ("Deployment", case.id, "vllm-batch") if case.pod else ("ModelDeployment", case.id, "qwen")


def _merge(into: dict, extra: dict) -> None:
    for key, value in copy.deepcopy(extra).items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            into[key].update(value)
        else:
            into[key] = value


def assert_owned_after_the_fix(kind: str, managed_fields: list[dict]) -> None:
    """Who owns what the fix changed, as kube-apiserver records it: a ModelDeployment's roles (an
    atomic list in its schema) are the plugin's; a Deployment's container args, emptied, are no
    field at all (its Go types omit an empty list), so nobody owns them, the plugin included."""
    mine = [m for m in managed_fields if m["manager"] == "kubectl-kvdtype"]
    if kind == "ModelDeployment":
        assert len(mine) == 1 and mine[0]["operation"] == "Update", managed_fields
        assert '"f:roles": {}' in json.dumps(mine[0]["fieldsV1"]), managed_fields
    else:
        assert mine == [] and all('"f:args"' not in json.dumps(m.get("fieldsV1")) for m in managed_fields), \
            managed_fields


def findings_in(report: dict, code: str, namespace: str, kind: str = "") -> list[dict]:
    """A JSON report's findings of ``code`` about an object in ``namespace`` (of ``kind``)."""
    return [f for f in report["findings"] if f["code"] == code and f["object"]["namespace"] == namespace
            and (not kind or f["object"]["kind"] == kind)]


def managers_of(entries: list[dict]) -> list[tuple[str, str, str]]:
    """(manager, name, reverts) of each ``managedBy`` entry."""
    return [(m["manager"], m["name"], m["reverts"]) for m in entries]


def expected_managers(case: Case, what: str = "flag") -> list[tuple[str, str, str]]:
    """The managers expected of a case for the flag's removal, a ``rebind`` or ``verify``."""
    return list({"rebind": case.rebinds, "verify": case.verifies}.get(what) or case.managers)


def flag_finding(find_flags: dict, case: Case) -> dict:
    """find-flags' one finding of the case's flag, its managers and its message's words checked."""
    code, kind = ("pod-flag", "Pod") if case.pod else ("role-flag", "ModelDeployment")
    (finding,) = findings_in(find_flags, code, case.id, kind)
    assert managers_of(finding["managedBy"]) == expected_managers(case)
    for words in case.says:
        assert words in finding["message"], finding["message"]
    return finding

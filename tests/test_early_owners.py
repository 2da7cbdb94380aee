"""check and verify read the owners of the injected Pods their findings name before the
ModelDeployments (and verify's replicas) have come in (``managed.read_owners_early``, from
``CheckCommand.run`` and ``rollout._poll``). What makes that exact is that the report of the Bindings and the
injected Pods alone (``bindings.pods_judged``; verify's report of an inventory without deployments
or replicas) names the very injected Pods the whole report names. Tied here on the bundled
examples and on any spelling, engine, version or Binding a Pod or a deployment may carry, odd
values among them, and any Setting. On the way: check's summary, which counts what the upgrade
rolls off the consumers (``bindings.rollout_of``), counts what ``model.rollout_counts`` does.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _support import EXAMPLES, documents
from kubectl_kvdtype._judging.bindings import (
    BindingInventory,
    build_check_report,
    consumers_of,
    pods_judged,
    rollout_of,
)
from kubectl_kvdtype._judging.replicas import REPLICA_SELECTOR, PodInventory, build_verify_report
from kubectl_kvdtype._kits.report import Report
from kubectl_kvdtype._sources import model as _model

SYSTEM = "gpustack-system"
TEMPLATES = documents(EXAMPLES)
_DTYPES = ["fp8", "fp8_e4m3", "fp8_e5m2", "bf16", "auto", "float16", "turboquant_4bit", "", None, 8, ["fp8"]]
_ENGINES = ["vLLM", "vllm", "SGLang", "sglang", "TensorRT", "", None, 3]
_VERSIONS = ["0.29.0", "0.8.5", "0.4.6", "99.0.0", "", None, 1.5]


def _kind(objects: list[dict], kind: str) -> list[dict]:
    return [copy.deepcopy(o) for o in objects if isinstance(o, dict) and o.get("kind") == kind]


def _named_pods(report: Report) -> set[tuple[str, str]]:
    """The Pods ``name_managers`` climbs from: those findings are about, and a Binding finding's
    consumers that are Pods."""
    named = {(f.object.namespace or "", f.object.name) for f in report.findings if f.object.kind == "Pod"}
    for finding in report.findings:
        for consumer in finding.fields.get("consumers") or []:
            if isinstance(consumer, dict) and consumer.get("kind") == "Pod":
                named.add((consumer.get("namespace") or "", consumer.get("name") or ""))
    return named


def _labelled(objects: list[dict], key: str, value: str) -> list[dict]:
    """The Pods a LIST with the selector ``key=value`` answers, cut as a live run cuts them."""
    return [_model.slim_pod(p) for p in _kind(objects, "Pod") if _model.labels_of(p).get(key) == value]


def _both(objects: list[dict]) -> tuple[set, set]:
    """check's (Pods named by the whole report, Pods named by the report of Bindings and Pods
    alone), the objects cut as a live run cuts them."""
    bindings = [_model.without_status(b) for b in _kind(objects, "KVCachePoolBinding")]
    deployments = [_model.without_status(d) for d in _kind(objects, "ModelDeployment")]
    pods = _labelled(objects, _model.INJECT_LABEL, "true")
    whole = BindingInventory(bindings, consumers_of(deployments, pods), deployments, None, None, pods)
    assert rollout_of(whole.consumers) == _model.rollout_counts(deployments)  # what the summary says
    return _named_pods(build_check_report(whole, SYSTEM)), _named_pods(pods_judged(bindings, pods, SYSTEM))


def _verified(objects: list[dict], setting: Any) -> tuple[set, set]:
    """verify's (injected Pods named by the whole report, Pods named by the report of the Bindings,
    the injected Pods and the Setting alone)."""
    bindings = {(_model.namespace_of(b), _model.name_of(b)): _model.without_status(b)
                for b in _kind(objects, "KVCachePoolBinding")}
    deployments = [_model.without_status(d) for d in _kind(objects, "ModelDeployment")
                   if _model.is_pool_attached(d)]
    injected = _labelled(objects, _model.INJECT_LABEL, "true")
    key, value = REPLICA_SELECTOR.split("=")
    replicas = _labelled(objects, key, value)
    whole = build_verify_report(PodInventory(deployments, bindings, replicas, injected, setting, None))
    alone = build_verify_report(PodInventory([], bindings, [], injected, setting, None))
    names = {(_model.namespace_of(p), _model.name_of(p)) for p in injected}
    return _named_pods(whole) & names, _named_pods(alone)


_SETTINGS = [None, {"status": {"value": "true"}}, {"status": {"value": "false"}}, {"status": {"value": 7}}]


def test_the_examples_name_the_same_pods_either_way():
    whole, early = _both(TEMPLATES)
    assert whole, "the examples name a Pod (a rejected Binding's injected consumer)"
    assert early == whole
    for setting in _SETTINGS:
        whole, early = _verified(TEMPLATES, setting)
        assert whole, "the examples name an injected Pod verify judges"
        assert early == whole


@st.composite
def varied_clusters(draw: Any) -> list[dict]:
    """The examples with each Binding's dtype, each injected Pod's engine and Binding, and each
    deployment's engine, version and Binding drawn anew, odd values among them."""
    objects = copy.deepcopy(TEMPLATES)
    names = [o["metadata"]["name"] for o in objects if o.get("kind") == "KVCachePoolBinding"] + ["gone", "", None]
    for obj in objects:
        kind = obj.get("kind")
        if kind == "KVCachePoolBinding":
            obj["spec"]["domain"]["dtype"] = draw(st.sampled_from(_DTYPES))
        elif kind == "Pod" and _model.labels_of(obj).get(_model.INJECT_LABEL) == "true":
            annotations = obj["metadata"].setdefault("annotations", {})
            annotations[_model.ENGINE_ANNOTATION] = draw(st.sampled_from(_ENGINES))
            annotations[_model.BINDING_ANNOTATION] = draw(st.sampled_from(names))
        elif kind == "ModelDeployment":
            obj["spec"]["engine"] = {"name": draw(st.sampled_from(_ENGINES)),
                                     "version": draw(st.sampled_from(_VERSIONS))}
            obj["spec"]["kvCache"] = draw(st.sampled_from([{"poolRef": {"name": n}} for n in names] + [None, "x"]))
    return objects


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=varied_clusters(), setting=st.sampled_from(_SETTINGS))
def test_any_cluster_names_the_same_pods_either_way(objects, setting):
    whole, early = _both(objects)
    assert early == whole
    whole, early = _verified(objects, setting)
    assert early == whole

"""Fast tier: ``_model``'s readers take any shape a cluster or a hand-written file can hold."""

from __future__ import annotations

import json

import pytest

from kubectl_kvdtype._engines.records import SGLANG, VLLM
from kubectl_kvdtype._sources import model as _model

pytestmark = pytest.mark.version_sensitive  # argparse, the argv reader, completion or the man page (test_tiers.py)

ODD = [None, 3, 2.5, True, "text", ["a"], {}, {"x": None}]


@pytest.mark.parametrize("odd", ODD)
def test_no_reader_raises_on_an_odd_shape(odd):
    for obj in ({"metadata": odd, "spec": odd, "status": odd}, {"spec": {"roles": odd, "engine": odd,
                                                                          "kvCache": odd, "template": odd}}):
        assert isinstance(_model.name_of(obj), str) and isinstance(_model.namespace_of(obj), str)
        assert isinstance(_model.labels_of(obj), dict) and isinstance(_model.annotations_of(obj), dict)
        _model.binding_dtype(obj), _model.binding_pool(obj), _model.binding_domain(obj)
        _model.deployment_binding(obj), _model.deployment_engine(obj), _model.managed_replicas(obj)
        _model.pod_engine(obj), _model.injected_record(obj), _model.engine_container(obj)
        _model.pod_template(obj), _model.controller_of(obj), _model.setting_values(obj), _model.slim_pod(obj)
        assert _model.roles_of(obj) == [] or all(isinstance(r, dict) for r in _model.roles_of(obj))


def test_dig_stops_at_the_first_non_mapping():
    assert _model.dig({"a": {"b": {"c": 1}}}, "a", "b", "c") == 1
    assert _model.dig({"a": ["b"]}, "a", "b") is None
    assert _model.dig({"a": None}, "a", "b") is None
    assert _model.dig("string", "a") is None


@pytest.mark.parametrize("value, expected", [
    ("fp8", "fp8"), (8, "8"), (0.5, "0.5"), (True, None), (None, None), (["fp8"], None), ({"v": 1}, None)])
def test_text_keeps_strings_and_numbers_only(value, expected):
    assert _model.text(value) == expected


def test_binding_fields_and_the_default_domain():
    binding = {"spec": {"domain": {"dtype": "fp8_e4m3"}, "poolRef": {"name": "shared"}}}
    assert (_model.binding_dtype(binding), _model.binding_pool(binding), _model.binding_domain(binding)) == \
        ("fp8_e4m3", "shared", "default")
    assert _model.binding_domain({"spec": {"domain": {"name": "east"}}}) == "east"
    assert _model.binding_dtype({"spec": {"domain": {"dtype": 8}}}) == "8"  # a number typed unquoted in YAML


def test_pool_attachment_needs_a_kv_cache_mapping():
    assert _model.deployment_binding({"spec": {"kvCache": {"poolRef": {"name": "b"}}}}) == "b"
    assert _model.deployment_binding({"spec": {"kvCache": {}}}) == ""  # attached, Binding unnamed
    assert _model.deployment_binding({"spec": {"kvCache": "b"}}) is None
    assert _model.is_pool_attached({"spec": {"kvCache": {}}}) and not _model.is_pool_attached({"spec": {}})


def test_engines_in_both_shapes_and_any_capitalisation():
    new = _model.deployment_engine({"spec": {"engine": {"name": "sglang", "version": "0.5.18"}}})
    old = _model.deployment_engine({"spec": {"engine": "VLLM", "engineVersion": 0.29}})
    other = _model.deployment_engine({"spec": {"engine": {"name": "tgi"}}})
    assert (new.name, new.declared, new.version) == (SGLANG, "sglang", "0.5.18")
    assert (old.name, old.declared, old.version) == (VLLM, "VLLM", "0.29")
    assert (other.name, other.declared) == (None, "tgi")


@pytest.mark.parametrize("replicas, expected", [
    (3, 3), (0, 0), (-2, 0), ("4", 4), ("four", 1), (True, 1), (None, 1), (2.5, 1)])
def test_role_replicas(replicas, expected):
    assert _model.role_replicas({"replicas": replicas}) == expected


def test_take_over_roles_are_not_managed():
    deployment = {"spec": {"kvCache": {}, "roles": [
        {"name": "a", "replicas": 2}, {"name": "b", "replicas": 3, "command": ["python", "serve.py"]},
        {"name": "c", "command": []}, "not-a-role", {"name": "d", "command": "sh -c serve"}]}}
    assert [_model.role_is_takeover(r) for r in _model.roles_of(deployment)] == [False, True, False, True]
    assert _model.managed_replicas(deployment) == 3  # a (2) + c (1)
    assert _model.rollout_counts([deployment, {"spec": {}}]) == (1, 3)


def test_extra_args_as_written():
    assert _model.role_extra_args({"extraArgs": "--kv-cache-dtype=fp8"}) == ["--kv-cache-dtype=fp8"]
    assert _model.role_extra_args({"extraArgs": ["--a", 1, None, "--b"]}) == ["--a", "--b"]
    assert _model.role_extra_args({"extraArgs": {"a": 1}}) == []


def test_the_webhooks_record_and_the_pods_engine():
    record = {"engine": "vllm", "dtype": "fp8"}
    pod = {"metadata": {"annotations": {_model.INJECTED_ANNOTATION: json.dumps(record)}}}
    assert _model.injected_record(pod) == record
    assert _model.pod_engine(pod).name == VLLM  # no engine annotation: the record's
    unreadable = {"metadata": {"annotations": {_model.INJECTED_ANNOTATION: "{not json"}}}
    assert _model.injected_record(unreadable) == {}  # injected, but the record says nothing
    assert _model.injected_record({"metadata": {"annotations": {_model.INJECTED_ANNOTATION: "[1]"}}}) == {}
    assert _model.injected_record({}) is None
    annotated = {"metadata": {"annotations": {_model.ENGINE_ANNOTATION: "SGLang",
                                              _model.INJECTED_ANNOTATION: json.dumps(record)}}}
    assert _model.pod_engine(annotated).name == SGLANG


def test_containers_the_webhook_targets_and_the_engine_runs_in():
    spec = {"containers": [{"name": "sidecar"}, {"name": "main", "args": ["--x", 3]}, "junk"]}
    pod = {"metadata": {"annotations": {_model.CONTAINER_ANNOTATION: "sidecar"}}, "spec": spec}
    assert _model.target_container(pod, spec) == {"name": "sidecar"}
    assert _model.target_container({}, spec) is None  # two containers, none named: the webhook skips it
    assert _model.target_container({}, {"containers": [{"name": "only"}]}) == {"name": "only"}
    assert _model.engine_container(pod)["name"] == "main"
    assert _model.engine_container({"spec": {"containers": [{"name": "x"}]}}) == {"name": "x"}
    assert _model.argv_of(spec["containers"][1], "args") == ["--x"]
    assert _model.container_fields({"command": "vllm serve", "args": None}) == [("command", []), ("args", [])]


def test_pod_templates_of_every_workload_shape():
    template = {"spec": {"containers": []}}
    assert _model.pod_template({"spec": {"template": template}}) is template
    assert _model.pod_template({"spec": {"jobTemplate": {"spec": {"template": template}}}}) is template
    assert _model.pod_template({"spec": {"template": "x"}}) is None


def test_the_controller_is_the_controlling_owner_else_the_first():
    first, controller = {"kind": "A"}, {"kind": "B", "controller": True}
    assert _model.controller_of({"metadata": {"ownerReferences": [first, controller]}}) is controller
    assert _model.controller_of({"metadata": {"ownerReferences": ["junk", first]}}) is first
    assert _model.controller_of({"metadata": {"ownerReferences": "x"}}) is None


@pytest.mark.parametrize("setting, on", [
    ({"spec": {"value": "true"}}, True), ({"spec": {"value": True}}, True),
    ({"spec": {"value": "false"}}, False), ({"spec": {"value": " FALSE "}}, False),
    ({"spec": {"value": "true"}, "status": {"value": "false"}}, False),  # status is what is in force
    ({"spec": {"value": "maybe"}}, None), ({"spec": {}}, None), (None, None), ({}, None),
])
def test_setting_is_on(setting, on):
    assert _model.setting_is_on(setting) is on


def test_slim_pod_keeps_what_judging_reads_only():
    pod = {"metadata": {"name": "p", "namespace": "ml", "labels": {"a": "b"}, "uid": "u", "managedFields": [1]},
           "spec": {"containers": [{"name": "main", "args": ["--x"], "env": [1], "image": "i"}], "volumes": [1]},
           "status": {"phase": "Running"}}
    assert _model.slim_pod(pod) == {"metadata": {"name": "p", "namespace": "ml", "labels": {"a": "b"}},
                                    "spec": {"containers": [{"name": "main", "args": ["--x"]}]}}


def test_without_status_keeps_all_but_the_status_and_the_manifests_keep_theirs(tmp_path):
    """The projection changes the object it is handed; an offline source hands it a copy of each
    manifest's top level, so a later read still finds what the file says."""
    from kubectl_kvdtype._sources.kinds import BINDING
    from kubectl_kvdtype._sources.manifests import ManifestSource

    binding = {"metadata": {"name": "b", "managedFields": [{"manager": "helm"}]}, "spec": {"domain": {"dtype": "fp8"}},
               "status": {"phase": "Ready", "usedBy": [{"name": "md"}]}}
    assert _model.without_status(json.loads(json.dumps(binding))) == {"metadata": binding["metadata"],
                                                                      "spec": binding["spec"]}
    manifest = tmp_path / "b.json"
    manifest.write_text(json.dumps({"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding", **binding}))
    source = ManifestSource.from_paths([str(manifest)], None, {})
    assert [sorted(o) for o in source.list(BINDING, None, project=_model.without_status)] == [
        ["apiVersion", "kind", "metadata", "spec"]]
    assert source.list(BINDING, None)[0]["status"] == binding["status"]


def test_replicas_running_one_argv_share_one_list_once_slimmed():
    from kubectl_kvdtype._sources.model import slim_pod

    def pod(name: str, command: list) -> dict:
        return {"metadata": {"name": name}, "spec": {"containers": [{"name": "main", "command": command}]},
                "status": {"phase": "Running"}}

    argv = ["vllm", "serve", "m", "--kv-cache-dtype", "fp8"]
    first, second = (slim_pod(pod(n, list(argv)))["spec"]["containers"][0]["command"] for n in ("a", "b"))
    assert first == second == argv and first is second
    other = slim_pod(pod("c", [*argv, "--port", "8000"]))["spec"]["containers"][0]["command"]
    assert other is not first and other == [*argv, "--port", "8000"]
    odd = slim_pod(pod("d", ["vllm", {"not": "text"}]))["spec"]["containers"][0]["command"]  # a hand-written dump's
    assert odd == ["vllm", {"not": "text"}]


@pytest.mark.parametrize("limit, size, expected", [
    (500, 500 * 900, 2330),  # small objects: as many as 2 MiB holds
    (500, 500 * 100, 5000),  # tiny ones: no more than MAX_PAGE_SIZE
    (500, 500 * 8000, 500),  # large Pods: never fewer than the first page's
    (2330, 2330 * 900, 2330),  # a page as big as the last holds as many again
    (500, 0, 5000),  # an empty page that goes on (a filtering server): the most
])
def test_a_later_page_holds_what_page_bytes_holds_at_the_objects_of_the_page_before(limit, size, expected):
    from kubectl_kvdtype._sources.cluster import next_limit

    assert next_limit(limit, size) == expected


def test_the_docs_give_the_page_sizes_the_source_asks_for():
    from _support import ROOT
    from kubectl_kvdtype._sources.cluster import MAX_PAGE_SIZE, PAGE_BYTES, PAGE_SIZE

    said = f"the first of {PAGE_SIZE} objects; each later one as many as {PAGE_BYTES // 2 ** 20} MiB of JSON holds " \
           f"at the objects of the page before it, from {PAGE_SIZE} to {MAX_PAGE_SIZE:,}"
    assert said in (ROOT / "docs" / "reference.md").read_text()
    development = " ".join((ROOT / "docs" / "development.md").read_text().split())
    assert f"as many as {PAGE_BYTES // 2 ** 20} MiB of JSON holds" in development
    assert f"from {PAGE_SIZE} to {MAX_PAGE_SIZE:,} (`next_limit`)" in development

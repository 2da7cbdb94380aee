"""Fast tier: the offline twin of the cluster (``_manifests``) on small inline documents."""

from __future__ import annotations

import io
import json
import textwrap

import pytest

from kubectl_kvdtype._kits.codes import DUPLICATE_OBJECT
from kubectl_kvdtype._kits.status import ManifestError, UsageError
from kubectl_kvdtype._sources.kinds import BINDING, DEPLOYMENT, POD, POOL
from kubectl_kvdtype._sources.manifests import ManifestSource, read_path


def _binding(name: str, namespace: str = "ml", dtype: str = "fp8", **labels: str) -> dict:
    metadata: dict = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding", "metadata": metadata,
            "spec": {"domain": {"dtype": dtype}}}


def _stdin(text: str) -> ManifestSource:
    return ManifestSource.from_paths(["-"], io.StringIO(textwrap.dedent(text)))


def _names(objects: list[dict]) -> list[str]:
    return [f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in objects]


def test_multi_document_yaml_with_a_list_and_unknown_kinds():
    source = _stdin("""\
        # a dump as kubectl get -o yaml writes it, and a hand-written object after it
        apiVersion: v1
        kind: List
        items:
        - apiVersion: worker.gpustack.ai/v1
          kind: KVCachePoolBinding
          metadata: {name: b, namespace: ml}
        - apiVersion: v1
          kind: ConfigMap
          metadata: {name: ignored, namespace: ml}
        ---
        apiVersion: worker.gpustack.ai/v1alpha1
        kind: KVCachePoolBinding
        metadata: {name: a, namespace: ml}
        ---
        apiVersion: worker.gpustack.ai/v1
        kind: KVCachePool
        metadata: {name: shared}
        ---
        """)
    assert _names(source.list(BINDING, None)) == ["ml/a", "ml/b"]  # sorted as a server lists them
    assert _names(source.list(POOL, None)) == ["/shared"]
    assert source.list(DEPLOYMENT, None) == [] and source.findings == [] and source.empty_lists == []


def test_json_input_reads_like_yaml():
    source = _stdin(json.dumps({"apiVersion": "v1", "kind": "PodList", "items": [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}}]}))
    assert _names(source.list(POD, "ml")) == ["ml/p"]


def test_an_object_without_a_namespace_lands_in_default_as_kubectl_apply_would():
    source = ManifestSource([{**_binding("x"), "metadata": {"name": "x"}}])
    assert _names(source.list(BINDING, "default")) == ["default/x"]
    assert source.list(BINDING, "ml") == []


def test_namespace_selector_and_get():
    source = ManifestSource([_binding("a", "ml", app="llama"), _binding("b", "ml", app="qwen"),
                             _binding("a", "other", app="llama")])
    assert _names(source.list(BINDING, None, "app=llama")) == ["ml/a", "other/a"]
    assert _names(source.list(BINDING, "ml", "app notin (llama)")) == ["ml/b"]
    assert source.get(BINDING, "other", "a")["metadata"]["namespace"] == "other"
    assert source.get(BINDING, "other", "b") is None
    assert source.list(BINDING, "ml", project=lambda o: {"n": o["metadata"]["name"]}) == [{"n": "a"}, {"n": "b"}]


def test_the_same_object_twice_differently_warns_and_the_last_read_wins():
    source = ManifestSource([("one.yaml", _binding("a", dtype="bf16")), ("two.yaml", _binding("a", dtype="fp8"))])
    [binding] = source.list(BINDING, None)
    assert binding["spec"]["domain"]["dtype"] == "fp8"
    [finding] = source.findings
    assert finding.code == DUPLICATE_OBJECT and finding.severity == "warning"
    assert "one.yaml and two.yaml" in finding.message and finding.fields == {"files": ["one.yaml", "two.yaml"]}


def test_the_same_object_twice_identically_is_one_object_and_no_warning():
    source = ManifestSource([("d/a.yaml", _binding("a")), ("d/a.yaml", _binding("a"))])
    assert len(source.list(BINDING, None)) == 1 and source.findings == []


@pytest.mark.parametrize("text", ["", "   \n", "# only a comment\n", "---\n---\n"])
def test_an_input_without_objects_is_refused(text):
    with pytest.raises(ManifestError, match="standard input holds no Kubernetes object"):
        _stdin(text)


def test_an_empty_list_is_an_empty_answer_not_an_empty_input():
    source = _stdin("apiVersion: v1\nkind: List\nitems: []\n")
    assert source.empty_lists == ["-"] and source.list(BINDING, None) == []


def test_a_parse_error_names_the_input_and_the_line():
    with pytest.raises(ManifestError, match=r"cannot parse the manifest standard input at line 4: mapping values"):
        _stdin("kind: Pod\nmetadata:\n  name: a\n  x: y: z\n")


def test_directories_are_walked_in_order_reading_yaml_and_json_only(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.json").write_text(json.dumps(_binding("z")))
    (tmp_path / "a.yml").write_text(json.dumps(_binding("a")))
    (tmp_path / "notes.txt").write_text("kind: Pod\nmetadata: {name: not-read}\n")
    read = list(read_path(str(tmp_path), io.StringIO()))
    assert [(where.replace(str(tmp_path), ""), obj["metadata"]["name"]) for where, obj in read] == \
        [("/a.yml", "a"), ("/b/z.json", "z")]


def test_a_missing_file_is_named():
    with pytest.raises(ManifestError, match="the manifest /nonexistent/x.yaml does not exist"):
        list(read_path("/nonexistent/x.yaml", io.StringIO()))


@pytest.mark.parametrize("paths", [["-", "-"], ["-", "dump.yaml", "-", "-"]])
def test_standard_input_given_twice_is_a_usage_error_before_anything_is_read(paths):
    stdin = io.StringIO(json.dumps(_binding("a")))
    with pytest.raises(UsageError, match=rf"^-f - is given {paths.count('-')} times: standard input cannot be used "
                                         "for multiple arguments"):
        ManifestSource.from_paths(paths, stdin)
    assert stdin.tell() == 0  # not read: no file either (dump.yaml does not exist, and is not named)

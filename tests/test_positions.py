"""The position-keeping parse behind ``-o sarif`` (``_positions``), in process.

Each object of a manifest's text gets its first line, last line and node, identified the way
``_manifests`` identifies it; ``field_line`` finds the line of a field. Multi-document YAML,
``kind: List`` (nested too), JSON (indented, on one line, tab-indented, with escapes libyaml
refuses), flow style, anchors, aliases and merge keys, CRLF line ends, duplicates.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from _support import EXAMPLES
from kubectl_kvdtype._kits.report import ObjectRef
from kubectl_kvdtype._sources import manifests as _manifests
from kubectl_kvdtype._sources.manifests import ManifestSource
from kubectl_kvdtype._sources.positions import Locator, field_line, object_spans

MULTI_DOC = """\
# a comment before the first document
apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata:
  name: one
  namespace: team-a
spec:
  domain:
    dtype: bf16
---
just a string, not an object
---
# an object of a kind the plugin does not read
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
---
apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata: {name: two}
spec: {domain: {dtype: fp8}}
"""


def _spans(text: str) -> dict:
    return {span.key: span for span in object_spans(text)}


def test_multi_document_yaml_gives_each_object_its_lines():
    spans = _spans(MULTI_DOC)
    assert list(spans) == [("KVCachePoolBinding", "team-a", "one"), ("KVCachePoolBinding", "default", "two")]
    one, two = spans.values()
    assert (one.line, one.end_line) == (2, 9)  # the comment before it is not the object
    assert (two.line, two.end_line) == (18, 21)
    assert field_line(one.node, ("spec", "domain", "dtype")) == 9
    assert field_line(two.node, ("spec", "domain", "dtype")) == 21  # flow style: the same line
    assert field_line(two.node, ("metadata", "name")) == 20


def test_a_list_unrolls_its_items_and_nested_lists():
    text = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata:
    name: first
    namespace: ns
  spec:
    containers:
    - name: main
      args:
      - --max-model-len=4096
      - --kv-cache-dtype
      - fp8
- apiVersion: v1
  kind: PodList
  items:
    - apiVersion: v1
      kind: Pod
      metadata: {name: nested, namespace: ns}
- not an object
- apiVersion: v1
  kind: List
  items: []
"""
    spans = _spans(text)
    assert [key[2] for key in spans] == ["first", "nested"]
    first, nested = spans.values()
    assert (first.line, first.end_line) == (4, 15)
    assert (nested.line, nested.end_line) == (19, 21)
    assert field_line(first.node, ("spec", "containers", 0, "args", 1)) == 14
    assert field_line(first.node, ("spec", "containers", 0)) == 11


def test_json_indented_compact_and_tab_indented_with_escapes_libyaml_refuses():
    objects = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ns",
                                                                "annotations": {"note": "\U0001F600 \x85"}},
                "spec": {"containers": [{"name": "main", "args": ["--kv-cache-dtype", "fp8"]}]}} for i in range(3)]
    dump = {"apiVersion": "v1", "kind": "List", "items": objects}
    indented = json.dumps(dump, indent=4)  # ensure_ascii: the emoji as an escaped surrogate pair
    lines = indented.splitlines()
    spans = list(object_spans(indented))
    assert [span.key[2] for span in spans] == ["p0", "p1", "p2"]
    for span in spans:
        assert lines[span.line - 1].strip() == "{"
        assert lines[span.end_line - 1].strip() in ("}", "},")
        assert f'"name": "{span.key[2]}"' in "\n".join(lines[span.line - 1:span.end_line])
        value = field_line(span.node, ("spec", "containers", 0, "args", 1))
        assert lines[value - 1].strip() == '"fp8"'
    compact = json.dumps(dump, separators=(",", ":"))
    assert [(span.line, span.end_line) for span in object_spans(compact)] == [(1, 1)] * 3
    tabbed = json.dumps(dump, indent="\t", ensure_ascii=False)  # a raw C1 control character inside
    tab_lines = tabbed.split("\n")  # str.splitlines would also break at the raw NEL, as no editor does
    tab_spans = list(object_spans(tabbed))
    assert [span.key[2] for span in tab_spans] == ["p0", "p1", "p2"]
    assert all(tab_lines[s.line - 1].strip() == "{" for s in tab_spans)


def test_json_nested_lists_repeated_keys_and_documents_that_hold_no_object():
    pod = '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "%s", "namespace": "ns"}}'
    text = ('{"kind": "List", "items": [%s],\n "apiVersion": "v1",\n'
            ' "items": [{}, [], "text", %s,\n  {"kind": "PodList", "items": [\n%s]}]}'
            % (pod % "dropped", pod % "kept", pod % "nested"))
    spans = list(object_spans(text))  # the last "items" is the one json.loads keeps
    assert [(span.key[2], span.line) for span in spans] == [("kept", 3), ("nested", 5)]
    assert field_line(spans[1].node, ("metadata", "name")) == 5
    assert list(object_spans('[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}]')) == []
    assert list(object_spans('{"items": [], "kind": "List"}')) == []
    # Not JSON after all ({...} then more): read as YAML, as -f reads it.
    (flow,) = object_spans('{apiVersion: v1, kind: Pod,\n metadata: {name: flow, namespace: ns}}\n')
    assert (flow.key, flow.line, field_line(flow.node, ("metadata", "name"))) == (("Pod", "ns", "flow"), 1, 2)


def test_anchors_aliases_and_merge_keys_point_where_the_text_is():
    text = """\
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: anchored, namespace: ns}
spec:
  roles:
  - &server
    name: server
    extraArgs: &args ["--max-model-len=4096", "--kv-cache-dtype", "fp8"]
  - <<: *server
    name: decode
  - name: prefill
    extraArgs: *args
"""
    (span,) = object_spans(text)
    assert field_line(span.node, ("spec", "roles", 0, "extraArgs", 1)) == 8
    assert field_line(span.node, ("spec", "roles", 1, "name")) == 10  # its own key beats the merged one
    assert field_line(span.node, ("spec", "roles", 1, "extraArgs", 2)) == 8  # merged in from the anchor
    assert field_line(span.node, ("spec", "roles", 2, "extraArgs", 0)) == 8  # an alias: the anchored text
    assert field_line(span.node, ("spec", "roles", 2)) == 11


def test_objects_identified_through_merge_keys_and_odd_scalars_as_the_loader_builds_them():
    text = """\
apiVersion: v1
kind: List
items:
- &common {apiVersion: worker.gpustack.ai/v1, kind: KVCachePoolBinding, metadata: {name: base, namespace: ns}}
- <<: *common
  metadata: {name: 2024, namespace: ns}
- <<: [{kind: ModelDeployment, apiVersion: worker.gpustack.ai/v1}]
  metadata:
    <<: {namespace: other}
    name: merged
- {apiVersion: worker.gpustack.ai/v1, kind: KVCachePoolBinding, metadata: {name: yes, namespace: ns}}
- !!omap [{apiVersion: v1}, {kind: Pod}]
- <<: [{kind: ModelDeployment}, *common]
  metadata: {name: conflicting}
"""
    read = [_manifests.object_key(obj) for _, obj in _manifests._located("x", _manifests._objects(
        list(yaml.load_all(text, Loader=_manifests.YAML_LOADER)))) if obj]
    spans = list(object_spans(text))
    # The last one's kind depends on how this PyYAML merges conflicting entries: as the loader does.
    assert [span.key for span in spans] == read
    assert read[:4] == [("KVCachePoolBinding", "ns", "base"), ("KVCachePoolBinding", "ns", "2024"),
                        ("ModelDeployment", "other", "merged"), ("KVCachePoolBinding", "ns", "")]  # yes: a boolean
    assert [span.line for span in spans] == [4, 5, 7, 11, 13]
    assert field_line(spans[2].node, ("metadata", "namespace")) == 9


def test_an_object_ending_in_an_alias_or_made_of_a_merge_ends_on_its_own_lines():
    text = """\
apiVersion: v1
kind: List
items:
- &common
  apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: ns}
  spec:
    args: &args
    - x
- <<: *common
  metadata: {name: b, namespace: ns}
- apiVersion: v1
  kind: Pod
  metadata: {name: c, namespace: ns}
  spec:
    args: *args
- apiVersion: v1
  kind: Pod
  metadata: {name: d, namespace: ns}
"""
    assert [(s.key[2], s.line, s.end_line) for s in object_spans(text)] == [
        ("a", 4, 10), ("b", 11, 12), ("c", 13, 17), ("d", 18, 20)]


def test_a_path_beyond_the_object_stops_at_what_exists():
    (span,) = object_spans(MULTI_DOC.split("---")[0])
    assert field_line(span.node, ("spec", "domain", "dtype", "deeper")) == 9
    assert field_line(span.node, ("spec", "domain", "missing")) == 8  # the key holding the mapping
    assert field_line(span.node, ("spec", "roles", 0)) == 7
    assert field_line(span.node, ("status",)) is None
    assert field_line(span.node, ("spec", 0)) == 7  # an index into a mapping goes no further


def test_a_repeated_key_and_a_repeated_object_the_last_one_wins():
    text = """\
apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata: {name: twice, namespace: ns}
spec: {domain: {dtype: fp8}}
spec: {domain: {dtype: bf16}}
---
apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata: {name: twice, namespace: ns}
spec: {domain: {dtype: auto}}
"""
    spans = _spans(text)  # a dict keeps the last span of a key, as ManifestSource keeps the last copy
    assert spans[("KVCachePoolBinding", "ns", "twice")].line == 7
    (first, _) = object_spans(text)
    assert field_line(first.node, ("spec", "domain", "dtype")) == 5  # PyYAML keeps the later key too


def test_lines_are_counted_by_newlines_only_as_editors_count_them():
    """YAML also breaks lines at NEL, LS and PS (PyYAML's marks count them); an editor or a
    code-scanning view does not. A byte order mark is not a line either."""
    text = '\ufeffapiVersion: v1\nkind: Pod\nmetadata:\n  annotations: {a: "x\u2028y", b: "x\x85y"}\n  name: p\n' \
           '  namespace: ns\nspec: {containers: [{name: main, args: [--kv-cache-dtype, fp8]}]}\n'
    (span,) = object_spans(text)
    lines = text.split("\n")
    assert (span.line, span.end_line) == (1, 7)
    assert lines[field_line(span.node, ("metadata", "name")) - 1] == "  name: p"
    assert "fp8" in lines[field_line(span.node, ("spec", "containers", 0, "args", 1)) - 1]


def test_crlf_line_ends_count_once(tmp_path: Path):
    path = tmp_path / "crlf.yaml"
    path.write_bytes(MULTI_DOC.replace("\n", "\r\n").encode())
    spans = {span.key: span for span in object_spans(_manifests.read_text(str(path)))}
    one = spans[("KVCachePoolBinding", "team-a", "one")]
    assert (one.line, field_line(one.node, ("spec", "domain", "dtype"))) == (2, 9)
    assert path.read_text(encoding="utf-8").splitlines()[8].strip() == "dtype: bf16"


def test_the_spans_are_the_objects_manifests_reads(tmp_path: Path):
    """Every file -f reads, as YAML and as JSON: the same keys, in the same order, as ``_manifests``."""
    files = sorted(EXAMPLES.glob("*.yaml"))
    for file in files:
        documents = [d for d in yaml.safe_load_all(file.read_text()) if d is not None]
        (tmp_path / f"{file.stem}.json").write_text(json.dumps(documents[0] if len(documents) == 1 else
                                                               {"kind": "List", "items": documents}, indent=2))
    for file in files + sorted(tmp_path.glob("*.json")):
        read = [_manifests.object_key(obj) for _, obj in _manifests.read_path(str(file), io.StringIO()) if obj]
        spanned = [span.key for span in object_spans(file.read_text())]
        assert spanned == [key for key in read if key is not None], file.name
        assert spanned


def test_the_locator_follows_the_copy_that_is_judged(tmp_path: Path):
    binding = "apiVersion: worker.gpustack.ai/v1\nkind: KVCachePoolBinding\nmetadata: {name: b, namespace: ns}\n"
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(binding + "spec: {domain: {dtype: fp8}}\n")
    second.write_text("# the later copy\n" + binding + "spec:\n  domain:\n    dtype: bf16\n")
    ref = ObjectRef("KVCachePoolBinding", "ns", "b")
    source = ManifestSource.from_paths([str(first), str(second)], io.StringIO())
    place = Locator(source)(ref, ("spec", "domain", "dtype"))
    assert place is not None and (place.path, place.line, place.end_line, place.field_line) == (str(second), 2, 7, 7)
    from_stdin = ManifestSource.from_paths([str(first), "-"], io.StringIO(second.read_text()))
    assert Locator(from_stdin)(ref) is None  # standard input has no file
    assert Locator(from_stdin)(ObjectRef("KVCachePoolBinding", "ns", "nobody")) is None


def test_a_file_that_changed_since_it_was_read_is_named_without_a_line(tmp_path: Path):
    path = tmp_path / "gone.yaml"
    path.write_text("apiVersion: worker.gpustack.ai/v1\nkind: KVCachePoolBinding\nmetadata: {name: b, namespace: n}\n")
    source = ManifestSource.from_paths([str(path)], io.StringIO())
    path.write_text("key: [unclosed\n")
    locator = Locator(source)
    place = locator(ObjectRef("KVCachePoolBinding", "n", "b"))
    assert place is not None and (place.path, place.line) == (str(path), None)
    assert len(locator.warnings) == 1 and str(path) in locator.warnings[0]


_NAMES = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12).filter(
    lambda name: name[0].isalpha())


@settings(max_examples=60, deadline=None)
@given(names=st.lists(_NAMES, min_size=1, max_size=6, unique=True),
       form=st.sampled_from(["yaml-block", "yaml-flow", "yaml-docs", "json", "json-compact"]),
       args=st.lists(st.sampled_from(["--kv-cache-dtype", "fp8", "--port", "8000"]), min_size=1, max_size=5))
def test_any_dump_each_object_and_field_is_on_its_line(names, form, args):
    objects = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
                "spec": {"containers": [{"name": "main", "args": list(args)}]}} for name in names]
    dump = {"apiVersion": "v1", "kind": "List", "items": objects}
    text = {
        "yaml-block": lambda: yaml.safe_dump(dump, default_flow_style=False),
        "yaml-flow": lambda: yaml.safe_dump(dump, default_flow_style=None, width=60),
        "yaml-docs": lambda: yaml.safe_dump_all(objects, default_flow_style=False),
        "json": lambda: json.dumps(dump, indent=2),
        "json-compact": lambda: json.dumps(dump),
    }[form]()
    lines = text.splitlines()
    spans = list(object_spans(text))
    assert [span.key for span in spans] == [("Pod", "ns", name) for name in names]
    for span in spans:
        shown = "\n".join(lines[span.line - 1:span.end_line])
        assert span.key[2] in shown
        name_line = field_line(span.node, ("metadata", "name"))
        assert name_line is not None and span.key[2] in lines[name_line - 1]
        last = field_line(span.node, ("spec", "containers", 0, "args", len(args) - 1))
        assert last is not None and span.line <= last <= span.end_line and args[-1] in lines[last - 1]

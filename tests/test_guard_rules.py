"""The guard's rules are written from the engine records in force: an added table file
(KUBECTL_KVDTYPE_ENGINE_TABLES) changes them and is named by them; the policies' spellings are the
argv reader's own (what they then decide on the real server: tests/test_real_guard.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubectl_kvdtype._engines import parsers as _parsers
from kubectl_kvdtype._engines import spellings as _spellings
from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._judging import guard_rules as _rules

pytestmark = pytest.mark.version_sensitive  # the engine wing (test_tiers.py)

SHIPPED = _parsers.shipped_document()


def _added(tmp_path: Path, version: str, recorded_as: str) -> Path:
    """A table file as `scripts/engine-tables --only vLLM==VERSION --out FILE` writes one: here the
    ``recorded_as`` table recorded again as a newer release."""
    table = SHIPPED["tables"]["vLLM"][SHIPPED.get("same", {}).get("vLLM", {}).get(recorded_as, recorded_as)]
    path = tmp_path / "added.json"
    path.write_text(json.dumps({"versions": {"vLLM": [version]}, "same": {}, "tables": {"vLLM": {version: table}}}))
    return path


def test_an_added_table_changes_the_rules_and_is_named(tmp_path: Path) -> None:
    shipped = _rules.manifests(enforce=False)
    assert shipped[0]["metadata"]["annotations"][_rules.TABLES_ANNOTATION] == ""
    path = _added(tmp_path, "0.97.0", "0.18.0")  # a release that reads the abbreviations again
    try:
        _parsers.add_tables(str(path))
        first, spellings = _spellings.spelling_groups("vLLM")[-1]
        assert first == "0.97.0" and "--kv-cache-dt" in spellings.read
        added = _rules.manifests(enforce=False)
        assert _rules.tables_named() == [str(path)]
        assert {m["metadata"]["annotations"][_rules.TABLES_ANNOTATION] for m in added} == {str(path)}
        assert added[0]["metadata"]["annotations"][_rules.RECORDS_ANNOTATION] != \
            shipped[0]["metadata"]["annotations"][_rules.RECORDS_ANNOTATION]
        assert "0*97" in json.dumps(added[0]["spec"]) and "0*97" not in json.dumps(shipped[0]["spec"])
    finally:
        _parsers._EXTRA.clear()
        _parsers.clear_caches()


def test_the_spellings_are_the_readers_own() -> None:
    """Each group's names are those the reader calls the flag at its first release, and no other."""
    for engine in ("vLLM", "SGLang"):
        for first, spellings in _spellings.spelling_groups(engine):
            for name in spellings.located:
                occurrences = _verdicts.find_dtype_flags([f"{name}=fp8"], engine, first)
                assert [o.read for o in occurrences] == [name in spellings.read], (engine, first, name)
    assert "--kv-cache-dtype-skip-layers" not in _spellings.flag_spellings(None, None).located


def test_deny_and_warn_differ_only_in_the_bindings_actions() -> None:
    warn, deny = _rules.manifests(enforce=False), _rules.manifests(enforce=True)
    assert [m for m in warn if m["kind"] != "ValidatingAdmissionPolicyBinding"] == \
        [m for m in deny if m["kind"] != "ValidatingAdmissionPolicyBinding"]
    assert {tuple(m["spec"]["validationActions"]) for m in warn if "policyName" in m["spec"]} == {_rules.WARN}
    assert {tuple(m["spec"]["validationActions"]) for m in deny if "policyName" in m["spec"]} == {_rules.DENY}
    assert {m["spec"]["failurePolicy"] for m in warn if "failurePolicy" in m["spec"]} == {_rules.FAILURE_POLICY}


def test_the_manifests_for_git_need_no_cluster() -> None:
    """``guard -o yaml`` with no kubeconfig at all: the manifests alone, as ``manifests`` writes them."""
    import yaml

    from _support import in_process

    status, out, err = in_process(["guard", "-o", "yaml"], environ={})
    assert (status, err) == (0, "")
    assert list(yaml.safe_load_all(out)) == _rules.manifests(enforce=False)
    status, out, err = in_process(["guard", "--enforce", "-o", "yaml"], environ={})
    assert status == 0 and {d["spec"].get("validationActions") == ["Deny"]
                            for d in yaml.safe_load_all(out) if d["kind"].endswith("Binding")} == {True}
    status, _, err = in_process(["guard"], environ={})  # the plan reads the cluster: a sentence without one
    assert status == 3 and err.startswith("error: no kubeconfig found") and err.count("\n") == 1


def test_the_plan_names_an_added_table(tmp_path: Path) -> None:
    from _support import in_process

    path = _added(tmp_path, "0.96.0", "0.33.0")
    try:
        empty = tmp_path / "empty.yaml"
        empty.write_text("apiVersion: v1\nkind: List\nitems: []\n", encoding="utf-8")
        environ = {"KUBECTL_KVDTYPE_ENGINE_TABLES": str(path)}
        status, out, err = in_process(["guard", "-f", str(empty), "-o", "json"], environ=environ)
        assert status == 0 and json.loads(out)["summary"]["tables"] == [str(path)], err
        status, out, err = in_process(["guard", "-f", str(empty)], environ=environ)
        assert f"written from the shipped engine records and the added tables {path}" in out.replace("\n", " "), out
        status, out, _ = in_process(["guard", "-o", "yaml"], environ={"KUBECTL_KVDTYPE_ENGINE_TABLES": str(path)})
        assert f"kvdtype.gpustack.ai/guard-tables: {path}" in out
    finally:
        _parsers._EXTRA.clear()
        _parsers.clear_caches()

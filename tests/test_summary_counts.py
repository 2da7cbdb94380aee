"""The summary line under a table counts what ``-o json`` counts: the findings the source adds
(``invalid-name`` from a cluster's answer or a manifest, ``duplicate-object`` from ``-f``) and the
ones ``--ignore`` drops, for every judging subcommand. Through the real kubectl, against the fake
API server (and offline for what only ``-f`` finds)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from _support import kvdtype, seed

pytestmark = pytest.mark.e2e

#: A name the API server refuses for a Binding (upper case, an underscore): an invalid-name error finding.
BAD = "Bad_Name"
_COUNTS = re.compile(r"(\d+) errors?, (\d+) warnings?, (\d+) info(?:, (\d+) ignored)?")


def _binding(name: str, dtype: str, namespace: str = "team-s") -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": f"{namespace}-{name}", "blockSize": 64,
                                                                    "dtype": dtype}}}


def _deployment(name: str, binding: str, namespace: str = "team-s", extra: tuple = ()) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": "vLLM", "version": "0.29.0"},
                     "kvCache": {"poolRef": {"name": binding}, "connector": "Mooncake"},
                     "roles": [{"name": "server", "kind": "Server", "replicas": 1, "extraArgs": list(extra)}]}}


def _table_counts(stdout: str) -> dict:
    """The counts the table's summary line says (the last line that has them)."""
    found = [m for line in stdout.splitlines() for m in _COUNTS.finditer(line)]
    assert found, stdout
    errors, warnings, info, ignored = found[-1].groups()
    return {"errors": int(errors), "warnings": int(warnings), "info": int(info), "ignored": int(ignored or 0)}


def _json_counts(env: dict, *args: str) -> dict:
    result = kvdtype(env, *args, "-o", "json")
    assert result.stdout, result.stderr
    return json.loads(result.stdout)["summary"]["findings"]


@pytest.mark.parametrize("command", ["check", "find-flags", "verify"])
def test_a_cluster_answering_an_invalid_name_is_counted_in_the_table_as_in_json(fake, kube_env, command):
    seed(fake, [_binding("chat", "bfloat16"), _deployment("qwen", "chat"), _binding(BAD, "bfloat16")])
    table = kvdtype(kube_env, command, "-n", "team-s")
    counts = _json_counts(kube_env, command, "-n", "team-s")
    assert counts["errors"] >= 1, counts  # the invalid-name finding
    assert table.returncode == 1, table.stderr
    assert _table_counts(table.stdout) == counts, table.stdout


def test_preflight_counts_the_invalid_name_in_its_verdict_line(fake, kube_env):
    seed(fake, [_binding("chat", "bfloat16"), _deployment("qwen", "chat"), _binding(BAD, "bfloat16")])
    table = kvdtype(kube_env, "preflight", "-n", "team-s")
    counts = _json_counts(kube_env, "preflight", "-n", "team-s")
    assert table.returncode == 1
    assert table.stdout.splitlines()[-1].startswith(f"NO-GO: {counts['errors']} error finding(s) (invalid-name)")


@pytest.mark.parametrize("command", ["check", "find-flags", "verify", "preflight"])
def test_a_duplicate_object_read_from_two_files_is_counted_in_the_table_as_in_json(kube_env, tmp_path, command):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(yaml.safe_dump_all([_binding("chat", "bfloat16"), _deployment("qwen", "chat")]))
    changed = _binding("chat", "bfloat16")
    changed["metadata"]["labels"] = {"edited": "yes"}  # the same object, another body: a duplicate-object warning
    second.write_text(yaml.safe_dump(changed))
    args = (command, "-f", str(first), "-f", str(second))
    table = kvdtype(kube_env, *args)
    counts = _json_counts(kube_env, *args)
    assert counts["warnings"] == 1, counts
    assert table.returncode == 0, table.stderr
    if command == "preflight":
        assert table.stdout.splitlines()[-1] == "GO: no error finding; 1 warning(s) worth a look in the to-do list."
    else:
        assert _table_counts(table.stdout) == counts, table.stdout


@pytest.mark.parametrize("command, code", [("check", "dtype-rejected"), ("find-flags", "role-flag")])
def test_ignored_findings_are_counted_as_ignored_in_the_table_as_in_json(fake, kube_env, command, code):
    seed(fake, [_binding("legacy", "bf16"), _deployment("qwen", "legacy", extra=("--kv-cache-dtype", "fp8_e4m3"))])
    args = (command, "-n", "team-s", "--ignore", code)
    counts = _json_counts(kube_env, *args)
    assert counts["ignored"] >= 1, counts
    assert _table_counts(kvdtype(kube_env, *args).stdout) == counts

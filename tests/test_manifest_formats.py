"""Offline input read as JSON or as YAML gives the same report for the same objects.

JSON (what ``kubectl get -o json`` writes) is read by ``json``, YAML by PyYAML: the two readers
must agree on every object, whether the dump is a file, a directory or standard input.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from _support import EXAMPLES, assert_one_clean_line, direct, documents

pytestmark = pytest.mark.e2e  # runs the plugin as a subprocess

SUBCOMMANDS = ("check", "find-flags", "verify")


def _dump(objects: list[dict]) -> dict:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": objects}


@pytest.fixture
def dumps(tmp_path: Path) -> dict[str, Path]:
    """The examples as one List, written the ways kubectl writes it (-o json, -o yaml)."""
    dump = _dump(documents(EXAMPLES))
    as_json = tmp_path / "dump.json"
    as_json.write_text(json.dumps(dump, indent=4), encoding="utf-8")
    as_yaml = tmp_path / "dump.yaml"
    as_yaml.write_text(yaml.safe_dump(dump, default_flow_style=False), encoding="utf-8")
    return {"json": as_json, "yaml": as_yaml}


@pytest.mark.parametrize("subcommand", SUBCOMMANDS)
def test_json_and_yaml_dumps_give_the_same_report(dumps, subcommand):
    env = dict(os.environ)
    reports = {}
    for form, path in dumps.items():
        result = direct(env, subcommand, "-A", "-f", str(path), "-o", "json")
        assert result.stdout, result.stderr
        reports[form] = json.loads(result.stdout)
    assert reports["json"]["items"], "the examples must give something to compare"
    assert reports["json"] == reports["yaml"]
    from_examples = json.loads(direct(env, subcommand, "-A", "-f", str(EXAMPLES), "-o", "json").stdout)
    assert reports["json"] == from_examples


def test_json_on_stdin_with_leading_whitespace_reads_like_the_file(dumps):
    env = dict(os.environ)
    text = "\n  \t" + dumps["json"].read_text(encoding="utf-8")
    from_stdin = direct(env, "check", "-f", "-", "-o", "json", input=text)
    from_file = direct(env, "check", "-f", str(dumps["yaml"]), "-o", "json")
    assert from_stdin.stdout and json.loads(from_stdin.stdout) == json.loads(from_file.stdout)


def test_yaml_flow_mapping_that_is_not_json_is_still_read(tmp_path):
    """``{kind: ...}`` starts like JSON but is YAML: it is read as YAML, not refused."""
    binding = next(d for d in documents(EXAMPLES) if d.get("kind") == "KVCachePoolBinding")
    flow = tmp_path / "flow.yaml"
    flow.write_text(yaml.safe_dump(binding, default_flow_style=True), encoding="utf-8")
    assert flow.read_text().startswith("{") and "json" not in flow.name
    block = tmp_path / "block.yaml"
    block.write_text(yaml.safe_dump(binding, default_flow_style=False), encoding="utf-8")
    env = dict(os.environ)
    from_flow = direct(env, "check", "-f", str(flow), "-o", "json")
    from_block = direct(env, "check", "-f", str(block), "-o", "json")
    assert from_flow.stdout and json.loads(from_flow.stdout) == json.loads(from_block.stdout)
    assert [i["name"] for i in json.loads(from_flow.stdout)["items"]] == [binding["metadata"]["name"]]


def test_broken_json_is_one_clear_sentence(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"apiVersion": "v1", "kind": "List",\n "items": [\n', encoding="utf-8")
    result = direct(dict(os.environ), "check", "-f", str(broken))
    assert result.returncode != 0 and not result.stdout
    assert_one_clean_line(result.stderr)
    assert str(broken) in result.stderr


def test_standard_input_given_twice_is_refused_as_kubectl_refuses_it(dumps: dict[str, Path]) -> None:
    """``-f - -f -``: kubectl, the oracle, refuses standard input for two arguments; so does the
    plugin, as a usage error (exit 2) naming the repeated ``-``, before reading anything."""
    from conftest import run_kubectl

    text = dumps["json"].read_text()
    refused = run_kubectl(["create", "--dry-run=client", "-o", "name", "-f", "-", "-f", "-"], dict(os.environ),
                          input=text)
    assert refused.returncode != 0 and "standard input cannot be used for multiple arguments" in refused.stderr
    for subcommand in SUBCOMMANDS:
        result = direct(dict(os.environ), subcommand, "-f", "-", "--filename=-", input=text)
        assert result.returncode == 2 and result.stdout == "", result.stderr
        assert_one_clean_line(result.stderr)
        assert result.stderr.startswith("error: -f - is given 2 times: standard input cannot be used for multiple "
                                        "arguments (it is read once; give -f - once)")
        once = direct(dict(os.environ), subcommand, "-f", "-", "-o", "json", input=text)
        assert once.returncode in (0, 1) and json.loads(once.stdout)["items"]

"""docs/development.md's "Where a change goes", held row by row (issue 39): each row names the files
a change of its kind touches, and a throwaway change of that kind, made here in those places only
(a row added in-process, or a record added to a copy of the package), shows up everywhere the row
says it does. ``HOLDERS`` names the test that holds each row; a row without one fails."""

from __future__ import annotations

import ast
import io
import json
import re
import shutil
import subprocess
import sys
import types

import pytest

from _support import EXAMPLES, ROOT, script_module
from kubectl_kvdtype._kits.env import Environment

pytestmark = pytest.mark.version_sensitive  # argparse, completion and the man page (test_tiers.py)

#: Each row's first cell -> the tests ("file::function") whose throwaway change holds it.
HOLDERS = {
    "a new engine release": ["test_engine_tables_script.py::test_an_extra_table_file_adds_a_release",
                             "test_engine_tables_script.py::test_check_names_each_release_not_recorded"],
    "a new engine": ["test_change_rows.py::test_a_new_engine_is_one_more_record"],
    "a finding code": [
        "test_change_rows.py::test_a_finding_code_row_reaches_ignore_sarif_the_codes_table_and_the_man_page"],
    "an output format": [
        "test_option_tables.py::test_a_format_row_is_offered_by_help_validation_completion_and_the_man_page",
        "test_format_rows.py::test_a_tabular_row_says_an_empty_result_on_stderr_and_another_does_not",
        "test_format_rows.py::test_a_row_that_locates_gets_the_file_and_line_of_each_finding",
    ],
    "a connection flag": [
        "test_option_tables.py::test_a_connection_flag_row_is_parsed_overrides_is_redacted_and_completed"],
    "a manager (another GitOps tool, a tracking method)": [
        "test_managers.py::test_each_manager_is_recognized_served_by_the_fake_exercised_and_in_the_reference_table"],
    "a subcommand": ["test_change_rows.py::test_a_subcommand_row_is_listed_run_completed_and_in_the_man_page",
                     "test_layers.py::test_the_registry_names_every_subcommand_by_module_path"],
    "a write to a cluster": [
        "test_signal_ownership.py::test_a_write_with_no_apply_flag_ends_as_on_ctrl_c_and_a_read_ends_at_once",
        "test_signal_ownership.py::test_every_module_that_writes_enters_in_progress_and_the_command_line_guesses_nothing",
        "test_consent.py::test_without_a_terminal_apply_is_the_consent_of_every_write_that_plans_first"],
}


def _rows() -> list[str]:
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    table = text.split("### Where a change goes", 1)[1].split("\n## ", 1)[0]
    return [match.group(1) for match in re.finditer(r"^\| ([^|`]+?) \| ", table, re.M) if match.group(1) != "change"]


def test_each_row_of_where_a_change_goes_is_held_by_a_test():
    assert _rows() == list(HOLDERS)
    for held in HOLDERS.values():
        for name in held:
            file, function = name.split("::")
            tree = ast.parse((ROOT / "tests" / file).read_text(encoding="utf-8"))
            assert function in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}, name


def _completed(*words: str) -> list[str]:
    from kubectl_kvdtype._cli.complete import complete

    out = io.StringIO()
    complete(list(words), Environment(stdout=out, stderr=io.StringIO(), environ={}))
    return [line.split("\t")[0] for line in out.getvalue().splitlines()[:-1]]


def _run(*args: str) -> tuple[int, str, str]:
    from kubectl_kvdtype._cli.main import run

    out, err = io.StringIO(), io.StringIO()
    return run(list(args), Environment(stdout=out, stderr=err, environ={})), out.getvalue(), err.getvalue()


# --- a finding code ---------------------------------------------------------------------------------

def test_a_finding_code_row_reaches_ignore_sarif_the_codes_table_and_the_man_page(monkeypatch, tmp_path):
    from kubectl_kvdtype._cli.main import parse
    from kubectl_kvdtype._cli.registry import COMMANDS
    from kubectl_kvdtype._kits import codes
    from kubectl_kvdtype._kits.report import ObjectRef, Report
    from kubectl_kvdtype._kits.status import UsageError
    from kubectl_kvdtype._output.sarif import to_sarif

    for info in COMMANDS:  # imported before the row is added: a Command takes its codes when its class is made
        info.load()
    with pytest.raises(UsageError, match="--ignore made-up-code: no such finding code"):
        parse(["check", "-f", str(EXAMPLES), "--ignore", "made-up-code"])
    row = codes.Code("made-up-code", codes.WARNING, "a throwaway row of the registry", (codes.CHECK,))
    monkeypatch.setattr(codes, "CODES", (*codes.CODES, row))
    monkeypatch.setitem(codes.BY_CODE, row.code, row)
    assert parse(["check", "-f", str(EXAMPLES), "--ignore", "made-up-code"]).ignore == ["made-up-code"]
    assert "made-up-code" in codes.codes_of("preflight") and "made-up-code" not in codes.codes_of("verify")
    assert "made-up-code" in _completed("check", "--ignore", "")
    report = Report(kind="CheckReport")
    finding = report.add("made-up-code", ObjectRef("KVCachePoolBinding", "team-a", "chat"), "made up")
    assert finding.severity == codes.WARNING  # the registry's, never the caller's
    rules = json.loads(to_sarif(report, "check"))["runs"][0]["tool"]["driver"]["rules"]
    assert "made-up-code" in [rule["id"] for rule in rules]
    line = "| `made-up-code` | warning | check | a throwaway row of the registry |"
    table = script_module("codes-table")
    table.ROOT, table.TABLE = tmp_path, tmp_path / "docs" / "codes.md"
    monkeypatch.setattr(sys, "argv", ["codes-table"])
    assert table.main() == 0 and line in table.TABLE.read_text(encoding="utf-8")
    regenerate = script_module("regenerate")
    assert line in dict(regenerate.generated())[ROOT / "docs" / "codes.md"]("")
    assert "made\\-up\\-code" in script_module("build-binary").man_include()


# --- a subcommand -----------------------------------------------------------------------------------

def _hello_module() -> types.ModuleType:
    """A subcommand module as the package root holds them: its Command, its flags, a Report."""
    from kubectl_kvdtype._commands.command import Command
    from kubectl_kvdtype._kits.report import Column, Report

    class HelloCommand(Command):
        name = "hello"
        description = "Greets whoever --name says: a throwaway subcommand."
        examples = (("greet the team", "kubectl kvdtype hello --name team-a"),)

        def add_arguments(self, parser) -> None:
            parser.add_argument("--name", default="world", help="who to greet")

        def run(self, context) -> Report:
            report = Report(kind="Hello", columns=[Column("GREETING", "greeting")])
            report.items.append({"greeting": f"hello {context.options.name}"})
            return report

    module = types.ModuleType("kubectl_kvdtype.hello")
    module.HelloCommand = HelloCommand  # type: ignore[attr-defined]
    return module


def test_a_subcommand_row_is_listed_run_completed_and_in_the_man_page(monkeypatch):
    from kubectl_kvdtype._cli import registry

    module = _hello_module()
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(registry, "COMMANDS", (*registry.COMMANDS, registry.CommandInfo(
        "hello", module.__name__, "HelloCommand", "greet someone (a throwaway subcommand)")))
    parser = registry.build_parser()
    assert "greet someone (a throwaway subcommand)" in parser.format_help()
    status, out, err = _run("hello", "--name", "team-a", "-f", str(EXAMPLES), "-o", "json")
    assert status == 0 and json.loads(out)["items"] == [{"greeting": "hello team-a"}], err
    status, out, _ = _run("-f", str(EXAMPLES), "hello", "--no-headers")  # the global flags come with it
    assert (status, out) == (0, "hello world\n")
    assert "hello" in _completed("") and "--name" in _completed("hello", "--na")
    manpage = pytest.importorskip("argparse_manpage.manpage", reason="the `build` extra is not installed")
    page = str(manpage.Manpage(parser))
    assert "kubectl kvdtype hello" in page.replace("\\-", "-") and "\\-\\-name" in page
    assert "kubectl kvdtype hello \\-\\-name team\\-a" in script_module("build-binary").man_include()


# --- a new engine -----------------------------------------------------------------------------------

#: A third engine for the copy of the package: vLLM's record under another name, image and command.
_NEW_ENGINE = '''
RECORDS = (*RECORDS, __import__("kubectl_kvdtype._kits.records", fromlist=["replace"]).replace(
    VLLM_ENGINE, name="FakeLLM", aliases=("fakellm",), base_command=("fakellm", "serve", "{model}"),
    invocations=(("fakellm", "serve"),), entry_points=((("fakellm", "serve"), "vllm serve"),)))
'''
_DEPLOYMENT = """\
apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata: {name: fake, namespace: team-f}
spec: {poolRef: {name: shared-dram}, domain: {name: team-f, blockSize: 64, dtype: bf16}}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: fake-chat, namespace: team-f}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: fakellm, version: "0.29.0"}
  kvCache: {poolRef: {name: fake}, connector: Mooncake}
  roles: [{name: server, kind: Server, replicas: 1}]
"""


@pytest.mark.e2e  # the plugin from a copy of the package, as a subprocess
def test_a_new_engine_is_one_more_record(tmp_path):
    """One record added to ``_engines/records.py`` (in a copy of the package) and nothing else: the
    engine is judged by its record (its spellings, its recorded parser) and its replicas' argv
    predicted from its base command, where the real package calls it an unknown engine."""
    copy = tmp_path / "kubectl_kvdtype"
    shutil.copytree(ROOT / "kubectl_kvdtype", copy, ignore=shutil.ignore_patterns("__pycache__"))
    records = copy / "_engines" / "records.py"
    text, count = re.subn(r"^RECORDS\b.*\n", lambda line: line.group() + _NEW_ENGINE, records.read_text(), flags=re.M)
    assert count == 1, "the records table moved: point the throwaway record at its new place"
    records.write_text(text)
    manifest = tmp_path / "fake.yaml"
    manifest.write_text(_DEPLOYMENT)

    def check(root, *args: str) -> str:
        return subprocess.run([sys.executable, "-m", "kubectl_kvdtype", *args, "-f", str(manifest), "-o", "json"],
                              cwd=root, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(root)}
                              ).stdout

    before = json.loads(check(ROOT, "check"))
    assert "engine-unknown" in {f["code"] for f in before["findings"]}
    after = json.loads(check(tmp_path, "check"))
    assert "engine-unknown" not in {f["code"] for f in after["findings"]}
    rejected = [f for f in after["findings"] if f["code"] == "dtype-rejected"]
    assert rejected and "FakeLLM 0.29.0" in rejected[0]["message"], after["findings"]
    predicted = json.loads(check(tmp_path, "preflight"))["predictions"]
    assert [(p["engine"], p["argv"][:5], p["outcome"]) for p in predicted] == [
        ("FakeLLM", ["fakellm", "serve", "Qwen/Qwen3-8B", "--kv-cache-dtype", "bf16"], "fails")], predicted

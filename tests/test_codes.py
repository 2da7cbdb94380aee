"""The finding-codes registry (kubectl_kvdtype/_kits/codes.py) is the only list of codes.

Every report a subcommand emits over the examples and the test fixtures carries only codes the
registry lists for that subcommand (so ``--ignore`` accepts each of them), with the registry's
severity; docs/codes.md is generated from it, and docs/reference.md's per-subcommand tables agree with it.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest
import yaml

from _support import EXAMPLES, ROOT, documents, in_process, seed
from kubectl_kvdtype._kits import codes as _codes
from test_escape_rebind import INJECTED_POD, REBIND, kvdtype, team_a, team_b_bindings

pytestmark = pytest.mark.version_sensitive  # argparse, the argv reader, completion or the man page (test_tiers.py)

OFFLINE = [["check"], ["find-flags"], ["verify"], ["escape", "status"]]


def _objects(value: object) -> list[dict]:
    """Kubernetes objects in a test module's global: an object, or a list or tuple of them."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return [i for i in items if isinstance(i, dict) and isinstance(i.get("metadata"), dict) and "kind" in i]


def _fixtures() -> dict[str, list[dict]]:
    """Every module-level object of every test module, by module (the examples are added to each)."""
    found: dict[str, list[dict]] = {}
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        module = importlib.import_module(path.stem)
        objects = [o for value in vars(module).values() for o in _objects(value)]
        if objects:
            found[path.stem] = objects
    return found


def _emitted(subcommand: list[str], *files: Path) -> set[tuple[str, str]]:
    """(code, severity) of every finding of an offline run over ``files``."""
    args = [*subcommand, *(a for f in files for a in ("-f", str(f))), "-o", "json"]
    status, out, err = in_process(args, environ={})
    assert status in (0, 1), err  # a report, not a failure
    return {(f["code"], f["severity"]) for f in json.loads(out)["findings"]}


def _assert_registered(subcommand: str, emitted: set[tuple[str, str]]) -> None:
    for code, severity in emitted:
        assert code in _codes.BY_CODE, f"{subcommand} emits {code!r}, which is not in the registry"
        assert code in _codes.codes_of(subcommand), f"{subcommand} emits {code!r}; the registry does not list it"
        assert severity == _codes.severity_of(code), (code, severity)


@pytest.fixture(scope="module")
def fixtures() -> dict[str, list[dict]]:
    """``_fixtures()`` set up before the fast-tier guard starts watching: importing a test module
    that this run did not collect may start its module-level helpers (a socket, for one)."""
    return _fixtures()


def test_offline_reports_over_the_examples_and_every_fixture_carry_registered_codes(tmp_path, fixtures):
    assert fixtures  # the scan found the fixtures
    seen: set[str] = set()
    for name, objects in {"examples": [], **fixtures}.items():
        dump = tmp_path / f"{name}.yaml"
        dump.write_text(yaml.safe_dump_all(objects))
        for subcommand in OFFLINE:
            emitted = _emitted(subcommand, EXAMPLES, dump) if objects else _emitted(subcommand, EXAMPLES)
            _assert_registered(subcommand[0], emitted)
            seen |= {code for code, _ in emitted}
    # A body read twice with different contents: duplicate-object, for every offline subcommand.
    changed = documents(EXAMPLES / "team-a.yaml")
    changed[0].setdefault("metadata", {}).setdefault("labels", {})["changed"] = "yes"
    (tmp_path / "changed.yaml").write_text(yaml.safe_dump_all(changed))
    for subcommand in OFFLINE:
        emitted = _emitted(subcommand, EXAMPLES, tmp_path / "changed.yaml")
        _assert_registered(subcommand[0], emitted)
        assert (_codes.DUPLICATE_OBJECT, _codes.WARNING) in emitted
        seen |= {code for code, _ in emitted}
    assert {"dtype-rejected", "role-flag", "pod-flag", "replica-missing-flag", "pod-dtype-rejected"} <= seen


def test_escape_rebind_plans_carry_registered_codes(fake, kube_env, tmp_path):
    seed(fake, team_a() + team_b_bindings() + [INJECTED_POD])
    seen: set[str] = set()
    for extra in ([], ["--strategy", "side-by-side"]):
        result = kvdtype(kube_env, tmp_path, *REBIND, *extra, "-o", "json")
        assert result.returncode == 0, result.stderr
        emitted = {(f["code"], f["severity"]) for f in json.loads(result.stdout)["findings"]}
        _assert_registered("escape", emitted)
        seen |= {code for code, _ in emitted}
    assert {_codes.MANUAL_STEP, _codes.NAME_CHANGE, _codes.SETTING_STAYS_OFF} <= seen


def test_no_call_site_names_a_code_outside_the_registry():
    """Every code passed to Report.add or Finding.of is a name from _codes or a registered string."""
    names = {name for name, value in vars(_codes).items() if isinstance(value, str) and value in _codes.BY_CODE}
    wrong = []
    for path in sorted((ROOT / "kubectl_kvdtype").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                    and ast.unparse(node.func) in ("report.add", "plan.report.add", "Finding.of")):
                continue
            first = node.args[0]
            if isinstance(first, ast.Name) and first.id.isupper() and first.id not in names:
                wrong.append(f"{path.name}:{node.lineno} {first.id}")
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and "-" in first.value \
                    and first.value not in _codes.BY_CODE:
                wrong.append(f"{path.name}:{node.lineno} {first.value!r}")
    assert wrong == []


def test_an_unregistered_code_cannot_be_reported():
    from kubectl_kvdtype._kits.report import ObjectRef, Report

    with pytest.raises(KeyError, match="not in the registry"):
        Report(kind="X").add("no-such-code", ObjectRef("Pod", "a", "b"), "message")


def test_every_subcommand_and_ignore_take_their_codes_from_the_registry():
    from kubectl_kvdtype._cli.registry import COMMANDS

    for info in COMMANDS:
        assert info.load().codes == info.codes == _codes.codes_of(info.name)
    every = {code for info in COMMANDS for code in info.codes}
    assert every == set(_codes.BY_CODE)  # no code that no subcommand reports
    status, _, err = in_process(["check", "-f", str(EXAMPLES), "--ignore", "setting-stays-off"], environ={})
    assert status == 1, err  # any registered code is accepted, and the errors still count
    status, _, err = in_process(["check", "-f", str(EXAMPLES), "--ignore", "no-such-code"], environ={})
    assert status == 2 and "no such finding code" in err


def test_docs_codes_table_is_generated_from_the_registry():
    table = (ROOT / "docs" / "codes.md").read_text(encoding="utf-8")
    assert table == _codes.markdown_table(), "docs/codes.md is stale: run scripts/regenerate"
    for entry in _codes.CODES:
        assert f"| `{entry.code}` | {entry.severity_text} |" in table


def test_reference_code_tables_agree_with_the_registry():
    """docs/reference.md's per-subcommand finding tables (the README points there)."""
    readme = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z-]+)` \| ([^|]+) \|", readme, flags=re.M)
    rows = [(code, severity.replace("`", "").strip()) for code, severity in rows
            if severity.split()[0] in (_codes.ERROR, _codes.WARNING, _codes.INFO)]
    assert rows, "docs/reference.md's finding tables were not found"
    for code, severity in rows:
        assert code in _codes.BY_CODE, f"docs/reference.md lists {code!r}, which is not in the registry"
        assert severity == _codes.lookup(code).severity_text, (code, severity)
    assert {code for code, _ in rows} == set(_codes.BY_CODE), "docs/reference.md's tables miss a registered code"

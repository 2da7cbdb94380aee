"""The rebind plan typed end to end (issue 39): the names a rebind resolves are one frozen value,
a step's action is an ``Action``, ``run_step`` dispatches through a table that refuses an action
it has no runner for (the if-chain it replaced deleted by default), and the journal converts each
to and from its JSON at its edge, old journals (``"patch"``) included."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from _support import ROOT, WRITES, seed
from kubectl_kvdtype._changes.journal import Journal
from kubectl_kvdtype._changes.rebind.checks import check_shape
from kubectl_kvdtype._changes.rebind.execute import RUNNERS, run_step
from kubectl_kvdtype._changes.rebind.steps import Action, Names, Step, Strategy
from kubectl_kvdtype._kits.records import FrozenInstanceError
from kubectl_kvdtype._kits.status import KvdtypeError
from test_escape_rebind import REBIND, kvdtype, team_a
from test_planted_journal import _step, plant

REBIND_PACKAGE = ROOT / "kubectl_kvdtype" / "_changes" / "rebind"
NAMES = Names(dtype="bfloat16", new_name="legacy-bf16", domain_name="team-a-legacy-bfloat16",
              strategy=Strategy.REPLACE, suffix="bfloat16", keep_old_binding=False)


def _entry(action: str, **fields) -> dict:
    return {"id": f"{action}:x", "action": action, "kind": "KVCachePoolBinding", "namespace": "team-a",
            "name": "x", "detail": "", "body": None, "expect": None, "origin": "", **fields}


def test_every_action_has_a_runner_and_an_unknown_one_is_refused_not_run():
    assert set(RUNNERS) == set(Action)
    stray = Step("frobnicate:x", "frobnicate", "ModelDeployment", "team-a", "x", "")  # type: ignore[arg-type]
    with pytest.raises(KvdtypeError, match=r"step frobnicate:x has an action this version cannot carry out "
                                           r"\('frobnicate'\): nothing was written for it"):
        run_step(None, None, stray, dry_run=False)  # type: ignore[arg-type]  # refused before anything is read


def test_the_journal_names_each_action_and_still_reads_the_old_name_of_turning_the_setting_off():
    for action in Action:
        step = Step.from_journal(_entry(action.value))
        assert step.action is action and step.to_journal() == _entry(action.value)
        json.dumps(step.to_journal())  # plain JSON
    old = Step.from_journal(_entry("patch", kind="Setting"))
    assert old.action is Action.SETTING_OFF and old.to_journal()["action"] == "setting-off"
    assert old.label().startswith("turn off Setting")
    assert [a.verb for a in Action] == ["patch", "create", "delete", "patch"]  # what SelfSubjectAccessReview asks


def test_the_names_are_one_frozen_value_recorded_by_their_json_names():
    recorded = NAMES.to_dict()
    assert recorded == {"dtype": "bfloat16", "newName": "legacy-bf16", "domainName": "team-a-legacy-bfloat16",
                        "strategy": "replace", "suffix": "bfloat16", "keepOldBinding": False}
    assert list(recorded) == ["dtype", "newName", "domainName", "strategy", "suffix", "keepOldBinding"]  # the golden's
    assert Names.from_dict(recorded) == NAMES
    with pytest.raises(FrozenInstanceError):
        NAMES.dtype = "fp8"  # type: ignore[misc]


def _journal(tmp_path: Path, steps: list[dict]) -> Journal:
    return Journal(tmp_path, {"format": 1, "namespace": "team-a", "binding": "legacy", "options": NAMES.to_dict(),
                              "steps": steps, "done": {}, "sent": {}})


def test_a_journal_step_of_an_unknown_action_is_refused_in_one_sentence(tmp_path):
    check_shape(_journal(tmp_path, [_entry("create"), _entry("patch", id="old")]))  # every name a version wrote
    for action, said in (("frobnicate", "'frobnicate'"), ("x" * 5000, "'xxxxxxxx")):
        with pytest.raises(KvdtypeError) as refused:
            check_shape(_journal(tmp_path, [_entry("create"), _entry(action, id="planted")]))
        message = refused.value.message
        assert f"a step of an action this version does not know ({said}" in message
        assert message.endswith("; nothing was changed") and "\n" not in message and len(message) < 400


def _constants(node: ast.AST) -> bool:
    """A module-level constant's definition (``SETTING_OFF_ID, ... = (...)``)."""
    names = [t for target in getattr(node, "targets", []) for t in ast.walk(target) if isinstance(t, ast.Name)]
    return isinstance(node, ast.Assign) and bool(names) and all(n.id.lstrip("_").isupper() for n in names)


def _bare(tree: ast.AST) -> list[str]:
    """String constants spelling an action outside the definitions of ``Action`` and of constants."""
    values = {action.value for action in Action} | {"patch"}
    allowed = {id(inner) for node in ast.walk(tree)
               if (isinstance(node, ast.ClassDef) and node.name == "Action") or _constants(node)
               for inner in ast.walk(node)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in values
            and id(node) not in allowed]


def test_the_rebind_package_reads_no_string_keyed_names_and_spells_no_action_bare():
    for path in sorted(REBIND_PACKAGE.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert 'names["' not in text and 'options["' not in text, path.name
        assert _bare(ast.parse(text)) == [], path.name
    assert _bare(ast.parse('if step.action == "delete":\n    pass')) == ["delete"]  # what it would catch


@pytest.mark.e2e  # through kubectl against the fake API server
def test_a_planted_journal_of_an_unknown_action_writes_nothing(fake, kube_env, tmp_path):
    seed(fake, team_a())
    fake.clear_log()
    planted = plant(tmp_path / "planted", [_step("frobnicate", "ModelDeployment", "team-a", "qwen-legacy")])
    result = kvdtype(kube_env, tmp_path, *REBIND, "--backup-dir", str(planted), "--apply", "--yes")
    assert result.returncode == 3, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line]
    assert line.startswith("error: ") and "a step of an action this version does not know ('frobnicate')" in line
    assert [r for r in fake.requests if r.method in WRITES and "selfsubjectaccessreviews" not in r.path] == []

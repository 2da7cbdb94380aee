"""One confirmation rule for every [y/N] before a write, and one kubeconfig finder (issue 26)."""

from __future__ import annotations

import argparse
import io
import os
import re
from pathlib import Path

import pytest

from _support import ROOT
from kubectl_kvdtype._commands.command import CommonOptions, Context, confirm
from kubectl_kvdtype._kits.env import Environment
from kubectl_kvdtype._kits.status import ExitStatus, KvdtypeError, UsageError

pytestmark = pytest.mark.version_sensitive  # completion (test_tiers.py)

PACKAGE = ROOT / "kubectl_kvdtype"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _context(yes: bool, terminal: bool, answer: str = "", apply: bool = False) -> Context:
    stdin = _Terminal(answer + "\n") if terminal else io.StringIO(answer + "\n")
    env = Environment(stdin=stdin, stdout=io.StringIO(), stderr=io.StringIO(), environ={})
    return Context(options=argparse.Namespace(yes=yes), common=CommonOptions(yes=yes, apply=apply), env=env)


@pytest.mark.parametrize("apply", [False, True])
def test_the_confirmation_rule(apply):
    shown: list[str] = []
    confirm(_context(yes=True, terminal=True, apply=apply), "Write?", show=lambda: shown.append("x"))
    assert shown == []  # --yes: neither shown nor asked
    for answer in ("y", "YES"):
        context = _context(yes=False, terminal=True, answer=answer, apply=apply)
        confirm(context, "Write?", show=lambda: shown.append("x"))
        assert context.env.stderr.getvalue().endswith("Write? [y/N]: ")
    assert shown == ["x", "x"]  # shown before each question
    for answer in ("", "n", "yep"):
        with pytest.raises(KvdtypeError, match="not confirmed; nothing was changed") as refused:
            confirm(_context(yes=False, terminal=True, answer=answer, apply=apply), "Write?")
        assert refused.value.status != ExitStatus.USAGE
    unattended = _context(yes=False, terminal=False, answer="y", apply=apply)
    if apply:  # --apply on the command line is the consent a script gives, for every write that has it
        confirm(unattended, "Write?")
        assert unattended.env.stderr.getvalue() == ""
    else:
        with pytest.raises(UsageError, match="stdin is not a terminal, so pass --yes"):
            confirm(unattended, "Write?")


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_question_before_a_write_is_asked_by_the_one_rule():
    asking = [p.relative_to(PACKAGE).as_posix() for p in _modules() if re.search(r"\.ask\(", p.read_text())]
    assert asking == ["_commands/command.py"]
    for name in ("_changes/rebind/execute.py", "_changes/restore.py", "_changes/fix/apply.py", "_changes/switch.py"):
        assert re.search(r"\bconfirm\(", (PACKAGE / name).read_text()), name


def test_one_kubeconfig_finder():
    reading = [p.relative_to(PACKAGE).as_posix() for p in _modules() if '"KUBECONFIG"' in p.read_text()]
    assert reading == ["_sources/connection.py"]


def test_completion_finds_the_kubeconfig_files_a_run_finds(tmp_path):
    from kubectl_kvdtype._cli.complete import complete
    from kubectl_kvdtype._sources.connection import kubeconfig_names, kubeconfig_paths

    first, second = tmp_path / "a", tmp_path / "b"
    first.write_text("contexts:\n- name: one\n- name: two\nusers:\n- name: alice\n")
    second.write_text("contexts:\n- name: two\n- name: three\n")
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("contexts:\n- name: at-home\n")
    for environ in ({"KUBECONFIG": os.pathsep.join([str(first), str(tmp_path / "missing"), str(second)])},
                    {"HOME": str(home)}, {"HOME": str(tmp_path)}):
        out = io.StringIO()
        complete(["--context", ""], Environment(stdout=out, stderr=io.StringIO(), environ=environ))
        found = [line for line in out.getvalue().splitlines()[:-1]]
        expected = kubeconfig_names(None, environ, "contexts") if kubeconfig_paths(None, environ) else []
        assert found == expected, environ
    assert kubeconfig_names(None, {"KUBECONFIG": f"{first}{os.pathsep}{second}"}, "contexts") == ["one", "two",
                                                                                                 "three"]
    assert kubeconfig_names(str(first), {"KUBECONFIG": str(second)}, "users") == ["alice"]


#: Where argparse may be imported: the command line, what subcommands are built on, the subcommand
#: modules (the package root), and the engines, which rebuild the engines' own parsers with it.
_ARGPARSE_ALLOWED = ("_cli/", "_commands/", "_engines/")


def test_argparse_stays_in_the_command_line_layers():
    import ast

    importing = []
    for path in _modules():
        name = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        if "argparse" in modules and "/" in name and not name.startswith(_ARGPARSE_ALLOWED):
            importing.append(name)
    assert importing == []


def test_typed_options_refuse_a_name_the_command_line_does_not_have():
    from kubectl_kvdtype._commands.command import Command, CommonOptions
    from kubectl_kvdtype.completion import CompletionOptions
    from kubectl_kvdtype.escape import rebind_options, restore_options, switch_options
    from kubectl_kvdtype.find_flags import fix_options
    from kubectl_kvdtype.verify import VerifyOptions

    assert not hasattr(Command, "option")  # no default for a misspelt name
    common = CommonOptions()
    builders = (lambda n: rebind_options(n, common), lambda n: fix_options(n, common),
                lambda n: restore_options(n, common), VerifyOptions.of, lambda n: switch_options(n, "on"),
                CompletionOptions.of)
    for build in builders:
        with pytest.raises(AttributeError):
            build(argparse.Namespace())
    options = VerifyOptions.of(argparse.Namespace(deployment="d", wait=None, argv=["verify"], poll_interval=None))
    with pytest.raises(AttributeError):
        options.deployment = "other"  # type: ignore[misc]  # frozen


def test_the_write_layers_never_read_the_parsed_command_line():
    from kubectl_kvdtype._changes.fix.apply import FixOptions
    from kubectl_kvdtype._changes.journal import RestoreOptions
    from kubectl_kvdtype._changes.rebind.steps import RebindOptions
    from kubectl_kvdtype._changes.switch import SwitchOptions
    from kubectl_kvdtype._sources.connection import ConnectionOptions

    for folder in ("_changes", "_judging", "_sources"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            assert "context.options" not in path.read_text(encoding="utf-8"), path.name
    # Built by the subcommands:
    for typed in (RebindOptions, FixOptions, RestoreOptions, SwitchOptions, ConnectionOptions):
        assert not hasattr(typed, "of") and not hasattr(typed, "from_flags"), typed


#: Where the parsed command line (an ``argparse.Namespace``, ``Context.options``) may be read: the
#: command line, ``Context`` itself, and the subcommand modules (the package root), each into its typed
#: options at its boundary. The engines rebuild the engines' own parsers, and never read ours.
_NAMESPACE_ALLOWED = ("_cli/", "_commands/")


def test_below_the_subcommands_nothing_reads_the_parsed_command_line():
    import ast

    reading = []
    for path in _modules():
        name = path.relative_to(PACKAGE).as_posix()
        if "/" not in name or name.startswith(_NAMESPACE_ALLOWED):
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        ours = not name.startswith("_engines/")  # the engines' parsers' actions take their own namespaces
        touches = any(isinstance(node, ast.Attribute) and ((node.attr == "Namespace" and ours) or (
            node.attr == "options" and isinstance(node.value, ast.Name) and node.value.id == "context"))
            for node in ast.walk(tree))
        touches |= any(isinstance(node, ast.ImportFrom) and node.module == "argparse" for node in ast.walk(tree))
        if touches:
            reading.append(name)
    assert reading == []


def test_the_shared_flags_are_typed_once_and_refuse_a_missing_global_flag():
    from kubectl_kvdtype._cli.main import parse
    from kubectl_kvdtype._commands.command import CommonOptions

    with pytest.raises(AttributeError):
        CommonOptions.of(argparse.Namespace())
    common = CommonOptions.of(parse(["check", "-n", "team-a", "--context", "prod", "--ignore", "binding-unused",
                                     "--fail-on", "warning"]))
    assert (common.namespace, common.connection.context, common.ignore, common.fail_on) == (
        "team-a", "prod", ("binding-unused",), "warning")
    assert not common.yes and CommonOptions.of(parse(["escape", "off", "--yes"])).yes
    with pytest.raises(AttributeError):
        common.namespace = "other"  # type: ignore[misc]  # frozen

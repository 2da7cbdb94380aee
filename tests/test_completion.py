"""Shell completion: `completion bash|zsh|fish`, and kubectl's own plugin completion through
`kubectl_complete-kvdtype` (kubectl >= 1.26), with names from the fake cluster."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from _support import EXAMPLES, ROOT, documents, kvdtype, seed
from conftest import run_kubectl

pytestmark = pytest.mark.version_sensitive  # argparse, the argv reader, completion or the man page (test_tiers.py)

NAMESPACES = ("team-a", "team-b", "team-c", "gpustack-system")


def _parser_facts():
    from kubectl_kvdtype._cli.main import COMMANDS, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, sub.choices, [c.name for c in COMMANDS]


def complete(env: dict, *words: str) -> tuple[list[str], str]:
    """`kubectl __complete kvdtype WORDS...`: what kubectl's shell completion receives."""
    result = run_kubectl(["__complete", "kvdtype", *words], env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines and lines[-1].startswith(":"), result.stdout
    return [line.split("\t")[0] for line in lines[:-1]], lines[-1]


@pytest.fixture
def seeded(fake, kube_env):
    seed(fake, documents(EXAMPLES))
    for name in NAMESPACES:
        fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    # The 2 s default is a prompt's budget; on a loaded 2-core CI machine importing the kubernetes
    # client alone took 5 s (measured), and these tests are about where the names come from.
    # test_a_slow_cluster_is_given_up_on_quickly tests the budget itself, with its own value.
    kube_env["KUBECTL_KVDTYPE_COMPLETION_TIMEOUT"] = "30"
    return kube_env


def test_subcommands_come_from_the_registry_through_kubectl(kube_env):
    _, _, names = _parser_facts()
    found, directive = complete(kube_env, "")
    assert found == names  # every registered subcommand, in --help order, and nothing else
    assert directive == ":4"
    assert "completion" in found and "check" in found
    found, _ = complete(kube_env, "c")
    assert found == [n for n in names if n.startswith("c")]


def test_every_flag_of_every_subcommand_is_offered(kube_env):
    parser, subparsers, names = _parser_facts()
    global_flags = {o for a in parser._actions if getattr(a, "global_flag", False) for o in a.option_strings
                    if o.startswith("--")}
    assert {"--namespace", "--output", "--token", "--filename"} <= global_flags
    for name in names:
        own = {o for a in subparsers[name]._actions if a.help != argparse.SUPPRESS for o in a.option_strings
               if o.startswith("--")}
        expected = own | global_flags  # its own, and the global flags its --help points to
        found, directive = complete(kube_env, name, "--")
        assert set(found) == expected, name
        assert directive == ":4"


def _formats(taken_by_judging: bool) -> list[str]:
    """The -o values a subcommand without --fix takes, from the formats table (``_output/render.FORMATS``)."""
    from kubectl_kvdtype._output.format import EVERY, JUDGING
    from kubectl_kvdtype._output.render import FORMATS

    return [f.name for f in FORMATS if f.takes == EVERY or (taken_by_judging and f.takes == JUDGING)]


def test_flag_values(kube_env):
    assert complete(kube_env, "check", "-o", "") == (_formats(True), ":4")
    assert complete(kube_env, "preflight", "-o", "s") == (["sarif"], ":4")
    assert "sarif" not in complete(kube_env, "escape", "status", "-o", "")[0]  # escape has no SARIF form
    assert complete(kube_env, "check", "--output=y") == (["--output=yaml"], ":4")
    from kubectl_kvdtype._cli.main import COMMANDS
    from kubectl_kvdtype.check import CheckCommand

    found, _ = complete(kube_env, "check", "--ignore", "dtype-")
    known = {c for command in COMMANDS for c in command.codes if c.startswith("dtype-")}
    assert found and set(found) <= known  # every candidate is a real dtype- code
    assert all(code in found for code in CheckCommand.codes if code.startswith("dtype-"))
    # A path: no candidates, and directive 0 so the shell completes file names itself.
    assert complete(kube_env, "check", "-f", "") == ([], ":0")
    assert complete(kube_env, "--kubeconfig", "") == ([], ":0")
    assert complete(kube_env, "completion", "") == (["bash", "zsh", "fish"], ":4")
    assert complete(kube_env, "--context", "") == (["fake"], ":4")  # from the kubeconfig, no cluster


def test_junit_and_fail_on_are_offered_with_the_judging_subcommands_only(kube_env):
    from kubectl_kvdtype._cli.registry import judging

    assert set(judging()) == {"check", "find-flags", "verify", "preflight"}
    for name in judging():
        assert "junit" in complete(kube_env, name, "-o", "")[0], name
        assert complete(kube_env, name, "--fail-on", "") == (["error", "warning"], ":4"), name
        assert complete(kube_env, name, "--fail-on=w") == (["--fail-on=warning"], ":4"), name
        assert "--fail-on" in complete(kube_env, name, "--f")[0], name
    for words in (["escape", "status"], ["escape", "rebind"], ["completion"]):
        assert complete(kube_env, *words, "-o", "")[0] == _formats(False), words
        assert "--fail-on" not in complete(kube_env, *words, "--")[0], words


def test_namespaces_and_deployment_names_come_from_the_cluster(seeded):
    found, directive = complete(seeded, "check", "-n", "")
    assert found == sorted(NAMESPACES) and directive == ":4"
    assert complete(seeded, "check", "--namespace=team-")[0] == ["--namespace=team-a", "--namespace=team-b",
                                                                 "--namespace=team-c"]
    team_a = sorted(o["metadata"]["name"] for o in documents(EXAMPLES)
                    if o.get("kind") == "ModelDeployment" and o["metadata"].get("namespace") == "team-a")
    assert team_a
    assert complete(seeded, "verify", "-n", "team-a", "")[0] == team_a
    everywhere, _ = complete(seeded, "verify", "-A", "")
    assert set(team_a) < set(everywhere)
    prefix = team_a[0][:3]
    assert complete(seeded, "verify", "-nteam-a", prefix)[0] == [n for n in team_a if n.startswith(prefix)]


def test_a_slow_cluster_is_given_up_on_quickly(seeded, fake):
    """With a 1 s completion timeout, a cluster that answers after an hour completes nothing: the
    timeout, not the answer, ended it (the answer never came, so only the timeout could)."""
    fake.delay(3600, path="namespaces|modeldeployments", times=None)
    env = dict(seeded, KUBECTL_KVDTYPE_COMPLETION_TIMEOUT="1")
    found, directive = complete(env, "check", "-n", "")
    assert (found, directive) == ([], ":4")
    assert [r for r in fake.requests if re.search("namespaces|modeldeployments", r.path)]  # it did ask


def test_unreachable_cluster_completes_nothing_and_prints_no_error(tmp_path, kube_env):
    env = dict(kube_env, KUBECONFIG=str(tmp_path / "missing"))
    result = run_kubectl(["__complete", "kvdtype", "check", "-n", ""], env)
    assert result.returncode == 0
    assert result.stdout.splitlines() == [":4"]
    assert "Traceback" not in result.stderr and "error:" not in result.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script(kube_env, shell):
    result = kvdtype(kube_env, "completion", shell)
    assert result.returncode == 0, result.stderr
    assert "kubectl-kvdtype" in result.stdout and "__complete" in result.stdout
    assert result.stderr == ""
    bad = kvdtype(kube_env, "completion", "powershell")
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")


def _bash(kube_env: dict, script: str, line: str) -> list[str]:
    program = (f"source {script}\n"
               f"COMP_LINE={_quote(line)}; COMP_POINT=${{#COMP_LINE}}\n"
               "read -ra COMP_WORDS <<< \"$COMP_LINE\"; [[ \"$COMP_LINE\" == *' ' ]] && COMP_WORDS+=('')\n"
               "COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n"
               "_kubectl_kvdtype_complete\n"
               "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], env=kube_env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def test_bash_script_completes_in_bash(seeded, tmp_path):
    script = tmp_path / "kvdtype.bash"
    script.write_text(kvdtype(seeded, "completion", "bash").stdout)
    _, _, names = _parser_facts()
    assert _bash(seeded, str(script), "kubectl-kvdtype ") == names
    assert _bash(seeded, str(script), "kubectl-kvdtype check --no-h") == ["--no-headers"]
    # bash breaks words at "=": the reply replaces only what follows it.
    assert _bash(seeded, str(script), "kubectl-kvdtype check --output=js") == ["json"]
    assert _bash(seeded, str(script), "kubectl-kvdtype check -n team-") == ["team-a", "team-b", "team-c"]


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed (.ci/run installs it)")
def test_zsh_script_loads_and_asks_the_plugin(seeded, tmp_path):
    script = tmp_path / "_kubectl-kvdtype"
    script.write_text(kvdtype(seeded, "completion", "zsh").stdout)
    # Stand in for zsh's completion system: record what _describe would offer.
    program = (f"autoload -U compinit && compinit -u -D\nsource {script}\n"
               "_describe() { print -l -- \"${(@P)${@[-1]}}\"; }\n"
               "_files() { print -- FILES; }\n"
               "words=(kubectl-kvdtype check -o ''); CURRENT=4; _kubectl_kvdtype\n"
               "words=(kubectl-kvdtype ''); CURRENT=2; _kubectl_kvdtype\n"
               "words=(kubectl-kvdtype check -f ''); CURRENT=4; _kubectl_kvdtype\n")
    result = subprocess.run(["zsh", "-f", "-c", program], env=seeded, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == ["table", "wide", "json", "yaml"]
    assert any(line.startswith("check:") for line in lines)  # candidate:description
    assert lines[-1] == "FILES"


@pytest.mark.skipif(not shutil.which("fish"), reason="fish is not installed (.ci/run installs it)")
def test_fish_script_completes_in_fish(seeded, tmp_path):
    script = tmp_path / "kubectl-kvdtype.fish"
    script.write_text(kvdtype(seeded, "completion", "fish").stdout)
    program = f"source {script}; complete -C 'kubectl-kvdtype check -o '; complete -C 'kubectl-kvdtype ch'"
    result = subprocess.run(["fish", "--no-config", "-c", program], env=dict(seeded, HOME=str(seeded["HOME"])),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    candidates = [line.split("\t")[0] for line in result.stdout.splitlines()]
    assert candidates[:4] == ["table", "wide", "json", "yaml"]
    assert "check" in candidates


def test_kubectl_complete_helper_is_installed_and_is_the_engine(seeded):
    helper = shutil.which("kubectl_complete-kvdtype", path=seeded["PATH"])
    assert helper, "pip install puts kubectl_complete-kvdtype on PATH"
    assert os.access(ROOT / "kubectl_complete-kvdtype", os.X_OK)
    direct = subprocess.run([helper, "check", "-n", ""], env=seeded, capture_output=True, text=True, timeout=60)
    assert direct.stdout.splitlines()[-1] == ":4"
    assert [line for line in direct.stdout.splitlines()[:-1]] == sorted(NAMESPACES)
    # Without the helper on PATH kubectl has nothing to ask (the test above depends on it).
    bindir = Path(helper).parent
    hidden = dict(seeded, PATH=os.pathsep.join(p for p in seeded["PATH"].split(os.pathsep)
                                               if Path(p) != bindir))
    result = run_kubectl(["__complete", "kvdtype", ""], hidden)
    assert "check" not in result.stdout.splitlines()

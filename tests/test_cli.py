"""The command line itself: help, version, start-up cost, colour."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from _support import EXAMPLES, PLUGIN, client_kubeconfig, documents, imported_by, in_process, kvdtype, roots, seed

pytestmark = pytest.mark.version_sensitive  # help, --version and usage errors are argparse's (test_tiers.py)


def test_help_says_kubectl_kvdtype_through_kubectl(kube_env):
    result = kvdtype(kube_env, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: kubectl kvdtype ")
    assert "check" in result.stdout
    sub = kvdtype(kube_env, "check", "--help")
    assert sub.stdout.startswith("usage: kubectl kvdtype check")
    assert "--all-namespaces" in result.stdout and "--filename" in result.stdout  # the global flags, listed once
    assert "--fail-on" in sub.stdout and "'kubectl kvdtype --help' lists them" in " ".join(sub.stdout.split())


def test_version(kube_env):
    from kubectl_kvdtype import __version__

    result = kvdtype(kube_env, "--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"kubectl-kvdtype v{__version__}"


@pytest.mark.e2e  # a fresh Python process
@pytest.mark.parametrize("args", [["--help"], ["--version"], ["check", "-f", str(EXAMPLES), "-o", "json"],
                                  ["check", "-f", str(EXAMPLES)], ["completion", "bash"],
                                  ["__complete", "check", "--o"]])
def test_fast_paths_never_import_the_kubernetes_client(args):
    _, modules = imported_by(args)
    assert roots(modules) & {"kubernetes", "urllib3"} == set()


@pytest.mark.e2e  # a fresh Python process
@pytest.mark.parametrize("args, without", [
    (["check", "-A", "--context", "no-such-context"], []),
    (["verify", "-A"], ["KUBECONFIG", "KUBERNETES_SERVICE_HOST"]),  # no kubeconfig, not in a cluster
    (["find-flags", "-A", "--server", "https://127.0.0.1:1", "--token", "t", "--username", "u"], []),  # refused
])
def test_a_live_run_refused_before_its_first_request_imports_no_client(kube_env, tmp_path, args, without):
    """The kubeconfig is resolved and refused before the client stack (urllib3, the kubernetes
    client) is imported: it is paid for only once a request is due. The fake's kubeconfig is JSON,
    read without PyYAML too."""
    env = {k: v for k, v in kube_env.items() if k not in without}
    env["HOME"] = str(tmp_path)  # no ~/.kube/config to fall back on
    result, modules = imported_by(args, env)
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and len(lines) == 1, result.stderr
    assert roots(modules) & {"kubernetes", "urllib3", "yaml"} == set()


@pytest.mark.e2e  # a fresh Python process
def test_find_flags_without_fix_imports_no_write_machinery():
    """The plan, the backup and the journal of --fix are imported only when --fix asks for them."""
    code = ("import sys; from kubectl_kvdtype._cli.main import run\n"
            f"run(['find-flags', '-f', {str(EXAMPLES)!r}])\n"
            "print(sorted(m for m in sys.modules if m.startswith(('kubectl_kvdtype._changes.fix.apply',"
            " 'kubectl_kvdtype._changes.fix.plan', 'kubectl_kvdtype._changes.journal'))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout + result.stderr


#: The client's parts a live run never needs: its generated API and model classes (pydantic), the
#: OIDC refresh's requests and oauthlib, its dynamic client and watch.
_HEAVY = ('pydantic', 'requests', 'requests_oauthlib', 'oauthlib', 'kubernetes.client.models', 'kubernetes.client.api',
          'kubernetes.client.api_client', 'kubernetes.dynamic', 'kubernetes.watch')


def test_a_live_run_over_a_token_kubeconfig_imports_neither_the_client_nor_urllib3(fake, kube_env):
    """A token (or basic auth, or client certificate) with a CA and no proxy needs nothing of the
    client: its requests go over http.client and ssl (the direct transport), and answer alike."""
    seed(fake, documents(EXAMPLES))
    result, modules = imported_by(["check", "-A", "-o", "json"], kube_env)
    assert result.returncode == 1, result.stderr  # examples/ hold error findings
    assert len(json.loads(result.stdout)["items"]) == 8  # the Bindings of examples/
    assert (sorted(m for m in modules if m.startswith(_HEAVY)), "kubernetes.client.rest" in modules,
            "urllib3" in modules) == ([], False, False)
    # Nor what only another run needs: a fleet's module, and pkgutil for the engine tables' file.
    assert {"kubectl_kvdtype._cli.fleet", "pkgutil"} & modules == set()
    assert "kubectl_kvdtype._engines.parsers" in modules  # the module that reads the tables is loaded


def test_a_live_run_through_the_clients_transport_imports_the_client_plainly(fake, kube_env, tmp_path):
    """An exec plugin beside a token needs the client (its loader and transport,
    ``_support.client_kubeconfig``): the run answers from the fake with the client imported plainly,
    its packages' ``__init__`` run (and with them requests and oauthlib for the OIDC refresh), and
    still without its generated API classes and models, which it loads only when one is named; and
    the probe can tell the client apart."""
    seed(fake, documents(EXAMPLES))
    kube_env["KUBECONFIG"] = str(client_kubeconfig(fake, tmp_path))
    result, modules = imported_by(["check", "-A", "-o", "json"], kube_env)
    assert result.returncode == 1, result.stderr
    assert len(json.loads(result.stdout)["items"]) == 8
    assert {"kubernetes", "kubernetes.client", "kubernetes.config", "kubernetes.client.rest", "urllib3"} <= modules
    models = ("kubernetes.client.models.", "kubernetes.client.api.")
    assert sorted(m for m in modules if m.startswith(models)) == []


def test_a_run_builds_the_parser_of_the_subcommand_it_names_alone():
    """The lazy command line lists every subcommand in --help as the whole one does, refuses an
    unknown name with the same choices, and builds only the parser of the subcommand a run names."""
    import argparse

    from kubectl_kvdtype._cli.registry import COMMANDS, build_parser

    assert build_parser(lazy=True).format_help() == build_parser().format_help()
    lazy = build_parser(lazy=True)
    (subcommands,) = [a for a in lazy._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(subcommands.choices) == [info.name for info in COMMANDS]
    options = lazy.parse_args(["verify", "-A"])
    assert options.command == "verify" and options.all_namespaces
    assert [name for name, built in subcommands.choices.items() if built is not None] == ["verify"]
    status, _, stderr = in_process(["bogus"])
    assert status == 2 and f"(choose from {', '.join(repr(info.name) for info in COMMANDS)})" in stderr


def test_colour_only_on_a_terminal_and_never_with_no_color():
    import io

    from kubectl_kvdtype._cli.main import run
    from kubectl_kvdtype._kits.env import Environment

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for environ, coloured in (({}, True), ({"NO_COLOR": "1"}, False)):
        out = Terminal()
        run(["check", "-f", str(EXAMPLES)], Environment(stdout=out, stderr=io.StringIO(), environ=environ))
        assert ("\x1b[31mrejected" in out.getvalue()) is coloured


def test_empty_scope_says_so_on_stderr(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    status, out, err = in_process(["check", "-f", str(empty)])
    assert status == 0
    assert f"No KVCachePoolBindings found in {empty} (a List with no items)." in err
    assert f"In {empty} (a List with no items): 0 Binding(s)" in out


def test_repeated_filename_before_and_after_the_subcommand():
    status, out, _ = in_process(["-f", str(EXAMPLES / "team-a.yaml"), "check", "-f", str(EXAMPLES / "team-b.yaml"),
                                 "-o", "json"])
    import json

    assert {i["namespace"] for i in json.loads(out)["items"]} == {"team-a", "team-b"}
    assert status == 1


def test_console_script_is_installed():
    assert os.access(PLUGIN, os.X_OK)


@pytest.mark.e2e  # a fresh Python process
def test_the_console_script_ends_without_the_interpreters_teardown_unless_an_exit_hook_waits():
    """With no exit hook registered, the console script ends the process as soon as the result is
    flushed: nothing after ``main()`` runs, and the status and the whole result are the run's.
    With one registered (the kubernetes client's removal of its key files), the interpreter ends
    it and runs the hook, and everything alive is frozen out of the exit's one full collection
    (the collector was off all run). A caller of ``main(argv)`` (the tests) gets neither."""
    def console(hook: bool) -> subprocess.CompletedProcess:
        code = ("import atexit, gc, sys\n"
                "from kubectl_kvdtype._cli.main import main\n"
                "frozen = gc.get_freeze_count()\n"  # not 0 on every Python: 3.12 freezes some at start-up
                "assert main(['--version']) == 0 and gc.get_freeze_count() == frozen\n"
                + ("atexit.register(print, 'the hook ran', file=sys.stderr)\n" if hook else "") +
                "sys.argv = ['kubectl-kvdtype', '-f', sys.argv[1], 'check', '-o', 'json']\n"
                "status = main()\n"
                "print('main returned', status, gc.get_freeze_count() > frozen + 1000, gc.isenabled(), "
                "file=sys.stderr)\n"
                "sys.exit(status)\n")
        return subprocess.run([sys.executable, "-c", code, str(EXAMPLES)], capture_output=True, text=True,
                              timeout=60)

    for hook in (False, True):
        result = console(hook)
        version, _, report = result.stdout.partition("\n")
        assert version.startswith("kubectl-kvdtype v") and json.loads(report)["kind"] == "CheckReport"
        assert result.returncode == 1, result.stderr  # the example manifests hold findings
        if hook:
            assert result.stderr.split("\n")[-3:] == ["main returned 1 True False", "the hook ran", ""], result.stderr
        else:
            assert "main returned" not in result.stderr, result.stderr


def test_a_result_is_handed_to_stdout_a_slice_at_a_time(monkeypatch):
    """The stream encodes what one write gives it in one piece: a big result goes a slice at a
    time, so it is never held whole as text and as bytes at once, and arrives unchanged."""
    import io

    from kubectl_kvdtype._cli import main as _main
    from kubectl_kvdtype._kits.env import Environment

    class Recording(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.sizes: list[int] = []

        def write(self, text: str) -> int:
            self.sizes.append(len(text))
            return super().write(text)

    def result(slice_: int) -> Recording:
        monkeypatch.setattr(_main, "WRITE_SLICE", slice_)
        out = Recording()
        env = Environment(stdin=io.StringIO(), stdout=out, stderr=io.StringIO(), environ=dict(os.environ))
        _main.run(["check", "-f", str(EXAMPLES), "-o", "json"], env)
        return out

    whole, sliced = result(1 << 20), result(100)
    assert len(whole.sizes) == 1 and whole.sizes[0] > 1000
    assert max(sliced.sizes) == 100 and len(sliced.sizes) == -(-whole.sizes[0] // 100)
    assert sliced.getvalue() == whole.getvalue() and json.loads(sliced.getvalue())["kind"] == "CheckReport"

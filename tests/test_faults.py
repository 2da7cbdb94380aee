"""Bad input and faults: one clear sentence on stderr and the documented exit code."""

from __future__ import annotations

import json
import os
import socket
import sys
import textwrap

import pytest

from _support import EXAMPLES, assert_one_clean_line, direct, documents, in_process, kvdtype, report, seed


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _kubeconfig(path, server: str, token: str = "fake-token", context: str = "fake") -> str:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": context, "cluster": {"server": server}}],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
    }))
    return str(path)


def test_unreachable_cluster(kube_env, tmp_path):
    kube_env["KUBECONFIG"] = _kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{_closed_port()}")
    result = kvdtype(kube_env, "check")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "cannot reach the cluster at http://127.0.0.1:" in result.stderr
    assert result.stdout == ""


def test_tls_failure(fake, kube_env, tmp_path):
    # The fake serves https with its own CA; a kubeconfig that does not trust it fails the handshake.
    kube_env["KUBECONFIG"] = _kubeconfig(tmp_path / "kc", fake.url)
    result = kvdtype(kube_env, "check")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "TLS failure" in result.stderr


def test_missing_kubeconfig_file(kube_env, tmp_path):
    result = kvdtype(kube_env, "check", "--kubeconfig", str(tmp_path / "nope"))
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "does not exist" in result.stderr


def test_malformed_kubeconfig(kube_env, tmp_path):
    bad = tmp_path / "bad"
    bad.write_text("clusters: [unclosed\n")
    kube_env["KUBECONFIG"] = str(bad)
    result = kvdtype(kube_env, "check")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "not valid YAML" in result.stderr


def test_unknown_context(kube_env):
    result = kvdtype(kube_env, "check", "--context", "prod")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert 'the context "prod" does not exist' in result.stderr


def test_no_kubeconfig_anywhere(kube_env, tmp_path):
    env = {k: v for k, v in kube_env.items() if k != "KUBECONFIG"}
    env["HOME"] = str(tmp_path / "empty-home")
    result = kvdtype(env, "check")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "no kubeconfig found" in result.stderr


def test_unauthorized(fake, kube_env, tmp_path):
    kube_env["KUBECONFIG"] = str(fake.write_kubeconfig(tmp_path / "kc", token="wrong"))
    result = kvdtype(kube_env, "check")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "401 Unauthorized" in result.stderr


def test_forbidden_list_names_verb_resource_and_namespace(fake, kube_env):
    seed(fake, documents(EXAMPLES))
    fake.deny("list", "modeldeployments", namespace="team-a")
    result = kvdtype(kube_env, "check", "-n", "team-a")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert 'you may not list modeldeployments.worker.gpustack.ai in namespace "team-a" (403 Forbidden)' in result.stderr


def test_operator_api_not_served(kube_env, tmp_path):
    from fakekube import FakeKube

    with FakeKube(groups_versions={"worker.gpustack.ai": None}) as bare:
        kube_env["KUBECONFIG"] = str(bare.write_kubeconfig(tmp_path / "bare"))
        result = kvdtype(kube_env, "check", "-A")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "worker.gpustack.ai" in result.stderr and "not installed" in result.stderr


def test_persistent_server_error_gives_up_cleanly(fake, kube_env):
    fake.fail(503, path=r"/kvcachepoolbindings$", times=10)
    result = kvdtype(kube_env, "check", "-A")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "503" in result.stderr


@pytest.mark.e2e  # the plugin as a subprocess
def test_malformed_manifest_names_the_file(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("kind: KVCachePoolBinding\nmetadata: {name: [\n")
    result = direct(dict(os.environ), "check", "-f", str(bad))
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert str(bad) in result.stderr


@pytest.mark.e2e  # the plugin as a subprocess
def test_missing_manifest(tmp_path):
    result = direct(dict(os.environ), "check", "-f", str(tmp_path / "absent.yaml"))
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)


@pytest.mark.parametrize("args, words", [
    (["check", "--output", "xml"], "invalid choice"),
    (["check", "--bogus"], "unrecognized arguments"),
    (["check", "--ignore", "no-such-code"], "no such finding code"),
    (["check", "-n", "a", "-A"], "cannot be used together"),
    (["check", "--request-timeout", "soon"], "invalid duration"),
    ([], "name a subcommand"),
    (["frobnicate"], "invalid choice"),
])
def test_usage_errors_exit_2(args, words):
    status, out, err = in_process(args)
    assert status == 2
    assert out == ""
    assert_one_clean_line(err)
    assert words in err


def test_exec_credential_plugin_and_kubeconfig_left_untouched(fake, kube_env, tmp_path):
    seed(fake, documents(EXAMPLES))
    plugin = tmp_path / "cred-plugin"
    plugin.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json
        print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                           "status": {{"token": "fake-token"}}}}))
    """))
    plugin.chmod(0o755)
    path = fake.write_kubeconfig(tmp_path / "exec", exec_command=[str(plugin)])
    before = path.read_bytes() if hasattr(path, "read_bytes") else open(path, "rb").read()
    kube_env["KUBECONFIG"] = str(path)
    result = kvdtype(kube_env, "check", "-A", "-o", "json")
    assert result.returncode == 1, result.stderr
    assert len(report(result)["items"]) == 8  # the Bindings of examples/ (team-a, -b, -c)
    assert open(path, "rb").read() == before


def test_first_kubeconfig_in_the_list_sets_the_context(fake, kube_env, tmp_path):
    from fakekube import FakeKube

    seed(fake, documents(EXAMPLES))
    with FakeKube() as other:  # empty cluster, named by the second file's current-context
        first = fake.write_kubeconfig(tmp_path / "first", context="real")
        second = other.write_kubeconfig(tmp_path / "second", context="other")
        kube_env["KUBECONFIG"] = os.pathsep.join([str(first), str(second)])
        found = report(kvdtype(kube_env, "check", "-A", "-o", "json"))
        assert len(found["items"]) == 8
        assert not other.requests or all(r.path in ("/version",) for r in other.requests)
        explicit = kvdtype(kube_env, "check", "-A", "-o", "json", "--context", "other")
        assert json.loads(explicit.stdout)["items"] == []


def test_request_timeout(fake, kube_env):
    fake.delay(3.0, path=r"/kvcachepoolbindings$", times=None)
    result = kvdtype(kube_env, "check", "-A", "--request-timeout", "500ms")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "list kvcachepoolbindings.worker.gpustack.ai in all namespaces: the cluster at" in result.stderr
    assert "did not answer within 0.5s (--request-timeout" in result.stderr

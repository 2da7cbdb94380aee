"""Security at the edges, tried as an attacker would, through real kubectl against the fake API server
(or ``-f``): names that cannot steer a request, secrets that never print, output that cannot be
forged, and bad values that are usage errors rather than internal errors."""

from __future__ import annotations

import base64
import json
import os
import pty
import re
import subprocess
from contextlib import ExitStack
from pathlib import Path
from typing import Optional

import pytest
import yaml

from _oidc import FRESH_EXP, identity_provider, jwt, oidc_user
from _support import EXAMPLES, assert_one_clean_line, documents, seed
from conftest import kubectl_path
from fakekube import FakeKube
from test_escape_rebind import team_a

SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-pass", "namespace": "kube-system"},
          "data": {"password": base64.b64encode(b"hunter2").decode()}}
#: Where a run of this tool may look: discovery, the kinds it reads, and access reviews; never a Secret.
EXPECTED = re.compile(r"^/(version|api|apis|api/v1(/namespaces/[a-z0-9-]+)?/pods"
                      r"|apis/(apps|batch)/v1(/namespaces/[a-z0-9-]+)?/(deployments|statefulsets|daemonsets|jobs|cronjobs)"
                      r"|apis/(worker\.)?gpustack\.ai(/v1(alpha1)?(/namespaces/[a-z0-9-]+)?"
                      r"(/(kvcachepoolbindings|kvcachepools|modeldeployments|settings)(/[a-z0-9.-]+)?)?)?"
                      r"|apis/authorization\.k8s\.io/v1/selfsubjectaccessreviews"
                      r"|apis/admissionregistration\.k8s\.io/v1/validatingadmissionpolicybindings/kubectl-kvdtype-guard-[a-z]+)$")
STEER = "../../../../../../api/v1/namespaces/kube-system/secrets/db-pass"


def run(env: dict, *args: str, cwd: Optional[Path] = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_path(), "kvdtype", *args], env=env, cwd=cwd, text=True, capture_output=True,
                          timeout=60, **kwargs)


def outside(fake: FakeKube) -> list[tuple[str, str, dict]]:
    """Requests outside the expected resource paths, and any DELETE at all."""
    return [(m, p, q) for m, p, q in fake.request_log() if not EXPECTED.match(p) or m == "DELETE" or
            any(k not in ("limit", "continue", "labelSelector", "dryRun") for k in q)]


@pytest.fixture
def cluster(fake, kube_env):
    seed(fake, team_a() + [SECRET])
    fake.clear_log()
    return kube_env


# --- 1. names that cannot steer a request ---------------------------------------------------------

@pytest.mark.parametrize("namespace", ["../../../../api/v1/namespaces/kube-system/secrets?x=",
                                       "ml-prod?labelSelector=x", "Team_A", "a" * 64])
def test_a_namespace_flag_that_is_not_a_dns_label_is_refused_before_any_request(cluster, fake, namespace):
    result = run(cluster, "check", "-n", namespace)
    assert result.returncode == 2, result.stderr
    assert_one_clean_line(result.stderr)
    assert result.stderr.startswith(f'error: invalid namespace "{namespace}": [')
    assert fake.request_log() == []


def test_rebind_of_a_path_shaped_name_deletes_nothing_and_reads_no_secret(cluster, fake, tmp_path):
    result = run(cluster, "escape", "rebind", STEER, "-n", "team-a", "--dtype", "bfloat16", "--new-name",
                 "fresh-kv", "--apply", "--yes", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "invalid KVCachePoolBinding name" in result.stderr and "may not contain '/'" in result.stderr
    assert fake.get("secrets", "kube-system", "db-pass") is not None
    assert outside(fake) == [] and fake.request_log() == []
    assert not list(tmp_path.glob("kvdtype-backup-*"))  # no backup directory either


@pytest.mark.parametrize("args", [(STEER,), ("--wait", STEER), ("a%2Fb",), ("..",)])
def test_verify_of_a_path_shaped_name_reads_nothing(cluster, fake, args):
    result = run(cluster, "verify", *args, "-n", "team-a")
    assert result.returncode == 2, result.stderr
    assert_one_clean_line(result.stderr)
    assert "invalid ModelDeployment name" in result.stderr
    assert fake.request_log() == []


def test_the_kubeconfig_namespace_is_checked_too(fake, kube_env, tmp_path):
    seed(fake, team_a() + [SECRET])
    env = {**kube_env, "KUBECONFIG": str(fake.write_kubeconfig(tmp_path / "kc", namespace="../kube-system"))}
    result = run(env, "check")
    assert result.returncode == 3, result.stderr
    assert 'invalid namespace "../kube-system": [may not contain \'/\'] in the context "fake"' in result.stderr
    assert outside(fake) == []


def _binding(name: str, namespace: str = "team-a", dtype: str = "fp8") -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": "d", "blockSize": 64, "dtype": dtype}}}


def _deployment(name: str, binding: str, engine: str = "vLLM", namespace: str = "team-a") -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": engine, "version": "0.29.0"},
                     "kvCache": {"poolRef": {"name": binding}},
                     "roles": [{"name": "server", "kind": "Server", "replicas": 1}]}}


def test_preflight_f_never_prints_a_command_built_from_an_invalid_name(kube_env, tmp_path):
    """The to-do list of a manifest whose Binding is named like a path: a finding naming the object
    and the file, and no ``escape rebind`` ready to paste."""
    manifest = tmp_path / "dump.yaml"
    manifest.write_text(yaml.safe_dump_all([_binding(STEER), _deployment("qwen", STEER)]))
    table = run(kube_env, "preflight", "-f", str(manifest))
    assert table.returncode == 1, table.stderr
    assert "escape rebind" not in table.stdout + table.stderr
    document = json.loads(run(kube_env, "preflight", "-f", str(manifest), "-o", "json").stdout)
    invalid = [f for f in document["findings"] if f["code"] == "invalid-name"]
    assert [(f["object"]["kind"], f["object"]["name"], f["file"]) for f in invalid] == [
        ("KVCachePoolBinding", STEER, str(manifest))]
    assert str(manifest) in invalid[0]["message"] and "may not contain '/'" in invalid[0]["message"]
    assert all(STEER not in (item.get("command") or "") for item in document["items"])


def test_a_cluster_answering_invalid_names_gets_no_command_and_no_request_built_from_them(fake, kube_env):
    """A server (or a proxy) that answers objects with names the API server would refuse: they are
    findings, never judged, and no request or command is built from them."""
    seed(fake, team_a() + [SECRET, _binding(STEER), _deployment("qwen-steer", STEER)])
    fake.clear_log()
    result = run(kube_env, "preflight", "-n", "team-a", "-o", "json")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert [f["object"]["name"] for f in document["findings"] if f["code"] == "invalid-name"] == [STEER]
    assert all(STEER not in (item.get("command") or "") for item in document["items"])
    assert outside(fake) == []


# --- 2. secrets that never print -------------------------------------------------------------------

def _kubeconfig(fake: FakeKube, path: Path, user: dict, server: Optional[str] = None) -> str:
    fake.write_kubeconfig(path)
    config = json.loads(path.read_text())
    config["users"][0]["user"] = user
    if server:
        config["clusters"][0]["cluster"]["server"] = server
    path.write_text(json.dumps(config))
    return str(path)


def test_a_token_file_ending_in_a_newline_is_trimmed_as_kubectl_trims_it(fake, kube_env, tmp_path):
    seed(fake, documents(EXAMPLES))
    token = tmp_path / "token"
    token.write_text(fake.token + "\n")  # what `echo "$TOKEN" > file` writes
    env = {**kube_env, "KUBECONFIG": _kubeconfig(fake, tmp_path / "kc", {"tokenFile": str(token)})}
    result = run(env, "check", "-A", "-o", "json")
    assert result.returncode == 1, result.stderr  # the examples hold error findings: the run completed
    assert {r.headers.get("Authorization") for r in fake.requests} == {f"Bearer {fake.token}"}


@pytest.mark.parametrize("flag", ["--token", "--as", "--as-group", "--as-uid"])
@pytest.mark.parametrize("brk", ["\n", "\r"])
def test_a_line_break_in_a_header_flag_is_a_usage_error_that_never_echoes_it(cluster, fake, flag, brk):
    secret = f"S3CRET{brk}injected: yes"
    extra = ["--as", "alice"] if flag in ("--as-group", "--as-uid") else []
    result = run(cluster, "check", *extra, flag, secret)
    assert result.returncode == 2, result.stderr
    assert_one_clean_line(result.stderr)
    assert f"{flag} holds a line break" in result.stderr
    assert "S3CRET" not in result.stderr + result.stdout
    assert fake.request_log() == []


@pytest.mark.parametrize("setting", ["token", "as", "as-groups"])
@pytest.mark.parametrize("brk", ["\nX-Injected: yes", "\u0100"], ids=["line-break", "beyond-latin-1"])
def test_a_line_break_in_a_kubeconfig_header_value_is_exit_3_never_echoed(fake, kube_env, tmp_path, setting, brk):
    value = f"S3CRET{brk}"  # a character beyond Latin-1 cannot be encoded into a header at all
    user = {"token": fake.token, **({"as": "alice"} if setting != "as" else {}),
            setting: [value] if setting == "as-groups" else value}
    env = {**kube_env, "KUBECONFIG": _kubeconfig(fake, tmp_path / "kc", user)}
    result = run(env, "check")
    assert result.returncode == 3, result.stderr
    assert_one_clean_line(result.stderr)
    assert f"the {setting} of the kubeconfig user" in result.stderr and "line break" in result.stderr
    assert "S3CRET" not in result.stderr + result.stdout


@pytest.mark.parametrize("debug", ["", "1"])
def test_a_password_in_the_server_url_is_shown_as_user_stars(kube_env, debug):
    env = {**kube_env, "KUBECTL_KVDTYPE_DEBUG": debug}
    result = run(env, "check", "-s", "http://admin:PW-S3CRET@127.0.0.1:9", "--request-timeout", "2s")
    assert result.returncode == 3, result.stderr
    assert "admin:***@127.0.0.1:9" in result.stderr
    assert "PW-S3CRET" not in result.stderr + result.stdout


SOURCES = ("token", "token-file", "exec-plugin", "basic-auth", "url-userinfo", "oidc-refresh")


@pytest.mark.parametrize("source", SOURCES)
def test_no_credential_is_ever_printed_nor_written(kube_env, tmp_path, source):
    """A distinct secret through each credential source; every output, every error, the debug
    output, the journal and every backup file are searched for it."""
    secret = f"S3CRET-{source}-{os.getpid()}"
    fake_token: Optional[str] = secret
    user: dict = {"token": secret}
    server = None
    env = dict(kube_env)
    secrets = [secret]
    if source == "token-file":
        (tmp_path / "token").write_text(secret + "\n")
        user = {"tokenFile": str(tmp_path / "token")}
    elif source == "exec-plugin":
        plugin = tmp_path / "plugin"
        plugin.write_text("#!/bin/sh\necho '" + json.dumps({"apiVersion": "client.authentication.k8s.io/v1",
                                                            "kind": "ExecCredential",
                                                            "status": {"token": secret}}) + "'\n")
        plugin.chmod(0o755)
        user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                         "interactiveMode": "Never"}}
    elif source in ("basic-auth", "url-userinfo"):
        fake_token = "unused-token"
        user = {"username": "admin", "password": secret} if source == "basic-auth" else {"token": "unused-token"}
    with ExitStack() as stack:
        if source == "oidc-refresh":  # the refresh token, and the id-token it is exchanged for
            fake_token = jwt({"iss": "test", "exp": FRESH_EXP, "sub": secret})
            issuer, _ = stack.enter_context(identity_provider(fake_token))
            user = oidc_user(issuer)
            user["auth-provider"]["config"]["refresh-token"] = secret
            env["OAUTHLIB_INSECURE_TRANSPORT"] = "1"
            secrets.append(fake_token)
        fake = stack.enter_context(FakeKube(token=fake_token))
        if source == "basic-auth":
            fake.passwords = {"admin": secret}
        if source == "url-userinfo":
            server = fake.url.replace("://", f"://admin:{secret}@")
        seed(fake, team_a())
        env["KUBECONFIG"] = _kubeconfig(fake, tmp_path / "kc", user, server)
        outputs = _every_run(env, tmp_path / "work", fake)
    for name, text in outputs:
        assert not any(s in text for s in secrets), name
    written = [p for p in (tmp_path / "work").rglob("*") if p.is_file()]
    assert written, "the rebind wrote its journal and backups"
    for path in written:
        assert not any(s.encode() in path.read_bytes() for s in secrets), path


def _every_run(env: dict, work: Path, fake: FakeKube) -> list[tuple[str, str]]:
    """The outputs of a judging run, of runs that fail and of a rebind that writes its journal and
    backups, each (but the rebind, run once with it) with and without KUBECTL_KVDTYPE_DEBUG=1."""
    work.mkdir()
    outputs = []
    for debug in ("", "1"):
        debug_env = {**env, "KUBECTL_KVDTYPE_DEBUG": debug}
        for args in (("preflight", "-A", "-o", "wide"), ("verify", "-n", "team-a", "gone"),
                     ("check", "-n", "Bad_Namespace")):
            result = run(debug_env, *args, cwd=work)
            outputs += [(f"{args} stdout", result.stdout), (f"{args} stderr", result.stderr)]
            if args[0] == "preflight":
                assert result.returncode == 1, result.stderr  # the credentials worked: the examples hold findings
    rebind = run({**env, "KUBECTL_KVDTYPE_DEBUG": "1"}, "escape", "rebind", "legacy", "-n", "team-a", "--dtype",
                 "bfloat16", "--apply", "--yes", cwd=work)
    assert rebind.returncode == 0, rebind.stderr
    return outputs + [("rebind stdout", rebind.stdout), ("rebind stderr", rebind.stderr)]


# --- 3. output that cannot be forged ----------------------------------------------------------------

FORGED = "fp8\x1b]0;owned\x07\x1b[8m\nprod       payments   bfloat16   ok   none needed\u202e\u200b"


def _tenant(fake: FakeKube) -> None:
    seed(fake, team_a() + [_binding("forged", dtype=FORGED),
                           _deployment("forger", "forged", engine="vLLM\u202e\x1b[2J"),
                           _deployment("forger-b", "chat", engine="Tr\u2066iton\n")])


def _no_raw_controls(text: str) -> None:
    assert not any(not c.isprintable() and c != "\n" for c in text), repr(text)


@pytest.mark.parametrize("args", [("check", "-n", "team-a"), ("check", "-n", "team-a", "-o", "wide"),
                                  ("preflight", "-n", "team-a", "-o", "wide")])
def test_tenant_strings_are_escaped_in_tables_messages_and_todo_lists(fake, kube_env, args):
    _tenant(fake)
    result = run(kube_env, *args)
    assert result.returncode in (0, 1), result.stderr
    for text in (result.stdout, result.stderr):
        _no_raw_controls(text)
        assert not any(line.startswith("prod ") for line in text.splitlines()), text  # no forged row
    assert "fp8\\x1b]0;owned\\x07\\x1b[8m\\nprod" in result.stdout
    assert "\\u202e" in result.stdout


def test_tenant_strings_are_escaped_offline_too(kube_env, tmp_path):
    manifest = tmp_path / "dump.yaml"
    manifest.write_text(yaml.safe_dump_all([_binding("forged", dtype="auto"),
                                            _deployment("forger", "forged", engine="vLLM\u202e\x1b[2J")]))
    result = run(kube_env, "check", "-f", str(manifest))
    assert result.returncode in (0, 1), result.stderr
    _no_raw_controls(result.stdout + result.stderr)
    assert "vLLM\\u202e\\x1b[2J" in result.stdout


def test_json_keeps_its_own_encoding(fake, kube_env):
    _tenant(fake)
    result = run(kube_env, "check", "-n", "team-a", "-o", "json")
    dtypes = {i["name"]: i.get("dtype") for i in json.loads(result.stdout)["items"]}
    assert dtypes["forged"] == FORGED


def _on_a_terminal(env: dict, *args: str) -> str:
    """stdout of the run when stdout is a terminal (a pseudo-terminal)."""
    main, child = pty.openpty()
    try:
        process = subprocess.Popen([kubectl_path(), "kvdtype", *args], env=env, stdout=child,
                                   stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        os.close(child)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the terminal closes with the process
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=60)
    finally:
        os.close(main)
    return b"".join(chunks).decode()


@pytest.mark.parametrize("extra, coloured", [({"TERM": "xterm"}, True), ({"TERM": "dumb"}, False),
                                             ({"TERM": "xterm", "NO_COLOR": "1"}, False)])
def test_colour_only_on_a_terminal_that_has_it(cluster, extra, coloured):
    env = {k: v for k, v in cluster.items() if k != "NO_COLOR"}
    text = _on_a_terminal({**env, **extra}, "check", "-n", "team-a")
    assert "legacy" in text
    assert ("\x1b[" in text) is coloured, repr(text)


# --- 4. bad values are usage errors ------------------------------------------------------------------

@pytest.mark.parametrize("args", [("check", "--request-timeout", "99999999999h"),
                                  ("check", "--request-timeout", "169h"),
                                  ("escape", "on", "--wait=99999999999h")])
def test_a_duration_past_the_maximum_is_a_usage_error(cluster, fake, args):
    result = run(cluster, *args)
    assert result.returncode == 2, result.stderr
    assert_one_clean_line(result.stderr)
    assert "longer than the maximum, 168h" in result.stderr
    assert fake.request_log() == []


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_an_oversized_integer_in_a_manifest_cannot_be_parsed(kube_env, tmp_path, suffix):
    manifest = tmp_path / f"big.{suffix}"
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"}, "spec": {"x": 0}}
    manifest.write_text(json.dumps(body).replace('"x": 0', '"x": ' + "9" * 5000))
    result = run(kube_env, "check", "-f", str(manifest))
    assert result.returncode == 3, result.stderr
    assert_one_clean_line(result.stderr)
    assert result.stderr.startswith(f"error: cannot parse the manifest {manifest}: ")
    assert "internal error" not in result.stderr


@pytest.mark.parametrize("flag", ["--cluster", "--user", "--context"])
def test_a_kubeconfig_name_that_names_nothing_is_exit_3(cluster, fake, flag):
    result = run(cluster, "check", flag, "nope")
    assert result.returncode == 3, result.stderr
    assert_one_clean_line(result.stderr)
    assert '"nope"' in result.stderr
    assert fake.request_log() == []


def test_verify_never_requests_a_binding_a_tenant_named_like_a_path(fake, kube_env):
    """A ModelDeployment's poolRef is a free string its namespace's users write: a path-shaped one
    names no Binding, and is never sent."""
    seed(fake, team_a() + [SECRET, _deployment("qwen-steer", STEER)])
    fake.clear_log()
    result = run(kube_env, "verify", "qwen-steer", "-n", "team-a", "-o", "json")
    assert result.returncode in (0, 1), result.stderr
    assert outside(fake) == []
    assert not any("secrets" in target for target in (r.target for r in fake.requests))

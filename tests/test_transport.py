"""The two transports (``kubectl_kvdtype/_sources/transport.py``): which kubeconfigs the direct one
(a socket, ``ssl`` and its own HTTP/1.1) serves and which go to the kubernetes client; that both send the same
requests, answer alike and fail in the same sentences; and what the direct one does that urllib3
did for the client: a kept connection the server closed is read again on a new one, a write never.

Which transport a run took is told by the modules it imported (``urllib3``)."""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
import socket
import ssl
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _forwardproxy import Listener
from _support import (
    EXAMPLES,
    SETTING,
    SYSTEM,
    client_kubeconfig,
    cluster_of,
    documents,
    exec_credential,
    exec_plugin,
    imported_by,
    kubeconfig,
    kvdtype,
    paged,
    report,
    seed,
    user_of,
    with_kubeconfig,
    write_kubeconfig,
)
from fakekube import TEST_CA_PEM, TEST_CLIENT_CERT_PEM, TEST_CLIENT_KEY_PEM, TEST_KEY_PEM, FakeKube
from kubectl_kvdtype._kits.records import replace
from kubectl_kvdtype._sources import direct
from kubectl_kvdtype._sources.connection import ConnectionOptions
from kubectl_kvdtype._sources.kubeconfig import direct_settings, resolve

SERVER = "https://api.example:6443"
CA_DATA = base64.b64encode(TEST_CA_PEM.encode()).decode()


def _settings(tmp_path: Path, cluster: dict, user: dict, environ: dict | None = None):
    path = write_kubeconfig(tmp_path / "kubeconfig", {"server": SERVER, **cluster}, user)
    return direct_settings(resolve(ConnectionOptions(kubeconfig=str(path)), environ or {}))


# --- Which transport: the direct one where it serves, the client's for the rest --------------------

@pytest.mark.parametrize("cluster, user", [
    ({"certificate-authority-data": CA_DATA}, {"token": "t"}),
    ({"certificate-authority-data": CA_DATA}, {"username": "u", "password": "p"}),
    ({"insecure-skip-tls-verify": True}, {"client-certificate-data": base64.b64encode(b"c").decode(),
                                          "client-key-data": base64.b64encode(b"k").decode()}),
    ({"tls-server-name": "api.internal"}, {}),
    ({}, {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "cred", "args": ["a"],
                   "env": [{"name": "N", "value": "v"}], "provideClusterInfo": True}, "as": "someone"}),
], ids=["token", "basic", "client-certificate", "no-credentials", "exec"])
def test_a_kubeconfig_the_standard_library_can_serve_goes_direct(tmp_path, cluster, user):
    settings = _settings(tmp_path, cluster, user)
    assert settings is not None
    assert (settings.host, settings.hostname, settings.port) == (SERVER, "api.example", 6443)


@pytest.mark.parametrize("cluster, user, environ", [
    ({}, {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "cred"}, "token": "t"}, {}),
    ({}, {"exec": {"command": "cred"}}, {}),
    ({}, {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "cred", "args": "a b"}}, {}),
    ({}, {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "cred", "env": [{"name": "N"}]}}, {}),
    ({}, {"tokenFile": "/run/token"}, {}),
    ({}, {"auth-provider": {"name": "oidc", "config": {}}}, {}),
    ({"certificate-authority-data": "not base64!"}, {"token": "t"}, {}),
    ({"server": "https://admin:secret@api.example:6443"}, {"token": "t"}, {}),
    ({"server": "unix:///run/k8s.sock"}, {"token": "t"}, {}),
    ({}, {"token": ["not", "a", "string"]}, {}),
], ids=["exec-beside-a-token", "exec-without-apiVersion", "exec-args-not-a-list", "exec-env-without-value",
        "token-file", "auth-provider", "bad-ca-data", "password-in-url",
        "not-http", "token-not-a-string"])
def test_what_only_the_client_does_goes_to_the_client(tmp_path, cluster, user, environ):
    """An exec plugin beside another credential or not plainly set, a token file, an auth provider,
    or a setting the direct transport would have to guess about: the client's loader reads it and
    words any refusal, as it always has."""
    assert _settings(tmp_path, cluster, user, environ) is None


@pytest.mark.parametrize("cluster, environ, proxy", [
    ({"proxy-url": "socks5://proxy:1080"}, {}, ("socks5", "proxy", 1080, "proxy-url")),
    ({}, {"HTTPS_PROXY": "http://proxy:3128"}, ("http", "proxy", 3128, "HTTPS_PROXY")),
    ({}, {"all_proxy": "socks5://proxy:1080", "HTTP_PROXY": "http://proxy:3128"}, None),
], ids=["proxy-url", "HTTPS_PROXY", "all_proxy-and-HTTP_PROXY"])
def test_a_proxy_is_the_direct_transport_s_as_kubectl_chooses_it(tmp_path, cluster, environ, proxy):
    """The cluster's proxy-url, else the environment's by Go's rules (``_sources.proxy``): the direct
    transport reaches the server through it; ALL_PROXY is read by no one."""
    settings = _settings(tmp_path, cluster, {"token": "t"}, environ)
    assert settings is not None
    chosen = settings.proxy
    assert (chosen and (chosen.scheme, chosen.hostname, chosen.address[1], chosen.source)) == proxy


def test_the_direct_settings_are_read_as_the_clients_loader_reads_them(tmp_path):
    """A token before basic auth; basic auth from both halves; TLS settings for an https server only;
    a server URL's own path kept, its trailing slash not."""
    basic = _settings(tmp_path, {}, {"username": "alice", "password": "open-sesame"})
    assert basic is not None and basic.authorization == "Basic " + base64.b64encode(b"alice:open-sesame").decode()
    plain = _settings(tmp_path, {"server": "http://127.0.0.1:8080/k8s/clusters/c-1/",
                                 "certificate-authority-data": CA_DATA}, {"token": "t"})
    assert plain is not None and plain.authorization == "Bearer t"
    assert (plain.tls, plain.host, plain.port, plain.ca_data) == (False, "http://127.0.0.1:8080/k8s/clusters/c-1",
                                                                  8080, None)
    tls = _settings(tmp_path, {"certificate-authority-data": CA_DATA, "tls-server-name": "api.internal"}, {})
    assert tls is not None and (tls.ca_data, tls.server_name, tls.verify, tls.authorization) == \
        (TEST_CA_PEM, "api.internal", True, None)


# --- Both transports, against the fake ----------------------------------------------------------------

def _probe(env: dict, *args: str) -> tuple[subprocess.CompletedProcess, bool]:
    """The plugin run, and whether it imported urllib3 (the client's transport)."""
    result, modules = imported_by(args, env)
    return result, "urllib3" in modules


#: The header lines either transport leaves to its HTTP library (which differ between them).
_LIBRARY_HEADERS = {"host", "accept-encoding", "connection", "content-length"}


def _sent(fake: FakeKube) -> list[tuple[str, str, list[tuple[str, str]]]]:
    return [(r.method, r.target, [(k, v) for k, v in r.header_lines if k.lower() not in _LIBRARY_HEADERS])
            for r in sorted(fake.requests, key=lambda r: r.target)]


def test_both_transports_send_the_same_requests_and_answer_alike(fake, kube_env, tmp_path):
    """The same run over a token kubeconfig (direct) and one whose user has an exec plugin beside
    its token (the client, ``_support.client_kubeconfig``): the same requests with the same header
    lines (the impersonation's repeated group a line each), and the same report. The direct one
    asked for pages (KUBECTL_KVDTYPE_PAGED_LISTS) sends the client's very requests; by default,
    the same without a page's ``limit`` (each LIST one request, read as it comes)."""
    seed(fake, documents(EXAMPLES))
    flags = ("check", "-A", "-o", "json", "--as", "fake-user", "--as-group", "a", "--as-group", "b")
    fake.clear_log()
    direct, took_client = _probe(dict(kube_env, KUBECTL_KVDTYPE_PAGED_LISTS="1"), *flags)
    assert not took_client and direct.returncode == 1, direct.stderr
    by_direct = _sent(fake)
    fake.clear_log()
    client, took_client = _probe(with_kubeconfig(kube_env, client_kubeconfig(fake, tmp_path)), *flags)
    assert took_client and client.returncode == 1, client.stderr
    assert by_direct == _sent(fake)
    assert ("Impersonate-Group", "a") in by_direct[0][2] and ("Impersonate-Group", "b") in by_direct[0][2]
    assert direct.stdout == client.stdout and len(json.loads(direct.stdout)["items"]) == 8
    fake.clear_log()
    streamed, _ = _probe(kube_env, *flags)
    unpaged = [(method, re.sub(r"limit=500&?", "", target).rstrip("?"), lines) for method, target, lines in by_direct]
    assert sum("limit=500" in target for _, target, _ in by_direct) >= 3
    assert sorted(_sent(fake)) == sorted(unpaged) and streamed.stdout == direct.stdout


def _on_both(fake: FakeKube, env: dict, tmp_path: Path, edit, *args: str):
    """The plugin run with the fake's kubeconfig changed by ``edit``, once with its token user (the
    direct transport) and once with ``_support.client_kubeconfig``'s user (the client's): (direct,
    client) results."""
    token_kc = kubeconfig(fake, tmp_path / "token-kc", edit)
    client_kc = kubeconfig(fake, tmp_path / "edited-client-kc", edit)
    client_kc.write_text(json.dumps({**json.loads(client_kc.read_text()),
                                     "users": json.loads(client_kubeconfig(fake, tmp_path).read_text())["users"]}))
    direct, took_client = _probe(with_kubeconfig(env, token_kc), *args)
    assert not took_client
    client, took_client = _probe(with_kubeconfig(env, client_kc), *args)
    assert took_client
    return direct, client


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("fault", ["refused", "unknown-ca"])
def test_both_transports_fail_in_the_same_sentence(fake, kube_env, tmp_path, fault):
    closed = f"https://127.0.0.1:{_closed_port()}"

    def edit(config: dict) -> None:
        if fault == "refused":
            cluster_of(config)["server"] = closed
        else:
            cluster_of(config)["certificate-authority-data"] = base64.b64encode(TEST_CLIENT_CERT_PEM.encode()).decode()

    direct, client = _on_both(fake, kube_env, tmp_path, edit, "check", "-A")
    assert direct.returncode == client.returncode == 3
    if fault == "refused":
        assert direct.stderr == client.stderr == f"error: cannot reach the cluster at {closed}: Connection refused"
    else:
        said = f"error: TLS failure talking to {fake.url}: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"
        assert direct.stderr.startswith(said) and client.stderr.startswith(said), (direct.stderr, client.stderr)


def test_verification_turned_off_is_not_warned_about_on_either_transport(fake, kube_env, tmp_path):
    """kubectl says nothing of insecure-skip-tls-verify; urllib3 warned in two lines at each request."""
    seed(fake, documents(EXAMPLES))

    def insecure(config: dict) -> None:
        cluster_of(config).pop("certificate-authority-data")
        cluster_of(config)["insecure-skip-tls-verify"] = True

    for result in _on_both(fake, kube_env, tmp_path, insecure, "check", "-A", "-o", "json"):
        assert result.returncode == 1 and result.stderr == "", result.stderr
        assert len(json.loads(result.stdout)["items"]) == 8


def test_a_client_certificate_given_as_data_is_presented_and_leaves_no_file(fake, kube_env, tmp_path):
    """``ssl`` loads a certificate from files only: on Linux the data goes through anonymous memory
    files (no directory is made, and ``tempfile`` is not even imported), elsewhere through a private
    directory for the moment of loading, which is gone afterwards."""
    seed(fake, documents(EXAMPLES))

    def edit(config: dict) -> None:
        user = user_of(config)
        user.pop("token")
        user["client-certificate-data"] = base64.b64encode(TEST_CLIENT_CERT_PEM.encode()).decode()
        user["client-key-data"] = base64.b64encode(TEST_CLIENT_KEY_PEM.encode()).decode()

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**with_kubeconfig(kube_env, kubeconfig(fake, tmp_path / "kc", edit)), "TMPDIR": str(scratch)}
    fake.clear_log()
    result, modules = imported_by(["check", "-A", "-o", "json"], env)
    assert "urllib3" not in modules and result.returncode == 1, result.stderr
    assert {r.client_cert for r in fake.requests} == {"ci-bot"}
    assert not any("Authorization" in r.headers for r in fake.requests)
    assert os.listdir(scratch) == []
    assert ("tempfile" in modules) is (not hasattr(os, "memfd_create"))


@pytest.mark.parametrize("memory", [True, False], ids=["memory files", "a private directory"])
def test_a_client_certificate_as_data_loads_alike_from_memory_files_and_from_a_directory(
        tmp_path, monkeypatch, memory):
    """Both ways of handing ``*-data`` to ``ssl`` load the pair, refuse a key that is not the
    certificate's, and leave nothing behind (the directory way's, forced where memory files are:
    /proc/self/fd out of reach)."""
    if memory and not hasattr(os, "memfd_create"):
        pytest.skip("no anonymous memory files on this system")  # the other case runs the directory way
    if not memory:
        monkeypatch.setattr(direct, "_OWN_FILES", str(tmp_path / "no-proc"))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    pair = {"client-certificate-data": base64.b64encode(TEST_CLIENT_CERT_PEM.encode()).decode(),
            "client-key-data": base64.b64encode(TEST_CLIENT_KEY_PEM.encode()).decode()}
    settings = _settings(tmp_path, {"certificate-authority-data": CA_DATA}, pair)
    assert settings is not None and settings.key_data is not None
    assert direct._tls_context(settings).verify_mode == ssl.CERT_REQUIRED
    wrong_key = replace(settings, key_data=TEST_KEY_PEM.encode())  # the server's key
    with pytest.raises(ssl.SSLError, match="KEY_VALUES_MISMATCH"):
        direct._tls_context(wrong_key)
    assert os.listdir(scratch) == []


def _plugin(directory: Path, status: dict) -> Path:
    """An exec credential plugin printing ``status``, each run logged as a line of ``runs``."""
    return exec_plugin(directory / "cred-plugin",
                       f"echo run >> {directory / 'runs'}\ncat <<'EOF'\n{exec_credential(status)}\nEOF\n")


def _runs(directory: Path) -> int:
    return len((directory / "runs").read_text().splitlines())


def test_an_exec_plugin_is_run_for_the_direct_transport_without_the_clients_transport(fake, kube_env, tmp_path):
    """An exec plugin's user is served directly: the plugin runs once (by the plugin's own code),
    its token goes with every request, the report is the token kubeconfig's, and nothing of the
    kubernetes client, urllib3 or PyYAML is imported."""
    seed(fake, documents(EXAMPLES))
    token_run = kvdtype(kube_env, "check", "-A", "-o", "json")
    plugin = _plugin(tmp_path, {"token": fake.token})
    fake.clear_log()
    result, modules = imported_by(["check", "-A", "-o", "json"], with_kubeconfig(
        kube_env, fake.write_kubeconfig(tmp_path / "exec-kc", exec_command=[str(plugin)])))
    assert result.returncode == 1 and result.stdout == token_run.stdout, result.stderr
    assert _runs(tmp_path) == 1
    assert {r.headers.get("Authorization") for r in fake.requests} == {f"Bearer {fake.token}"}
    assert {"urllib3", "yaml", "kubernetes"} & modules == set()


@pytest.mark.parametrize("expires_in, renewed", [(-60, True), (120, True), (3600, False)],
                         ids=["expired", "within-the-skew", "later"])
def test_an_exec_token_due_to_expire_is_renewed_before_each_request_as_the_client_renews_it(
        fake, kube_env, tmp_path, expires_in, renewed):
    """The client's loader runs the plugin again before a request once its token is within five
    minutes of its ``expirationTimestamp``; so does the direct transport, one run at a time."""
    seed(fake, documents(EXAMPLES))
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=expires_in)
    plugin = _plugin(tmp_path, {"token": fake.token, "expirationTimestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ")})
    fake.clear_log()
    result = kvdtype(with_kubeconfig(kube_env, fake.write_kubeconfig(tmp_path / "kc", exec_command=[str(plugin)])),
                     "check", "-A", "-o", "json")
    assert result.returncode == 1, result.stderr
    assert _runs(tmp_path) == (1 + len(fake.requests) if renewed else 1)


def test_the_renewal_skew_is_the_clients():
    """``EXPIRY_SKEW`` is the client's loader's, read from its source (importing the loader would
    import the whole client into the test process)."""
    import ast
    import importlib.util

    from kubectl_kvdtype._sources.credentials import EXPIRY_SKEW

    package = importlib.util.find_spec("kubernetes")
    assert package is not None and package.origin is not None
    source = (Path(package.origin).parent / "config" / "kube_config.py").read_text(encoding="utf-8")
    (value,) = [node.value for node in ast.parse(source).body if isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["EXPIRY_SKEW_PREVENTION_DELAY"]]
    assert isinstance(value, ast.Call) and ast.unparse(value.func) == "datetime.timedelta"
    assert EXPIRY_SKEW == datetime.timedelta(**{k.arg: ast.literal_eval(k.value) for k in value.keywords if k.arg})


def test_an_exec_plugins_client_certificate_is_presented_and_leaves_no_file(fake, kube_env, tmp_path):
    """A plugin may answer with a client certificate and key instead of a token: they are
    presented, from memory files on Linux as the kubeconfig's own would be, and nothing is written."""
    seed(fake, documents(EXAMPLES))
    plugin = _plugin(tmp_path, {"clientCertificateData": TEST_CLIENT_CERT_PEM, "clientKeyData": TEST_CLIENT_KEY_PEM})
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**with_kubeconfig(kube_env, fake.write_kubeconfig(tmp_path / "kc", exec_command=[str(plugin)])),
           "TMPDIR": str(scratch)}
    fake.clear_log()
    result, modules = imported_by(["check", "-A", "-o", "json"], env)
    assert result.returncode == 1, result.stderr
    assert {r.client_cert for r in fake.requests} == {"ci-bot"}
    assert not any("Authorization" in r.headers for r in fake.requests)
    assert os.listdir(scratch) == [] and "urllib3" not in modules


def test_an_exec_plugins_certificate_that_does_not_load_is_said_in_one_sentence(fake, kube_env, tmp_path):
    seed(fake, documents(EXAMPLES))
    plugin = _plugin(tmp_path, {"clientCertificateData": TEST_CLIENT_CERT_PEM, "clientKeyData": TEST_KEY_PEM})
    result = kvdtype(with_kubeconfig(kube_env, fake.write_kubeconfig(tmp_path / "kc", exec_command=[str(plugin)])),
                     "check", "-A")
    assert result.returncode == 3 and result.stdout == ""
    assert result.stderr.startswith(f"error: cannot use the client certificate the exec credential "
                                    f"plugin {plugin} of the kubeconfig user returned: "), result.stderr
    assert len(result.stderr.splitlines()) == 1 and _runs(tmp_path) == 1


def test_a_kept_connection_closed_under_a_read_is_read_again_on_a_new_one(fake, kube_env):
    """urllib3 replaced a kept connection the server had closed; the direct transport does too, and
    a GET whose connection is closed with no answer goes again once, on a new connection."""
    seed(fake, documents(EXAMPLES))
    fake.drop_kept(times=1, method="GET")
    fake.clear_log()
    result = kvdtype(kube_env, "check", "-A", "-o", "json")
    assert result.returncode == 1, result.stderr
    assert len(report(result)["items"]) == 8
    dropped = [r for r in fake.requests if r.status is None]
    assert len(dropped) == 1
    again = [r for r in fake.requests if r.target == dropped[0].target and r.status is not None]
    assert len(again) == 1 and again[0].connection != dropped[0].connection


def test_a_write_whose_kept_connection_is_closed_is_not_sent_again(fake, kube_env):
    """A write's answer may be what was lost: it is said, never sent a second time."""
    seed(fake, documents(EXAMPLES))
    fake.drop_kept(times=1, method="PATCH")
    fake.clear_log()
    result = kvdtype(kube_env, "escape", "off", "--yes")
    patches = [r for r in fake.requests if r.method == "PATCH"]
    assert len(patches) == 1 and patches[0].status is None
    assert result.returncode == 3
    assert f"cannot reach the cluster at {fake.url}: Remote end closed connection without response" in result.stderr


# --- What the direct transport reads: HTTP/1.1, bounded -------------------------------------------

#: A plain-HTTP server on loopback that answers every request with the same bytes, then closes.
_Canned = Listener


_LIST_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize("answer, said", [
    (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "the server's answer is not HTTP/1.x"),
    (b"HTTP/1.1 200 OK\r\n" + b"X-Padding: 1\r\n" * 101 + b"\r\n", "more than 100 header lines"),
    (b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n", "a line longer than 65536 bytes"),
    (_LIST_HEAD + b"Content-Length: 100\r\n\r\n{\"kind\":", "ended 92 bytes short of its length"),
    (_LIST_HEAD + b"Transfer-Encoding: chunked\r\n\r\n8\r\n{\"kind\":\r\n", "ended early"),
    (_LIST_HEAD + b"Content-Length: -5\r\n\r\n", "not a length"),
    (b"", "Remote end closed connection without response"),
    (_LIST_HEAD + b"Content-Length: 2147483648\r\n\r\n{", "holds more than 1024 MiB, the most read of one answer"),
    (_LIST_HEAD + b"Transfer-Encoding: chunked\r\n\r\n40000001\r\n{", "holds more than 1024 MiB"),
], ids=["not-http", "endless-headers", "endless-line", "short-body", "short-chunks", "negative-length", "nothing",
        "claims-2-GiB", "a-chunk-past-the-bound"])
@pytest.mark.parametrize("paged", [True, False], ids=["paged", "streamed"])
def test_an_answer_that_is_no_http_or_breaks_off_is_one_sentence(kube_env, tmp_path, answer, said, paged):
    """Read whole (pages), a body past ``MAX_BODY`` is refused at once; streamed, a LIST's body is
    not bounded as a whole (its objects are, ``_sources.lists``): the claim is a body cut short."""
    if not paged and "1024 MiB" in said:
        said = "bytes short of its length"
    server = _Canned(answer)
    try:
        config = tmp_path / "canned-kc"
        write_kubeconfig(config, {"server": server.url}, {"token": "t"})
        result = kvdtype(with_kubeconfig(dict(kube_env, KUBECTL_KVDTYPE_PAGED_LISTS="1" if paged else ""), config),
                         "check", "-A", "--request-timeout", "20s")
    finally:
        server.close()
    assert result.returncode == 3, result.stderr
    assert result.stderr.startswith(f"error: cannot reach the cluster at {server.url}: ")
    assert said in result.stderr and result.stderr.count("\n") == 1, result.stderr


# --- The next page of a LIST asked for while this one is decoded -----------------------------------


def _bindings(count: int, namespace: str = "team-a") -> list[dict]:
    return [{"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
             "metadata": {"name": f"b{i:04d}", "namespace": namespace},
             "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": f"d{i:04d}", "dtype": "bfloat16"}}}
            for i in range(count)]


def _binding_pages(fake: FakeKube) -> list:
    return [r for r in fake.requests if r.method == "GET" and r.path.endswith("/kvcachepoolbindings")]


def test_pages_asked_ahead_are_the_servers_pages_and_no_more(fake, kube_env):
    """Each page after the first is asked with the token the page before it carries, and no page
    more: the run's requests are the server's pages, though each is sent ahead of the decoding."""
    seed(fake, _bindings(1100))
    fake.clear_log()
    result = kvdtype(paged(kube_env), "check", "-n", "team-a", "-o", "json")
    assert sorted(item["name"] for item in report(result)["items"]) == [f"b{i:04d}" for i in range(1100)]
    pages = _binding_pages(fake)
    assert [r.status for r in pages] == [200] * 2  # 500, then the rest in a page measured by the first
    assert "continue" not in pages[0].query and pages[1].query["continue"]


def test_the_next_page_is_asked_for_before_this_one_is_decoded(fake, tmp_path):
    """When the first page's first object is decoded, the server has already been asked for the
    second page (the code before asked for it only once the whole page was decoded)."""
    import time

    from kubectl_kvdtype._sources.cluster import ClusterSource
    from kubectl_kvdtype._sources.kinds import BINDING

    seed(fake, _bindings(1100))
    source = ClusterSource(ConnectionOptions(), environ={"KUBECONFIG": str(kubeconfig(fake, tmp_path / "kc")),
                                                         **paged({})})
    fake.clear_log()
    asked_by_then: list[int] = []

    def project(obj: dict) -> dict:
        if not asked_by_then:  # the first object of the first page, decoded: wait for the second page's request
            deadline = time.monotonic() + 5
            while len(_binding_pages(fake)) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            asked_by_then.append(len(_binding_pages(fake)))
        return obj

    assert len(source.list(BINDING, "team-a", project=project)) == 1100
    assert asked_by_then == [2] and len(_binding_pages(fake)) == 2


def test_a_page_whose_text_belies_its_decoded_token_is_read_by_the_decoded_one(fake, kube_env, tmp_path):
    """A first page whose metadata is written twice (a decoy first, where the next page is looked
    for ahead; the real one last, which JSON keeps): the page asked ahead with the decoy is dropped
    unread, and the list goes on with the decoded token, every object read once."""
    from _proxy import ApiProxy

    seed(fake, _bindings(600))
    kube_env = paged(kube_env)
    with ApiProxy(fake.url) as proxy:
        kvdtype(with_kubeconfig(kube_env, kubeconfig(fake, tmp_path / "kc",
                                                     lambda config: cluster_of(config).update(server=proxy.url))),
                "check", "-n", "team-a", "-o", "json")
        first = proxy.exchanges("GET", r"/kvcachepoolbindings$")[0]
    real = first.json["metadata"]
    text = first.body.decode()
    head = f'"metadata":{json.dumps(real, separators=(",", ":"))}'
    assert head in text and real["continue"]
    crafted = text.replace(head, '"metadata":{"continue":"decoy"}', 1)[:-1] + f",{head}}}"
    assert json.loads(crafted)["metadata"] == real
    fake.answer(crafted.encode(), "GET", r"/kvcachepoolbindings$", times=1)
    fake.clear_log()
    result = kvdtype(kube_env, "check", "-n", "team-a", "-o", "json")
    assert sorted(item["name"] for item in report(result)["items"]) == [f"b{i:04d}" for i in range(600)]
    asked = [r.query.get("continue") for r in _binding_pages(fake)]
    assert asked == [None, "decoy", real["continue"]]


def test_a_page_asked_ahead_on_a_kept_connection_the_server_closed_is_asked_again(fake, kube_env):
    """The first page of Bindings is answered last, so that the page asked ahead finds the other
    reads' connections kept and idle; the server closes the one it takes (the other requests may
    take a kept connection too, as their threads start: only a Bindings page with a continue token
    is dropped)."""
    setting = {"apiVersion": "gpustack.ai/v1", "kind": "Setting", "metadata": {"name": SETTING, "namespace": SYSTEM},
               "spec": {"value": "true"}, "status": {"value": "true"}}
    seed(fake, [*_bindings(600), setting])
    fake.clear_log()
    fake.delay(0.3, "GET", r"/kvcachepoolbindings$", times=1)
    fake.drop_kept(times=1, method="GET", target=r"/kvcachepoolbindings\?.*continue=")
    result = kvdtype(paged(kube_env), "check", "-n", "team-a", "-o", "json")
    assert len(report(result)["items"]) == 600
    dropped = [r for r in fake.requests if r.status is None]
    assert len(dropped) == 1 and "continue" in dropped[0].query  # the page asked ahead, on a kept connection
    again = [r for r in fake.requests if r.target == dropped[0].target and r.status == 200]
    assert len(again) == 1 and again[0].connection != dropped[0].connection


_LIST_PAGE = st.fixed_dictionaries({
    "continue": st.one_of(st.none(), st.text(max_size=300)),
    "items": st.lists(st.dictionaries(st.sampled_from(["metadata", "kind", "continue", "x"]),
                                      st.recursive(st.text(max_size=20), lambda inner: st.dictionaries(
                                          st.sampled_from(["metadata", "continue", "y"]), inner, max_size=3),
                                          max_leaves=6), max_size=4), max_size=3),
    "style": st.sampled_from(["go-typed", "go-custom", "python-default"]),
})


def _page_text(page: dict) -> bytes:
    """A LIST page as the servers this plugin meets write one: a built-in kind's (metadata after
    kind and apiVersion, compact), a custom resource's (keys in order: metadata last), or Python's
    default spacing (the benchmark's server)."""
    metadata = {"resourceVersion": "7", **({"continue": page["continue"]} if page["continue"] is not None else {})}
    document = {"kind": "ThingList", "apiVersion": "example/v1", "metadata": metadata, "items": page["items"]}
    if page["style"] == "go-typed":
        return json.dumps(document, separators=(",", ":")).encode()
    if page["style"] == "go-custom":
        return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()
    return json.dumps(document).encode()


@settings(max_examples=300, deadline=None)
@given(_LIST_PAGE)
def test_a_page_s_continue_token_is_read_off_its_text_as_the_decoded_page_names_it(page):
    from kubectl_kvdtype._sources.lists import peek_continue

    expected = page["continue"] or None  # an empty token ends the list, as none does
    assert peek_continue(_page_text(page)) == expected


#: Text a hostile server might answer: anything, and metadata nested past the interpreter's limit
#: where a token is looked for (first, and last).
_ANY_TEXT = (st.binary(max_size=600)
             | st.builds(lambda n: b'{"kind":"L","apiVersion":"v","metadata":' + b"[" * n, st.integers(0, 5000))
             | st.builds(lambda n: b'{"items":[],"metadata":' + b"[" * n + b"}", st.integers(0, 5000)))


@settings(max_examples=300, deadline=None)
@given(_ANY_TEXT)
def test_any_text_peeked_for_a_token_answers_a_token_or_none(data):
    from kubectl_kvdtype._sources.lists import peek_continue

    token = peek_continue(data)
    assert token is None or (isinstance(token, str) and token)

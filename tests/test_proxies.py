"""Proxies on the direct transport (``_sources/tunnel.py``, ``_sources/proxy.py``), against the fake API
server through real forward proxies (tinyproxy, microsocks) and a recording listener: which requests go
through which proxy, what the proxy is sent, and that a proxy's failure is said as the proxy's (exit 3),
never as the cluster's. kubectl beside the plugin on the real kube-apiserver: ``test_real_proxies.py``."""

from __future__ import annotations

import base64
import json

import pytest

from _forwardproxy import Listener, Microsocks, Tinyproxy, dead_port
from _support import EXAMPLES, cluster_of, documents, imported_by, kubeconfig, seed, with_kubeconfig
from kubectl_kvdtype import __version__

pytestmark = pytest.mark.e2e


def _upper(fake, tmp_path, name="kc", **cluster):
    """The fake's kubeconfig with its server spelled LOCALHOST, which Go proxies (it compares
    ``localhost`` as spelled) and the fake's certificate covers."""
    def edit(config: dict) -> None:
        cluster_of(config)["server"] = fake.url.replace("127.0.0.1", "LOCALHOST")
        cluster_of(config).update(cluster)

    return kubeconfig(fake, tmp_path / name, edit)


def kubeconfig_of(directory, server: str):
    path = directory / "server-kc"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}], "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


def _run(env: dict, *args: str):
    result, modules = imported_by(["check", "-A", "-o", "json", *args], env)
    assert "urllib3" not in modules, "the direct transport serves a proxied kubeconfig"
    return result


def test_the_environment_s_proxy_carries_what_go_proxies_and_nothing_else(fake, kube_env, tmp_path):
    """HTTPS_PROXY (or https_proxy) through tinyproxy for a server Go proxies; loopback direct past a
    dead proxy; NO_PROXY's forms; ALL_PROXY never read."""
    seed(fake, documents(EXAMPLES))
    upper = _upper(fake, tmp_path)
    port = fake.url.rsplit(":", 1)[1]
    dead = f"http://127.0.0.1:{dead_port()}"
    with Tinyproxy(tmp_path) as proxy:
        through = _run({**with_kubeconfig(kube_env, upper), "https_proxy": proxy.url})
        assert through.returncode == 1, through.stderr
        assert set(proxy.connects()) == {f"LOCALHOST:{port}"}
        connects = len(proxy.connects())
        loopback = _run({**kube_env, "HTTPS_PROXY": dead, "ALL_PROXY": dead, "all_proxy": dead})
        assert loopback.returncode == 1 and loopback.stdout == through.stdout, loopback.stderr
        for no_proxy in ("localhost", "LocalHost", f"localhost:{port}", "*", "10.0.0.0/8,LOCALHOST"):
            env = {**with_kubeconfig(kube_env, upper), "HTTPS_PROXY": dead, "no_proxy": no_proxy}
            assert _run(env).returncode == 1, no_proxy
        missed = _run({**with_kubeconfig(kube_env, upper), "HTTPS_PROXY": dead, "NO_PROXY": "localhost:1"})
        assert len(proxy.connects()) == connects  # the others went direct
    assert missed.returncode == 3
    assert missed.stderr == f"error: cannot reach the proxy {dead} (HTTPS_PROXY): Connection refused"
    assert json.loads(through.stdout)["items"]


def test_a_proxy_s_user_and_password_and_its_refusal(fake, kube_env, tmp_path):
    """tinyproxy with BasicAuth: refused (407) without them, named with its status line; let through
    with them, sent as Go sends them; the proxy-url of the cluster, and --proxy-url over it."""
    seed(fake, documents(EXAMPLES))
    with Tinyproxy(tmp_path, auth=("alice", "s3cret")) as proxy:
        with_password = proxy.url.replace("http://", "http://alice:s3cret@")
        refused = _run({**with_kubeconfig(kube_env, _upper(fake, tmp_path)), "HTTPS_PROXY": proxy.url})
        allowed = _run({**with_kubeconfig(kube_env, _upper(fake, tmp_path)), "HTTPS_PROXY": with_password})
        # The cluster's proxy-url serves every request, loopback included; --proxy-url replaces it.
        configured = kubeconfig(fake, tmp_path / "configured",
                                lambda config: cluster_of(config).update({"proxy-url": with_password}))
        by_setting = _run(with_kubeconfig(kube_env, configured))
        dead = f"http://127.0.0.1:{dead_port()}"
        by_flag = _run(with_kubeconfig(kube_env, configured), "--proxy-url", dead)
        port = fake.url.rsplit(":", 1)[1]
        assert set(proxy.connects()) == {f"LOCALHOST:{port}", f"127.0.0.1:{port}"}  # proxy-url: loopback too
    assert refused.returncode == 3 and refused.stderr == (
        f"error: the proxy {proxy.url} (HTTPS_PROXY) refused to connect to LOCALHOST:{fake.url.rsplit(':', 1)[1]}: "
        "HTTP/1.0 407 Proxy Authentication Required")
    assert allowed.returncode == by_setting.returncode == 1, (allowed.stderr, by_setting.stderr)
    assert "s3cret" not in refused.stderr + allowed.stderr
    assert by_flag.returncode == 3 and by_flag.stderr == f"error: cannot reach the proxy {dead} (proxy-url): " \
                                                          "Connection refused"


def test_what_a_proxy_is_sent_and_what_it_answers_is_read_bounded(fake, kube_env, tmp_path):
    """The CONNECT line, its Host, User-Agent (the plugin's) and Proxy-Authorization as Go writes
    them; a refusal's status line shown escaped; a proxy that closes without an answer; a password
    never shown."""
    upper = _upper(fake, tmp_path)
    port = fake.url.rsplit(":", 1)[1]
    with Listener(b"HTTP/1.1 403 Forbidden\x1b[2J\r\nContent-Length: 0\r\n\r\n") as refusing, \
            Listener(None) as closing, Listener(b"SSH-2.0-OpenSSH\r\n\r\n") as not_http:
        user = refusing.url.replace("http://", "http://al%40ice:p%3Ass@")
        said = _run({**with_kubeconfig(kube_env, upper), "HTTPS_PROXY": user})
        closed = _run({**with_kubeconfig(kube_env, upper), "HTTPS_PROXY": closing.url})
        other = _run({**with_kubeconfig(kube_env, upper), "HTTPS_PROXY": not_http.url})
    assert set(refusing.heard) == {(f"CONNECT LOCALHOST:{port} HTTP/1.1\r\nHost: LOCALHOST:{port}\r\n"
                                    f"User-Agent: kubectl-kvdtype/{__version__}\r\n"
                               f"Proxy-Authorization: Basic {base64.b64encode(b'al@ice:p:ss').decode()}\r\n\r\n"
                               ).encode()}
    assert said.returncode == closed.returncode == other.returncode == 3
    shown = refusing.url.replace("http://", "http://al%40ice:***@")
    assert said.stderr == f"error: the proxy {shown} (HTTPS_PROXY) refused to connect to LOCALHOST:{port}: " \
                          "HTTP/1.1 403 Forbidden\\x1b[2J"
    assert closed.stderr in (f"error: the proxy {closing.url} (HTTPS_PROXY) closed the connection without answering "
                             "CONNECT", f"error: the proxy {closing.url} (HTTPS_PROXY) broke off the connection to "
                             f"LOCALHOST:{port}: Connection reset by peer")
    assert "not HTTP/1.x" in other.stderr and other.stderr.count("\n") == 0


def test_a_silent_proxy_is_bounded_by_the_request_timeout(fake, kube_env, tmp_path):
    """A proxy that takes the CONNECT and never answers: the request timeout ends the run, as a
    silent server's does (the time is the whole request's, the tunnel's included)."""
    with Listener(b"", hold=True) as silent:
        result = _run({**with_kubeconfig(kube_env, _upper(fake, tmp_path)), "HTTPS_PROXY": silent.url},
                      "--request-timeout", "1s")
    assert result.returncode == 3 and "did not answer within 1s (--request-timeout" in result.stderr, result.stderr
    assert result.stderr.endswith(f": the proxy {silent.url} (HTTPS_PROXY) had not opened the way to it")
    assert silent.heard and silent.heard[0].startswith(b"CONNECT LOCALHOST:")


def test_an_http_server_s_requests_go_to_the_proxy_whole(kube_env, tmp_path):
    """An http:// server behind an http proxy: each request sent to the proxy in absolute form with
    the proxy's credentials, as Go sends it (no tunnel); the proxy's answer is the server's."""
    with Listener(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n") as proxy:
        config = kubeconfig_of(tmp_path, "http://api.example:8080")
        result = _run({**with_kubeconfig(kube_env, config), "HTTP_PROXY": proxy.url.replace("//", "//u:p@")},
                      "--request-timeout", "2s")
    assert result.returncode == 3
    first = proxy.heard[0].decode()
    assert first.startswith("GET http://api.example:8080/ap") and "\r\nHost: api.example:8080\r\n" in first
    assert f"\r\nProxy-Authorization: Basic {base64.b64encode(b'u:p').decode()}\r\n" in first


def test_socks5_with_and_without_a_user(fake, kube_env, tmp_path):
    """microsocks as the cluster's proxy-url: no authentication, a user and password, a wrong password."""
    seed(fake, documents(EXAMPLES))
    with Microsocks() as open_socks, Microsocks(auth=("bob", "pw")) as guarded:
        results = []
        for url in (open_socks.url, guarded.url, guarded.url.replace(":pw@", ":wrong@")):
            config = kubeconfig(fake, tmp_path / f"socks-{len(results)}",
                                lambda config, url=url: cluster_of(config).update({"proxy-url": url}))
            results.append(_run(with_kubeconfig(kube_env, config)))
    assert [r.returncode for r in results] == [1, 1, 3], [r.stderr for r in results]
    assert results[0].stdout == results[1].stdout
    shown = guarded.url.replace(":pw@", ":***@")
    assert results[2].stderr == f"error: the SOCKS5 proxy {shown} (proxy-url) refused the user and password"

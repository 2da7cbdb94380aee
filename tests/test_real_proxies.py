"""kubectl beside the plugin where the network is in between, on the real kube-apiserver: for each
case, the upgrade guide's kubectl call (``kubectl get kvcachepoolbindings -A -o json``) and
``kubectl kvdtype check -A`` run under the same kubeconfig, environment and flags, and both reach
the server or both are refused, a refusal naming the same proxy (host:port, or the status it
answered). The proxies are real: tinyproxy (CONNECT, with and without BasicAuth) and microsocks
(SOCKS5); a dead one is a loopback port nothing listens on. Then gzip as kubectl asks for it, seen
by the tests' TLS proxy (``_proxy.py``), and the server's warnings of a deprecated CRD version."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

import pytest

from _forwardproxy import Microsocks, Tinyproxy, TlsTunnel, dead_port
from _proxy import ApiProxy

pytestmark = pytest.mark.real

GUIDE = ("get", "kvcachepoolbindings", "-A", "-o", "json")


def _kubeconfig(real, name: str, server: Optional[str] = None, **cluster: str) -> Path:
    """The admin's kubeconfig with its server (and cluster settings) changed."""
    config = json.loads(real.kubeconfig("admin").read_text())
    entry = config["clusters"][0]["cluster"]
    if server:
        entry["server"] = server
    entry.update(cluster)
    path = real.home / f"kubeconfig-{name}"
    path.write_text(json.dumps(config))
    return path


def _both(real, kubeconfig: Path, env: dict, *flags: str):
    """(kubectl's, the plugin's) results under one kubeconfig, environment and flags."""
    import subprocess

    # A discovery cache of its own: with one warm, kubectl words a refused connection as the server's
    # ("The connection to the server HOST:PORT was refused"), through a proxy or not; cold, its
    # discovery names the proxy (``proxyconnect tcp: dial tcp HOST:PORT``).
    _both.runs = getattr(_both, "runs", 0) + 1  # type: ignore[attr-defined]
    cache = real.home / f"kubecache-{_both.runs}"  # type: ignore[attr-defined]
    environment = {**real.env("admin"), "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(cache), **env}
    for name in [n for n in environment if n.lower() in ("https_proxy", "http_proxy", "no_proxy", "all_proxy")]:
        if name not in env:
            environment.pop(name)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([real._kubectl, *args], env=environment, text=True, capture_output=True, timeout=60,
                              cwd=real.home)

    return run(*flags, *GUIDE), run("kvdtype", "check", "-A", *flags)


def _alike(case: str, kubectl, plugin, refused_by: Optional[str]) -> Optional[str]:
    """What differs between the two runs of a case (None: they agree)."""
    if refused_by is None:
        if kubectl.returncode == 0 and plugin.returncode in (0, 1):
            return None
    elif kubectl.returncode != 0 and plugin.returncode == 3 and refused_by in kubectl.stderr \
            and refused_by in plugin.stderr:
        return None
    return (f"{case}: expected {'both reaching' if refused_by is None else 'both refused naming ' + refused_by}; "
            f"kubectl {kubectl.returncode} {kubectl.stderr.strip()[-300:]!r}; plugin {plugin.returncode} "
            f"{plugin.stderr.strip()[-300:]!r}")


def test_the_environment_s_proxies_are_kubectl_s(real, tmp_path):
    """Loopback and localhost past a dead HTTPS_PROXY; a server Go proxies (LOCALHOST, as spelled)
    through tinyproxy in either case of the variable, or refused by a dead one naming it; NO_PROXY's
    forms; ALL_PROXY read by neither; a proxy's user and password, and its 407 without them."""
    port = real.plane.url.rsplit(":", 1)[1]
    upper = _kubeconfig(real, "upper", f"https://LOCALHOST:{port}")
    localhost = _kubeconfig(real, "localhost", f"https://localhost:{port}")
    loopback = real.kubeconfig("admin")
    dead = dead_port()
    dead_url = f"http://127.0.0.1:{dead}"
    differing = []
    with Tinyproxy(tmp_path) as proxy, Tinyproxy(tmp_path, auth=("alice", "s3cret")) as guarded:
        user = guarded.url.replace("http://", "http://alice:s3cret@")
        cases = [
            ("loopback, dead HTTPS_PROXY", loopback, {"HTTPS_PROXY": dead_url}, None),
            ("localhost, dead https_proxy", localhost, {"https_proxy": dead_url}, None),
            ("LOCALHOST, dead https_proxy", upper, {"https_proxy": dead_url}, f"127.0.0.1:{dead}"),
            ("LOCALHOST, HTTPS_PROXY tinyproxy", upper, {"HTTPS_PROXY": proxy.url}, None),
            ("LOCALHOST, dead HTTPS_PROXY, NO_PROXY=localhost", upper,
             {"HTTPS_PROXY": dead_url, "NO_PROXY": "localhost"}, None),
            (f"NO_PROXY=.localhost:{port}", upper, {"HTTPS_PROXY": dead_url, "no_proxy": f"other,localhost:{port}"},
             None),
            ("NO_PROXY=*", upper, {"HTTPS_PROXY": dead_url, "NO_PROXY": "*"}, None),
            ("NO_PROXY of another port", upper, {"HTTPS_PROXY": dead_url, "NO_PROXY": "localhost:1"},
             f"127.0.0.1:{dead}"),
            ("ALL_PROXY dead", upper, {"ALL_PROXY": dead_url, "all_proxy": dead_url}, None),
            ("a proxy's user and password", upper, {"HTTPS_PROXY": user}, None),
            ("a proxy's 407 without them", upper, {"HTTPS_PROXY": guarded.url}, "Proxy Authentication Required"),
        ]
        for case, kubeconfig, env, refused_by in cases:
            differing.append(_alike(case, *_both(real, kubeconfig, env), refused_by))
        assert set(proxy.connects()) == {f"LOCALHOST:{port}"}  # kubectl's and the plugin's, nothing else
        assert proxy.connects().count(f"LOCALHOST:{port}") >= 2
    assert [d for d in differing if d] == []


def test_a_cluster_s_proxy_url_and_the_flag_are_kubectl_s(real, tmp_path):
    """proxy-url (for every request, loopback too) live and dead, --proxy-url over it, SOCKS5 with a
    user, an https:// proxy (verified with the cluster's CA, which signed its certificate)."""
    port = real.plane.url.rsplit(":", 1)[1]
    dead = dead_port()
    differing = []
    with Tinyproxy(tmp_path) as proxy, Microsocks(auth=("bob", "pw")) as socks, Microsocks() as open_socks, \
            TlsTunnel() as tls:
        live = _kubeconfig(real, "live", **{"proxy-url": proxy.url})
        cases = [
            ("proxy-url live", live, (), None),
            ("proxy-url dead", _kubeconfig(real, "dead", **{"proxy-url": f"http://127.0.0.1:{dead}"}), (),
             f"127.0.0.1:{dead}"),
            ("--proxy-url dead over a live proxy-url", live, ("--proxy-url", f"http://127.0.0.1:{dead}"),
             f"127.0.0.1:{dead}"),
            ("proxy-url socks5 with a user", _kubeconfig(real, "socks", **{"proxy-url": socks.url}), (), None),
            ("proxy-url socks5 without one", _kubeconfig(real, "socks-open", **{"proxy-url": open_socks.url}), (),
             None),
            ("proxy-url socks5 dead", _kubeconfig(real, "socks-dead", **{"proxy-url": f"socks5://127.0.0.1:{dead}"}),
             (), f"127.0.0.1:{dead}"),
            ("proxy-url https", _kubeconfig(real, "tls", **{"proxy-url": tls.url}), (), None),
            ("proxy-url ftp", _kubeconfig(real, "ftp", **{"proxy-url": "ftp://127.0.0.1:21"}), (),
             'unsupported scheme "ftp", must be http, https, or socks5'),
        ]
        for case, kubeconfig, flags, refused_by in cases:
            differing.append(_alike(case, *_both(real, kubeconfig, {}, *flags), refused_by))
        assert set(proxy.connects()) == set(tls.connects) == {f"127.0.0.1:{port}"}
    assert [d for d in differing if d] == []


def _encodings(proxy: ApiProxy, path: str) -> list[Optional[str]]:
    """The Accept-Encoding each request of ``path`` asked with (None: none)."""
    return [dict((k.lower(), v) for k, v in e.request_headers).get("accept-encoding")
            for e in proxy.exchanges(method="GET", path=path)]


def test_gzip_is_asked_for_as_kubectl_asks_and_not_with_disable_compression(real):
    """Through the tests' TLS proxy: kubectl and the plugin ask for gzip, and the plugin reads the
    server's gzip-coded LIST; with --disable-compression (or the cluster's disable-compression) the
    plugin does not ask, nor does kubectl for the LIST."""
    path = r"/apis/worker\.gpustack\.ai/v1/kvcachepoolbindings$"
    with ApiProxy(real.plane.url) as proxy:
        kubeconfig = _kubeconfig(real, "through", proxy.url)
        kubectl, plugin = _both(real, kubeconfig, {})
        asked = _encodings(proxy, path)
        coded = [dict((k.lower(), v) for k, v in e.headers).get("content-encoding")
                 for e in proxy.exchanges(method="GET", path=path)]
        proxy.clear()
        plain_kubectl, plain_plugin = _both(real, kubeconfig, {}, "--disable-compression")
        plain = _encodings(proxy, path)
        proxy.clear()
        plain_config = _kubeconfig(real, "plain", proxy.url, **{"disable-compression": True})
        setting_kubectl, by_setting = _both(real, plain_config, {})
        by_setting_asked = _encodings(proxy, path)
    assert kubectl.returncode == plain_kubectl.returncode == setting_kubectl.returncode == 0, kubectl.stderr
    assert {plugin.returncode, plain_plugin.returncode, by_setting.returncode} <= {0, 1}, plugin.stderr
    assert asked == ["gzip", "gzip"], asked  # kubectl's LIST, then the plugin's
    assert plain == [None, None] and by_setting_asked == [None, None], (plain, by_setting_asked)
    assert plugin.stdout == plain_plugin.stdout == by_setting.stdout
    assert "gzip" in coded or not json.loads(kubectl.stdout)["items"], coded  # an empty list is not compressed


def test_the_server_s_warnings_of_a_deprecated_version_are_shown_as_kubectl_shows_them(real):
    """The Binding CRD's v1 marked deprecated with a warning: both print ``Warning: TEXT`` once;
    with --warnings-as-errors both fail saying one warning came (the plugin with exit 3)."""
    text = 'worker.gpustack.ai/v1 KVCachePoolBinding is deprecated in this test; use "v2"'  # printable: the CRD's rule
    crd = real.plane.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                    "kvcachepoolbindings.worker.gpustack.ai").body
    versions = crd["spec"]["versions"]
    marked = [dict(v, deprecated=True, deprecationWarning=text) if v["name"] == "v1" else v for v in versions]
    real.plane.patch("customresourcedefinitions", None, "kvcachepoolbindings.worker.gpustack.ai",
                     {"spec": {"versions": marked}})
    try:
        for _ in range(100):  # the server serves the new definition a moment later
            kubectl = real.kubectl(*GUIDE)
            if "Warning:" in kubectl.stderr:
                break
        plugin = real.kvdtype("check", "-A")
        strict_kubectl = real.kubectl(*GUIDE, "--warnings-as-errors")
        strict_plugin = real.kvdtype("check", "-A", "--warnings-as-errors")
    finally:
        real.plane.patch("customresourcedefinitions", None, "kvcachepoolbindings.worker.gpustack.ai",
                         {"spec": {"versions": versions}})
        for _ in range(100):  # served again as before (its storage reinitialized) for the tests after this one
            again = real.kubectl(*GUIDE)
            if again.returncode == 0 and not again.stderr:
                break
    assert kubectl.returncode == 0 and kubectl.stderr == f"Warning: {text}\n", kubectl.stderr
    assert plugin.returncode in (0, 1) and plugin.stderr.count("Warning: ") == 1, plugin.stderr
    assert f"Warning: {text}\n" in plugin.stderr
    assert strict_kubectl.returncode == 1 and strict_kubectl.stderr.endswith("error: 1 warning received\n")
    assert strict_plugin.returncode == 3, strict_plugin.stderr
    assert re.search(r"^error: 1 warning received \(--warnings-as-errors\)$", strict_plugin.stderr, re.M)

"""Which proxy a request goes through (``kubectl_kvdtype/_sources/proxy.py``), held equal to Go's own
answer: ``tests/proxyoracle``, a Go program built by ``scripts/control-plane`` from the standard
library and ``golang.org/x/net/http/httpproxy`` (what ``net/http.ProxyFromEnvironment``, and so
kubectl, decide by), reads a generated corpus of environments and URLs, and every answer must be
the plugin's."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys

import pytest

from kubectl_kvdtype._kits.status import KvdtypeError
from kubectl_kvdtype._sources import proxy

# --- The rules as documented, in-process ------------------------------------------------------------

PROXY = "http://proxy.corp:3128"


@pytest.mark.parametrize("environ, url, expected", [
    ({"HTTPS_PROXY": PROXY}, "https://127.0.0.1:6443", None),
    ({"HTTPS_PROXY": PROXY}, "https://localhost:6443", None),
    ({"HTTPS_PROXY": PROXY}, "https://[::1]:6443", None),
    ({"HTTPS_PROXY": PROXY}, "https://LOCALHOST:6443", ("proxy.corp", 3128)),  # Go compares "localhost" as spelled
    ({"HTTPS_PROXY": PROXY}, "https://api.example:6443", ("proxy.corp", 3128)),
    ({"https_proxy": "proxy.corp"}, "https://api.example", ("proxy.corp", 80)),  # no scheme: http, its port
    ({"HTTPS_PROXY": PROXY, "https_proxy": "http://lower:1"}, "https://api.example", ("proxy.corp", 3128)),
    ({"HTTPS_PROXY": "", "https_proxy": "http://lower:1"}, "https://api.example", ("lower", 1)),
    ({"ALL_PROXY": PROXY, "all_proxy": PROXY}, "https://api.example", None),
    ({"HTTP_PROXY": PROXY}, "https://api.example", None),
    ({"HTTPS_PROXY": PROXY, "NO_PROXY": "example"}, "https://api.example", None),
    ({"HTTPS_PROXY": PROXY, "NO_PROXY": ".example"}, "https://example", ("proxy.corp", 3128)),
    ({"HTTPS_PROXY": PROXY, "no_proxy": "10.0.0.0/8"}, "https://10.1.2.3:6443", None),
    ({"HTTPS_PROXY": PROXY, "NO_PROXY": "api.example:443"}, "https://api.example:6443", ("proxy.corp", 3128)),
    ({"HTTPS_PROXY": PROXY, "NO_PROXY": " * "}, "https://api.example", None),
], ids=lambda value: repr(value) if isinstance(value, str) else None)
def test_the_environment_s_proxy_is_chosen_as_go_chooses_it(environ, url, expected):
    chosen = proxy.from_environment(environ, url)
    assert (chosen and chosen.address) == expected


def test_a_proxy_s_user_and_password_are_its_basic_proxy_authorization():
    chosen = proxy.from_environment({"HTTPS_PROXY": "http://al%40ice:p%3Ass@proxy:3128"}, "https://api.example")
    assert chosen is not None and (chosen.username, chosen.password) == ("al@ice", "p:ss")
    assert chosen.authorization() == "Basic YWxAaWNlOnA6c3M="  # base64 of al@ice:p:ss
    assert chosen.shown == "http://al%40ice:***@proxy:3128 (HTTPS_PROXY)"


def test_http_proxy_is_refused_to_a_cgi_program_as_go_refuses_it():
    with pytest.raises(KvdtypeError, match="REQUEST_METHOD"):
        proxy.from_environment({"HTTP_PROXY": PROXY, "REQUEST_METHOD": "GET"}, "http://api.example")
    assert proxy.from_environment({"HTTPS_PROXY": PROXY, "REQUEST_METHOD": "GET"}, "https://api.example")


def test_the_cluster_s_proxy_url_serves_every_request_and_must_be_a_proxy_url():
    chosen = proxy.for_server("https://127.0.0.1:6443", {}, "socks5://proxy")
    assert chosen is not None and (chosen.scheme, chosen.address, chosen.source) == ("socks5", ("proxy", 1080),
                                                                                     "proxy-url")
    with pytest.raises(KvdtypeError) as refused:  # kubectl: invalid 'proxy-url' "..." for cluster "c": unsupported...
        proxy.for_server("https://api.example", {}, "ftp://proxy")
    assert str(refused.value) == ('invalid \'proxy-url\' "ftp://proxy": unsupported scheme "ftp", must be http, '
                                  'https, or socks5')


# --- Go as the oracle, on a generated corpus --------------------------------------------------------

SERVERS = ["api.example", "API.Example", "sub.api.example", "example", "notexample", "localhost", "LOCALHOST",
           "localhost.", "127.0.0.1", "127.1.2.3", "10.1.2.3", "10.255.0.1", "192.168.0.5", "[::1]", "[2001:db8::5]",
           "[::ffff:127.0.0.1]", "[::ffff:10.1.2.3]", "[fe80::1%25eth0]", "bücher.example", "xn--bcher-kva.example",
           "0.0.0.0", "[::]"]
PORTS = ["", ":443", ":6443", ":80", ":8443"]
PROXIES = ["http://proxy:3128", "proxy:3128", "proxy", "https://proxy:8443", "socks5://proxy:1080", "socks5://proxy",
           "HTTP://Proxy.Corp:3128", "http://user:pa%20ss@proxy:3128", "http://user@proxy:3128", "user:pw@proxy:3128",
           "http://@proxy", "http://[2001:db8::1]:3128", "127.0.0.1:3128", "[::1]:3128", "http://proxy:3128/path",
           "http://pro xy:3128", "://nope", "http://proxy:port", "http://a:b@c:d@proxy:1", "%zz", "http://[::1",
           "proxy:3128/%zz", "ftp://proxy:21", "http://proxy:3128?x=1#y"]
NO_PROXIES = ["example", ".example", "api.example", "*.example", "API.EXAMPLE", "example:6443", "api.example:443",
              "10.0.0.0/8", "10.1.2.3", "10.1.2.3:6443", "10.1.2.3:443", "192.168.0.0/16", "2001:db8::/32",
              "[2001:db8::5]:6443", "2001:db8::5", "::ffff:10.0.0.0/104", "::ffff:0.0.0.0/96", "*", " * ", "",
              " example , 10.0.0.0/8 ", "notexample", "bücher.example", ".bücher.example", ":6443", "[::1]",
              "10.0.0.0/33", "10.1.2.3/8", "example.", "0.0.0.0/0", "::/0", "localhost", "xn--bcher-kva.example"]


def _corpus(rng: random.Random) -> list[dict]:
    """Environments and URLs: every server form under a proxy of each form and case, and many
    NO_PROXY lists of one to three entries."""
    cases = []
    for server, port in itertools.product(SERVERS, PORTS):
        for scheme in ("https", "http"):
            url = f"{scheme}://{server}{port}/api"
            for value in PROXIES:
                name = rng.choice(["HTTPS_PROXY", "https_proxy"] if scheme == "https" else ["HTTP_PROXY", "http_proxy"])
                cases.append({"env": {name: value}, "url": url})
            for _ in range(12):
                entries = rng.sample(NO_PROXIES, rng.randint(1, 3))
                env = {"HTTPS_PROXY": "http://proxy:3128", "HTTP_PROXY": "http://proxy:3128",
                       rng.choice(["NO_PROXY", "no_proxy"]): ",".join(entries)}
                cases.append({"env": env, "url": url})
    # Which variable wins: upper and lower case, empty values, ALL_PROXY, CGI.
    names = ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY",
             "no_proxy", "REQUEST_METHOD"]
    values = {"NO_PROXY": ["", "api.example", "other"], "no_proxy": ["", "api.example", "other"],
              "REQUEST_METHOD": ["", "GET"]}
    for _ in range(600):
        env = {}
        for name in rng.sample(names, rng.randint(1, 5)):
            env[name] = rng.choice(values.get(name, ["", f"http://{name.lower()}:1"]))
        cases.append({"env": env, "url": rng.choice(["https://api.example:6443", "http://api.example:8080",
                                                     "https://10.1.2.3", "http://localhost"])})
    return cases


def _plugin_answer(case: dict) -> dict:
    try:
        chosen = proxy.from_environment(case["env"], case["url"])
    except KvdtypeError as error:
        return {"error": str(error)}
    if chosen is None:
        return {"proxy": None}
    return {"proxy": {"scheme": chosen.scheme, "hostname": chosen.hostname, "port": chosen.port,
                      "user": chosen.username is not None, "username": chosen.username or "",
                      "password": chosen.password or "", "hasPassword": chosen.password is not None}}


def _oracle() -> str:
    from _controlplane import _script

    script = _script()
    return script.ensure(script.BY_NAME["proxyoracle"], log=lambda line: print(line, file=sys.stderr)).path


@pytest.mark.e2e
def test_every_answer_of_the_corpus_is_go_s():
    cases = _corpus(random.Random(50))
    done = subprocess.run([_oracle()], input="".join(json.dumps(c) + "\n" for c in cases), capture_output=True,
                          text=True, timeout=120, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(cases)
    differing = []
    for case, go in zip(cases, answers, strict=True):
        ours = _plugin_answer(case)
        if "error" in go and go["error"].startswith("url: "):
            continue  # a URL Go's net/url refuses is never a kubeconfig's server (kubectl refuses it first)
        if ("error" in go) != ("error" in ours) or ("error" not in go and go != ours):
            differing.append((case, go, ours))
    assert not differing, f"{len(differing)} of {len(cases)} differ, e.g. {differing[:5]}"
    assert sum(1 for a in answers if a.get("proxy")) > len(cases) // 5  # the corpus proxies a good share
    assert sum(1 for a in answers if a.get("proxy") is None and "error" not in a) > len(cases) // 5

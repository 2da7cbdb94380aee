"""kubectl 1.37's flags on the real kube-apiserver (issue 50). Impersonation extras: ``--as-user-extra``
and the kubeconfig user's ``as-user-extra`` reach the server as kubectl sends them
(``Impersonate-Extra-KEY``, the key percent-encoded as client-go encodes it), so that the server sees
the same user, and RBAC on an extra decides for the plugin what it decides for kubectl. ``-v=6``:
the plugin's line for a request is the pinned kubectl's for the same request."""

from __future__ import annotations

import json
import re

import pytest

from _controlplane import USERS
from _support import imported_by

#: Extras with a key that needs encoding (a slash, a space, a per cent sign, capitals) and a key given twice.
_EXTRAS = ("team=a", "team=b", "acme.com/project=p", "Upper Key=x", "100%=y=z")
_REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def _flags(*extras: str) -> list[str]:
    return ["--as", "someone", *[word for extra in extras for word in ("--as-user-extra", extra)]]


def _kubectl_user(real, *extras: str) -> dict:
    said = real.kubectl("auth", "whoami", "-o", "json", *_flags(*extras))
    assert said.returncode == 0, said.stderr
    return json.loads(said.stdout)["status"]["userInfo"]


def _plugin_user(kubeconfig: str, *flags: str) -> tuple[dict, bool]:
    """The SelfSubjectReview the plugin's own cluster source gets with these flags (``--as`` and
    ``--as-user-extra`` only, as the options their rows fill), and whether it went through the
    kubernetes client's transport."""
    from kubectl_kvdtype._sources.cluster import ClusterSource
    from kubectl_kvdtype._sources.connection import ConnectionOptions

    pairs = list(zip(flags[::2], flags[1::2], strict=True))
    assert all(flag in ("--as", "--as-user-extra") for flag, _ in pairs), flags
    options = ConnectionOptions(kubeconfig=kubeconfig, request_timeout=30.0,
                                impersonate=next((v for f, v in pairs if f == "--as"), None),
                                impersonate_extra=tuple(v for f, v in pairs if f == "--as-user-extra"))
    source = ClusterSource(options, environ={})
    answer = source.post(_REVIEW, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    return answer["status"]["userInfo"], type(source._transport).__module__.endswith("client_transport")


def test_the_server_sees_the_same_extras_from_kubectl_and_from_the_plugin_on_both_transports(real, tmp_path):
    expected = _kubectl_user(real, *_EXTRAS)
    assert expected["username"] == "someone"
    assert expected["extra"] == {"team": ["a", "b"], "acme.com/project": ["p"], "upper key": ["x"], "100%": ["y=z"]}
    direct_kc = real.kubeconfig(user="admin")
    config = json.loads(json.dumps(_loaded(direct_kc)))
    config["users"][0]["user"]["exec"] = {"apiVersion": "client.authentication.k8s.io/v1", "command": "false"}
    client_kc = tmp_path / "client-kc"
    client_kc.write_text(json.dumps(config))  # an exec plugin beside the token: the client's transport
    for path, client in ((str(direct_kc), False), (str(client_kc), True)):
        seen, through_client = _plugin_user(path, *_flags(*_EXTRAS))
        assert through_client == client
        assert seen == expected, path


def test_the_kubeconfig_users_extras_are_merged_with_the_flags_as_kubectl_merges_them(real, tmp_path):
    config = _loaded(real.kubeconfig(user="admin"))
    config["users"][0]["user"].update({"as": "someone", "as-user-extra": {"team": ["k"], "site/zone": ["x"]}})
    path = tmp_path / "extra-kc"
    path.write_text(json.dumps(config))
    env = {**real.env(user="admin"), "KUBECONFIG": str(path)}
    for flags in ((), ("--as-user-extra", "team=f")):
        expected = json.loads(_kubectl_in(env, "auth", "whoami", "-o", "json", *flags))["status"]["userInfo"]
        seen, _ = _plugin_user(str(path), *flags)
        assert seen == expected
    assert expected["extra"] == {"team": ["f"], "site/zone": ["x"]}


def _kubectl_in(env: dict, *args: str) -> str:
    import subprocess

    from conftest import kubectl_path

    said = subprocess.run([kubectl_path(), *args], env=env, capture_output=True, text=True, timeout=60)
    assert said.returncode == 0, said.stderr
    return said.stdout


def _loaded(path) -> dict:
    from kubectl_kvdtype._sources.connection import read_kubeconfig

    return read_kubeconfig(str(path))


@pytest.mark.parametrize("team", ["a", "b"])
def test_rbac_on_an_extra_decides_alike_for_kubectl_and_the_plugin(real, team):
    """``limited`` may impersonate ``viewer`` only with the extra ``team=a``; ``viewer`` may list
    Bindings. kubectl and the plugin are let through with ``team=a`` and refused alike with ``team=b``."""
    plane = real.plane
    impersonate = [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["viewer"]},
                   {"apiGroups": ["authentication.k8s.io"], "resources": ["userextras/team"], "verbs": ["impersonate"],
                    "resourceNames": ["a"]}]
    reads = [{"apiGroups": ["worker.gpustack.ai"], "resources": ["kvcachepoolbindings", "modeldeployments"],
              "verbs": ["get", "list"]},
             {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
             {"apiGroups": ["gpustack.ai"], "resources": ["settings"], "verbs": ["get"]}]
    with plane.grant("limited", impersonate), plane.grant("viewer", reads):
        flags = ("--as", "viewer", "--as-user-extra", f"team={team}")
        kubectl = real.kubectl("get", "kvcachepoolbindings", "-n", real.namespace, *flags, user="limited")
        plugin, modules = imported_by(["check", "-n", real.namespace, *flags], real.env(user="limited"))
    assert "urllib3" not in modules
    if team == "a":
        assert kubectl.returncode == 0 and plugin.returncode == 0, (kubectl.stderr, plugin.stderr)
    else:
        assert kubectl.returncode == 1 and plugin.returncode == 3, (kubectl.stderr, plugin.stderr)
        # kubectl's discovery meets the refusal first, and says only "Forbidden"; the plugin gives the server's reason.
        assert "Error from server (Forbidden)" in kubectl.stderr, kubectl.stderr
        refusal = 'cannot impersonate resource "userextras/team" in API group "authentication.k8s.io"'
        assert refusal in plugin.stderr, plugin.stderr


#: kubectl's line at -v=6: klog's header, then the request; what may differ between two runs aside.
_LINE = re.compile(r'^I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ (?:round_trippers\.go:\d+|requestlog\.py:1)\] '
                   r'("Response" verb="GET" url="[^"]+" status="[^"]*") milliseconds=\d+$')


def _requests_logged(stderr: str) -> list[str]:
    lines = [line for line in stderr.splitlines() if '"Response"' in line]
    matched = [_LINE.match(line) for line in lines]
    assert lines and all(matched), stderr
    return [m.group(1) for m in matched if m]


@pytest.mark.parametrize("user", ["reader", "limited"])
def test_v6_writes_kubectls_line_for_the_same_request(real, user):
    """The plugin's LIST of Bindings and kubectl's GET of the same URL, at -v=6 as the reader
    (200) and as a user bound to nothing (403): the same line but for the time, the process and
    the source; no credential in either."""
    url = f"/apis/worker.gpustack.ai/v1/namespaces/{real.namespace}/kvcachepoolbindings"  # one request: no page's limit
    kubectl = real.kubectl("get", "--raw", url, "-v=6", user=user)
    plugin = real.kvdtype("check", "-v=6", user=user)
    theirs, mine = _requests_logged(kubectl.stderr), _requests_logged(plugin.stderr)
    assert theirs[-1] in mine, (theirs, mine)
    assert ("200 OK" if user == "reader" else "403 Forbidden") in theirs[-1]
    token = USERS[user].token
    assert token not in plugin.stderr and token not in kubectl.stderr


@pytest.mark.parametrize("spelling", ["--names={ns}", "--namespace={ns}"])
def test_an_abbreviation_is_refused_by_both_and_the_whole_flag_taken_by_both(real, spelling):
    """On the real server, as the reader: kubectl's grammar takes ``--namespace`` only as spelled,
    and so does the plugin; the abbreviation reaches no server from either."""
    flag = spelling.format(ns=real.namespace)
    kubectl = real.kubectl("get", "kvcachepoolbindings", flag, user="reader")
    plugin = real.kvdtype("check", flag, user="reader")
    if spelling.startswith("--names="):
        assert kubectl.returncode == 1 and "unknown flag: --names" in kubectl.stderr, kubectl.stderr
        assert plugin.returncode == 2 and f"unrecognized arguments: {flag}" in plugin.stderr, plugin.stderr
    else:
        assert kubectl.returncode == 0 and plugin.returncode == 0, (kubectl.stderr, plugin.stderr)

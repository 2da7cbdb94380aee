"""Exec credential plugins run by the plugin's own code (``_sources/credentials``), held to kubectl.

Each case is a kubeconfig user's exec setting and what its plugin prints, given to the pinned kubectl
and to the plugin alike, against a server nothing listens on (both decide about the plugin before
they connect): both refuse it naming kubectl's phrase, or both run it and then fail to connect. And
what the plugin is handed (``KUBERNETES_EXEC_INFO``, ``env``) is what kubectl hands it.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Optional

import pytest

from _support import PLUGIN, exec_credential, exec_plugin
from conftest import kubectl_path
from fakekube import EXEC_API_VERSION, TEST_CA_PEM

pytestmark = pytest.mark.e2e

V1BETA1 = "client.authentication.k8s.io/v1beta1"
CA_DATA = base64.b64encode(TEST_CA_PEM.encode()).decode()


def _answer(status: dict, api_version: str = EXEC_API_VERSION) -> str:
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": status})


#: (name, the exec setting beside its command, what the plugin prints, kubectl's phrase; None: it is
#: run and the request then fails to connect).
CASES = [
    ("v1-needs-interactiveMode", {}, exec_credential({"token": "t"}),
     "interactiveMode must be specified for u to use exec authentication plugin"),
    ("unknown-interactiveMode", {"interactiveMode": "Sometimes"}, exec_credential({"token": "t"}),
     'invalid interactiveMode for u: "Sometimes"'),
    ("v1alpha1", {"apiVersion": "client.authentication.k8s.io/v1alpha1", "interactiveMode": "Never"},
     exec_credential({"token": "t"}), 'exec plugin: invalid apiVersion "client.authentication.k8s.io/v1alpha1"'),
    ("Always-without-a-terminal", {"interactiveMode": "Always"}, exec_credential({"token": "t"}),
     "exec plugin cannot support interactive mode: standard input is not a terminal"),
    ("IfAvailable-without-a-terminal", {"interactiveMode": "IfAvailable"}, exec_credential({"token": "t"}), None),
    ("v1beta1-defaults-to-IfAvailable", {"apiVersion": V1BETA1}, _answer({"token": "t"}, V1BETA1), None),
    ("another-apiVersion-answered", {"interactiveMode": "Never"}, _answer({"token": "t"}, V1BETA1),
     f"exec plugin is configured to use API version {EXEC_API_VERSION}, plugin returned version {V1BETA1}"),
    ("no-status", {"interactiveMode": "Never"}, json.dumps({"apiVersion": EXEC_API_VERSION, "kind": "ExecCredential"}),
     "exec plugin didn't return a status field"),
    ("certificate-without-key", {"interactiveMode": "Never"}, exec_credential({"clientCertificateData": "x"}),
     "exec plugin returned only certificate or key, not both"),
    ("not-installed", {"interactiveMode": "Never", "command": "kvdtype-no-such-plugin",
                       "installHint": "install it\nwith your package manager"}, "",
     "executable kvdtype-no-such-plugin not found"),
]


def _kubeconfig(path: Path, exec_setting: dict, cluster: Optional[dict] = None) -> Path:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "x",
              "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1",
                                                     "certificate-authority-data": CA_DATA, **(cluster or {})}}],
              "users": [{"name": "u", "user": {"exec": exec_setting}}],
              "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}
    path.write_text(json.dumps(config))
    return path


def _both(kubeconfig: Path, env: dict) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """kubectl's call and the plugin's run (directly: with no kuberc, kubectl would dispatch it as is)."""
    def run(argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)

    return (run([kubectl_path(), "--kubeconfig", str(kubeconfig), "get", "ns", "--request-timeout", "2s"]),
            run([PLUGIN, "--kubeconfig", str(kubeconfig), "check", "-A", "--request-timeout", "2s"]))


def test_each_exec_setting_and_answer_is_taken_or_refused_as_kubectl_takes_it(tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "KUBERC": "off"}
    marker = tmp_path / "ran"
    for name, setting, prints, phrase in CASES:
        plugin = exec_plugin(tmp_path / f"plugin-{name}", f"touch {marker}\ncat <<'EOF'\n{prints}\nEOF\n")
        exec_setting = {"apiVersion": EXEC_API_VERSION, "command": str(plugin), **setting}
        theirs, mine = _both(_kubeconfig(tmp_path / f"kc-{name}", exec_setting), env)
        ran = marker.exists()
        marker.unlink(missing_ok=True)
        if phrase is None:
            assert "connection to the server 127.0.0.1:1 was refused" in theirs.stderr, (name, theirs.stderr)
            assert mine.returncode == 3 and "cannot reach the cluster" in mine.stderr, (name, mine.stderr)
            assert ran, name
        else:
            assert phrase in theirs.stderr, (name, theirs.stderr)
            assert mine.returncode == 3 and phrase in mine.stderr, (name, mine.stderr)
            assert len(mine.stderr.splitlines()) == 1, (name, mine.stderr)
        if name == "not-installed":  # the hint, on the one line
            assert "with your package manager" in theirs.stderr and "with your package manager" in mine.stderr


def test_the_plugin_is_handed_what_kubectl_hands_it(tmp_path):
    """``KUBERNETES_EXEC_INFO`` (its spec: not interactive, the cluster with ``provideClusterInfo``:
    server, TLS name, CA as data, proxy URL, the exec extension as ``config``) and ``env``, as kubectl
    hands them, byte for byte; the plugin runs in the working directory, its relative command found
    from its kubeconfig's."""
    seen = tmp_path / "seen"
    exec_plugin(tmp_path / "plugin", f"""\
printf '%s' "$KUBERNETES_EXEC_INFO" >> {seen}
printf '%s\\n' "$GREETING" "$PWD" >> {seen}
echo '{_answer({"token": "t"}, V1BETA1)}'
""")
    cluster = {"tls-server-name": "api.example", "extensions": [
        {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "kvdtype", "n": [1, 2]}},
        {"name": "another", "extension": {"x": 1}}]}
    kubeconfig = _kubeconfig(tmp_path / "kc", {"apiVersion": V1BETA1, "command": "./plugin", "provideClusterInfo": True,
                                               "env": [{"name": "GREETING", "value": "hello"}]}, cluster)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "KUBERC": "off"}
    for argv in ([kubectl_path(), "get", "ns"], [PLUGIN, "check", "-A"]):
        subprocess.run([*argv, "--kubeconfig", str(kubeconfig), "--request-timeout", "2s"], env=env, cwd=elsewhere,
                       capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    lines = seen.read_text().splitlines()  # the info ends with a newline, as client-go encodes it
    theirs, mine = lines[:3], lines[3:]
    assert mine[0] == theirs[0]
    assert json.loads(mine[0])["spec"]["cluster"]["config"] == {"audience": "kvdtype", "n": [1, 2]}
    assert mine[1:] == theirs[1:] == ["hello", str(elsewhere)]

"""kuberc's credential plugin policy (``_sources/kuberc``), held to the pinned kubectl.

Three tiers: in-process, how a kuberc is found, read and matched; with kubectl (no server: a dead
address, since kubectl decides on kuberc before it connects) the same kuberc texts judged by both;
on the real kube-apiserver, each place kuberc is found and both switches, DenyAll, an Allowlist with
and without the plugin's path and a kuberc that does not parse, kubectl's call and the plugin's run
(dispatched by that kubectl) refused alike or both served, on each transport and in a fleet, and a
refused exec plugin shown never to have run.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Optional

import pytest

from _support import PLUGIN, exec_credential, exec_plugin
from conftest import kubectl_path
from fakekube import EXEC_API_VERSION
from kubectl_kvdtype._kits.status import KvdtypeError, UsageError
from kubectl_kvdtype._sources import kuberc

HEAD = "apiVersion: kubectl.config.k8s.io/v1beta1\nkind: Preference\n"


def _policy(tmp_path: Path, text: Optional[str], flag: Optional[str] = None, **environ: str) -> kuberc.Policy:
    """The policy found with ``text`` at $KUBERC (None: no file there), a fresh read each time."""
    kuberc._READ.clear()
    path = tmp_path / "kuberc"
    if text is not None:
        path.write_text(text)
    environ = {"HOME": str(tmp_path / "home"), "KUBERC": str(path), **environ}
    return kuberc.policy(flag, {k: v for k, v in environ.items() if v is not None})


def _refusal(tmp_path: Path, text: Optional[str], **environ: str) -> str:
    with pytest.raises(KvdtypeError) as raised:
        _policy(tmp_path, text, **environ).check("/bin/true", str(tmp_path))
    return raised.value.message


# --- Where kuberc is found, and how it is read -----------------------------------------------------

def test_the_flag_wins_over_kuberc_and_the_home_file_is_the_last_resort(tmp_path):
    home = tmp_path / "home" / ".kube"
    home.mkdir(parents=True)
    (home / "kuberc").write_text(HEAD + "credentialPluginPolicy: DenyAll\n")
    (tmp_path / "allow").write_text(HEAD + "credentialPluginPolicy: AllowAll\n")
    assert _policy(tmp_path, HEAD + "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: x\n",
                   flag=str(tmp_path / "allow")).policy == "AllowAll"
    assert _policy(tmp_path, HEAD + "credentialPluginPolicy: AllowAll\n").policy == "AllowAll"
    assert _policy(tmp_path, None, KUBERC=None).policy == "DenyAll"
    assert _policy(tmp_path, None, KUBERC="").policy == "DenyAll"  # empty: as unset
    assert _policy(tmp_path, None, KUBERC="off").policy == ""
    for off in ("false", "FALSE", "fAlSe"):
        assert _policy(tmp_path, None, KUBERC=None, KUBECTL_KUBERC=off).policy == ""
    for on in ("0", "no", "off", "f"):  # kubectl turns kuberc off on "false" alone
        assert _policy(tmp_path, None, KUBERC=None, KUBECTL_KUBERC=on).policy == "DenyAll"


def test_the_switches_and_the_flag_together_are_refused_as_kubectl_refuses_them(tmp_path):
    with pytest.raises(UsageError, match="unknown flag: --kuberc"):
        _policy(tmp_path, None, flag="/x", KUBECTL_KUBERC="false")
    with pytest.raises(KvdtypeError, match="disabling kuberc via KUBERC=off and passing kuberc flag are mutually"):
        _policy(tmp_path, None, flag="/x", KUBERC="off")
    with pytest.raises(KvdtypeError, match="kuberc file is not found"):
        _policy(tmp_path, None, flag="")
    from kubectl_kvdtype._sources.connection import ConnectionOptions
    from kubectl_kvdtype._sources.kubeconfig import resolve

    with pytest.raises(UsageError, match="unknown flag: --kuberc"):  # whatever the run: before any kubeconfig
        resolve(ConnectionOptions(kuberc="/x", server="https://127.0.0.1:1"), {"KUBECTL_KUBERC": "false"})


def test_a_named_kuberc_must_be_read_and_the_home_one_is_skipped_when_it_cannot_be(tmp_path):
    assert f"open {tmp_path / 'kuberc'}: no such file or directory" in _refusal(tmp_path, None)
    (tmp_path / "kuberc").mkdir()
    assert "is a directory" in _refusal(tmp_path, None)
    home = tmp_path / "home" / ".kube"
    home.mkdir(parents=True)
    assert _policy(tmp_path, None, KUBERC=None).policy == ""  # missing
    (home / "kuberc").write_text("apiVersion: kubectl.config.k8s.io/v1\nkind: Preference\n"
                                 "credentialPluginPolicy: DenyAll\n")
    assert _policy(tmp_path, None, KUBERC=None).policy == ""  # no valid preferences: skipped
    (home / "kuberc").write_text(HEAD + "credentialPluginPolicy: Bogus\n")
    with pytest.raises(KvdtypeError, match='unknown plugin policy: "Bogus"'):  # but validated
        _policy(tmp_path, None, KUBERC=None)


NO_VALID = "no valid preferences found in"

#: A kuberc's text, and kubectl 1.37's verdict on it (seen on the pinned kubectl): the policy in
#: force, or the phrase of its refusal. ``test_each_kuberc_is_judged_as_kubectl_judges_it`` asks kubectl again.
TEXTS = [
    ("deny", HEAD + "credentialPluginPolicy: DenyAll\n", "DenyAll"),
    ("allow-all", HEAD + "credentialPluginPolicy: AllowAll\n", "AllowAll"),
    ("no-policy", HEAD, ""),
    ("null-policy", HEAD + "credentialPluginPolicy: null\n", ""),
    ("empty", "", ""),
    ("blanks", " \n\n", ""),
    ("json", json.dumps({"apiVersion": "kubectl.config.k8s.io/v1beta1", "kind": "Preference",
                         "credentialPluginPolicy": "DenyAll"}), "DenyAll"),
    ("unknown-field", HEAD + "credentialPluginPolicy: DenyAll\nsomethingNew: 1\n", "DenyAll"),
    ("v1alpha1", "apiVersion: kubectl.config.k8s.io/v1alpha1\nkind: Preference\ncredentialPluginPolicy: DenyAll\n",
     ""),
    ("repeated-key", HEAD + "credentialPluginPolicy: DenyAll\ncredentialPluginPolicy: AllowAll\n", "AllowAll"),
    ("first-valid-document", "foo: [\n---\n- a\n---\n" + HEAD.replace("Preference", "Other") + "---\n"
     + HEAD + "credentialPluginPolicy: DenyAll\n---\n" + HEAD + "credentialPluginPolicy: AllowAll\n", "DenyAll"),
    ("v1", "apiVersion: kubectl.config.k8s.io/v1\nkind: Preference\ncredentialPluginPolicy: DenyAll\n", NO_VALID),
    ("other-kind", HEAD.replace("Preference", "preference") + "credentialPluginPolicy: DenyAll\n", NO_VALID),
    ("no-apiVersion", "kind: Preference\ncredentialPluginPolicy: DenyAll\n", NO_VALID),
    ("not-yaml", ": : :\n  - [", NO_VALID),
    ("comment-only", "# nothing\n", NO_VALID),
    ("separator-only", "---\n", NO_VALID),
    ("policy-a-number", HEAD + "credentialPluginPolicy: 1\n", NO_VALID),
    ("aliases-not-a-list", HEAD + "credentialPluginPolicy: DenyAll\naliases: 3\n", NO_VALID),
    ("entry-a-string", HEAD + "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- /bin/true\n",
     NO_VALID),
    ("unknown-policy", HEAD + "credentialPluginPolicy: denyall\n", 'unknown plugin policy: "denyall"'),
    ("allowlist-unspecified", HEAD + "credentialPluginPolicy: Allowlist\n", "but allowlist is unspecified"),
    ("allowlist-empty", HEAD + "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist: []\n",
     'but allowlist is empty; use "DenyAll" policy instead'),
    ("allowlist-beside-deny", HEAD + "credentialPluginPolicy: DenyAll\ncredentialPluginAllowlist:\n- name: x\n",
     'plugin policy is "DenyAll" but allowlist is non-nil'),
    ("empty-entry", HEAD + "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- {}\n",
     "empty allowlist entry #1"),
    ("unclean-entry", HEAD + "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: /bin//true\n",
     'non-normalized file path: "/bin//true" vs "/bin/true"'),
]


def _reads_as(tmp_path: Path, text: str, verdict: str) -> None:
    if verdict in ("", "AllowAll", "DenyAll"):
        assert _policy(tmp_path, text).policy == verdict
    else:
        assert verdict in _refusal(tmp_path, text)


@pytest.mark.parametrize("text, verdict", [(t, v) for _, t, v in TEXTS], ids=[name for name, _, _ in TEXTS])
def test_a_kuberc_is_read_as_kubectl_reads_it(tmp_path, text, verdict):
    _reads_as(tmp_path, text, verdict)


# --- How a command is matched --------------------------------------------------------------------

def _allowlist(*names: str) -> kuberc.Policy:
    return kuberc.Policy("Allowlist", names, "/k")


def test_a_command_is_matched_as_written_or_as_found_on_path(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = exec_plugin(bin_dir / "cred", "true\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin")
    kubeconfig_dir = str(tmp_path)
    assert _allowlist(str(plugin)).check(str(plugin), kubeconfig_dir) == str(plugin)
    assert _allowlist(str(plugin)).check("bin/../bin/cred", kubeconfig_dir) == str(plugin)  # relative, cleaned
    assert _allowlist(str(plugin)).check("cred", kubeconfig_dir) == str(plugin)  # found on PATH
    assert _allowlist("cred").check(str(plugin), kubeconfig_dir) == str(plugin)  # the entry found on PATH
    assert _allowlist("cred").check("cred", kubeconfig_dir) == str(plugin)
    monkeypatch.setenv("PATH", "/usr/bin")
    with pytest.raises(KvdtypeError, match=f'plugin path "{plugin}" is not permitted by the credential plugin '
                                           "allowlist"):
        _allowlist("cred").check(str(plugin), kubeconfig_dir)
    assert _allowlist("cred").check("cred", kubeconfig_dir) == "cred"  # as written: allowed, and fails to run
    with pytest.raises(KvdtypeError, match='plugin path "absent" cannot be resolved for credential plugin allowlist '
                                           'check: exec: "absent": executable file not found in \\$PATH'):
        _allowlist("cred").check("absent", kubeconfig_dir)
    with pytest.raises(KvdtypeError, match=f'plugin "{plugin}" not allowed: policy set to "DenyAll"'):
        kuberc.Policy("DenyAll", None, "/k").check("./bin/cred", kubeconfig_dir)
    assert kuberc.Policy().check("cred", kubeconfig_dir) == "cred"


@pytest.mark.e2e  # importing the kubernetes client binds a socket
def test_neither_transport_starts_a_plugin_the_policy_forbids(tmp_path):
    """In-process, whichever transport the chooser would take: the direct transport's credential and
    the client's configuration both ask the policy first, and are refused before any process starts
    (the plugin named does not even exist)."""
    from kubectl_kvdtype._sources import client_transport, direct
    from kubectl_kvdtype._sources.connection import ConnectionOptions
    from kubectl_kvdtype._sources.kubeconfig import direct_settings, resolve

    (tmp_path / "kuberc").write_text(HEAD + "credentialPluginPolicy: DenyAll\n")
    kubeconfig = _dead_kubeconfig(tmp_path, str(tmp_path / "cred"))
    resolved = resolve(ConnectionOptions(kubeconfig=str(kubeconfig)), {"KUBERC": str(tmp_path / "kuberc")})
    kuberc._READ.clear()
    settings = direct_settings(resolved)
    assert settings is not None
    with pytest.raises(kuberc.KubercError, match=f'plugin "{tmp_path / "cred"}" not allowed: policy set to "DenyAll"'):
        direct.open_direct(settings, 1.0)
    with pytest.raises(kuberc.KubercError, match='not allowed: policy set to "DenyAll"'):
        client_transport.configure(resolved)


# --- The same texts, asked of kubectl ----------------------------------------------------------------

def _dead_kubeconfig(tmp_path: Path, command: str) -> Path:
    """A kubeconfig whose user is an exec plugin, of a server nothing listens on: kubectl decides
    on kuberc, and runs the plugin or not, before it connects."""
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "x",
              "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
              "users": [{"name": "u", "user": {"exec": {"apiVersion": EXEC_API_VERSION, "command": command,
                                                         "interactiveMode": "Never"}}}],
              "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}
    path = tmp_path / "dead-kc"
    path.write_text(json.dumps(config))
    return path


@pytest.mark.e2e
def test_each_kuberc_is_judged_as_kubectl_judges_it(tmp_path):
    """kubectl's own verdict on each text of ``TEXTS``, against the plugin's reading of it: refused
    with the same phrase, or the plugin run (DenyAll: refused naming the policy) alike."""
    marker = tmp_path / "ran"
    plugin = exec_plugin(tmp_path / "cred", f"touch {marker}\necho '{exec_credential({'token': 't'})}'\n")
    kubeconfig = _dead_kubeconfig(tmp_path, str(plugin))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "KUBERC": str(tmp_path / "kuberc")}
    for name, text, verdict in TEXTS:
        (tmp_path / "kuberc").write_text(text)
        marker.unlink(missing_ok=True)
        result = subprocess.run([kubectl_path(), "--kubeconfig", str(kubeconfig), "get", "ns",
                                 "--request-timeout", "2s"], env=env, capture_output=True, text=True, timeout=60)
        if verdict == "DenyAll":
            assert 'not allowed: policy set to "DenyAll"' in result.stderr and not marker.exists(), name
        elif verdict in ("", "AllowAll"):
            assert marker.exists() and "connection to the server" in result.stderr, (name, result.stderr)
        else:
            assert verdict in result.stderr and not marker.exists(), (name, result.stderr)
        _reads_as(tmp_path, text, verdict)  # and the plugin reads it so


# --- On the real server: kubectl and the plugin it dispatches -------------------------------------------

DENY = HEAD + "credentialPluginPolicy: DenyAll\n"


def _allow(*names: str) -> str:
    return HEAD + "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n" + "".join(
        f"- name: {name}\n" for name in names)


class _Exec:
    """A reader's kubeconfig on the real server whose user is an exec plugin that leaves a marker
    each time it runs; ``both`` runs kubectl and the plugin it dispatches alike."""

    def __init__(self, real, tmp_path: Path) -> None:
        self.real, self.tmp = real, tmp_path
        self.marker = tmp_path / "plugin-ran"
        config = json.loads(real.kubeconfig(user="reader").read_text())
        token = config["users"][0]["user"].pop("token")
        self.plugin = exec_plugin(tmp_path / "cred-plugin", f"echo run >> {self.marker}\n"
                                                            f"printf '%s' '{exec_credential({'token': token})}'\n")
        config["users"][0]["user"]["exec"] = {"apiVersion": EXEC_API_VERSION, "command": str(self.plugin),
                                              "interactiveMode": "Never"}
        second = dict(config["contexts"][0], name="second")
        config["contexts"].append(second)
        self.kubeconfig = tmp_path / "exec-kc"
        self.kubeconfig.write_text(json.dumps(config))
        self.home = tmp_path / "home"
        (self.home / ".kube").mkdir(parents=True)

    def env(self, **extra: Optional[str]) -> dict:
        env = {**self.real.env(user="reader"), "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.home)}
        for name in ("KUBERC", "KUBECTL_KUBERC"):
            env.pop(name, None)
        env.update({k: v for k, v in extra.items() if v is not None})
        return env

    def runs(self) -> int:
        count = len(self.marker.read_text().splitlines()) if self.marker.exists() else 0
        self.marker.unlink(missing_ok=True)
        return count

    def run(self, argv: list[str], env: dict) -> tuple[subprocess.CompletedProcess, int]:
        self.runs()
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, cwd=self.tmp)
        return result, self.runs()

    def both(self, *flags: str, **extra: Optional[str]) -> tuple[tuple, tuple]:
        """(kubectl's (result, plugin runs), the plugin's (result, plugin runs)), with ``flags``."""
        env = self.env(**extra)
        theirs = self.run([kubectl_path(), "get", "kvcpb", "-n", self.real.namespace, *flags], env)
        mine = self.run([kubectl_path(), "kvdtype", "check", "-A", *flags], env)
        return theirs, mine


def _refused_alike(theirs: tuple, mine: tuple, phrase: str) -> None:
    (kubectl, kubectl_runs), (plugin, plugin_runs) = theirs, mine
    assert kubectl.returncode == 1 and phrase in kubectl.stderr, kubectl.stderr
    assert plugin.returncode in (1, 3) and phrase in plugin.stderr, plugin.stderr
    assert len(plugin.stderr.splitlines()) == 1, plugin.stderr
    assert kubectl_runs == plugin_runs == 0  # the exec plugin never ran


def _served_alike(theirs: tuple, mine: tuple) -> None:
    (kubectl, kubectl_runs), (plugin, plugin_runs) = theirs, mine
    assert kubectl.returncode == 0, kubectl.stderr
    assert plugin.returncode in (0, 1) and "In any namespace:" in plugin.stdout, plugin.stderr  # the server answered
    assert kubectl_runs >= 1 and plugin_runs == 1


def test_kubectls_credential_plugin_policy_holds_for_the_plugin_it_dispatches(real, tmp_path):
    case = _Exec(real, tmp_path)
    deny, broken = tmp_path / "deny", tmp_path / "broken"
    deny.write_text(DENY)
    broken.write_text(HEAD.replace("v1beta1", "v1") + "credentialPluginPolicy: DenyAll\n")
    denied = f'plugin "{case.plugin}" not allowed: policy set to "DenyAll"'
    # KUBERC: DenyAll. And ~/.kube/kuberc, KUBERC=off, KUBECTL_KUBERC=false.
    _refused_alike(*case.both(KUBERC=str(deny)), denied)
    (case.home / ".kube" / "kuberc").write_text(DENY)
    _refused_alike(*case.both(), denied)
    _served_alike(*case.both(KUBERC="off"))
    _served_alike(*case.both(KUBECTL_KUBERC="false", KUBERC=str(deny)))
    (case.home / ".kube" / "kuberc").unlink()
    # --kuberc: an Allowlist without the plugin's path, then with it.
    other = tmp_path / "other"
    other.write_text(_allow("/usr/bin/true"))
    _refused_alike(*case.both(f"--kuberc={other}"),
                   f'plugin path "{case.plugin}" is not permitted by the credential plugin allowlist')
    other.write_text(_allow("/usr/bin/true", str(case.plugin)))
    _served_alike(*case.both(f"--kuberc={other}"))
    # A kuberc that does not parse: kubectl refuses it before it dispatches the plugin; run
    # directly, the plugin refuses it too.
    _refused_alike(*case.both(KUBERC=str(broken)), f"no valid preferences found in {broken}")
    direct, runs = case.run([PLUGIN, "check", "-A"], case.env(KUBERC=str(broken)))
    assert direct.returncode == 3 and f"no valid preferences found in {broken}" in direct.stderr and runs == 0
    # A fleet: refused on each context, the plugin never run.
    fleet, runs = case.run([kubectl_path(), "kvdtype", "check", "-A", "--all-contexts"], case.env(KUBERC=str(deny)))
    assert fleet.returncode == 3 and fleet.stdout.count(denied) == 2 and runs == 0, fleet.stdout  # its table


def test_the_policy_holds_on_the_clients_transport_too(real, tmp_path):
    """A kubeconfig the direct transport leaves to the client (a proxy variable set, loopback excepted
    by NO_PROXY, which kubectl honours): refused, and allowed, as kubectl does."""
    case = _Exec(real, tmp_path)
    deny = tmp_path / "deny"
    deny.write_text(DENY)
    proxied = {"HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"}
    _refused_alike(*case.both(KUBERC=str(deny), **proxied), f'plugin "{case.plugin}" not allowed')
    allow = tmp_path / "allow"
    allow.write_text(_allow(str(case.plugin)))
    _served_alike(*case.both(KUBERC=str(allow), **proxied))

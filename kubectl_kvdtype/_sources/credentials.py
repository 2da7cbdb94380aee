"""Exec credential plugins (``users[].user.exec``), run by the plugin's own code as client-go runs
them, bounded in time and output, failing in one sentence; for either transport.

client-go's protocol (``k8s.io/client-go/plugin/pkg/client/auth/exec``), as kubectl 1.37 runs it:

- ``apiVersion`` ``client.authentication.k8s.io/v1`` or ``v1beta1`` (anything else refused, in
  kubectl's words); v1 requires ``interactiveMode`` (``Never``, ``IfAvailable``, ``Always``;
  v1beta1's default ``IfAvailable``): the plugin is interactive when the mode allows it and standard
  input is a terminal, and then gets that terminal (stdin, stderr); ``Always`` without one is refused;
- the command (a relative path against its kubeconfig's directory) must pass kuberc's credential
  plugin policy (``_sources.kuberc``) first, every time it runs; ``args``; ``env`` added to the
  plugin's environment, with ``KUBERNETES_EXEC_INFO`` (an ExecCredential whose spec says whether it
  is interactive and, with ``provideClusterInfo``, the cluster); a command that is not found is said
  with its ``installHint``;
- its answer: an ExecCredential of the same apiVersion whose status holds a token, or a client
  certificate and key, or both; a token whose ``expirationTimestamp`` is near (``EXPIRY_SKEW``) is run
  for again before a request.

Beyond client-go: the plugin is cut (with whatever it started) when the request timeout runs out,
unless a person may be answering it (a terminal is there: a browser or device-code login takes its
time), and what it prints is read up to ``MAX_PLUGIN_OUTPUT``, so that a plugin gone wrong cannot
hold a run forever or fill its memory.
"""

from __future__ import annotations

import datetime
import errno
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import nullcontext
from typing import Any, Optional

from kubectl_kvdtype._kits import files as _files
from kubectl_kvdtype._kits.display import shown
from kubectl_kvdtype._kits.secrets import HEADER_REFUSAL, breaks_header
from kubectl_kvdtype._kits.status import KvdtypeError, RequestTimeout
from kubectl_kvdtype._sources import kuberc as _kuberc

#: The ExecCredential versions client-go speaks (v1alpha1 was dropped in 1.24).
API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
NEVER, IF_AVAILABLE, ALWAYS = "Never", "IfAvailable", "Always"
#: The most read of what an exec plugin prints, its stdout and stderr together: its ExecCredential
#: is a token, or a certificate and key, a few kB.
MAX_PLUGIN_OUTPUT = 1 << 20
#: How long before its ``expirationTimestamp`` a plugin's token is renewed: the kubernetes Python
#: client's loader's (``kube_config.EXPIRY_SKEW_PREVENTION_DELAY``; a test holds the two equal), so
#: that a token is never sent in its last minutes.
EXPIRY_SKEW = datetime.timedelta(minutes=5)
#: The cluster's settings client-go hands a plugin with ``provideClusterInfo`` (and its
#: ``client.authentication.k8s.io/exec`` extension, as ``config``).
_CLUSTER_INFO = ("server", "tls-server-name", "insecure-skip-tls-verify", "certificate-authority-data",
                 "proxy-url", "disable-compression")
_EXEC_EXTENSION = "client.authentication.k8s.io/exec"
_INSTALL_HINT = "It looks like you are trying to use a client-go credential plugin that is not installed."

#: An interactive plugin (one a person may be answering) runs alone, even while a fleet's contexts connect.
_INTERACTIVE_PLUGIN = threading.Lock()


class ExecPlugin:
    """A kubeconfig user's exec setting, checked as kubectl checks it before any request."""

    def __init__(self, config: Any, cluster: dict, directory: str, user_name: str,
                 preferences: Optional[_kuberc.Preferences]) -> None:
        if not isinstance(config, dict):
            raise KvdtypeError(f'the exec setting of the kubeconfig user "{user_name}" is not a mapping')
        self.api_version = config.get("apiVersion")
        if self.api_version not in API_VERSIONS:
            raise KvdtypeError(f'exec plugin: invalid apiVersion "{shown(str(self.api_version or ""))}"')
        mode = config.get("interactiveMode") or ("" if self.api_version == API_VERSIONS[0] else IF_AVAILABLE)
        if not mode:
            raise KvdtypeError(f"interactiveMode must be specified for {user_name} to use exec authentication plugin")
        if mode not in (NEVER, IF_AVAILABLE, ALWAYS):
            raise KvdtypeError(f'invalid interactiveMode for {user_name}: "{shown(str(mode))}"')
        self.mode = mode
        command, args, env = config.get("command"), config.get("args") or [], config.get("env") or []
        if not (isinstance(command, str) and command and isinstance(args, list)
                and all(isinstance(a, str) for a in args) and isinstance(env, list)
                and all(isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("value"), str)
                        for e in env)):
            raise KvdtypeError(f'the exec setting of the kubeconfig user "{user_name}" is not valid: it needs a '
                               "command, and args and env (name and value) as strings")
        self.command, self.args = command, list(args)
        self.env = {item["name"]: item["value"] for item in env}
        self.hint = config.get("installHint") if isinstance(config.get("installHint"), str) else ""
        self.cluster = _cluster_info(cluster) if config.get("provideClusterInfo") is True else None
        self.directory = directory
        self.preferences = preferences

    def named(self, command: Optional[str] = None) -> str:
        """How every sentence about the plugin names it."""
        return f"the exec credential plugin {shown(command or self.command)} of the kubeconfig user"

    def run(self, timeout: Optional[float]) -> dict:
        """The plugin run once (kuberc's policy checked first), for at most ``timeout`` seconds
        unless a person may be answering it; its ExecCredential's status, checked."""
        policy = self.preferences.policy() if self.preferences else _kuberc.Policy()
        path = policy.check(self.command, self.directory)  # a relative path made absolute: it runs in our directory
        interactive = self._interactive()
        spec: dict = {} if self.cluster is None else {"cluster": self.cluster}
        spec["interactive"] = interactive
        info = {"kind": "ExecCredential", "apiVersion": self.api_version, "spec": spec}  # as client-go encodes it
        environ = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info, separators=(",", ":")) + "\n"}
        attended = interactive or _a_terminal(sys.stdout)
        with _INTERACTIVE_PLUGIN if attended else nullcontext():
            stdout, stderr, code = self._started(path, environ, interactive, None if attended else timeout)
        if code != 0:
            lines = [line.strip() for line in stderr.splitlines() if line.strip()]
            raise self._failed(f"exec: process returned {code}" + (f". {lines[-1]}" if lines else ""))
        return self._status(stdout)

    def _interactive(self) -> bool:
        """client-go's: never with ``Never``; else when standard input is a terminal, which ``Always`` requires."""
        if self.mode == NEVER:
            return False
        terminal = _a_terminal(sys.stdin)
        if self.mode == ALWAYS and not terminal:
            raise self._failed("exec plugin cannot support interactive mode: standard input is not a terminal")
        return terminal

    def _started(self, path: str, environ: dict, interactive: bool,
                 timeout: Optional[float]) -> tuple[str, str, int]:
        """(stdout, stderr, exit code) of one run; a plugin not interactive in a session of its own,
        so that it is killed with its children."""
        try:
            process = subprocess.Popen(
                [path, *self.args], env=environ, stdout=subprocess.PIPE,
                stdin=None if interactive else subprocess.DEVNULL,
                stderr=None if interactive else subprocess.PIPE, start_new_session=not interactive)
        except OSError as error:
            why = f"{error.strerror or error}"
            if error.errno == errno.ENOENT and "/" not in path:  # not found on PATH: client-go's words, its hint
                why = f"executable {path} not found"
                if self.hint:
                    why += f" ({_INSTALL_HINT} {' '.join(self.hint.split())})"
            raise KvdtypeError(f"cannot run {self.named(path)}: {shown(why)}") from None
        pipes = [stream for stream in (process.stdout, process.stderr) if stream is not None]
        deadline = None if not timeout else time.monotonic() + timeout
        try:
            printed = _files.read_pipes([stream.fileno() for stream in pipes], MAX_PLUGIN_OUTPUT, deadline)
            code = process.wait(None if deadline is None else max(deadline - time.monotonic(), 0))
        except (_files.PipeTimeout, subprocess.TimeoutExpired):
            _kill_all(process)
            raise RequestTimeout(f"{self.named()} did not return within {timeout:g}s (--request-timeout; 0 waits "
                                 "without limit)") from None
        except _files.PipeOverflow:
            _kill_all(process)
            raise KvdtypeError(f"{self.named()} printed more than {MAX_PLUGIN_OUTPUT >> 20} MiB, the most read of an "
                               "exec plugin (an ExecCredential is a few kB)") from None
        finally:
            for stream in pipes:
                stream.close()
        texts = [data.decode("utf-8", "replace") for data in printed]
        return texts[0], texts[1] if len(texts) > 1 else "", code

    def _status(self, stdout: str) -> dict:
        """The ExecCredential's status, refused in client-go's words where client-go refuses it."""
        try:
            answer = json.loads(stdout)
        except ValueError as error:
            raise self._failed(f"decoding stdout: {error}") from None
        if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
            kind = answer.get("kind") if isinstance(answer, dict) else None
            raise self._failed(f"decoding stdout: its kind is {shown(json.dumps(kind))}, not ExecCredential")
        if answer.get("apiVersion") != self.api_version:
            raise self._failed(f"exec plugin is configured to use API version {self.api_version}, plugin returned "
                               f"version {shown(str(answer.get('apiVersion')))}")
        status = answer.get("status")
        if not isinstance(status, dict):
            raise self._failed("exec plugin didn't return a status field")
        certificate = [status.get(key) for key in ("clientCertificateData", "clientKeyData")]
        if any(certificate) and not all(certificate):
            raise self._failed("exec plugin returned only certificate or key, not both")
        if not status.get("token") and not all(certificate):
            raise self._failed("its ExecCredential status holds neither a token nor a client certificate and key")
        return status

    def _failed(self, why: str) -> KvdtypeError:
        return KvdtypeError(f"{self.named()} failed: {why}")


def _a_terminal(stream: Any) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (ValueError, OSError):  # closed
        return False


#: How long a killed plugin's session may take to be gone (SIGKILL is delivered when each process
#: next runs: on a loaded machine, after this process would otherwise have ended).
_KILL_GRACE = 1.0


def _kill_all(process: subprocess.Popen) -> None:
    """The plugin and whatever it started (its session), gone before the run goes on: a child that
    got away cannot keep this process waiting for the pipes' end, nor outlive the run."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    process.wait()
    until = time.monotonic() + _KILL_GRACE
    while time.monotonic() < until:
        try:
            os.killpg(process.pid, 0)  # anyone of the session left (a zombie not yet reaped counts)
        except OSError:
            return
        time.sleep(0.01)


def _cluster_info(cluster: dict) -> dict:
    """The cluster as client-go tells a plugin of it (``provideClusterInfo``): its connection
    settings, the CA as data (a CA file read, bounded), and its exec extension as ``config``."""
    info = {key: cluster[key] for key in _CLUSTER_INFO if key in cluster}
    path = cluster.get("certificate-authority")
    if isinstance(path, str) and path and "certificate-authority-data" not in info:
        import base64

        try:
            info["certificate-authority-data"] = base64.b64encode(
                _files.read_bytes(path, _CA_RULE, wait=1.0)).decode("ascii")
        except OSError:
            pass  # refused already, in kubectl's words, when the kubeconfig was resolved
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == _EXEC_EXTENSION:
            info["config"] = extension.get("extension")
    return info


#: The cluster's CA file, read for a plugin told of the cluster (a CA is a few kB).
_CA_RULE = _files.FileRule("a certificate file", 8 << 20, "the most read of one certificate file")

_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)\Z")


def parse_rfc3339(text: Any) -> Optional[datetime.datetime]:
    """An ``expirationTimestamp`` as an aware datetime; None for anything that is not RFC 3339."""
    match = _RFC3339.match(text) if isinstance(text, str) else None
    if match is None:
        return None
    *parts, fraction, zone = match.groups()
    offset = datetime.timedelta(0)
    if zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        offset = sign * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    try:
        year, month, day, hour, minute, second = (int(part) for part in parts)
        moment = datetime.datetime(year, month, day, hour, minute, second, tzinfo=datetime.timezone(offset))
    except ValueError:
        return None
    return moment + datetime.timedelta(seconds=float(fraction or 0))


class ExecCredential:
    """The credential an exec plugin gives one transport: run when made, run again when due.

    ``certificate`` is the (certificate, key) PEM pair the plugin gave, if it did."""

    def __init__(self, plugin: ExecPlugin, timeout: Optional[float]) -> None:
        self._plugin = plugin
        self._timeout = timeout
        self._lock = threading.Lock()
        self._failed: Optional[KvdtypeError] = None
        self._token: Optional[str] = None
        self._expiry: Optional[datetime.datetime] = None
        self.certificate: Optional[tuple[bytes, bytes]] = None
        status = self._run()
        if status.get("clientCertificateData") and status.get("clientKeyData"):
            self.certificate = (str(status["clientCertificateData"]).encode(), str(status["clientKeyData"]).encode())

    def _run(self) -> dict:
        status = self._plugin.run(self._timeout)
        self._token = f"Bearer {status['token']}" if status.get("token") else None
        self._expiry = parse_rfc3339(status.get("expirationTimestamp"))
        return status

    def certificate_refused(self, error: Exception) -> KvdtypeError:
        """The sentence for the client certificate the plugin returned when ``ssl`` does not load it."""
        lines = [line for line in str(error).splitlines() if line.strip()]
        return KvdtypeError(f"cannot use the client certificate {self._plugin.named()} returned: "
                            f"{lines[-1].strip() if lines else type(error).__name__}")

    def authorization(self) -> Optional[str]:
        """The token for the next request, the plugin run again first when it is due; a plugin that
        failed once fails every request after it, without running again."""
        with self._lock:
            if self._failed is not None:
                raise self._failed
            if self._expiry is not None and self._expiry - EXPIRY_SKEW <= datetime.datetime.now(datetime.timezone.utc):
                try:
                    self._run()
                except KvdtypeError as failure:
                    self._failed = failure
                    raise
            return checked_credential(self._token)


def checked_credential(value: Optional[str]) -> Optional[str]:
    """A token an exec plugin or an auth provider returned, refused (never echoed) when no HTTP
    header may carry it."""
    if breaks_header(value):
        raise KvdtypeError("the credential the kubeconfig user's exec plugin or auth provider returned holds "
                           f"{HEADER_REFUSAL} (it is not shown)")
    return value or None

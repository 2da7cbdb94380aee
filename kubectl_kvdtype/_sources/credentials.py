"""Exec credential plugins, bounded by the request timeout and failing in one sentence."""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import signal
import subprocess
import sys
import threading
import time
import types
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from kubectl_kvdtype._kits import files as _files
from kubectl_kvdtype._kits.secrets import HEADER_REFUSAL, breaks_header
from kubectl_kvdtype._kits.status import (
    KvdtypeError,
    RequestTimeout,
)
from kubectl_kvdtype._sources import client_packages as _client_packages
from kubectl_kvdtype._sources import kuberc as _kuberc
from kubectl_kvdtype._sources.kubeconfig import DirectSettings
from kubectl_kvdtype._sources.transport import first_line, seconds

# The client's exec protocol and RFC 3339 reader alone: its packages entered first, so that these
# imports run none of the client's __init__ (no kubeconfig loader, urllib3 or PyYAML).
_client_packages.enter()
import kubernetes.config.exec_provider as _client_exec  # noqa: E402
from kubernetes.config.dateutil import parse_rfc3339  # noqa: E402

# --- Exec credential plugins, bounded ------------------------------------------------------
#
# The client runs a kubeconfig user's exec plugin (``users[].user.exec``) as
# ``subprocess.Popen(...).communicate()``, with no timeout, and logs any failure of it (on
# stderr, through the root logger) and goes on without credentials. So a plugin that never
# returns held a run forever whatever --request-timeout said, and a failing one added a log line
# before a 401. While a ClusterSource loads or refreshes credentials (``_exec_bounded``), the
# client's exec module gets a Popen whose ``communicate`` has the request timeout (the plugin and
# its children are killed when it runs out), and a failure ends the run in one sentence naming
# the command, as kubectl's does. What the plugin prints is read up to ``MAX_PLUGIN_OUTPUT``, even
# with no timeout: the client reads it whole, and a plugin gone wrong (one that prints without
# end) would fill memory. A plugin the client hands the terminal to (stdout is a terminal: it may
# be waiting for a person to log in) is not cut short. Outside ``_exec_bounded`` the client
# behaves as its own.

_EXEC = threading.local()  # .active, .timeout: set by _exec_bounded, per thread (parallel LISTs refresh too)


class _CredentialPluginFailed(BaseException):
    """Carries ``error`` out through the client, whose exec loader catches (and logs) every ``Exception``."""

    def __init__(self, error: KvdtypeError) -> None:
        super().__init__(error.message)
        self.error = error


def _plugin_name(args: Any) -> str:
    return str(args[0] if isinstance(args, (list, tuple)) and args else args)


def _plugin(args: Any) -> str:
    """How every sentence about an exec plugin names it."""
    return f"the exec credential plugin {_plugin_name(args)} of the kubeconfig user"


class _BoundedPopen(subprocess.Popen):
    """The client's exec plugin process: in its own session when it is not handed the terminal
    (so that it can be killed with its children), and ``communicate`` bounded by the timeout."""

    def __init__(self, args: Any, **kwargs: Any) -> None:
        self._bounded = bool(getattr(_EXEC, "active", False)) and kwargs.get("stdin") is None  # not interactive
        if self._bounded:
            kwargs["start_new_session"] = True
        try:
            super().__init__(args, **kwargs)
        except OSError as error:
            if not getattr(_EXEC, "active", False):
                raise
            raise _CredentialPluginFailed(KvdtypeError(
                f"cannot run {_plugin(args)}: "
                f"{error.strerror or error}")) from None

    def communicate(self, input: Any = None, timeout: Optional[float] = None) -> Any:  # noqa: A002 - Popen's name
        if not self._bounded or input is not None or timeout is not None:
            return super().communicate(input, timeout)
        wait = getattr(_EXEC, "timeout", None) or None
        deadline = None if wait is None else time.monotonic() + wait
        outputs = (self.stdout, self.stderr)
        try:
            printed = iter(_files.read_pipes([stream.fileno() for stream in outputs if stream is not None],
                                             MAX_PLUGIN_OUTPUT, deadline))
            self.wait(None if deadline is None else max(deadline - time.monotonic(), 0))
        except (_files.PipeTimeout, subprocess.TimeoutExpired):
            self._kill_all()
            raise _CredentialPluginFailed(RequestTimeout(
                f"{_plugin(self.args)} did not return within "
                f"{seconds(wait or 0)} (--request-timeout; 0 waits without limit)")) from None
        except _files.PipeOverflow:
            self._kill_all()
            raise _CredentialPluginFailed(KvdtypeError(
                f"{_plugin(self.args)} printed more than {MAX_PLUGIN_OUTPUT >> 20} MiB, the most read of "
                "an exec plugin (an ExecCredential is a few kB)")) from None
        return tuple(None if stream is None else _text(stream, next(printed)) for stream in outputs)

    def _kill_all(self) -> None:
        """The plugin and whatever it started (its session), then the pipes: a child that got away
        cannot keep this process waiting for their end."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (OSError, AttributeError):
            self.kill()
        self.wait()
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()


#: The most read of what an exec plugin prints, its stdout and stderr together: its ExecCredential
#: is a token, or a certificate and key, a few kB.
MAX_PLUGIN_OUTPUT = 1 << 20


def _text(stream: Any, data: bytes) -> Any:
    """What ``communicate`` gives for a pipe it read: ``data`` as the text a text-mode pipe reads
    (its encoding, its errors, universal newlines), or as it is; the pipe closed, as it would."""
    stream.close()
    if not isinstance(stream, io.TextIOWrapper):
        return data
    return data.decode(stream.encoding, stream.errors or "strict").replace("\r\n", "\n").replace("\r", "\n")


#: An exec plugin the client hands the terminal to (its stdout is one: it may ask a person to log in,
#: in a browser or with a device code) runs alone, even while several contexts of a fleet connect.
_INTERACTIVE_PLUGIN = threading.Lock()


class ExecProvider(_client_exec.ExecProvider):
    """The client's exec protocol, with its failures said in one sentence (inside ``_exec_bounded``)."""

    def run(self, previous_response: Any = None) -> Any:
        preferences = getattr(_EXEC, "preferences", None)
        if preferences is not None:  # kuberc's credential plugin policy, before the plugin starts (every time)
            try:
                self.args[0] = preferences.policy().check(str(self.args[0]), self.cwd or os.getcwd())
            except KvdtypeError as refusal:
                raise _CredentialPluginFailed(refusal) from None
        interactive = hasattr(sys.stdout, "isatty") and sys.stdout.isatty()  # the client's own test
        try:
            with _INTERACTIVE_PLUGIN if interactive else contextlib.nullcontext():
                status = super().run(previous_response)
        except Exception as error:  # noqa: BLE001 - ConfigException, bad JSON: anything the protocol meets
            if not getattr(_EXEC, "active", False):
                raise
            raise self._failed(first_line(error)) from None
        usable = isinstance(status, dict) and (
            "token" in status or {"clientCertificateData", "clientKeyData"} <= set(status))
        if getattr(_EXEC, "active", False) and not usable:  # the client would log it and go on without
            raise self._failed("its ExecCredential status holds neither a token nor a client certificate and key")
        return status

    def _failed(self, why: str) -> _CredentialPluginFailed:
        return _CredentialPluginFailed(KvdtypeError(
            f"{_plugin(self.args)} failed: {why}"))


_client_exec.subprocess = types.SimpleNamespace(Popen=_BoundedPopen, PIPE=subprocess.PIPE)  # type: ignore[assignment]


@contextmanager
def _exec_bounded(timeout: Optional[float], preferences: Optional[_kuberc.Preferences] = None) -> Iterator[None]:
    """Credentials loaded or refreshed inside run an exec plugin for at most ``timeout`` seconds
    (None or 0: no limit), once ``preferences``' credential plugin policy allows it; a plugin that
    fails, runs out or is not allowed raises its ``KvdtypeError``."""
    previous = (getattr(_EXEC, "active", False), getattr(_EXEC, "timeout", None),
                getattr(_EXEC, "preferences", None))
    _EXEC.active, _EXEC.timeout, _EXEC.preferences = True, timeout, preferences
    try:
        yield
    except _CredentialPluginFailed as failure:
        raise failure.error from None
    finally:
        _EXEC.active, _EXEC.timeout, _EXEC.preferences = previous


# --- Exec credential plugins on the direct transport ---------------------------------------
#
# A kubeconfig user that is an exec plugin and nothing else (``kubeconfig.direct_settings``) is
# served by the direct transport: no kubeconfig loader, Configuration or urllib3 is imported. The
# plugin runs through the same provider as above (the client's protocol, bounded, its failures said
# in one sentence), with what the client's loader gives it (the user's directory, the cluster for
# ``provideClusterInfo``), and its answer is used as that loader uses it (``KubeConfigLoader``): a
# token as a bearer token, run for again before a request once it is within ``EXPIRY_SKEW`` of its
# ``expirationTimestamp``; a client certificate and key loaded once, when the transport is made.

#: How long before its ``expirationTimestamp`` a plugin's token is renewed: the client's loader's
#: (``kube_config.EXPIRY_SKEW_PREVENTION_DELAY``; a test holds the two equal).
EXPIRY_SKEW = datetime.timedelta(minutes=5)


class _Node(dict):
    """A kubeconfig node as the client's provider reads one (its loader's ``ConfigNode``)."""

    def safe_get(self, key: str) -> Any:
        return self.get(key)

    @property
    def value(self) -> dict:
        return dict(self)


class ExecCredential:
    """The credential an exec plugin gives one transport: run when made, run again when due.

    ``certificate`` is the (certificate, key) PEM pair the plugin gave instead of a token, if it did."""

    def __init__(self, settings: DirectSettings, timeout: Optional[float]) -> None:
        self._provider = ExecProvider(_Node(settings.exec_plugin or {}), settings.exec_dir or None,
                                      _Node(settings.exec_cluster or {}))
        self._timeout = timeout
        self._preferences = settings.exec_preferences
        self._lock = threading.Lock()
        self._failed: Optional[KvdtypeError] = None
        self._token: Optional[str] = None
        self._expiry: Optional[datetime.datetime] = None
        self.certificate: Optional[tuple[bytes, bytes]] = None
        status = self._run()
        if "token" not in status:
            self.certificate = (str(status["clientCertificateData"]).encode(), str(status["clientKeyData"]).encode())

    def _run(self) -> dict:
        """The plugin run once more; its token and expiry taken as the client's loader takes them."""
        with _exec_bounded(self._timeout, self._preferences):
            status: dict = self._provider.run()
        if "token" in status:
            self._token = f"Bearer {status['token']}"
        try:
            self._expiry = parse_rfc3339(status["expirationTimestamp"]) if "expirationTimestamp" in status else None
        except (ValueError, TypeError, AttributeError):  # the loader logs it and goes on without an expiry
            self._expiry = None
        return status

    def certificate_refused(self, error: Exception) -> KvdtypeError:
        """The sentence for the client certificate the plugin returned when ``ssl`` does not load it."""
        return KvdtypeError(f"cannot use the client certificate {_plugin(self._provider.args)} returned: "
                            f"{first_line(error)}")

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

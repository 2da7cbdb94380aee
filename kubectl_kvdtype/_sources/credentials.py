"""Exec credential plugins, bounded by the request timeout and failing in one sentence."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import types
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from kubectl_kvdtype._kits.status import (
    KvdtypeError,
    RequestTimeout,
)
from kubectl_kvdtype._sources.transport import first_line, seconds

# isort: off
# The client's modules as client.py entered them: importing it first is what keeps these from
# running the client's whole __init__ (so the order is not isort's).
from kubectl_kvdtype._sources import client as _client  # noqa: F401
import kubernetes.config.exec_provider as _client_exec
import kubernetes.config.kube_config as _client_kube_config
# isort: on

# --- Exec credential plugins, bounded ------------------------------------------------------
#
# The client runs a kubeconfig user's exec plugin (``users[].user.exec``) as
# ``subprocess.Popen(...).communicate()``, with no timeout, and logs any failure of it (on
# stderr, through the root logger) and goes on without credentials. So a plugin that never
# returns held a run forever whatever --request-timeout said, and a failing one added a log line
# before a 401. While a ClusterSource loads or refreshes credentials (``_exec_bounded``), the
# client's exec module gets a Popen whose ``communicate`` has the request timeout (the plugin and
# its children are killed when it runs out), and a failure ends the run in one sentence naming
# the command, as kubectl's does. A plugin the client hands the terminal to (stdout is a
# terminal: it may be waiting for a person to log in) is not cut short. Outside ``_exec_bounded``
# the client behaves as its own.

_EXEC = threading.local()  # .active, .timeout: set by _exec_bounded, per thread (parallel LISTs refresh too)


class _CredentialPluginFailed(BaseException):
    """Carries ``error`` out through the client, whose exec loader catches (and logs) every ``Exception``."""

    def __init__(self, error: KvdtypeError) -> None:
        super().__init__(error.message)
        self.error = error


def _plugin_name(args: Any) -> str:
    return str(args[0] if isinstance(args, (list, tuple)) and args else args)


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
                f"cannot run the exec credential plugin {_plugin_name(args)} of the kubeconfig user: "
                f"{error.strerror or error}")) from None

    def communicate(self, input: Any = None, timeout: Optional[float] = None) -> Any:  # noqa: A002 - Popen's name
        if not self._bounded or timeout is not None or not getattr(_EXEC, "timeout", None):
            return super().communicate(input, timeout)
        try:
            return super().communicate(input, _EXEC.timeout)
        except subprocess.TimeoutExpired:
            self._kill_all()
            raise _CredentialPluginFailed(RequestTimeout(
                f"the exec credential plugin {_plugin_name(self.args)} of the kubeconfig user did not return within "
                f"{seconds(_EXEC.timeout)} (--request-timeout; 0 waits without limit)")) from None

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


#: An exec plugin the client hands the terminal to (its stdout is one: it may ask a person to log in,
#: in a browser or with a device code) runs alone, even while several contexts of a fleet connect.
_INTERACTIVE_PLUGIN = threading.Lock()


class _ExecProvider(_client_exec.ExecProvider):
    """The client's exec protocol, with its failures said in one sentence (inside ``_exec_bounded``)."""

    def run(self, previous_response: Any = None) -> Any:
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
            f"the exec credential plugin {_plugin_name(self.args)} of the kubeconfig user failed: {why}"))


_client_exec.subprocess = types.SimpleNamespace(Popen=_BoundedPopen, PIPE=subprocess.PIPE)  # type: ignore[assignment]
_client_kube_config.ExecProvider = _ExecProvider  # type: ignore[misc]


@contextmanager
def _exec_bounded(timeout: Optional[float]) -> Iterator[None]:
    """Credentials loaded or refreshed inside run an exec plugin for at most ``timeout`` seconds
    (None or 0: no limit); a plugin that fails or runs out raises its ``KvdtypeError``."""
    previous = getattr(_EXEC, "active", False), getattr(_EXEC, "timeout", None)
    _EXEC.active, _EXEC.timeout = True, timeout
    try:
        yield
    except _CredentialPluginFailed as failure:
        raise failure.error from None
    finally:
        _EXEC.active, _EXEC.timeout = previous

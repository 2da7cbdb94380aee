"""The client's transport: requests through the kubernetes client's REST client over urllib3, for
the kubeconfigs the direct transport does not serve (auth providers, proxies, the in-cluster
service account, an exec plugin beside another credential: ``_sources.transport`` says which)."""

from __future__ import annotations

import threading
from typing import Any, Optional

import urllib3
from urllib3 import HTTPHeaderDict

from kubectl_kvdtype._kits.secrets import without_password
from kubectl_kvdtype._kits.status import ClusterError, KvdtypeError
from kubectl_kvdtype._sources.client import ApiException, RESTClientObject
from kubectl_kvdtype._sources.credentials import checked_credential
from kubectl_kvdtype._sources.kubeconfig import Resolved, configure
from kubectl_kvdtype._sources.transport import (
    IN_FLIGHT,
    Clock,
    Connected,
    Cut,
    Exchange,
    HeaderLines,
    first_line,
    tls_failure,
    unreachable,
)
from kubectl_kvdtype._sources.wire import MAX_BODY, too_large


def open_client(resolved: Resolved) -> Connected:
    """The client configured for ``resolved`` (credentials loaded: an exec plugin runs here)."""
    configuration, namespace, description, impersonation = configure(resolved)
    return Connected(ClientTransport(configuration, resolved.options.request_timeout), namespace, description,
                     impersonation)


class ClientTransport:
    """Requests through the client's REST client; its credentials refreshed as the client refreshes them."""

    def __init__(self, configuration: Any, timeout: Optional[float]) -> None:
        self.host: str = configuration.host
        self._configuration = configuration
        self._rest = RESTClientObject(configuration)
        if not configuration.verify_ssl:
            # Verification off was asked for (insecure-skip-tls-verify): kubectl says nothing of
            # it, urllib3 two lines of stderr at every request.
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        # Pools that tell the request's clock which connection they gave it (transport.Clock).
        self._rest.pool_manager.pool_classes_by_scheme = {"http": _WatchedPool, "https": _WatchedHTTPSPool}
        self._shown_host = without_password(self.host)
        self._timeout = timeout
        # One credential refresh at a time: parallel LISTs would each run an expired token's exec
        # plugin; and once it has failed, the others say so rather than run it again.
        self._credentials = threading.Lock()
        self._credentials_failed: Optional[KvdtypeError] = None

    def authorization(self) -> Optional[str]:
        # auth_settings() runs the client's refresh hook, which re-runs exec plugins when due.
        with self._credentials:
            if self._credentials_failed is not None:
                raise self._credentials_failed
            try:
                # An exec plugin's token is renewed by its hook (``kubeconfig.configure``), bounded.
                settings = self._configuration.auth_settings().get("BearerToken")
            except KvdtypeError as failure:
                self._credentials_failed = failure
                raise
        return checked_credential(settings.get("value") if settings else None)

    def exchange(self, method: str, path: str, headers: HeaderLines, body: Any, clock: Clock) -> Exchange:
        lines = HTTPHeaderDict()  # keeps a repeated name (Impersonate-Group) as separate header lines
        for name, value in headers:
            lines.add(name, value)
        response = self._send(method, self.host + path, lines, body, clock)
        data = self._read(response, clock)
        return Exchange(response.status, response.headers.get("Retry-After"), data)

    def _send(self, method: str, url: str, headers: HTTPHeaderDict, body: Any, clock: Clock) -> Any:
        try:
            return self._rest.request(method, url, headers=headers, body=body, _request_timeout=clock.remaining())
        except Cut:
            raise clock.timed_out() from None
        except ApiException as error:  # the client turns TLS failures into status 0
            clock.check_timeout(False)
            raise ClusterError(tls_failure(self._shown_host, first_line(error.reason))) from None
        except urllib3.exceptions.MaxRetryError as error:
            clock.check_timeout(_timed_out(error.reason))
            raise ClusterError(_connection_message(self._shown_host, error.reason)) from None
        except urllib3.exceptions.HTTPError as error:
            clock.check_timeout(_timed_out(error))
            raise ClusterError(_connection_message(self._shown_host, error)) from None

    def _read(self, response: Any, clock: Clock) -> bytes:
        """The body (the client leaves it unread), no more of it than ``wire.MAX_BODY``: reading
        it can time out or break off too."""
        try:
            data: bytes = response.response.read(MAX_BODY + 1)  # urllib3's own response, which takes a bound
        except (urllib3.exceptions.HTTPError, OSError) as error:
            clock.check_timeout(_timed_out(getattr(error, "reason", None) or error))
            raise ClusterError(_connection_message(self._shown_host, error)) from None
        if len(data) > MAX_BODY:
            raise ClusterError(unreachable(self._shown_host, too_large()))
        return data


class _WatchedPool(urllib3.HTTPConnectionPool):
    def _get_conn(self, timeout: Optional[float] = None) -> Any:
        connection = super()._get_conn(timeout)
        clock = getattr(IN_FLIGHT, "clock", None)
        if clock is not None:
            clock.attach(connection)
        return connection


class _WatchedHTTPSPool(urllib3.HTTPSConnectionPool, _WatchedPool):
    pass


def _timed_out(reason: object) -> bool:
    """Whether urllib3's failure is a timeout (a connection that could not be made is not one)."""
    return isinstance(reason, (urllib3.exceptions.TimeoutError, TimeoutError)) and \
        not isinstance(reason, urllib3.exceptions.NewConnectionError)


def _connection_message(host: str, reason: object) -> str:
    if isinstance(reason, urllib3.exceptions.SSLError):
        return tls_failure(host, str(reason))
    if isinstance(reason, urllib3.exceptions.NewConnectionError):  # a ConnectTimeoutError subclass
        cause = reason.__cause__  # the socket's own failure, said as the direct transport says it
        if isinstance(cause, OSError) and cause.strerror:
            return unreachable(host, cause.strerror)
    elif isinstance(reason, (urllib3.exceptions.ConnectTimeoutError, urllib3.exceptions.ReadTimeoutError)):
        return f"the cluster at {host} did not answer in time"
    return unreachable(host, str(reason).split(": ", 1)[-1] if reason else "")

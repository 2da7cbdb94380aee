"""The client's transport: requests through the kubernetes client's REST client over urllib3, for
the kubeconfigs the direct transport does not serve (auth providers, an exec plugin beside another
credential: ``_sources.transport`` says which), through the proxy ``_sources.proxy`` chooses."""

from __future__ import annotations

import base64
import threading
from typing import Any, Optional

import urllib3
from urllib3 import HTTPHeaderDict

from kubectl_kvdtype._kits.secrets import without_password
from kubectl_kvdtype._kits.status import ClusterError, KvdtypeError
from kubectl_kvdtype._sources import proxy as _proxy
from kubectl_kvdtype._sources.client import (
    ApiException,
    ConfigException,
    Configuration,
    RESTClientObject,
    load_kube_config_from_dict,
)
from kubectl_kvdtype._sources.credentials import ExecCredential, ExecPlugin, checked_credential
from kubectl_kvdtype._sources.kubeconfig import Headers, Resolved, context_namespace
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


def configure(resolved: Resolved) -> tuple[Any, str, str, Headers]:
    """(client configuration, the context's namespace, a description, impersonation headers) of a
    resolved kubeconfig (or of the in-cluster service account), credentials loaded (an exec plugin
    runs here); never writes a file. Imports the client stack."""
    configuration = Configuration()
    # One quiet retry of a dropped connection, never of a read that timed out: the request
    # timeout bounds the whole call (see transport.Clock), so urllib3 must not start the clock again.
    # Nor does it honour Retry-After itself (it would sleep for whatever the server asks): the
    # plugin's retries do, within what is left of the request timeout.
    configuration.retries = urllib3.Retry(total=1, read=0, respect_retry_after_header=False)
    user, credential = _exec_credential(resolved)
    config = {**resolved.config, "users": [{"name": "u", "user": user}]}
    try:
        # Its paths are absolute already (``kubeconfig.resolve``); persisting nothing: it never writes a file.
        load_kube_config_from_dict(config, context="kvdtype", client_configuration=configuration, persist_config=False)
    except (ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise KvdtypeError(f"cannot use the {resolved.what} of the kubeconfig: {first_line(error)}") from None
    # kubectl's proxy, not the one the client reads from the environment itself (ALL_PROXY too).
    chosen = _proxy.for_server(configuration.host, resolved.environ, resolved.cluster.get("proxy-url"))
    configuration.proxy, configuration.no_proxy = (chosen.whole_url if chosen else None), None
    if credential is not None and credential.authorization() is not None:
        # The plugin's token, renewed when due: through Configuration's own refresh hook.
        def renewed(configuration: Any) -> None:
            configuration.api_key["BearerToken"] = credential.authorization()

        renewed(configuration)
        configuration.refresh_api_key_hook = renewed  # type: ignore[assignment]  # typed None, takes a callable
    return configuration, context_namespace(resolved), resolved.what, resolved.impersonation


def _exec_credential(resolved: Resolved) -> tuple[dict, Any]:
    """(the user as the client's loader gets it, the exec plugin's credential or None). The client
    never runs an exec plugin: it is run here, by ``_sources.credentials`` (kuberc's policy, bounds,
    client-go's protocol), where kubectl runs it (no token, basic auth or auth provider beside it),
    and its client certificate handed to the loader as the user's own."""
    user = {key: value for key, value in resolved.user.items() if key != "exec"}
    if "exec" not in resolved.user or any(user.get(key) for key in ("token", "username", "password",
                                                                      "auth-provider")):
        return user, None
    plugin = ExecPlugin(resolved.user["exec"], resolved.cluster, resolved.user_dir, resolved.user_name,
                        resolved.preferences)
    credential = ExecCredential(plugin, resolved.options.request_timeout)
    if credential.certificate is not None:
        user.pop("client-certificate", None)
        user.pop("client-key", None)
        certificate, key = credential.certificate
        user["client-certificate-data"] = base64.b64encode(certificate).decode("ascii")
        user["client-key-data"] = base64.b64encode(key).decode("ascii")
    return user, credential


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
                # An exec plugin's token is renewed by its hook (``configure``), bounded.
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
        return Exchange(response.status, response.headers.get("Retry-After"), data, response.headers.get("Warning"))

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

"""The in-cluster configuration, read as kubectl (client-go's ``rest.InClusterConfig``) reads it, for
a run with no kubeconfig inside a Pod: the API server from ``KUBERNETES_SERVICE_HOST`` and
``KUBERNETES_SERVICE_PORT``, and the service account's ``token``, ``ca.crt`` and ``namespace`` from
its directory (``/var/run/secrets/kubernetes.io/serviceaccount``; a test points
``KUBECTL_KVDTYPE_SERVICE_ACCOUNT_DIR`` at its own). The token is read once, when the run connects.
Imports nothing of the kubernetes client: the direct transport serves it, and the client's transport
(where a proxy is set) is handed the same settings."""

from __future__ import annotations

import os
from typing import Any, Optional

from kubectl_kvdtype._kits import files as _files
from kubectl_kvdtype._kits import settings as _settings
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.status import KvdtypeError

#: The service account's token: a few kB (a projected token is a JWT).
TOKEN_RULE = _files.FileRule("a service account token file", 1 << 20, "the most read of one token file "
                             "(a token is a few kB)")
_CA_RULE = _files.FileRule("a CA certificate file", 8 << 20, "the most read of one certificate file")
_NAMESPACE_RULE = _files.FileRule("a namespace file", 4096, "the most read of the service account's namespace file")


@record_type(frozen=True)
class ServiceAccount:
    """Where the API server is and who the Pod is, as client-go finds them in a Pod."""

    server: str
    token: str
    #: The CA file, when it holds a certificate (client-go goes on with the system's otherwise).
    ca_file: Optional[str]
    namespace: str


def directory(environ: Any) -> str:
    return str(_settings.value(environ, _settings.SERVICE_ACCOUNT_DIR))


def possible(environ: Any) -> bool:
    """Whether a run with no kubeconfig is in a cluster: client-go's test (both variables set, and
    the token file there)."""
    token = os.path.join(directory(environ), "token")
    return bool(environ.get("KUBERNETES_SERVICE_HOST") and environ.get("KUBERNETES_SERVICE_PORT")) and \
        os.path.isfile(token)


def service_account(environ: Any) -> ServiceAccount:
    """The in-cluster configuration, or client-go's refusal in one sentence (exit 3)."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise KvdtypeError("unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and "
                           "KUBERNETES_SERVICE_PORT must be defined")
    folder = directory(environ)
    token_path = os.path.join(folder, "token")
    try:
        token = _files.read_text(token_path, TOKEN_RULE).strip()
    except _files.Unreadable as error:
        raise KvdtypeError(f"cannot use the in-cluster service account: {token_path} {error.predicate}") from None
    except (OSError, UnicodeDecodeError) as error:
        why = getattr(error, "strerror", None) or str(error)
        raise KvdtypeError(f"cannot use the in-cluster service account: open {token_path}: {why.lower()}") from None
    ca_path = os.path.join(folder, "ca.crt")
    try:
        ca_file: Optional[str] = ca_path if b"-----BEGIN CERTIFICATE-----" in _files.read_bytes(ca_path, _CA_RULE) \
            else None
    except OSError:
        ca_file = None
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return ServiceAccount(server, token, ca_file, _namespace(environ, os.path.join(folder, "namespace")))


def _namespace(environ: Any, path: str) -> str:
    """kubectl's in a Pod: ``POD_NAMESPACE``, else the service account's namespace file, else default."""
    if environ.get("POD_NAMESPACE"):
        return str(environ["POD_NAMESPACE"])
    try:
        return _files.read_text(path, _NAMESPACE_RULE).strip() or "default"
    except (OSError, UnicodeDecodeError):
        return "default"

"""The one chooser of a transport, on top of the connection's modules: the direct one where it
serves a kubeconfig, else the kubernetes client's (``_sources.transport`` says which serves what).

Apart from ``transport`` so that neither transport imports what imports it: the modules below it
(the flags, kubeconfig and kuberc; the credentials; each transport) are ordered by an import-linter
contract in pyproject.toml, and ``tests/test_import_circles.py`` finds any circle.
"""

from __future__ import annotations

from kubectl_kvdtype._sources.kubeconfig import Resolved, context_namespace, direct_settings
from kubectl_kvdtype._sources.transport import Connected


def connect(resolved: Resolved) -> Connected:
    """The transport for ``resolved``: the direct one where it serves, else the client's (whose
    import is paid for here, and only here)."""
    settings = direct_settings(resolved)
    if settings is not None:
        from kubectl_kvdtype._sources import direct

        transport = direct.open_direct(settings, resolved.options.request_timeout)
        if transport is not None:
            return Connected(transport, context_namespace(resolved), resolved.what, resolved.impersonation)
    from kubectl_kvdtype._sources import client_transport

    return client_transport.open_client(resolved)

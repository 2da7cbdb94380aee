"""The kubernetes client, loaded for what a run uses and nothing more.

Importing this module imports the client's kubeconfig and in-cluster loaders, ``Configuration``
and the REST client, without the generated API classes and models (see below).
"""

from __future__ import annotations

import importlib
import sys
import types
from contextlib import contextmanager
from typing import Any, Iterator

from kubectl_kvdtype._sources import client_packages as _client_packages

# --- The kubernetes client, paid for what is used ------------------------------------------
#
# The client's transport needs the kubeconfig loader (exec plugins, tokens, client certificates,
# auth providers), the in-cluster loader, ``Configuration`` and the REST client over urllib3, none
# of what the client's packages' __init__ import: the packages are entered without running it
# (``_sources.client_packages`` says what it would cost). ``kube_config`` also imports requests and
# oauthlib at module level for the OIDC refresh alone: those are imported when a refresh happens
# (``_StandIn``, ``_Deferred``). This leans on the client's file layout, hence the pinned bound in
# setup.cfg; tests/test_cli.py checks a live run leaves the models unimported, and
# tests/test_connection_flags.py runs the OIDC refresh. The loader runs an exec credential plugin
# through ``_sources.credentials``' provider (bounded, failing in one sentence), set here as the
# one it uses.

class _Deferred:
    """A name ``kube_config`` binds at import but uses only in an OIDC refresh (``OAuth2Session``,
    ``oauthlib``, ``ApiClient``): ``module``'s ``attribute``, imported when first called or read."""

    def __init__(self, module: str, attribute: str) -> None:
        self._module, self._attribute = module, attribute

    def _resolve(self) -> Any:
        module = importlib.import_module(self._module)
        try:
            return getattr(module, self._attribute)
        except AttributeError:  # a submodule its package has not imported (oauthlib.oauth2)
            return importlib.import_module(f"{self._module}.{self._attribute}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._resolve()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resolve(), name)


class _StandIn(types.ModuleType):
    """Stands in for a module while ``kube_config`` is imported: each name taken from it is a
    ``_Deferred`` of the real module's."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Deferred(self.__name__, name)


def _defer_client_init(configuration: type) -> None:
    """``Configuration`` is a name of ``kubernetes.client`` the config loaders import from it: set
    it there (the very object its __init__ would bind) so that import does not run the __init__."""
    package = sys.modules["kubernetes.client"]
    if isinstance(package, _client_packages.DeferredPackage) and "Configuration" not in vars(package):
        package.Configuration = configuration  # type: ignore[attr-defined]


@contextmanager
def _standing_in(modules: dict[str, types.ModuleType], package: types.ModuleType,
                 names: dict[str, Any]) -> Iterator[None]:
    """While ``kube_config`` is imported: ``modules`` stand in for modules not imported yet, and
    ``names`` sit on a deferred ``package``; both are gone afterwards, so later imports are real."""
    placed = [name for name in modules if name not in sys.modules]
    for name in placed:
        sys.modules[name] = modules[name]
    deferred = isinstance(package, _client_packages.DeferredPackage)
    set_here = [name for name in names if deferred and name not in vars(package)]
    for name in set_here:
        setattr(package, name, names[name])
    try:
        yield
    finally:
        for name in placed:
            sys.modules.pop(name, None)
        for name in set_here:
            vars(package).pop(name, None)


_client_packages.enter()
# Each name below is imported here for the other modules of the cluster source (``X as X``: a
# re-export, said so to ruff and mypy).
from kubernetes.client.configuration import Configuration as Configuration  # noqa: E402  (after the packages are entered)
from kubernetes.client.exceptions import ApiException as ApiException  # noqa: E402
from kubernetes.client.rest import RESTClientObject as RESTClientObject  # noqa: E402

_defer_client_init(Configuration)
with _standing_in({"requests_oauthlib": _StandIn("requests_oauthlib"), "oauthlib": _StandIn("oauthlib"),
                   "oauthlib.oauth2": _StandIn("oauthlib.oauth2")},
                  sys.modules["kubernetes.client"],
                  {"ApiClient": _Deferred("kubernetes.client.api_client", "ApiClient")}):
    from kubernetes.config.config_exception import ConfigException as ConfigException  # noqa: E402
    from kubernetes.config.kube_config import KubeConfigLoader as KubeConfigLoader  # noqa: E402



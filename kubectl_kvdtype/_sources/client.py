"""The kubernetes client, loaded for what a run uses and nothing more.

Importing this module imports the client's kubeconfig and in-cluster loaders, ``Configuration``
and the REST client, without the generated API classes and models (see below).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from contextlib import contextmanager
from typing import Any, Iterator

# --- The kubernetes client, paid for what is used ------------------------------------------
#
# ``import kubernetes`` runs the package's __init__, which imports every API class and, through
# ``kubernetes.client``'s __init__, ~800 generated pydantic models; ``kube_config`` adds requests
# and oauthlib at module level for the OIDC refresh. A run needs none of that: it needs the
# kubeconfig loader (exec plugins, tokens, client certificates, auth providers), the in-cluster
# loader, ``Configuration`` and the REST client over urllib3. So the client's packages are entered
# without running their __init__ (``_DeferredPackage``: the __init__ runs, whole, the first time
# anything asks for a name only it defines), and what ``kube_config`` imports for the OIDC refresh
# alone is imported when a refresh happens (``_StandIn``, ``_Deferred``). This leans on the client's file
# layout, hence the pinned bound in setup.cfg; tests/test_cli.py checks a live run leaves the
# models unimported, and tests/test_connection_flags.py runs the OIDC refresh.

_CLIENT_PACKAGES = ("kubernetes", "kubernetes.client", "kubernetes.config", "kubernetes.utils")
_PACKAGE_INIT = threading.RLock()  # an __init__ may use another deferred package's names


class _DeferredPackage(types.ModuleType):
    """A package of the client entered without running its __init__; any name the __init__
    defines (``kubernetes.client.CoreV1Api``) runs it first, so whoever wants the whole client
    in this process still gets it."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system's probes (__path__ is set, __all__ is not)
            raise AttributeError(name)
        with _PACKAGE_INIT:
            if isinstance(self, _DeferredPackage):
                module: types.ModuleType = self  # a plain module from here on: its __init__ runs next, once
                module.__class__ = types.ModuleType
                self.__spec__.loader.exec_module(self)  # type: ignore[union-attr]
        return getattr(self, name)


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


def _enter_client_packages() -> None:
    for name in _CLIENT_PACKAGES:
        if name in sys.modules:  # already imported (in full, or by an earlier call)
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            raise ImportError(f"the kubernetes client has no {name}")
        package = importlib.util.module_from_spec(spec)
        package.__class__ = _DeferredPackage
        sys.modules[name] = package
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, package)


def _defer_client_init(configuration: type) -> None:
    """``Configuration`` is a name of ``kubernetes.client`` the config loaders import from it: set
    it there (the very object its __init__ would bind) so that import does not run the __init__."""
    package = sys.modules["kubernetes.client"]
    if isinstance(package, _DeferredPackage) and "Configuration" not in vars(package):
        package.Configuration = configuration  # type: ignore[attr-defined]


@contextmanager
def _standing_in(modules: dict[str, types.ModuleType], package: types.ModuleType,
                 names: dict[str, Any]) -> Iterator[None]:
    """While ``kube_config`` is imported: ``modules`` stand in for modules not imported yet, and
    ``names`` sit on a deferred ``package``; both are gone afterwards, so later imports are real."""
    placed = [name for name in modules if name not in sys.modules]
    for name in placed:
        sys.modules[name] = modules[name]
    set_here = [name for name in names if isinstance(package, _DeferredPackage) and name not in vars(package)]
    for name in set_here:
        setattr(package, name, names[name])
    try:
        yield
    finally:
        for name in placed:
            sys.modules.pop(name, None)
        for name in set_here:
            vars(package).pop(name, None)


_enter_client_packages()
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
    from kubernetes.config.incluster_config import load_incluster_config as load_incluster_config  # noqa: E402
    from kubernetes.config.kube_config import KubeConfigLoader as KubeConfigLoader  # noqa: E402



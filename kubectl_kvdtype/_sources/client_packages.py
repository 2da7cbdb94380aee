"""The kubernetes client's packages entered without running their ``__init__``.

``import kubernetes`` runs the package's __init__, which imports every API class and, through
``kubernetes.client``'s __init__, ~800 generated pydantic models; ``kubernetes.config``'s imports
the kubeconfig loader, and with it urllib3 and PyYAML. A run needs at most a few of the client's
modules: ``_sources.client`` the loaders, ``Configuration`` and the REST client; ``_sources.credentials``
the exec credential protocol alone. :func:`enter` puts the client's packages in ``sys.modules``
without running their __init__ (``DeferredPackage``: the __init__ runs, whole, the first time
anything asks for a name only it defines), so that importing one module of the client imports
that module and what it imports, nothing else.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types
from typing import Any

_CLIENT_PACKAGES = ("kubernetes", "kubernetes.client", "kubernetes.config", "kubernetes.utils")
_PACKAGE_INIT = threading.RLock()  # an __init__ may use another deferred package's names


class DeferredPackage(types.ModuleType):
    """A package of the client entered without running its __init__; any name the __init__
    defines (``kubernetes.client.CoreV1Api``) runs it first, so whoever wants the whole client
    in this process still gets it."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system's probes (__path__ is set, __all__ is not)
            raise AttributeError(name)
        with _PACKAGE_INIT:
            if isinstance(self, DeferredPackage):
                module: types.ModuleType = self  # a plain module from here on: its __init__ runs next, once
                module.__class__ = types.ModuleType
                self.__spec__.loader.exec_module(self)  # type: ignore[union-attr]
        return getattr(self, name)


def enter() -> None:
    """The client's packages in ``sys.modules``, each deferred, unless one is imported already."""
    for name in _CLIENT_PACKAGES:
        if name in sys.modules:  # already imported (in full, or by an earlier call)
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            raise ImportError(f"the kubernetes client has no {name}")
        package = importlib.util.module_from_spec(spec)
        package.__class__ = DeferredPackage
        sys.modules[name] = package
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, package)

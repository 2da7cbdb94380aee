"""Memoizing a function whose arguments come from someone else's objects.

A cluster repeats a few engines, versions, dtypes and argvs across thousands of objects, so the
engine judgements are memoized (``functools.lru_cache``). A hand-written manifest may give a
version or an argv entry as a list or a mapping, which a cache cannot key: such a call is
computed and not remembered, never an error. One wrapper says so for every memoized judgement.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar, cast

_Function = TypeVar("_Function", bound=Callable[..., Any])


def memoized(maxsize: int) -> Callable[[_Function], _Function]:
    """``functools.lru_cache(maxsize)``, except that a call with an argument that cannot be hashed
    is computed uncached. The result keeps the cache's ``cache_info`` and ``cache_clear``."""
    def decorate(function: _Function) -> _Function:
        cached = functools.lru_cache(maxsize=maxsize)(function)

        @functools.wraps(function)
        def call(*args: Any) -> Any:
            try:
                return cached(*args)
            except TypeError:  # an unhashable argument (a list or mapping from a hand-written manifest)
                return function(*args)
        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        return cast(_Function, call)
    return decorate

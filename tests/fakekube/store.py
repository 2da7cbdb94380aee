"""The state: objects per resource type, resourceVersions, finalizers, a lagging Setting.

``StoreMixin`` is the part of ``FakeKube`` that owns the stored objects; tests call its public
methods directly (``add``, ``get``, ``objects``, ``update``, ``remove``, ``finalizer``) and the
verbs (``verbs.py``) call its internals.  All of it runs under ``FakeKube._lock``.
"""
from __future__ import annotations

import bisect
import copy
import datetime
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from .resources import JSON, Key, ResourceType, find_type
from .wire import _dumps, _spec_part, _split_api_version, merge_patch

if TYPE_CHECKING:
    from . import FakeKube


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Store:
    """Objects of one (group, resource), keyed by (namespace, name), with a sorted index."""

    def __init__(self) -> None:
        self.objs: dict[Key, JSON] = {}
        self.keys: list[Key] = []
        self.cache: dict[Key, dict[tuple[str, bool], str]] = {}

    def put(self, key: Key, obj: JSON) -> None:
        if key not in self.objs:
            bisect.insort(self.keys, key)
        self.objs[key] = obj
        self.cache.pop(key, None)

    def drop(self, key: Key) -> Optional[JSON]:
        obj = self.objs.pop(key, None)
        if obj is not None:
            del self.keys[bisect.bisect_left(self.keys, key)]
            self.cache.pop(key, None)
        return obj

    def span(self, namespace: str) -> tuple[int, int]:
        if not namespace:
            return 0, len(self.keys)
        lo = bisect.bisect_left(self.keys, (namespace,))
        return lo, bisect.bisect_left(self.keys, (namespace + "\x00",), lo)

    def render(self, key: Key, api_version: str, in_list: bool) -> str:
        per_key = self.cache.setdefault(key, {})
        text = per_key.get((api_version, in_list))
        if text is None:
            obj = self.objs[key]
            if in_list:
                obj = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
            elif obj.get("apiVersion") != api_version:
                obj = {**obj, "apiVersion": api_version}
            text = per_key[(api_version, in_list)] = _dumps(obj)
        return text


@dataclass
class _Finalizer:
    """An operator's finalizer on one kind: when each deleted object's turn comes (monotonic)."""
    rt: "ResourceType"
    name: str
    after: float
    held_by: Optional[Callable[..., bool]]
    due: dict = field(default_factory=dict)


class StoreMixin:
    """Objects, resourceVersions, finalizers and the Setting's status (see the package docstring)."""

    # -- test helpers: state
    def add(self, obj: JSON) -> JSON:
        """Store ``obj`` (upsert), filling uid, resourceVersion, creationTimestamp, generation."""
        with self._lock:
            rt, key = self._add(obj)
            return copy.deepcopy(self._store(rt).objs[key])

    def add_many(self, objs: Iterable[JSON]) -> None:
        with self._lock:
            for obj in objs:
                self._add(obj)

    def get(self, kind_or_resource: str, namespace: Optional[str], name: str
            ) -> Optional[JSON]:
        rt = find_type(kind_or_resource)
        with self._lock:
            self._reap()
            self._settle(rt)
            obj = self._store(rt).objs.get(self._key(rt, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def objects(self, kind_or_resource: str, namespace: Optional[str] = None) -> list[JSON]:
        rt = find_type(kind_or_resource)
        with self._lock:
            self._reap()
            self._settle(rt)
            store = self._store(rt)
            lo, hi = store.span(namespace or "")
            return [copy.deepcopy(store.objs[k]) for k in store.keys[lo:hi]]

    def update(self, kind_or_resource: str, namespace: Optional[str], name: str,
               patch: JSON) -> JSON:
        """Merge-patch a stored object directly (status too, no checks); returns a copy."""
        rt = find_type(kind_or_resource)
        with self._lock:
            key = self._key(rt, namespace, name)
            old = self._store(rt).objs.get(key)
            if old is None:
                raise KeyError(f"{rt.plural} {namespace}/{name} not found")
            new = merge_patch(old, patch)
            self._bump_generation(old, new)
            self._commit(rt, key, new)
            return copy.deepcopy(new)

    def remove(self, kind_or_resource: str, namespace: Optional[str], name: str) -> bool:
        rt = find_type(kind_or_resource)
        with self._lock:
            return self._store(rt).drop(self._key(rt, namespace, name)) is not None

    # -- finalizers and deletionTimestamp (deletion completes later)
    def finalizer(self, kind_or_resource: str, name: str = "gpustack.ai/cleanup", after: float = 0.3,
                  held_by: Optional[Callable[["FakeKube", JSON], bool]] = None) -> None:
        """Play an operator's finalizer on ``kind_or_resource`` (see the module docstring)."""
        rt = find_type(kind_or_resource)
        with self._lock:
            self._finalizers.append(_Finalizer(rt, name, after, held_by))
            store = self._store(rt)
            for key in list(store.keys):
                obj = copy.deepcopy(store.objs[key])
                if self._add_finalizers(rt, obj):
                    self._commit(rt, key, obj)

    @staticmethod
    def _terminating(obj: JSON) -> bool:
        return bool((obj.get("metadata") or {}).get("deletionTimestamp"))

    def _add_finalizers(self, rt: ResourceType, obj: JSON) -> bool:
        """The operator's finalizers on a live object of ``rt``; True if any was added."""
        meta = obj["metadata"]
        names = [f.name for f in self._finalizers if f.rt is rt and f.name not in (meta.get("finalizers") or [])]
        if names and not self._terminating(obj):
            meta["finalizers"] = list(meta.get("finalizers") or []) + names
            return True
        return False

    def _reap(self) -> None:
        """Each operator finalizer whose time has come (and that nothing holds) is removed."""
        with self._lock:
            if self._reaping:  # held_by reads the fake, which reaps: not again from inside
                return
            self._reaping = True
            try:
                self._reap_due()
            finally:
                self._reaping = False

    def _reap_due(self) -> None:
        with self._lock:
            now = time.monotonic()
            for fin in self._finalizers:
                store = self._store(fin.rt)
                for key, due in list(fin.due.items()):
                    obj = store.objs.get(key)
                    if obj is None:
                        del fin.due[key]
                        continue
                    if due > now or (fin.held_by is not None and fin.held_by(self, obj)):
                        continue
                    del fin.due[key]
                    left = [f for f in obj["metadata"].get("finalizers") or [] if f != fin.name]
                    if left:
                        new = copy.deepcopy(obj)
                        new["metadata"]["finalizers"] = left
                        self._commit(fin.rt, key, new)
                    else:
                        store.drop(key)

    # -- storage internals
    def _store(self, rt: ResourceType) -> _Store:
        return self._stores[rt.key]

    @staticmethod
    def _key(rt: ResourceType, namespace: Optional[str], name: str) -> Key:
        return ((namespace or "") if rt.namespaced else "", name)

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _commit(self, rt: ResourceType, key: Key, obj: JSON) -> None:
        obj["metadata"] = {**obj.get("metadata", {}), "resourceVersion": self._next_rv()}
        self._store(rt).put(key, obj)

    @staticmethod
    def _fill_metadata(meta: JSON, old: Optional[JSON]) -> None:
        old_meta = (old or {}).get("metadata", {})
        meta.setdefault("uid", old_meta.get("uid") or str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", old_meta.get("creationTimestamp") or _now())
        meta.setdefault("generation", old_meta.get("generation", 1))

    def _add(self, obj: JSON) -> tuple[ResourceType, Key]:
        group, _ = _split_api_version(obj.get("apiVersion", ""))
        rt = find_type(obj["kind"], group)
        obj = dict(obj)
        meta = obj["metadata"] = dict(obj.get("metadata") or {})
        if rt.namespaced:
            meta.setdefault("namespace", "default")
            self._ensure_namespace(meta["namespace"])
        else:
            meta.pop("namespace", None)
        key = self._key(rt, meta.get("namespace"), meta["name"])
        old = self._store(rt).objs.get(key)
        self._fill_metadata(meta, old)
        self._commit(rt, key, obj)
        return rt, key

    def _ensure_namespace(self, namespace: str) -> None:
        ns_rt = find_type("namespaces")
        if ("", namespace) not in self._store(ns_rt).objs:
            self._add({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": namespace}, "status": {"phase": "Active"}})

    @staticmethod
    def _bump_generation(old: JSON, new: JSON) -> None:
        gen = old.get("metadata", {}).get("generation", 1)
        if _spec_part(old) != _spec_part(new):
            gen += 1
        new["metadata"] = {**new.get("metadata", {}), "generation": gen}

    # -- Setting status follows spec
    def _settle(self, rt: ResourceType) -> None:
        if rt.plural != "settings" or not self._pending:
            return
        now, store = time.monotonic(), self._store(rt)
        for key, (due, value) in list(self._pending.items()):
            if due <= now:
                del self._pending[key]
                obj = store.objs.get(key)
                if obj is not None:
                    self._commit(rt, key, self._with_status_value(obj, value))

    @staticmethod
    def _with_status_value(obj: JSON, value: Any) -> JSON:
        return {**obj, "status": {**(obj.get("status") or {}), "value": value}}

    def _follow_spec(self, rt: ResourceType, key: Key, obj: JSON) -> JSON:
        spec = obj.get("spec")
        if rt.plural != "settings" or not isinstance(spec, dict) or "value" not in spec:
            return obj
        if self.setting_lag <= 0:
            self._pending.pop(key, None)
            return self._with_status_value(obj, spec["value"])
        self._pending[key] = (time.monotonic() + self.setting_lag, spec["value"])
        return obj

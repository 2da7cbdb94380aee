"""The REST verbs over the store: list (paging in O(page)), get, create, update, patch, delete.

Each ``_do_<verb>`` is called by the router (``server.py``) with the state lock held and answers a
``_Response`` or raises ``ApiError``.  Conflicts, dry runs, status-subresource semantics, no-op
writes and deletion with finalizers are decided here.
"""
from __future__ import annotations

import bisect
import copy
import json
import time
import uuid
from typing import Any, Optional

from .fields import manager_of, record, same_content
from .resources import (
    JSON,
    ApiError,
    ResourceType,
    _details,
    bad_request,
    conflict,
    find_type,
    not_found,
)
from .store import _now, _Store
from .wire import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_PATCH,
    Matcher,
    _dumps,
    _encode_continue,
    _Response,
    _split_api_version,
    _strip_directives,
    _Target,
    _try_json,
    field_matcher,
    json_patch,
    label_matcher,
    merge_patch,
)


class VerbsMixin:
    """What each verb does to the stored objects."""

    # -- reads
    def _do_list(self, target: _Target, query: dict[str, str], **_: Any) -> _Response:
        rt, store = target.rt, self._store(target.rt)
        labels = label_matcher(query.get("labelSelector", ""))
        fields = field_matcher(query.get("fieldSelector", ""), rt)
        limit = max(0, int(query.get("limit") or 0))
        lo, hi = store.span(target.namespace)
        list_rv, start = str(self._rv), lo
        looping, looped = self._looping_token(rt.plural, query.get("continue"))
        if query.get("continue") and not looped:
            list_rv, last = self._continue_from(query["continue"])
            start = max(lo, bisect.bisect_right(store.keys, last, lo, hi))
        items, i = self._select(store, start, hi, labels, fields, limit, target, rt)
        meta: JSON = {"resourceVersion": list_rv}
        if limit and len(items) == limit and i < hi:
            meta["continue"] = _encode_continue(list_rv, store.keys[i - 1])
            if labels is None and fields is None:
                meta["remainingItemCount"] = hi - i
        if looping:
            meta["continue"] = looping
        head = _dumps({"kind": f"{rt.kind}List", "apiVersion": target.api_version,
                       "metadata": meta})
        return _Response(200, f'{head[:-1]},"items":[{",".join(items)}]}}')

    def _select(self, store: _Store, start: int, hi: int, labels: Optional[Matcher],
                fields: Optional[Matcher], limit: int, target: _Target, rt: ResourceType
                ) -> tuple[list[str], int]:
        items: list[str] = []
        keys, objs, i = store.keys, store.objs, start
        while i < hi and not (limit and len(items) >= limit):
            key = keys[i]
            obj = objs[key]
            i += 1
            if (labels is None or labels(obj)) and (fields is None or fields(obj)):
                items.append(store.render(key, target.api_version, not rt.custom))
        self.examined += i - start
        return items, i

    def _existing(self, target: _Target) -> JSON:
        obj = self._store(target.rt).objs.get(self._key(target.rt, target.namespace,
                                                        target.name))
        if obj is None:
            raise not_found(target.rt, target.name)
        return obj

    def _do_get(self, target: _Target, query: dict[str, str], **_: Any) -> _Response:
        self._existing(target)
        key = self._key(target.rt, target.namespace, target.name)
        return _Response(200, self._store(target.rt).render(key, target.api_version, False))

    # -- writes
    def _do_create(self, target: _Target, query: dict[str, str], body: Any, dry: bool,
                   **_: Any) -> _Response:
        rt = target.rt
        obj = self._validate_body(target, body)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not meta.get("name"):
            raise ApiError(422, f'{rt.kind} "" is invalid: metadata.name: Required value: '
                                "name or generateName is required", details=_details(rt))
        if rt.namespaced:
            self._require_namespace(target.namespace)
        key = self._key(rt, target.namespace, meta["name"])
        if key in self._store(rt).objs:
            being = "object is being deleted: " if self._terminating(self._store(rt).objs[key]) else ""
            raise ApiError(409, f'{being}{rt.group_resource} "{meta["name"]}" already exists',
                           "AlreadyExists", _details(rt, meta["name"]))
        obj.pop("status", None)
        meta.pop("resourceVersion", None)
        for k in ("uid", "creationTimestamp", "generation"):
            meta.pop(k, None)
        self._fill_metadata(meta, None)
        meta["managedFields"] = record(None, obj, self._manager(query), not rt.custom, target.api_version)
        self._add_finalizers(rt, obj)
        obj = self._follow_spec(rt, key, obj) if not dry else obj
        self._admit("CREATE", obj, None)
        if not dry:
            self._commit(rt, key, obj)
        return _Response(201, self._present(obj, target))

    def _require_namespace(self, namespace: str) -> None:
        if ("", namespace) not in self._store(find_type("namespaces")).objs:
            raise ApiError(404, f'namespaces "{namespace}" not found',
                           details={"name": namespace, "kind": "namespaces"})

    def _validate_body(self, target: _Target, body: Any) -> JSON:
        rt = target.rt
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        obj = dict(body)
        obj.setdefault("apiVersion", target.api_version)
        obj.setdefault("kind", rt.kind)
        group, _ = _split_api_version(obj["apiVersion"])
        if obj["kind"] != rt.kind or group != rt.group:
            raise bad_request(f"the API version in the data ({obj['apiVersion']}) does not "
                              f"match the expected API version ({target.api_version})")
        meta = obj["metadata"] = dict(obj.get("metadata") or {})
        if rt.namespaced:
            if meta.get("namespace", target.namespace) != target.namespace:
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            meta["namespace"] = target.namespace
        if target.name and meta.get("name", target.name) != target.name:
            raise bad_request(f"the name of the object ({meta.get('name')}) does not match "
                              f"the name on the URL ({target.name})")
        if target.name:
            meta["name"] = target.name
        return obj

    def _do_update(self, target: _Target, query: dict[str, str], body: Any, dry: bool,
                   **_: Any) -> _Response:
        old = self._existing(target)
        new = self._validate_body(target, body)
        rv = new["metadata"].get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(target.rt, target.name)
        return self._write(target, old, new, dry, self._manager(query))

    def _do_patch(self, target: _Target, query: dict[str, str], ctype: str, raw: bytes,
                  dry: bool, **_: Any) -> _Response:
        old = self._existing(target)
        new = self._patched(target, old, ctype.split(";")[0].strip(), raw)
        if not isinstance(new, dict):
            raise ApiError(422, "the patched object is not a JSON object")
        rv = (new.get("metadata") or {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(target.rt, target.name)
        return self._write(target, old, self._validate_body(target, new), dry, self._manager(query))

    def _manager(self, query: dict[str, str]) -> str:
        """The field manager of the request being served (``fields.manager_of``)."""
        return manager_of(query.get("fieldManager"), getattr(self._agent, "value", None))

    def _patched(self, target: _Target, old: JSON, ctype: str, raw: bytes) -> Any:
        rt = target.rt
        accepted = f"{JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}" + \
            ("" if rt.custom else f", {STRATEGIC_PATCH}")
        if ctype not in (MERGE_PATCH, JSON_PATCH) and not (ctype == STRATEGIC_PATCH
                                                           and not rt.custom):
            raise ApiError(415, f"the body of the request was in an unknown format - accepted "
                                f"media types include: {accepted}")
        patch = self._parse_body(raw)
        base = {**old, "apiVersion": target.api_version}
        if ctype == JSON_PATCH:
            if not isinstance(patch, list):
                raise bad_request("json: cannot unmarshal object into Go value of type "
                                  "jsonpatch.Patch")
            try:
                return json_patch(base, patch)
            except (KeyError, IndexError, ValueError, TypeError) as err:  # kube-apiserver says no more
                raise ApiError(422, "the server rejected our request due to an error in our request") from err
        if not isinstance(patch, dict):
            raise bad_request("the body of the request must be a JSON object")
        return merge_patch(base, _strip_directives(patch) if ctype == STRATEGIC_PATCH else patch)

    def _write(self, target: _Target, old: JSON, new: JSON, dry: bool, manager: str = "unknown") -> _Response:
        """Finish an update or patch: status semantics, metadata, managedFields, admission, commit."""
        rt = target.rt
        if target.sub == "status":
            new = {**old, "status": new.get("status")}
            if new["status"] is None:
                del new["status"]
        else:
            new.pop("status", None)
            if "status" in old:
                new["status"] = old["status"]
        meta = new["metadata"] = dict(new["metadata"])
        for k in ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp",
                  "deletionGracePeriodSeconds"):
            if k in old["metadata"]:
                meta[k] = old["metadata"][k]
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        meta.pop("managedFields", None)
        if "managedFields" in old["metadata"]:
            meta["managedFields"] = old["metadata"]["managedFields"]
        self._bump_generation(old, new)
        if not target.sub and not same_content(old, new):
            new["metadata"]["managedFields"] = record(old, new, manager, not rt.custom, target.api_version)
        key = self._key(rt, target.namespace, target.name)
        if not dry and not target.sub:
            new = self._follow_spec(rt, key, new)
        self._admit("UPDATE", new, old)
        if new == old:  # a no-op write is not persisted: resourceVersion unchanged
            return _Response(200, self._present(old, target))
        if not dry and self._terminating(new) and not new["metadata"].get("finalizers"):
            self._store(rt).drop(key)  # the last finalizer is gone: deletion completes
        elif not dry:
            self._commit(rt, key, new)
        return _Response(200, self._present(new, target))

    # -- deletes
    def _do_delete(self, target: _Target, query: dict[str, str], raw: bytes, dry: bool,
                   **_: Any) -> _Response:
        rt, old = target.rt, self._existing(target)
        options = _try_json(raw) or {}
        if raw.strip() and isinstance(options, dict):
            # As kube-apiserver decodes a DELETE: DeleteOptions from the body when there is one,
            # else from the query, never both; so a body's ``dryRun`` alone makes it a dry run.
            dry = "All" in (options.get("dryRun") or [])
        pre = options.get("preconditions") or {} if isinstance(options, dict) else {}
        failed = _failed_precondition(pre, old["metadata"])
        if failed:
            raise ApiError(409, f'Operation cannot be fulfilled on {_qualified(rt)} "{target.name}": {failed}',
                           "Conflict", _details(rt, target.name))
        self._admit("DELETE", None, old)
        if old["metadata"].get("finalizers"):
            return self._mark_terminating(target, old, dry)
        if not dry:
            key = self._key(rt, target.namespace, target.name)
            self._store(rt).drop(key)
            self._pending.pop(key, None)
        if rt.plural == "pods":
            return _Response(200, self._present(old, target))
        return _Response(200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Success", "details": {
                                   **_details(rt, target.name),
                                   "uid": old["metadata"].get("uid")}})

    def _mark_terminating(self, target: _Target, old: JSON, dry: bool) -> _Response:
        """A DELETE with finalizers pending: set deletionTimestamp once; the object stays."""
        obj = copy.deepcopy(old)
        if not self._terminating(obj):
            obj["metadata"].update(deletionTimestamp=_now(), deletionGracePeriodSeconds=0)
            if not dry:
                key = self._key(target.rt, target.namespace, target.name)
                self._commit(target.rt, key, obj)
                for fin in self._finalizers:
                    if fin.rt is target.rt and fin.name in obj["metadata"]["finalizers"]:
                        fin.due[key] = time.monotonic() + fin.after
        return _Response(200, self._present(obj, target))

    def _do_deletecollection(self, target: _Target, query: dict[str, str], dry: bool,
                             **_: Any) -> _Response:
        rt, store = target.rt, self._store(target.rt)
        labels = label_matcher(query.get("labelSelector", ""))
        fields = field_matcher(query.get("fieldSelector", ""), rt)
        lo, hi = store.span(target.namespace)
        gone = [k for k in store.keys[lo:hi]
                if (labels is None or labels(store.objs[k]))
                and (fields is None or fields(store.objs[k]))]
        for key in gone:
            self._admit("DELETE", None, store.objs[key])
        items = [json.loads(store.render(k, target.api_version, False)) for k in gone]
        if not dry:
            for key in gone:
                store.drop(key)
        return _Response(200, {"kind": f"{rt.kind}List", "apiVersion": target.api_version,
                               "metadata": {"resourceVersion": str(self._rv)}, "items": items})

    @staticmethod
    def _present(obj: JSON, target: _Target) -> str:
        if obj.get("apiVersion") != target.api_version:
            obj = {**obj, "apiVersion": target.api_version}
        return _dumps(obj)


def _failed_precondition(pre: Any, metadata: JSON) -> str:
    """What a DELETE's preconditions find, in kube-apiserver's words ("" when they hold): the uid
    first, then the resourceVersion."""
    if not isinstance(pre, dict):
        return ""
    uid, rv = metadata.get("uid"), metadata.get("resourceVersion")
    if pre.get("uid") and pre["uid"] != uid:
        return f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {uid}"
    if pre.get("resourceVersion") and pre["resourceVersion"] != rv:
        return (f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does not match the "
                f"ResourceVersion in record ({rv}). The object might have been modified")
    return ""


def _qualified(rt: ResourceType) -> str:
    """How kube-apiserver names a resource in a conflict: a custom resource by its kind."""
    return f"{rt.kind}.{rt.group}" if rt.custom else rt.group_resource

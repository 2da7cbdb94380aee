"""``scripts/engine-tables --check`` against a local ``file://`` package index, and extra tables.

--check lists the releases the way the recording does (pip's own client, final and post releases
from the first recorded one on) and compares them with the shipped data.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from _support import ROOT, direct, script_module
from kubectl_kvdtype._engines.parsers import shipped_document

pytestmark = pytest.mark.version_sensitive  # the argv reader (test_tiers.py)

SCRIPT = ROOT / "scripts" / "engine-tables"
SHIPPED = shipped_document()


def _index(root: Path, releases: dict[str, list[str]]) -> str:
    """A PEP 503 index on disk: a page per project linking its (empty) wheels; pip lists them by name."""
    for package, versions in releases.items():
        folder = root / "simple" / package
        folder.mkdir(parents=True)
        links = []
        for version in versions:
            wheel = f"{package}-{version}-py3-none-any.whl"
            (folder / wheel).write_bytes(b"")
            links.append(f'<a href="{wheel}">{wheel}</a>')
        (folder / "index.html").write_text(f"<html><body>{''.join(links)}</body></html>", encoding="utf-8")
    return (root / "simple").as_uri()


def _check(index: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--check", "--index-url", index], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.e2e  # runs pip
def test_check_says_current_when_every_release_is_recorded(tmp_path: Path) -> None:
    # Releases before the first recorded one and pre-releases are not asked for.
    index = _index(tmp_path, {"vllm": SHIPPED["versions"]["vLLM"] + ["0.17.1", "0.34.0rc1"],
                              "sglang": SHIPPED["versions"]["SGLang"] + ["0.5.17", "0.5.24.dev0"]})
    result = _check(index)
    assert (result.returncode, result.stdout.strip()) == (0, "current: every release on the index is recorded"), \
        result.stderr


@pytest.mark.e2e  # runs pip
def test_check_names_each_release_not_recorded(tmp_path: Path) -> None:
    index = _index(tmp_path, {"vllm": SHIPPED["versions"]["vLLM"] + ["0.34.0"],
                              "sglang": SHIPPED["versions"]["SGLang"] + ["0.5.23.post1"]})
    result = _check(index)
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("not recorded: vLLM 0.34.0, SGLang 0.5.23.post1;"), result.stdout


@pytest.mark.e2e  # runs pip
def test_check_on_an_index_that_does_not_answer_is_one_sentence(tmp_path: Path) -> None:
    result = _check((tmp_path / "nowhere").as_uri())
    assert result.returncode == 2
    assert result.stderr.startswith("error: cannot list the releases") and "Traceback" not in result.stderr


def _extra_table(tmp_path: Path, version: str) -> Path:
    """An extra table file as `--only vLLM==VERSION --out FILE` writes it: here the 0.33.0 table
    recorded again as a newer release."""
    table = json.loads(SHIPPED["tables"]["vLLM"][SHIPPED["same"].get("vLLM", {}).get("0.33.0", "0.33.0")])
    path = tmp_path / "extra.json"
    path.write_text(json.dumps({"versions": {"vLLM": [version]}, "same": {}, "tables": {"vLLM": {version: table}}}))
    return path


def test_an_extra_table_file_adds_a_release(tmp_path: Path) -> None:
    from kubectl_kvdtype._engines import parsers as _parsers

    try:
        _parsers.add_tables(str(_extra_table(tmp_path, "0.99.0")))
        assert _parsers.table_version("vLLM", "0.99.1") == "0.99.0"
        assert "0.99.0" in _parsers.recorded_versions("vLLM")
    finally:
        _parsers._EXTRA.clear()
        _parsers.clear_caches()
    assert _parsers.table_version("vLLM", "0.99.1") != "0.99.0"


@pytest.mark.e2e  # the installed plugin, with the variable set
def test_the_variable_names_the_extra_tables_and_a_bad_file_is_one_sentence(tmp_path: Path) -> None:
    import os

    manifest = tmp_path / "m.yaml"
    manifest.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    env = dict(os.environ, KUBECTL_KVDTYPE_ENGINE_TABLES=str(_extra_table(tmp_path, "0.99.0")))
    assert direct(env, "check", "-f", str(manifest)).returncode == 0
    (tmp_path / "bad.json").write_text("{}")
    bad = direct(dict(env, KUBECTL_KVDTYPE_ENGINE_TABLES=str(tmp_path / "bad.json")), "check", "-f", str(manifest))
    assert bad.returncode == 2
    assert bad.stderr.startswith(f"error: KUBECTL_KVDTYPE_ENGINE_TABLES: {tmp_path / 'bad.json'} is not an "
                                 "engine table file written by scripts/engine-tables")
    assert len(bad.stderr.strip().splitlines()) == 1


def test_the_writer_reproduces_the_shipped_lines_and_an_extra_file_the_plugin_adds(tmp_path: Path) -> None:
    """The script's writer and the plugin's reader agree on both layouts: every recorded table,
    written again, is the shipped JSON-lines file byte for byte, and as an extra table file (one
    JSON document) it is accepted whole."""
    from kubectl_kvdtype._engines import parsers as _parsers

    script = script_module("engine-tables")
    tables = {engine: {v: json.loads(SHIPPED["tables"][engine][SHIPPED["same"].get(engine, {}).get(v, v)])
                       for v in versions} for engine, versions in SHIPPED["versions"].items()}
    shipped = ROOT / "kubectl_kvdtype" / "_engines" / _parsers.SHIPPED_TABLES
    script.write_tables(tables, SHIPPED["recorded_with_python"], tmp_path / shipped.name)
    assert (tmp_path / shipped.name).read_bytes() == shipped.read_bytes()
    script.write_tables({"vLLM": {"0.99.0": tables["vLLM"]["0.33.0"]}}, "3.11", tmp_path / "extra.json")
    try:
        _parsers.add_tables(str(tmp_path / "extra.json"))
        assert "0.99.0" in _parsers.recorded_versions("vLLM")
        assert _parsers._recorded("vLLM", "0.99.0") == tables["vLLM"]["0.33.0"]
    finally:
        _parsers._EXTRA.clear()
        _parsers.clear_caches()


def test_the_script_the_plugin_and_the_weekly_workflow_name_one_table_file() -> None:
    """The file scripts/engine-tables writes is the one the plugin reads and the one the weekly
    workflow commits (with the corpus): a rename in one place fails here, not in a week."""
    from kubectl_kvdtype._engines import parsers as _parsers

    script = script_module("engine-tables")
    assert script.TABLES == ROOT / "kubectl_kvdtype" / "_engines" / _parsers.SHIPPED_TABLES
    workflow = (ROOT / ".github" / "workflows" / "engine-tables.yml").read_text(encoding="utf-8")
    assert f"git add {script.TABLES.relative_to(ROOT)} {script.CORPUS.relative_to(ROOT)}" in workflow

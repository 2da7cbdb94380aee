"""A verdict resting on an engine table added for the run (``KUBECTL_KVDTYPE_ENGINE_TABLES``) says so on
the line people read: preflight's verdict line and the fleet's. A table file for a release this tool
ships replaces the shipped table for the run, and can turn NO-GO into GO (or GO into NO-GO) by itself.

Each table here is the shipped vLLM 0.29.0 table with one choice of the flag added or taken away, as
an admin's file recorded from a patched wheel would be; the plugin runs as a user's would, with the
variable in its environment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Iterator

import pytest

from _support import direct
from kubectl_kvdtype._engines.parsers import shipped_document
from test_fleet import Fleet
from test_verdicts import SETTING_ON, binding, deployment

pytestmark = [pytest.mark.e2e, pytest.mark.version_sensitive]  # the installed plugin; the engine tables (test_tiers.py)

SHIPPED = shipped_document()
VARIABLE = "KUBECTL_KVDTYPE_ENGINE_TABLES"
REPLACED = ", in place of the table this tool ships for that release"


def _table(tmp_path: Path, version: str, change: Callable[[set[str]], set[str]], recorded_as: str = "") -> Path:
    """A table file holding the shipped ``version`` table (as ``recorded_as``, default the same
    release) with the flag's choices changed."""
    table = json.loads(SHIPPED["tables"]["vLLM"][SHIPPED["same"].get("vLLM", {}).get(version, version)])
    flag = next(action for action in table["actions"] if action["dest"] == "kv_cache_dtype")
    flag["choices"] = sorted(change(set(flag["choices"])))
    release = recorded_as or version
    path = tmp_path / f"vllm-{release}.json"
    path.write_text(json.dumps({"versions": {"vLLM": [release]}, "same": {}, "tables": {"vLLM": {release: table}}}))
    return path


def _manifest(tmp_path: Path, dtype: str, version: str = "0.29.0") -> Path:
    path = tmp_path / f"{dtype}-{version}.json"
    objects = [SETTING_ON, binding("t", "b", dtype), deployment("t", "d", "b", "vLLM", version)]
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def _preflight(manifest: Path, table: Path | None, *args: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    if table is not None:
        env[VARIABLE] = str(table)
    result = direct(env, "preflight", "-f", str(manifest), *args)
    assert result.stdout, result.stderr
    return result.returncode, result.stdout


def _verdict_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith(("GO:", "NO-GO:", "INCOMPLETE:")))


def test_a_go_that_exists_only_because_of_the_file_says_so(tmp_path: Path) -> None:
    """vLLM 0.29.0 refuses bf16; a file whose 0.29.0 table lists it makes the GO."""
    manifest, table = _manifest(tmp_path, "bf16"), _table(tmp_path, "0.29.0", lambda c: c | {"bf16"})
    status, out = _preflight(manifest, None)
    assert status == 1 and _verdict_line(out).startswith("NO-GO:") and VARIABLE not in out
    status, out = _preflight(manifest, table)
    assert status == 0
    assert _verdict_line(out) == (f"GO: no error or warning finding. This verdict rests on an engine table added for "
                                  f"this run ({VARIABLE}): vLLM 0.29.0 from {table}{REPLACED}.")
    status, text = _preflight(manifest, table, "-o", "json")
    summary = json.loads(text)["summary"]
    assert summary["verdict"] == "GO" and summary["reason"].endswith(f"{table}{REPLACED}.")
    assert summary["addedTables"] == [{"file": str(table), "engine": "vLLM", "version": "0.29.0",
                                       "replacesShipped": True}]
    added = [f for f in json.loads(text)["findings"] if f["code"] == "engine-table-added"]
    assert [f["replacesShipped"] for f in added] == [True] and "in place of the one shipped" in added[0]["message"]


def test_a_no_go_that_exists_only_because_of_the_file_says_so(tmp_path: Path) -> None:
    """vLLM 0.29.0 accepts bfloat16; a file whose 0.29.0 table lacks it makes the NO-GO."""
    manifest, table = _manifest(tmp_path, "bfloat16"), _table(tmp_path, "0.29.0", lambda c: c - {"bfloat16"})
    status, out = _preflight(manifest, None)
    assert status == 0 and _verdict_line(out) == "GO: no error or warning finding."
    status, out = _preflight(manifest, table)
    line = _verdict_line(out)
    assert status == 1 and line.startswith("NO-GO: 1 error finding(s) (dtype-rejected)")
    assert line.endswith(f"This verdict rests on an engine table added for this run ({VARIABLE}): vLLM 0.29.0 "
                         f"from {table}{REPLACED}.")


def test_a_table_for_a_release_this_tool_does_not_ship_is_named_without_replacing(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, "bfloat16", version="0.99.0")
    table = _table(tmp_path, "0.32.0", lambda c: c, recorded_as="0.99.0")
    status, out = _preflight(manifest, table)
    assert status == 0
    assert _verdict_line(out) == (f"GO: no error or warning finding. This verdict rests on an engine table added for "
                                  f"this run ({VARIABLE}): vLLM 0.99.0 from {table}.")
    status, out = _preflight(_manifest(tmp_path, "bfloat16"), table)  # no verdict rests on it: nothing said
    assert status == 0 and _verdict_line(out) == "GO: no error or warning finding."


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    with Fleet(tmp_path) as running:
        yield running


def test_the_fleets_line_names_the_table_its_contexts_verdicts_rest_on(fleet: Fleet, tmp_path: Path) -> None:
    """prod-clean's Binding says fp8_e4m3, which its vLLM 0.29.0 consumer accepts: GO, until a file
    replaces 0.29.0's table with one that lacks it."""
    assert fleet.run("preflight", "-A", "--contexts", "prod-clean").returncode == 0
    table = _table(tmp_path, "0.29.0", lambda c: c - {"fp8_e4m3"})
    fleet.env[VARIABLE] = str(table)
    result = fleet.run("preflight", "-A", "--contexts", "prod-clean")
    assert result.returncode == 1, result.stderr
    fleet_line = result.stdout.splitlines()[-1]
    assert fleet_line.startswith("Fleet verdict: NO-GO: 1 of 1 context(s) checked"), result.stdout
    assert fleet_line.endswith(f"; the verdicts of prod-clean rest on an engine table added for this run ({VARIABLE}): "
                               f"vLLM 0.29.0 from {table}{REPLACED}; exit 1.")
    document = json.loads(fleet.run("preflight", "-A", "--contexts", "prod-clean", "-o", "json").stdout)
    assert document["contexts"][0]["report"]["summary"]["addedTables"] == [
        {"file": str(table), "engine": "vLLM", "version": "0.29.0", "replacesShipped": True}]

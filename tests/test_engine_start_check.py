"""vLLM 0.33+'s value check at engine start, recorded from the released wheel, not kept by hand.

From 0.33 vLLM's parser lists no choices for ``--kv-cache-dtype``: ``CacheConfig``'s validation,
which the engine runs at start, refuses a value it does not know. ``scripts/engine-tables`` runs
that check for real and stores what it accepts and its message beside the option table; the
expected outcomes below are the corpus rows that check produced (tests/data/engine_corpus.json),
never written here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from _support import kvdtype, report
from kubectl_kvdtype._engines import argv as _argv
from kubectl_kvdtype._engines import parsers as _parsers
from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import verdicts as _verdicts
from test_verdicts import binding, deployment, replica

pytestmark = pytest.mark.version_sensitive  # the argv reader (test_tiers.py)

CORPUS = json.loads((Path(__file__).parent / "data" / "engine_corpus.json").read_text(encoding="utf-8"))
MODEL = "Qwen/Qwen3-8B"  # the model the corpus argvs name


def _late_versions() -> list[str]:
    """The recorded vLLM releases whose parser lists no choices for the flag."""
    return [v for v in _parsers.recorded_versions("vLLM") if _parsers.recorded_choices("vLLM", v) is None]


def _single_value_rows(version: str) -> dict[str, list]:
    """{value: the corpus row} for the argvs ``MODEL --kv-cache-dtype VALUE`` at ``version`` that
    the parser lets through (the rest fail at parsing: a value that looks like an option)."""
    data = CORPUS["engines"]["vLLM"]
    rows = data["outcomes"][version][:len(data["argvs"])]
    return {argv[2]: row for argv, row in zip(data["argvs"], rows, strict=True)
            if len(argv) == 3 and argv[:2] == [MODEL, _records.FLAG] and row[0] in ("v", "s")}


def _spellings(version: str) -> tuple[str, str]:
    """(a spelling the recorded start check refuses, one it accepts), both unknown to the hand-kept
    spelling table: only the recording can decide them."""
    rows = _single_value_rows(version)
    hand = set(_records.VLLM_ENGINE.accepted) | _records.VLLM_ENGINE.rejected
    refused = next(v for v, row in rows.items() if row[0] == "s" and v not in hand and v.isidentifier())
    accepted = next(v for v, row in rows.items() if row[0] == "v" and v not in hand)
    return refused, accepted


def test_the_start_check_is_recorded_where_the_parser_lists_no_choices_and_only_there() -> None:
    late = _late_versions()
    assert late and late[0] == "0.33.0"
    for engine in ("vLLM", "SGLang"):
        for version in _parsers.recorded_versions(engine):
            has_choices = _parsers.recorded_choices(engine, version) is not None
            assert (_parsers.start_check(engine, version) is None) == has_choices, (engine, version)
    # No hand-kept rule says from which version values are checked late: the tables do.
    assert not hasattr(_records.VLLM_ENGINE, "late_validation_from")


@pytest.mark.parametrize("version", _late_versions())
def test_every_recorded_start_outcome_is_the_readers(version: str) -> None:
    """Each value the corpus ran through the real check: refused ones carry the engine's message."""
    rows = _single_value_rows(version)
    assert any(row[0] == "s" for row in rows.values()) and any(row[0] == "v" for row in rows.values())
    accepted = _parsers.start_check("vLLM", version)
    assert accepted is not None
    for value, row in rows.items():
        reading = _argv.read_engine_args("vLLM", version, [MODEL, _records.FLAG, value])
        if row[0] == "s":
            assert value not in accepted
            assert (reading.state, reading.at_start, reading.error) == (_parsers.FAILED, True, CORPUS["errors"][row[1]])
            assert _parsers.refused_at_start("vLLM", version, value) == CORPUS["errors"][row[1]]
        else:
            assert row == ["v", value] and value in accepted and reading.state == _parsers.VALUE


def test_the_verdict_at_a_late_release_is_the_recorded_checks() -> None:
    refused, accepted = _spellings("0.33.0")
    bad = _verdicts.renders("vLLM", "0.33.0", refused)
    assert (bad.state, bad.stage) == (_verdicts.FAILED, _verdicts.AT_START)
    assert bad.error == _parsers.refused_at_start("vLLM", "0.33.0", refused)
    judged = _verdicts.judge("vLLM", "0.33.0", refused)
    assert (judged.verdict, judged.failure) == (_records.REJECTED, _records.AT_START_FAILURE)
    assert "recorded start check" in judged.reason
    good = _verdicts.renders("vLLM", "0.33.0", accepted)
    assert (good.state, good.value) == (_verdicts.VALUE, accepted)
    # The hand-kept table neither accepts nor refuses them: alone it would say "unknown".
    assert _records.judge_spelling("vLLM", "0.33.0", refused).verdict == _records.UNKNOWN
    assert _records.judge_spelling("vLLM", "0.33.0", accepted).verdict == _records.UNKNOWN
    # A release newer than the data is judged as the newest recorded one: late, by the spelling table.
    newer = _verdicts.renders("vLLM", "0.99.0", "bf16")
    assert (newer.state, newer.stage) == (_verdicts.FAILED, _verdicts.AT_START)


def _manifest(path: Path, refused: str, accepted: str) -> None:
    """Per spelling a Binding, a vLLM 0.33.0 deployment naming it and its replica running it."""
    objects = []
    for name, dtype in (("refused", refused), ("accepted", accepted)):
        objects += [binding("late", name, dtype), deployment("late", name, name, "vLLM", "0.33.0"),
                    replica("late", name, 0, [_records.FLAG, dtype])]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))


def test_check_and_verify_through_kubectl_follow_the_recorded_start_check(kube_env, tmp_path: Path) -> None:
    refused, accepted = _spellings("0.33.0")
    message = _parsers.refused_at_start("vLLM", "0.33.0", refused)
    manifest = tmp_path / "late.yaml"
    _manifest(manifest, refused, accepted)
    checked = kvdtype(kube_env, "check", "-f", str(manifest), "-o", "json")
    assert checked.returncode == 1, checked.stderr
    items = {i["name"]: i["verdict"] for i in report(checked)["items"]}
    assert items == {"refused": "rejected", "accepted": "ok"}
    (finding,) = [f for f in report(checked)["findings"] if f["code"] == "dtype-rejected"]
    assert finding["object"]["name"] == "refused" and "fails at engine start" in finding["message"]
    verified = kvdtype(kube_env, "verify", "-f", str(manifest), "-o", "json")
    assert verified.returncode == 1, verified.stderr
    found = report(verified)
    assert {i["name"]: i["verdict"] for i in found["items"]} == {"refused-server-r0-m0": "rejected",
                                                                 "accepted-server-r0-m0": "ok"}
    (rejected,) = [f for f in found["findings"] if f["code"] == "replica-dtype-rejected"]
    assert rejected["object"]["name"] == "refused-server-r0-m0"
    assert rejected["error"] == message and "engine start" in rejected["message"]

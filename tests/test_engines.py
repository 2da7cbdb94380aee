"""The spelling-by-version table of docs/engines.md ("Which spellings each engine accepts"), judged
spelling by spelling."""

from __future__ import annotations

import json

import packaging.version
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _support import in_process
from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._engines.records import ACCEPTED, REJECTED, SGLANG, UNKNOWN, VLLM, parse_version
from kubectl_kvdtype._engines.verdicts import judge, suggest
from test_verdicts import binding, deployment

pytestmark = pytest.mark.version_sensitive  # argparse, the argv reader, completion or the man page (test_tiers.py)

# The reference-version table, row by row: (value, vLLM 0.29.0, SGLang 0.5.18).
TABLE = [
    ("bfloat16", ACCEPTED, ACCEPTED), ("fp8_e4m3", ACCEPTED, ACCEPTED), ("fp8_e5m2", ACCEPTED, ACCEPTED),
    ("nvfp4", ACCEPTED, ACCEPTED), ("auto", ACCEPTED, ACCEPTED),
    ("bf16", REJECTED, ACCEPTED),
    ("fp8", ACCEPTED, REJECTED), ("float16", ACCEPTED, REJECTED), ("fp8_inc", ACCEPTED, REJECTED),
    ("fp8_ds_mla", ACCEPTED, REJECTED),
    ("mxfp8", REJECTED, ACCEPTED), ("fp4_mx_block16", REJECTED, ACCEPTED),
    ("FP8", REJECTED, REJECTED), ("BF16", REJECTED, REJECTED), ("fp16", REJECTED, REJECTED),
    ("half", REJECTED, REJECTED),
    # At a recorded version the recorded parser's choices decide, spellings the hand table lacks too.
    ("turboquant_3bit", REJECTED, REJECTED), ("turboquant_k8v4", ACCEPTED, REJECTED),
    ("bfloаt16", REJECTED, REJECTED), ("bfloat16 ", REJECTED, REJECTED), ("bfloat16\u200b", REJECTED, REJECTED),
]


def test_between_recordings_a_spelling_the_table_lacks_is_unknown_and_says_which_parser():
    judged = judge(VLLM, "0.27.5", "turboquant_3bit")  # no such release: between 0.27.1 and 0.28.0
    assert judged.verdict == UNKNOWN
    assert judged.note == ("vLLM 0.27.5 is between the recorded releases 0.27.1 and 0.28.0: the spelling judged by "
                           "this tool's spelling table at 0.27.5, the argv read by vLLM 0.27.1's parser")


@pytest.mark.parametrize("engine", [VLLM, SGLANG])
@pytest.mark.parametrize("version", [None, "0.4.2", "0.27.5", "0.5.4", "0.5.20", "0.99.0"])
def test_the_spellings_a_parse_checks_are_the_spelling_tables_verdicts(engine, version):
    """Between recordings a parse checks the flag's value against ``records.spellings`` (data, not a
    call back up to the judge): the spelling table's own verdicts, spelling by spelling."""
    found = _records.spellings(engine, version)
    known = _records.record(engine)
    for spelling in (*known.accepted, *known.rejected, "turboquant_3bit", ""):
        verdict = _records.judge_spelling(engine, version, spelling).verdict
        assert (spelling in found.accepted, spelling in found.refused) == (verdict == ACCEPTED, verdict == REJECTED)
    assert found.accepted and found.refused


@pytest.mark.parametrize("value, vllm, sglang", TABLE)
def test_reference_versions(value, vllm, sglang):
    assert judge(VLLM, None, value).verdict == vllm
    assert judge(SGLANG, None, value).verdict == sglang
    assert judge(VLLM, None, value).version_is_reference


@pytest.mark.parametrize("engine, version, value, verdict", [
    (VLLM, "0.3.0", "fp8_e5m2", ACCEPTED),
    (VLLM, "0.4.1", "fp8_e5m2", REJECTED),  # missing in 0.4.1-0.4.2
    (VLLM, "0.4.2", "fp8_e5m2", REJECTED),
    (VLLM, "0.4.3", "fp8_e5m2", ACCEPTED),
    (VLLM, "0.4.0", "fp8", REJECTED),
    (VLLM, "0.4.1", "fp8", ACCEPTED),
    (VLLM, "0.4.2", "fp8_e4m3", REJECTED),
    (VLLM, "0.9.9", "fp8_inc", REJECTED),
    (VLLM, "0.10.0", "fp8_inc", ACCEPTED),
    (VLLM, "0.10.2", "bfloat16", REJECTED),
    (VLLM, "v0.11.0", "bfloat16", ACCEPTED),
    (VLLM, "0.11.0", "fp8_ds_mla", REJECTED),
    (VLLM, "0.17.1", "float16", REJECTED),
    (VLLM, "0.18.0", "float16", ACCEPTED),
    (VLLM, "0.19.5", "nvfp4", REJECTED),
    (VLLM, "0.20.0", "nvfp4", ACCEPTED),
    (VLLM, "0.27.0", "nvfp4_4over6", REJECTED),
    (VLLM, "0.28.0", "nvfp4_4over6", ACCEPTED),
    (VLLM, "0.1.0", "auto", ACCEPTED),
    (SGLANG, "0.2.13", "fp8_e5m2", REJECTED),
    (SGLANG, "0.2.14", "fp8_e5m2", ACCEPTED),
    (SGLANG, "0.4.1", "fp8_e4m3", REJECTED),
    (SGLANG, "0.4.2", "fp8_e4m3", ACCEPTED),
    (SGLANG, "0.5.3", "bf16", REJECTED),
    (SGLANG, "0.5.4", "bfloat16", ACCEPTED),
    (SGLANG, "0.5.4", "fp4_e2m1", REJECTED),
    (SGLANG, "0.5.4.post3", "fp4_e2m1", ACCEPTED),
    (SGLANG, "0.5.20", "fp4_e2m1", ACCEPTED),
    (SGLANG, "0.5.21", "fp4_e2m1", REJECTED),  # removed
    (SGLANG, "0.5.15", "mxfp8", REJECTED),
    (SGLANG, "v0.5.16", "mxfp8", ACCEPTED),
    (SGLANG, "0.5.18.post1", "nvfp4", ACCEPTED),
])
def test_versions(engine, version, value, verdict):
    result = judge(engine, version, value)
    assert result.verdict == verdict, result.reason
    assert result.version == version and not result.version_is_reference


def test_unreadable_version_falls_back_to_the_reference():
    result = judge(VLLM, "latest", "bf16")
    assert result.version_is_reference and result.version == "0.29.0"
    assert "reference version" in result.reason
    assert result.note == "vLLM version 'latest' is unreadable: judged at the reference version 0.29.0"
    assert judge(VLLM, None, "bf16").note == ""  # no version at all: the reference, as the label says


@pytest.mark.parametrize("engine, version, note", [
    (VLLM, "0.29.0", ""), (VLLM, "0.29.0-cu124", ""), (SGLANG, "v0.5.23", ""),
    (VLLM, "0.34.0", "vLLM 0.34.0 is newer than the newest recorded release: the spelling judged by this tool's "
                     "spelling table at 0.34.0, the argv read by vLLM 0.33.0's parser, the newest recorded"),
    (SGLANG, "0.5.24", "SGLang 0.5.24 is newer than the newest recorded release: the spelling judged by this tool's "
                       "spelling table at 0.5.24, the argv read by SGLang 0.5.23's parser, the newest recorded"),
    (VLLM, "0.33.0rc1", "vLLM 0.33.0rc1 is between the recorded releases 0.32.0 and 0.33.0: the spelling judged by "
                        "this tool's spelling table at 0.33.0rc1, the argv read by vLLM 0.32.0's parser"),
    (VLLM, "0.11.0", "vLLM 0.11.0 is older than the oldest recorded release: the spelling judged by this tool's "
                     "spelling table at 0.11.0, the argv read by vLLM 0.18.0's parser, the oldest recorded"),
])
def test_the_basis_names_the_recorded_parser_that_stands_in(engine, version, note):
    found = _verdicts.basis(engine, version).note
    assert found.startswith(note) and bool(found) == bool(note)


def _before(version: str) -> str:
    """A plain release just before ``version`` (``0.11.0``: ``0.10.0``; ``0.5.4``: ``0.5.3``); "" for
    any other form."""
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts) or parts == ["0", "0", "0"]:
        return ""
    major, minor, patch = map(int, parts)
    return f"{major}.{minor}.{patch - 1}" if patch else f"{major}.{minor - 1}.0" if minor else ""


@pytest.mark.parametrize("engine", [VLLM, SGLANG])
def test_an_engine_older_than_the_recordings_is_told_without_contradiction(engine, tmp_path):
    """For every spelling the table refuses below the oldest recorded release but the oldest recorded
    parser lists, the verdict names the table version that decided the spelling and the parser that
    read the argv, and neither the sentence nor the engine's message (the choices argparse lists)
    says the spelling is accepted."""
    from kubectl_kvdtype._engines import parsers as _parsers

    oldest = _parsers.recorded_versions(engine)[0]
    listed = set(_parsers.recorded_choices(engine, oldest) or ())
    cases = [(_before(window.since.text), spelling) for spelling, windows in _records.record(engine).accepted.items()
             for window in windows if window.since and _before(window.since.text)
             and spelling in listed and window.since < _records.known_version(oldest)]
    assert cases, "some spelling the oldest recorded parser lists came later than the table's first release"
    for version, spelling in cases:  # the release before the spelling came, older than the recordings
        judged = _verdicts.judge(engine, version, spelling)
        rendered = _verdicts.renders(engine, version, spelling)
        assert judged.verdict == REJECTED and rendered.state == _verdicts.FAILED, (version, spelling)
        assert judged.reason.startswith(f"{engine} {version} does not accept {spelling} (accepted from ")
        assert judged.note == (f"{engine} {version} is older than the oldest recorded release: the spelling judged "
                               f"by this tool's spelling table at {version}, the argv read by {engine} {oldest}'s "
                               "parser, the oldest recorded")
        assert f"judged as {oldest}" not in judged.note
        choices = rendered.error.partition("(choose from ")[2]
        assert choices and repr(spelling) not in choices, rendered.error
    version, spelling = cases[-1]  # as check says it, about a Binding of that spelling
    manifest = tmp_path / "old.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        binding("t", "b", spelling), deployment("t", "d", "b", engine, version)]}))
    status, out, _ = in_process(["check", "-f", str(manifest), "-o", "json"])
    rejected = [f["message"] for f in json.loads(out)["findings"] if f["code"] == "dtype-rejected"]
    judged = _verdicts.judge(engine, version, spelling)
    assert status == 1 and len(rejected) == 1 and rejected[0].startswith(f"{judged.reason} ({judged.note}), so ")


def test_vllm_033_fails_at_engine_start_not_parsing():
    assert judge(VLLM, "0.33.0", "bf16").failure == "fails at engine start"
    assert judge(VLLM, "0.32.9", "bf16").failure == "exits at argument parsing"


@pytest.mark.parametrize("text, parsed", [
    ("0.29.0", "0.29.0"), ("v0.5.18.post1", "0.5.18.post1"), ("0.5.4.post3", "0.5.4.post3"), ("1.2", "1.2"),
    ("0.6.0rc1", "0.6.0rc1"), ("0.29.0-cu124", "0.29.0"), ("0.29.0+cu124", "0.29.0"), ("V0.33.0-RC.2", "0.33.0rc2"),
    ("0.5.18-1", "0.5.18.post1"), ("0.34.0.dev3", "0.34.0.dev3"), ("latest", None), (None, None), ("", None),
    (True, None), ("1.0.POST2.DEV3", "1.0.post2.dev3"), ("1.0Alpha1", "1.0a1"), ("1.0-CU124", "1.0"),
])
def test_parse_version(text, parsed):
    version = parse_version(text)
    assert (version.text if version else None) == parsed


def test_lenient_forms_compare_equal_to_the_release():
    assert parse_version("0.29.0-cu124") == parse_version("0.29") == parse_version("v0.29.0")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=4),
                          st.sampled_from(["", "a", "b", "rc"]), st.integers(0, 2),
                          st.sampled_from(["", ".post"]), st.integers(0, 2),
                          st.sampled_from(["", ".dev"]), st.integers(0, 2)), min_size=2, max_size=2))
def test_the_order_is_pep_440s(pair):
    """The one version parser orders like packaging.version (a test dependency through pytest)."""
    texts = ["".join([".".join(map(str, release)), pre and f"{pre}{pre_n}", post and f"{post}{post_n}",
                      dev and f"{dev}{dev_n}"]) for release, pre, pre_n, post, post_n, dev, dev_n in pair]
    ours = [parse_version(t) for t in texts]
    theirs = [packaging.version.Version(t) for t in texts]
    assert (ours[0] < ours[1]) == (theirs[0] < theirs[1]) and (ours[0] == ours[1]) == (theirs[0] == theirs[1])
    assert ours[0].text == str(theirs[0])


def test_rc_sorts_before_release_and_post_after():
    assert parse_version("0.6.0rc1") < parse_version("0.6.0") < parse_version("0.6.0.post1")


@pytest.mark.parametrize("dtype, consumers, expected", [
    ("bf16", [(VLLM, "0.29.0")], "bfloat16"),
    ("bf16", [(VLLM, "0.29.0"), (SGLANG, "0.5.18")], "bfloat16"),
    ("fp8", [(SGLANG, None)], "fp8_e4m3"),
    ("fp8", [(VLLM, "0.4.1")], "fp8"),  # fp8_e4m3 came in 0.4.3; fp8 itself is fine there
    ("float16", [(SGLANG, None)], None),
    ("float16", [(VLLM, "0.17.0")], None),
    ("BF16", [(VLLM, None)], "bfloat16"),
    ("fp16", [(VLLM, None)], "float16"),
    ("bfloat16", [(VLLM, "0.10.0")], None),  # no spelling of bf16 that vLLM 0.10 accepts
    ("mxfp8", [(VLLM, None), (SGLANG, None)], None),
])
def test_suggest(dtype, consumers, expected):
    assert suggest(dtype, consumers) == expected


def test_canonical_engine_names():
    assert [_records.canonical_engine(n) for n in ("vLLM", "vllm", "VLLM", "SGLang", "sglang", "Ascend", None, 3)] == [
        VLLM, VLLM, VLLM, SGLANG, SGLANG, None, None, None]


def test_a_version_newer_than_the_data_says_how_to_add_its_recording():
    from kubectl_kvdtype._engines.verdicts import basis

    assert basis("vLLM", "0.34.0").note.endswith(
        "(record it with scripts/engine-tables --only vLLM==0.34.0 --out FILE and add it with "
        "KUBECTL_KVDTYPE_ENGINE_TABLES=FILE)")
    assert "KUBECTL_KVDTYPE_ENGINE_TABLES" not in basis("vLLM", "0.27.5").note  # between recordings: nothing to add


def test_a_roles_reading_is_the_same_from_the_cache_for_every_part_of_its_key():
    """``read_role`` is memoized by everything that decides it: calls that differ in one part
    only (the arguments, engine, version, operator's dtype, model) each get their own reading,
    the one an uncached reading gives; an unhashable version is read uncached."""
    from kubectl_kvdtype._engines import verdicts as _v

    args = ["--kv-cache-dtype", "fp8"]
    cases = [(args, VLLM, "0.29.0", None, "MODEL"), (["--kv-cache-dtype=bf16"], VLLM, "0.29.0", None, "MODEL"),
             (args, SGLANG, "0.29.0", None, "MODEL"), (args, VLLM, "0.3.0", None, "MODEL"),
             (args, VLLM, "0.29.0", "bf16", "MODEL"),
             (args, VLLM, "0.29.0", "bf16", "--kv-cache-dtype=auto")]  # a model the engine reads as an option
    readings = [_v.read_role(list(a), engine, version, dtype, model) for a, engine, version, dtype, model in cases]
    assert readings == [_v._read_role(list(a), *rest) for a, *rest in cases]
    assert len({repr(r) for r in readings}) == len(cases)  # each part of the key changes the reading
    unhashable = _v.read_role(args, VLLM, {"version": "0.29.0"})
    assert unhashable == _v._read_role(args, VLLM, {"version": "0.29.0"}, None, "MODEL") and unhashable.occurrences

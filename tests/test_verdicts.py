"""Verdicts that never mislead: what an engine really makes of an argv, judged end to end.

The reader (``_engines.verdicts.read_flag``) in process, then every subcommand that judges through it, live
through real kubectl against the fake API server, and offline with ``-f``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
import yaml

from _support import EXAMPLES, SETTING, codes, direct, kvdtype, report, seed
from kubectl_kvdtype._engines.records import REBIND, REBIND_DIFFERENT, SGLANG, SPLIT, UPGRADE, VLLM
from kubectl_kvdtype._engines.verdicts import ABSENT, AT_PARSING, AT_START, FAILED, UNSURE, VALUE, read_flag, remedy

pytestmark = pytest.mark.version_sensitive  # argparse, the argv reader, completion or the man page (test_tiers.py)

# --- The reader ----------------------------------------------------------------------------

# (case, argv, engine, version, state, value, words of the engine's error, stage)
READINGS = [
    ("one valid copy", ["--kv-cache-dtype", "bfloat16"], VLLM, "0.29.0", VALUE, "bfloat16", "", ""),
    ("no flag", ["--port", "8000"], VLLM, "0.29.0", ABSENT, None, "", ""),
    ("a refused value", ["--kv-cache-dtype", "bf16"], VLLM, "0.29.0", FAILED, None,
     "error: argument --kv-cache-dtype: invalid choice: 'bf16' (choose from", AT_PARSING),
    # argparse checks each copy as it reads it: the first, refused, ends the process.
    ("operator's bad copy, role's good one", ["--kv-cache-dtype", "bf16", "--kv-cache-dtype", "bfloat16"], VLLM,
     "0.29.0", FAILED, None, "invalid choice: 'bf16'", AT_PARSING),
    ("every copy refused before 0.33", ["--kv-cache-dtype", "bf16", "--kv-cache-dtype", "bfloat16"], VLLM, "0.18.0",
     FAILED, None, "invalid choice: 'bf16'", AT_PARSING),
    ("same on SGLang", ["--kv-cache-dtype", "fp8", "--kv-cache-dtype", "fp8_e4m3"], SGLANG, "0.5.18", FAILED, None,
     "invalid choice: 'fp8'", AT_PARSING),
    # vLLM 0.33 checks no choices in the parser: the last copy wins, and is judged at engine start.
    ("0.33: a bad earlier copy is harmless", ["--kv-cache-dtype", "bf16", "--kv-cache-dtype", "bfloat16"], VLLM,
     "0.33.0", VALUE, "bfloat16", "", ""),
    # ... with the message of its start check, recorded from the wheel (tests/test_engine_start_check.py).
    ("0.33: a bad last copy fails at start", ["--kv-cache-dtype", "bf16"], VLLM, "0.33.0", FAILED, None,
     "ValueError: Invalid kv_cache_dtype: 'bf16'.", AT_START),
    ("an unread copy fails the whole parse", ["--kv-cache-dtype", "bf16", "--kv_cache_dtype", "fp8"], SGLANG,
     "0.5.18", FAILED, None, "error: unrecognized arguments: --kv_cache_dtype fp8", AT_PARSING),
    # argparse quotes the whole entry, "=fp8" included (the real parser's words, from the corpus).
    ("an ambiguous abbreviation", ["--kv-cache-dtype", "fp8", "--kv-cache-dt=fp8"], VLLM, "0.29.0", FAILED, None,
     "error: ambiguous option: --kv-cache-dt=fp8 could match", AT_PARSING),
    ("a copy without value", ["--kv-cache-dtype", "fp8", "--kv-cache-dtype"], VLLM, "0.29.0", FAILED, None,
     "expected one argument", AT_PARSING),
    ("an empty value", ["--kv-cache-dtype="], SGLANG, "0.5.18", FAILED, None, "invalid choice: ''", AT_PARSING),
    # A value the tables do not list is never called refused between recorded versions (it may be new)...
    ("a value the tables do not know", ["--kv-cache-dtype", "turboquant_3bit"], VLLM, "0.32.1", UNSURE,
     "turboquant_3bit", "", ""),
    # ...but at a recorded version the engine's own choices are known: its parser refuses it.
    ("a value the recorded parser refuses", ["--kv-cache-dtype", "turboquant_3bit"], VLLM, "0.29.0", FAILED, None,
     "invalid choice: 'turboquant_3bit'", AT_PARSING),
    ("an unknown engine", ["--kv-cache-dtype", "bf16"], None, None, UNSURE, "bf16", "", ""),
    ("valid twice, the last wins", ["--kv-cache-dtype", "fp8", "--kv-cache-dtype=fp8_e5m2"], VLLM, "0.29.0", VALUE,
     "fp8_e5m2", "", ""),
    ("the version decides", ["--kv-cache-dtype", "nvfp4"], SGLANG, "0.5.15", FAILED, None,
     "invalid choice: 'nvfp4'", AT_PARSING),
]


@pytest.mark.parametrize("case, argv, engine, version, state, value, error, stage", READINGS,
                         ids=[f"{row[2]}-{row[0]}" for row in READINGS])
def test_read_flag(case, argv, engine, version, state, value, error, stage):
    reading = read_flag([("command", argv)], engine, version)
    assert (reading.state, reading.value, reading.stage) == (state, value, stage), case
    assert error in reading.error and bool(reading.error) == bool(error)
    assert [o.where.split("[")[0] for o in reading.occurrences] == ["command"] * len(reading.occurrences)


def test_the_failure_names_the_copy_that_ends_the_process():
    fields = [("command", ["vllm", "serve", "m", "--kv-cache-dtype", "bf16"]),
              ("args", ["--kv-cache-dtype", "bfloat16"])]
    reading = read_flag(fields, VLLM, "0.29.0")
    assert reading.culprit is not None and reading.culprit.where == "command[3]"
    assert [o.where for o in reading.occurrences] == ["command[3]", "args[0]"]


@pytest.mark.parametrize("dtype, consumers, kind, text", [
    ("bf16", [(VLLM, "0.29.0")], REBIND, "rebind with bfloat16"),
    ("fp8", [(VLLM, "0.27.1"), (SGLANG, "0.5.18")], REBIND, "rebind with fp8_e4m3"),
    ("nvfp4", [(SGLANG, "0.5.15")], UPGRADE, "upgrade SGLang to >= 0.5.16"),
    ("float16", [(VLLM, "0.17.0")], UPGRADE, "upgrade vLLM to >= 0.18.0"),
    ("float16", [(SGLANG, "0.5.18")], REBIND_DIFFERENT, "rebind with bfloat16 (a different dtype)"),
    ("float16", [(VLLM, "0.29.0"), (SGLANG, "0.5.18")], REBIND_DIFFERENT, "rebind with bfloat16 (a different dtype)"),
    # vLLM 0.10 has no bfloat16 and never takes bf16: the nearest dtype both accept.
    ("bf16", [(VLLM, "0.10.0"), (SGLANG, "0.5.18")], REBIND_DIFFERENT, "rebind with fp8_e4m3 (a different dtype)"),
    # an upgrade comes before a different dtype
    ("fp8_e4m3", [(VLLM, "0.10.0"), (SGLANG, "0.4.1")], UPGRADE, "upgrade SGLang to >= 0.4.2"),
    # vLLM 0.4.2 knows fp8 only, SGLang 0.2.14 fp8_e5m2 only: nothing in common, split.
    ("fp8", [(VLLM, "0.4.2"), (SGLANG, "0.2.14")], SPLIT, "split consumers by engine"),
])
def test_the_fix_names_what_works(dtype, consumers, kind, text):
    fix = remedy(dtype, consumers)
    assert (fix.kind, fix.text) == (kind, text)


# --- End to end ----------------------------------------------------------------------------

def binding(namespace: str, name: str, dtype: str) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": f"{namespace}-{name}", "dtype": dtype}}}


def deployment(namespace: str, name: str, binding_name: str, engine: str, version: Optional[str],
               extra: Optional[list] = None, replicas: int = 1) -> dict:
    role = {"name": "server", "kind": "Server", "replicas": replicas}
    if extra:
        role["extraArgs"] = extra
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": engine, "version": version},
                     "kvCache": {"poolRef": {"name": binding_name}, "connector": "Mooncake"}, "roles": [role]}}


def replica(namespace: str, deployment_name: str, index: int, argv: list) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{deployment_name}-server-r{index}-m0", "namespace": namespace,
                         "labels": {"app.kubernetes.io/name": "model-deployment",
                                    "app.kubernetes.io/instance": deployment_name,
                                    "app.kubernetes.io/component": "server"}},
            "spec": {"containers": [{"name": "main", "command": ["vllm", "serve", "Qwen/Qwen3-8B"] + argv}]}}


SETTING_ON = {"apiVersion": "gpustack.ai/v1", "kind": "Setting",
              "metadata": {"name": SETTING, "namespace": "gpustack-system"},
              "spec": {"value": "true"}, "status": {"value": "true"}}


def by_name(document: dict) -> dict[str, dict]:
    return {item["name"]: item for item in document["items"]}


def findings_of(document: dict, code: str) -> dict[str, dict]:
    return {f["object"]["name"]: f for f in document["findings"] if f["code"] == code}


@pytest.fixture
def upgraded(fake, kube_env):
    """Replicas right after the upgrade, one per case of issue 9's first three points."""
    seed(fake, [
        SETTING_ON,
        binding("up", "legacy", "bf16"), binding("up", "chat", "bfloat16"), binding("up", "turbo", "turboquant_3bit"),
        # 1. the Binding's bf16, which vLLM 0.29.0 refuses: the replica never serves.
        deployment("up", "crash", "legacy", "vLLM", "0.29.0"),
        replica("up", "crash", 0, ["--kv-cache-dtype", "bf16", "--port", "8000"]),
        # 2. the same, with the role's own valid copy later: the operator's copy still kills it.
        deployment("up", "shadow", "legacy", "vLLM", "0.29.0", ["--kv-cache-dtype", "bfloat16"]),
        replica("up", "shadow", 0, ["--kv-cache-dtype", "bf16", "--kv-cache-dtype", "bfloat16"]),
        # 1. on vLLM 0.33 the parser lets bf16 through; the engine refuses it at start.
        deployment("up", "late", "legacy", "vLLM", "0.33.0"),
        replica("up", "late", 0, ["--kv-cache-dtype", "bf16"]),
        # 1. a value the tables do not know: unknown, never rejected.
        # 0.32.1 is no release, between recorded parsers: a value neither table lists may be new there
        # (at a recorded release, 0.29.0 or 0.30.0, the recorded parser refuses turboquant_3bit).
        deployment("up", "turbo", "turbo", "vLLM", "0.32.1"),
        replica("up", "turbo", 0, ["--kv-cache-dtype", "turboquant_3bit"]),
        # 3. only the role's own copy, giving the right value: not rolled yet.
        deployment("up", "waiting", "chat", "vLLM", "0.29.0", ["--kv-cache-dtype", "bfloat16"]),
        replica("up", "waiting", 0, ["--kv-cache-dtype", "bfloat16"]),
        # 3. no flag at all: it runs the engine's default.
        deployment("up", "bare", "chat", "vLLM", "0.29.0"),
        replica("up", "bare", 0, ["--port", "8000"]),
    ])
    return kube_env


def test_a_replica_its_engine_refuses_is_rejected_with_the_engines_words(upgraded):
    result = kvdtype(upgraded, "verify", "-n", "up", "-o", "json")
    assert result.returncode == 1, result.stderr
    found = report(result)
    items = by_name(found)
    assert {name: items[name]["verdict"] for name in items} == {
        "crash-server-r0-m0": "rejected", "shadow-server-r0-m0": "rejected", "late-server-r0-m0": "rejected",
        "turbo-server-r0-m0": "unknown", "waiting-server-r0-m0": "pending", "bare-server-r0-m0": "missing",
    }
    rejected = findings_of(found, "replica-dtype-rejected")
    assert set(rejected) == {"crash-server-r0-m0", "shadow-server-r0-m0", "late-server-r0-m0"}
    assert {rejected[n]["severity"] for n in rejected} == {"error"}
    crash = rejected["crash-server-r0-m0"]
    assert crash["error"].startswith("error: argument --kv-cache-dtype: invalid choice: 'bf16'")
    assert "exits at argument parsing" in crash["message"] and crash["effective"] is None
    # the role's later valid copy does not save it, and the message says so
    shadow = rejected["shadow-server-r0-m0"]["message"]
    assert "the operator's copy comes first and ends the process" in shadow
    assert "bfloat16 at command[5] is valid" in shadow
    assert "engine start" in rejected["late-server-r0-m0"]["message"]
    assert found["summary"]["verdicts"]["rejected"] == 3


def test_a_replica_not_rolled_yet_is_pending_and_counted(upgraded):
    result = kvdtype(upgraded, "verify", "waiting", "-n", "up", "-o", "json")
    assert result.returncode == 0, result.stderr  # a warning, not an error
    found = report(result)
    assert [i["verdict"] for i in found["items"]] == ["pending"]
    (finding,) = found["findings"]
    assert (finding["code"], finding["severity"]) == ("replica-not-rolled", "warning")
    assert "carries no operator copy" in finding["message"]
    table = kvdtype(upgraded, "verify", "waiting", "-n", "up")
    assert "0/1 replicas carry bfloat16 (1 not rolled yet)" in table.stdout
    # --wait keeps waiting for it, and when it gives up the exit says a Pod is not ok
    waited = kvdtype(upgraded, "verify", "waiting", "-n", "up", "--wait=1s", "-o", "json")
    assert waited.returncode == 1, waited.stderr
    document = report(waited)
    assert document["summary"]["wait"]["timedOut"] is True
    assert [(f["code"], f["severity"]) for f in document["findings"]] == [("replica-not-rolled", "error")]
    assert "gave up waiting after 1s: 0/1 replicas carry bfloat16 (1 not rolled yet)" in waited.stderr


def test_the_new_codes_can_be_ignored(upgraded):
    ignored = kvdtype(upgraded, "verify", "-n", "up", "--ignore", "replica-dtype-rejected",
                      "--ignore", "replica-missing-flag", "--ignore", "replica-not-rolled",
                      "--ignore", "pod-dtype-rejected", "--ignore", "duplicate-object", "-o", "json")
    assert ignored.returncode == 0, ignored.stderr
    assert report(ignored)["summary"]["findings"]["ignored"] == 5


def test_find_flags_says_the_operators_copy_kills_the_process(upgraded):
    found = report(kvdtype(upgraded, "find-flags", "-n", "up", "-o", "json"))
    messages = {f["object"]["name"]: f["message"] for f in found["findings"]}
    shadow = messages["shadow"]
    assert "renders its Binding legacy's bf16 first" in shadow
    assert "invalid choice: 'bf16'" in shadow and "does not save it" in shadow
    assert "keeps winning" not in shadow and "wins" not in shadow.split("does not save it")[0]
    assert "the same value as its Binding chat" in messages["waiting"]


def test_an_engine_the_tool_cannot_judge_is_not_judged(fake, kube_env):
    seed(fake, [SETTING_ON, binding("trt", "only", "fp8_e4m3"),
                deployment("trt", "trt-chat", "only", "TensorRT-LLM", "1.2.0")])
    found = report(kvdtype(kube_env, "check", "-n", "trt", "-o", "json"))
    (item,) = found["items"]
    assert item["verdict"] == "not-judged"
    assert item["fix"] == "confirm the spelling with TensorRT-LLM"
    assert [f["code"] for f in found["findings"]] == ["engine-unknown"]
    table = kvdtype(kube_env, "check", "-n", "trt")
    assert "not-judged" in table.stdout and "none needed" not in table.stdout


@pytest.mark.parametrize("dtype, engine, version, fix", [
    ("nvfp4", "SGLang", "0.5.15", "upgrade SGLang to >= 0.5.16"),
    ("float16", "vLLM", "0.17.0", "upgrade vLLM to >= 0.18.0"),
    ("float16", "SGLang", "0.5.18", "rebind with bfloat16 (a different dtype)"),
])
def test_check_names_a_fix_that_works(fake, kube_env, dtype, engine, version, fix):
    seed(fake, [SETTING_ON, binding("fix", "b", dtype), deployment("fix", "d", "b", engine, version)])
    found = report(kvdtype(kube_env, "check", "-n", "fix", "-o", "json"))
    (item,) = found["items"]
    assert (item["verdict"], item["fix"]) == ("rejected", fix)
    (finding,) = findings_of(found, "dtype-rejected").values()
    assert finding["fix"] == fix and "split" not in finding["message"]
    if "different" in fix:
        assert "changes the KV-cache precision" in finding["message"] and finding["suggestion"] is None


def test_rebind_refuses_with_the_same_fix(fake, kube_env):
    """escape rebind judges the new dtype as check does, and quotes the fix that works."""
    seed(fake, [SETTING_ON, binding("fix", "b", "fp8_e5m2"), deployment("fix", "d", "b", "SGLang", "0.5.15")])
    result = kvdtype(kube_env, "escape", "rebind", "b", "-n", "fix", "--dtype", "nvfp4")
    assert result.returncode == 3, result.stderr
    assert "SGLang 0.5.15 does not accept nvfp4" in result.stderr
    assert "(fix: upgrade SGLang to >= 0.5.16)" in result.stderr


def test_escape_on_names_the_bindings_check_rejects(fake, kube_env):
    """escape on's preview uses check's judgement, version by version."""
    setting = dict(SETTING_ON, spec={"value": "false"}, status={"value": "false"})
    seed(fake, [setting, binding("fix", "b", "nvfp4"), deployment("fix", "d", "b", "SGLang", "0.5.15"),
                binding("fix", "fine", "nvfp4"), deployment("fix", "e", "fine", "SGLang", "0.5.16")])
    result = kvdtype(kube_env, "escape", "on", "--dry-run=client", "-o", "json")
    assert result.returncode == 0, result.stderr
    (item,) = report(result)["items"]
    assert item["rejectedBindings"] == ["fix/b"]


# --- Empty results name where they looked ---------------------------------------------------

def test_an_empty_namespace_is_named(fake, kube_env):
    result = kvdtype(kube_env, "check")
    assert result.returncode == 0
    assert "No KVCachePoolBindings found in namespace default." in result.stderr
    assert result.stdout.startswith("In namespace default: 0 Binding(s)")
    everywhere = kvdtype(kube_env, "verify", "-A")
    assert "in any namespace." in everywhere.stderr and everywhere.stdout.startswith("In any namespace: ")
    flags = kvdtype(kube_env, "find-flags", "-n", "team-z", "-o", "json")
    assert report(flags)["summary"]["scope"] == "in namespace team-z"


@pytest.mark.parametrize("content", ["", "\n   \n", "# only a comment\n---\n# another\n"])
def test_input_holding_no_object_is_an_error(kube_env, tmp_path, content):
    dump = tmp_path / "dump.yaml"
    dump.write_text(content)
    result = direct(kube_env, "check", "-f", str(dump))
    assert result.returncode == 3 and result.stdout == ""
    assert f"error: {dump} holds no Kubernetes object" in result.stderr
    piped = direct(kube_env, "find-flags", "-f", "-", input=content)
    assert piped.returncode == 3 and "standard input holds no Kubernetes object" in piped.stderr


def test_an_empty_list_is_a_valid_empty_answer(kube_env, tmp_path):
    dump = tmp_path / "dump.yaml"
    dump.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    result = direct(kube_env, "verify", "-f", str(dump))
    assert result.returncode == 0, result.stderr
    assert f"in {dump} (a List with no items)." in result.stderr


# --- The same object read twice is one object ----------------------------------------------

def test_the_examples_read_twice_count_once(kube_env):
    once = report(direct(kube_env, "check", "-f", str(EXAMPLES), "-o", "json"))
    twice = report(direct(kube_env, "check", "-f", str(EXAMPLES), "-f", str(EXAMPLES), "-o", "json"))
    assert twice["summary"]["bindings"] == once["summary"]["bindings"] == 8
    assert codes(twice) == codes(once)
    assert twice["items"] == once["items"]


def test_a_changed_copy_wins_and_is_named(kube_env, tmp_path):
    original = EXAMPLES / "team-a.yaml"
    changed = tmp_path / "team-a-fixed.yaml"
    dump = yaml.safe_load(original.read_text())  # a kind: List, as kubectl get writes it
    (legacy,) = [o for o in dump["items"] if o["kind"] == "KVCachePoolBinding" and o["metadata"]["name"] == "legacy"]
    legacy["spec"]["domain"]["dtype"] = "bfloat16"
    changed.write_text(yaml.safe_dump(dump))
    result = direct(kube_env, "check", "-f", str(original), "-f", str(changed), "-o", "json")
    found = report(result)
    items = by_name(found)
    assert items["legacy"]["dtype"] == "bfloat16" and items["legacy"]["verdict"] == "ok"  # the one read last
    (duplicate,) = findings_of(found, "duplicate-object").values()
    assert duplicate["severity"] == "warning" and duplicate["object"]["kind"] == "KVCachePoolBinding"
    assert duplicate["files"] == [str(original), str(changed)]
    assert str(original) in duplicate["message"] and str(changed) in duplicate["message"]
    assert len(found["items"]) == 3  # chat, legacy, scratch: once each
    reversed_order = report(direct(kube_env, "check", "-f", str(changed), "-f", str(original), "-o", "json"))
    assert by_name(reversed_order)["legacy"]["verdict"] == "rejected"
    assert Path(original).read_text() != changed.read_text()



def test_the_fix_is_sought_once_per_distinct_question():
    """Every rejected Binding asks for its fix; the same dtype and consumers get the answer already found."""
    from kubectl_kvdtype._engines.verdicts import _remedy_cached

    first = remedy("bf16", [(VLLM, "0.29.0"), (SGLANG, "0.5.18")])
    hits = _remedy_cached.cache_info().hits
    assert remedy("bf16", [(VLLM, "0.29.0"), (SGLANG, "0.5.18")]) == first
    assert _remedy_cached.cache_info().hits == hits + 1
    assert remedy("bf16", [(VLLM, ["0.29.0"])]).kind == first.kind  # an unhashable version: sought, not memoized

# --- The parsers built: only where the recorded choices cannot answer --------------------------

def _rendered_cases() -> list[tuple[str, str, str]]:
    """(engine, recorded version, listed choice) for every recorded table whose parser lists the choices."""
    from kubectl_kvdtype._engines import parsers as _parsers

    cases = []
    for engine in (VLLM, SGLANG):
        for version in _parsers.recorded_versions(engine):
            table = _parsers.table_version(engine, version)
            cases += [(engine, version, choice) for choice in _parsers.recorded_choices(engine, table) or ()]
    return cases


def test_an_accepted_rendering_read_from_the_choices_is_the_parsers_reading():
    """``renders`` answers a listed spelling at a recorded version from the choices alone: the
    same reading, occurrences and notes included, as the engine's parser gives the same argv."""
    from kubectl_kvdtype._engines.verdicts import _rendered_by_choices, read_role

    cases = _rendered_cases()
    assert {engine for engine, _, _ in cases} == {VLLM, SGLANG}
    for engine, version, dtype in cases:
        by_choices = _rendered_by_choices(engine, version, dtype)
        assert by_choices is not None, (engine, version, dtype)
        assert by_choices == read_role((), engine, version, operator_dtype=dtype), (engine, version, dtype)


@pytest.mark.e2e  # a process of its own: the parsers built are counted from empty caches
def test_only_a_refused_rendering_builds_its_engines_parser():
    """An accepted spelling builds no parser; a refused one builds its (engine, table)'s, whose
    words the failure quotes; a version between recordings is read by the parser as before."""
    script = """
from kubectl_kvdtype._engines import parsers, verdicts
def built():
    return parsers._parser.cache_info().currsize
print(verdicts.renders('vLLM', '0.29.0', 'fp8_e4m3').state, verdicts.renders('SGLang', '0.5.18', 'auto').state, built())
print(verdicts.renders('vLLM', '0.29.0', 'bf16').state, built())
print(verdicts.renders('vLLM', '0.32.1', 'fp8').state, built())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == [f"{VALUE} {VALUE} 0", f"{FAILED} 1", f"{VALUE} 2"]


def test_a_memoized_judgement_remembers_a_hashable_call_and_computes_an_unhashable_one():
    """``_kits.memo.memoized``: the one memoizer of the engines' judgements. A list or mapping where a
    version or argv entry belongs (a hand-written manifest) is computed each time, never an error."""
    from kubectl_kvdtype._engines import records, verdicts
    from kubectl_kvdtype._kits.memo import memoized

    calls: list = []

    @memoized(maxsize=8)
    def shown(value: object) -> str:
        calls.append(value)
        return repr(value)

    assert shown("a") == shown("a") == "'a'" and calls == ["a"] and shown.cache_info().hits == 1
    assert shown(["a"]) == shown(["a"]) == "['a']" and calls == ["a", ["a"], ["a"]]
    for judged in (records.judge_spelling(VLLM, ["0.29.0"], "bf16"), verdicts.judge(VLLM, {"v": 1}, "bf16")):
        assert judged.verdict in ("accepted", "rejected", "unknown")  # judged at the reference version
    assert verdicts.read_role(["--kv-cache-dtype", ["fp8"]], VLLM, "0.29.0").state  # an argv entry that is a list

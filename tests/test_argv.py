"""The argv reader (docs/engines.md, "How each engine reads the flag"): every form, for both engines,
in the reader and end to end.

The reader (``_engines.verdicts.find_dtype_flags``) is the one place that knows how vLLM and SGLang read
``--kv-cache-dtype`` out of an argv; ``find-flags`` and ``verify`` both use it. The last tests run
the same table through real kubectl against the fake API server, and the guide's Step 2 jq filter
over the same objects, to show where the guide's regex ``^--kv[-_]cache[-_]dtype`` is wrong.
"""

from __future__ import annotations

import subprocess

import pytest

from _support import kvdtype, report, seed
from kubectl_kvdtype._engines.records import SGLANG, VLLM
from kubectl_kvdtype._engines.verdicts import (
    ABBREVIATION,
    EXACT,
    SPACED,
    UNDERSCORE,
    FlagReading,
    find_dtype_flags,
    find_in_fields,
    read_flag,
)

pytestmark = pytest.mark.version_sensitive  # argparse, the argv reader, completion or the man page (test_tiers.py)

# (case, argv, engine, version, [(spelling, value, read)], effective value)
TABLE = [
    ("space form", ["--kv-cache-dtype", "fp8_e4m3"], VLLM, "0.29.0", [(EXACT, "fp8_e4m3", True)], "fp8_e4m3"),
    ("space form", ["--kv-cache-dtype", "fp8_e4m3"], SGLANG, "0.5.18", [(EXACT, "fp8_e4m3", True)], "fp8_e4m3"),
    ("equals form", ["--kv-cache-dtype=bfloat16"], VLLM, "0.29.0", [(EXACT, "bfloat16", True)], "bfloat16"),
    ("equals form", ["--kv-cache-dtype=bfloat16"], SGLANG, "0.5.18", [(EXACT, "bfloat16", True)], "bfloat16"),
    ("underscore", ["--kv_cache_dtype", "fp8"], VLLM, "0.29.0", [(UNDERSCORE, "fp8", True)], "fp8"),
    ("underscore", ["--kv_cache_dtype", "fp8"], SGLANG, "0.5.18", [(UNDERSCORE, "fp8", False)], None),
    ("underscore equals", ["--kv_cache_dtype=fp8"], VLLM, "0.29.0", [(UNDERSCORE, "fp8", True)], "fp8"),
    ("underscore equals", ["--kv_cache_dtype=fp8"], SGLANG, "0.5.18", [(UNDERSCORE, "fp8", False)], None),
    ("mixed underscore", ["--kv-cache_dtype=fp8"], VLLM, "0.29.0", [(UNDERSCORE, "fp8", True)], "fp8"),
    ("twice, last wins", ["--kv-cache-dtype", "fp8", "--max-model-len=4096", "--kv-cache-dtype=bfloat16"], VLLM,
     "0.29.0", [(EXACT, "fp8", True), (EXACT, "bfloat16", True)], "bfloat16"),
    ("twice, last wins", ["--kv-cache-dtype=bf16", "--kv-cache-dtype", "fp8_e4m3"], SGLANG, "0.5.18",
     [(EXACT, "bf16", True), (EXACT, "fp8_e4m3", True)], "fp8_e4m3"),
    ("twice, unread last", ["--kv-cache-dtype", "bf16", "--kv_cache_dtype", "fp8"], SGLANG, "0.5.18",
     [(EXACT, "bf16", True), (UNDERSCORE, "fp8", False)], None),  # the unread copy fails the whole parse
    ("abbreviation before 0.19", ["--kv-cache-dt=fp8"], VLLM, "0.18.0", [(ABBREVIATION, "fp8", True)], "fp8"),
    ("abbreviation from 0.19 (ambiguous)", ["--kv-cache-dt=fp8"], VLLM, "0.19.0", [(ABBREVIATION, "fp8", False)], None),
    ("abbreviation, reference version", ["--kv-cache-dty", "fp8"], VLLM, None, [(ABBREVIATION, "fp8", False)], None),
    ("abbreviation", ["--kv-cache-d", "fp8_e4m3"], SGLANG, "0.5.18", [(ABBREVIATION, "fp8_e4m3", True)], "fp8_e4m3"),
    ("abbreviation with underscores", ["--kv_cache_dt=fp8"], VLLM, "0.18.0", [(ABBREVIATION, "fp8", True)], "fp8"),
    ("abbreviation with underscores", ["--kv_cache_dt=fp8"], SGLANG, "0.5.18", [(ABBREVIATION, "fp8", False)], None),
    ("longer flag", ["--kv-cache-dtype-skip-layers", "0,1"], VLLM, "0.29.0", [], None),
    ("longer flag", ["--kv-cache-dtype-skip-layers=0,1"], SGLANG, "0.5.18", [], None),
    ("longer underscore flag", ["--kv_cache_dtype_skip_layers", "0"], VLLM, "0.29.0", [], None),
    ("too short a prefix", ["--kv-cache", "x"], VLLM, "0.18.0", [], None),
    ("other flag", ["--kv-cache-memory=4G", "--dtype", "bfloat16"], VLLM, "0.29.0", [], None),
    ("case matters", ["--KV-CACHE-DTYPE", "fp8"], VLLM, "0.29.0", [], None),
    ("after --", ["serve", "--", "--kv-cache-dtype", "fp8"], VLLM, "0.29.0", [], None),
    ("no value at the end", ["--kv-cache-dtype"], VLLM, "0.29.0", [(EXACT, None, True)], None),
    ("next token is an option", ["--kv-cache-dtype", "--port", "8000"], SGLANG, "0.5.18", [(EXACT, None, True)], None),
    ("empty value", ["--kv-cache-dtype="], VLLM, "0.29.0", [(EXACT, "", True)], None),  # invalid choice: ''
    ("one entry with a space", ["--kv-cache-dtype fp8"], VLLM, "0.29.0", [(SPACED, "fp8", False)], None),
    ("shell string", ["sh", "-c", "exec vllm serve m --kv-cache-dtype fp8_e4m3"], VLLM, "0.29.0",
     [(EXACT, "fp8_e4m3", True)], "fp8_e4m3"),
    ("value that looks like the flag is a value", ["--served-model-name", "x", "--kv-cache-dtype", "auto"], VLLM,
     "0.29.0", [(EXACT, "auto", True)], "auto"),
]


@pytest.mark.parametrize("case, argv, engine, version, expected, effective", TABLE,
                         ids=[f"{row[2]}-{row[0]}" for row in TABLE])
def test_reader(case, argv, engine, version, expected, effective):
    found = find_dtype_flags(argv, engine, version)
    assert [(o.spelling, o.value, o.read) for o in found] == expected, case
    reading: FlagReading = read_flag([("argv", argv)], engine, version)
    assert (reading.value if reading.runs else None) == effective
    for occurrence in found:
        if occurrence.spelling != EXACT:
            assert occurrence.note, "every non-plain spelling says why"


def test_unread_forms_say_why():
    (sglang,) = find_dtype_flags(["--kv_cache_dtype", "fp8"], SGLANG, "0.5.18")
    assert "unrecognized arguments" in sglang.note
    (ambiguous,) = find_dtype_flags(["--kv-cache-dt=fp8"], VLLM, "0.29.0")
    assert "ambiguous" in ambiguous.note and "skip-layers" in ambiguous.note


def test_unknown_engine_reads_every_spelling():
    found = find_dtype_flags(["--kv_cache_dtype", "a", "--kv-cache-dt=b"], None, None)
    assert [(o.spelling, o.read) for o in found] == [(UNDERSCORE, True), (ABBREVIATION, True)]


def test_fields_are_one_argv_located_per_field():
    """A container's command and args are one argv: a value can cross the boundary."""
    fields = [("command", ["vllm", "serve", "m", "--kv-cache-dtype"]), ("args", ["bfloat16", "--kv-cache-dtype=fp8"])]
    found = find_in_fields(fields, VLLM, "0.29.0")
    assert [(o.field, o.index, o.value) for o in found] == [("command", 3, "bfloat16"), ("args", 1, "fp8")]
    assert [o.where for o in found] == ["command[3]", "args[1]"]
    assert find_in_fields([("command", ["sh", "--"]), ("args", ["--kv-cache-dtype", "x"])], VLLM) == []
    assert find_in_fields([("command", None), ("args", "oops")], VLLM) == []


# --- End to end: the same forms as role extraArgs, through real kubectl ----------------------

BINDING = {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
           "metadata": {"name": "b", "namespace": "argv"},
           "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": "argv", "dtype": "bfloat16"}}}

# (deployment name, engine, version, extraArgs, reported by find-flags, its value, guide's regex lists it)
ROLES = [
    ("vllm-space", VLLM, "0.29.0", ["--kv-cache-dtype", "fp8"], True, "fp8", True),
    ("sglang-space", SGLANG, "0.5.18", ["--kv-cache-dtype", "bf16"], True, "bf16", True),
    ("vllm-equals", VLLM, "0.29.0", ["--kv-cache-dtype=bfloat16"], True, "bfloat16", True),
    ("sglang-equals", SGLANG, "0.5.18", ["--kv-cache-dtype=bfloat16"], True, "bfloat16", True),
    ("vllm-underscore", VLLM, "0.29.0", ["--kv_cache_dtype", "fp8"], True, "fp8", True),
    ("sglang-underscore", SGLANG, "0.5.18", ["--kv_cache_dtype=fp8_e4m3"], True, None, True),
    ("vllm-twice", VLLM, "0.29.0", ["--kv-cache-dtype", "fp8", "--kv-cache-dtype=fp8_e5m2"], True, "fp8_e5m2", True),
    ("sglang-twice", SGLANG, "0.5.18", ["--kv-cache-dtype=bf16", "--kv-cache-dtype", "bfloat16"], True, "bfloat16",
     True),
    # The guide's regex is anchored at the full name: it misses every abbreviation.
    ("vllm-abbrev", VLLM, "0.18.0", ["--kv-cache-dt=fp8"], True, "fp8", False),
    ("vllm-abbrev-ambiguous", VLLM, "0.29.0", ["--kv-cache-dt=fp8"], True, None, False),
    ("sglang-abbrev", SGLANG, "0.5.18", ["--kv-cache-dty", "fp8_e4m3"], True, "fp8_e4m3", False),
    # ...and it is not anchored at the end: it over-matches the longer, different flag.
    ("vllm-skip-layers", VLLM, "0.29.0", ["--kv-cache-dtype-skip-layers", "0,1"], False, None, True),
    ("sglang-skip-layers", SGLANG, "0.5.18", ["--kv_cache_dtype_skip_layers=0"], False, None, True),
    ("vllm-clean", VLLM, "0.29.0", ["--max-model-len=4096"], False, None, False),
]

#: The guide's Step 2 pipeline, verbatim (docs/engines.md, "The upgrade guide's commands").
GUIDE_STEP2_JQ = '''.items[]
  | select(.spec.kvCache != null) | . as $md | .spec.roles[]
  | select((.command // []) == [] and ((.extraArgs // []) | any(test("^--kv[-_]cache[-_]dtype"))))
  | "\\($md.metadata.namespace)/\\($md.metadata.name) role \\(.name)"'''


def _deployment(name: str, engine: str, version: str, extra: list[str]) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": "argv"},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": engine, "version": version},
                     "kvCache": {"poolRef": {"name": "b"}},
                     "roles": [{"name": "server", "kind": "Server", "replicas": 1, "extraArgs": extra}]}}


@pytest.fixture
def argv_cluster(fake, kube_env):
    seed(fake, [BINDING] + [_deployment(n, e, v, x) for n, e, v, x, *_ in ROLES])
    return kube_env


def guide_step2(env: dict, kubectl_bin: str) -> set[str]:
    """Run ``kubectl get modeldeployments -A -o json | jq -r '<the guide's filter>'``."""
    get = subprocess.run([kubectl_bin, "get", "modeldeployments", "-A", "-o", "json"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert get.returncode == 0, get.stderr
    jq = subprocess.run(["jq", "-r", GUIDE_STEP2_JQ], input=get.stdout, capture_output=True, text=True, timeout=60)
    assert jq.returncode == 0, jq.stderr
    return {line for line in jq.stdout.splitlines() if line.strip()}


def test_every_form_end_to_end_and_against_the_guide(argv_cluster, kubectl_bin):
    found = report(kvdtype(argv_cluster, "find-flags", "-n", "argv", "-o", "json"))
    by_name = {f["object"]["name"]: f for f in found["findings"]}
    for name, _engine, _, _, reported, value, _ in ROLES:
        assert (name in by_name) == reported, name
        if reported:
            assert by_name[name]["value"] == value, name
            assert by_name[name]["code"] == "role-flag" and by_name[name]["bindingDtype"] == "bfloat16"
    assert "does not read" in by_name["sglang-underscore"]["message"]
    assert "fails at startup anyway" in by_name["vllm-abbrev-ambiguous"]["message"]
    assert "abbreviation" in by_name["vllm-abbrev"]["message"]
    assert "the same value" in by_name["vllm-equals"]["message"]
    assert "runs fp8_e5m2 today" in by_name["vllm-twice"]["message"]

    guide = guide_step2(argv_cluster, kubectl_bin)
    plugin = {f"argv/{name} role server" for name in by_name}
    assert guide == {f"argv/{name} role server" for name, *_, listed in ROLES if listed}
    # Where they disagree, the plugin is right: the guide lists the longer flag, misses abbreviations.
    assert guide - plugin == {"argv/vllm-skip-layers role server", "argv/sglang-skip-layers role server"}
    assert plugin - guide == {"argv/vllm-abbrev role server", "argv/vllm-abbrev-ambiguous role server",
                              "argv/sglang-abbrev role server"}

"""find-flags and verify read argvs through the exact reader (_argv), end to end through real kubectl.

What the tests in test_argv.py and test_engine_corpus.py show for the reader alone, shown here on
objects served by the fake API server: SGLang's shortest abbreviations, the kubelet's ``$(VAR)``
expansion from the container's ``env``, shell lines, and a value set from outside the object.
"""

from __future__ import annotations

import pytest

from _support import kvdtype, report, seed
from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines import verdicts as _verdicts
from kubectl_kvdtype._sources import model as _model

pytestmark = pytest.mark.version_sensitive  # argparse, the argv reader, completion or the man page (test_tiers.py)

NS = "wire"
SGLANG_BASE = ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--enable-metrics"]
VLLM_BASE = ["vllm", "serve", "Qwen/Qwen3-8B"]
TAIL = ["--host", "0.0.0.0", "--port", "8000"]


def binding(name: str, dtype: str) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": name, "dtype": dtype}}}


def deployment(name: str, engine: str, version: str, binding_name: str, extra: list[str]) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": engine, "version": version},
                     "kvCache": {"poolRef": {"name": binding_name}},
                     "roles": [{"name": "server", "kind": "Server", "replicas": 1, "extraArgs": extra}]}}


def replica(deployment_name: str, container: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{deployment_name}-server-r0-m0", "namespace": NS,
                         "labels": {"app.kubernetes.io/name": "model-deployment",
                                    "app.kubernetes.io/instance": deployment_name,
                                    "app.kubernetes.io/component": "server"}},
            "spec": {"containers": [{"name": "main", "image": "engine", **container}]}}


OBJECTS = [
    {"apiVersion": "gpustack.ai/v1", "kind": "Setting",
     "metadata": {"name": _model.SETTING_NAME, "namespace": "gpustack-system"},
     "spec": {"value": "true"}, "status": {"value": "true"}},
    binding("bf", "bfloat16"), binding("f8", "fp8_e4m3"),
    # SGLang reads --kv-cache as --kv-cache-dtype (no other SGLang option starts so).
    deployment("sg-abbrev", "SGLang", "0.5.18", "bf", ["--kv-cache", "fp8_e4m3"]),
    replica("sg-abbrev", {"command": SGLANG_BASE + ["--kv-cache-dtype", "bfloat16", "--kv-cache", "fp8_e4m3"] + TAIL}),
    # A longer, different option: never the flag, whatever its spelling.
    deployment("sg-skip", "SGLang", "0.5.18", "bf", ["--kv-cache-dtype-skip-layers", "0"]),
    # $(DT) is expanded by the kubelet from the container's env.
    deployment("vl-env", "vLLM", "0.29.0", "f8", []),
    replica("vl-env", {"command": VLLM_BASE + ["--kv-cache-dtype", "$(DT)"] + TAIL,
                       "env": [{"name": "DT", "value": "fp8_e4m3"}, {"name": "HOME", "value": "/root"}]}),
    # A shell line: the variable assigned earlier in the same line is the value.
    deployment("vl-shell", "vLLM", "0.29.0", "f8", []),
    replica("vl-shell", {"command": ["sh", "-c", "DT=fp8_e4m3; exec vllm serve Qwen/Qwen3-8B --kv-cache-dtype $DT"]}),
    # ...and one the shell line assigns differently from the Binding.
    deployment("vl-shell-other", "vLLM", "0.29.0", "f8", []),
    replica("vl-shell-other", {"command": ["bash", "-c", "DT=bfloat16 && exec vllm serve M --kv-cache-dtype \"$DT\""]}),
    # A value set from a Secret cannot be known from the object.
    deployment("vl-secret", "vLLM", "0.29.0", "f8", []),
    replica("vl-secret", {"command": VLLM_BASE + ["--kv-cache-dtype", "$(DT)"],
                          "env": [{"name": "DT", "valueFrom": {"secretKeyRef": {"name": "s", "key": "dtype"}}}]}),
    # An injected SGLang Pod passing the flag as --kv-cac: the webhook refuses that spelling too.
    {"apiVersion": "v1", "kind": "Pod",
     "metadata": {"name": "sg-injected", "namespace": NS, "labels": {_model.INJECT_LABEL: "true"},
                  "annotations": {_model.BINDING_ANNOTATION: "bf", _model.ENGINE_ANNOTATION: "SGLang"}},
     "spec": {"containers": [{"name": "engine", "args": ["--model-path", "M", "--kv-cac", "bfloat16"]}]}},
]


@pytest.fixture
def wired(fake, kube_env):
    seed(fake, OBJECTS)
    return kube_env


def test_find_flags_reads_sglang_abbreviations_and_never_the_longer_option(wired):
    found = report(kvdtype(wired, "find-flags", "-n", NS, "-o", "json"))
    by_name = {f["object"]["name"]: f for f in found["findings"]}
    assert set(by_name) == {"sg-abbrev", "sg-injected"}
    role = by_name["sg-abbrev"]
    assert (role["code"], role["value"], role["bindingDtype"]) == ("role-flag", "fp8_e4m3", "bfloat16")
    assert [(o["token"], o["spelling"], o["read"]) for o in role["occurrences"]] == [
        ("--kv-cache", "abbreviation", True)]
    assert "runs fp8_e4m3 today" in role["message"]
    pod = by_name["sg-injected"]
    assert (pod["code"], pod["value"]) == ("pod-flag", "bfloat16")


def test_verify_reads_abbreviations_env_and_shell_lines(wired):
    result = kvdtype(wired, "verify", "-n", NS, "-o", "json")
    found = report(result)
    items = {item["name"]: item for item in found["items"]}
    verdicts = {name: (item["verdict"], item["effective"]) for name, item in items.items()}
    assert verdicts == {
        "sg-abbrev-server-r0-m0": ("mismatch", "fp8_e4m3"),  # the role's --kv-cache copy comes later and wins
        "vl-env-server-r0-m0": ("ok", "fp8_e4m3"),
        "vl-shell-server-r0-m0": ("ok", "fp8_e4m3"),
        "vl-shell-other-server-r0-m0": ("mismatch", "bfloat16"),
        "vl-secret-server-r0-m0": ("unknown", None),
        "sg-injected": ("ok", "bfloat16"),  # its --kv-cac copy in args is read as the flag
    }
    occurrences = items["sg-abbrev-server-r0-m0"]["occurrences"]
    assert [(o["token"], o["origin"]) for o in occurrences] == [
        ("--kv-cache-dtype", "operator"), ("--kv-cache", "extraArgs")]
    assert [o["value"] for o in items["vl-env-server-r0-m0"]["occurrences"]] == ["fp8_e4m3"]  # expanded
    assert items["vl-shell-server-r0-m0"]["occurrences"][0].get("inShell") is True
    assert result.returncode == 1  # the two mismatches are errors


def test_read_flag_in_process():
    env = [{"name": "DT", "value": "fp8_e5m2"}]
    assert _verdicts.read_flag([("command", VLLM_BASE + ["--kv-cache-dtype", "$(DT)"])], "vLLM", "0.29.0", env).value \
        == "fp8_e5m2"
    shell = _verdicts.read_flag([("command", ["sh", "-c", "DT=fp8_e5m2; exec vllm serve M --kv-cache-dtype $DT"])],
                               "vLLM", "0.29.0")
    assert (shell.state, shell.value) == (_verdicts.VALUE, "fp8_e5m2")
    # Without the env the value is not the literal "$(DT)": the kubelet leaves it, so it may come from envFrom.
    assert _verdicts.read_flag([("command", VLLM_BASE + ["--kv-cache-dtype", "$(DT)"])], "vLLM", "0.29.0").state \
        == _verdicts.UNSURE
    role = _verdicts.read_role(["--kv-cac", "fp8_e4m3"], "SGLang", "0.5.18", operator_dtype="bfloat16")
    assert (role.state, role.value, role.culprit.field) == (_verdicts.VALUE, "fp8_e4m3", "extraArgs")
    assert _verdicts.read_role(["--kv-ca", "fp8_e4m3"], "SGLang", "0.5.18").state == _verdicts.FAILED  # ambiguous
    assert _verdicts.read_role(["--kv-ca", "fp8_e4m3"], "SGLang", "0.5.18").occurrences == ()  # not the flag


def test_the_refused_spellings_follow_the_recorded_tables():
    from kubectl_kvdtype._engines import parsers as _parsers

    # The shortest abbreviation each engine reads, derived from its recorded parsers.
    assert _parsers.shortest_flag_prefix("SGLang") == len("--kv-cac")
    assert _parsers.shortest_flag_prefix("vLLM") == len("--kv-cache-d")  # 0.18, before --kv-cache-dtype-skip-layers
    for token in ("--kv-cache-dtype-skip-layers", "--kv_cache_dtype_skip_layers", "--kv-ca", "-kv-cache-dtype"):
        for engine in _records.ENGINES:
            assert _verdicts.find_dtype_flags([token, "x"], engine, None) == [], (token, engine)
    (sglang,) = _verdicts.find_dtype_flags(["--kv-cac", "x"], "SGLang", "0.5.23")
    assert sglang.read
    (vllm,) = _verdicts.find_dtype_flags(["--kv-cac", "x"], None, None)  # unknown engine: any engine's reading
    assert vllm.read


def test_slim_pods_keep_env_only_when_the_argv_refers_to_a_variable():
    env = [{"name": "DT", "value": "fp8_e4m3"}]
    referring = {"spec": {"containers": [{"name": "main", "command": ["vllm", "serve", "$(M)"], "env": env}]}}
    plain = {"spec": {"containers": [{"name": "main", "command": ["vllm", "serve", "M"], "env": env}]}}
    assert _model.slim_pod(referring)["spec"]["containers"][0]["env"] == env
    assert "env" not in _model.slim_pod(plain)["spec"]["containers"][0]


def test_every_engine_is_one_record():
    for record in _records.RECORDS:
        assert _records.canonical_engine(record.name) == record.name
        assert all(_records.canonical_engine(alias.upper()) == record.name for alias in record.aliases)
        assert _verdicts.judge(record.name, None, "auto").verdict == _records.ACCEPTED
        assert record.base_command and record.invocations

"""What preflight predicts about the operator's admission rule is what the rule then does, on the
real API server (the rule as a ValidatingAdmissionPolicy, tests/operator/policies.yaml): roles of
pool-attached ModelDeployments and injected Pods passing the flag in each spelling, at each engine
version, stored as before the upgrade; preflight run once over them; then, with kubectl, each one's
next write (a role's next edit, a Pod's next incarnation) tried with --dry-run=server. Each case's
expectation is the engines' own reading (docs/engines.md): refused exactly where the engine at that
version reads the entry as --kv-cache-dtype."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

import pytest

pytestmark = pytest.mark.real

VALID = "fp8_e4m3"  # every version of both engines here accepts it, so a read copy starts (own-copy)
SGLANG = ("python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B")


@dataclass(frozen=True)
class Role:
    name: str
    extra_args: tuple[str, ...]
    refused: bool  # the engine at that version reads an entry as the flag
    engine: object = "vLLM"
    version: Optional[str] = "0.29.0"
    command: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pod:
    name: str
    args: tuple[str, ...]
    refused: bool
    engine: str = "vLLM"
    command: tuple[str, ...] = ("vllm", "serve", "Qwen/Qwen3-8B")
    injected: bool = False
    sidecar_first: bool = False  # the target is named by annotation, after a sidecar holding the flag


ROLES = (
    Role("spaced", ("--kv-cache-dtype", VALID), True),
    Role("equals", (f"--kv-cache-dtype={VALID}",), True),
    Role("underscores", (f"--kv_cache_dtype={VALID}",), True),  # vLLM rewrites them
    Role("prefix-029", (f"--kv-cache-dt={VALID}",), False),  # ambiguous from 0.19: fails at startup
    Role("prefix-018", (f"--kv-cache-dt={VALID}",), True, version="0.18.0"),
    Role("prefix-010", (f"--kv_cache_d={VALID}",), True, version="0.10.0"),  # read as 0.18, the oldest recorded
    Role("prefix-unreadable", (f"--kv-cache-dt={VALID}",), False, version="nightly"),  # the reference release
    Role("prefix-oldest-shape", (f"--kv-cache-dty={VALID}",), True, engine="vllm", version="0.18.0"),
    Role("shorter", ("--kv-cache", VALID), False),  # ambiguous on every version
    Role("skip-layers", ("--kv-cache-dtype-skip-layers=0",), False),  # another option
    Role("one-entry", (f"--kv-cache-dtype {VALID}",), False),  # a positional, not the flag
    Role("take-over", (f"--kv-cache-dtype={VALID}",), False, command=("vllm", "serve", "Qwen/Qwen3-8B")),
    Role("sglang-prefix", (f"--kv-cac={VALID}",), True, engine="SGLang", version="0.5.18"),
    Role("sglang-underscores", (f"--kv_cache_dtype={VALID}",), False, engine="SGLang", version="0.5.18"),
    Role("sglang-shorter", (f"--kv-ca={VALID}",), False, engine="SGLang", version="0.5.18"),
)
PODS = (
    Pod("own", ("--kv-cache-dtype", VALID), True),
    Pod("in-command", (), True, command=("vllm", "serve", "Qwen/Qwen3-8B", f"--kv-cache-dtype={VALID}")),
    Pod("webhooks-copy", ("--max-model-len=4096", "--kv-cache-dtype", "bfloat16"), False, injected=True),
    Pod("own-and-webhooks", ("--kv-cache-dtype", VALID, "--kv-cache-dtype", "bfloat16"), True, injected=True),
    Pod("prefix", (f"--kv-cache-dt={VALID}",), False),  # a Pod is read at the reference release
    Pod("sglang-prefix", ("--kv-cac", VALID), True, engine="SGLang", command=SGLANG),
    Pod("sglang-underscores", ("--kv_cache_dtype", VALID), False, engine="SGLang", command=SGLANG),
    Pod("no-engine", (f"--kv_cache_dt={VALID}",), True, engine=""),  # any engine's reading (vLLM 0.18's)
    Pod("sidecar", (), False, sidecar_first=True),
)


def _deployment(role: Role) -> dict:
    engine = {"name": role.engine, "version": role.version} if role.engine != "vllm" else role.engine
    spec = {"model": {"name": "Qwen/Qwen3-8B"}, "engine": engine, "kvCache": {"poolRef": {"name": "chat"}},
            "roles": [{"name": "server", "kind": "Server", "replicas": 1, "extraArgs": list(role.extra_args),
                       "command": list(role.command)}]}
    if role.engine == "vllm":
        spec["engineVersion"] = role.version
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment", "metadata": {"name": role.name},
            "spec": spec}


def _pod(pod: Pod, name: Optional[str] = None) -> dict:
    annotations = {"kvcache.gpustack.ai/binding": "chat", "kvcache.gpustack.ai/engine": pod.engine}
    if pod.injected:
        annotations["kvcache.gpustack.ai/injected"] = json.dumps({"binding": "chat", "engine": pod.engine})
    containers = [{"name": "main", "image": "vllm/vllm-openai:v0.29.0", "command": list(pod.command),
                   "args": list(pod.args)}]
    if pod.sidecar_first:
        annotations["kvcache.gpustack.ai/container"] = "main"
        containers.insert(0, {"name": "proxy", "image": "envoyproxy/envoy", "args": ["--kv-cache-dtype", VALID]})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name or pod.name, "labels": {"kvcache.gpustack.ai/inject": "true"},
                         "annotations": annotations},
            "spec": {"containers": containers}}


def _refused(result) -> bool:
    """Whether kubectl's dry-run write was refused by the operator's rule (anything else fails the test)."""
    if result.returncode == 0:
        return False
    assert "denied request" in result.stderr and "Forbidden" in result.stderr, result.stderr
    return True


def test_what_preflight_predicts_of_the_operators_rule_is_what_the_server_then_does(real):
    binding = {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding", "metadata": {"name": "chat"},
               "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"blockSize": 64, "dtype": "bfloat16"}}}
    real.plane.set_setting("false")  # as stored before the upgrade: the rule refuses most of them today
    try:
        real.apply([binding, *map(_deployment, ROLES), *map(_pod, PODS)])
    finally:
        real.plane.set_setting("true")
    result = real.kvdtype("preflight", "-o", "json", user="reader")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    predictions = {p["name"]: p for p in report["predictions"]}
    read_flags = {f["object"]["name"] for f in report["findings"] if f["code"] in ("role-flag", "pod-flag")
                  and any(o["read"] for o in f["occurrences"])}

    said, done = {}, {}
    for role in ROLES:
        # The plugin: a copy its engine reads as the flag, whose role's next edit the rule refuses.
        said[role.name] = role.name in read_flags
        if predictions[role.name]["outcome"] == "own-copy":
            assert "refused at admission" in predictions[role.name]["prediction"], role
            assert said[role.name], role
        done[role.name] = _refused(real.kubectl("annotate", "md", role.name, "kvdtype.gpustack.ai/touched=1",
                                                "--dry-run=server"))
    for pod in PODS:
        said[pod.name] = predictions[pod.name]["outcome"] == "refused"
        again = json.dumps(_pod(pod, f"{pod.name}-next"))
        done[pod.name] = _refused(real.kubectl("create", "-f", "-", "--dry-run=server", input=again))
    expected = {case.name: case.refused for case in (*ROLES, *PODS)}
    assert said == expected, {k: said[k] for k in said if said[k] != expected[k]}
    assert done == expected, {k: done[k] for k in done if done[k] != expected[k]}
    # What is not refused starts with its own copy, fails at startup, or runs as the Binding says.
    assert predictions["prefix-029"]["outcome"] == predictions["sglang-underscores"]["outcome"] == "fails"
    assert predictions["prefix"]["outcome"] == "fails" and predictions["webhooks-copy"]["outcome"] == "starts"

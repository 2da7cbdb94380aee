"""The entry points and shell lines of issue 28's table, through kubectl, against the fake API server.

Each row is a replica whose argv the engine's real parser reads differently from a plain
``vllm serve`` / ``launch_server`` argv: the model as ``sglang serve``'s positional, vLLM's
api_server module with its own parser, a ``sh -c`` line with POSIX parameter expansion, and
repeated flags at releases between the ones recorded before every release was.
"""

from __future__ import annotations

import pytest

from _support import kvdtype, report, seed

NAMESPACE = "rows"
SHELL_LINE = "exec vllm serve Qwen/Qwen3-8B --kv-cache-dtype ${KV_DTYPE:-bfloat16}"


def _binding(name: str, dtype: str) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": f"rows-{name}", "dtype": dtype}}}


def _replica(name: str, binding: str, engine: str, version: str, command: list[str], env=None) -> list[dict]:
    """A ModelDeployment with one managed role and one replica Pod running ``command``."""
    container: dict = {"name": "main", "command": command}
    if env is not None:
        container["env"] = env
    return [
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
         "metadata": {"name": name, "namespace": NAMESPACE},
         "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": engine, "version": version},
                  "kvCache": {"poolRef": {"name": binding}}, "roles": [{"name": "server", "replicas": 1}]}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": f"{name}-server-r0-m0", "namespace": NAMESPACE,
                      "labels": {"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": name,
                                 "app.kubernetes.io/component": "server"}},
         "spec": {"containers": [container]}},
    ]


ROWS = {
    # name: (binding dtype, engine, version, command, env, verdict)
    "sglang-positional": ("bf16", "SGLang", "0.5.18",
                          ["sglang", "serve", "Qwen/Qwen3-8B", "--kv-cache-dtype=bf16"], None, "ok"),
    "api-server-dashdash": ("fp8", "vLLM", "0.29.0",
                            ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B",
                             "--kv-cache-dtype", "fp8", "--"], None, "ok"),
    "api-server-stray": ("fp8", "vLLM", "0.29.0",
                         ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B",
                          "--kv-cache-dtype", "fp8", "stray"], None, "ok"),
    "api-server-served-name": ("fp8", "vLLM", "0.29.0",
                               ["python3", "-m", "vllm.entrypoints.openai.api_server", "--served-model-name", "chat",
                                "--kv-cache-dtype", "fp8"], None, "ok"),
    "shell-default": ("bfloat16", "vLLM", "0.29.0", ["sh", "-c", SHELL_LINE], None, "unknown"),
    "shell-env": ("fp8", "vLLM", "0.29.0", ["sh", "-c", SHELL_LINE], [{"name": "KV_DTYPE", "value": "fp8"}], "ok"),
    "shell-env-from": ("bfloat16", "vLLM", "0.29.0", ["sh", "-c", SHELL_LINE],
                       [{"name": "KV_DTYPE", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}], "unknown"),
    "sglang-between": ("fp8_e4m3", "SGLang", "0.5.20",
                       ["python3", "-m", "sglang.launch_server", "--model-path", "M",
                        "--kv-cache-dtype=nvfp4_4over6", "--kv-cache-dtype=fp8_e4m3"], None, "rejected"),
    "vllm-between": ("auto", "vLLM", "0.25.0",
                     ["vllm", "serve", "M", "--kv-cache-dtype", "int8", "--kv-cache-dtype", "auto"], None, "rejected"),
}


@pytest.fixture
def rows(fake, kube_env):
    objects = [_binding(name, dtype) for name, (dtype, *_rest) in ROWS.items()]
    for name, (_dtype, engine, version, command, env, _verdict) in ROWS.items():
        objects += _replica(name, name, engine, version, command, env)
    seed(fake, objects)
    return kube_env


def test_the_issue_rows_are_read_as_the_engines_do(rows):
    found = report(kvdtype(rows, "verify", "-n", NAMESPACE, "-o", "json"))
    got = {item["name"].removesuffix("-server-r0-m0"): item["verdict"] for item in found["items"]}
    assert got == {name: row[-1] for name, row in ROWS.items()}
    messages = {f["object"]["name"].removesuffix("-server-r0-m0"): f["message"] for f in found["findings"]}
    assert not {"shell-default", "shell-env-from"} & set(messages)  # unknown: no error finding
    assert "invalid choice: 'nvfp4_4over6'" in messages["sglang-between"]
    assert "invalid choice: 'int8'" in messages["vllm-between"]


def test_a_line_that_depends_on_the_environment_is_a_look_item_never_rejected(fake, kube_env):
    """An injected Pod whose shell line passes the webhook's copy on with ``"$@"``: the upgrade's
    argv depends on MODEL, which the Pod does not set (its image or envFrom may)."""
    line = 'exec vllm serve ${MODEL:-Qwen/Qwen3-8B} "$@"'
    seed(fake, [_binding("chat", "bfloat16"),
                {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "shell-pod", "namespace": NAMESPACE,
                              "labels": {"kvcache.gpustack.ai/inject": "true"},
                              "annotations": {"kvcache.gpustack.ai/binding": "chat",
                                              "kvcache.gpustack.ai/engine": "vllm"}},
                 "spec": {"containers": [{"name": "main", "command": ["sh", "-c", line, "sh"]}]}}])
    result = kvdtype(kube_env, "preflight", "-n", NAMESPACE, "-o", "json")
    found = report(result)
    assert [(item["action"], item["object"]["name"]) for item in found["items"]] == [("look", "shell-pod")], found
    assert "depends on MODEL (default bfloat16)" in found["items"][0]["what"]
    assert [f["code"] for f in found["findings"]] == ["predicted-depends"]
    assert found["summary"]["verdict"] == "GO"

"""`&&`, `||`, `;`, `exit` and `if` in a container's shell line: evaluated where a POSIX shell's
outcome is known, "depends on ..." where it is not, never a guessed "rejected".

The corpus (tests/data/engine_corpus.json, lines run in dash) holds the reader to dash on such
lines; here the cases dash's stub engines cannot show (a stub always exits 0, a real engine
that refuses its argv does not), and the same through kubectl.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from _support import kvdtype, report
from kubectl_kvdtype._engines import argv as _argv
from kubectl_kvdtype._engines import parsers as _parsers
from test_verdicts import binding, deployment, replica

pytestmark = pytest.mark.version_sensitive  # the argv reader (test_tiers.py)

RUN = "vllm serve M"


@pytest.mark.parametrize("line,expected", [
    # An engine start that fails without exec: the shell goes on, `||` runs its right side.
    (f"{RUN} --kv-cache-dtype bf16 || exec {RUN} --kv-cache-dtype bfloat16", (_parsers.VALUE, "bfloat16")),
    (f"{RUN} --kv-cache-dtype bf16; exec {RUN} --kv-cache-dtype fp8", (_parsers.VALUE, "fp8")),
    (f"{RUN} --kv-cache-dtype bf16 && exec {RUN} --kv-cache-dtype fp8", (_parsers.FAILED, None)),
    # exec'd: the shell is gone, nothing after it runs.
    (f"exec {RUN} --kv-cache-dtype bf16 || exec {RUN} --kv-cache-dtype bfloat16", (_parsers.FAILED, None)),
    # A value it runs with: the server runs, what follows waits for it.
    (f"{RUN} --kv-cache-dtype fp8 || exec {RUN} --kv-cache-dtype bf16", (_parsers.VALUE, "fp8")),
    # Control flow the reader does not evaluate: unknown, even where every branch would be refused.
    (f"if [ -f /etc/x ]; then exec {RUN} --kv-cache-dtype bf16; fi", (_parsers.UNKNOWN, None)),
    (f"test -f /etc/x && exec {RUN} --kv-cache-dtype bf16", (_parsers.UNKNOWN, None)),
    (f"[ -n \"$X\" ] || X=bf16; exec {RUN} --kv-cache-dtype \"$X\"", (_parsers.UNKNOWN, None)),
    (f"while true; do {RUN} --kv-cache-dtype bf16; done", (_parsers.UNKNOWN, None)),
])
def test_a_shell_lines_flow(line: str, expected: tuple) -> None:
    reading = _argv.read_container("vLLM", "0.29.0", ["sh", "-c", line], [])
    assert (reading.state, reading.value) == expected, reading
    if reading.state == _parsers.UNKNOWN:
        assert reading.error.startswith("depends on "), reading


def test_verify_through_kubectl_calls_a_conditional_start_unknown_not_rejected(kube_env, tmp_path: Path) -> None:
    guarded = replica("flow", "guarded", 0, [])
    guarded["spec"]["containers"][0]["command"] = [
        "sh", "-c", "test -f /models/ready && exec vllm serve Qwen/Qwen3-8B --kv-cache-dtype bf16"]
    manifest = tmp_path / "flow.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
        binding("flow", "legacy", "bf16"), deployment("flow", "guarded", "legacy", "vLLM", "0.29.0"), guarded]}))
    found = report(kvdtype(kube_env, "verify", "-f", str(manifest), "-o", "json"))
    (item,) = found["items"]
    assert item["verdict"] == "unknown", item
    assert not [f for f in found["findings"] if f["code"] == "replica-dtype-rejected"]

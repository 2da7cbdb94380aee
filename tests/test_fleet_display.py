"""A fleet run shows every string from a kubeconfig or a cluster through the one display escape:
a context name, or a cluster's 403 message, carrying ESC, BEL, a line break, a carriage return or
U+202E cannot add, hide or reorder a line of the fleet's output, nor forge its verdict. Through the
real kubectl against two fake API servers (one clean, one answering 403 with a hostile message)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from _support import EXAMPLES, documents, seed
from conftest import kubectl_path
from fakekube import FakeKube

pytestmark = pytest.mark.e2e

#: The examples' one Binding every consumer accepts, with those consumers: preflight finds it GO.
CLEAN = {"chat", "qwen-chat", "qwen-chat-sglang", "qwen-chat-server-r0-m0", "shared-dram",
         "model-deployment-kv-cache-dtype-owned"}
#: A context name that, shown raw, erases the line above and writes a verdict of its own.
FORGING_NAME = "ok\x1b[1A\x1b[2K\rFleet verdict: GO: 9 of 9 context(s) checked; exit 0.\n\x07\u202eog"
#: A 403 message that, shown raw, ends the line and forges the fleet's verdict under it.
FORGING_MESSAGE = "no\r\nFleet verdict: GO: every context checked; exit 0.\x1b[8m\u202e\x07"
RAW = ("\x1b", "\x07", "\u202e", "\r")


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[dict]:
    clean, forbidden = FakeKube(token="t-clean"), FakeKube(token="t-forbidden")
    with clean, forbidden:
        seed(clean, [d for d in documents(EXAMPLES) if d["metadata"]["name"] in CLEAN])
        forbidden.fail(403, path="kvcachepoolbindings", times=None, message=FORGING_MESSAGE, reason="Forbidden")
        config: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [],
                        "current-context": "forbidden"}
        for name, fake in ((FORGING_NAME, clean), ("forbidden", forbidden)):
            one = json.loads(Path(fake.write_kubeconfig(tmp_path / f"{len(config['contexts'])}.json", context=name,
                                                        user=f"u{len(config['contexts'])}")).read_text())
            for section in ("clusters", "users", "contexts"):
                config[section] += one[section]
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps(config))
        env = {k: v for k, v in os.environ.items()
               if k not in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECTL_KUBERC")}
        env.update(KUBECONFIG=str(kubeconfig), HOME=str(tmp_path), NO_COLOR="1",
                   PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
        yield env


def run(env: dict, *args: str) -> subprocess.CompletedProcess:
    """Read as bytes, then decoded: text mode would turn a raw carriage return into a line break."""
    result = subprocess.run([kubectl_path(), "kvdtype", *args], env=env, capture_output=True, timeout=60)
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode(), result.stderr.decode())


def assert_nothing_raw(text: str) -> None:
    assert not [c for c in RAW if c in text], repr(text)


@pytest.mark.parametrize("output", ["table", "wide"])
@pytest.mark.parametrize("command", ["preflight", "check", "find-flags", "verify"])
def test_no_context_name_nor_403_message_reaches_the_terminal_raw(fleet, command, output):
    result = run(fleet, command, "-A", "--all-contexts", "-o", output)
    assert result.returncode == 3, result.stderr
    assert_nothing_raw(result.stdout)
    assert_nothing_raw(result.stderr)
    verdicts = [line for line in result.stdout.splitlines() if line.startswith("Fleet")]
    assert len(verdicts) == 1, result.stdout
    assert verdicts[0].startswith("Fleet verdict: INCOMPLETE:" if command == "preflight" else "Fleet: "), verdicts
    assert verdicts[0].endswith("; exit 3."), verdicts
    assert result.stdout.splitlines()[-1] == verdicts[0]
    # Each context's line starts with its name, escaped: one line each, whatever the name holds.
    lines = result.stdout.splitlines()
    assert any(line.startswith("ok\\x1b[1A\\x1b[2K\\rFleet verdict: GO") for line in lines), result.stdout
    assert any(line.startswith("forbidden: error: ") and "no\\r\\nFleet verdict: GO" in line for line in lines)


def test_json_keeps_the_exact_strings(fleet):
    result = run(fleet, "preflight", "-A", "--all-contexts", "-o", "json")
    assert result.returncode == 3
    document = json.loads(result.stdout)
    entries = {entry["context"]: entry for entry in document["contexts"]}
    assert set(entries) == {FORGING_NAME, "forbidden"}
    assert FORGING_MESSAGE in entries["forbidden"]["error"]["message"]
    assert document["summary"]["verdict"] == "INCOMPLETE"

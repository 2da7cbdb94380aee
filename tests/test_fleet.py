"""Fleet runs (``--contexts``, ``--all-contexts``) through the real kubectl, against several fake API
servers at once: one with findings, one clean, one unreachable, one answering 403, one that falls
silent mid-run (with ``--request-timeout 1s``). Each context's embedded report must be what
``kubectl kvdtype CMD --context C -o json`` says on that server alone."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from _support import EXAMPLES, WRITES, documents, seed
from conftest import kubectl_path
from fakekube import FakeKube

pytestmark = pytest.mark.e2e

#: The examples' one Binding every consumer of which accepts its dtype, with those consumers: a
#: cluster check, find-flags and preflight find nothing wrong in.
CLEAN = {"chat", "qwen-chat", "qwen-chat-sglang", "qwen-chat-server-r0-m0", "shared-dram",
         "model-deployment-kv-cache-dtype-owned"}
#: The fleet in the order a user names it (not sorted, to see the order kept).
NAMED = ("prod-findings", "prod-clean", "prod-down", "prod-forbidden", "prod-silent")


class Fleet:
    """Four fake API servers and a closed port, one kubeconfig naming them all (each context with its
    own cluster, user and token), and the environment to run kubectl in."""

    def __init__(self, tmp_path: Path) -> None:
        self.fakes = {name: FakeKube(token=f"token-of-{name}") for name in
                      ("prod-findings", "prod-clean", "prod-forbidden", "prod-silent")}
        self.tmp_path = tmp_path
        self.workdir = tmp_path / "work"
        self.workdir.mkdir()

    def __enter__(self) -> "Fleet":
        for fake in self.fakes.values():
            fake.start()
        seed(self.fakes["prod-findings"], documents(EXAMPLES))
        seed(self.fakes["prod-silent"], documents(EXAMPLES))
        seed(self.fakes["prod-clean"], [d for d in documents(EXAMPLES) if d["metadata"]["name"] in CLEAN])
        seed(self.fakes["prod-forbidden"], documents(EXAMPLES))
        self.fakes["prod-forbidden"].deny("list", "kvcachepoolbindings")
        self.silence()
        config: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [],
                        "current-context": "prod-clean"}
        for name, fake in self.fakes.items():
            one = json.loads(Path(fake.write_kubeconfig(self.tmp_path / f"{name}.json", context=name,
                                                        user=f"admin-{name}")).read_text())
            for section in ("clusters", "users", "contexts"):
                config[section] += one[section]
        config["clusters"].append({"name": "prod-down", "cluster": {"server": f"https://127.0.0.1:{_closed_port()}"}})
        config["contexts"].append({"name": "prod-down",
                                   "context": {"cluster": "prod-down", "user": "admin-prod-clean"}})
        self.kubeconfig = self.tmp_path / "kubeconfig"
        self.kubeconfig.write_text(json.dumps(config))
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECTL_KUBERC")}
        self.env.update(KUBECONFIG=str(self.kubeconfig), HOME=str(self.tmp_path), NO_COLOR="1",
                        KUBECACHEDIR=str(self.tmp_path / "kubecache"),
                        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
        return self

    def __exit__(self, *exc: object) -> None:
        for fake in self.fakes.values():
            fake.stop()

    def silence(self) -> None:
        """prod-silent answers discovery, then nothing: a cluster that stops answering mid-run."""
        fake = self.fakes["prod-silent"]
        fake.clear_faults()
        fake.fall_silent(after=2)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([kubectl_path(), "kvdtype", *args], env=self.env, cwd=self.workdir, text=True,
                              capture_output=True, timeout=60)

    def clear_logs(self) -> None:
        for fake in self.fakes.values():
            fake.clear_log()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    with Fleet(tmp_path) as running:
        yield running


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr
    return lines[0][len("error: "):]


def _entries(document: dict) -> dict[str, dict]:
    return {entry["context"]: entry for entry in document["contexts"]}


@pytest.mark.parametrize("command", ["check", "preflight"])
def test_each_context_is_its_own_single_run(fleet, command):
    kubeconfig_before = fleet.kubeconfig.read_bytes()
    result = fleet.run(command, "-A", "--contexts", ",".join(NAMED[:3]), "--contexts", ",".join(NAMED[3:]),
                       "--request-timeout", "1s", "-o", "json")
    assert result.returncode == 3, result.stderr  # unreachable, 403 and silent contexts: not checked
    document = json.loads(result.stdout)
    assert document["kind"] == "FleetReport" and document["command"] == command
    assert [entry["context"] for entry in document["contexts"]] == list(NAMED)  # as named, not as finished
    fleet_logs = {name: list(fake.requests) for name, fake in fleet.fakes.items()}
    entries = _entries(document)

    fleet.silence()  # the same point of silence for the single run
    for name in NAMED:
        fleet.clear_logs()
        alone = fleet.run(command, "-A", "--context", name, "--request-timeout", "1s", "-o", "json")
        entry = entries[name]
        assert entry["exitStatus"] == alone.returncode, (name, alone.stderr)
        if alone.returncode in (0, 1):
            assert entry["report"] == json.loads(alone.stdout), name
        elif name == "prod-silent":  # which of the parallel LISTs times out first may differ
            assert "did not answer within 1s" in entry["error"]["message"]
            assert "did not answer within 1s" in _error_line(alone.stderr)
        else:
            assert entry["error"] == {"message": _error_line(alone.stderr), "exitStatus": alone.returncode}
    assert entries["prod-findings"]["exitStatus"] == 1 and entries["prod-clean"]["exitStatus"] == 0
    assert document["summary"]["notChecked"] == ["prod-down", "prod-forbidden", "prod-silent"]
    assert document["summary"]["failing"] == ["prod-findings"]
    if command == "preflight":
        assert document["summary"]["verdict"] == "INCOMPLETE"

    for name, requests in fleet_logs.items():  # each server saw its own context, with its own credentials
        assert requests, name
        assert {r.headers.get("Authorization") for r in requests} == {f"Bearer token-of-{name}"}, name
        assert not [r for r in requests if r.method in WRITES], name
    assert list(fleet.workdir.iterdir()) == []  # nothing written
    assert fleet.kubeconfig.read_bytes() == kubeconfig_before


def test_exit_status_follows_the_fleet_rule(fleet):
    assert fleet.run("check", "-A", "--contexts", "prod-clean").returncode == 0
    assert fleet.run("check", "-A", "--contexts", "prod-clean,prod-findings").returncode == 1
    assert fleet.run("check", "-A", "--contexts", "prod-clean,prod-findings", "--exit-zero").returncode == 0
    assert fleet.run("check", "-A", "--contexts", "prod-clean,prod-forbidden", "--exit-zero").returncode == 3
    assert fleet.run("check", "-A", "--contexts", "prod-findings,prod-down").returncode == 3


def test_table_has_a_context_column_a_line_per_context_and_the_fleets(fleet):
    result = fleet.run("check", "-A", "--contexts", "prod-forbidden,prod-clean,prod-findings")
    assert result.returncode == 3, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["CONTEXT", "NAMESPACE", "NAME"]
    rows = [line.split()[0] for line in lines[1:lines.index("")]]
    assert rows == ["prod-clean"] + ["prod-findings"] * (len(rows) - 1)  # the order named, 403 has none
    forbidden = next(line for line in lines if line.startswith("prod-forbidden: "))
    assert forbidden.startswith("prod-forbidden: error: you may not list kvcachepoolbindings") and "403" in forbidden
    clean = next(line for line in lines if line.startswith("prod-clean: "))
    assert "0 errors" in clean
    assert lines[-1] == ("Fleet: 2 of 3 context(s) checked; failing findings in prod-findings; "
                         "not checked: prod-forbidden; exit 3.")
    assert "Traceback" not in result.stderr


def test_junit_has_a_suite_and_sarif_a_run_per_context(fleet):
    named = ["prod-findings", "prod-down", "prod-clean"]
    junit = fleet.run("check", "-A", "--contexts", ",".join(named), "-o", "junit")
    assert junit.returncode == 3, junit.stderr
    root = ET.fromstring(junit.stdout)
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [f"kubectl-kvdtype check --context {n}" for n in named]
    assert suites[0].findall("testcase/failure") and not suites[2].findall("testcase/failure")
    assert suites[1].find("testcase/error").get("message").startswith("cannot reach the cluster at")
    assert root.get("errors") == "1" and int(root.get("failures")) == int(suites[0].get("failures"))

    sarif = fleet.run("check", "-A", "--contexts", ",".join(named), "-o", "sarif")
    assert sarif.returncode == 3, sarif.stderr
    log = json.loads(sarif.stdout)
    runs = log["runs"]
    assert [run["automationDetails"]["id"] for run in runs] == [f"kvdtype/{n}/" for n in named]
    assert runs[0]["results"] and runs[2]["results"] == [] and runs[1]["results"] == []
    assert runs[1]["invocations"][0]["executionSuccessful"] is False
    alone = json.loads(fleet.run("check", "-A", "--context", "prod-findings", "-o", "sarif").stdout)["runs"][0]
    assert runs[0]["results"] == alone["results"]
    try:
        from _sarif_check import schema_errors
    except ImportError:  # pragma: no cover - jsonschema is on Python 3.11+ only
        return
    assert schema_errors(log) == []


def test_preflight_is_go_only_when_every_context_is(fleet):
    go = fleet.run("preflight", "-A", "--contexts", "prod-clean")
    assert go.returncode == 0 and go.stdout.splitlines()[-1].startswith("Fleet verdict: GO:"), go.stdout
    no_go = fleet.run("preflight", "-A", "--contexts", "prod-clean,prod-findings", "-o", "yaml")
    assert no_go.returncode == 1
    document = yaml.safe_load(no_go.stdout)
    assert document["summary"]["verdict"] == "NO-GO"
    todo = _entries(document)["prod-findings"]["report"]["items"]
    commands = [item["command"] for item in todo if item["command"]]
    own = ("kubectl kvdtype --context prod-findings ", "kubectl --context prod-findings ")
    assert commands and all(c.startswith(own) for c in commands), commands
    incomplete = fleet.run("preflight", "-A", "--contexts", "prod-clean,prod-down")
    assert incomplete.returncode == 3
    assert incomplete.stdout.splitlines()[-1].startswith("Fleet verdict: INCOMPLETE:")
    assert "GO:" not in incomplete.stdout.splitlines()[-1]


def test_all_contexts_are_sorted_and_globs_select(fleet):
    every = json.loads(fleet.run("find-flags", "-A", "--all-contexts", "--request-timeout", "1s",
                                 "-o", "json").stdout)
    assert [e["context"] for e in every["contexts"]] == sorted(NAMED)
    globbed = fleet.run("find-flags", "-A", "--contexts", "prod-c*,prod-f[i]*", "-o", "json")
    assert [e["context"] for e in json.loads(globbed.stdout)["contexts"]] == ["prod-clean", "prod-findings"]
    nothing = fleet.run("check", "--contexts", "staging-*")
    assert nothing.returncode == 2 and _error_line(nothing.stderr).startswith("--contexts staging-*: no context")


def test_verify_wait_has_one_deadline_for_the_whole_fleet(fleet):
    # One context at a time: the second starts after the first has waited out the fleet's deadline,
    # so it polls once where, alone, it would poll again and again for the whole --wait.
    fleet.fakes["prod-silent"].clear_faults()  # answering: the same examples as prod-findings
    result = fleet.run("verify", "-A", "--contexts", "prod-findings,prod-silent", "--parallel", "1",
                       "--wait", "1s", "-o", "json")
    assert result.returncode == 1, result.stderr
    entries = _entries(json.loads(result.stdout))
    first, second = (entries[name]["report"]["summary"]["wait"] for name in ("prod-findings", "prod-silent"))
    assert first["timedOut"] and first["polls"] > 1
    assert second["timedOut"] and second["polls"] == 1


def test_sigterm_stops_every_context_and_says_which_finished(fleet):
    silent = fleet.fakes["prod-silent"]
    silent.clear_log()
    process = subprocess.Popen([kubectl_path(), "kvdtype", "check", "-A", "--contexts", "prod-clean,prod-silent",
                                "--parallel", "1", "--request-timeout", "30s"], env=fleet.env, cwd=fleet.workdir,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(300):  # prod-silent is reached only once prod-clean has finished (--parallel 1)
            if len(silent.requests) > 2:
                break
            time.sleep(0.02)
        assert len(silent.requests) > 2
        process.send_signal(signal.SIGTERM)  # kubectl has exec'd the plugin: this is the plugin's pid
        out, err = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 143, err  # SIGTERM's own status
    assert out == ""
    message = _error_line(err)
    assert message.startswith("terminated (SIGTERM): 1 of 2 context(s) finished (prod-clean); "
                              "not finished: prod-silent"), message


def _tokens_from_exec_plugin(fleet: Fleet, name: str, script: str, interactive_mode: str) -> list[str]:
    """Every kubeconfig user's token comes from the exec plugin ``script`` (given the token as its
    argument); prod-silent answers. The three answering contexts, to run."""
    plugin = fleet.tmp_path / name
    plugin.write_text(script)
    plugin.chmod(0o755)
    config = json.loads(fleet.kubeconfig.read_text())
    for user in config["users"]:
        user["user"]["exec"] = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                                "args": [user["user"].pop("token")], "interactiveMode": interactive_mode}
    fleet.kubeconfig.write_text(json.dumps(config))
    fleet.fakes["prod-silent"].clear_faults()
    return ["prod-findings", "prod-clean", "prod-silent"]


#: An exec credential plugin printing the token it is given, already expired: the client runs it
#: again before every request, so each context refreshes its token again and again, side by side.
_EXPIRED_TOKEN_PLUGIN = """#!/bin/sh
echo "$1" >> "$0.runs"
echo '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
       "status": {"token": "'"$1"'", "expirationTimestamp": "2000-01-01T00:00:00Z"}}'
"""


def test_exec_plugins_and_their_refreshes_keep_each_context_its_own_token(fleet):
    named = _tokens_from_exec_plugin(fleet, "cred-plugin", _EXPIRED_TOKEN_PLUGIN, "Never")
    fleet.clear_logs()
    result = fleet.run("check", "-A", "--contexts", ",".join(named), "-o", "json")
    assert result.returncode == 1, result.stderr
    assert [e["exitStatus"] for e in json.loads(result.stdout)["contexts"]] == [1, 0, 1]
    runs = (fleet.tmp_path / "cred-plugin.runs").read_text().split()
    for name in named:
        requests = fleet.fakes[name].requests
        assert requests and {r.headers.get("Authorization") for r in requests} == {f"Bearer token-of-{name}"}
        assert runs.count(f"token-of-{name}") > 1  # refreshed, not only loaded


def test_sarif_past_githubs_20_runs_keeps_every_run_and_warns(fleet):
    config = json.loads(fleet.kubeconfig.read_text())
    names = [f"edge-{n:02d}" for n in range(21)]
    config["contexts"] += [{"name": n, "context": {"cluster": "prod-down", "user": "admin-prod-clean"}} for n in names]
    fleet.kubeconfig.write_text(json.dumps(config))
    result = fleet.run("check", "--contexts", "edge-*", "-o", "sarif")
    assert result.returncode == 3
    runs = json.loads(result.stdout)["runs"]
    assert [run["automationDetails"]["id"] for run in runs] == [f"kvdtype/{n}/" for n in names]
    assert "GitHub code scanning rejects a file of more than 20" in result.stderr


#: An exec plugin that logs when it starts and ends, taking a moment in between (a login).
_SLOW_LOGIN_PLUGIN = """#!/bin/sh
echo "start $1" >> "$0.log"
sleep 0.3
echo "end $1" >> "$0.log"
echo '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "'"$1"'"}}'
"""


def test_exec_plugins_given_the_terminal_run_one_at_a_time(fleet):
    import pty

    named = _tokens_from_exec_plugin(fleet, "login-plugin", _SLOW_LOGIN_PLUGIN, "IfAvailable")
    controller, terminal = pty.openpty()  # stdout a terminal: the client hands it to the plugin
    try:
        process = subprocess.run([kubectl_path(), "kvdtype", "check", "-A", "--contexts", ",".join(named)],
                                 env=fleet.env, cwd=fleet.workdir, stdout=terminal, stderr=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL, text=True, timeout=60)
    finally:
        os.close(terminal)
        os.close(controller)
    assert process.returncode == 1, process.stderr
    log = (fleet.tmp_path / "login-plugin.log").read_text().split("\n")[:-1]
    assert sorted(line.split()[1] for line in log if line.startswith("start")) == sorted(
        f"token-of-{n}" for n in named)
    assert [line.split()[0] for line in log] == ["start", "end"] * len(named)  # never two at once
    for name in named:
        assert {r.headers.get("Authorization") for r in fleet.fakes[name].requests} == {f"Bearer token-of-{name}"}

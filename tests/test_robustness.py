"""Never hang, never crash, never lie with an exit code (issue 11).

A hanging server here is ``fakekube.HangingServer``: a socket that accepts and never answers.
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from _support import (
    EXAMPLES,
    PLUGIN,
    ROOT,
    SETTING,
    SYSTEM,
    assert_one_clean_line,
    direct,
    exec_credential,
    exec_plugin,
    in_process,
    kvdtype,
)
from fakekube import HangingServer
from kubectl_kvdtype._kits import progress as _progress

# Imported with the module: urllib3 opens a socket at import (its IPv6 probe), which the fast tier forbids.

SUBCOMMANDS = [["check"], ["find-flags"], ["verify"], ["escape", "status"]]
#: What a loaded machine may add to a short configured deadline before a test calls it broken; still
#: well below what a broken deadline waits (the 30 s request timeout, or a server silent for an hour).
SLACK = 15
NULL_METADATA = "apiVersion: worker.gpustack.ai/v1\nkind: KVCachePoolBinding\nmetadata: null\n"


@pytest.fixture
def hanging(kube_env, tmp_path):
    """(server, env): kube_env pointed at a server that accepts connections and never answers."""
    with HangingServer() as server:
        env = dict(kube_env, KUBECONFIG=str(server.write_kubeconfig(tmp_path / "hanging")))
        yield server, env


# --- 1. An internal error is exit 3 in one line; the debug variable shows the traceback --------

class _ClosedOutput(io.StringIO):
    """A stdout that fails in a way the plugin does not expect (not an OSError)."""

    def write(self, text: str) -> int:
        raise RuntimeError("the stream broke in an unexpected way")


@pytest.mark.parametrize("debug", [False, True])
def test_an_internal_error_is_exit_3_in_one_line(debug):
    from kubectl_kvdtype._cli.main import run
    from kubectl_kvdtype._kits.env import Environment

    err = io.StringIO()
    environ = {"KUBECTL_KVDTYPE_DEBUG": "1"} if debug else {}
    status = run(["check", "-f", str(EXAMPLES)], Environment(stdout=_ClosedOutput(), stderr=err, environ=environ))
    assert status == 3
    last = err.getvalue().strip().splitlines()[-1]
    assert last == ("error: internal error: RuntimeError: the stream broke in an unexpected way; "
                    "please report it with KUBECTL_KVDTYPE_DEBUG=1 output")
    assert ("Traceback (most recent call last)" in err.getvalue()) is debug
    if not debug:
        assert_one_clean_line(err.getvalue())


def test_a_closed_stdout_is_exit_3_not_findings(kube_env):
    result = subprocess.run(f"'{PLUGIN}' check -f '{EXAMPLES}' >&-", shell=True, env=kube_env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stderr
    assert_one_clean_line(result.stderr)
    assert "error: cannot write the result to standard output: it is closed" in result.stderr


# --- 2. Tracebacks: null metadata, a full disk, an ASCII terminal ------------------------------

@pytest.mark.parametrize("args", SUBCOMMANDS)
def test_null_metadata_from_a_file_and_stdin(kube_env, tmp_path, args):
    manifest = tmp_path / "null.yaml"
    manifest.write_text(NULL_METADATA)
    from_file = direct(kube_env, *args, "-f", str(manifest))
    from_stdin = direct(kube_env, *args, "-f", "-", input=NULL_METADATA)
    for result in (from_file, from_stdin):
        assert "Traceback" not in result.stderr
        assert result.returncode in (0, 1, 3), result.stderr
        if result.returncode == 3:  # escape status: no Setting in this dump
            assert_one_clean_line(result.stderr)


def test_a_full_disk_is_exit_3_and_a_closed_pipe_stays_quiet(cluster):
    with open("/dev/full", "w") as full:
        result = subprocess.run([PLUGIN, "check", "-A"], env=cluster, stdout=full, stderr=subprocess.PIPE,
                                text=True, timeout=60)
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "cannot write the result to standard output: No space left on device" in result.stderr
    piped = subprocess.run(f"'{PLUGIN}' check -A -o json | head -c 10", shell=True, env=cluster,
                           capture_output=True, text=True, timeout=60)
    assert piped.stdout == '{\n  "kind"'
    assert piped.stderr == ""


def _non_ascii_dump(tmp_path: Path) -> Path:
    dump = tmp_path / "accents.yaml"
    dump.write_text(
        "apiVersion: worker.gpustack.ai/v1\nkind: KVCachePoolBinding\n"
        "metadata: {name: cafe-pool, namespace: ml}\n"
        "spec: {poolRef: {name: p}, domain: {name: d, dtype: fp8_\u00e9\u00e9}}\n", encoding="utf-8")
    return dump


@pytest.mark.parametrize("output", ["table", "wide", "json", "yaml"])
def test_an_ascii_terminal_never_fails_on_non_ascii_data(kube_env, tmp_path, output):
    env = dict(kube_env, PYTHONIOENCODING="ascii")
    result = subprocess.run([PLUGIN, "check", "-f", str(_non_ascii_dump(tmp_path)), "-o", output], env=env,
                            capture_output=True, timeout=60)
    assert result.returncode in (0, 1), result.stderr
    assert b"Traceback" not in result.stderr
    assert max(result.stdout) < 128  # nothing the stream could not carry
    if output == "json":
        assert json.loads(result.stdout)["items"][0]["dtype"] == "fp8_\u00e9\u00e9"
    elif output == "yaml":
        assert b'"fp8_\\xE9\\xE9"' in result.stdout
    else:
        assert b"fp8_\\xe9\\xe9" in result.stdout


# --- 3. It never hangs: request timeouts and --wait deadlines ----------------------------------

@pytest.mark.parametrize("args", SUBCOMMANDS + [["escape", "off", "--yes"]])
def test_a_silent_server_ends_every_subcommand_naming_the_request(hanging, args):
    server, env = hanging
    started = time.monotonic()
    result = kvdtype(env, *args, "--request-timeout", "1s", timeout=60)
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert re.search(r"error: (discover|list|get|create) \S+.*: the cluster at http://127\.0\.0\.1:\d+ did not "
                     r"answer within 1s \(--request-timeout", result.stderr), result.stderr
    assert server.accepted >= 1
    assert time.monotonic() - started < 1 + SLACK
    assert result.stdout == ""


def test_request_timeout_0_waits_where_1s_gives_up(hanging):
    """Started together against a server that never answers: once the 1 s run has ended with its
    error, the run with --request-timeout 0 is still waiting, as kubectl would."""
    server, env = hanging
    from conftest import kubectl_path

    def start(*args):
        return subprocess.Popen([kubectl_path(), "kvdtype", *args], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    unlimited = start("check", "--request-timeout", "0")
    limited = start("check", "--request-timeout", "1s")
    try:
        _, stderr = limited.communicate(timeout=60)
        assert limited.returncode == 3
        assert "did not answer within 1s (--request-timeout; 0 waits without limit)" in stderr
        assert server.accepted >= 2  # both asked
        assert unlimited.poll() is None  # --request-timeout 0: still waiting
    finally:
        for process in (unlimited, limited):
            if process.poll() is None:
                process.kill()
            process.communicate()


def test_the_request_timeout_bounds_retries_too(fake, kube_env):
    # Retry-After 0: the plugin's own retry comes at once (urllib3 no longer retries behind its back).
    fake.fail(503, path=r"/kvcachepoolbindings$", times=None, delay=1.5, retry_after=0)
    result = kvdtype(kube_env, "check", "-A", "--request-timeout", "2500ms")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "list kvcachepoolbindings.worker.gpustack.ai in all namespaces" in result.stderr
    assert "did not answer within 2.5s" in result.stderr
    # Four attempts (1.5 s each) would take 6 s: the timeout cut them after two.
    assert len([r for r in fake.requests if r.path.endswith("/kvcachepoolbindings")]) == 2


def test_verify_wait_holds_its_deadline_against_a_silent_server(hanging):
    server, env = hanging
    result = kvdtype(env, "verify", "-A", "--wait=4s", timeout=60)
    ended = time.monotonic()
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert "did not answer before the --wait deadline" in result.stderr
    assert server.first_accept is not None and ended - server.first_accept < 4 + SLACK


def test_verify_wait_holds_its_deadline_when_the_server_falls_silent(cluster, fake):
    """The first poll is answered (Pods still failing), then every request hangs for an hour."""
    from conftest import kubectl_path

    process = subprocess.Popen([kubectl_path(), "kvdtype", "verify", "-A", "--wait=6s", "-o", "json"], env=cluster,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    # Two LISTs of Pods per poll: a third means the first poll was answered whole.
    while len([r for r in fake.requests if r.path.endswith("/pods")]) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    fake.delay(3600, times=None)
    silent_since = time.monotonic()
    stdout, stderr = process.communicate(timeout=60)
    assert time.monotonic() - silent_since < 6 + SLACK
    assert process.returncode == 1, stderr  # the last answered poll's verdict: Pods still fail
    assert json.loads(stdout)["summary"]["wait"]["timedOut"] is True
    assert "gave up waiting after 6s" in stderr
    assert "Traceback" not in stderr
    fake.clear_faults()


SWITCHES = [("off", "true"), ("on", "false")]  # (action, the Setting's value before it)
#: The request a silent server leaves unanswered first: the Setting's group discovered, or the Setting read.
SETTING_REQUEST = (r'(discover /apis/gpustack\.ai|get settings\.gpustack\.ai in namespace "gpustack-system"): '
                   r"the cluster at \S+ did not answer before the --wait deadline")


def _set_setting(fake, value: str) -> None:
    fake.update("settings", SYSTEM, SETTING, {"spec": {"value": value}, "status": {"value": value}})


def _error_after_the_preview(stderr: str) -> str:
    """The error line of a switch that failed after its preview (what it would do, said before it
    asks): the preview, then one clean error line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 2 and lines[0].startswith(f"Setting {SYSTEM}/{SETTING}: "), stderr
    assert_one_clean_line(lines[1])
    return lines[1]


@pytest.mark.parametrize("action, _before", SWITCHES)
def test_escape_wait_holds_its_deadline_against_a_silent_server(hanging, action, _before):
    """Silent from the first request: the Setting read is cut at the --wait deadline, not at the
    30 s request timeout."""
    server, env = hanging
    started = time.monotonic()
    result = kvdtype(env, "escape", action, "--yes", "--wait=4s", timeout=60)
    ended = time.monotonic()
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert re.search(SETTING_REQUEST, result.stderr), result.stderr
    assert result.stdout == ""
    assert server.first_accept is not None
    print(f"escape {action} --wait=4s, silent server: {ended - server.first_accept:.1f}s from the first request, "
          f"{ended - started:.1f}s in all")
    assert ended - server.first_accept < 4 + SLACK


@pytest.mark.parametrize("action, before", SWITCHES)
def test_escape_wait_holds_its_deadline_when_the_server_falls_silent(cluster, fake, action, before):
    """The Setting read and the patch are answered; then the server answers nothing, so the wait's
    polls hang. The write is done, and the one line says so and names the poll that got no answer."""
    _set_setting(fake, before)
    fake.setting_lag = 3600.0  # status.value never follows: only the deadline can end the wait
    fake.clear_log()
    fake.fall_silent(after=1, method="PATCH", path=rf"/settings/{SETTING}$")
    result = kvdtype(cluster, "escape", action, "--yes", "--wait=4s", timeout=60)
    ended = time.monotonic()
    assert fake.silent
    first = fake.requests[0].time
    (patch,) = [r for r in fake.requests if r.method == "PATCH"]
    print(f"escape {action} --wait=4s, silent after the patch: {ended - first:.1f}s from the first request, "
          f"{ended - patch.time:.1f}s from the patch")
    assert ended - first < 4 + SLACK
    assert result.returncode == 3
    error = _error_after_the_preview(result.stderr)
    value = "false" if action == "off" else "true"
    assert error.startswith(f'error: the write is done (spec.value "{value}")'), error
    assert re.search(r'get settings\.gpustack\.ai in namespace "gpustack-system": the cluster at \S+ did not answer '
                     r"before the --wait deadline", error), error
    assert result.stdout == ""
    fake.clear_faults()
    assert fake.get("settings", SYSTEM, SETTING)["spec"]["value"] == value


def test_escape_wait_holds_its_deadline_when_the_patch_gets_no_answer(cluster, fake):
    """The reads are answered, the patch never is: the write may or may not be done, and the line says so."""
    fake.delay(3600, method="PATCH", times=None)
    fake.clear_log()
    result = kvdtype(cluster, "escape", "off", "--yes", "--wait=4s", timeout=60)
    ended = time.monotonic()
    print(f"escape off --wait=4s, the patch unanswered: {ended - fake.requests[0].time:.1f}s from the first request")
    assert ended - fake.requests[0].time < 4 + SLACK
    assert result.returncode == 3
    error = _error_after_the_preview(result.stderr)
    assert re.search(r'^error: patch settings\.gpustack\.ai in namespace "gpustack-system": the cluster at \S+ did '
                     r"not answer before the --wait deadline: the write may or may not have been applied", error), error
    assert "kubectl kvdtype escape status" in error
    fake.clear_faults()


def test_escape_wait_refuses_to_write_when_the_reads_took_the_whole_wait(cluster, fake):
    """A write sent after the deadline could not be waited for: nothing is written, and it says so."""
    fake.delay(1.5, method="GET", path=rf"/settings/{SETTING}$", times=None)
    fake.delay(1.0, path=r"/modeldeployments$", times=None)
    result = kvdtype(cluster, "escape", "off", "--yes", "--wait=2s", timeout=60)
    assert result.returncode == 3
    error = _error_after_the_preview(result.stderr)
    assert "the --wait time (2s) ran out before the write was sent" in error and "nothing was written" in error
    assert not [r for r in fake.requests if r.method == "PATCH"]
    assert fake.get("settings", SYSTEM, SETTING)["spec"]["value"] == "true"


def test_the_wait_clock_does_not_count_the_question():
    from kubectl_kvdtype._changes.setting import WaitClock

    clock = WaitClock(10)
    before = clock.remaining()
    with clock.paused():
        time.sleep(0.3)
    assert clock.remaining() > before - 0.1  # the 0.3 s at the question were given back
    assert WaitClock(None).remaining() == float("inf") and WaitClock(None).deadline is None


def test_rebind_never_hangs_waiting_for_a_deletion(fake, kube_env, tmp_path):
    """--strategy replace deletes, then polls until the name is free; the server falls silent right
    after the delete: the poll is cut by the request timeout, and the one error line names it and
    says how to resume."""
    from _support import seed
    from test_escape_rebind import REBIND, team_a
    from test_escape_rebind import kvdtype as rebind

    seed(fake, team_a())
    fake.finalizer("modeldeployments", after=3600)  # the deletion takes as long as the server lets it
    fake.fall_silent(after=1, method="DELETE", path=r"/modeldeployments/qwen-legacy$")
    result = rebind(kube_env, tmp_path, *REBIND, "--apply", "--yes", "--request-timeout", "2s", timeout=120)
    ended = time.monotonic()
    assert fake.silent
    (delete,) = [r for r in fake.requests if r.method == "DELETE"]
    print(f"escape rebind --apply --request-timeout 2s, silent after the delete: {ended - delete.time:.1f}s from it")
    assert ended - delete.time < 2 + SLACK
    assert result.returncode == 3
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and result.stderr.splitlines()[-1] == errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert re.search(r'failed: get modeldeployments\.worker\.gpustack\.ai in namespace "team-a": the cluster at \S+ '
                     r"did not answer within 2s \(--request-timeout", errors[0]), errors[0]
    assert "run the same command again (with --apply) to resume" in errors[0]


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie nobody has reaped yet counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


#: Prints a token that has already expired, so the client runs the plugin again before the first
#: request; that second run never returns.
_EXPIRED_THEN_SILENT = f"""\
if [ -e "$0.ran" ]; then echo $$ > "$0.pids"; sleep 3600 & echo $! >> "$0.pids"; wait; fi
touch "$0.ran"
echo '{exec_credential({"token": "fake-token", "expirationTimestamp": "2000-01-01T00:00:00Z"})}'
"""


@pytest.mark.parametrize("when, body", [
    ("at load", 'echo $$ > "$0.pids"; sleep 3600 & echo $! >> "$0.pids"; wait\n'),
    ("at refresh", _EXPIRED_THEN_SILENT),
])
def test_an_exec_credential_plugin_that_never_returns_is_cut_by_the_request_timeout(cluster, fake, tmp_path,
                                                                                      when, body):
    """The plugin (a shell script that starts a child and waits for it) is killed with its child."""
    plugin = exec_plugin(tmp_path / "cred-plugin", body)
    env = dict(cluster, KUBECONFIG=str(fake.write_kubeconfig(tmp_path / "exec-kc", exec_command=[str(plugin)])))
    started = time.monotonic()
    result = kvdtype(env, "check", "-A", "--request-timeout", "2s", timeout=60)
    took = time.monotonic() - started
    print(f"an exec plugin that never returns ({when}), --request-timeout 2s: {took:.1f}s")
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert result.stderr == (f"error: the exec credential plugin {plugin} of the kubeconfig user did not return within "
                             "2s (--request-timeout; 0 waits without limit)\n")
    assert took < 2 + SLACK
    pids = [int(line) for line in (tmp_path / "cred-plugin.pids").read_text().split()]
    assert len(pids) == 2 and not any(_alive(pid) for pid in pids)  # the plugin and its child are gone
    assert not [r for r in fake.requests if r.path != "/version"]  # no request went out without credentials


def test_an_exec_credential_plugin_that_prints_without_end_is_cut_at_the_bound(cluster, fake, tmp_path):
    """With no timeout at all, a plugin that never stops printing (on stdout, or on stderr) is read
    up to the bound, then killed with its children: the run ends in one sentence, not out of memory."""
    from kubectl_kvdtype._sources.credentials import MAX_PLUGIN_OUTPUT

    for stream in ("", " >&2"):
        body = f'echo $$ > "$0.pids"; yes{stream} & echo $! >> "$0.pids"; wait\n'
        plugin = exec_plugin(tmp_path / "cred-plugin", body)
        env = dict(cluster, KUBECONFIG=str(fake.write_kubeconfig(tmp_path / "exec-kc", exec_command=[str(plugin)])))
        result = kvdtype(env, "check", "-A", "--request-timeout", "0", timeout=60)
        assert result.returncode == 3
        assert result.stderr == (f"error: the exec credential plugin {plugin} of the kubeconfig user printed more "
                                 f"than {MAX_PLUGIN_OUTPUT >> 20} MiB, the most read of an exec plugin (an "
                                 "ExecCredential is a few kB)\n")
        pids = [int(line) for line in (tmp_path / "cred-plugin.pids").read_text().split()]
        assert len(pids) == 2 and not any(_alive(pid) for pid in pids)
    assert not [r for r in fake.requests if r.path != "/version"]


def test_an_exec_credential_plugin_is_read_whole_below_the_bound(cluster, fake, tmp_path):
    """An answer near the bound (whitespace between its keys), written in many pieces with CRLF
    line ends and with stderr beside it, reads as the client reads it: the server takes its token."""
    from kubectl_kvdtype._sources.credentials import MAX_PLUGIN_OUTPUT

    answer = exec_credential({"token": "fake-token"})
    plugin = exec_plugin(tmp_path / "cred-plugin", f"""\
printf '%s\\r\\n' '{answer[0]}'
i=0; while [ $i -lt 100 ]; do echo "progress $i" >&2; i=$((i+1)); done
head -c {MAX_PLUGIN_OUTPUT - 5_000} /dev/zero | tr '\\0' ' '
printf '%s\\r\\n' '{answer[1:]}'
""")
    env = dict(cluster, KUBECONFIG=str(fake.write_kubeconfig(tmp_path / "exec-kc", exec_command=[str(plugin)])))
    result = kvdtype(env, "check", "-A", "--request-timeout", "5s", timeout=60)
    assert result.returncode in (0, 1), result.stderr
    sent = {r.headers.get("Authorization") for r in fake.requests if r.path != "/version"}
    assert sent == {"Bearer fake-token"}  # the fake's token, which only the plugin gives


def test_a_failing_exec_credential_plugin_is_one_line_naming_it(cluster, fake, tmp_path):
    plugin = exec_plugin(tmp_path / "cred-plugin", "echo 'no login session: run sso login' >&2; exit 1\n")
    env = dict(cluster, KUBECONFIG=str(fake.write_kubeconfig(tmp_path / "exec-kc", exec_command=[str(plugin)])))
    result = kvdtype(env, "check", "-A", timeout=60)
    assert result.returncode == 3
    assert result.stderr == (f"error: the exec credential plugin {plugin} of the kubeconfig user failed: exec: "
                             "process returned 1. no login session: run sso login\n")
    exec_plugin(plugin, f"echo '{exec_credential({'expirationTimestamp': '2000-01-01T00:00:00Z'})}'\n")
    result = kvdtype(env, "check", "-A", timeout=60)
    assert result.returncode == 3
    assert result.stderr == (f"error: the exec credential plugin {plugin} of the kubeconfig user failed: its "
                             "ExecCredential status holds neither a token nor a client certificate and key\n")
    missing = dict(env, KUBECONFIG=str(fake.write_kubeconfig(tmp_path / "missing-kc",
                                                                exec_command=[str(tmp_path / "absent")])))
    result = kvdtype(missing, "check", "-A", timeout=60)
    assert result.returncode == 3
    assert_one_clean_line(result.stderr)
    assert f"cannot run the exec credential plugin {tmp_path / 'absent'} of the kubeconfig user: " in result.stderr


def test_an_exec_plugin_on_a_terminal_may_take_its_time(cluster, fake, tmp_path):
    """On a terminal the client hands the plugin the terminal: a person may be logging in, so the
    request timeout does not cut it."""
    plugin = exec_plugin(tmp_path / "cred-plugin", f"sleep 3\necho '{exec_credential({'token': 'fake-token'})}'\n")
    env = dict(cluster, KUBECONFIG=str(fake.write_kubeconfig(tmp_path / "exec-kc", exec_command=[str(plugin)])))
    master, slave = pty.openpty()
    process = subprocess.Popen([PLUGIN, "check", "-A", "--request-timeout", "1s"], env=env, stdin=slave,
                               stdout=slave, stderr=slave)
    os.close(slave)
    seen = b""
    seen += _read_to_end(master)
    process.wait(timeout=60)
    os.close(master)
    assert process.returncode == 1, seen  # findings: the run completed with the plugin's token
    assert b"did not return" not in seen and b"NAMESPACE" in seen


# --- 4. Usage mistakes are usage errors ---------------------------------------------------------

def test_wait_with_an_equals_sign_is_always_a_duration(kube_env):
    result = kvdtype(kube_env, "verify", "-A", "--wait=10min")
    assert result.returncode == 2
    assert_one_clean_line(result.stderr)
    assert "invalid duration '10min' (accepted forms: 10m, 90s, 1m30s" in result.stderr
    assert "(see 'kubectl kvdtype verify --help')" in result.stderr


@pytest.mark.parametrize("args, helped", [
    (["verify", "-f", str(EXAMPLES), "--wait=1m"], "kubectl kvdtype verify"),
    (["check", "-f", str(EXAMPLES), "--ignore", "no-such-code"], "kubectl kvdtype check"),
    (["check", "--bogus"], "kubectl kvdtype check"),
    (["escape", "on", "-f", str(EXAMPLES)], "kubectl kvdtype escape on"),
    (["escape", "rebind", "b", "--dtype", "fp8", "--suffix", "x"], "kubectl kvdtype escape rebind"),
    (["escape", "rebind", "b", "--dtype", "fp8", "--suffix", "x", "--strategy", "replace"],
     "kubectl kvdtype escape rebind"),
])
def test_usage_errors_point_to_the_subcommands_help(args, helped):
    status, out, err = in_process(args)
    assert status == 2, err
    assert out == ""
    assert_one_clean_line(err)
    assert err.rstrip().endswith(f"(see '{helped} --help')"), err


def test_suffix_needs_side_by_side():
    status, _, err = in_process(["escape", "rebind", "b", "--dtype", "fp8", "--suffix", "x"])
    assert status == 2
    assert "--suffix names the copies that --strategy side-by-side creates" in err


@pytest.mark.parametrize("args", [["check", "--version"], ["verify", "--version"], ["--version"]])
def test_version_after_a_subcommand(kube_env, args):
    from kubectl_kvdtype import __version__

    result = kvdtype(kube_env, *args)
    assert result.returncode == 0
    assert result.stdout.strip() == f"kubectl-kvdtype v{__version__}"


# --- 5. Slow work shows progress on a terminal, and only there ----------------------------------

def test_a_wait_says_what_it_waits_for_between_its_requests():
    _progress._notes.clear()
    with _progress.during("waiting until ModelDeployment team-a/x is gone"):
        _progress.note("get modeldeployments.worker.gpustack.ai in namespace \"team-a\"")
        assert _progress.current().startswith("get modeldeployments")  # a request under way says itself
        _progress.done()
        assert _progress.current() == "waiting until ModelDeployment team-a/x is gone"  # between polls
    assert _progress.current() == ""


def _read_to_end(master: int) -> bytes:
    """Everything left on a pseudo-terminal's master side, until the child closes the terminal."""
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            return seen
        if not chunk:
            return seen
        seen += chunk


def _read_terminal(master: int, process: subprocess.Popen, until: bytes = b"", within: float = 60) -> bytes:
    """What the terminal shows: up to and including ``until`` when given (the child still running),
    else until the child closes it or exits. Bounded by ``within`` seconds, which only a hung child
    reaches."""
    seen = b""
    end = time.monotonic() + within
    while time.monotonic() < end and not (until and until in seen):
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    return seen


def _run_on_pty(args, env) -> tuple[int, bytes, str]:
    """Run the plugin with stderr on a pseudo-terminal: (status, what the terminal got, stdout).
    stdout goes to a file, so a large report cannot fill a pipe while the terminal is read."""
    master, slave = pty.openpty()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen([PLUGIN, *args], env=env, stdout=out, stderr=slave)
        os.close(slave)
        seen = _read_terminal(master, process)
        process.wait(timeout=60)
        os.close(master)
        out.seek(0)
        return process.returncode, seen, out.read().decode()


def _progress_delay(env: dict, seconds: str) -> dict:
    """``env`` with the progress line's test-only delay set (docs/development.md)."""
    return dict(env, **{_progress.DELAY_VARIABLE: seconds})


def test_slow_work_shows_progress_on_a_terminal(cluster, fake):
    fake.delay(1.5, path=r"/pods$", times=None)
    status, terminal, stdout = _run_on_pty(["check", "-A", "-o", "json"], _progress_delay(cluster, "0"))
    assert status == 1
    assert b"listing pods in all namespaces" in terminal, terminal
    assert b"\r\x1b[K" in terminal
    assert terminal.endswith(b"\r\x1b[K")  # erased before the result
    assert json.loads(stdout)["kind"] == "CheckReport"


def test_quick_work_and_pipes_show_no_progress(cluster, fake):
    status, terminal, _ = _run_on_pty(["check", "-f", str(EXAMPLES)], _progress_delay(cluster, "60"))
    assert status == 1
    assert terminal == b""  # done within the delay: nothing, not even an erasure
    fake.delay(1.5, path=r"/pods$", times=None)
    piped = direct(_progress_delay(cluster, "0"), "check", "-A", "-o", "json")
    assert piped.returncode == 1
    assert piped.stderr == ""  # stderr is a pipe: no progress


def test_progress_never_draws_over_a_question_nor_under_a_line(cluster, fake):
    """escape off on a terminal, after a slow read: the progress line is erased before the preview
    (which starts a line of its own), and nothing is drawn over the question while it waits."""
    fake.delay(1.5, path=r"/modeldeployments$")
    master, slave = pty.openpty()
    process = subprocess.Popen([PLUGIN, "escape", "off"], env=_progress_delay(cluster, "0"), stdin=slave,
                               stdout=slave, stderr=slave)
    os.close(slave)
    seen = b""
    while b"[y/N]: " not in seen:
        assert select.select([master], [], [], 30)[0], seen
        seen += os.read(master, 4096)
    asked = len(seen)
    time.sleep(1.0)  # the display would have redrawn four times by now
    while select.select([master], [], [], 0.2)[0]:
        seen += os.read(master, 4096)
    unanswered = seen[asked:]
    os.write(master, b"n\n")
    process.wait(timeout=30)
    seen += _read_to_end(master)
    os.close(master)
    assert process.returncode == 3
    assert b"listing modeldeployments.worker.gpustack.ai in all namespaces (" in seen  # it was drawn ...
    assert b"\r\x1b[KSetting gpustack-system/" in seen  # ... and erased before the preview
    assert unanswered == b"", unanswered  # nothing drawn over the question
    assert seen.endswith(b"[y/N]: n\r\nerror: not confirmed; nothing was changed\r\n"), seen[-200:]


#: A ``kubectl get -o yaml`` style managedFields entry: what makes real dumps large and slow to
#: parse, and what the judgement never reads.
_MANAGED_FIELDS = "".join(f"""
    - apiVersion: worker.gpustack.ai/v1
      fieldsType: FieldsV1
      fieldsV1:
        f:metadata:
          f:labels: {{.: {{}}, f:team: {{}}, f:field-{j}: {{}}}}
        f:spec:
          .: {{}}
          f:engine: {{.: {{}}, f:name: {{}}, f:version: {{}}}}
          f:kvCache: {{.: {{}}, f:connector: {{}}, f:poolRef: {{}}}}
      manager: kubectl-client-side-apply-{j}
      operation: Update
      time: "2026-01-0{j + 1}T00:00:00Z\"""" for j in range(4))


def _large_dump(path: Path, deployments: int) -> Path:
    """A ``kind: List`` of ``deployments`` ModelDeployments, each on its own Binding (every 10th
    spelling bf16, which vLLM 0.29.0 rejects), with managedFields; ~4.7 kB per deployment."""
    parts = ["apiVersion: v1\nkind: List\nitems:\n"]
    for i in range(deployments):
        ns, dtype = f"team-{i % 50:02d}", "bf16" if i % 10 == 0 else "fp8_e4m3"
        parts.append(f"""- apiVersion: worker.gpustack.ai/v1
  kind: KVCachePoolBinding
  metadata:
    name: kvb-{i:05d}
    namespace: {ns}
    managedFields:{_MANAGED_FIELDS}
  spec:
    poolRef: {{name: shared-dram}}
    quota: {{ceiling: 600Gi}}
    domain: {{name: {ns}-kvb-{i:05d}, blockSize: 64, dtype: {dtype}}}
- apiVersion: worker.gpustack.ai/v1
  kind: ModelDeployment
  metadata:
    name: md-{i:05d}
    namespace: {ns}
    managedFields:{_MANAGED_FIELDS}
  spec:
    model: {{name: Qwen/Qwen3-8B}}
    engine: {{name: vLLM, version: 0.29.0}}
    kvCache: {{poolRef: {{name: kvb-{i:05d}}}, connector: Mooncake}}
    roles:
    - {{name: server, kind: Server, replicas: 2, instanceType: gpustack-nvidia-a10g-linux-amd64}}
""")
    path.write_text("".join(parts))
    return path


@pytest.mark.e2e  # the plugin as a subprocess, on a pseudo-terminal
def test_reading_a_dump_shows_progress_on_a_terminal_only(tmp_path):
    """While ``-f -`` reads (standard input held open until the terminal shows the line), the
    terminal says what is being read and the report on stdout is untouched; with stderr on a pipe,
    stderr stays empty. The test-only delay 0 makes what is shown independent of this machine's
    speed: the run is as long as the test holds the input open, not as long as parsing takes."""
    dump = _large_dump(tmp_path / "dump.yaml", 40)
    env = dict(os.environ, NO_COLOR="1", **{_progress.DELAY_VARIABLE: "0"})
    master, slave = pty.openpty()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen([PLUGIN, "check", "-f", "-", "-o", "json"], env=env, stdin=subprocess.PIPE,
                                   stdout=out, stderr=slave)
        os.close(slave)
        assert process.stdin is not None
        seen = _read_terminal(master, process, until=b"reading standard input (")
        process.stdin.write(dump.read_bytes())
        process.stdin.close()
        seen += _read_terminal(master, process)
        process.wait(timeout=60)
        os.close(master)
        out.seek(0)
        stdout = out.read().decode()
    assert process.returncode == 1  # every 10th Binding is rejected
    assert b"reading standard input (" in seen, seen[:500]
    assert seen.endswith(b"\r\x1b[K")  # erased before the result
    document = json.loads(stdout)  # stdout is the report and nothing else
    assert document["kind"] == "CheckReport" and len(document["items"]) == 40
    assert "\x1b" not in stdout and "reading" not in stdout
    piped = direct(env, "check", "-f", str(dump), "-o", "json")
    assert piped.returncode == 1
    assert piped.stderr == ""  # stderr is a pipe: no progress, whatever the delay
    assert json.loads(piped.stdout) == document


# --- 6. Exit codes are written once -------------------------------------------------------------

def _readme_exit_table() -> dict[int, str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+?) \|$", section, flags=re.M)
    return {int(code): meaning.replace("`", "") for code, meaning in rows}


def test_readme_exit_code_table_matches_exit_status():
    from kubectl_kvdtype._kits.status import ExitStatus

    assert _readme_exit_table() == {int(status): status.meaning for status in ExitStatus}
    assert 130 in _readme_exit_table()


def test_help_lists_every_exit_status(kube_env):
    from kubectl_kvdtype._kits.status import ExitStatus

    text = " ".join(kvdtype(kube_env, "--help").stdout.split())
    for status in ExitStatus:
        assert f"{int(status)} {status.meaning}" in text
    assert "KUBECTL_KVDTYPE_DEBUG=1" in text

"""Deadlines that hold, and never GO on a half answer (issue 29).

Every case runs through the real kubectl against the fake API server, with short configured
values (``--request-timeout 1s``, a body dribbled at 0.1 s per byte), never the 30 s default.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from xml.etree import ElementTree

import pytest
import yaml

from _support import EXAMPLES, PLUGIN, ROOT, assert_one_clean_line, documents, in_process, kvdtype, report, seed

BINDINGS = r"/kvcachepoolbindings$"
BINDINGS_LIST = "list kvcachepoolbindings.worker.gpustack.ai in all namespaces"
#: On the code before issue 29 these runs go on for minutes (or for ever): a case that fails
#: there ends at this subprocess timeout instead of hanging the suite.
GIVE_UP = 30


def _one_line_exit_3(env: dict, *args: str) -> str:
    """``kubectl kvdtype ARGS`` (1 s per request) that must end in exit 3 and one line: its stderr."""
    result = kvdtype(env, *args, "--request-timeout", "1s", timeout=GIVE_UP)
    assert result.returncode == 3, result.stderr
    assert_one_clean_line(result.stderr)
    return result.stderr


def _binding_lists(fake) -> int:
    """How many LISTs of Bindings the fake was sent."""
    return len([r for r in fake.requests if r.path.endswith("/kvcachepoolbindings")])


# --- The request timeout bounds the whole request --------------------------------------------

def test_a_body_dribbled_a_byte_at_a_time_is_cut_at_the_request_timeout(cluster, fake):
    fake.dribble(0.1, path=BINDINGS, times=None)
    stderr = _one_line_exit_3(cluster, "check", "-A")
    assert f"{BINDINGS_LIST}: the cluster at {fake.url} did not answer within 1s" in stderr


def test_a_retry_after_past_the_request_timeout_is_not_waited_for(cluster, fake):
    fake.fail(429, path=BINDINGS, times=None, retry_after=100000)
    stderr = _one_line_exit_3(cluster, "check", "-A")
    assert f"{BINDINGS_LIST}: the cluster at {fake.url} did not answer within 1s" in stderr
    # urllib3 did not retry on its own: the plugin saw the one 429 and gave up at once.
    assert _binding_lists(fake) == 1


def test_a_short_retry_after_is_still_retried_within_the_timeout(cluster, fake):
    fake.fail(429, path=BINDINGS, times=1, retry_after=0)
    result = kvdtype(cluster, "check", "-A", "--request-timeout", "2s", "-o", "json", timeout=GIVE_UP)
    assert result.returncode in (0, 1), result.stderr
    assert json.loads(result.stdout)["kind"] == "CheckReport"


# --- Paging ends ------------------------------------------------------------------------------

def test_a_continue_token_answered_twice_ends_the_list(cluster, fake):
    fake.loop_continue(resource="kvcachepoolbindings")
    stderr = _one_line_exit_3(cluster, "check", "-A")
    assert (f"error: {BINDINGS_LIST}: the API server answered a continue token it had answered before, "
            "so the list would never end") in stderr
    assert _binding_lists(fake) == 2


def test_a_list_that_never_ends_stops_at_the_page_budget(cluster, fake):
    from kubectl_kvdtype._sources.cluster import MAX_PAGES, PAGE_SIZE  # imports the client: this is e2e anyway

    assert MAX_PAGES * PAGE_SIZE >= 100_000  # a 100,000-Pod cluster fits
    fake.loop_continue(fresh=True, resource="kvcachepoolbindings")
    env = dict(cluster, KUBECTL_KVDTYPE_MAX_PAGES="40")
    stderr = _one_line_exit_3(env, "check", "-A")
    assert (f"error: {BINDINGS_LIST}: still not complete after 40 pages, the most one LIST may take "
            "(set KUBECTL_KVDTYPE_MAX_PAGES for more)") in stderr
    assert _binding_lists(fake) == 40


# --- A LIST answer that is not a List of the kind asked for -----------------------------------

@pytest.mark.parametrize("body, said", [({}, "no kind, no list of items"), (None, "no kind, no list of items"),
                                        ([], "no kind, no list of items"),
                                        ({"kind": "PodList", "apiVersion": "v1", "items": []}, "kind 'PodList'"),
                                        ({"kind": "KVCachePoolBindingList", "items": "none"},
                                         "kind 'KVCachePoolBindingList', no list of items")])
def test_a_list_answer_that_is_not_a_list_of_the_kind_is_exit_3(cluster, fake, body, said):
    fake.answer(body, path=BINDINGS, times=None)
    stderr = _one_line_exit_3(cluster, "check", "-A")
    assert (f"error: {BINDINGS_LIST}: the API server's answer is not a KVCachePoolBindingList ({said})"
            in stderr), stderr


# --- A result that could not be written -------------------------------------------------------

def _through_kubectl(env: dict, *args: str, stdin=None, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    """``kubectl kvdtype ARGS`` with the streams given (the plugin inherits them from kubectl)."""
    from conftest import kubectl_path

    return subprocess.run([kubectl_path(), "kvdtype", *args], env=env, stdin=stdin, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=GIVE_UP)


def test_a_broken_pipe_is_exit_3_and_quiet(cluster):
    """``preflight -A | true`` on a NO-GO cluster: the reader is gone before the result is written."""
    assert kvdtype(cluster, "preflight", "-A").returncode == 1  # NO-GO, so exit 0 would be a lie
    reader, writer = os.pipe()
    os.close(reader)
    try:
        result = _through_kubectl(cluster, "preflight", "-A", stdout=writer)
    finally:
        os.close(writer)
    assert result.returncode == 3, result.stderr
    assert result.stderr == ""


def test_a_closed_stdout_is_exit_3_in_one_line(cluster):
    """The plugin run directly (``kubectl-kvdtype preflight -A >&-``): kubectl, a Go program, starts
    its plugin with /dev/null in place of a closed stdout, so through kubectl this case never arises."""
    result = subprocess.run(f"'{PLUGIN}' preflight -A >&-", shell=True, env=cluster, capture_output=True,
                            text=True, timeout=GIVE_UP)
    assert result.returncode == 3, result.stderr
    assert_one_clean_line(result.stderr)
    assert result.stderr.strip() == "error: cannot write the result to standard output: it is closed"


def test_a_full_disk_is_exit_3_in_one_line(cluster):
    with open("/dev/full", "w") as full:
        result = _through_kubectl(cluster, "preflight", "-A", stdout=full)
    assert result.returncode == 3
    assert result.stderr.strip() == "error: cannot write the result to standard output: No space left on device"


# --- Bounded input ----------------------------------------------------------------------------

@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_f_refuses_a_character_device(kube_env, device):
    result = kvdtype(kube_env, "check", "-f", device, timeout=GIVE_UP)
    assert result.returncode == 3, result.stderr
    assert_one_clean_line(result.stderr)
    assert result.stderr.strip() == (f"error: {device} is a character device, not a manifest file: -f reads files, "
                                     "directories and pipes")


def test_f_refuses_a_character_device_on_standard_input(kube_env):
    with open("/dev/zero") as zero:
        result = _through_kubectl(kube_env, "check", "-f", "-", stdin=zero)
    assert result.returncode == 3, result.stderr
    assert "error: standard input is a character device, not a manifest file" in result.stderr


def test_f_stops_reading_an_endless_stream_at_its_limit(kube_env):
    """``cat /dev/urandom | kubectl kvdtype check -f -``, with the limit set to 1 MiB."""
    env = dict(kube_env, KUBECTL_KVDTYPE_MAX_FILE_MB="1")
    endless = subprocess.Popen(["cat", "/dev/zero"], stdout=subprocess.PIPE)
    try:
        result = _through_kubectl(env, "check", "-f", "-", stdin=endless.stdout)
    finally:
        endless.kill()
        endless.wait()
        endless.stdout.close()
    assert result.returncode == 3, result.stderr
    assert_one_clean_line(result.stderr)
    assert result.stderr.strip() == ("error: standard input holds more than 1 MiB, the most -f reads of one input "
                                     "(set KUBECTL_KVDTYPE_MAX_FILE_MB to read bigger ones)")


def test_f_reads_a_file_up_to_its_limit_and_the_override_raises_it(kube_env, tmp_path):
    from kubectl_kvdtype._sources.manifests import MAX_FILE_MB

    assert MAX_FILE_MB >= 8 * 60  # far above a 10,000-deployment JSON dump (about 60 MB)
    big = tmp_path / "big.yaml"
    big.write_text((EXAMPLES / "team-a.yaml").read_text() + "\n" + "#" * (2 << 20) + "\n")
    refused = kvdtype(dict(kube_env, KUBECTL_KVDTYPE_MAX_FILE_MB="1"), "check", "-f", str(big))
    assert refused.returncode == 3
    assert f"error: {big} holds more than 1 MiB" in refused.stderr
    read = kvdtype(dict(kube_env, KUBECTL_KVDTYPE_MAX_FILE_MB="3"), "check", "-f", str(big), "-o", "json")
    assert read.returncode in (0, 1), read.stderr
    assert json.loads(read.stdout)["items"]


# --- A kind that cannot be read ---------------------------------------------------------------

def _only_a_flagged_deployment_template(fake) -> None:
    """The cluster's one flagged object is a Deployment's Pod template (team-c's vllm-batch)."""
    seed(fake, [obj for obj in documents(EXAMPLES / "team-c.yaml")
                if obj["kind"] == "Deployment" and obj["metadata"]["name"] == "vllm-batch"])


def test_preflight_without_deployments_is_incomplete_never_a_go(fake, kube_env):
    _only_a_flagged_deployment_template(fake)
    assert kvdtype(kube_env, "preflight", "-A").returncode == 1  # readable: NO-GO on its pod-flag
    fake.deny("list", "deployments", group="apps")
    text = kvdtype(kube_env, "preflight", "-A", timeout=GIVE_UP)
    assert text.returncode == 4, text.stderr  # issue 40: never GO on a half answer (it was GO, exit 0)
    assert text.stdout.splitlines()[-1].startswith("INCOMPLETE: deployments.apps could not be read")
    assert "in what was read, no error finding; 1 warning(s)" in text.stdout
    assert "GO: " not in text.stdout
    assert "kind-not-examined" not in text.stderr  # the stderr line stays a plain warning
    document = report(kvdtype(kube_env, "preflight", "-A", "-o", "json"))
    assert document["summary"]["verdict"] == "INCOMPLETE" and document["summary"]["incomplete"] == ["deployments.apps"]
    (finding,) = document["findings"]
    assert (finding["code"], finding["severity"], finding["resource"]) == (
        "kind-not-examined", "warning", "deployments.apps")
    assert "you may not list deployments.apps in all namespaces (403 Forbidden)" in finding["message"]
    strict = kvdtype(kube_env, "preflight", "-A", "--fail-on", "warning")
    assert strict.returncode == 4 and strict.stdout.splitlines()[-1].startswith("INCOMPLETE: ")


@pytest.mark.parametrize("output", ["yaml", "junit", "sarif"])
def test_a_kind_not_examined_is_a_warning_finding_in_every_format(fake, kube_env, output):
    _only_a_flagged_deployment_template(fake)
    fake.deny("list", "deployments", group="apps")
    result = kvdtype(kube_env, "find-flags", "-A", "-o", output, timeout=GIVE_UP)
    assert result.returncode == 4, result.stderr  # incomplete, whatever -o (issue 40)
    if output == "yaml":
        (finding,) = yaml.safe_load(result.stdout)["findings"]
        assert finding["code"] == "kind-not-examined"
    elif output == "junit":
        case = ElementTree.fromstring(result.stdout).find(".//testcase[@name='*']")
        assert case is not None and case.get("classname") == "Deployment"
        assert "warning kind-not-examined: deployments.apps not examined" in case.findtext("system-out")
    else:
        (found,) = json.loads(result.stdout)["runs"][0]["results"]
        assert (found["ruleId"], found["level"]) == ("kind-not-examined", "warning")


@pytest.mark.parametrize("args", [["check"], ["verify"], ["find-flags"], ["preflight"]])
def test_a_kind_a_verdict_needs_that_cannot_be_read_is_exit_3(cluster, fake, args):
    fake.deny("list", "modeldeployments")
    stderr = _one_line_exit_3(cluster, *args, "-A")
    assert "you may not list modeldeployments.worker.gpustack.ai in all namespaces (403 Forbidden)" in stderr


@pytest.mark.parametrize("args", [["check"], ["verify"], ["preflight"]])
def test_a_404_on_a_served_group_is_exit_3(cluster, fake, args):
    fake.fail(404, method="GET", path=r"/modeldeployments$", times=None)
    stderr = _one_line_exit_3(cluster, *args, "-A")
    assert "modeldeployments.worker.gpustack.ai not found" in stderr


def test_verify_on_an_empty_answer_for_bindings_is_exit_3_not_go(cluster, fake):
    """``200 {}`` for the Binding LIST read as no Bindings would tell every consumer its Binding is missing."""
    fake.answer({}, path=BINDINGS, times=None)
    stderr = _one_line_exit_3(cluster, "verify", "-A")
    assert f"error: {BINDINGS_LIST}: the API server's answer is not a KVCachePoolBindingList" in stderr


# --- An argv too long to read -----------------------------------------------------------------

def _documented_argv_limit() -> int:
    """The longest argv read, as docs/reference.md's Limits table states it (the tests hold the code to it)."""
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    found = re.search(r"^\| one argv read [^|]*\| (\d+) entries \|", text, flags=re.M)
    assert found, "docs/reference.md's Limits table has no argv row"
    return int(found.group(1))


def _long_role(entries: int) -> list[dict]:
    """A ModelDeployment whose role passes the flag and ``entries`` more extraArgs, and its Binding."""
    return [{"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
             "metadata": {"name": "b", "namespace": "team-x"},
             "spec": {"poolRef": {"name": "p"}, "domain": {"name": "d", "dtype": "fp8"}}},
            {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
             "metadata": {"name": "tenant-long", "namespace": "team-x"},
             "spec": {"engine": {"name": "vLLM", "version": "0.29.0"}, "kvCache": {"poolRef": {"name": "b"}},
                      "roles": [{"name": "server",
                                 "extraArgs": ["--kv-cache-dtype", "fp8"] + [f"--x{i}" for i in range(entries)]}]}}]


def test_an_argv_longer_than_the_limit_is_unknown_with_a_warning_not_parsed(fake, kube_env):
    """One tenant's role with 32,000 extraArgs (argparse took a minute over it) cannot stall preflight."""
    seed(fake, _long_role(32_000))
    result = kvdtype(kube_env, "preflight", "-n", "team-x", "-o", "json", timeout=GIVE_UP)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert [f["code"] for f in document["findings"]] == ["argv-too-long"]
    (finding,) = document["findings"]
    assert finding["severity"] == "warning" and finding["role"] == "server"
    assert f"an argv of 32002 entries, more than the {_documented_argv_limit()} this tool reads" in finding["message"]
    (prediction,) = document["predictions"]
    assert prediction["outcome"] == "unsure"


def test_an_argv_at_the_limit_is_still_read(fake, kube_env):
    seed(fake, _long_role(_documented_argv_limit() - 2))
    result = kvdtype(kube_env, "find-flags", "-n", "team-x", "-o", "json", timeout=GIVE_UP)
    assert result.returncode == 1, result.stderr
    assert [f["code"] for f in json.loads(result.stdout)["findings"]] == ["role-flag"]


# --- The flag's documented maximum --------------------------------------------------------------

@pytest.mark.version_sensitive
@pytest.mark.parametrize("value, status", [("169h", 2), ("604801", 2), ("1h30m", 1), ("168h", 1), ("0", 1)])
def test_request_timeout_has_a_maximum(value, status):
    """Any duration kubectl takes, up to the week past which a timer overflows (``1h30m`` is kubectl's too)."""
    code, out, err = in_process(["check", "-f", str(EXAMPLES), "--request-timeout", value])
    assert code == status, err
    if status == 2:
        assert err.strip() == (f"error: argument --request-timeout: invalid duration {value!r}: longer than the "
                               "maximum, 168h (see 'kubectl kvdtype check --help')")


@pytest.mark.e2e  # the plugin as a subprocess
def test_verify_says_when_a_replica_argv_is_too_long_to_read(tmp_path):
    """verify judges such a replica unknown, unparsed, and says so with the same warning finding."""
    replica = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "tenant-long-server-r0-m0", "namespace": "team-x",
                            "labels": {"app.kubernetes.io/name": "model-deployment",
                                       "app.kubernetes.io/instance": "tenant-long",
                                       "app.kubernetes.io/component": "server"}},
               "spec": {"containers": [{"name": "main", "command": ["vllm", "serve", "M", "--kv-cache-dtype", "fp8",
                                                                    *[f"--x{i}" for i in range(400)]]}]}}
    dump = tmp_path / "long.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*_long_role(0), replica]}))
    result = subprocess.run([PLUGIN, "verify", "-f", str(dump), "-o", "json"], capture_output=True, text=True,
                            timeout=GIVE_UP)
    document = json.loads(result.stdout)
    (item,) = [i for i in document["items"] if i["name"] == "tenant-long-server-r0-m0"]
    assert item["verdict"] == "unknown"
    (finding,) = [f for f in document["findings"] if f["code"] == "argv-too-long"]
    assert finding["severity"] == "warning" and finding["container"] == "main"
    assert f"an argv of 405 entries, more than the {_documented_argv_limit()} this tool reads" in finding["message"]


def test_one_watchdog_thread_cuts_each_request_at_its_end_and_never_a_forgotten_one():
    """Every watched request files its end with one thread (``transport._Watchdog``), which cuts
    each due one in the order of their ends and never one forgotten (finished) before its end."""
    import threading
    import time

    from kubectl_kvdtype._sources.transport import _Watchdog

    watchdog, cut, done = _Watchdog(), [], threading.Event()
    before = _watchdogs()
    now = time.monotonic()
    watchdog.watch(now + 0.3, lambda: (cut.append("later"), done.set()))
    watchdog.watch(now + 0.02, lambda: cut.append("sooner"))
    forgotten = watchdog.watch(now + 0.25, lambda: cut.append("forgotten"))
    watchdog.forget(forgotten)
    assert _watchdogs() == before + 1  # one thread, started by the first request
    assert done.wait(5)
    assert cut == ["sooner", "later"]  # the forgotten one was due between them


def _watchdogs() -> int:
    import threading

    return sum(thread.name == "kvdtype-watchdog" for thread in threading.enumerate())

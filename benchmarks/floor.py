"""The least a Python kubectl plugin does: LIST what it judges over TLS, decode it, print one line.

benchmarks/bench.py runs it as the kubectl plugin `kubectl floor PATH...` (a generated
`kubectl-floor` beside a compiled copy of this file, the shape of a console script), through the
same interpreter as the timed kubectl-kvdtype, as a yardstick for the plugin's fixed cost: no
argparse, no PyYAML, no kubernetes client, no judging; the modules below, most of which ssl
imports anyway, the plugin's own HTTP/1.1 (``kubectl_kvdtype._sources.wire``), as its direct
transport speaks it, and its own reader of the block YAML kubectl writes
(``kubectl_kvdtype._kits.blockyaml``).

It reads the kubeconfig named by $KUBECONFIG as bench.py writes it (the current context's
server, certificate-authority-data and bearer token, nothing else), opens one TLS connection per
API path, each in its own thread, sends `GET PATH` (unpaged, asking for gzip as the plugin and
kubectl do), decodes the answer's objects as they arrive as the plugin's direct transport does
(``Wire`` decodes a gzip-coded body as it comes, ``_kits.jsonsplit`` takes each object from it),
and prints the number of items per path as one JSON line ("404" for a missing object). Every
read is bounded as the plugin bounds it (wire.py: a line, the headers; jsonsplit: each object)
and each socket wait (TIMEOUT). Exit 1 with a message on stderr if any GET fails (a status other than 200 or 404).

`kubectl floor --all-contexts PATH...` reads the same paths from every context of the kubeconfig
at once, all in the one process (a line per context): the least a fleet run of a Python plugin
takes (benchmarks/real.py's fleet floor).
"""

import base64
import json
import os
import socket
import ssl
import sys
import threading

from kubectl_kvdtype._kits.blockyaml import loads_block_mapping
from kubectl_kvdtype._kits.jsonsplit import ItemSplitter
from kubectl_kvdtype._sources.wire import Wire

#: Seconds the connection and each read on it may wait.
TIMEOUT = 60.0


#: A cluster as a GET needs it: host, port, a TLS context trusting its CA, the bearer token.
Cluster = tuple[str, int, ssl.SSLContext, str]


def kubeconfig() -> dict:
    """The kubeconfig named by $KUBECONFIG, as bench.py writes it."""
    with open(os.environ["KUBECONFIG"], encoding="utf-8") as handle:
        config = loads_block_mapping(handle.read())
    if config is None:
        raise ValueError("the kubeconfig is not the block YAML kubectl writes")
    return config


def cluster(config: dict, name: str) -> Cluster:
    """The cluster of the context ``name``."""
    context = next(c["context"] for c in config["contexts"] if c["name"] == name)
    server = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    scheme, _, address = server["server"].partition("://")
    if scheme != "https":
        raise ValueError(f"only https servers are read, not {server['server']!r}")
    host, _, port = address.rstrip("/").rpartition(":")
    authority = base64.b64decode(server["certificate-authority-data"]).decode("ascii")
    return host, int(port), ssl.create_default_context(cadata=authority), user["token"]


def get(target: Cluster, path: str) -> object:
    """One GET (a LIST, or an object that may be missing) over its own TLS connection, spoken by the
    plugin's own HTTP/1.1 (``_sources.wire``, every line and the header count bounded): the number
    of objects its answer lists, decoded as they arrive by the plugin's splitter
    (``_kits.jsonsplit``, each object bounded), or "404" (an answer the plugin reads too)."""
    host, port, tls, token = target
    with socket.create_connection((host, port), timeout=TIMEOUT) as raw:
        wire = Wire(tls.wrap_socket(raw, server_hostname=host), f"{host}:{port}")
        try:
            wire.send("GET", path, [("Authorization", f"Bearer {token}"), ("Accept", "application/json"),
                                    ("Accept-Encoding", "gzip"), ("Connection", "close")], None)
            head = wire.head("GET")
            if head.status == 404:
                return "404"
            if head.status != 200:
                raise ValueError(f"the server answered {head.status}")
            splitter, count = ItemSplitter(), 0
            for piece in wire.body(head, None):
                count += len(splitter.feed(piece))
            return count + len(splitter.end())
        finally:
            wire.close()


def main(argv: list[str]) -> int:
    config = kubeconfig()
    every = argv[:1] == ["--all-contexts"]
    paths = argv[1:] if every else argv
    names = [c["name"] for c in config["contexts"]] if every else [config["current-context"]]
    targets = {name: cluster(config, name) for name in names}
    found: dict[tuple[str, str], object] = {}

    def one(name: str, path: str) -> None:
        try:
            found[name, path] = get(targets[name], path)
        except Exception as error:  # any failure is reported as one line, never a thread's traceback
            found[name, path] = error

    threads = [threading.Thread(target=one, args=(name, path)) for name in names for path in paths]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = {key: error for key, error in found.items() if isinstance(error, Exception)}
    for (name, path), error in failed.items():
        print(f"kubectl-floor: GET {path} ({name}): {error}", file=sys.stderr)
    for name in names:
        print(json.dumps({path: found[name, path] for path in paths if (name, path) not in failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

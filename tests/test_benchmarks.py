"""The benchmark scripts still run and still measure what they say.

They are run by hand, not by CI, so a change to the plugin can break one without a test failing:
phases.py printed nothing for several commits, once main() began to end the process itself before
the profiler's report. Each runs here at a tiny size; the figures themselves are the scripts' to
print, never asserted.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from types import ModuleType

import pytest

from _support import ROOT

BENCHMARKS = ROOT / "benchmarks"

pytestmark = pytest.mark.e2e


def _script(name: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(BENCHMARKS / name), *args], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _phases() -> ModuleType:
    """benchmarks/phases.py as a module: its table of phases."""
    return _module("phases.py")


def test_phases_gives_every_phase_of_every_judging_subcommand_a_time():
    out = _script("phases.py", "--size", "3", "--repeat", "1")
    rows = {cells[0]: cells[1:] for line in out.splitlines() if line.startswith("| ")
            for cells in [[c.strip() for c in line.strip("|").split("|")]]}
    assert rows.pop("phase") == ["`check -A`", "`find-flags -A`", "`verify -A`"]
    assert set(rows) == set(_phases().PHASES)
    times = {phase: [float(cell) for cell in cells] for phase, cells in rows.items()}
    for column in range(3):  # the whole run, and inside it each phase the run cannot skip
        assert times["process"][column] > 0
        for phase in ("imports", "reads", "judging", "rendering"):
            assert 0 < times[phase][column] <= times["process"][column], (phase, column, out)


def test_judging_judges_two_replicas_a_deployment():
    out = _script("judging.py", "--deployments", "20", "--repeat", "1")
    judged = re.search(r"^(\d+) replica Pods judged; verdicts (\{.*\})$", out, re.M)
    assert judged, out
    verdicts = ast.literal_eval(judged.group(2))
    assert int(judged.group(1)) == sum(verdicts.values()) == 40
    assert re.search(r"CPU: first run \(cold caches\) [\d.]+ s; median of the next 1: [\d.]+ s", out), out


def test_judging_times_each_judging_subcommand_on_objects_read_once():
    out = _script("judging.py", "--every-command", "--deployments", "20", "--repeat", "1")
    lines = re.findall(r"^(\S+) -A: ([\d,]+) items, ([\d,]+) findings; CPU judging \(the objects read already\): "
                       r"median of 1 ([\d.]+) s \(the first run, reading the file too, ([\d.]+) s\)$", out, re.M)
    assert [line[0] for line in lines] == ["check", "find-flags", "verify", "preflight"], out
    items = {line[0]: int(line[1].replace(",", "")) for line in lines}
    assert (items["check"], items["verify"]) == (20, 40)  # a Binding each, two replicas each
    assert all(float(line[4]) > 0 <= float(line[3]) for line in lines), out  # the first run reads the file


def _module(name: str) -> ModuleType:
    """benchmarks/NAME as a module (nothing started: its servers start in main())."""
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), BENCHMARKS / name)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_real_benchmarks_cluster_is_the_shape_its_docs_give():
    """benchmarks/real.py's cluster (docs/benchmarks.md): N deployments over N/5 Bindings in 50
    namespaces, each on a Binding of its own namespace, a tenth of the roles passing their own flag,
    two replicas a deployment owned by it, an injected Pod per ten owned by its namespace's
    StatefulSet. Run whole only by hand (it starts kube-apiserver and toxiproxy)."""
    real = _module("real.py")
    n = 1000
    bindings = {(b["metadata"]["namespace"], b["metadata"]["name"]) for b in map(real.binding, range(n // 5))}
    deployments = [real.deployment(i) for i in range(n)]
    assert len(bindings) == n // 5 and len({ns for ns, _ in bindings}) == real.NAMESPACES == 50
    for md in deployments:
        assert (md["metadata"]["namespace"], md["spec"]["kvCache"]["poolRef"]["name"]) in bindings
    own = [md for md in deployments
           if any(arg.startswith("--kv-cache-dtype") for arg in md["spec"]["roles"][0]["extraArgs"])]
    assert len(own) == n // 10
    stored = dict(deployments[7], metadata=dict(deployments[7]["metadata"], uid="the-uid"))
    pods = real.replicas(stored)
    assert len(pods) == 2 and {p["metadata"]["ownerReferences"][0]["uid"] for p in pods} == {"the-uid"}
    owners = {f"team-{k:02d}": f"sts-uid-{k}" for k in range(real.NAMESPACES)}
    injected = [real.injected(i, owners) for i in range(0, n, 10)]
    assert len(injected) == n // 10
    for pod in injected:
        assert pod["metadata"]["ownerReferences"][0]["uid"] == owners[pod["metadata"]["namespace"]]
        assert pod["metadata"]["labels"]["kvcache.gpustack.ai/inject"] == "true"

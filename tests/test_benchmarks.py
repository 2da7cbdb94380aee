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
    spec = importlib.util.spec_from_file_location("phases", BENCHMARKS / "phases.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
